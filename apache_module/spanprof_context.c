/*
 * The trace context of a request: extracted from traceparent/tracestate,
 * or started anew, decided sampled or not, injected into the request
 * headers that mod_proxy passes to backends, and exported to the request
 * environment (OTEL_TRACE_ID, OTEL_SPAN_ID, OTEL_PARENT_ID,
 * OTEL_TRACEPARENT).
 */

#include <stddef.h>
#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_request.h"
#include "apr_strings.h"

#include "mod_spanprof.h"
#include "common/profile/record_pool.h"
#include "common/trace/traceparent.h"
#include "common/trace/tracestate.h"

APLOG_USE_MODULE(spanprof);


/* The context lives in the original request's pool (shared by internal
 * redirects); its labels' record does not (record_pool.h): the cleanup
 * detaches the calling thread and gives the record back, invalid, while
 * another thread may still point at it (mod_http2 destroys a stream's
 * pool on the primary connection's thread). */
static apr_status_t
spanprof_ctx_cleanup(void *data)
{
    spanprof_ctx_t   *ctx = data;
    spanprof_conn_t  *cc;

    if (sp_thread_ctx_current() == ctx->record) {
        sp_thread_ctx_detach();
    }
    /* Other threads may still point at the record (an h2 worker whose
     * stream's pool is destroyed on the connection's thread): it is not
     * freed, only marked invalid and given back. */
    sp_record_pool_put(ctx->record);
    ctx->record = NULL;
    cc = spanprof_conn(ctx->r->connection, 0);
    if (cc != NULL && cc->active == ctx) {
        cc->active = NULL;
    }
    return APR_SUCCESS;
}


spanprof_conn_t *
spanprof_conn(conn_rec *c, int create)
{
    spanprof_conn_t  *cc;

    cc = ap_get_module_config(c->conn_config, &spanprof_module);
    if (cc == NULL && create) {
        cc = apr_pcalloc(c->pool, sizeof(spanprof_conn_t));
        ap_set_module_config(c->conn_config, &spanprof_module, cc);
    }
    return cc;
}


request_rec *
spanprof_last(request_rec *r)
{
    while (r->next != NULL) {
        r = r->next;
    }
    return r;
}


spanprof_ctx_t *
spanprof_get_ctx(request_rec *r, int create)
{
    request_rec     *orig;
    spanprof_ctx_t  *ctx;

    /* Subrequests share their main request's context. */
    while (r->main != NULL) {
        r = r->main;
    }

    ctx = ap_get_module_config(r->request_config, &spanprof_module);
    if (ctx != NULL) {
        return ctx;
    }

    /* An internal redirect has a new request_config; the original request
     * (r->prev, ...) still has its own and the same pool. */
    for (orig = r; orig->prev != NULL; orig = orig->prev) {
        /* void */
    }
    if (orig != r) {
        ctx = ap_get_module_config(orig->request_config, &spanprof_module);
        if (ctx != NULL) {
            ap_set_module_config(r->request_config, &spanprof_module, ctx);
            return ctx;
        }
    }

    if (!create) {
        return NULL;
    }

    /* The attempts and the labels' record at its end are written before
     * they are read (spanprof_proxy_attempt, spanprof_profile_request):
     * zeroing them would be most of the structure. */
    ctx = apr_palloc(orig->pool, sizeof(spanprof_ctx_t));
    memset(ctx, 0, offsetof(spanprof_ctx_t, attempts));
    ctx->record = NULL;
    ctx->r = orig;
    /* The time httpd started reading the request line. */
    ctx->start_ns = (uint64_t) orig->request_time * 1000;
    if (ctx->start_ns == 0) {
        ctx->start_ns = (uint64_t) apr_time_now() * 1000;
    }

    apr_pool_cleanup_register(orig->pool, ctx, spanprof_ctx_cleanup,
                              apr_pool_cleanup_null);
    ap_set_module_config(orig->request_config, &spanprof_module, ctx);
    ap_set_module_config(r->request_config, &spanprof_module, ctx);
    return ctx;
}


typedef struct {
    const char  *name;
    int          n;
    const char  *first;
    char        *joined;
    apr_size_t   len;
    apr_pool_t  *pool;
} spanprof_scan_t;


static int
spanprof_count_header(void *data, const char *key, const char *value)
{
    spanprof_scan_t  *sc = data;

    (void) key;
    if (sc->n++ == 0) {
        sc->first = value;
    }
    return 1;
}


static int
spanprof_join_header(void *data, const char *key, const char *value)
{
    spanprof_scan_t  *sc = data;

    (void) key;
    if (sc->joined == NULL) {
        sc->joined = apr_pstrdup(sc->pool, value);
    } else {
        sc->joined = apr_pstrcat(sc->pool, sc->joined, ",", value, NULL);
    }
    return 1;
}


/* Reads traceparent and tracestate as W3C Trace Context says: exactly one
 * valid traceparent, and the tracestate lines joined with ',' in order
 * (httpd itself joins repeated header lines with ", "). */
static void
spanprof_extract(request_rec *r, spanprof_ctx_t *ctx)
{
    spanprof_scan_t   tp, ts;
    sp_traceparent_t  parsed;

    memset(&tp, 0, sizeof(tp));
    apr_table_do(spanprof_count_header, &tp, r->headers_in, "traceparent",
                 NULL);

    if (tp.n != 1
        || sp_traceparent_parse(tp.first, strlen(tp.first), &parsed) != 0)
    {
        /* No valid parent: the tracestate is not ours to keep either. */
        return;
    }

    memcpy(ctx->trace_id, parsed.trace_id, SP_TRACE_ID_LEN);
    memcpy(ctx->parent_id, parsed.parent_id, SP_SPAN_ID_LEN);
    ctx->parent_flags = parsed.flags;
    ctx->has_parent = 1;
    ctx->random = (parsed.flags & SP_TRACE_FLAG_RANDOM) != 0;

    memset(&ts, 0, sizeof(ts));
    ts.pool = ctx->r->pool;
    apr_table_do(spanprof_join_header, &ts, r->headers_in, "tracestate",
                 NULL);
    if (ts.joined == NULL || ts.joined[0] == '\0'
        || sp_tracestate_validate(ts.joined, strlen(ts.joined)) != 0)
    {
        return;
    }
    ctx->tracestate = ts.joined;
}


/* The ids, decided once per request: the trace id is the incoming one when
 * the settings in effect for r extract it. */
void
spanprof_resolve_ids(request_rec *r, spanprof_ctx_t *ctx)
{
    if (ctx->ids) {
        return;
    }
    ctx->ids = 1;

    if (spanprof_extracts(spanprof_dir_conf(r)->context)) {
        spanprof_extract(r, ctx);
    }

    if (!ctx->has_parent) {
        sp_trace_id_generate(ctx->trace_id);
        ctx->random = 1;
    }
    sp_span_id_generate(ctx->span_id);
}


/* Decided once per request, with the settings of the location the request
 * is in when first asked: right after httpd's first <Location> walk
 * (translate_name), or at log_transaction for requests rejected before.
 * The ids may have been decided earlier (post_read_request) when no
 * location could have changed them. */
spanprof_ctx_t *
spanprof_resolve(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    ctx = spanprof_get_ctx(r, 1);
    if (ctx->resolved) {
        return ctx;
    }
    ctx->resolved = 1;

    spanprof_resolve_ids(r, ctx);
    ctx->sampled = spanprof_traced(r, spanprof_dir_conf(r));

    return ctx;
}


/* An OtelTrace expression, for r. It runs once the ids are known, so it
 * may read %{OTEL_PARENT_SAMPLED} or otel_ratio(). An expression that
 * fails at run time leaves the request untraced. */
int
spanprof_trace_expr(request_rec *r, const spanprof_dir_conf_t *dc)
{
    int          rv;
    const char  *err = NULL;

    rv = ap_expr_exec(r, dc->trace_expr, &err);
    if (err != NULL) {
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r,
                      "spanprof: OtelTrace expression %s:%u failed, request "
                      "not traced: %s", dc->trace_expr->filename,
                      dc->trace_expr->line_number, err);
        return 0;
    }
    return rv > 0;
}


const uint8_t *
spanprof_client_span_id(spanprof_ctx_t *ctx)
{
    if (!ctx->client_span) {
        sp_span_id_generate(ctx->client_span_id);
        ctx->client_span = 1;
    }
    return ctx->client_span_id;
}


uint8_t
spanprof_flags(spanprof_ctx_t *ctx)
{
    return (ctx->sampled ? SP_TRACE_FLAG_SAMPLED : 0)
           | (ctx->random ? SP_TRACE_FLAG_RANDOM : 0);
}


const char *
spanprof_traceparent(spanprof_ctx_t *ctx)
{
    if (ctx->traceparent[0] == '\0') {
        sp_traceparent_format(ctx->traceparent, ctx->trace_id,
                              spanprof_client_span_id(ctx),
                              spanprof_flags(ctx));
        ctx->traceparent[SP_TRACEPARENT_LEN] = '\0';
    }
    return ctx->traceparent;
}


/* inject and propagate: our traceparent replaces the client's; tracestate
 * travels only with the parent it belongs to (kept in propagate mode when
 * valid, removed otherwise). mod_proxy_http/ajp forward r->headers_in, and
 * mod_proxy_fcgi passes them as HTTP_* parameters. */
void
spanprof_inject(request_rec *r, spanprof_ctx_t *ctx)
{
    apr_table_setn(r->headers_in, "traceparent", spanprof_traceparent(ctx));
    if (ctx->tracestate != NULL) {
        apr_table_setn(r->headers_in, "tracestate", ctx->tracestate);
    } else {
        apr_table_unset(r->headers_in, "tracestate");
    }
}


/* For mod_log_config (%{OTEL_TRACE_ID}e), mod_headers (%{...}e), CGI and
 * SSI. Every request_rec has its own environment (an internal redirect
 * gets REDIRECT_-prefixed copies), so each one is given the values.
 * Set for every request, so kept cheap: the trace id's digits are taken
 * from the traceparent, the strings share one allocation, and they are
 * added (apr_table_addn) rather than set: all our keys begin "OTEL", which
 * apr's table checksum cannot tell apart, so each set would compare every
 * key added before it. */
void
spanprof_set_env(request_rec *r, spanprof_ctx_t *ctx)
{
    char        *b;
    const char  *tp;

    if (ctx->env_r == r) {
        return;
    }
    ctx->env_r = r;
    if (apr_table_get(r->subprocess_env, "OTEL_SPAN_ID") != NULL) {
        return;
    }
    tp = spanprof_traceparent(ctx);

    /* trace id (32) NUL span id (16) NUL parent id (16 or 0) NUL */
    b = apr_palloc(ctx->r->pool, 2 * SP_TRACE_ID_LEN + 4 * SP_SPAN_ID_LEN + 3);
    memcpy(b, tp + 3, 2 * SP_TRACE_ID_LEN);
    b[2 * SP_TRACE_ID_LEN] = '\0';
    apr_table_addn(r->subprocess_env, "OTEL_TRACE_ID", b);
    b += 2 * SP_TRACE_ID_LEN + 1;

    sp_hex_encode(b, ctx->span_id, SP_SPAN_ID_LEN);
    b[2 * SP_SPAN_ID_LEN] = '\0';
    apr_table_addn(r->subprocess_env, "OTEL_SPAN_ID", b);
    b += 2 * SP_SPAN_ID_LEN + 1;

    if (ctx->has_parent) {
        sp_hex_encode(b, ctx->parent_id, SP_SPAN_ID_LEN);
        b[2 * SP_SPAN_ID_LEN] = '\0';
    } else {
        b[0] = '\0';
    }
    apr_table_addn(r->subprocess_env, "OTEL_PARENT_ID", b);
    apr_table_addn(r->subprocess_env, "OTEL_TRACEPARENT", tp);
}
