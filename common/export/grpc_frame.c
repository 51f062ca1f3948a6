#include <stdio.h>
#include <string.h>

#include <zlib.h>

#include "common/export/grpc_frame.h"

void
sp_grpc_frame_header(uint8_t h[SP_GRPC_FRAME_HEADER], size_t len,
    int compressed)
{
    h[0] = compressed ? 1 : 0;
    h[1] = (uint8_t) (len >> 24);
    h[2] = (uint8_t) (len >> 16);
    h[3] = (uint8_t) (len >> 8);
    h[4] = (uint8_t) len;
}

void
sp_grpc_frame(const void *msg, size_t len, int compressed, sp_buf_t *out)
{
    uint8_t  h[SP_GRPC_FRAME_HEADER];

    sp_grpc_frame_header(h, len, compressed);
    if (sp_buf_reserve(out, sizeof(h) + len) != 0) {
        return;
    }
    sp_buf_append(out, h, sizeof(h));
    sp_buf_append(out, msg, len);
}

int
sp_grpc_unframe(const void *body, size_t len, const uint8_t **msg,
    size_t *msglen, int *compressed, char *err, size_t errlen)
{
    const uint8_t  *p = body;
    uint64_t        n;

    *msg = p;
    *msglen = 0;
    *compressed = 0;
    if (len == 0) {
        return 0;
    }
    if (len < SP_GRPC_FRAME_HEADER) {
        snprintf(err, errlen, "a truncated message header (%zu bytes)", len);
        return -1;
    }
    if (p[0] > 1) {
        snprintf(err, errlen, "an invalid compressed flag %u", p[0]);
        return -1;
    }
    n = ((uint64_t) p[1] << 24) | ((uint64_t) p[2] << 16)
        | ((uint64_t) p[3] << 8) | p[4];
    if (n != len - SP_GRPC_FRAME_HEADER) {
        snprintf(err, errlen, "a message of %llu bytes in %zu bytes of data",
                 (unsigned long long) n, len - SP_GRPC_FRAME_HEADER);
        return -1;
    }
    *compressed = p[0];
    *msg = p + SP_GRPC_FRAME_HEADER;
    *msglen = (size_t) n;
    return 0;
}

int
sp_grpc_gunzip(const void *data, size_t len, size_t max, sp_buf_t *out)
{
    z_stream  z;
    uint8_t   chunk[4096];
    size_t    total = 0, n;
    int       rc;

    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {     /* gzip only */
        return -1;
    }
    z.next_in = (Bytef *) data;
    z.avail_in = (uInt) len;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            break;
        }
        n = sizeof(chunk) - z.avail_out;
        total += n;
        if (total > max) {
            rc = Z_BUF_ERROR;
            break;
        }
        sp_buf_append(out, chunk, n);
        if (rc == Z_OK && n == 0 && z.avail_in == 0) {
            rc = Z_BUF_ERROR;           /* truncated: no progress left */
            break;
        }
    } while (rc != Z_STREAM_END);
    inflateEnd(&z);
    return rc == Z_STREAM_END && z.avail_in == 0 && !sp_buf_failed(out)
           ? 0 : -1;
}
