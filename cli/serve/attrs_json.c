#include <inttypes.h>
#include <string.h>

#include "cli/serve/attrs_json.h"
#include "cli/serve/json_out.h"
#include "cli/serve/wire_read.h"

/* AnyValue fields. */
enum { ANY_STRING = 1, ANY_BOOL = 2, ANY_INT = 3, ANY_DOUBLE = 4 };

static void
value_json(sp_buf_t *out, const uint8_t *p, size_t len)
{
    serve_wire_t   w;
    serve_field_t  f = { 0 };
    double         d;

    serve_wire_init(&w, p, len);
    if (!serve_wire_next(&w, &f)) {
        sp_buf_append_str(out, "null");
        return;
    }
    if (f.num == ANY_STRING && f.type == 2) {
        serve_json_strn(out, (const char *) f.data, f.len);
    } else if (f.num == ANY_BOOL && f.type == 0) {
        sp_buf_append_str(out, f.v ? "true" : "false");
    } else if (f.num == ANY_INT && f.type == 0) {
        sp_buf_appendf(out, "%" PRId64, (int64_t) f.v);
    } else if (f.num == ANY_DOUBLE && f.type == 1) {
        memcpy(&d, &f.v, sizeof(d));
        if (d == d && d < 1e300 && d > -1e300) {
            sp_buf_appendf(out, "%.17g", d);
        } else {
            sp_buf_append_str(out, "null");
        }
    } else {
        serve_json_str(out, "(structured value)");
    }
}

/* A length-prefixed slice of w: 0, or -1 when it runs past the end. */
static int
slice(serve_wire_t *w, const uint8_t **p, size_t *len)
{
    uint64_t  n;

    if (serve_wire_varint(w, &n) != 0 || n > (uint64_t) (w->end - w->p)) {
        return -1;
    }
    *p = w->p;
    *len = (size_t) n;
    w->p += n;
    return 0;
}

void
serve_attrs_json(sp_buf_t *out, const uint8_t *p, size_t len,
    const serve_keys_t *keys)
{
    serve_wire_t   w;
    const uint8_t *key, *val;
    size_t         klen, vlen;
    uint64_t       id;
    int            first = 1;

    sp_buf_append_char(out, '{');
    if (p == NULL) {
        sp_buf_append_char(out, '}');
        return;
    }
    serve_wire_init(&w, p, len);
    while (w.p < w.end) {
        if (serve_wire_varint(&w, &id) != 0) {
            break;
        }
        if (id == 0) {
            if (slice(&w, &key, &klen) != 0) {
                break;
            }
        } else if (id > UINT32_MAX
                   || (key = (const uint8_t *) serve_keys_get(
                           keys, (uint32_t) id, &klen)) == NULL)
        {
            break;
        }
        if (slice(&w, &val, &vlen) != 0) {
            break;
        }
        if (!first) {
            sp_buf_append_char(out, ',');
        }
        first = 0;
        serve_json_strn(out, (const char *) key, klen);
        sp_buf_append_char(out, ':');
        value_json(out, val, vlen);
    }
    sp_buf_append_char(out, '}');
}
