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
    serve_field_t  f;
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

void
serve_attrs_json(sp_buf_t *out, const uint8_t *p, size_t len)
{
    serve_wire_t   w, kv;
    serve_field_t  f, g;
    const uint8_t *key, *val;
    size_t         klen, vlen;
    int            first = 1;

    sp_buf_append_char(out, '{');
    serve_wire_init(&w, p, len);
    while (p != NULL && serve_wire_next(&w, &f)) {
        if (f.type != 2) {
            continue;
        }
        key = val = NULL;
        klen = vlen = 0;
        serve_wire_init(&kv, f.data, f.len);
        while (serve_wire_next(&kv, &g)) {
            if (g.num == 1 && g.type == 2) {
                key = g.data;
                klen = g.len;
            } else if (g.num == 2 && g.type == 2) {
                val = g.data;
                vlen = g.len;
            }
        }
        if (key == NULL) {
            continue;
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
