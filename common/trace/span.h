#ifndef SP_SPAN_H
#define SP_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"
#include "common/export/wire.h"

/* A span as the worker builds it: written straight to the protobuf wire
 * format as it goes, so that what reaches the exporter is already
 * encoded and batching is a copy. Span attributes are appended to wire[] as
 * encoded Span.attributes fields; the name, tracestate and status message
 * wait in text[], and events (rare: one per retried upstream attempt) with
 * their attributes in events[] and ev_wire[], until sp_span_encode() writes
 * the whole Span message in field order. No heap allocation: each thread
 * builds its spans in one sp_span_t (the exporter's per-thread scratch).
 * What does not fit is dropped and counted (dropped_attributes_count /
 * dropped_events_count); a string longer than SP_SPAN_MAX_VALUE is
 * truncated. */

#define SP_SPAN_MAX_ATTRS      40
#define SP_SPAN_MAX_EVENTS     8
#define SP_SPAN_MAX_EV_ATTRS   32
#define SP_SPAN_MAX_VALUE      512
#define SP_SPAN_WIRE           4096    /* encoded span attributes */
#define SP_SPAN_EV_WIRE        1024    /* encoded event attributes */
#define SP_SPAN_TEXT           2048    /* name, tracestate, status, events */

enum { SP_SPAN_KIND_INTERNAL = 1, SP_SPAN_KIND_SERVER = 2,
       SP_SPAN_KIND_CLIENT = 3 };
enum { SP_STATUS_UNSET = 0, SP_STATUS_OK = 1, SP_STATUS_ERROR = 2 };

/* Owner of an attribute: the span itself or one of its events. */
#define SP_OWNER_SPAN  0
#define SP_OWNER_EVENT(i)  ((i) + 1)

typedef struct {
    uint64_t  time_ns;
    uint16_t  name_off;
    uint16_t  name_len;
} sp_event_t;

/* An encoded event attribute (Event.attributes field) in ev_wire[]. */
typedef struct {
    uint16_t  off;
    uint16_t  len;
    uint8_t   owner;
} sp_event_attr_t;

typedef struct {
    uint8_t     trace_id[SP_TRACE_ID_LEN];
    uint8_t     span_id[SP_SPAN_ID_LEN];
    uint8_t     parent_span_id[SP_SPAN_ID_LEN];
    uint8_t     has_parent;
    uint8_t     parent_is_remote;
    uint8_t     kind;
    uint8_t     status_code;
    uint8_t     trace_flags;
    uint64_t    start_ns;
    uint64_t    end_ns;

    uint16_t    name_off, name_len;
    uint16_t    tracestate_off, tracestate_len;
    uint16_t    status_msg_off, status_msg_len;
    uint16_t    text_used;

    uint16_t    nattrs;             /* span attributes in wire[] */
    uint16_t    wire_used;
    uint16_t    nevents;
    uint16_t    nev_attrs;
    uint16_t    ev_wire_used;
    uint16_t    dropped_attrs;
    uint16_t    dropped_events;
    /* The name when kept by reference (sp_span_set_name_ref), else NULL:
     * then it is in text[]. */
    const char *name_ref;
    uint16_t    dropped_event_attrs[SP_SPAN_MAX_EVENTS];

    /* Where the encoded attributes go (SP_SPAN_WIRE bytes): wire_store, or
     * `place` when the span's owner set one before sp_span_init (the
     * exporter: straight into a queue slot, so that the span is written
     * once, where it is sent). */
    uint8_t    *wire;
    uint8_t    *place;

    /* Storage, bounded by the counts above (never cleared). */
    sp_event_t       events[SP_SPAN_MAX_EVENTS];
    sp_event_attr_t  ev_attrs[SP_SPAN_MAX_EV_ATTRS];
    char             text[SP_SPAN_TEXT];
    uint8_t          ev_wire[SP_SPAN_EV_WIRE];
    uint8_t          wire_store[SP_SPAN_WIRE];
} sp_span_t;

/* The most bytes sp_span_encode_rest() writes: the text, the event
 * attributes, and every other field at its largest. */
#define SP_SPAN_REST_MAX  (SP_SPAN_TEXT + SP_SPAN_EV_WIRE + 1536)

/* The encoded Span message: its exact size, and the writer (p has room
 * for sp_span_encoded_size() bytes; returns the end). */
size_t sp_span_encoded_size(const sp_span_t *s);
uint8_t *sp_span_encode(const sp_span_t *s, uint8_t *p);

/* A span whose attributes are in place (s->wire): every other field,
 * written after them at s->wire + s->wire_used; returns the end. The
 * Span message is then the attributes followed by these (protobuf fields
 * may come in any order). At most SP_SPAN_REST_MAX bytes. */
uint8_t *sp_span_encode_rest(const sp_span_t *s, uint8_t *p);

/* Resets the record and sets its identity; parent may be NULL (root span).
 * A span not made by the exporter must have place NULL (zeroed memory). */
void sp_span_init(sp_span_t *s, int kind, const uint8_t trace_id[16],
    const uint8_t span_id[8], const uint8_t *parent_span_id,
    int parent_is_remote, uint8_t trace_flags, uint64_t start_ns);

void sp_span_set_name(sp_span_t *s, const char *name, size_t len);
void sp_span_set_tracestate(sp_span_t *s, const char *ts, size_t len);
void sp_span_set_status(sp_span_t *s, int code, const char *msg, size_t len);

/* Attributes of the span (owner SP_OWNER_SPAN) or of event i
 * (SP_OWNER_EVENT(i)). Return 0, or -1 when dropped for lack of room. */
int sp_span_attr_str(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, const char *val, size_t vlen);
int sp_span_attr_int(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, int64_t val);
int sp_span_attr_bool(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, int val);
int sp_span_attr_double(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, double val);

/* Always inlined where the key is a literal: its tag, length and bytes are
 * then constants, stored with a few immediate moves, and the call is gone.
 * Left to itself gcc made one out-of-line copy of the string form for all
 * a span's attributes, which copied every key with a call to memcpy. */
#define SP_SPAN_INLINE  static inline __attribute__((always_inline))

/* A span attribute's header at p, lengths that fit one-byte varints
 * (klen + any <= 123): Span.attributes, the KeyValue's key, the tag and
 * length of its value; returns where the AnyValue content goes. */
SP_SPAN_INLINE uint8_t *
sp_span_kv_head(uint8_t *p, const char *key, size_t klen, size_t any)
{
    p[0] = SP_TAG(9, SP_WT_LEN);            /* Span.attributes */
    p[1] = (uint8_t) (klen + any + 4);
    p[2] = SP_TAG(1, SP_WT_LEN);            /* KeyValue.key */
    p[3] = (uint8_t) klen;
    memcpy(p + 4, key, klen);
    p += 4 + klen;
    p[0] = SP_TAG(2, SP_WT_LEN);            /* KeyValue.value */
    p[1] = (uint8_t) any;
    return p + 2;
}

/* The fast path of the two below: a span attribute whose lengths all fit
 * one-byte varints (nearly every one) is written inline, up to its
 * AnyValue content; NULL sends the caller to the general path, which also
 * counts what it drops. */
SP_SPAN_INLINE uint8_t *
sp_span_attr_fast(sp_span_t *s, const char *key, size_t klen, size_t any)
{
    size_t    total = klen + any + 6;
    uint8_t  *p;

    if (klen + any > 123 || s->nattrs == SP_SPAN_MAX_ATTRS
        || total > (size_t) (SP_SPAN_WIRE - s->wire_used))
    {
        return NULL;
    }
    p = s->wire + s->wire_used;
    s->wire_used += (uint16_t) total;
    s->nattrs++;
    return sp_span_kv_head(p, key, klen, any);
}

/* The same as sp_span_attr_str/int, inline, for a key that is a string
 * literal: its copy is a few moves of a size known at compile time. */
SP_SPAN_INLINE int
sp_span_attr_str_static(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, const char *val, size_t vlen)
{
    uint8_t  *p;

    if (owner == SP_OWNER_SPAN && vlen < 120
        && (p = sp_span_attr_fast(s, key, klen, vlen + 2)) != NULL)
    {
        p[0] = SP_TAG(1, SP_WT_LEN);        /* AnyValue.string_value */
        p[1] = (uint8_t) vlen;
        sp_wire_copy(p + 2, val, vlen);
        return 0;
    }
    return sp_span_attr_str(s, owner, key, klen, val, vlen);
}

SP_SPAN_INLINE int
sp_span_attr_int_static(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, int64_t val)
{
    uint8_t  *p;
    size_t    n = sp_wire_vsize((uint64_t) val);

    if (owner == SP_OWNER_SPAN
        && (p = sp_span_attr_fast(s, key, klen, 1 + n)) != NULL)
    {
        p[0] = SP_TAG(3, SP_WT_VARINT);     /* AnyValue.int_value */
        sp_wire_varint(p + 1, (uint64_t) val);
        return 0;
    }
    return sp_span_attr_int(s, owner, key, klen, val);
}

/* A row of span attributes written one after another (the glue's own set,
 * at the log phase): the writer's position and count stay in registers and
 * reach the span once, at sp_span_attrs_close(). The single writers above
 * store through a byte pointer, which may alias the span's own counters, so
 * every attribute reloaded and stored wire_used, nattrs and wire. Nothing
 * else may add a span attribute between open and close. The state goes to
 * the out-of-line path by value: its address never escapes, which is what
 * lets the compiler keep it in registers. */
typedef struct {
    uint8_t   *p;           /* where the next attribute goes */
    uint8_t   *end;         /* the end of the span's attribute space */
    unsigned   left;        /* attributes the span may still take */
} sp_span_attrs_t;

SP_SPAN_INLINE sp_span_attrs_t
sp_span_attrs_open(sp_span_t *s)
{
    sp_span_attrs_t  a;

    a.p = s->wire + s->wire_used;
    a.end = s->wire + SP_SPAN_WIRE;
    a.left = SP_SPAN_MAX_ATTRS - s->nattrs;
    return a;
}

SP_SPAN_INLINE void
sp_span_attrs_close(sp_span_t *s, sp_span_attrs_t a)
{
    s->wire_used = (uint16_t) (a.p - s->wire);
    s->nattrs = (uint16_t) (SP_SPAN_MAX_ATTRS - a.left);
}

/* The general path of the row (a long value, a span without room): closes
 * it, writes or drops (and counts) the attribute, and reopens it. */
sp_span_attrs_t sp_span_attrs_str_slow(sp_span_t *s, sp_span_attrs_t a,
    const char *key, size_t klen, const char *val, size_t vlen);
sp_span_attrs_t sp_span_attrs_int_slow(sp_span_t *s, sp_span_attrs_t a,
    const char *key, size_t klen, int64_t val);

/* As sp_span_attr_fast(), on the row. */
SP_SPAN_INLINE uint8_t *
sp_span_attrs_head(sp_span_attrs_t *a, const char *key, size_t klen,
    size_t any)
{
    size_t    total = klen + any + 6;
    uint8_t  *p = a->p;

    if (klen + any > 123 || a->left == 0 || total > (size_t) (a->end - p)) {
        return NULL;
    }
    a->p = p + total;
    a->left--;
    return sp_span_kv_head(p, key, klen, any);
}

SP_SPAN_INLINE void
sp_span_attrs_str_static(sp_span_attrs_t *a, sp_span_t *s, const char *key,
    size_t klen, const char *val, size_t vlen)
{
    uint8_t  *p = sp_span_attrs_head(a, key, klen, vlen + 2);

    if (p == NULL) {
        *a = sp_span_attrs_str_slow(s, *a, key, klen, val, vlen);
        return;
    }
    p[0] = SP_TAG(1, SP_WT_LEN);            /* AnyValue.string_value */
    p[1] = (uint8_t) vlen;
    sp_wire_copy(p + 2, val, vlen);
}

SP_SPAN_INLINE void
sp_span_attrs_int_static(sp_span_attrs_t *a, sp_span_t *s, const char *key,
    size_t klen, int64_t val)
{
    uint8_t  *p = sp_span_attrs_head(a, key, klen,
                                     1 + sp_wire_vsize((uint64_t) val));

    if (p == NULL) {
        *a = sp_span_attrs_int_slow(s, *a, key, klen, val);
        return;
    }
    p[0] = SP_TAG(3, SP_WT_VARINT);         /* AnyValue.int_value */
    sp_wire_varint(p + 1, (uint64_t) val);
}

/* Attributes encoded ahead, once (constant keys and values: at
 * configuration time), appended to the row as one copy: n attributes in
 * len bytes, each made by sp_span_kv_str_encode(). -1, nothing written,
 * when the span lacks the room or the count for all of them: then write
 * them one by one, which keeps and counts what fits as always. */
SP_SPAN_INLINE int
sp_span_attrs_raw(sp_span_attrs_t *a, const uint8_t *enc, size_t len,
    unsigned n)
{
    if (a->left < n || len > (size_t) (a->end - a->p)) {
        return -1;
    }
    memcpy(a->p, enc, len);
    a->p += len;
    a->left -= n;
    return 0;
}

/* The bytes a string (an integer) attribute is written as (the same as
 * the single writers' and the row's), into buf: their length, or 0 when
 * it does not fit cap or the one-byte lengths of the writers' fast path
 * (write it with them then). */
size_t sp_span_kv_str_encode(uint8_t *buf, size_t cap, const char *key,
    size_t klen, const char *val, size_t vlen);
size_t sp_span_kv_int_encode(uint8_t *buf, size_t cap, const char *key,
    size_t klen, int64_t val);

/* key must be a string literal. */
#define sp_span_attrs_cstr(a, s, key, val, vlen) \
    sp_span_attrs_str_static(a, s, "" key, sizeof(key) - 1, val, vlen)
#define sp_span_attrs_cint(a, s, key, val) \
    sp_span_attrs_int_static(a, s, "" key, sizeof(key) - 1, val)

/* The span's name made where it is kept, without a copy: up to cap bytes
 * at the returned place (NULL: no room; then use sp_span_set_name), then
 * sp_span_name_done() with the length written (cut as sp_span_set_name
 * cuts a name: at SP_SPAN_MAX_VALUE bytes). */
SP_SPAN_INLINE char *
sp_span_name_place(sp_span_t *s, size_t cap)
{
    return cap <= (size_t) (SP_SPAN_TEXT - s->text_used)
           ? s->text + s->text_used : NULL;
}

SP_SPAN_INLINE void
sp_span_name_done(sp_span_t *s, size_t len)
{
    if (len > SP_SPAN_MAX_VALUE) {
        len = SP_SPAN_MAX_VALUE;
    }
    s->name_ref = NULL;
    s->name_off = s->text_used;
    s->name_len = (uint16_t) len;
    s->text_used += (uint16_t) len;
}

/* A name that stays valid and unchanged until the span is encoded (a
 * configuration's constant, such as a route's names made once): kept by
 * reference and written once, by the encoder, instead of copied into
 * text[] first. Cut as sp_span_set_name cuts a name. */
SP_SPAN_INLINE void
sp_span_set_name_ref(sp_span_t *s, const char *name, size_t len)
{
    if (len > SP_SPAN_MAX_VALUE) {
        len = SP_SPAN_MAX_VALUE;
    }
    s->name_ref = name;
    s->name_off = 0;
    s->name_len = (uint16_t) len;
}

/* A span attribute that replaces an earlier one with the same key (the
 * user's attributes override the module's): the earlier one is cut out of
 * the encoded attributes. */
int sp_span_attr_set_str(sp_span_t *s, const char *key, size_t klen,
    const char *val, size_t vlen);

/* Adds an event; returns its index, or -1 when dropped. */
int sp_span_add_event(sp_span_t *s, const char *name, size_t len,
    uint64_t time_ns);

/* Literal-key convenience for the glue: key must be a string literal. */
#define sp_span_attr_ostr(s, owner, key, val, vlen) \
    sp_span_attr_str_static(s, owner, "" key, sizeof(key) - 1, val, vlen)
#define sp_span_attr_oint(s, owner, key, val) \
    sp_span_attr_int_static(s, owner, "" key, sizeof(key) - 1, val)
#define sp_span_attr_cstr(s, key, val, vlen) \
    sp_span_attr_ostr(s, SP_OWNER_SPAN, key, val, vlen)
#define sp_span_attr_cint(s, key, val) \
    sp_span_attr_oint(s, SP_OWNER_SPAN, key, val)

#endif
