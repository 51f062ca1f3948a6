#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/serve/otlp_json_decode.h"

#define MAX_DEPTH  64

typedef struct {
    char   *err;
    size_t  errlen;
} ctx_t;

static int decode_message(ctx_t *c, const ProtobufCMessageDescriptor *d,
    json_t *obj, ProtobufCMessage *msg, int depth);

static int
bad(ctx_t *c, const char *field, const char *why)
{
    snprintf(c->err, c->errlen, "field \"%s\": %s", field, why);
    return -1;
}

/* The value of field f in obj: lowerCamelCase first, then the proto
 * name. */
static json_t *
member(json_t *obj, const char *name)
{
    char         camel[128];
    const char  *p;
    size_t       n = 0;
    int          up = 0;

    for (p = name; *p && n + 1 < sizeof(camel); p++) {
        if (*p == '_') {
            up = 1;
            continue;
        }
        camel[n++] = up && *p >= 'a' && *p <= 'z' ? (char) (*p - 32) : *p;
        up = 0;
    }
    camel[n] = '\0';
    json_t *v = json_object_get(obj, camel);
    return v != NULL ? v : json_object_get(obj, name);
}

static int
is_hex_id(const char *name)
{
    return strcmp(name, "trace_id") == 0 || strcmp(name, "span_id") == 0
           || strcmp(name, "parent_span_id") == 0;
}

static int
hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int
b64val(char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+' || ch == '-') return 62;
    if (ch == '/' || ch == '_') return 63;
    return -1;
}

static int
decode_bytes(ctx_t *c, const char *name, json_t *v, ProtobufCBinaryData *b)
{
    const char  *s;
    size_t       n, i, o = 0;
    uint32_t     acc = 0;
    int          bits = 0, x;

    if (!json_is_string(v)) {
        return bad(c, name, "expected a string");
    }
    s = json_string_value(v);
    n = json_string_length(v);
    b->data = malloc(n + 1);
    b->len = 0;
    if (b->data == NULL) {
        return bad(c, name, "out of memory");
    }
    if (is_hex_id(name)) {
        if (n % 2 != 0) {
            return bad(c, name, "odd number of hex digits");
        }
        for (i = 0; i < n; i += 2) {
            int  hi = hexval(s[i]), lo = hexval(s[i + 1]);

            if (hi < 0 || lo < 0) {
                return bad(c, name, "not hex");
            }
            b->data[o++] = (uint8_t) (hi << 4 | lo);
        }
    } else {
        for (i = 0; i < n; i++) {
            if (s[i] == '=') {
                break;
            }
            if ((x = b64val(s[i])) < 0) {
                return bad(c, name, "not base64");
            }
            acc = acc << 6 | (uint32_t) x;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                b->data[o++] = (uint8_t) (acc >> bits);
            }
        }
    }
    b->len = o;
    return 0;
}

/* An integer given as a number or a decimal string. */
static int
get_int(ctx_t *c, const char *name, json_t *v, int is_unsigned,
    long long lo, unsigned long long hi, unsigned long long *out)
{
    const char  *s;
    char        *end;

    if (json_is_integer(v)) {
        long long  x = json_integer_value(v);

        if (is_unsigned ? x < 0 : (x < lo || (x > 0
                                              && (unsigned long long) x > hi)))
        {
            return bad(c, name, "out of range");
        }
        if (is_unsigned && (unsigned long long) x > hi) {
            return bad(c, name, "out of range");
        }
        *out = (unsigned long long) x;
        return 0;
    }
    if (!json_is_string(v)) {
        return bad(c, name, "expected an integer");
    }
    s = json_string_value(v);
    errno = 0;
    if (is_unsigned) {
        if (*s == '-') {
            return bad(c, name, "negative");
        }
        *out = strtoull(s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0 || *out > hi) {
            return bad(c, name, "not an integer in range");
        }
    } else {
        long long  x = strtoll(s, &end, 10);

        if (*s == '\0' || *end != '\0' || errno != 0 || x < lo
            || (x > 0 && (unsigned long long) x > hi))
        {
            return bad(c, name, "not an integer in range");
        }
        *out = (unsigned long long) x;
    }
    return 0;
}

static size_t
elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* Decodes one value of field f into *p (an element of its type). */
static int
decode_value(ctx_t *c, const ProtobufCFieldDescriptor *f, json_t *v,
    void *p, int depth)
{
    unsigned long long  u;
    const ProtobufCEnumValue  *ev;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (get_int(c, f->name, v, 0, INT32_MIN, INT32_MAX, &u) != 0) {
            return -1;
        }
        *(int32_t *) p = (int32_t) (long long) u;
        return 0;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if (get_int(c, f->name, v, 1, 0, UINT32_MAX, &u) != 0) {
            return -1;
        }
        *(uint32_t *) p = (uint32_t) u;
        return 0;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (get_int(c, f->name, v, 0, INT64_MIN, INT64_MAX, &u) != 0) {
            return -1;
        }
        *(int64_t *) p = (int64_t) u;
        return 0;
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        if (get_int(c, f->name, v, 1, 0, UINT64_MAX, &u) != 0) {
            return -1;
        }
        *(uint64_t *) p = (uint64_t) u;
        return 0;
    case PROTOBUF_C_TYPE_ENUM:
        if (json_is_string(v)) {
            ev = protobuf_c_enum_descriptor_get_value_by_name(f->descriptor,
                     json_string_value(v));
            if (ev == NULL) {
                return bad(c, f->name, "unknown enum name");
            }
            *(int32_t *) p = ev->value;
            return 0;
        }
        if (get_int(c, f->name, v, 0, INT32_MIN, INT32_MAX, &u) != 0) {
            return -1;
        }
        *(int32_t *) p = (int32_t) (long long) u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE: {
        double  d;

        if (json_is_number(v)) {
            d = json_number_value(v);
        } else if (json_is_string(v)) {
            const char  *s = json_string_value(v);
            char        *end;

            d = strtod(s, &end);
            if (*s == '\0' || *end != '\0') {
                return bad(c, f->name, "expected a number");
            }
        } else {
            return bad(c, f->name, "expected a number");
        }
        if (f->type == PROTOBUF_C_TYPE_FLOAT) {
            *(float *) p = (float) d;
        } else {
            *(double *) p = d;
        }
        return 0;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) {
            return bad(c, f->name, "expected true or false");
        }
        *(protobuf_c_boolean *) p = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_STRING: {
        char  *s;

        if (!json_is_string(v)) {
            return bad(c, f->name, "expected a string");
        }
        s = malloc(json_string_length(v) + 1);
        if (s == NULL) {
            return bad(c, f->name, "out of memory");
        }
        memcpy(s, json_string_value(v), json_string_length(v) + 1);
        *(char **) p = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return decode_bytes(c, f->name, v, p);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor  *md = f->descriptor;
        ProtobufCMessage                  *m;

        if (!json_is_object(v)) {
            return bad(c, f->name, "expected an object");
        }
        m = malloc(md->sizeof_message);
        if (m == NULL) {
            return bad(c, f->name, "out of memory");
        }
        protobuf_c_message_init(md, m);
        *(ProtobufCMessage **) p = m;
        return decode_message(c, md, v, m, depth + 1);
    }
    }
    return bad(c, f->name, "unsupported type");
}

static int
decode_message(ctx_t *c, const ProtobufCMessageDescriptor *d, json_t *obj,
    ProtobufCMessage *msg, int depth)
{
    unsigned  i;
    char     *base = (char *) msg;

    if (depth > MAX_DEPTH) {
        snprintf(c->err, c->errlen, "nested deeper than %d", MAX_DEPTH);
        return -1;
    }
    for (i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor  *f = &d->fields[i];
        json_t                          *v = member(obj, f->name);

        if (v == NULL || json_is_null(v)) {
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t   n = json_array_size(v), k, es = elem_size(f->type);
            char    *arr;

            if (!json_is_array(v)) {
                return bad(c, f->name, "expected an array");
            }
            if (n == 0) {
                continue;
            }
            arr = calloc(n, es);
            if (arr == NULL) {
                return bad(c, f->name, "out of memory");
            }
            /* Owned by the message from here, so a failure below is freed
             * with it (the count covers what was filled: calloc'd zeros
             * free as nothing). */
            *(void **) (base + f->offset) = arr;
            *(size_t *) (base + f->quantifier_offset) = n;
            for (k = 0; k < n; k++) {
                if (decode_value(c, f, json_array_get(v, k), arr + k * es,
                                 depth) != 0)
                {
                    return -1;
                }
            }
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            /* Set first, so that free_unpacked frees what the member
             * holds even when decoding it fails half way. */
            if (*(uint32_t *) (base + f->quantifier_offset) != 0) {
                return bad(c, f->name, "a second member of a oneof");
            }
            *(uint32_t *) (base + f->quantifier_offset) = f->id;
        }
        if (decode_value(c, f, v, base + f->offset, depth) != 0) {
            return -1;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            /* done above */
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL
                   && f->quantifier_offset != 0
                   && f->type != PROTOBUF_C_TYPE_MESSAGE
                   && f->type != PROTOBUF_C_TYPE_STRING)
        {
            *(protobuf_c_boolean *) (base + f->quantifier_offset) = 1;
        }
    }
    return 0;
}

ProtobufCMessage *
serve_otlp_json_decode(const ProtobufCMessageDescriptor *d, const char *json,
    size_t len, char *err, size_t errlen)
{
    json_error_t       je;
    json_t            *root;
    ProtobufCMessage  *m;
    ctx_t              c = { err, errlen };

    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        snprintf(err, errlen, "not JSON: %s (at line %d, column %d)",
                 je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(err, errlen, "not a JSON object");
        return NULL;
    }
    m = malloc(d->sizeof_message);
    if (m == NULL) {
        json_decref(root);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    protobuf_c_message_init(d, m);
    if (decode_message(&c, d, root, m, 0) != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        m = NULL;
    }
    json_decref(root);
    return m;
}
