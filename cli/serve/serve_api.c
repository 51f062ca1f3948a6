#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve/flame_json.h"
#include "cli/serve/json_out.h"
#include "cli/serve/pprof_out.h"
#include "cli/serve/serve.h"
#include "cli/serve/ui_assets.h"
#include "cli/spanprof.h"

typedef const char *(*arg_fn)(void *ud, const char *name);

static void
json_error(serve_reply_t *r, int status, const char *msg)
{
    r->status = status;
    r->content_type = "application/json";
    sp_buf_reset(&r->body);
    sp_buf_append_str(&r->body, "{\"error\":");
    serve_json_str(&r->body, msg);
    sp_buf_append_str(&r->body, "}\n");
}

static void
json_ok(serve_reply_t *r)
{
    r->status = 200;
    r->content_type = "application/json";
}

/* "250ms", "1.5s", "900us", "100" (ms); -1 when invalid. */
static int64_t
parse_duration(const char *s)
{
    char    *end;
    double   v = strtod(s, &end), mul;

    if (end == s || v < 0 || v > 1e12) {
        return -1;
    }
    if (*end == '\0' || strcmp(end, "ms") == 0) {
        mul = 1e6;
    } else if (strcmp(end, "s") == 0) {
        mul = 1e9;
    } else if (strcmp(end, "us") == 0) {
        mul = 1e3;
    } else if (strcmp(end, "ns") == 0) {
        mul = 1;
    } else if (strcmp(end, "m") == 0) {
        mul = 60e9;
    } else {
        return -1;
    }
    /* 1e12 minutes is past INT64_MAX ns: converting it would be undefined. */
    if (v * mul >= 9.2e18) {
        return -1;
    }
    return (int64_t) (v * mul);
}

/* Reads the optional time range ?since=&until= (cli_parse_time forms);
 * 0, or -1 with the error reply made. */
static int
time_range(arg_fn arg, void *ud, int64_t *from, int64_t *to,
    serve_reply_t *r)
{
    const char  *v, *why;
    int64_t      now = cli_now_ns();

    *from = 0;
    *to = INT64_MAX;
    if ((v = arg(ud, "since")) != NULL && *v != '\0'
        && cli_parse_time(v, now, from, &why) != 0)
    {
        json_error(r, 400, "invalid since");
        return -1;
    }
    if ((v = arg(ud, "until")) != NULL && *v != '\0'
        && cli_parse_time(v, now, to, &why) != 0)
    {
        json_error(r, 400, "invalid until");
        return -1;
    }
    return 0;
}

static const char *
nonempty(const char *s)
{
    return s != NULL && *s != '\0' ? s : NULL;
}

static void
api_traces(serve_t *sv, arg_fn arg, void *ud, serve_reply_t *r)
{
    serve_trace_query_t  q;
    const char          *v;

    memset(&q, 0, sizeof(q));
    q.service = nonempty(arg(ud, "service"));
    q.route = nonempty(arg(ud, "route"));
    q.method = nonempty(arg(ud, "method"));
    q.limit = 20;
    if ((v = nonempty(arg(ud, "status"))) != NULL) {
        q.status = atoi(v);
        if (q.status < 100 || q.status > 599) {
            json_error(r, 400, "invalid status: expected 100..599");
            return;
        }
    }
    if ((v = nonempty(arg(ud, "min_duration"))) != NULL
        && (q.min_duration_ns = parse_duration(v)) < 0)
    {
        json_error(r, 400, "invalid min_duration: e.g. 100ms, 1.5s");
        return;
    }
    if ((v = nonempty(arg(ud, "limit"))) != NULL) {
        q.limit = atoi(v);
        if (q.limit < 1 || q.limit > 1000) {
            json_error(r, 400, "invalid limit: expected 1..1000");
            return;
        }
    }
    v = nonempty(arg(ud, "order"));
    q.slowest = v != NULL && strcmp(v, "slowest") == 0;
    if (time_range(arg, ud, &q.from_ns, &q.to_ns, r) != 0) {
        return;
    }
    if (serve_store_traces(sv->store, &q, &r->body) != 0) {
        json_error(r, 500, serve_store_error(sv->store));
        return;
    }
    json_ok(r);
}

static void
api_trace(serve_t *sv, const char *id, serve_reply_t *r)
{
    uint8_t  tid[16];
    int      rc;

    if (serve_hex_parse(id, tid, 16) != 0) {
        json_error(r, 400, "a trace id is 32 hex digits");
        return;
    }
    rc = serve_store_trace(sv->store, tid, &r->body);
    if (rc < 0) {
        json_error(r, 500, serve_store_error(sv->store));
    } else if (rc > 0) {
        json_error(r, 404, "no such trace");
    } else {
        json_ok(r);
    }
}

typedef struct {
    serve_flame_t  *flame;
    int             side;
    int             split_no_request;
} flame_ud_t;

static int
add_stack(void *ud, const char *stack, int64_t count, int64_t cpu_ns,
    int in_request)
{
    flame_ud_t  *f = ud;
    sp_buf_t     b;
    int          rc;

    if (!f->split_no_request || in_request) {
        return serve_flame_add(f->flame, stack, cpu_ns, count, f->side);
    }
    /* A worker's whole profile: what ran outside any request sits under
     * one frame that says so. */
    sp_buf_init(&b);
    sp_buf_append_str(&b, "[no request];");
    sp_buf_append_str(&b, stack);
    sp_buf_append_char(&b, '\0');
    rc = sp_buf_failed(&b) ? -1
         : serve_flame_add(f->flame, (const char *) b.data, cpu_ns, count,
                           f->side);
    sp_buf_free(&b);
    return rc;
}

/* Fills q from the arguments that choose samples (prefix "" or "base_");
 * 0, or -1 with the error reply made. */
static int
sample_query(arg_fn arg, void *ud, const char *prefix,
    serve_sample_query_t *q, uint8_t tid[16], uint8_t sid[8],
    serve_reply_t *r)
{
    char         name[32];
    const char  *v, *trace, *span;

#define ARG(n)  (snprintf(name, sizeof(name), "%s%s", prefix, n), \
                 nonempty(arg(ud, name)))

    memset(q, 0, sizeof(*q));
    q->to_ns = INT64_MAX;
    trace = ARG("trace");
    span = ARG("span");
    if (trace != NULL || span != NULL) {
        if (trace == NULL || span == NULL
            || serve_hex_parse(trace, tid, 16) != 0
            || serve_hex_parse(span, sid, 8) != 0)
        {
            json_error(r, 400, "a span is chosen by trace (32 hex digits) "
                               "and span (16 hex digits)");
            return -1;
        }
        q->trace_id = tid;
        q->span_id = sid;
        return 0;
    }
    if ((v = ARG("since")) != NULL
        && cli_parse_time(v, cli_now_ns(), &q->from_ns, &trace) != 0)
    {
        json_error(r, 400, "invalid since");
        return -1;
    }
    if ((v = ARG("until")) != NULL
        && cli_parse_time(v, cli_now_ns(), &q->to_ns, &trace) != 0)
    {
        json_error(r, 400, "invalid until");
        return -1;
    }
    if ((v = ARG("route")) != NULL) {
        q->route = v;
        q->service = ARG("service");
        if ((v = ARG("min_duration")) != NULL
            && (q->min_duration_ns = parse_duration(v)) < 0)
        {
            json_error(r, 400, "invalid min_duration");
            return -1;
        }
        if ((v = ARG("max_duration")) != NULL
            && (q->max_duration_ns = parse_duration(v)) < 0)
        {
            json_error(r, 400, "invalid max_duration");
            return -1;
        }
        return 0;
    }
    if ((v = ARG("pid")) != NULL) {
        q->pid = atoll(v);
    }
    q->whole = 1;
    return 0;
#undef ARG
}

/* ?type= (default cpu) into q->type: a type no sample has is -1, which
 * selects nothing. */
static void
sample_type(serve_t *sv, arg_fn arg, void *ud, serve_sample_query_t *q)
{
    const char  *v = nonempty(arg(ud, "type"));

    q->type = v == NULL ? SERVE_TYPE_CPU
              : serve_store_type_find(sv->store, v);
    if (q->type == 0) {
        q->type = -1;
    }
}

/* /api/flame: one selection; /api/diff: the selection against base_*. */
static void
api_flame(serve_t *sv, arg_fn arg, void *ud, int diff, serve_reply_t *r)
{
    serve_sample_query_t  q, b;
    uint8_t               tid[16], sid[8], btid[16], bsid[8];
    flame_ud_t            f;
    int                   rc;

    if (sample_query(arg, ud, "", &q, tid, sid, r) != 0
        || (diff && sample_query(arg, ud, "base_", &b, btid, bsid, r) != 0))
    {
        return;
    }
    /* A diff compares one type on both sides. */
    sample_type(sv, arg, ud, &q);
    b.type = q.type;
    f.flame = serve_flame_new();
    f.side = 0;
    f.split_no_request = q.whole;
    rc = serve_store_stacks(sv->store, &q, add_stack, &f);
    if (rc == 0 && diff) {
        f.side = 1;
        f.split_no_request = b.whole;
        rc = serve_store_stacks(sv->store, &b, add_stack, &f);
    }
    if (rc != 0) {
        serve_flame_free(f.flame);
        json_error(r, 500, serve_store_error(sv->store));
        return;
    }
    sp_buf_append_str(&r->body, "{\"type\":");
    serve_json_str(&r->body, nonempty(arg(ud, "type")) != NULL
                             ? arg(ud, "type") : "cpu");
    sp_buf_append_str(&r->body, ",\"unit\":");
    serve_json_str(&r->body, serve_store_type_unit(sv->store, q.type));
    sp_buf_append_str(&r->body, ",\"tree\":");
    serve_flame_json(f.flame, "all", diff, &r->body);
    sp_buf_append_str(&r->body, "}");
    serve_flame_free(f.flame);
    json_ok(r);
}

static int
add_pprof(void *ud, const char *stack, int64_t count, int64_t cpu_ns,
    int in_request)
{
    (void) in_request;
    serve_pprof_add(ud, stack, count, cpu_ns);
    return 0;
}

/* /api/pprof: the samples /api/flame would draw, as a gzip'd pprof file. */
static void
api_pprof(serve_t *sv, arg_fn arg, void *ud, serve_reply_t *r)
{
    serve_sample_query_t  q;
    uint8_t               tid[16], sid[8];
    serve_pprof_t        *p;
    const char           *unit, *type;

    if (sample_query(arg, ud, "", &q, tid, sid, r) != 0) {
        return;
    }
    sample_type(sv, arg, ud, &q);
    unit = serve_store_type_unit(sv->store, q.type);
    if (unit == NULL) {
        json_error(r, 404, "no sample of this type");
        return;
    }
    p = serve_pprof_new();
    if (serve_store_stacks(sv->store, &q, add_pprof, p) != 0) {
        serve_pprof_free(p);
        json_error(r, 500, serve_store_error(sv->store));
        return;
    }
    /* The period of one sample at the default 100 Hz rate; the values
     * carry the exact CPU time anyway. */
    type = nonempty(arg(ud, "type")) != NULL ? arg(ud, "type") : "cpu";
    if (serve_pprof_encode(p, type, unit, 10000000, &r->body) != 0) {
        serve_pprof_free(p);
        json_error(r, 500, "cannot encode the profile");
        return;
    }
    serve_pprof_free(p);
    r->status = 200;
    r->content_type = "application/octet-stream";
    r->disposition = "attachment; filename=\"spanprof.pb.gz\"";
}

static void
api_stats(serve_t *sv, serve_reply_t *r)
{
    serve_store_stats_t   st;
    const serve_counters_t *c = &sv->counters;

    serve_store_get_stats(sv->store, &st);
    sp_buf_appendf(&r->body,
        "{\"otlp_requests\":%" PRIu64 ",\"otlp_bad_requests\":%" PRIu64
        ",\"otlp_too_large\":%" PRIu64 ",\"otlp_unsupported\":%" PRIu64
        ",\"grpc_requests\":%" PRIu64 ",\"grpc_bad_requests\":%" PRIu64
        ",\"grpc_too_large\":%" PRIu64 ",\"grpc_unsupported\":%" PRIu64
        ",\"grpc_unavailable\":%" PRIu64 ",\"grpc_connections\":%" PRIu64
        ",\"grpc_connections_refused\":%" PRIu64
        ",\"grpc_protocol_errors\":%" PRIu64
        ",\"grpc_idle_closed\":%" PRIu64
        ",\"spans_accepted\":%" PRIu64 ",\"spans_rejected\":%" PRIu64
        ",\"profiles_accepted\":%" PRIu64 ",\"profiles_rejected\":%" PRIu64
        ",\"api_requests\":%" PRIu64 ",\"api_unauthorized\":%" PRIu64
        ",\"spans_stored\":%" PRIu64 ",\"samples_stored\":%" PRIu64
        ",\"spans_deleted\":%" PRIu64 ",\"samples_deleted\":%" PRIu64
        ",\"batches_failed\":%" PRIu64 ",\"rows_lost\":%" PRIu64
        ",\"database_bytes\":%" PRId64 "}",
        c->otlp_requests, c->otlp_bad_requests, c->otlp_too_large,
        c->otlp_unsupported, c->grpc_requests, c->grpc_bad_requests,
        c->grpc_too_large, c->grpc_unsupported, c->grpc_unavailable,
        c->grpc_connections, c->grpc_connections_refused,
        c->grpc_protocol_errors, c->grpc_idle_closed, c->spans_accepted,
        c->spans_rejected,
        c->profiles_accepted, c->profiles_rejected, c->api_requests,
        c->api_unauthorized, st.spans_stored, st.samples_stored,
        st.spans_deleted, st.samples_deleted, st.batches_failed,
        st.rows_lost, serve_store_size(sv->store));
    json_ok(r);
}

void
serve_api_get(serve_t *sv, const char *url, arg_fn arg, void *ud,
    serve_reply_t *r)
{
    const serve_asset_t  *a;

    if (strcmp(url, "/api/services") == 0) {
        if (serve_store_services(sv->store, &r->body) != 0) {
            json_error(r, 500, serve_store_error(sv->store));
            return;
        }
        json_ok(r);
    } else if (strcmp(url, "/api/workers") == 0) {
        int64_t  from, to;

        if (time_range(arg, ud, &from, &to, r) != 0) {
            return;
        }
        if (serve_store_workers(sv->store, from, to, &r->body) != 0) {
            json_error(r, 500, serve_store_error(sv->store));
            return;
        }
        json_ok(r);
    } else if (strcmp(url, "/api/traces") == 0) {
        api_traces(sv, arg, ud, r);
    } else if (strncmp(url, "/api/traces/", 12) == 0) {
        api_trace(sv, url + 12, r);
    } else if (strcmp(url, "/api/flame") == 0) {
        api_flame(sv, arg, ud, 0, r);
    } else if (strcmp(url, "/api/diff") == 0) {
        api_flame(sv, arg, ud, 1, r);
    } else if (strcmp(url, "/api/types") == 0) {
        serve_sample_query_t  q;
        uint8_t               tid[16], sid[8];

        if (sample_query(arg, ud, "", &q, tid, sid, r) != 0) {
            return;
        }
        if (serve_store_types(sv->store, &q, &r->body) != 0) {
            json_error(r, 500, serve_store_error(sv->store));
            return;
        }
        json_ok(r);
    } else if (strcmp(url, "/api/memory") == 0) {
        int64_t  from, to;

        if (time_range(arg, ud, &from, &to, r) != 0) {
            return;
        }
        if (serve_store_memory(sv->store, from, to, &r->body) != 0) {
            json_error(r, 500, serve_store_error(sv->store));
            return;
        }
        json_ok(r);
    } else if (strcmp(url, "/api/pprof") == 0) {
        api_pprof(sv, arg, ud, r);
    } else if (strcmp(url, "/api/stats") == 0) {
        api_stats(sv, r);
    } else if ((a = serve_asset_find(url)) != NULL) {
        r->status = 200;
        r->content_type = a->content_type;
        sp_buf_append(&r->body, a->data, a->len);
    } else {
        json_error(r, 404, "not found");
    }
}
