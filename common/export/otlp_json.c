/* OTLP/JSON encoder: walks protobuf-c descriptors, so it serves every OTLP
 * message without per-type code. Runs on the exporter only. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/otlp_json.h"

static void encode_message(const ProtobufCMessage *msg, sp_buf_t *out);

/* Proto field name to lowerCamelCase, as protoc computes json_name. */
static void
put_key(const char *name, sp_buf_t *out)
{
    const char *run = name;
    const char *p;

    sp_buf_append_char(out, '"');
    for (p = name; *p; p++) {
        if (*p != '_')
            continue;
        sp_buf_append(out, run, (size_t) (p - run));
        run = p + 1;
        if (p[1] >= 'a' && p[1] <= 'z') {
            sp_buf_append_char(out, (char) (p[1] - 'a' + 'A'));
            run = p + 2;
            p++;
        }
    }
    sp_buf_append(out, run, (size_t) (p - run));
    sp_buf_append(out, "\":", 2);
}

/* Length of the valid UTF-8 sequence at s (s[0] >= 0x80), or 0 when it is
 * ill-formed; *bad then gets the length of its maximal subpart, which is
 * replaced by a single U+FFFD (Unicode's recommended practice). Ranges are
 * those of Unicode table 3-7, which excludes overlongs, surrogates and
 * code points above U+10FFFF. */
static size_t
utf8_seq(const uint8_t *s, size_t left, size_t *bad)
{
    uint8_t c = s[0], lo = 0x80, hi = 0xbf;
    size_t  need, i;

    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        *bad = 1;
        return 0;
    }

    for (i = 1; i < need; i++) {
        if (i >= left || s[i] < lo || s[i] > hi) {
            *bad = i;
            return 0;
        }
        lo = 0x80;
        hi = 0xbf;
    }
    return need;
}

static void
put_string(const char *str, size_t len, sp_buf_t *out)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *s = (const uint8_t *) str;
    /* bad is set whenever utf8_seq() returns 0; gcc -O cannot see it. */
    size_t         i = 0, run = 0, n, bad = 1;
    char           esc[6];

    sp_buf_append_char(out, '"');
    while (i < len) {
        uint8_t c = s[i];

        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            n = utf8_seq(s + i, len - i, &bad);
            if (n) {
                i += n;
                continue;
            }
        }

        /* Flush the run of bytes that need no escaping, in one append. */
        sp_buf_append(out, s + run, i - run);

        if (c >= 0x80) {
            sp_buf_append(out, "\\ufffd", 6);
            i += bad;
            run = i;
            continue;
        }

        esc[0] = '\\';
        switch (c) {
        case '"':  sp_buf_append(out, "\\\"", 2); break;
        case '\\': sp_buf_append(out, "\\\\", 2); break;
        case '\n': sp_buf_append(out, "\\n", 2); break;
        case '\r': sp_buf_append(out, "\\r", 2); break;
        case '\t': sp_buf_append(out, "\\t", 2); break;
        case '\b': sp_buf_append(out, "\\b", 2); break;
        case '\f': sp_buf_append(out, "\\f", 2); break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xf];
            sp_buf_append(out, esc, 6);
            break;
        }
        i++;
        run = i;
    }
    sp_buf_append(out, s + run, i - run);
    sp_buf_append_char(out, '"');
}

static void
put_hex(const ProtobufCBinaryData *bd, sp_buf_t *out)
{
    static const char hex[] = "0123456789abcdef";
    char   pair[2];
    size_t i;

    sp_buf_append_char(out, '"');
    for (i = 0; i < bd->len; i++) {
        pair[0] = hex[bd->data[i] >> 4];
        pair[1] = hex[bd->data[i] & 0xf];
        sp_buf_append(out, pair, 2);
    }
    sp_buf_append_char(out, '"');
}

static void
put_base64(const ProtobufCBinaryData *bd, sp_buf_t *out)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *d = bd->data;
    size_t         i, left;
    uint32_t       v;
    char           q[4];

    sp_buf_append_char(out, '"');
    for (i = 0; i < bd->len; i += 3) {
        left = bd->len - i;
        v = (uint32_t) d[i] << 16;
        if (left > 1)
            v |= (uint32_t) d[i + 1] << 8;
        if (left > 2)
            v |= d[i + 2];
        q[0] = b64[(v >> 18) & 0x3f];
        q[1] = b64[(v >> 12) & 0x3f];
        q[2] = left > 1 ? b64[(v >> 6) & 0x3f] : '=';
        q[3] = left > 2 ? b64[v & 0x3f] : '=';
        sp_buf_append(out, q, 4);
    }
    sp_buf_append_char(out, '"');
}

/* Shortest "%.Ng" that reads back to the same value (17 digits always do,
 * 9 for float); a form shorter than 15 (6) digits comes out of the first try
 * since %g drops trailing zeros. */
static void
put_float(double v, int is_float, sp_buf_t *out)
{
    char  tmp[48], json[48];
    char *p, *q;
    int   prec, n = 0;
    int   lo = is_float ? 6 : 15, hi = is_float ? 9 : 17;

    if (isnan(v)) {
        sp_buf_append_str(out, "\"NaN\"");
        return;
    }
    if (isinf(v)) {
        sp_buf_append_str(out, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }

    for (prec = lo; prec <= hi; prec++) {
        n = snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (is_float ? strtof(tmp, NULL) == (float) v
                     : strtod(tmp, NULL) == v)
            break;
    }
    if (n < 0 || (size_t) n >= sizeof(tmp))
        return;

    /* A host locale may use another (even multi-byte) decimal point; JSON
     * wants '.'. */
    for (p = tmp, q = json; *p; p++) {
        if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e')
            *q++ = *p;
        else if (q == json || q[-1] != '.')
            *q++ = '.';
    }
    sp_buf_append(out, json, (size_t) (q - json));
}

static int
is_id_field(const char *name)
{
    return strcmp(name, "trace_id") == 0 || strcmp(name, "span_id") == 0
        || strcmp(name, "parent_span_id") == 0
        /* profiles: the Collector's OTLP/JSON reads it as hex too */
        || strcmp(name, "profile_id") == 0;
}

/* One value of field f stored at member (an element for repeated fields). */
static void
put_value(const ProtobufCFieldDescriptor *f, const void *member,
    sp_buf_t *out)
{
    const char *s;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        sp_buf_appendf(out, "%d", (int) *(const int32_t *) member);
        break;
    case PROTOBUF_C_TYPE_ENUM:
        sp_buf_appendf(out, "%d", *(const int *) member);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        sp_buf_appendf(out, "%u", (unsigned) *(const uint32_t *) member);
        break;
    /* 64-bit integers are strings: JSON readers often parse numbers as
     * doubles, which would lose precision on nanosecond timestamps. */
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        sp_buf_appendf(out, "\"%lld\"",
            (long long) *(const int64_t *) member);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        sp_buf_appendf(out, "\"%llu\"",
            (unsigned long long) *(const uint64_t *) member);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        sp_buf_append_str(out,
            *(const protobuf_c_boolean *) member ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        put_float(*(const float *) member, 1, out);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        put_float(*(const double *) member, 0, out);
        break;
    case PROTOBUF_C_TYPE_STRING:
        s = *(char *const *) member;
        if (s == NULL)
            s = "";
        put_string(s, strlen(s), out);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        /* OTLP's exception to the protobuf JSON mapping: ids are hex. */
        if (is_id_field(f->name))
            put_hex(member, out);
        else
            put_base64(member, out);
        break;
    case PROTOBUF_C_TYPE_MESSAGE:
        if (*(ProtobufCMessage *const *) member)
            encode_message(*(ProtobufCMessage *const *) member, out);
        else
            sp_buf_append(out, "null", 4);
        break;
    }
}

static size_t
elem_size(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* proto3 implicit presence: the default value is not written. */
static int
is_default(const ProtobufCFieldDescriptor *f, const void *member)
{
    const char *s;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return *(const uint32_t *) member == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return *(const uint64_t *) member == 0;
    case PROTOBUF_C_TYPE_ENUM:
        return *(const int *) member == 0;
    case PROTOBUF_C_TYPE_BOOL:
        return !*(const protobuf_c_boolean *) member;
    case PROTOBUF_C_TYPE_FLOAT:
        return *(const float *) member == 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return *(const double *) member == 0;
    case PROTOBUF_C_TYPE_STRING:
        s = *(char *const *) member;
        return s == NULL || s[0] == '\0';
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *) member)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(ProtobufCMessage *const *) member == NULL;
    }
    return 1;
}

/* Whether a non-repeated field is present, following protobuf-c's own
 * packing rules for each label. */
static int
is_present(const ProtobufCFieldDescriptor *f, const uint8_t *base,
    const void *member)
{
    int pointer = f->type == PROTOBUF_C_TYPE_STRING
               || f->type == PROTOBUF_C_TYPE_MESSAGE;

    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        /* The set member is written even when it holds the default. */
        if (*(const uint32_t *) (base + f->quantifier_offset) != f->id)
            return 0;
        return !pointer || *(void *const *) member != NULL;
    }

    switch (f->label) {
    case PROTOBUF_C_LABEL_REQUIRED:
        return !pointer || *(void *const *) member != NULL;
    case PROTOBUF_C_LABEL_OPTIONAL:
        /* Explicit presence: pointers by non-NULL, others by has_. */
        if (pointer)
            return *(void *const *) member != NULL
                && *(void *const *) member != f->default_value;
        return *(const protobuf_c_boolean *) (base + f->quantifier_offset);
    default:
        return !is_default(f, member);
    }
}

static void
encode_message(const ProtobufCMessage *msg, sp_buf_t *out)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    const uint8_t                    *base = (const uint8_t *) msg;
    const ProtobufCFieldDescriptor   *f;
    const uint8_t                    *arr;
    const void                       *member;
    unsigned                          i;
    size_t                            n, j, sz;
    int                               first = 1;

    sp_buf_append_char(out, '{');
    for (i = 0; i < d->n_fields; i++) {
        f = &d->fields[i];
        member = base + f->offset;

        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(const size_t *) (base + f->quantifier_offset);
            if (n == 0)
                continue;
            if (!first)
                sp_buf_append_char(out, ',');
            first = 0;
            put_key(f->name, out);
            sp_buf_append_char(out, '[');
            arr = *(const uint8_t *const *) member;
            sz = elem_size(f->type);
            for (j = 0; j < n; j++) {
                if (j)
                    sp_buf_append_char(out, ',');
                put_value(f, arr + j * sz, out);
            }
            sp_buf_append_char(out, ']');
            continue;
        }

        if (!is_present(f, base, member))
            continue;
        if (!first)
            sp_buf_append_char(out, ',');
        first = 0;
        put_key(f->name, out);
        put_value(f, member, out);
    }
    sp_buf_append_char(out, '}');
}

int
sp_otlp_json_encode(const ProtobufCMessage *msg, sp_buf_t *out)
{
    encode_message(msg, out);
    return sp_buf_failed(out) ? -1 : 0;
}
