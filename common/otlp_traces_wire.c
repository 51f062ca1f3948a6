/*
 * ExportTraceServiceRequest written straight from the span records to the
 * protobuf wire format: no message tree, no copies of the strings. This is
 * the exporter thread's hot loop (it runs on the worker's core), so it
 * writes each span in one pass. Field numbers are those of
 * proto/opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto;
 * the tests decode what it writes with protoc.
 */

#include <string.h>

#include "opentelemetry/proto/resource/v1/resource.pb-c.h"

#include "otlp_common.h"
#include "otlp_traces.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

#define TAG(field, wt)  (((field) << 3) | (wt))

/* Span.flags bits (SpanFlags in trace.proto). */
#define SPAN_FLAGS_HAS_IS_REMOTE  0x100
#define SPAN_FLAGS_IS_REMOTE      0x200

static size_t
vsize(uint64_t v)
{
    size_t  n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A length-delimited field of content size n, with a one-byte tag. */
static size_t
lsize(size_t n)
{
    return 1 + vsize(n) + n;
}

static uint8_t *
put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t) (v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t) v;
    return p;
}

/* Most strings here are short (ids, keys, methods, ports): copied inline
 * with two overlapping fixed-size moves instead of a call to memcpy. */
static inline void
copy_bytes(uint8_t *dst, const void *src, size_t n)
{
    const uint8_t  *s = src;

    if (n > 16 && n <= 32) {
        memcpy(dst, s, 16);
        memcpy(dst + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n <= 16) {
        memcpy(dst, s, 8);
        memcpy(dst + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(dst, s, 4);
        memcpy(dst + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        while (n--) {
            *dst++ = *s++;
        }
    } else {
        memcpy(dst, s, n);
    }
}

static inline uint8_t *
put_len(uint8_t *p, unsigned tag, const void *data, size_t n)
{
    *p++ = (uint8_t) tag;
    p = put_varint(p, n);
    copy_bytes(p, data, n);
    return p + n;
}

static uint8_t *
put_fixed64(uint8_t *p, unsigned tag, uint64_t v)
{
    *p++ = (uint8_t) tag;
    memcpy(p, &v, 8);           /* little-endian hosts only (x86_64, arm64) */
    return p + 8;
}

/* ---- sizes ---------------------------------------------------------------- */

static size_t
any_size(const sp_attr_t *a)
{
    switch (a->type) {
    case SP_ATTR_INT:
        return 1 + vsize((uint64_t) a->v.i);
    case SP_ATTR_BOOL:
        return 2;
    case SP_ATTR_DOUBLE:
        return 9;
    default:
        return lsize(a->str_len);
    }
}

static size_t
attrs_size(const sp_span_t *s, unsigned owner)
{
    size_t  i, n = 0;

    for (i = 0; i < s->nattrs; i++) {
        if (s->attrs[i].owner == owner) {
            n += lsize(lsize(s->attrs[i].key_len)
                       + lsize(any_size(&s->attrs[i])));
        }
    }
    return n;
}

/* Events are rare (one per retried upstream attempt): measured first. */
static size_t
event_size(const sp_span_t *s, unsigned i)
{
    size_t  n = 9 + attrs_size(s, SP_OWNER_EVENT(i));

    if (s->events[i].name_len) {
        n += lsize(s->events[i].name_len);
    }
    if (s->dropped_event_attrs[i]) {
        n += 1 + vsize(s->dropped_event_attrs[i]);
    }
    return n;
}

static size_t
status_size(const sp_span_t *s)
{
    return (s->status_msg_len ? lsize(s->status_msg_len) : 0)
           + (s->status_code ? 2 : 0);
}

/* An upper bound of a span's encoded size, its tag and length included:
 * every string once, plus at most 24 bytes of tags, lengths and numbers
 * per attribute or event and 128 for the fixed fields. */
static size_t
span_bound(const sp_span_t *s)
{
    size_t  i, n = 128 + s->arena_used + 24 * (s->nattrs + s->nevents);

    for (i = 0; i < s->nattrs; i++) {
        if (s->attrs[i].key != NULL) {
            n += s->attrs[i].key_len;
        }
    }
    return n;
}

/* ---- writing -------------------------------------------------------------- */

static uint8_t *
put_attrs(uint8_t *p, const sp_span_t *s, unsigned owner, unsigned tag)
{
    size_t            i, any;
    const sp_attr_t  *a;

    for (i = 0; i < s->nattrs; i++) {
        a = &s->attrs[i];
        if (a->owner != owner) {
            continue;
        }
        any = any_size(a);
        *p++ = (uint8_t) tag;
        p = put_varint(p, lsize(a->key_len) + lsize(any));
        p = put_len(p, TAG(1, WT_LEN), sp_attr_key(s, a), a->key_len);
        *p++ = TAG(2, WT_LEN);
        p = put_varint(p, any);
        switch (a->type) {
        case SP_ATTR_INT:
            *p++ = TAG(3, WT_VARINT);
            p = put_varint(p, (uint64_t) a->v.i);
            break;
        case SP_ATTR_BOOL:
            *p++ = TAG(2, WT_VARINT);
            *p++ = a->v.b ? 1 : 0;
            break;
        case SP_ATTR_DOUBLE:
            p = put_fixed64(p, TAG(4, WT_I64), 0);
            memcpy(p - 8, &a->v.d, 8);
            break;
        default:
            p = put_len(p, TAG(1, WT_LEN), s->arena + a->str_off, a->str_len);
        }
    }
    return p;
}

static uint8_t *
put_span(uint8_t *p, const sp_span_t *s)
{
    uint32_t  flags;
    unsigned  i;

    p = put_len(p, TAG(1, WT_LEN), s->trace_id, SP_TRACE_ID_LEN);
    p = put_len(p, TAG(2, WT_LEN), s->span_id, SP_SPAN_ID_LEN);
    if (s->tracestate_len) {
        p = put_len(p, TAG(3, WT_LEN), s->arena + s->tracestate_off,
                    s->tracestate_len);
    }
    if (s->has_parent) {
        p = put_len(p, TAG(4, WT_LEN), s->parent_span_id, SP_SPAN_ID_LEN);
    }
    if (s->name_len) {
        p = put_len(p, TAG(5, WT_LEN), s->arena + s->name_off, s->name_len);
    }
    if (s->kind) {
        *p++ = TAG(6, WT_VARINT);
        *p++ = s->kind;
    }
    p = put_fixed64(p, TAG(7, WT_I64), s->start_ns);
    p = put_fixed64(p, TAG(8, WT_I64), s->end_ns);
    p = put_attrs(p, s, SP_OWNER_SPAN, TAG(9, WT_LEN));
    if (s->dropped_attrs) {
        *p++ = TAG(10, WT_VARINT);
        p = put_varint(p, s->dropped_attrs);
    }
    for (i = 0; i < s->nevents; i++) {
        *p++ = TAG(11, WT_LEN);
        p = put_varint(p, event_size(s, i));
        p = put_fixed64(p, TAG(1, WT_I64), s->events[i].time_ns);
        if (s->events[i].name_len) {
            p = put_len(p, TAG(2, WT_LEN), s->arena + s->events[i].name_off,
                        s->events[i].name_len);
        }
        p = put_attrs(p, s, SP_OWNER_EVENT(i), TAG(3, WT_LEN));
        if (s->dropped_event_attrs[i]) {
            *p++ = TAG(4, WT_VARINT);
            p = put_varint(p, s->dropped_event_attrs[i]);
        }
    }
    if (s->dropped_events) {
        *p++ = TAG(12, WT_VARINT);
        p = put_varint(p, s->dropped_events);
    }
    if (s->status_code || s->status_msg_len) {
        *p++ = TAG(15, WT_LEN);
        p = put_varint(p, status_size(s));
        if (s->status_msg_len) {
            p = put_len(p, TAG(2, WT_LEN), s->arena + s->status_msg_off,
                        s->status_msg_len);
        }
        if (s->status_code) {
            *p++ = TAG(3, WT_VARINT);
            *p++ = s->status_code;
        }
    }
    /* Field 16 needs a two-byte tag. */
    flags = s->trace_flags | SPAN_FLAGS_HAS_IS_REMOTE
            | (s->parent_is_remote ? SPAN_FLAGS_IS_REMOTE : 0);
    p = put_varint(p, TAG(16, WT_I32));
    memcpy(p, &flags, 4);
    return p + 4;
}

/* A span is written in one pass, its length known only afterwards: the
 * body goes after room for the length varint of its upper bound, and in the
 * rare case that the real length needs a shorter varint it moves back to
 * sit right after it. */

int
sp_otlp_traces_encode(sp_arena_t *a, const sp_resource_t *res,
    sp_span_t *const *spans, size_t n, sp_buf_t *out)
{
    Opentelemetry__Proto__Resource__V1__Resource  *r;
    Opentelemetry__Proto__Common__V1__InstrumentationScope  *scope;
    size_t     i, res_len, scope_len, head_len, spans_len, ss_len, rs_len;
    size_t     len, base, bound;
    uint8_t   *p, *body, *q, head[32];

    /* The resource and scope are a few dozen bytes a batch: protobuf-c. */
    r = sp_otlp_resource(a, res);
    scope = sp_otlp_scope(a);
    if (r == NULL || scope == NULL) {
        return -1;
    }
    res_len = protobuf_c_message_get_packed_size(&r->base);
    scope_len = protobuf_c_message_get_packed_size(&scope->base);

    /* The spans first, leaving room for the headers in front of them,
     * whose lengths depend on the spans. */
    head_len = 3 * (1 + 10) + lsize(res_len) + 1 + 10;
    base = out->len;
    if (sp_buf_reserve(out, head_len + res_len + scope_len) != 0) {
        return -1;
    }
    out->len += head_len + res_len + scope_len;
    spans_len = 0;
    for (i = 0; i < n; i++) {
        bound = span_bound(spans[i]);
        if (sp_buf_reserve(out, bound) != 0) {
            out->len = base;
            return -1;
        }
        p = out->data + out->len;
        *p++ = TAG(2, WT_LEN);          /* ScopeSpans.spans */
        body = p + vsize(bound);
        len = (size_t) (put_span(body, spans[i]) - body);
        q = put_varint(p, len);
        if (q != body) {
            memmove(q, body, len);
        }
        spans_len += (size_t) (q + len - (out->data + out->len));
        out->len += (size_t) (q + len - (out->data + out->len));
    }

    /* ExportTraceServiceRequest.resource_spans { resource, scope_spans {
     * scope, spans... } }, written into head[] and the resource and scope
     * packed after it, then moved to sit right before the spans. */
    ss_len = lsize(scope_len) + spans_len;
    rs_len = lsize(res_len) + lsize(ss_len);
    q = head;
    *q++ = TAG(1, WT_LEN);              /* resource_spans */
    q = put_varint(q, rs_len);
    *q++ = TAG(1, WT_LEN);              /* .resource */
    q = put_varint(q, res_len);
    len = (size_t) (q - head);
    p = out->data + base;
    memcpy(p, head, len);
    p += len;
    p += protobuf_c_message_pack(&r->base, p);
    q = head;
    *q++ = TAG(2, WT_LEN);              /* .scope_spans */
    q = put_varint(q, ss_len);
    *q++ = TAG(1, WT_LEN);              /* ..scope */
    q = put_varint(q, scope_len);
    memcpy(p, head, (size_t) (q - head));
    p += q - head;
    p += protobuf_c_message_pack(&scope->base, p);
    body = out->data + base + head_len + res_len + scope_len;
    if (p != body) {
        memmove(p, body, spans_len);
    }
    out->len = (size_t) (p - out->data) + spans_len;
    return out->len - base == lsize(rs_len) ? 0 : -1;
}
