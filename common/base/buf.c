/* Growable byte buffer with a sticky failure flag (see buf.h). */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"

#define SP_BUF_MIN_CAP  256


void
sp_buf_init(sp_buf_t *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = 0;
}


void
sp_buf_free(sp_buf_t *b)
{
    free(b->data);
    sp_buf_init(b);
}


void
sp_buf_reset(sp_buf_t *b)
{
    b->len = 0;
    b->failed = 0;
}


int
sp_buf_reserve(sp_buf_t *b, size_t extra)
{
    size_t    need, cap;
    uint8_t  *p;

    if (b->failed) {
        return -1;
    }

    if (b->cap - b->len >= extra) {
        return 0;
    }

    if (extra > SIZE_MAX - b->len) {
        b->failed = 1;
        return -1;
    }

    need = b->len + extra;
    cap = b->cap ? b->cap : SP_BUF_MIN_CAP;

    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }

    p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }

    b->data = p;
    b->cap = cap;

    return 0;
}


void
sp_buf_append(sp_buf_t *b, const void *p, size_t n)
{
    if (n == 0 || sp_buf_reserve(b, n) != 0) {
        return;
    }

    memcpy(b->data + b->len, p, n);
    b->len += n;
}


void
sp_buf_append_str(sp_buf_t *b, const char *s)
{
    sp_buf_append(b, s, strlen(s));
}


void
sp_buf_append_char(sp_buf_t *b, char c)
{
    if (sp_buf_reserve(b, 1) != 0) {
        return;
    }

    b->data[b->len++] = (uint8_t) c;
}


void
sp_buf_appendf(sp_buf_t *b, const char *fmt, ...)
{
    va_list  ap, ap2;
    size_t   room;
    int      n;

    if (b->failed) {
        return;
    }

    /* First try the free space we already have; vsnprintf needs room for its
     * terminator, which is written but not counted in len. */
    room = b->cap - b->len;

    va_start(ap, fmt);
    va_copy(ap2, ap);

    n = vsnprintf(room ? (char *) b->data + b->len : NULL, room, fmt, ap);

    if (n < 0) {
        b->failed = 1;
        goto done;
    }

    if ((size_t) n >= room) {
        if (sp_buf_reserve(b, (size_t) n + 1) != 0) {
            goto done;
        }

        n = vsnprintf((char *) b->data + b->len, (size_t) n + 1, fmt, ap2);
        if (n < 0) {
            b->failed = 1;
            goto done;
        }
    }

    b->len += (size_t) n;

done:

    va_end(ap2);
    va_end(ap);
}
