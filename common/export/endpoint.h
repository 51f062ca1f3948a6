#ifndef SP_ENDPOINT_H
#define SP_ENDPOINT_H

#include <stddef.h>

/* An exporter endpoint as users write it (nginx's `endpoint`, Apache's
 * OtelExporterEndpoint, OTEL_EXPORTER_OTLP_*ENDPOINT) turned into the URL
 * common/ takes (exporter.h). Accepted, as nginx-otel accepts them:
 *   "host:port"                   nginx-otel's bare form: plaintext, so
 *                                 "http://host:port"
 *   "http://host[:port][/path]"   scheme case-insensitive, written
 *   "https://host[:port][/path]"  lowercase; userinfo@ kept
 *   "file:///dir"                 unchanged (allow_file only)
 * host: a name (letters, digits, '-', '_', '.'), an IPv4 address or an
 * [IPv6] literal; port: 1..65535.
 *
 * out must hold strlen(in) + SP_ENDPOINT_EXTRA bytes. Returns 0, or -1
 * with *why a static reason ("must be host:port, ..."). */
#define SP_ENDPOINT_EXTRA  8

int sp_endpoint_normalize(const char *in, int allow_file, char *out,
    size_t outlen, const char **why);

/* The path of a normalized http(s) URL ("" when it has none, "/..." else;
 * the query and fragment included). */
const char *sp_endpoint_path(const char *url);

/* A path that means something: not "" and not "/". Under grpc it has
 * none (the service path is fixed), so the glue refuses it. */
int sp_endpoint_has_path(const char *url);

#endif
