#include <stddef.h>
#include <string.h>

#include "span.h"

/* Copies up to len bytes into the arena; returns the offset, or -1 with *len
 * cut to what fits (0 when nothing does). */
static int
arena_put(sp_span_t *s, const char *p, size_t *len)
{
    size_t  room = SP_SPAN_ARENA - s->arena_used;
    int     off;

    if (*len > room) {
        return -1;
    }
    off = s->arena_used;
    memcpy(s->arena + off, p, *len);
    s->arena_used += (uint16_t) *len;
    return off;
}

void
sp_span_init(sp_span_t *s, int kind, const uint8_t trace_id[16],
    const uint8_t span_id[8], const uint8_t *parent_span_id,
    int parent_is_remote, uint8_t trace_flags, uint64_t start_ns)
{
    /* Only the header is cleared (not the storage pointers): the arrays are
     * bounded by the counts. */
    memset(s->trace_id, 0, sizeof(*s) - offsetof(sp_span_t, trace_id));
    memcpy(s->trace_id, trace_id, SP_TRACE_ID_LEN);
    memcpy(s->span_id, span_id, SP_SPAN_ID_LEN);
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

static void
set_string(sp_span_t *s, uint16_t *off, uint16_t *len, const char *p,
    size_t n)
{
    int  o;

    if (n > SP_SPAN_MAX_VALUE) {
        n = SP_SPAN_MAX_VALUE;
    }
    o = arena_put(s, p, &n);
    if (o < 0) {
        *off = 0;
        *len = 0;
        return;
    }
    *off = (uint16_t) o;
    *len = (uint16_t) n;
}

void
sp_span_set_name(sp_span_t *s, const char *name, size_t len)
{
    set_string(s, &s->name_off, &s->name_len, name, len);
}

void
sp_span_set_tracestate(sp_span_t *s, const char *ts, size_t len)
{
    set_string(s, &s->tracestate_off, &s->tracestate_len, ts, len);
}

void
sp_span_set_status(sp_span_t *s, int code, const char *msg, size_t len)
{
    s->status_code = (uint8_t) code;
    if (msg != NULL && len > 0) {
        set_string(s, &s->status_msg_off, &s->status_msg_len, msg, len);
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

/* Reserves an attribute entry and stores its key: a pointer to a static
 * key, a copy in the arena otherwise. */
static sp_attr_t *
attr_new(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int is_static)
{
    sp_attr_t  *a;
    int         off = 0;
    size_t      n = klen;

    if (s->nattrs == SP_SPAN_MAX_ATTRS || klen > SP_SPAN_MAX_VALUE
        || (owner != SP_OWNER_SPAN && owner > s->nevents))
    {
        count_drop(s, owner);
        return NULL;
    }
    if (!is_static) {
        off = arena_put(s, key, &n);
        if (off < 0) {
            count_drop(s, owner);
            return NULL;
        }
    }
    a = &s->attrs[s->nattrs++];
    a->key = is_static ? key : NULL;
    a->key_off = (uint16_t) off;
    a->key_len = (uint16_t) klen;
    a->owner = (uint8_t) owner;
    a->str_off = 0;
    a->str_len = 0;
    return a;
}

static int
attr_str(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int is_static, const char *val, size_t vlen)
{
    sp_attr_t  *a;
    uint16_t    used = s->arena_used;
    int         off;

    a = attr_new(s, owner, key, klen, is_static);
    if (a == NULL) {
        return -1;
    }
    if (vlen > SP_SPAN_MAX_VALUE) {
        vlen = SP_SPAN_MAX_VALUE;
    }
    off = arena_put(s, val, &vlen);
    if (off < 0) {
        /* Undo the key so a half attribute is never exported. */
        s->nattrs--;
        s->arena_used = used;
        count_drop(s, owner);
        return -1;
    }
    a->type = SP_ATTR_STRING;
    a->str_off = (uint16_t) off;
    a->str_len = (uint16_t) vlen;
    return 0;
}

int
sp_span_attr_str(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    const char *val, size_t vlen)
{
    return attr_str(s, owner, key, klen, 0, val, vlen);
}

int
sp_span_attr_str_static(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, const char *val, size_t vlen)
{
    return attr_str(s, owner, key, klen, 1, val, vlen);
}

static int
attr_int(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int is_static, int64_t val)
{
    sp_attr_t  *a = attr_new(s, owner, key, klen, is_static);

    if (a == NULL) {
        return -1;
    }
    a->type = SP_ATTR_INT;
    a->v.i = val;
    return 0;
}

int
sp_span_attr_int(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int64_t val)
{
    return attr_int(s, owner, key, klen, 0, val);
}

int
sp_span_attr_int_static(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, int64_t val)
{
    return attr_int(s, owner, key, klen, 1, val);
}

int
sp_span_attr_bool(sp_span_t *s, unsigned owner, const char *key, size_t klen,
    int val)
{
    sp_attr_t  *a = attr_new(s, owner, key, klen, 0);

    if (a == NULL) {
        return -1;
    }
    a->type = SP_ATTR_BOOL;
    a->v.b = val != 0;
    return 0;
}

int
sp_span_attr_double(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, double val)
{
    sp_attr_t  *a = attr_new(s, owner, key, klen, 0);

    if (a == NULL) {
        return -1;
    }
    a->type = SP_ATTR_DOUBLE;
    a->v.d = val;
    return 0;
}

int
sp_span_attr_set_str(sp_span_t *s, const char *key, size_t klen,
    const char *val, size_t vlen)
{
    sp_attr_t  *a;
    size_t      i;
    int         off;

    for (i = 0; i < s->nattrs; i++) {
        a = &s->attrs[i];
        if (a->owner != SP_OWNER_SPAN || a->key_len != klen
            || memcmp(sp_attr_key(s, a), key, klen) != 0)
        {
            continue;
        }
        if (vlen > SP_SPAN_MAX_VALUE) {
            vlen = SP_SPAN_MAX_VALUE;
        }
        off = arena_put(s, val, &vlen);
        if (off < 0) {
            s->dropped_attrs++;
            return -1;
        }
        a->type = SP_ATTR_STRING;
        a->str_off = (uint16_t) off;
        a->str_len = (uint16_t) vlen;
        return 0;
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
    if (len > SP_SPAN_MAX_VALUE) {
        len = SP_SPAN_MAX_VALUE;
    }
    off = arena_put(s, name, &len);
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

sp_span_t *
sp_span_buf_init(sp_span_buf_t *b)
{
    memset(&b->span, 0, sizeof(b->span));
    b->span.attrs = b->attrs;
    b->span.events = b->events;
    b->span.arena = b->arena;
    return &b->span;
}

#define ALIGN8(n)  (((n) + 7) & ~(size_t) 7)

_Static_assert(sizeof(sp_span_t) % 8 == 0 && sizeof(sp_attr_t) % 8 == 0
               && sizeof(sp_event_t) % 8 == 0,
               "record parts keep 8-byte alignment");

size_t
sp_span_record_size(const sp_span_t *s)
{
    return sizeof(sp_span_t) + s->nattrs * sizeof(sp_attr_t)
           + s->nevents * sizeof(sp_event_t) + ALIGN8(s->arena_used);
}

sp_span_t *
sp_span_record_write(void *dst, const sp_span_t *s)
{
    sp_span_t  *r = dst;
    char       *p = (char *) dst + sizeof(sp_span_t);

    /* sizeof(sp_span_t), sp_attr_t and sp_event_t are multiples of 8. */
    *r = *s;
    r->attrs = (sp_attr_t *) (void *) p;
    memcpy(p, s->attrs, s->nattrs * sizeof(sp_attr_t));
    p += s->nattrs * sizeof(sp_attr_t);
    r->events = (sp_event_t *) (void *) p;
    memcpy(p, s->events, s->nevents * sizeof(sp_event_t));
    p += s->nevents * sizeof(sp_event_t);
    r->arena = p;
    memcpy(p, s->arena, s->arena_used);
    return r;
}
