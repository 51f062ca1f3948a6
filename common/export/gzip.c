#include <string.h>

#include <zlib.h>

#include "common/export/gzip.h"

int
sp_gzip_append(const void *data, size_t len, sp_buf_t *out)
{
    z_stream  zs;
    int       rc;

    memset(&zs, 0, sizeof(zs));
    /* windowBits 15 + 16: a gzip wrapper instead of zlib's. */
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
    {
        return -1;
    }
    zs.next_in = (Bytef *) data;
    zs.avail_in = (uInt) len;       /* bodies and profiles are far < 4 GiB */
    do {
        /* deflateBound, wrapper included, makes one round enough. */
        if (sp_buf_reserve(out, deflateBound(&zs, zs.avail_in) + 64) != 0) {
            deflateEnd(&zs);
            return -1;
        }
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt) (out->cap - out->len);
        rc = deflate(&zs, Z_FINISH);
        out->len = out->cap - zs.avail_out;
    } while (rc == Z_OK || rc == Z_BUF_ERROR);
    deflateEnd(&zs);
    return rc == Z_STREAM_END ? 0 : -1;
}
