/*
 * The trace context of a request: extracted from the configured formats
 * (otel_propagation: W3C traceparent/tracestate, B3 single or multi
 * header), or started anew, decided sampled or not, and injected in every
 * configured format into the request headers that nginx passes to
 * upstreams.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/base/clock.h"
#include "common/trace/b3.h"
#include "common/trace/propagation.h"
#include "common/trace/traceparent.h"
#include "common/trace/tracestate.h"


/* The worker thread's profile labels (the header's attach/detach). Until
 * the worker's own slot is known (and in processes that never profile),
 * binding writes here; profiling's start points it at the slot. */
static sp_thread_ctx_record_t   *ngx_http_spanprof_no_labels;
sp_thread_ctx_record_t         **ngx_http_spanprof_labels =
                                     &ngx_http_spanprof_no_labels;

/* The headers read and written, by kind: the names sent upstream and
 * their lowercase forms. */
enum {
    NGX_HTTP_SPANPROF_H_TRACEPARENT = 0,
    NGX_HTTP_SPANPROF_H_TRACESTATE,
    NGX_HTTP_SPANPROF_H_B3,
    NGX_HTTP_SPANPROF_H_B3_TRACE,
    NGX_HTTP_SPANPROF_H_B3_SPAN,
    NGX_HTTP_SPANPROF_H_B3_PARENT,
    NGX_HTTP_SPANPROF_H_B3_SAMPLED,
    NGX_HTTP_SPANPROF_H_B3_FLAGS,
    NGX_HTTP_SPANPROF_H_N
};

static ngx_str_t  ngx_http_spanprof_header_names[] = {
    ngx_string("traceparent"),
    ngx_string("tracestate"),
    ngx_string("b3"),
    ngx_string("X-B3-TraceId"),
    ngx_string("X-B3-SpanId"),
    ngx_string("X-B3-ParentSpanId"),
    ngx_string("X-B3-Sampled"),
    ngx_string("X-B3-Flags"),
};

static ngx_str_t  ngx_http_spanprof_header_lc[] = {
    ngx_string("traceparent"),
    ngx_string("tracestate"),
    ngx_string("b3"),
    ngx_string("x-b3-traceid"),
    ngx_string("x-b3-spanid"),
    ngx_string("x-b3-parentspanid"),
    ngx_string("x-b3-sampled"),
    ngx_string("x-b3-flags"),
};


/* Marks our pool cleanup entry, and makes sure the thread's labels never
 * point into a freed pool. */
static void
ngx_http_spanprof_ctx_cleanup(void *data)
{
    ngx_http_spanprof_ctx_t  *ctx = data;

    if (ngx_http_spanprof_attached() == &ctx->record) {
        ngx_http_spanprof_detach();
    }
}


ngx_http_spanprof_ctx_t *
ngx_http_spanprof_get_ctx(ngx_http_request_t *r, ngx_flag_t create)
{
    ngx_pool_cleanup_t       *cln;
    ngx_http_spanprof_ctx_t  *ctx;

    r = r->main;

    ctx = ngx_http_get_module_ctx(r, ngx_http_spanprof_module);
    if (ctx != NULL) {
        return ctx;
    }

    /* An internal redirect zeroes r->ctx; the cleanup entry still has it. */
    for (cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_spanprof_ctx_cleanup) {
            ctx = cln->data;
            ngx_http_set_ctx(r, ctx, ngx_http_spanprof_module);
            return ctx;
        }
    }

    if (!create) {
        return NULL;
    }

    /* The cleanup entry and the context in one allocation, linked as
     * ngx_pool_cleanup_add() links it. Only the fields before the labels'
     * record start zeroed: the record is made (and its counters zeroed)
     * when the request is first profiled. */
    cln = ngx_palloc(r->pool, sizeof(ngx_pool_cleanup_t)
                              + sizeof(ngx_http_spanprof_ctx_t));
    if (cln == NULL) {
        return NULL;
    }
    ctx = (ngx_http_spanprof_ctx_t *) (cln + 1);
    ngx_memzero(ctx, offsetof(ngx_http_spanprof_ctx_t, record));

    cln->handler = ngx_http_spanprof_ctx_cleanup;
    cln->data = ctx;
    cln->next = r->pool->cleanup;
    r->pool->cleanup = cln;

    ctx->start_ns = sp_now_ns();
    ctx->body_size = r->headers_in.content_length_n;

    ngx_http_set_ctx(r, ctx, ngx_http_spanprof_module);
    return ctx;
}


/* A walk over a header list, across its parts. */
typedef struct {
    ngx_list_part_t  *part;
    ngx_uint_t        i;
} ngx_http_spanprof_headers_t;


static ngx_table_elt_t *
ngx_http_spanprof_next_header(ngx_http_spanprof_headers_t *it)
{
    while (it->i >= it->part->nelts) {
        if (it->part->next == NULL) {
            return NULL;
        }
        it->part = it->part->next;
        it->i = 0;
    }
    return (ngx_table_elt_t *) it->part->elts + it->i++;
}


static ngx_int_t
ngx_http_spanprof_header_is(ngx_table_elt_t *h, ngx_str_t *name)
{
    return h->hash != 0 && h->key.len == name->len
           && ngx_strncasecmp(h->key.data, name->data, name->len) == 0;
}


/* The incoming headers of the known formats: the first of each kind and
 * how many there are (tracestate: their joined length). */
typedef struct {
    ngx_table_elt_t  *h[NGX_HTTP_SPANPROF_H_N];
    ngx_uint_t        n[NGX_HTTP_SPANPROF_H_N];
    size_t            tracestate_len;
} ngx_http_spanprof_incoming_t;


static void
ngx_http_spanprof_scan(ngx_http_request_t *r, ngx_http_spanprof_incoming_t *in)
{
    ngx_uint_t                    k;
    ngx_table_elt_t              *h;
    ngx_http_spanprof_headers_t   it;

    ngx_memzero(in, sizeof(*in));

    it.part = &r->headers_in.headers.part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        if (!sp_propagation_is_trace_header((const char *) h->key.data,
                                            h->key.len))
        {
            continue;
        }
        for (k = 0; k < NGX_HTTP_SPANPROF_H_N; k++) {
            if (ngx_http_spanprof_header_is(h,
                                        &ngx_http_spanprof_header_names[k]))
            {
                if (in->n[k]++ == 0) {
                    in->h[k] = h;
                }
                if (k == NGX_HTTP_SPANPROF_H_TRACESTATE) {
                    in->tracestate_len += h->value.len + 1;
                }
                break;
            }
        }
    }
}


/* Reads traceparent and tracestate as W3C Trace Context says: exactly one
 * valid traceparent, and the tracestate lines joined with ',' in order.
 * 1 when a context was found. */
static ngx_flag_t
ngx_http_spanprof_extract_w3c(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx, ngx_http_spanprof_incoming_t *in)
{
    u_char                       *p;
    int                           n;
    ngx_table_elt_t              *h, *tp;
    sp_traceparent_t              parsed;
    ngx_http_spanprof_headers_t   it;

    tp = in->h[NGX_HTTP_SPANPROF_H_TRACEPARENT];

    if (in->n[NGX_HTTP_SPANPROF_H_TRACEPARENT] != 1
        || sp_traceparent_parse((const char *) tp->value.data, tp->value.len,
                                &parsed) != 0)
    {
        /* No valid parent: the tracestate is not ours to keep either. */
        return 0;
    }

    ngx_memcpy(ctx->trace_id, parsed.trace_id, SP_TRACE_ID_LEN);
    ngx_memcpy(ctx->parent_id, parsed.parent_id, SP_SPAN_ID_LEN);
    ctx->parent_flags = parsed.flags;
    ctx->has_parent = 1;
    ctx->random = (parsed.flags & SP_TRACE_FLAG_RANDOM) != 0;

    if (in->tracestate_len == 0
        || in->tracestate_len > SP_TRACESTATE_MAX_LEN * 4)
    {
        return 1;
    }

    p = ngx_pnalloc(r->pool, in->tracestate_len);
    if (p == NULL) {
        return 1;
    }
    ctx->tracestate.data = p;

    it.part = &r->headers_in.headers.part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        if (ngx_http_spanprof_header_is(h,
                                        &ngx_http_spanprof_header_names[
                                            NGX_HTTP_SPANPROF_H_TRACESTATE]))
        {
            if (p != ctx->tracestate.data) {
                *p++ = ',';
            }
            p = ngx_cpymem(p, h->value.data, h->value.len);
        }
    }

    /* Forwarded without its optional whitespace and empty members. */
    n = sp_tracestate_normalize((const char *) ctx->tracestate.data,
                                p - ctx->tracestate.data,
                                (char *) ctx->tracestate.data);
    if (n <= 0) {
        ngx_str_null(&ctx->tracestate);
    } else {
        ctx->tracestate.len = n;
    }

    return 1;
}


static ngx_flag_t
ngx_http_spanprof_use_b3(ngx_http_spanprof_ctx_t *ctx, sp_b3_t *b3)
{
    /* A sampling decision alone ("b3: 0", deny) is a valid B3 value with
     * no parent: the trace starts here. */
    if (b3->has_ids) {
        ngx_memcpy(ctx->trace_id, b3->trace_id, SP_TRACE_ID_LEN);
        ngx_memcpy(ctx->parent_id, b3->span_id, SP_SPAN_ID_LEN);
        ctx->parent_flags = sp_b3_sampled(b3) ? SP_TRACE_FLAG_SAMPLED : 0;
        ctx->has_parent = 1;
        ctx->random = 0;
    }
    return 1;
}


#define ngx_http_spanprof_hval(in, k)                                         \
    ((in)->h[k] ? (const char *) (in)->h[k]->value.data : NULL),             \
    ((in)->h[k] ? (in)->h[k]->value.len : 0)

static ngx_flag_t
ngx_http_spanprof_extract_b3multi(ngx_http_spanprof_ctx_t *ctx,
    ngx_http_spanprof_incoming_t *in)
{
    ngx_uint_t  k;
    sp_b3_t     b3;

    /* Each at most once: two values are two contexts. */
    for (k = NGX_HTTP_SPANPROF_H_B3_TRACE; k <= NGX_HTTP_SPANPROF_H_B3_FLAGS;
         k++)
    {
        if (in->n[k] > 1) {
            return 0;
        }
    }

    if (sp_b3_parse_multi(
            ngx_http_spanprof_hval(in, NGX_HTTP_SPANPROF_H_B3_TRACE),
            ngx_http_spanprof_hval(in, NGX_HTTP_SPANPROF_H_B3_SPAN),
            ngx_http_spanprof_hval(in, NGX_HTTP_SPANPROF_H_B3_PARENT),
            ngx_http_spanprof_hval(in, NGX_HTTP_SPANPROF_H_B3_SAMPLED),
            ngx_http_spanprof_hval(in, NGX_HTTP_SPANPROF_H_B3_FLAGS), &b3)
        != 0)
    {
        return 0;
    }
    return ngx_http_spanprof_use_b3(ctx, &b3);
}


/* The first valid context among the location's formats, W3C first. */
static void
ngx_http_spanprof_extract(ngx_http_request_t *r, ngx_http_spanprof_ctx_t *ctx,
    ngx_http_spanprof_loc_conf_t *lcf)
{
    size_t                         i, n;
    sp_b3_t                        b3;
    ngx_table_elt_t               *h;
    sp_prop_format_t               order[SP_PROP_N];
    ngx_http_spanprof_incoming_t   in;

    ngx_http_spanprof_scan(r, &in);
    n = sp_propagation_extract_order(&lcf->propagation, order);

    for (i = 0; i < n; i++) {
        switch (order[i]) {

        case SP_PROP_W3C:
            if (ngx_http_spanprof_extract_w3c(r, ctx, &in)) {
                return;
            }
            break;

        case SP_PROP_B3:
            h = in.h[NGX_HTTP_SPANPROF_H_B3];
            if (in.n[NGX_HTTP_SPANPROF_H_B3] == 1
                && sp_b3_parse_single((const char *) h->value.data,
                                      h->value.len, &b3) == 0)
            {
                (void) ngx_http_spanprof_use_b3(ctx, &b3);
                return;
            }
            break;

        case SP_PROP_B3MULTI:
            if (ngx_http_spanprof_extract_b3multi(ctx, &in)) {
                return;
            }
            break;

        default:
            break;
        }
    }
}


char *
ngx_http_spanprof_propagation(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    ngx_uint_t   i;
    ngx_str_t   *value;

    if (lcf->propagation.n != 0) {
        return "is duplicate";
    }

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {
        switch (sp_propagation_add(&lcf->propagation,
                                   (const char *) value[i].data,
                                   value[i].len))
        {
        case 0:
            break;
        case -2:
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "format \"%V\" given twice in \"%V\"",
                               &value[i], &cmd->name);
            return NGX_CONF_ERROR;
        default:
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid format \"%V\" in \"%V\": expected "
                               SP_PROPAGATION_NAMES, &value[i], &cmd->name);
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}


static ngx_flag_t
ngx_http_spanprof_sampled(ngx_http_request_t *r,
    ngx_http_spanprof_loc_conf_t *lcf)
{
    ngx_str_t  v;

    switch (lcf->trace) {

    case NGX_HTTP_SPANPROF_TRACE_ON:
        return 1;

    case NGX_HTTP_SPANPROF_TRACE_VAR:
        if (ngx_http_complex_value(r, lcf->trace_var, &v) != NGX_OK) {
            return 0;
        }
        return (v.len == 1 && v.data[0] == '1')
               || (v.len == 2 && ngx_strncasecmp(v.data, (u_char *) "on", 2)
                                 == 0);

    default:
        return 0;
    }
}


ngx_http_spanprof_ctx_t *
ngx_http_spanprof_resolve(ngx_http_request_t *r)
{
    ngx_http_spanprof_ctx_t       *ctx;
    ngx_http_spanprof_loc_conf_t  *lcf;

    r = r->main;

    /* Normally made at post-read: no call to look it up. */
    ctx = ngx_http_get_module_ctx(r, ngx_http_spanprof_module);
    if (ctx == NULL) {
        ctx = ngx_http_spanprof_get_ctx(r, 1);
    }
    if (ctx == NULL || ctx->resolved) {
        return ctx;
    }
    ctx->resolved = 1;

    if (ctx->start_ns == 0) {
        ctx->start_ns = (uint64_t) r->start_sec * 1000000000
                        + (uint64_t) r->start_msec * 1000000;
    }

    /* Decided once per request, with the settings of the location the
     * request is in when first asked (normally its first location). */
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);

    if (ngx_http_spanprof_extracts(lcf->context)) {
        ngx_http_spanprof_extract(r, ctx, lcf);
    }

    /* The span id, and the trace id of a trace that starts here. */
    sp_ids_generate(ctx->has_parent ? NULL : ctx->trace_id, ctx->span_id);
    if (!ctx->has_parent) {
        ctx->random = 1;
    }

    ctx->sampled = ngx_http_spanprof_sampled(r, lcf);

    return ctx;
}


const u_char *
ngx_http_spanprof_client_span_id(ngx_http_spanprof_ctx_t *ctx)
{
    if (!ctx->client_span) {
        sp_span_id_generate(ctx->client_span_id);
        ctx->client_span = 1;
    }
    return ctx->client_span_id;
}


uint8_t
ngx_http_spanprof_flags(ngx_http_spanprof_ctx_t *ctx)
{
    return (ctx->sampled ? SP_TRACE_FLAG_SAMPLED : 0)
           | (ctx->random ? SP_TRACE_FLAG_RANDOM : 0);
}


u_char *
ngx_http_spanprof_traceparent(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx)
{
    if (ctx->traceparent == NULL) {
        ctx->traceparent = ngx_pnalloc(r->main->pool, SP_TRACEPARENT_LEN);
        if (ctx->traceparent == NULL) {
            return NULL;
        }
        sp_traceparent_format((char *) ctx->traceparent, ctx->trace_id,
                              ngx_http_spanprof_client_span_id(ctx),
                              ngx_http_spanprof_flags(ctx));
    }
    return ctx->traceparent;
}


static ngx_table_elt_t *
ngx_http_spanprof_add_header(ngx_list_t *list, ngx_table_elt_t *from)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(list);
    if (h == NULL) {
        return NULL;
    }
    *h = *from;
    return h;
}


/* Adds a header to the request's list (one the list did not have). */
static ngx_int_t
ngx_http_spanprof_push_header(ngx_list_t *list, ngx_uint_t k, u_char *value,
    size_t len)
{
    ngx_table_elt_t  elt;

    ngx_memzero(&elt, sizeof(ngx_table_elt_t));
    elt.key = ngx_http_spanprof_header_names[k];
    elt.lowcase_key = ngx_http_spanprof_header_lc[k].data;
    elt.hash = ngx_hash_key(elt.lowcase_key, elt.key.len);
    elt.value.data = value;
    elt.value.len = len;
    return ngx_http_spanprof_add_header(list, &elt) ? NGX_OK : NGX_ERROR;
}


/* Removes every trace header of every known format (uber-trace-id too)
 * from the request: the configured formats are then written anew, so an
 * upstream never sees two contexts. */
static ngx_int_t
ngx_http_spanprof_strip_headers(ngx_http_request_t *r, ngx_list_t *list)
{
    ngx_uint_t                    total, n;
    ngx_list_t                    copy;
    ngx_table_elt_t              *h;
    ngx_http_spanprof_headers_t   it;

    n = 0;
    total = 0;
    it.part = &list->part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        total++;
        if (h->hash != 0
            && sp_propagation_is_trace_header((const char *) h->key.data,
                                              h->key.len))
        {
            n++;
        }
    }

    if (n == 0) {
        return NGX_OK;
    }

    /*
     * Upstream modules send every entry of the list, so removed headers
     * must leave it. The list is copied rather than shifted in place: the
     * typed pointers in r->headers_in (host, user_agent, ...) keep pointing
     * at the old, unchanged entries. Room for the headers written next.
     */
    if (ngx_list_init(&copy, r->pool, total - n + 8, sizeof(ngx_table_elt_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    it.part = &list->part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        if (h->hash != 0
            && sp_propagation_is_trace_header((const char *) h->key.data,
                                              h->key.len))
        {
            continue;
        }
        if (ngx_http_spanprof_add_header(&copy, h) == NULL) {
            return NGX_ERROR;
        }
    }

    *list = copy;
    if (copy.last == &copy.part) {
        list->last = &list->part;
    }
    return NGX_OK;
}


/* inject and propagate: every trace header the client sent leaves the
 * request, and our context is written in each format of the location's
 * otel_propagation. tracestate travels only with the W3C parent it belongs
 * to: kept in propagate mode when valid, dropped otherwise. */
ngx_int_t
ngx_http_spanprof_inject(ngx_http_request_t *r, ngx_http_spanprof_ctx_t *ctx)
{
    u_char                        *tp, *b;
    ngx_int_t                      rc;
    ngx_list_t                    *list;
    const u_char                  *span;
    ngx_http_spanprof_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);
    list = &r->headers_in.headers;

    /* HTTP/0.9 requests have no header list at all. */
    if (list->nalloc == 0) {
        if (ngx_list_init(list, r->pool, 4, sizeof(ngx_table_elt_t))
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (ngx_http_spanprof_strip_headers(r, list) != NGX_OK) {
        return NGX_ERROR;
    }

    rc = NGX_OK;

    if (sp_propagation_has(&lcf->propagation, SP_PROP_W3C)) {
        tp = ngx_http_spanprof_traceparent(r, ctx);
        if (tp == NULL) {
            return NGX_ERROR;
        }
        rc = ngx_http_spanprof_push_header(list,
                                           NGX_HTTP_SPANPROF_H_TRACEPARENT,
                                           tp, SP_TRACEPARENT_LEN);
        if (rc == NGX_OK && ctx->tracestate.len) {
            rc = ngx_http_spanprof_push_header(list,
                                               NGX_HTTP_SPANPROF_H_TRACESTATE,
                                               ctx->tracestate.data,
                                               ctx->tracestate.len);
        }
    }

    if (rc == NGX_OK
        && (sp_propagation_has(&lcf->propagation, SP_PROP_B3)
            || sp_propagation_has(&lcf->propagation, SP_PROP_B3MULTI)))
    {
        /* "{trace}-{span}-{0|1}": the multi headers are its parts. */
        b = ngx_pnalloc(r->main->pool, SP_B3_SINGLE_LEN);
        if (b == NULL) {
            return NGX_ERROR;
        }
        span = ngx_http_spanprof_client_span_id(ctx);
        sp_b3_format_single((char *) b, ctx->trace_id, span, ctx->sampled);

        if (sp_propagation_has(&lcf->propagation, SP_PROP_B3)) {
            rc = ngx_http_spanprof_push_header(list, NGX_HTTP_SPANPROF_H_B3,
                                               b, SP_B3_SINGLE_LEN);
        }
        if (rc == NGX_OK
            && sp_propagation_has(&lcf->propagation, SP_PROP_B3MULTI))
        {
            if (ngx_http_spanprof_push_header(list,
                    NGX_HTTP_SPANPROF_H_B3_TRACE, b, 2 * SP_TRACE_ID_LEN)
                != NGX_OK
                || ngx_http_spanprof_push_header(list,
                       NGX_HTTP_SPANPROF_H_B3_SPAN,
                       b + 2 * SP_TRACE_ID_LEN + 1, 2 * SP_SPAN_ID_LEN)
                   != NGX_OK
                || ngx_http_spanprof_push_header(list,
                       NGX_HTTP_SPANPROF_H_B3_SAMPLED,
                       b + SP_B3_SINGLE_LEN - 1, 1)
                   != NGX_OK)
            {
                rc = NGX_ERROR;
            }
        }
    }

    return rc;
}
