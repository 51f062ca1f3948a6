#ifndef SP_HTTP_CLIENT_H
#define SP_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"

/* A blocking HTTP/1.1 POST client on libcurl for the exporter thread: one
 * keep-alive connection reused across requests, optional gzip of the body,
 * extra headers, https with the system CAs or a given CA file, connect and
 * total timeouts. */

typedef struct sp_http_client sp_http_client_t;

typedef struct {
    const char *const  *headers;          /* "Name: value", NULL-terminated */
    const char         *trusted_certificate;  /* CA file or NULL */
    uint64_t            connect_timeout_ms;
    int                 gzip;
} sp_http_client_conf_t;

typedef struct {
    long      status;          /* 0 on a network error */
    uint64_t  retry_after_ms;  /* from Retry-After, 0 if absent */
    char      error[256];      /* curl's message on a network error */
    sp_buf_t  body;            /* response body, at most 64 KiB kept */
    char      content_type[64];
} sp_http_response_t;

sp_http_client_t *sp_http_client_new(const sp_http_client_conf_t *conf);
void sp_http_client_free(sp_http_client_t *c);

/* POSTs body to url within timeout_ms; fills resp (whose body buffer the
 * caller owns and frees with sp_buf_free). Returns 0 when an HTTP status was
 * received (any status), -1 on a network error or timeout. */
int sp_http_post(sp_http_client_t *c, const char *url,
    const char *content_type, const void *body, size_t len,
    uint64_t timeout_ms, sp_http_response_t *resp);

/* Parses a Retry-After value (delta-seconds or an HTTP date). */
uint64_t sp_http_parse_retry_after(const char *v, size_t len, time_t now);

#endif
