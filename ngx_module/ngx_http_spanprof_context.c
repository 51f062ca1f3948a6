/*
 * The trace context of a request: extracted from traceparent/tracestate,
 * or started anew, decided sampled or not, and injected into the request
 * headers that nginx passes to upstreams.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/base/clock.h"
#include "common/trace/traceparent.h"
#include "common/trace/tracestate.h"


static ngx_str_t  ngx_http_spanprof_traceparent_name =
    ngx_string("traceparent");
static ngx_str_t  ngx_http_spanprof_tracestate_name =
    ngx_string("tracestate");


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

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_spanprof_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NULL;
    }
    cln->handler = ngx_http_spanprof_ctx_cleanup;
    cln->data = ctx;

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


/* Reads traceparent and tracestate as W3C Trace Context says: exactly one
 * valid traceparent, and the tracestate lines joined with ',' in order. */
static void
ngx_http_spanprof_extract(ngx_http_request_t *r, ngx_http_spanprof_ctx_t *ctx)
{
    u_char            *p;
    size_t                        len;
    ngx_uint_t                    n_tp;
    ngx_table_elt_t              *h, *tp;
    sp_traceparent_t              parsed;
    ngx_http_spanprof_headers_t   it;

    tp = NULL;
    n_tp = 0;
    len = 0;

    it.part = &r->headers_in.headers.part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        if (ngx_http_spanprof_header_is(h,
                                        &ngx_http_spanprof_traceparent_name))
        {
            tp = h;
            n_tp++;
        } else if (ngx_http_spanprof_header_is(h,
                                   &ngx_http_spanprof_tracestate_name))
        {
            len += h->value.len + 1;
        }
    }

    if (n_tp != 1
        || sp_traceparent_parse((const char *) tp->value.data, tp->value.len,
                                &parsed) != 0)
    {
        /* No valid parent: the tracestate is not ours to keep either. */
        return;
    }

    ngx_memcpy(ctx->trace_id, parsed.trace_id, SP_TRACE_ID_LEN);
    ngx_memcpy(ctx->parent_id, parsed.parent_id, SP_SPAN_ID_LEN);
    ctx->parent_flags = parsed.flags;
    ctx->has_parent = 1;
    ctx->random = (parsed.flags & SP_TRACE_FLAG_RANDOM) != 0;

    if (len == 0 || len > SP_TRACESTATE_MAX_LEN * 4) {
        return;
    }

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return;
    }
    ctx->tracestate.data = p;

    it.part = &r->headers_in.headers.part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        if (ngx_http_spanprof_header_is(h,
                                        &ngx_http_spanprof_tracestate_name))
        {
            if (p != ctx->tracestate.data) {
                *p++ = ',';
            }
            p = ngx_cpymem(p, h->value.data, h->value.len);
        }
    }
    ctx->tracestate.len = p - ctx->tracestate.data;

    if (sp_tracestate_validate((const char *) ctx->tracestate.data,
                               ctx->tracestate.len) != 0)
    {
        ngx_str_null(&ctx->tracestate);
    }
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

    ctx = ngx_http_spanprof_get_ctx(r, 1);
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
        ngx_http_spanprof_extract(r, ctx);
    }

    if (!ctx->has_parent) {
        sp_trace_id_generate(ctx->trace_id);
        ctx->random = 1;
    }
    sp_span_id_generate(ctx->span_id);

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


/* Sets the first header called `name` to value (or adds one) and removes
 * the others; an empty value removes them all. */
static ngx_int_t
ngx_http_spanprof_set_header(ngx_http_request_t *r, ngx_str_t *name,
    u_char *value, size_t len)
{
    ngx_uint_t                    n, total, kept;
    ngx_list_t                   *list, copy;
    ngx_table_elt_t              *h, *first, elt;
    ngx_http_spanprof_headers_t   it;

    list = &r->headers_in.headers;

    /* HTTP/0.9 requests have no header list at all. */
    if (list->nalloc == 0) {
        if (len == 0) {
            return NGX_OK;
        }
        if (ngx_list_init(list, r->pool, 2, sizeof(ngx_table_elt_t))
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    n = 0;
    total = 0;
    first = NULL;
    it.part = &list->part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        total++;
        if (ngx_http_spanprof_header_is(h, name)) {
            if (first == NULL) {
                first = h;
            }
            n++;
        }
    }

    if (n == 0) {
        if (len == 0) {
            return NGX_OK;
        }
        ngx_memzero(&elt, sizeof(ngx_table_elt_t));
        elt.key = *name;
        elt.lowcase_key = name->data;
        elt.hash = ngx_hash_key(name->data, name->len);
        elt.value.data = value;
        elt.value.len = len;
        return ngx_http_spanprof_add_header(list, &elt) ? NGX_OK : NGX_ERROR;
    }

    if (n == 1 && len) {
        first->value.data = value;
        first->value.len = len;
        return NGX_OK;
    }

    /*
     * Upstream modules send every entry of the list, so removed headers
     * must leave it. The list is copied rather than shifted in place: the
     * typed pointers in r->headers_in (host, user_agent, ...) keep pointing
     * at the old, unchanged entries.
     */
    if (ngx_list_init(&copy, r->pool, total, sizeof(ngx_table_elt_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    kept = 0;
    it.part = &list->part;
    it.i = 0;

    while ((h = ngx_http_spanprof_next_header(&it)) != NULL) {
        elt = *h;
        if (ngx_http_spanprof_header_is(h, name)) {
            if (len == 0 || kept) {
                continue;
            }
            elt.value.data = value;
            elt.value.len = len;
            kept = 1;
        }
        if (ngx_http_spanprof_add_header(&copy, &elt) == NULL) {
            return NGX_ERROR;
        }
    }

    *list = copy;
    if (copy.last == &copy.part) {
        list->last = &list->part;
    }
    return NGX_OK;
}


ngx_int_t
ngx_http_spanprof_inject(ngx_http_request_t *r, ngx_http_spanprof_ctx_t *ctx)
{
    u_char  *tp;

    tp = ngx_http_spanprof_traceparent(r, ctx);
    if (tp == NULL) {
        return NGX_ERROR;
    }

    if (ngx_http_spanprof_set_header(r, &ngx_http_spanprof_traceparent_name,
                                     tp, SP_TRACEPARENT_LEN)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* tracestate travels only with the parent it belongs to: kept in
     * propagate mode when valid, dropped otherwise. */
    return ngx_http_spanprof_set_header(r, &ngx_http_spanprof_tracestate_name,
                                        ctx->tracestate.data,
                                        ctx->tracestate.len);
}
