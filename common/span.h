#ifndef SP_SPAN_H
#define SP_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include "ids.h"

/* A finished span as the worker hands it to the exporter. The worker builds
 * it in a per-thread sp_span_buf_t (fixed arrays, strings in an inline
 * arena: no heap allocation, always hot in cache), and the exporter copies
 * only the used part into its queue as one compact record (see
 * sp_span_record_*), whose attrs/events/arena pointers then point into the
 * record itself. The exporter thread turns it into OTLP later. What does not fit is dropped and counted
 * (dropped_attributes_count / dropped_events_count); a string value longer
 * than SP_SPAN_MAX_VALUE is truncated. */

#define SP_SPAN_MAX_ATTRS   40
#define SP_SPAN_MAX_EVENTS  8
#define SP_SPAN_ARENA       2048
#define SP_SPAN_MAX_VALUE   512

enum { SP_SPAN_KIND_INTERNAL = 1, SP_SPAN_KIND_SERVER = 2,
       SP_SPAN_KIND_CLIENT = 3 };
enum { SP_STATUS_UNSET = 0, SP_STATUS_OK = 1, SP_STATUS_ERROR = 2 };
enum { SP_ATTR_STRING = 0, SP_ATTR_INT = 1, SP_ATTR_BOOL = 2,
       SP_ATTR_DOUBLE = 3 };

/* Owner of an attribute: the span itself or one of its events. */
#define SP_OWNER_SPAN  0
#define SP_OWNER_EVENT(i)  ((i) + 1)

typedef struct {
    /* The key: a string literal of the module (it outlives every span), or
     * NULL when the key was copied into the arena at key_off. */
    const char  *key;
    uint16_t  key_off;
    uint16_t  key_len;
    uint16_t  str_off;
    uint16_t  str_len;
    uint8_t   type;
    uint8_t   owner;
    union {
        int64_t  i;
        double   d;
        int      b;
    } v;
} sp_attr_t;

typedef struct {
    uint64_t  time_ns;
    uint16_t  name_off;
    uint16_t  name_len;
} sp_event_t;

typedef struct {
    /* Storage: the arrays of an sp_span_buf_t, or of a queued record. */
    sp_attr_t   *attrs;
    sp_event_t  *events;
    char        *arena;

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

    uint16_t    nattrs;
    uint16_t    nevents;
    uint16_t    arena_used;
    uint16_t    dropped_attrs;
    uint16_t    dropped_events;
    uint16_t    dropped_event_attrs[SP_SPAN_MAX_EVENTS];
} sp_span_t;

/* Room to build one span in. */
typedef struct {
    sp_span_t   span;
    sp_attr_t   attrs[SP_SPAN_MAX_ATTRS];
    sp_event_t  events[SP_SPAN_MAX_EVENTS];
    char        arena[SP_SPAN_ARENA];
} sp_span_buf_t;

/* Points the span at the buffer's arrays; returns it (still to be
 * sp_span_init'ed). */
sp_span_t *sp_span_buf_init(sp_span_buf_t *b);

/* The compact copy of a built span: header, used attributes, used events,
 * used arena bytes, 8-byte aligned. sp_span_record_write() fills dst (of
 * sp_span_record_size() bytes, 8-byte aligned) and points the copy's arrays
 * into it, so the record is itself a valid sp_span_t. */
size_t sp_span_record_size(const sp_span_t *s);
sp_span_t *sp_span_record_write(void *dst, const sp_span_t *s);

/* Resets the record and sets its identity; parent may be NULL (root span). */
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

/* The same with a key that is a string literal (not copied: the record
 * keeps a pointer to it). */
int sp_span_attr_str_static(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, const char *val, size_t vlen);
int sp_span_attr_int_static(sp_span_t *s, unsigned owner, const char *key,
    size_t klen, int64_t val);

/* A span attribute that replaces an earlier one with the same key (the
 * user's attributes override the module's). */
int sp_span_attr_set_str(sp_span_t *s, const char *key, size_t klen,
    const char *val, size_t vlen);

/* Adds an event; returns its index, or -1 when dropped. */
int sp_span_add_event(sp_span_t *s, const char *name, size_t len,
    uint64_t time_ns);

/* Accessors for the encoders. */
static inline const char *sp_span_str(const sp_span_t *s, uint16_t off)
{
    return s->arena + off;
}

static inline const char *sp_attr_key(const sp_span_t *s, const sp_attr_t *a)
{
    return a->key != NULL ? a->key : s->arena + a->key_off;
}

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
