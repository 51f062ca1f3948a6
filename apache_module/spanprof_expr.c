/*
 * What ap_expr expressions (OtelTrace, <If>, Header ... expr=, mod_rewrite,
 * SetEnvIfExpr, ...) can read of a request's trace context:
 *
 *   %{OTEL_TRACE_ID}        32 hex digits
 *   %{OTEL_SPAN_ID}         the SERVER span's id, 16 hex digits
 *   %{OTEL_PARENT_ID}       the extracted parent's id, or ""
 *   %{OTEL_PARENT_SAMPLED}  "1" when the extracted parent is sampled, else
 *                           "0" (as nginx's $otel_parent_sampled)
 *   otel_ratio('0.1')       "1" for that fraction of trace ids, else "0"
 *
 * Read from a request whose context is not decided yet, they decide its
 * ids with the settings in effect then (as nginx's $otel_* variables do).
 * A request that no settings trace, propagate or profile has no context:
 * the ids read "" and otel_ratio() "0".
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "ap_expr.h"
#include "apr_strings.h"

#include "mod_spanprof.h"

enum {
    SPANPROF_VAR_TRACE_ID,
    SPANPROF_VAR_SPAN_ID,
    SPANPROF_VAR_PARENT_ID,
    SPANPROF_VAR_PARENT_SAMPLED
};

static const char *const  spanprof_expr_vars[] = {
    "OTEL_TRACE_ID", "OTEL_SPAN_ID", "OTEL_PARENT_ID", "OTEL_PARENT_SAMPLED"
};

/* 2^56: OTel's consistent probability sampling reads the trace id's last
 * 56 bits as its randomness (W3C Trace Context level 2's random part). */
#define SPANPROF_RATIO_SPACE  72057594037927936.0


static spanprof_ctx_t *
spanprof_expr_ctx(ap_expr_eval_ctx_t *ec)
{
    spanprof_ctx_t  *ctx;

    if (ec->r == NULL || !spanprof_globals.used) {
        return NULL;
    }
    ctx = spanprof_get_ctx(ec->r, 0);
    if (ctx != NULL) {
        spanprof_resolve_ids(ec->r, ctx);
    }
    return ctx;
}


static const char *
spanprof_expr_hex(ap_expr_eval_ctx_t *ec, const uint8_t *id, size_t n)
{
    char  *s;

    s = apr_palloc(ec->p, 2 * n + 1);
    sp_hex_encode(s, id, n);
    s[2 * n] = '\0';
    return s;
}


static const char *
spanprof_expr_var(ap_expr_eval_ctx_t *ec, const void *data)
{
    spanprof_ctx_t  *ctx;

    ctx = spanprof_expr_ctx(ec);
    if (ctx == NULL) {
        return (uintptr_t) data == SPANPROF_VAR_PARENT_SAMPLED ? "0" : "";
    }

    switch ((uintptr_t) data) {
    case SPANPROF_VAR_TRACE_ID:
        return spanprof_expr_hex(ec, ctx->trace_id, SP_TRACE_ID_LEN);
    case SPANPROF_VAR_SPAN_ID:
        return spanprof_expr_hex(ec, ctx->span_id, SP_SPAN_ID_LEN);
    case SPANPROF_VAR_PARENT_ID:
        return ctx->has_parent
               ? spanprof_expr_hex(ec, ctx->parent_id, SP_SPAN_ID_LEN) : "";
    default:
        return ctx->has_parent && (ctx->parent_flags & SP_TRACE_FLAG_SAMPLED)
               ? "1" : "0";
    }
}


/* The threshold for a ratio from 0 to 1: a trace is kept when its last 56
 * bits are at least (1 - ratio) * 2^56, so that every service sampling at
 * the same ratio keeps the same traces. */
static int
spanprof_ratio_threshold(const char *arg, apr_uint64_t *threshold)
{
    char    *end;
    double   ratio;

    errno = 0;
    ratio = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno != 0
        || !(ratio >= 0.0 && ratio <= 1.0))
    {
        return -1;
    }
    *threshold = (apr_uint64_t) ((1.0 - ratio) * SPANPROF_RATIO_SPACE + 0.5);
    return 0;
}


static const char *
spanprof_expr_ratio(ap_expr_eval_ctx_t *ec, const void *data,
    const char *arg)
{
    int              i;
    apr_uint64_t     threshold, r;
    spanprof_ctx_t  *ctx;

    if (data != NULL) {
        threshold = *(const apr_uint64_t *) data;
    } else if (spanprof_ratio_threshold(arg, &threshold) != 0) {
        *ec->err = apr_psprintf(ec->p, "otel_ratio: \"%s\" is not a number "
                                "from 0 to 1", arg);
        return "0";
    }

    ctx = spanprof_expr_ctx(ec);
    if (ctx == NULL) {
        return "0";
    }
    r = 0;
    for (i = SP_TRACE_ID_LEN - 7; i < SP_TRACE_ID_LEN; i++) {
        r = (r << 8) | ctx->trace_id[i];
    }
    return r >= threshold ? "1" : "0";
}


static int
spanprof_expr_lookup(ap_expr_lookup_parms *parms)
{
    apr_size_t     i;
    apr_uint64_t  *threshold;

    switch (parms->type) {
    case AP_EXPR_FUNC_VAR:
        for (i = 0; i < sizeof(spanprof_expr_vars) / sizeof(char *); i++) {
            if (strcmp(parms->name, spanprof_expr_vars[i]) == 0) {
                *parms->func = (const void *) spanprof_expr_var;
                *parms->data = (const void *) (uintptr_t) i;
                return OK;
            }
        }
        break;

    case AP_EXPR_FUNC_STRING:
        if (strcmp(parms->name, "otel_ratio") != 0) {
            break;
        }
        /* A constant ratio is checked (and converted) once, here. */
        *parms->data = NULL;
        if (parms->arg != NULL) {
            threshold = apr_palloc(parms->pool, sizeof(apr_uint64_t));
            if (spanprof_ratio_threshold(parms->arg, threshold) != 0) {
                *parms->err = apr_psprintf(parms->ptemp, "otel_ratio: \"%s\" "
                                           "is not a number from 0 to 1",
                                           parms->arg);
                return !OK;
            }
            *parms->data = threshold;
        }
        *parms->func = (const void *) spanprof_expr_ratio;
        return OK;
    }
    return DECLINED;
}


void
spanprof_register_expr_hooks(void)
{
    ap_hook_expr_lookup(spanprof_expr_lookup, NULL, NULL, APR_HOOK_MIDDLE);
}
