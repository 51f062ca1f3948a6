#ifndef SP_EXPORT_PROTOCOL_H
#define SP_EXPORT_PROTOCOL_H

/* The OTLP transports, named as OTEL_EXPORTER_OTLP_PROTOCOL names them:
 * "grpc" (unary Export calls over HTTP/2), "http/protobuf" and "http/json"
 * (POST {base}/v1/traces with a protobuf or an OTLP/JSON body). */
typedef enum {
    SP_EXPORT_GRPC = 0,
    SP_EXPORT_HTTP_PROTOBUF,
    SP_EXPORT_HTTP_JSON
} sp_export_protocol_t;

/* Parses a protocol name (exact, lowercase, as the specification spells
 * it); 0, or -1 when unknown. */
int sp_export_protocol_parse(const char *name, sp_export_protocol_t *p);

/* The name sp_export_protocol_parse accepts. */
const char *sp_export_protocol_name(sp_export_protocol_t p);

/* What configuration errors list as the valid values. */
#define SP_EXPORT_PROTOCOL_NAMES  "grpc, http/protobuf or http/json"

#endif
