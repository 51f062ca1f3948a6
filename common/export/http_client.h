#ifndef SP_HTTP_CLIENT_H
#define SP_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/base/buf.h"

#include "common/export/http_loop.h"

/* An HTTP/1.1 POST client on libcurl: one transfer at a time, run by an
 * sp_http_loop (never blocking the caller), keep-alive connections kept by
 * the loop across transfers, optional gzip of the body, extra headers,
 * https with the system CAs or given CA certificates (PEM bytes read
 * beforehand, never a path opened here), connect and total timeouts.
 *
 * With conf.grpc, each post is instead a unary gRPC call over HTTP/2 (no
 * gRPC library): h2c with prior knowledge for http://, ALPN h2 for
 * https://, the clients of one loop multiplexed on one connection per
 * host; the body is sent as one length-prefixed message (gzip'd with
 * grpc-encoding when conf.gzip), content-type application/grpc, te:
 * trailers, grpc-timeout from the post's timeout, the extra headers as
 * metadata (names lowercased); the answer's status comes from its
 * trailers (grpc_response.h) and its body is the response message. */

typedef struct sp_http_client sp_http_client_t;

typedef struct {
    const char *const  *headers;          /* "Name: value", NULL-terminated */
    /* PEM CA certificates (copied), or NULL: the system's. The file
     * they came from is named in TLS errors only. */
    const char         *ca_pem;
    size_t              ca_pem_len;
    const char         *ca_name;
    uint64_t            connect_timeout_ms;
    int                 gzip;
    int                 grpc;             /* unary gRPC calls (see above) */
} sp_http_client_conf_t;

typedef struct {
    long      status;          /* 0 on a network error */
    uint64_t  retry_after_ms;  /* from Retry-After, 0 if absent */
    char      error[384];      /* curl's message on a network error */
    sp_buf_t  body;            /* response body, at most 64 KiB kept */
    char      content_type[64];
    /* gRPC: 1 when a call was answered (status > 0; a zeroed response is
     * plain HTTP's); grpc_status is then its status (grpc_status.h),
     * retry_after_ms RetryInfo's delay, body the response message. */
    int       grpc;
    int       grpc_status;
    int       grpc_retry_info;         /* the answer had a RetryInfo */
    char      grpc_message[256];
} sp_http_response_t;

/* What the exporters act on, for HTTP and gRPC alike: the post succeeded
 * (2xx; gRPC OK); it may be retried (a network error or timeout; HTTP
 * 429/502/503/504; the OTLP specification's retryable gRPC codes); and
 * what the collector answered, for a log line: "503", or "gRPC status 14
 * UNAVAILABLE: message". */
int sp_http_response_ok(const sp_http_response_t *resp);
int sp_http_response_retryable(const sp_http_response_t *resp);
const char *sp_http_response_describe(const sp_http_response_t *resp,
    char *buf, size_t len);

/* Called once per post, from the loop, with the outcome: resp->status 0
 * on a network error or timeout (resp->error says which). resp belongs to
 * the client and is valid during the call; the callback may post again. */
typedef void (*sp_http_done_fn)(void *ud, const sp_http_response_t *resp);

sp_http_client_t *sp_http_client_new(sp_http_loop_t *loop,
    const sp_http_client_conf_t *conf);
/* Abandons a transfer under way (its callback is not called). */
void sp_http_client_free(sp_http_client_t *c);

/* Starts POSTing body to url, all done within timeout_ms. body and url
 * must stay as they are until done is called. (gRPC: url is the method's,
 * http(s)://host:port/package.Service/Method; content_type is not used.) Returns -1 when a transfer
 * is already under way or it cannot start (then done is not called). */
int sp_http_client_post(sp_http_client_t *c, const char *url,
    const char *content_type, const void *body, size_t len,
    uint64_t timeout_ms, sp_http_done_fn done, void *ud);

/* The same with the body given as parts, sent one after another as one
 * body of len bytes (their sum) without being put together first: libcurl
 * reads them from a callback into its upload buffer. A body under 64 KiB
 * (which libcurl would send with the headers) or one to gzip is put
 * together in the client's own buffer instead. The parts array and what
 * it points to must stay as they are until done is called. */
typedef struct {
    const void  *data;
    size_t       len;
} sp_http_part_t;

int sp_http_client_post_parts(sp_http_client_t *c, const char *url,
    const char *content_type, const sp_http_part_t *parts, size_t nparts,
    size_t len, uint64_t timeout_ms, sp_http_done_fn done, void *ud);

int sp_http_client_busy(const sp_http_client_t *c);

/* Reads a CA bundle for ca_pem, at most SP_HTTP_CA_MAX bytes holding at
 * least one PEM certificate: run by the server's master/parent while it
 * may still open any path. Returns 0 with *pem malloc'd (the caller frees
 * it), or -1 with err set to the reason. */
#define SP_HTTP_CA_MAX  (1024 * 1024)

int sp_http_ca_load(const char *path, char **pem, size_t *len, char *err,
    size_t errlen);

/* Parses a Retry-After value, delta-seconds or an HTTP-date (IMF-fixdate,
 * RFC 850 or asctime), into the ms to wait from now_ms (the wall clock, ms
 * since the epoch): 0 when invalid, negative or past, at most an hour. */
uint64_t sp_http_parse_retry_after(const char *v, size_t len,
    uint64_t now_ms);

#endif
