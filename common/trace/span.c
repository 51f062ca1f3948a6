/*
 * Spans written to the protobuf wire format as they are built (see span.h).
 * Field numbers are those of proto/opentelemetry/proto/trace/v1/trace.proto
 * (Span, Span.Event, Status) and common/v1/common.proto (KeyValue,
 * AnyValue); the tests decode what this writes with protoc and protobuf-c.
 */

#include <stddef.h>
#include <string.h>

#include "common/trace/span.h"
#include "common/export/wire.h"

/* Span.flags bits (SpanFlags in trace.proto). */
#define SPAN_FLAGS_HAS_IS_REMOTE  0x100
#define SPAN_FLAGS_IS_REMOTE      0x200

void
sp_span_init(sp_span_t *s, int kind, const uint8_t trace_id[16],
    const uint8_t span_id[8], const uint8_t *parent_span_id,
    int parent_is_remote, uint8_t trace_flags, uint64_t start_ns)
{
    /* Only the counts and offsets are cleared, a few stores (a memset of
     * the whole header was a call into libc per span): the storage is
     * bounded by the counts, the parent id is read only with has_parent,
     * and an event's dropped count is reset when the event is added. */
    memset(&s->name_off, 0,
           offsetof(sp_span_t, dropped_event_attrs)
           - offsetof(sp_span_t, name_off));
    s->wire = s->place != NULL ? s->place : s->wire_store;
    memcpy(s->trace_id, trace_id, SP_TRACE_ID_LEN);
    memcpy(s->span_id, span_id, SP_SPAN_ID_LEN);
    s->has_parent = 0;
    s->parent_is_remote = 0;
    s->status_code = 0;
    if (parent_span_id != NULL) {
        memcpy(s->parent_span_id, parent_span_id, SP_SPAN_ID_LEN);
        s->has_parent = 1;
        s->parent_is_remote = (uint8_t) (parent_is_remote != 0);
    }
    s->kind = (uint8_t) kind;
    s->trace_flags = trace_flags;
    s->start_ns = start_ns;
    s->end_ns = start_ns;
}

/* Copies up to SP_SPAN_MAX_VALUE bytes into text[]; returns the offset, or
 * -1 when there is no room. */
static int
text_put(sp_span_t *s, const char *p, size_t *len)
{
    int  off;

    if (*len > SP_SPAN_MAX_VALUE) {
        *len = SP_SPAN_MAX_VALUE;
    }
    if (*len > (size_t) (SP_SPAN_TEXT - s->text_used)) {
        return -1;
    }
    off = s->text_used;
    memcpy(s->text + off, p, *len);
    s->text_used += (uint16_t) *len;
    return off;
}

static void
set_text(sp_span_t *s, uint16_t *off, uint16_t *len, const char *p, size_t n)
{
    int  o = text_put(s, p, &n);

    *off = (uint16_t) (o < 0 ? 0 : o);
    *len = (uint16_t) (o < 0 ? 0 : n);
}

void
sp_span_set_name(sp_span_t *s, const char *name, size_t len)
{
    s->name_ref = NULL;
    set_text(s, &s->name_off, &s->name_len, name, len);
}

void
sp_span_set_tracestate(sp_span_t *s, const char *ts, size_t len)
{
    set_text(s, &s->tracestate_off, &s->tracestate_len, ts, len);
}

void
sp_span_set_status(sp_span_t *s, int code, const char *msg, size_t len)
{
    s->status_code = (uint8_t) code;
    if (msg != NULL && len > 0) {
        set_text(s, &s->status_msg_off, &s->status_msg_len, msg, len);
    }
}

static void
count_drop(sp_span_t *s, unsigned owner)
{
    if (owner == SP_OWNER_SPAN) {
        s->dropped_attrs++;
    } else if (owner - 1 < SP_SPAN_MAX_EVENTS) {
        s->dropped_event_attrs[owner - 1]++;
    }
}

/* Reserves one encoded attribute whose AnyValue content takes `any` bytes
 * and writes everything up to that content: the Span.attributes (or
 * Event.attributes) tag and length, the key, the AnyValue tag and length.
 * Returns where the content goes, or NULL when the attribute is dropped. */
static uint8_t *
attr_begin(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    size_t any)
{
    size_t            kv, total;
    uint8_t          *p;
    sp_event_attr_t  *ea;

    if (klen > SP_SPAN_MAX_VALUE) {
        count_drop(s, owner);
        return NULL;
    }
    kv = sp_wire_lsize(klen) + sp_wire_lsize(any);
    total = sp_wire_lsize(kv);

    if (owner == SP_OWNER_SPAN) {
        if (s->nattrs == SP_SPAN_MAX_ATTRS
            || total > (size_t) (SP_SPAN_WIRE - s->wire_used))
        {
            s->dropped_attrs++;
            return NULL;
        }
        p = s->wire + s->wire_used;
        s->wire_used += (uint16_t) total;
        s->nattrs++;
        *p++ = SP_TAG(9, SP_WT_LEN);

    } else {
        if (owner > s->nevents || s->nev_attrs == SP_SPAN_MAX_EV_ATTRS
            || total > (size_t) (SP_SPAN_EV_WIRE - s->ev_wire_used))
        {
            count_drop(s, owner);
            return NULL;
        }
        ea = &s->ev_attrs[s->nev_attrs++];
        ea->off = s->ev_wire_used;
        ea->len = (uint16_t) total;
        ea->owner = (uint8_t) owner;
        p = s->ev_wire + s->ev_wire_used;
        s->ev_wire_used += (uint16_t) total;
        *p++ = SP_TAG(3, SP_WT_LEN);
    }
    p = sp_wire_varint(p, kv);
    p = sp_wire_bytes(p, SP_TAG(1, SP_WT_LEN), key, klen);
    *p++ = SP_TAG(2, SP_WT_LEN);
    return sp_wire_varint(p, any);
}

int
sp_span_attr_str(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    const char *val, size_t vlen)
{
    uint8_t  *p;

    if (vlen > SP_SPAN_MAX_VALUE) {
        vlen = SP_SPAN_MAX_VALUE;
    }
    p = attr_begin(s, owner, key, klen, sp_wire_lsize(vlen));
    if (p == NULL) {
        return -1;
    }
    sp_wire_bytes(p, SP_TAG(1, SP_WT_LEN), val, vlen);   /* string_value */
    return 0;
}

int
sp_span_attr_int(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int64_t val)
{
    uint8_t  *p = attr_begin(s, owner, key, klen,
                             1 + sp_wire_vsize((uint64_t) val));

    if (p == NULL) {
        return -1;
    }
    *p++ = SP_TAG(3, SP_WT_VARINT);                         /* int_value */
    sp_wire_varint(p, (uint64_t) val);
    return 0;
}

int
sp_span_attr_bool(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int val)
{
    uint8_t  *p = attr_begin(s, owner, key, klen, 2);

    if (p == NULL) {
        return -1;
    }
    p[0] = SP_TAG(2, SP_WT_VARINT);                         /* bool_value */
    p[1] = val != 0;
    return 0;
}

int
sp_span_attr_double(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, double val)
{
    uint8_t   *p = attr_begin(s, owner, key, klen, 9);
    uint64_t   bits;

    if (p == NULL) {
        return -1;
    }
    memcpy(&bits, &val, 8);
    sp_wire_fixed64(p, SP_TAG(4, SP_WT_I64), bits);         /* double_value */
    return 0;
}

sp_span_attrs_t
sp_span_attrs_str_slow(sp_span_t *s, sp_span_attrs_t a, const char *key,
    size_t klen, const char *val, size_t vlen)
{
    sp_span_attrs_close(s, a);
    (void) sp_span_attr_str(s, SP_OWNER_SPAN, key, klen, val, vlen);
    return sp_span_attrs_open(s);
}

size_t
sp_span_kv_str_encode(uint8_t *buf, size_t cap, const char *key,
    size_t klen, const char *val, size_t vlen)
{
    size_t    any = vlen + 2, total = klen + any + 6;
    uint8_t  *p;

    if (vlen >= 120 || klen + any > 123 || total > cap) {
        return 0;
    }
    p = sp_span_kv_head(buf, key, klen, any);
    p[0] = SP_TAG(1, SP_WT_LEN);            /* AnyValue.string_value */
    p[1] = (uint8_t) vlen;
    memcpy(p + 2, val, vlen);
    return total;
}

size_t
sp_span_kv_int_encode(uint8_t *buf, size_t cap, const char *key,
    size_t klen, int64_t val)
{
    size_t    any = 1 + sp_wire_vsize((uint64_t) val), total = klen + any + 6;
    uint8_t  *p;

    if (klen + any > 123 || total > cap) {
        return 0;
    }
    p = sp_span_kv_head(buf, key, klen, any);
    p[0] = SP_TAG(3, SP_WT_VARINT);         /* AnyValue.int_value */
    sp_wire_varint(p + 1, (uint64_t) val);
    return total;
}

sp_span_attrs_t
sp_span_attrs_int_slow(sp_span_t *s, sp_span_attrs_t a, const char *key,
    size_t klen, int64_t val)
{
    sp_span_attrs_close(s, a);
    (void) sp_span_attr_int(s, SP_OWNER_SPAN, key, klen, val);
    return sp_span_attrs_open(s);
}

static const uint8_t *
read_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    unsigned  shift;

    *v = 0;
    for (shift = 0; p < end && shift < 64; shift += 7) {
        *v |= (uint64_t) (*p & 0x7f) << shift;
        if (!(*p++ & 0x80)) {
            return p;
        }
    }
    return NULL;
}

int
sp_span_attr_set_str(sp_span_t *s, const char *key, size_t klen,
    const char *val, size_t vlen)
{
    const uint8_t  *p, *q, *end = s->wire + s->wire_used;
    uint64_t        kv, kl;
    size_t          at, len;

    /* Each entry: tag, KeyValue length, then the key field first. */
    for (p = s->wire; p < end; p = q + kv) {
        q = read_varint(p + 1, end, &kv);
        if (q == NULL || kv > (uint64_t) (end - q)) {
            break;
        }
        if (q[0] != SP_TAG(1, SP_WT_LEN)
            || read_varint(q + 1, q + kv, &kl) == NULL || kl != klen
            || memcmp(q + 1 + sp_wire_vsize(kl), key, klen) != 0)
        {
            continue;
        }
        at = (size_t) (p - s->wire);
        len = (size_t) (q + kv - p);
        memmove(s->wire + at, s->wire + at + len, s->wire_used - at - len);
        s->wire_used -= (uint16_t) len;
        /* Nothing stays written past the attributes: a span built in a
         * queue slot must leave the slot's unused end zero. */
        memset(s->wire + s->wire_used, 0, len);
        s->nattrs--;
        break;
    }
    return sp_span_attr_str(s, SP_OWNER_SPAN, key, klen, val, vlen);
}

int
sp_span_add_event(sp_span_t *s, const char *name, size_t len,
    uint64_t time_ns)
{
    sp_event_t  *ev;
    int          off;

    if (s->nevents == SP_SPAN_MAX_EVENTS) {
        s->dropped_events++;
        return -1;
    }
    off = text_put(s, name, &len);
    if (off < 0) {
        s->dropped_events++;
        return -1;
    }
    ev = &s->events[s->nevents];
    ev->time_ns = time_ns;
    ev->name_off = (uint16_t) off;
    ev->name_len = (uint16_t) len;
    s->dropped_event_attrs[s->nevents] = 0;
    return s->nevents++;
}

/* ---- the Span message ------------------------------------------------------ */

static size_t
event_size(const sp_span_t *s, unsigned i)
{
    size_t    n = 9, k;

    if (s->events[i].name_len) {
        n += sp_wire_lsize(s->events[i].name_len);
    }
    for (k = 0; k < s->nev_attrs; k++) {
        if (s->ev_attrs[k].owner == i + 1) {
            n += s->ev_attrs[k].len;
        }
    }
    if (s->dropped_event_attrs[i]) {
        n += 1 + sp_wire_vsize(s->dropped_event_attrs[i]);
    }
    return n;
}

static size_t
status_size(const sp_span_t *s)
{
    return (s->status_msg_len ? sp_wire_lsize(s->status_msg_len) : 0)
           + (s->status_code ? 2 : 0);
}

size_t
sp_span_encoded_size(const sp_span_t *s)
{
    size_t    n;
    unsigned  i;

    n = sp_wire_lsize(SP_TRACE_ID_LEN) + sp_wire_lsize(SP_SPAN_ID_LEN)
        + 9 + 9 + s->wire_used + 2 + 4;
    if (s->tracestate_len) {
        n += sp_wire_lsize(s->tracestate_len);
    }
    if (s->has_parent) {
        n += sp_wire_lsize(SP_SPAN_ID_LEN);
    }
    if (s->name_len) {
        n += sp_wire_lsize(s->name_len);
    }
    if (s->kind) {
        n += 2;
    }
    if (s->dropped_attrs) {
        n += 1 + sp_wire_vsize(s->dropped_attrs);
    }
    for (i = 0; i < s->nevents; i++) {
        n += sp_wire_lsize(event_size(s, i));
    }
    if (s->dropped_events) {
        n += 1 + sp_wire_vsize(s->dropped_events);
    }
    if (s->status_code || s->status_msg_len) {
        n += sp_wire_lsize(status_size(s));
    }
    return n;
}

/* Fields 1 to 8: ids, tracestate, name, kind, times. */
static uint8_t *
encode_head(const sp_span_t *s, uint8_t *p)
{
    p = sp_wire_bytes(p, SP_TAG(1, SP_WT_LEN), s->trace_id, SP_TRACE_ID_LEN);
    p = sp_wire_bytes(p, SP_TAG(2, SP_WT_LEN), s->span_id, SP_SPAN_ID_LEN);
    if (s->tracestate_len) {
        p = sp_wire_bytes(p, SP_TAG(3, SP_WT_LEN),
                          s->text + s->tracestate_off, s->tracestate_len);
    }
    if (s->has_parent) {
        p = sp_wire_bytes(p, SP_TAG(4, SP_WT_LEN), s->parent_span_id,
                          SP_SPAN_ID_LEN);
    }
    if (s->name_len) {
        p = sp_wire_bytes(p, SP_TAG(5, SP_WT_LEN),
                          s->name_ref != NULL ? s->name_ref
                                              : s->text + s->name_off,
                          s->name_len);
    }
    if (s->kind) {
        *p++ = SP_TAG(6, SP_WT_VARINT);
        *p++ = s->kind;
    }
    p = sp_wire_fixed64(p, SP_TAG(7, SP_WT_I64), s->start_ns);
    return sp_wire_fixed64(p, SP_TAG(8, SP_WT_I64), s->end_ns);
}

/* Fields 10 to 16: what follows the attributes. */
static uint8_t *
encode_tail(const sp_span_t *s, uint8_t *p)
{
    uint32_t  flags;
    unsigned  i, k;

    if (s->dropped_attrs) {
        *p++ = SP_TAG(10, SP_WT_VARINT);
        p = sp_wire_varint(p, s->dropped_attrs);
    }
    for (i = 0; i < s->nevents; i++) {
        *p++ = SP_TAG(11, SP_WT_LEN);
        p = sp_wire_varint(p, event_size(s, i));
        p = sp_wire_fixed64(p, SP_TAG(1, SP_WT_I64), s->events[i].time_ns);
        if (s->events[i].name_len) {
            p = sp_wire_bytes(p, SP_TAG(2, SP_WT_LEN),
                              s->text + s->events[i].name_off,
                              s->events[i].name_len);
        }
        for (k = 0; k < s->nev_attrs; k++) {
            if (s->ev_attrs[k].owner == i + 1) {
                memcpy(p, s->ev_wire + s->ev_attrs[k].off, s->ev_attrs[k].len);
                p += s->ev_attrs[k].len;
            }
        }
        if (s->dropped_event_attrs[i]) {
            *p++ = SP_TAG(4, SP_WT_VARINT);
            p = sp_wire_varint(p, s->dropped_event_attrs[i]);
        }
    }
    if (s->dropped_events) {
        *p++ = SP_TAG(12, SP_WT_VARINT);
        p = sp_wire_varint(p, s->dropped_events);
    }
    if (s->status_code || s->status_msg_len) {
        *p++ = SP_TAG(15, SP_WT_LEN);
        p = sp_wire_varint(p, status_size(s));
        if (s->status_msg_len) {
            p = sp_wire_bytes(p, SP_TAG(2, SP_WT_LEN),
                              s->text + s->status_msg_off, s->status_msg_len);
        }
        if (s->status_code) {
            *p++ = SP_TAG(3, SP_WT_VARINT);
            *p++ = s->status_code;
        }
    }
    /* Field 16 needs a two-byte tag. */
    flags = s->trace_flags | SPAN_FLAGS_HAS_IS_REMOTE
            | (s->parent_is_remote ? SPAN_FLAGS_IS_REMOTE : 0);
    p = sp_wire_varint(p, SP_TAG(16, SP_WT_I32));
    memcpy(p, &flags, 4);
    return p + 4;
}

uint8_t *
sp_span_encode(const sp_span_t *s, uint8_t *p)
{
    p = encode_head(s, p);
    memcpy(p, s->wire, s->wire_used);
    return encode_tail(s, p + s->wire_used);
}

uint8_t *
sp_span_encode_rest(const sp_span_t *s, uint8_t *p)
{
    return encode_tail(s, encode_head(s, p));
}
