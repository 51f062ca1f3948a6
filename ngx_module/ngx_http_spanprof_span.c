/*
 * The spans of a finished request, built at the log phase straight into a
 * slot of the exporter's queue: the SERVER span, and a CLIENT span when the
 * request went to an upstream.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/base/clock.h"
#include "common/trace/http_span.h"
#include "common/trace/span.h"


#define ngx_http_spanprof_attrs_str(a, s, key, v)                            \
    sp_span_attrs_cstr(a, s, key, (const char *) (v)->data, (v)->len)


static ngx_str_t *ngx_http_spanprof_route(ngx_http_request_t *r);


/* The standard method of r, as sp_http_known_method() names it, from the
 * method nginx parsed: no string compares. Its length is
 * r->method_name.len. */
static const char *
ngx_http_spanprof_known_method(ngx_http_request_t *r)
{
    switch (r->method) {
    case NGX_HTTP_GET:
        return "GET";
    case NGX_HTTP_HEAD:
        return "HEAD";
    case NGX_HTTP_POST:
        return "POST";
    case NGX_HTTP_PUT:
        return "PUT";
    case NGX_HTTP_DELETE:
        return "DELETE";
    case NGX_HTTP_OPTIONS:
        return "OPTIONS";
    case NGX_HTTP_PATCH:
        return "PATCH";
    case NGX_HTTP_TRACE:
        return "TRACE";
    default:
        /* CONNECT, and a request that ended before its method was
         * parsed: by name. */
        return sp_http_known_method((const char *) r->method_name.data,
                                    r->method_name.len);
    }
}


/* "{method} {route}", "{method}" without a route; "HTTP" for a method
 * that is not a standard one. Formatted into buf: no pool allocation per
 * request. */
size_t
ngx_http_spanprof_default_name(ngx_http_request_t *r, u_char *buf,
    size_t cap)
{
    ngx_str_t  *route;

    route = ngx_http_spanprof_route(r);

    return sp_http_span_name_known((char *) buf, cap,
                                   ngx_http_spanprof_known_method(r),
                                   r->method_name.len,
                                   route ? (const char *) route->data : NULL,
                                   route ? route->len : 0);
}


/* The matched prefix or exact location; none for regex and named ones, or
 * when the request never reached a location (server-level return, 400). */
static ngx_str_t *
ngx_http_spanprof_route(ngx_http_request_t *r)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (clcf->name.len == 0 || clcf->named
#if (NGX_PCRE)
        || clcf->regex
#endif
        )
    {
        return NULL;
    }
    return &clcf->name;
}


/* The port in Host: the digits after its ':' (nginx has checked the
 * header's form; a "[v6]" literal without a port ends in ']'); 0 when
 * there is none, or none from 1 to 65535. The ':' is where nginx ended the
 * server name it took from Host (the same length when it lowercased a
 * copy); else (a name with a trailing dot, or one from an absolute URI)
 * the last one. */
static ngx_int_t
ngx_http_spanprof_host_port(ngx_http_request_t *r, ngx_str_t *host)
{
    u_char     *p, *last;
    ngx_int_t   port;

    last = host->data + host->len;
    p = host->data + r->headers_in.server.len;
    if (p >= last || *p != ':') {
        for (p = last; p > host->data && p[-1] >= '0' && p[-1] <= '9'; p--) {
            /* void */
        }
        if (p == host->data || p[-1] != ':') {
            return 0;
        }
        p--;
    }
    p++;
    if (p == last || last - p > 5) {
        return 0;
    }
    for (port = 0; p < last; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
        port = port * 10 + (*p - '0');
    }
    return port <= 65535 ? port : 0;
}


static void
ngx_http_spanprof_server_name(ngx_http_request_t *r, sp_span_t *s,
    sp_span_attrs_t *a)
{
    ngx_int_t                  port;
    ngx_http_core_srv_conf_t  *cscf;

    if (r->headers_in.server.len) {
        ngx_http_spanprof_attrs_str(a, s, "server.address",
                                    &r->headers_in.server);
    } else {
        cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
        if (cscf->server_name.len) {
            ngx_http_spanprof_attrs_str(a, s, "server.address",
                                        &cscf->server_name);
        }
    }

    /* The port the client asked for in Host, else the one it connected to. */
    port = 0;
    if (r->headers_in.host) {
        port = ngx_http_spanprof_host_port(r, &r->headers_in.host->value);
    }
    if (port <= 0
        && ngx_connection_local_sockaddr(r->connection, NULL, 0) == NGX_OK)
    {
        port = ngx_inet_get_port(r->connection->local_sockaddr);
    }
    if (port > 0) {
        sp_span_attrs_cint(a, s, "server.port", port);
    }
}


static void
ngx_http_spanprof_protocol(ngx_http_request_t *r, sp_span_t *s,
    sp_span_attrs_t *a)
{
#if (NGX_HTTP_V2)
    if (r->stream) {
        sp_span_attrs_cstr(a, s, "network.protocol.version", "2", 1);
        return;
    }
#endif

    switch (r->http_version) {
    case NGX_HTTP_VERSION_9:
        sp_span_attrs_cstr(a, s, "network.protocol.version", "0.9", 3);
        break;
    case NGX_HTTP_VERSION_10:
        sp_span_attrs_cstr(a, s, "network.protocol.version", "1.0", 3);
        break;
    case NGX_HTTP_VERSION_11:
        sp_span_attrs_cstr(a, s, "network.protocol.version", "1.1", 3);
        break;
    case NGX_HTTP_VERSION_20:
        sp_span_attrs_cstr(a, s, "network.protocol.version", "2", 1);
        break;
#ifdef NGX_HTTP_VERSION_30
    /* nginx 1.25+ (--with-http_v3_module); a QUIC stream's connection
     * carries the client's address, copied from the QUIC connection. */
    case NGX_HTTP_VERSION_30:
        sp_span_attrs_cstr(a, s, "network.protocol.version", "3", 1);
        break;
#endif
    default:
        break;
    }
}


static ngx_uint_t
ngx_http_spanprof_status(ngx_http_request_t *r)
{
    if (r->err_status) {
        return r->err_status;
    }
    return r->headers_out.status;
}


/* The SERVER span. Its name is made in place, and the module's own
 * attributes are written as one row (span.h): the user's otel_span_attr
 * ones come after them, and replace them by key. */
static void
ngx_http_spanprof_server_span(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx, sp_span_t *s, uint64_t end_ns)
{
    u_char                        *q;
    char                          *place;
    u_char                         hex[2 * SP_SPAN_ID_LEN];
    u_char                         qbuf[SP_SPAN_MAX_VALUE];
    off_t                          sent;
    size_t                         len;
    const char                    *kept, *known;
    ngx_str_t                      v, *route, path, query;
    ngx_uint_t                     i;
    sp_span_attrs_t                a;
    ngx_http_spanprof_attr_t      *attr;
    ngx_http_spanprof_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);

    sp_span_init(s, SP_SPAN_KIND_SERVER, ctx->trace_id, ctx->span_id,
                 ctx->has_parent ? ctx->parent_id : NULL, 1,
                 ngx_http_spanprof_flags(ctx), ctx->start_ns);
    s->end_ns = end_ns > ctx->start_ns ? end_ns : ctx->start_ns;
    if (ctx->tracestate.len) {
        sp_span_set_tracestate(s, (const char *) ctx->tracestate.data,
                               ctx->tracestate.len);
    }

    route = ngx_http_spanprof_route(r);
    known = ngx_http_spanprof_known_method(r);

    /* Name: otel_span_name, else "{method} {route}" as OTel's HTTP
     * conventions want it. */
    if (lcf->span_name
        && ngx_http_complex_value(r, lcf->span_name, &v) == NGX_OK)
    {
        sp_span_set_name(s, (const char *) v.data, v.len);

    } else if (ctx->profiled && ctx->record_loc != NULL
               && ctx->record_loc == ngx_http_get_module_loc_conf(r,
                                                  ngx_http_core_module)
               && ctx->record_method == r->method_name.data)
    {
        /* The name the samples' labels carry: made at the rewrite phase
         * in this same location. */
        len = sp_thread_ctx_record_span_name(ctx->record.attrs_data,
                                             ctx->record.attrs_data_size,
                                             &kept);
        sp_span_set_name(s, kept, len);

    } else {
        /* Written where the span keeps it (the text has room for it after
         * a tracestate, which is at most SP_SPAN_MAX_VALUE). */
        place = sp_span_name_place(s, SP_HTTP_SPAN_NAME_LEN);
        if (place != NULL) {
            sp_span_name_done(s, sp_http_span_name_known(place,
                                   SP_HTTP_SPAN_NAME_LEN, known,
                                   r->method_name.len,
                                   route ? (const char *) route->data : NULL,
                                   route ? route->len : 0));
        }
    }

    a = sp_span_attrs_open(s);

    sp_http_attrs_method(&a, s, known, (const char *) r->method_name.data,
                         r->method_name.len);

    /* The target as the client sent it, before any rewrite. */
    if (r->unparsed_uri.len) {
        path = r->unparsed_uri;
        q = ngx_strlchr(path.data, path.data + path.len, '?');
        if (q) {
            query.data = q + 1;
            query.len = path.data + path.len - query.data;
            path.len = q - path.data;
        } else {
            query.len = 0;
        }
        ngx_http_spanprof_attrs_str(&a, s, "url.path", &path);
        if (query.len) {
            len = query.len;
            query.data = (u_char *) sp_query_redact(&lcf->query_redact,
                                                    (const char *) query.data,
                                                    &len, (char *) qbuf,
                                                    sizeof(qbuf));
            query.len = len;
            ngx_http_spanprof_attrs_str(&a, s, "url.query", &query);
        }
    }

#if (NGX_HTTP_SSL)
    if (r->connection->ssl) {
        sp_span_attrs_cstr(&a, s, "url.scheme", "https", 5);
    } else
#endif
    {
        sp_span_attrs_cstr(&a, s, "url.scheme", "http", 4);
    }

    if (route) {
        ngx_http_spanprof_attrs_str(&a, s, "http.route", route);
    }

    sp_http_attrs_status(&a, s, SP_SPAN_KIND_SERVER,
                         (int) ngx_http_spanprof_status(r));

    ngx_http_spanprof_server_name(r, s, &a);

    ngx_http_spanprof_attrs_str(&a, s, "client.address",
                                &r->connection->addr_text);
    sp_span_attrs_cint(&a, s, "client.port",
                       ngx_inet_get_port(r->connection->sockaddr));

    ngx_http_spanprof_protocol(r, s, &a);

    if (r->headers_in.user_agent) {
        ngx_http_spanprof_attrs_str(&a, s, "user_agent.original",
                                    &r->headers_in.user_agent->value);
    }

    if (ctx->body_size > 0) {
        sp_span_attrs_cint(&a, s, "http.request.body.size", ctx->body_size);
    } else if (r->headers_in.content_length_n > 0) {
        sp_span_attrs_cint(&a, s, "http.request.body.size",
                           r->headers_in.content_length_n);
    }

    sent = r->connection->sent - r->header_size;
    sp_span_attrs_cint(&a, s, "http.response.body.size", sent > 0 ? sent : 0);

    /* The request's sampled CPU and off-CPU time (sampler.h): with the loop's
     * waits, its duration at a glance. */
    if (ctx->profiled) {
        sp_span_attrs_cint(&a, s, "spanprof.cpu_time_ns",
                           (int64_t) ctx->record.sp_cpu_ns);
        if (ctx->record.sp_wall_ns > 0) {
            sp_span_attrs_cint(&a, s, "spanprof.wall_time_ns",
                               (int64_t) ctx->record.sp_wall_ns);
            sp_span_attrs_cint(&a, s, "spanprof.off_cpu_time_ns",
                               (int64_t) ctx->record.sp_off_cpu_ns);
        }

        /* Grafana's traces-to-profiles link: the span's samples carry its
         * id. */
        if (!ctx->unkept) {
            sp_hex_encode((char *) hex, ctx->span_id, SP_SPAN_ID_LEN);
            sp_span_attrs_cstr(&a, s, "pyroscope.profile.id",
                               (const char *) hex, 2 * SP_SPAN_ID_LEN);
        }
    }

    sp_span_attrs_close(s, a);

    if (lcf->span_attrs) {
        attr = lcf->span_attrs->elts;
        for (i = 0; i < lcf->span_attrs->nelts; i++) {
            if (ngx_http_complex_value(r, &attr[i].value, &v) == NGX_OK) {
                sp_span_attr_set_str(s, (const char *) attr[i].key.data,
                                     attr[i].key.len, (const char *) v.data,
                                     v.len);
            }
        }
    }
}


/* nginx records 502/504 for a peer that never answered (refused, reset,
 * timed out); only a received header means the status is the peer's. */
static ngx_flag_t
ngx_http_spanprof_peer_answered(ngx_http_upstream_state_t *st)
{
    return st->status && st->header_time != (ngx_msec_t) -1;
}


/* "127.0.0.1:8080" or "[::1]:8080" into address and port. */
static void
ngx_http_spanprof_peer_attrs(sp_span_t *s, unsigned owner, ngx_str_t *peer)
{
    u_char     *colon, *last;
    ngx_str_t   addr;
    ngx_int_t   port;

    /* "unix:/path": the socket path is the address; there is no port. */
    if (peer->len > 5 && ngx_strncmp(peer->data, "unix:", 5) == 0) {
        sp_span_attr_ostr(s, owner, "server.address",
                         (const char *) peer->data + 5, peer->len - 5);
        sp_span_attr_ostr(s, owner, "network.transport", "unix", 4);
        return;
    }

    last = peer->data + peer->len;
    for (colon = last - 1; colon > peer->data && *colon != ':'; colon--) {
        /* void */
    }
    if (colon == peer->data || *colon != ':' || colon[-1] == ':') {
        sp_span_attr_ostr(s, owner, "server.address",
                         (const char *) peer->data, peer->len);
        return;
    }
    addr.data = peer->data;
    addr.len = colon - peer->data;
    if (addr.len > 2 && addr.data[0] == '[' && addr.data[addr.len - 1] == ']') {
        addr.data++;
        addr.len -= 2;
    }
    sp_span_attr_ostr(s, owner, "server.address", (const char *) addr.data,
                     addr.len);
    port = ngx_atoi(colon + 1, last - colon - 1);
    if (port > 0) {
        sp_span_attr_oint(s, owner, "server.port", port);
    }
}


/* Kept out of ngx_http_spanprof_export(): inlined, its buffer gave every
 * request's export a large frame and a stack protector check. */
static void ngx_http_spanprof_client_span(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx, sp_span_t *s, uint64_t server_end_ns)
    __attribute__((noinline));

static void
ngx_http_spanprof_client_span(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx, sp_span_t *s, uint64_t server_end_ns)
{
    uint64_t                   start, t, total_ms;
    u_char                     buf[16];
    ngx_str_t                  name;
    ngx_uint_t                 i, n, attempts;
    ngx_http_upstream_state_t *st, *last;

    st = r->upstream_states->elts;
    n = r->upstream_states->nelts;

    /* The caller checked that some attempt reached a peer. */
    total_ms = 0;
    attempts = 0;
    last = st;
    for (i = 0; i < n; i++) {
        if (st[i].peer) {
            total_ms += st[i].response_time;
            last = &st[i];
            attempts++;
        }
    }
    /* The exchange starts with the content handler and ends with the
     * request; without a precontent stamp, reach back over nginx's
     * (millisecond) upstream time. */
    start = ctx->content_ns;
    if (start == 0 || start > server_end_ns) {
        start = server_end_ns - total_ms * 1000000;
    }
    if (start < ctx->start_ns) {
        start = ctx->start_ns;
    }

    sp_span_init(s, SP_SPAN_KIND_CLIENT, ctx->trace_id,
                 ngx_http_spanprof_client_span_id(ctx), ctx->span_id, 0,
                 ngx_http_spanprof_flags(ctx), start);
    s->end_ns = server_end_ns;

    /* OTel names a CLIENT span by its method alone. */
    name.len = sp_http_span_name_known((char *) buf, sizeof(buf),
                                       ngx_http_spanprof_known_method(r),
                                       r->method_name.len, NULL, 0);
    sp_span_set_name(s, (const char *) buf, name.len);
    sp_http_span_method(s, (const char *) r->method_name.data,
                        r->method_name.len);

    ngx_http_spanprof_peer_attrs(s, SP_OWNER_SPAN, last->peer);

    if (ngx_http_spanprof_peer_answered(last)) {
        sp_http_span_status(s, (int) last->status);
    } else {
        sp_http_span_no_answer(s, SP_OWNER_SPAN, (int) last->status);
    }

    /* Retries: the resend count and one event per attempt. */
    if (attempts > 1) {
        sp_span_attr_cint(s, "http.request.resend_count", attempts - 1);
        t = start;
        for (i = 0; i < n; i++) {
            ngx_int_t  ev;

            if (st[i].peer == NULL) {
                continue;
            }
            /* nginx's response times are whole milliseconds of its cached
             * clock: an attempt may appear to start after the exchange
             * ended, and is kept inside it. */
            ev = sp_span_add_event(s, "upstream.attempt", 16,
                                   t < s->end_ns ? t : s->end_ns);
            t += (uint64_t) st[i].response_time * 1000000;
            if (ev < 0) {
                continue;
            }
            ngx_http_spanprof_peer_attrs(s, SP_OWNER_EVENT(ev), st[i].peer);
            if (ngx_http_spanprof_peer_answered(&st[i])) {
                sp_span_attr_oint(s, SP_OWNER_EVENT(ev),
                                 "http.response.status_code",
                                 st[i].status);
            } else {
                sp_http_span_no_answer(s, SP_OWNER_EVENT(ev),
                                       (int) st[i].status);
            }
        }
    }
}


static ngx_flag_t
ngx_http_spanprof_went_upstream(ngx_http_request_t *r)
{
    ngx_uint_t                  i;
    ngx_http_upstream_state_t  *st;

    if (r->upstream_states == NULL) {
        return 0;
    }
    st = r->upstream_states->elts;
    for (i = 0; i < r->upstream_states->nelts; i++) {
        if (st[i].peer) {
            return 1;
        }
    }
    return 0;
}


ngx_int_t
ngx_http_spanprof_export(ngx_http_request_t *r, ngx_http_spanprof_ctx_t *ctx)
{
    uint64_t    end_ns;
    sp_span_t  *s;

    /* A full queue (the collector down) costs a check, not a clock read. */
    s = sp_exporter_span_begin(ngx_http_spanprof_exporter);
    if (s == NULL) {
        return NGX_OK;      /* queue full: counted by the exporter */
    }
    end_ns = ctx->end_ns ? ctx->end_ns : sp_now_ns();

    ngx_http_spanprof_server_span(r, ctx, s, end_ns);
    sp_exporter_span_end(ngx_http_spanprof_exporter, s);

    if (!ngx_http_spanprof_went_upstream(r)) {
        return NGX_OK;
    }

    s = sp_exporter_span_begin(ngx_http_spanprof_exporter);
    if (s == NULL) {
        return NGX_OK;
    }
    ngx_http_spanprof_client_span(r, ctx, s, end_ns);
    sp_exporter_span_end(ngx_http_spanprof_exporter, s);

    return NGX_OK;
}
