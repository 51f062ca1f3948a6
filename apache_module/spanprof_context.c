/*
 * The trace context of a request: extracted from the configured formats
 * (OtelPropagation: W3C traceparent/tracestate, B3 single or multi
 * header), or started anew, decided sampled or not, injected in every
 * configured format into the request headers that mod_proxy passes to
 * backends, and exported to the request
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
#include "common/trace/b3.h"
#include "common/trace/propagation.h"
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
    /* log_transaction let go of the connection already */
    if (ctx->logged) {
        return APR_SUCCESS;
    }
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
spanprof_ctx_find(request_rec *r, int create)
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

    /* The ids, the traceparent's text and the labels' record are written
     * before they are read: zeroing them was half the structure (a
     * `rep stos` of 192 bytes). */
    ctx = apr_palloc(orig->pool, sizeof(spanprof_ctx_t));
    memset(ctx, 0, offsetof(spanprof_ctx_t, r));
    ctx->traceparent[0] = '\0';
    ctx->record = NULL;
    ctx->r = orig;
    /* The time httpd started reading the request line. */
    ctx->start_ns = (uint64_t) orig->request_time * 1000;
    if (ctx->start_ns == 0) {
        ctx->start_ns = (uint64_t) apr_time_now() * 1000;
    }

    /* Only a profiled request has a record or is its connection's active
     * one (profiling is on only where some directive turned it on). */
    if (spanprof_globals.profiling_used) {
        apr_pool_cleanup_register(orig->pool, ctx, spanprof_ctx_cleanup,
                                  apr_pool_cleanup_null);
    }
    ap_set_module_config(orig->request_config, &spanprof_module, ctx);
    if (orig != r) {
        ap_set_module_config(r->request_config, &spanprof_module, ctx);
    }
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
 * (httpd itself joins repeated header lines with ", "). 1 when a context
 * was found. */
static int
spanprof_extract_w3c(request_rec *r, spanprof_ctx_t *ctx)
{
    int               n;
    spanprof_scan_t   tp, ts;
    sp_traceparent_t  parsed;

    memset(&tp, 0, sizeof(tp));
    apr_table_do(spanprof_count_header, &tp, r->headers_in, "traceparent",
                 NULL);

    if (tp.n != 1
        || sp_traceparent_parse(tp.first, strlen(tp.first), &parsed) != 0)
    {
        /* No valid parent: the tracestate is not ours to keep either. */
        return 0;
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
    if (ts.joined == NULL) {
        return 1;
    }
    /* Forwarded without its optional whitespace and empty members. */
    n = sp_tracestate_normalize(ts.joined, strlen(ts.joined), ts.joined);
    if (n > 0) {
        ts.joined[n] = '\0';
        ctx->tracestate = ts.joined;
    }
    return 1;
}


static int
spanprof_use_b3(spanprof_ctx_t *ctx, const sp_b3_t *b3)
{
    /* A sampling decision alone ("b3: 0", deny) is a valid B3 value with
     * no parent: the trace starts here. */
    if (b3->has_ids) {
        memcpy(ctx->trace_id, b3->trace_id, SP_TRACE_ID_LEN);
        memcpy(ctx->parent_id, b3->span_id, SP_SPAN_ID_LEN);
        ctx->parent_flags = sp_b3_sampled(b3) ? SP_TRACE_FLAG_SAMPLED : 0;
        ctx->has_parent = 1;
        ctx->random = 0;
    }
    return 1;
}


static const char *const  spanprof_b3_multi[] = {
    "X-B3-TraceId", "X-B3-SpanId", "X-B3-ParentSpanId", "X-B3-Sampled",
    "X-B3-Flags"
};


/* httpd joins repeated lines with ", ": such a value is invalid in every
 * B3 header, as two contexts should be. */
static int
spanprof_extract_b3(request_rec *r, spanprof_ctx_t *ctx, int multi)
{
    int          i;
    sp_b3_t      b3;
    size_t       len[5];
    const char  *v[5];

    if (!multi) {
        v[0] = apr_table_get(r->headers_in, "b3");
        if (v[0] == NULL || sp_b3_parse_single(v[0], strlen(v[0]), &b3) != 0)
        {
            return 0;
        }
        return spanprof_use_b3(ctx, &b3);
    }

    for (i = 0; i < 5; i++) {
        v[i] = apr_table_get(r->headers_in, spanprof_b3_multi[i]);
        len[i] = v[i] ? strlen(v[i]) : 0;
    }
    if (sp_b3_parse_multi(v[0], len[0], v[1], len[1], v[2], len[2],
                          v[3], len[3], v[4], len[4], &b3)
        != 0)
    {
        return 0;
    }
    return spanprof_use_b3(ctx, &b3);
}


/* The first valid context among the section's formats, W3C first. */
static void
spanprof_extract(request_rec *r, spanprof_ctx_t *ctx,
    const spanprof_dir_conf_t *dc)
{
    size_t            i, n;
    sp_prop_format_t  order[SP_PROP_N];

    n = sp_propagation_extract_order(&dc->propagation, order);

    for (i = 0; i < n; i++) {
        if ((order[i] == SP_PROP_W3C && spanprof_extract_w3c(r, ctx))
            || (order[i] == SP_PROP_B3 && spanprof_extract_b3(r, ctx, 0))
            || (order[i] == SP_PROP_B3MULTI && spanprof_extract_b3(r, ctx, 1)))
        {
            return;
        }
    }
}


/* Whether the request carries a trace header some format could read
 * (before the sections' settings are known). */
int
spanprof_has_incoming_context(request_rec *r)
{
    return apr_table_get(r->headers_in, "traceparent") != NULL
           || apr_table_get(r->headers_in, "b3") != NULL
           || apr_table_get(r->headers_in, "X-B3-TraceId") != NULL;
}


const char *
spanprof_set_propagation(cmd_parms *cmd, void *conf, const char *args)
{
    spanprof_dir_conf_t  *dc = conf;
    sp_propagation_t      p;
    const char           *w;
    int                   rc;

    memset(&p, 0, sizeof(p));
    while (*(w = ap_getword_conf(cmd->temp_pool, &args)) != '\0') {
        rc = sp_propagation_add(&p, w, strlen(w));
        if (rc == -2) {
            return apr_psprintf(cmd->pool, "%s: format \"%s\" given twice",
                                cmd->cmd->name, w);
        }
        if (rc != 0) {
            return apr_psprintf(cmd->pool, "%s: invalid format \"%s\": "
                                "expected " SP_PROPAGATION_NAMES,
                                cmd->cmd->name, w);
        }
    }
    if (p.n == 0) {
        return apr_psprintf(cmd->pool, "%s: expects one or more of "
                            SP_PROPAGATION_NAMES, cmd->cmd->name);
    }
    dc->propagation = p;
    /* In a section: known per request only after httpd's walks. */
    if (cmd->path != NULL) {
        spanprof_globals.section_context = 1;
    }
    return NULL;
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
        spanprof_extract(r, ctx, spanprof_dir_conf(r));
    }

    /* Both ids from one look at the generator's state. */
    sp_ids_generate(ctx->has_parent ? NULL : ctx->trace_id, ctx->span_id);
    if (!ctx->has_parent) {
        ctx->random = 1;
    }
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


/* Every header of every known trace format (uber-trace-id too): in
 * inject and propagate modes they leave the request before the configured
 * formats are written, so a backend never sees two contexts. */
static const char *const  spanprof_trace_headers[] = {
    "traceparent", "tracestate", "b3", "X-B3-TraceId", "X-B3-SpanId",
    "X-B3-ParentSpanId", "X-B3-Sampled", "X-B3-Flags", "uber-trace-id",
};


/* inject and propagate: our context, in each format of OtelPropagation,
 * replaces the client's; tracestate travels only with the W3C parent it
 * belongs to (kept in propagate mode when valid, removed otherwise).
 * mod_proxy_http/ajp forward r->headers_in, and mod_proxy_fcgi passes them
 * as HTTP_* parameters. */
void
spanprof_inject(request_rec *r, spanprof_ctx_t *ctx)
{
    size_t                      i;
    char                       *b;
    const sp_propagation_t     *p;

    p = &spanprof_dir_conf(r)->propagation;

    for (i = 0; i < sizeof(spanprof_trace_headers)
                    / sizeof(spanprof_trace_headers[0]); i++)
    {
        apr_table_unset(r->headers_in, spanprof_trace_headers[i]);
    }

    if (sp_propagation_has(p, SP_PROP_W3C)) {
        apr_table_setn(r->headers_in, "traceparent",
                       spanprof_traceparent(ctx));
        if (ctx->tracestate != NULL) {
            apr_table_setn(r->headers_in, "tracestate", ctx->tracestate);
        }
    }

    if (!sp_propagation_has(p, SP_PROP_B3)
        && !sp_propagation_has(p, SP_PROP_B3MULTI))
    {
        return;
    }

    /* "{trace}-{span}-{0|1}", and its three parts NUL-terminated. */
    b = apr_palloc(ctx->r->pool, 2 * SP_B3_SINGLE_LEN + 3);
    sp_b3_format_single(b, ctx->trace_id, spanprof_client_span_id(ctx),
                        ctx->sampled);
    b[SP_B3_SINGLE_LEN] = '\0';

    if (sp_propagation_has(p, SP_PROP_B3)) {
        apr_table_setn(r->headers_in, "b3", b);
    }
    if (sp_propagation_has(p, SP_PROP_B3MULTI)) {
        memcpy(b + SP_B3_SINGLE_LEN + 1, b, SP_B3_SINGLE_LEN);
        b += SP_B3_SINGLE_LEN + 1;
        b[SP_B3_SINGLE_LEN] = '\0';
        b[2 * SP_TRACE_ID_LEN] = '\0';
        b[2 * SP_TRACE_ID_LEN + 1 + 2 * SP_SPAN_ID_LEN] = '\0';
        apr_table_setn(r->headers_in, "X-B3-TraceId", b);
        apr_table_setn(r->headers_in, "X-B3-SpanId",
                       b + 2 * SP_TRACE_ID_LEN + 1);
        apr_table_setn(r->headers_in, "X-B3-Sampled",
                       b + SP_B3_SINGLE_LEN - 1);
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
    /* A subrequest's environment is a copy of its main request's, which
     * may have them already; the original request's first time cannot
     * (an internal redirect renames them REDIRECT_OTEL_*). */
    if ((ctx->env_r != NULL || r != ctx->r)
        && apr_table_get(r->subprocess_env, "OTEL_SPAN_ID") != NULL)
    {
        ctx->env_r = r;
        return;
    }
    ctx->env_r = r;
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
