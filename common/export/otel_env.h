#ifndef SP_OTEL_ENV_H
#define SP_OTEL_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "common/export/export_protocol.h"

/* The OpenTelemetry SDK's environment variables, as the server's master /
 * parent reads them at configuration time: defaults that the server's
 * directives override (the glue merges). Meanings as the SDK specification
 * gives them ("SDK environment variables", "OTLP exporter configuration"):
 *
 *   OTEL_SERVICE_NAME                   service.name
 *   OTEL_RESOURCE_ATTRIBUTES            k=v,k=v; keys and values
 *                                       percent-decoded, blanks around them
 *                                       trimmed
 *   OTEL_EXPORTER_OTLP_ENDPOINT         the base: {base}/v1/traces over
 *                                       HTTP; scheme://host:port under grpc
 *   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the traces URL as is (under grpc:
 *                                       the endpoint); wins over the above
 *   OTEL_EXPORTER_OTLP_HEADERS          k=v,k=v, values percent-decoded
 *   OTEL_EXPORTER_OTLP_PROTOCOL         grpc | http/protobuf | http/json
 *   OTEL_EXPORTER_OTLP_COMPRESSION      gzip | none
 *   OTEL_EXPORTER_OTLP_TIMEOUT          milliseconds
 * and OTEL_EXPORTER_OTLP_TRACES_{HEADERS,PROTOCOL,COMPRESSION,TIMEOUT},
 * which win over the generic ones. An empty variable is an unset one (the
 * specification says so). Endpoints go through sp_endpoint_normalize (no
 * file://). */

#define SP_OTEL_ENV_MAX_ITEMS  48

typedef const char *(*sp_otel_getenv_fn)(void *ud, const char *name);

typedef struct {
    char  *key;
    char  *value;
} sp_otel_env_kv_t;

typedef struct {
    char                 *service_name;      /* NULL: unset */
    sp_otel_env_kv_t      resource[SP_OTEL_ENV_MAX_ITEMS];
    size_t                nresource;
    char                 *endpoint;          /* normalized base, or NULL */
    char                 *traces_endpoint;   /* normalized, or NULL */
    sp_otel_env_kv_t      headers[SP_OTEL_ENV_MAX_ITEMS];
    size_t                nheaders;
    int                   protocol_set;
    sp_export_protocol_t  protocol;
    int                   compression;       /* -1 unset, 0 none, 1 gzip */
    int64_t               timeout_ms;        /* -1 unset */
} sp_otel_env_t;

/* Reads the variables through get (a getenv: NULL when unset). 0, or -1
 * with err naming the variable and what is wrong with it (never a header
 * value: it may be a secret). Free with sp_otel_env_free either way. */
int sp_otel_env_read(sp_otel_env_t *env, sp_otel_getenv_fn get, void *ud,
    char *err, size_t errlen);

/* getenv(3) as a sp_otel_getenv_fn. */
const char *sp_otel_env_getenv(void *ud, const char *name);

void sp_otel_env_free(sp_otel_env_t *env);

#endif
