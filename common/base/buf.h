#ifndef SP_BUF_H
#define SP_BUF_H

#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer for the exporter (encoders, HTTP bodies).
 * Never used on a worker's request path. After a failed allocation the
 * buffer is marked failed, further appends are ignored and sp_buf_failed()
 * says so, so encoders can append freely and check once at the end. */

typedef struct {
    uint8_t  *data;
    size_t    len;
    size_t    cap;
    int       failed;
} sp_buf_t;

void sp_buf_init(sp_buf_t *b);
void sp_buf_free(sp_buf_t *b);
/* Keeps the allocation for reuse. */
void sp_buf_reset(sp_buf_t *b);
int  sp_buf_reserve(sp_buf_t *b, size_t extra);
void sp_buf_append(sp_buf_t *b, const void *p, size_t n);
void sp_buf_append_str(sp_buf_t *b, const char *s);
void sp_buf_append_char(sp_buf_t *b, char c);
void sp_buf_appendf(sp_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int sp_buf_failed(const sp_buf_t *b) { return b->failed; }

#endif
