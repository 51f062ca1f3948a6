#ifndef SERVE_WIRE_READ_H
#define SERVE_WIRE_READ_H

/* Reading the protobuf wire format in place (no allocation): the fields of
 * a message one at a time, length-delimited ones as slices of the input.
 * Ingest uses it for the hot message, ExportTraceServiceRequest. */

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t  *p, *end;
    int             bad;        /* set on malformed input; reads stop */
} serve_wire_t;

typedef struct {
    uint32_t        num;        /* field number */
    uint32_t        type;       /* 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
    uint64_t        v;          /* varint or fixed value */
    const uint8_t  *data;       /* type 2: the bytes */
    size_t          len;
} serve_field_t;

static inline void
serve_wire_init(serve_wire_t *w, const void *p, size_t len)
{
    w->p = p;
    w->end = w->p + len;
    w->bad = 0;
}

static inline int
serve_wire_varint(serve_wire_t *w, uint64_t *v)
{
    uint64_t  x = 0;
    int       shift;

    for (shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t  b = *w->p++;

        x |= (uint64_t) (b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    w->bad = 1;
    return -1;
}

/* The next field: 1, or 0 at the end (w->bad says whether the end was a
 * malformed field). Groups (types 3 and 4) are malformed here: OTLP has
 * none. */
static inline int
serve_wire_next(serve_wire_t *w, serve_field_t *f)
{
    uint64_t  key, n;

    if (w->bad || w->p >= w->end || serve_wire_varint(w, &key) != 0) {
        return 0;
    }
    f->num = (uint32_t) (key >> 3);
    f->type = (uint32_t) (key & 7);
    if (f->num == 0) {
        w->bad = 1;
        return 0;
    }
    switch (f->type) {
    case 0:
        return serve_wire_varint(w, &f->v) == 0;
    case 1:
    case 5:
        n = f->type == 1 ? 8 : 4;
        if ((size_t) (w->end - w->p) < n) {
            break;
        }
        f->v = 0;
        for (key = 0; key < n; key++) {
            f->v |= (uint64_t) w->p[key] << (8 * key);
        }
        w->p += n;
        return 1;
    case 2:
        if (serve_wire_varint(w, &n) != 0 || n > (uint64_t) (w->end - w->p)) {
            break;
        }
        f->data = w->p;
        f->len = (size_t) n;
        w->p += n;
        return 1;
    }
    w->bad = 1;
    return 0;
}

#endif
