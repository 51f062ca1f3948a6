#ifndef SP_GZIP_H
#define SP_GZIP_H

#include <stddef.h>

#include "common/base/buf.h"

/* Appends the gzip (RFC 1952) compression of data to out: HTTP bodies with
 * Content-Encoding: gzip, and .pb.gz pprof files. 0, or -1 on failure
 * (out may then hold a partial member: reset it). */
int sp_gzip_append(const void *data, size_t len, sp_buf_t *out);

#endif
