#ifndef SP_API_INFO_H
#define SP_API_INFO_H

#include <stddef.h>

/* What the status API says about the configuration in force: filled by
 * the server module from its configuration (strings are not copied). No
 * secret may be in here: URLs go through sp_api_public_url() first, and
 * header values are never given (only how many headers there are). */
typedef struct {
    const char  *server;              /* "nginx", "apache" */
    const char  *endpoint;            /* public form, or NULL */
    const char  *traces_url;          /* public form, or NULL (OTEL_
                                         EXPORTER_OTLP_TRACES_ENDPOINT) */
    const char  *protocol;            /* sp_export_protocol_name */
    const char  *pyroscope;           /* public form, or NULL */
    const char  *service_name;        /* NULL: the default */
    int          profiling;           /* configured somewhere */
    unsigned     profiling_rate;      /* configured base rate */
    unsigned     profiling_interval_ms;
    unsigned     profiling_max_depth;
    unsigned     export_interval_ms;
    unsigned     batch_size;
    unsigned     batch_count;
    unsigned     headers;             /* exporter headers configured */
    int          gzip;
    int          write;               /* this location takes writes */
} sp_api_info_t;

/* scheme://host[:port][/path] of url into out (outlen bytes): the
 * userinfo (user:password@), the query and the fragment are left out.
 * Returns out; "" for NULL or a string without a scheme. */
char *sp_api_public_url(const char *url, char *out, size_t outlen);

#endif
