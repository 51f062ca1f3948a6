#ifndef SP_GRPC_RESPONSE_H
#define SP_GRPC_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

/* The answer to a unary gRPC call, read from what libcurl hands over: the
 * header lines (the response headers, then, after the body, the HTTP/2
 * trailers; a Trailers-Only answer has grpc-status among its headers),
 * then the HTTP status and the body. Never trusts the peer: whatever is
 * not valid gRPC ends as a failed call with a message saying why. */

typedef struct {
    int       status;            /* grpc-status; -1 until seen */
    char      message[256];      /* grpc-message, percent-decoded */
    int       retry_info;        /* grpc-status-details-bin had a RetryInfo */
    uint64_t  retry_delay_ms;    /* its delay */
    int       gzip;              /* grpc-encoding: gzip */
    int       bad_encoding;      /* another grpc-encoding than identity */
    int       grpc_type;         /* content-type application/grpc[+...] */
    char      content_type[48];  /* as received, for the error message */
} sp_grpc_response_t;

void sp_grpc_response_reset(sp_grpc_response_t *r);

/* One header or trailer line ("name: value", CRLF or not); status lines
 * and other headers are ignored. */
void sp_grpc_response_header(sp_grpc_response_t *r, const char *line,
    size_t len);

/* Once the transfer is over (an HTTP answer came: http_status > 0), with
 * the raw body: settles r->status and r->message (a non-200 HTTP status
 * mapped as gRPC does; not gRPC, no grpc-status or a malformed message:
 * INTERNAL saying why) and, for OK, appends the message (unframed,
 * gunzipped, at most max bytes) to msg. Returns r->status. */
int sp_grpc_response_finish(sp_grpc_response_t *r, long http_status,
    const void *body, size_t len, size_t max, sp_buf_t *msg);

#endif
