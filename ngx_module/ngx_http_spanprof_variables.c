/*
 * $otel_trace_id, $otel_span_id, $otel_parent_id, $otel_parent_sampled and
 * $otel_traceparent. None is cacheable: subrequests share the main
 * request's variable cache, and the context may be created after a first
 * evaluation.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/trace/traceparent.h"


enum {
    NGX_HTTP_SPANPROF_VAR_TRACE_ID,
    NGX_HTTP_SPANPROF_VAR_SPAN_ID,
    NGX_HTTP_SPANPROF_VAR_PARENT_ID,
    NGX_HTTP_SPANPROF_VAR_PARENT_SAMPLED,
    NGX_HTTP_SPANPROF_VAR_TRACEPARENT
};


static ngx_int_t ngx_http_spanprof_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


static ngx_http_variable_t  ngx_http_spanprof_vars[] = {

    { ngx_string("otel_trace_id"), NULL, ngx_http_spanprof_variable,
      NGX_HTTP_SPANPROF_VAR_TRACE_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("otel_span_id"), NULL, ngx_http_spanprof_variable,
      NGX_HTTP_SPANPROF_VAR_SPAN_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("otel_parent_id"), NULL, ngx_http_spanprof_variable,
      NGX_HTTP_SPANPROF_VAR_PARENT_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("otel_parent_sampled"), NULL, ngx_http_spanprof_variable,
      NGX_HTTP_SPANPROF_VAR_PARENT_SAMPLED, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("otel_traceparent"), NULL, ngx_http_spanprof_variable,
      NGX_HTTP_SPANPROF_VAR_TRACEPARENT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_int_t
ngx_http_spanprof_hex(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    const u_char *id, size_t n)
{
    u_char  *p;

    p = ngx_pnalloc(r->pool, 2 * n);
    if (p == NULL) {
        return NGX_ERROR;
    }
    sp_hex_encode((char *) p, id, n);
    v->data = p;
    v->len = 2 * n;
    return NGX_OK;
}


static ngx_int_t
ngx_http_spanprof_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_int_t                 rc;
    ngx_http_spanprof_ctx_t  *ctx;

    ctx = ngx_http_spanprof_resolve(r);
    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    rc = NGX_OK;

    switch (data) {

    case NGX_HTTP_SPANPROF_VAR_TRACE_ID:
        rc = ngx_http_spanprof_hex(r, v, ctx->trace_id, SP_TRACE_ID_LEN);
        break;

    case NGX_HTTP_SPANPROF_VAR_SPAN_ID:
        rc = ngx_http_spanprof_hex(r, v, ctx->span_id, SP_SPAN_ID_LEN);
        break;

    case NGX_HTTP_SPANPROF_VAR_PARENT_ID:
        if (!ctx->has_parent) {
            v->len = 0;
            v->data = (u_char *) "";
            break;
        }
        rc = ngx_http_spanprof_hex(r, v, ctx->parent_id, SP_SPAN_ID_LEN);
        break;

    case NGX_HTTP_SPANPROF_VAR_PARENT_SAMPLED:
        v->len = 1;
        v->data = (u_char *) ((ctx->has_parent
                               && (ctx->parent_flags & SP_TRACE_FLAG_SAMPLED))
                              ? "1" : "0");
        break;

    default: /* NGX_HTTP_SPANPROF_VAR_TRACEPARENT */
        v->data = ngx_http_spanprof_traceparent(r, ctx);
        if (v->data == NULL) {
            return NGX_ERROR;
        }
        v->len = SP_TRACEPARENT_LEN;
        break;
    }

    if (rc != NGX_OK) {
        return rc;
    }

    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}


ngx_int_t
ngx_http_spanprof_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_spanprof_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }
        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}
