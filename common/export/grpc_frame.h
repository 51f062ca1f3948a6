#ifndef SP_GRPC_FRAME_H
#define SP_GRPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

/* gRPC's length-prefixed message (the body of a unary call and of its
 * answer): a compressed-flag byte, the length as 4 bytes big-endian, the
 * message (compressed with the call's grpc-encoding when the flag is 1). */

#define SP_GRPC_FRAME_HEADER  5

/* The 5 bytes that go before a message of len bytes. */
void sp_grpc_frame_header(uint8_t h[SP_GRPC_FRAME_HEADER], size_t len,
    int compressed);

/* Appends msg framed to out (out's failed flag says if memory ran out). */
void sp_grpc_frame(const void *msg, size_t len, int compressed, sp_buf_t *out);

/* The one message of a unary answer: body must be exactly one frame
 * (an empty body is an empty message). 0 with *msg, *len and *compressed
 * set (pointing into body), or -1 with err set to why it is not. */
int sp_grpc_unframe(const void *body, size_t len, const uint8_t **msg,
    size_t *msglen, int *compressed, char *err, size_t errlen);

/* Appends the gunzip of a gzip'd message to out, at most max bytes: 0, or
 * -1 (not gzip, truncated, or larger than max). */
int sp_grpc_gunzip(const void *data, size_t len, size_t max, sp_buf_t *out);

#endif
