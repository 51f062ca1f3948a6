#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "otlp_common.h"
#include "otlp_json.h"
#include "otlp_traces.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest
    pb_request_t;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans  pb_resource_spans_t;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans     pb_scope_spans_t;
typedef Opentelemetry__Proto__Trace__V1__Span           pb_span_t;
typedef Opentelemetry__Proto__Trace__V1__Span__Event    pb_event_t;
typedef Opentelemetry__Proto__Trace__V1__Status         pb_status_t;

/* Span.flags bits (SpanFlags in trace.proto). */
#define SPAN_FLAGS_HAS_IS_REMOTE  0x100
#define SPAN_FLAGS_IS_REMOTE      0x200

static sp_pb_kv_t *
attr_to_kv(sp_arena_t *a, const sp_span_t *s, const sp_attr_t *at)
{
    const char  *k = sp_attr_key(s, at);

    switch (at->type) {
    case SP_ATTR_INT:
        return sp_otlp_kv_int(a, k, at->key_len, at->v.i);
    case SP_ATTR_BOOL:
        return sp_otlp_kv_bool(a, k, at->key_len, at->v.b);
    case SP_ATTR_DOUBLE:
        return sp_otlp_kv_double(a, k, at->key_len, at->v.d);
    default:
        return sp_otlp_kv_str(a, k, at->key_len, sp_span_str(s, at->str_off),
                              at->str_len);
    }
}

/* The attributes of one owner (the span or one event). */
static int
owner_attrs(sp_arena_t *a, const sp_span_t *s, unsigned owner,
    sp_pb_kv_t ***out, size_t *n_out)
{
    size_t  i, n = 0;

    for (i = 0; i < s->nattrs; i++) {
        n += s->attrs[i].owner == owner;
    }
    *n_out = 0;
    *out = NULL;
    if (n == 0) {
        return 0;
    }
    *out = sp_arena_alloc(a, n * sizeof(sp_pb_kv_t *));
    if (*out == NULL) {
        return -1;
    }
    for (i = 0; i < s->nattrs; i++) {
        if (s->attrs[i].owner == owner) {
            (*out)[*n_out] = attr_to_kv(a, s, &s->attrs[i]);
            if ((*out)[(*n_out)++] == NULL) {
                return -1;
            }
        }
    }
    return 0;
}

static pb_span_t *
span_to_pb(sp_arena_t *a, const sp_span_t *s)
{
    static const pb_span_t    span_init =
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    static const pb_event_t   event_init =
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT;
    static const pb_status_t  status_init =
        OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
    pb_span_t   *p;
    pb_event_t  *ev;
    size_t       i;

    p = sp_arena_alloc(a, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    *p = span_init;
    /* The ids point into the queue slot, which outlives the encoding. */
    p->trace_id.data = (uint8_t *) s->trace_id;
    p->trace_id.len = SP_TRACE_ID_LEN;
    p->span_id.data = (uint8_t *) s->span_id;
    p->span_id.len = SP_SPAN_ID_LEN;
    if (s->has_parent) {
        p->parent_span_id.data = (uint8_t *) s->parent_span_id;
        p->parent_span_id.len = SP_SPAN_ID_LEN;
    }
    p->flags = s->trace_flags | SPAN_FLAGS_HAS_IS_REMOTE
               | (s->parent_is_remote ? SPAN_FLAGS_IS_REMOTE : 0);
    p->name = sp_arena_strndup(a, sp_span_str(s, s->name_off), s->name_len);
    if (s->tracestate_len > 0) {
        p->trace_state = sp_arena_strndup(a, sp_span_str(s, s->tracestate_off),
                                          s->tracestate_len);
    }
    p->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind) s->kind;
    p->start_time_unix_nano = s->start_ns;
    p->end_time_unix_nano = s->end_ns;
    p->dropped_attributes_count = s->dropped_attrs;
    p->dropped_events_count = s->dropped_events;
    if (p->name == NULL || p->trace_state == NULL
        || owner_attrs(a, s, SP_OWNER_SPAN, &p->attributes,
                       &p->n_attributes) != 0)
    {
        return NULL;
    }

    if (s->nevents > 0) {
        p->events = sp_arena_alloc(a, s->nevents * sizeof(pb_event_t *));
        if (p->events == NULL) {
            return NULL;
        }
        for (i = 0; i < s->nevents; i++) {
            ev = sp_arena_alloc(a, sizeof(*ev));
            if (ev == NULL) {
                return NULL;
            }
            *ev = event_init;
            ev->time_unix_nano = s->events[i].time_ns;
            ev->name = sp_arena_strndup(a, sp_span_str(s, s->events[i].name_off),
                                        s->events[i].name_len);
            ev->dropped_attributes_count = s->dropped_event_attrs[i];
            if (ev->name == NULL
                || owner_attrs(a, s, SP_OWNER_EVENT(i), &ev->attributes,
                               &ev->n_attributes) != 0)
            {
                return NULL;
            }
            p->events[i] = ev;
        }
        p->n_events = s->nevents;
    }

    if (s->status_code != SP_STATUS_UNSET) {
        p->status = sp_arena_alloc(a, sizeof(*p->status));
        if (p->status == NULL) {
            return NULL;
        }
        *p->status = status_init;
        p->status->code =
            (Opentelemetry__Proto__Trace__V1__Status__StatusCode) s->status_code;
        if (s->status_msg_len > 0) {
            p->status->message = sp_arena_strndup(a,
                sp_span_str(s, s->status_msg_off), s->status_msg_len);
            if (p->status->message == NULL) {
                return NULL;
            }
        }
    }
    return p;
}

static pb_request_t *
build_request(sp_arena_t *a, const sp_resource_t *res,
    sp_span_t *const *spans, size_t n)
{
    static const pb_request_t         req_init =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    static const pb_resource_spans_t  rs_init =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    static const pb_scope_spans_t     ss_init =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    pb_request_t         *req;
    pb_resource_spans_t  *rs;
    pb_scope_spans_t     *ss;
    size_t                i;

    req = sp_arena_alloc(a, sizeof(*req));
    rs = sp_arena_alloc(a, sizeof(*rs));
    ss = sp_arena_alloc(a, sizeof(*ss));
    if (req == NULL || rs == NULL || ss == NULL) {
        return NULL;
    }
    *req = req_init;
    *rs = rs_init;
    *ss = ss_init;

    req->n_resource_spans = 1;
    req->resource_spans = sp_arena_alloc(a, sizeof(pb_resource_spans_t *));
    rs->n_scope_spans = 1;
    rs->scope_spans = sp_arena_alloc(a, sizeof(pb_scope_spans_t *));
    rs->resource = sp_otlp_resource(a, res);
    ss->scope = sp_otlp_scope(a);
    ss->spans = sp_arena_alloc(a, (n ? n : 1) * sizeof(pb_span_t *));
    if (req->resource_spans == NULL || rs->scope_spans == NULL
        || rs->resource == NULL || ss->scope == NULL || ss->spans == NULL)
    {
        return NULL;
    }
    req->resource_spans[0] = rs;
    rs->scope_spans[0] = ss;
    for (i = 0; i < n; i++) {
        ss->spans[i] = span_to_pb(a, spans[i]);
        if (ss->spans[i] == NULL) {
            return NULL;
        }
    }
    ss->n_spans = n;
    return req;
}

int
sp_otlp_traces_encode_json(sp_arena_t *a, const sp_resource_t *res,
    sp_span_t *const *spans, size_t n, sp_buf_t *out)
{
    pb_request_t  *req = build_request(a, res, spans, n);

    if (req == NULL || sp_otlp_json_encode(&req->base, out) != 0) {
        return -1;
    }
    sp_buf_append_char(out, '\n');
    return sp_buf_failed(out) ? -1 : 0;
}

int
sp_otlp_traces_parse_response(const uint8_t *body, size_t len,
    int64_t *rejected, char *msg, size_t msglen)
{
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse  *r;

    *rejected = 0;
    if (msglen > 0) {
        msg[0] = '\0';
    }
    r = opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
            NULL, len, body);
    if (r == NULL) {
        return -1;
    }
    if (r->partial_success != NULL) {
        *rejected = r->partial_success->rejected_spans;
        if (msglen > 0 && r->partial_success->error_message != NULL) {
            strncpy(msg, r->partial_success->error_message, msglen - 1);
            msg[msglen - 1] = '\0';
        }
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
        r, NULL);
    return 0;
}
