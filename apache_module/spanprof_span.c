/*
 * The spans of a finished request, built at log_transaction straight into
 * a slot of the exporter's queue: the SERVER span, and a CLIENT span when
 * mod_proxy contacted a backend for it. Names, attributes and status rules
 * are those of the nginx module.
 */

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_protocol.h"
#include "http_request.h"
#include "apr_strings.h"
#include "apr_uri.h"

#include "mod_spanprof.h"
#include "common/base/clock.h"
#include "common/trace/http_span.h"
#include "common/trace/span.h"


/* The <Location> (not regex) whose settings the request ended with. */
const char *
spanprof_route(request_rec *r)
{
    const spanprof_dir_conf_t  *dc;

    dc = spanprof_dir_conf(r);
    if (!dc->route_set) {
        return NULL;
    }
    return dc->route;
}


/* The standard methods, in the order of spanprof_names_t, and the name of
 * the others. */
static const char *const  spanprof_methods[SPANPROF_NMETHODS] = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE",
    "PATCH", "HTTP"
};
static const apr_size_t  spanprof_method_len[SPANPROF_NMETHODS] = {
    3, 4, 4, 3, 6, 7, 7, 5, 5, 4
};

/* A request without a route is named by its method alone. */
static const spanprof_names_t  spanprof_no_route = {
    { "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE",
      "PATCH", "HTTP" },
    { 3, 4, 4, 3, 6, 7, 7, 5, 5, 4 },
    0
};


/* "{method} {route}" (sp_http_span_name's rules) for every method. */
const spanprof_names_t *
spanprof_names_make(apr_pool_t *p, const char *route)
{
    int                i;
    char              *b;
    size_t             len, more;
    spanprof_names_t  *n;

    if (route == NULL || route[0] == '\0') {
        return &spanprof_no_route;
    }
    n = apr_pcalloc(p, sizeof(spanprof_names_t));
    n->route_len = strlen(route);
    for (i = 0; i < SPANPROF_NMETHODS; i++) {
        b = apr_palloc(p, SP_HTTP_SPAN_NAME_LEN);
        n->len[i] = sp_http_span_name(b, SP_HTTP_SPAN_NAME_LEN,
                                      spanprof_methods[i],
                                      spanprof_method_len[i], route,
                                      n->route_len);
        n->name[i] = b;
    }
    for (i = 0; i < 2; i++) {
        len = sp_span_kv_str_encode(n->scheme_route[i],
                                    sizeof(n->scheme_route[i]),
                                    "url.scheme", 10, i ? "https" : "http",
                                    i ? 5 : 4);
        more = len ? sp_span_kv_str_encode(n->scheme_route[i] + len,
                                           sizeof(n->scheme_route[i]) - len,
                                           "http.route", 10, route,
                                           n->route_len)
                   : 0;
        n->scheme_route_len[i] = more ? len + more : 0;
    }
    return n;
}


const spanprof_names_t *
spanprof_names(const spanprof_dir_conf_t *dc)
{
    return dc->route_set && dc->names != NULL ? dc->names
                                              : &spanprof_no_route;
}


static APR_INLINE int
spanprof_same(const char *a, const char *b)
{
    for (; *b != '\0'; a++, b++) {
        if (*a != *b) {
            return 0;
        }
    }
    return *a == '\0';
}


/* httpd has parsed the method into r->method_number: that tells the
 * standard method without comparing it to each of them (HEAD is M_GET);
 * one compare confirms it (a module may have changed r->method). */
int
spanprof_method_index(request_rec *r)
{
    int          i;
    const char  *m = r->method;

    if (m == NULL) {
        return SPANPROF_OTHER;
    }
    switch (r->method_number) {
    case M_GET:
        /* nearly every request: no loop */
        if (m[0] == 'G' && m[1] == 'E' && m[2] == 'T' && m[3] == '\0') {
            return 0;
        }
        i = 1;
        break;
    case M_POST:    i = 2; break;
    case M_PUT:     i = 3; break;
    case M_DELETE:  i = 4; break;
    case M_CONNECT: i = 5; break;
    case M_OPTIONS: i = 6; break;
    case M_TRACE:   i = 7; break;
    case M_PATCH:   i = 8; break;
    default:        i = SPANPROF_OTHER; break;
    }
    if (i != SPANPROF_OTHER && spanprof_same(m, spanprof_methods[i])) {
        return i;
    }
    for (i = 0; i < SPANPROF_OTHER; i++) {
        if (strcmp(m, spanprof_methods[i]) == 0) {
            return i;
        }
    }
    return SPANPROF_OTHER;
}


/* url.query, the values of secret parameters REDACTED (query_redact.h). */
static void
spanprof_url_query(sp_span_attrs_t *a, sp_span_t *s,
    const spanprof_dir_conf_t *dc, const char *q)
{
    char               buf[SP_SPAN_MAX_VALUE];
    size_t             len = strlen(q);
    const char        *v;
    sp_query_redact_t  r = { NULL, 0 };

    if (dc->redact_query != NULL) {
        r.names = (const sp_query_name_t *) dc->redact_query->elts;
        r.n = (size_t) dc->redact_query->nelts;
    }
    v = sp_query_redact(&r, q, &len, buf, sizeof(buf));
    sp_span_attrs_cstr(a, s, "url.query", v, len);
}


/* The request headers the span reads. */
typedef struct {
    const char  *host;
    const char  *user_agent;
    const char  *content_length;
} spanprof_headers_t;


/* Header names compared inline, ignoring case (a strcasecmp() call costs
 * about 50 instructions): each byte with 0x20 set against the lower-case
 * letter or '-', which no other byte of a header name matches so. */
#define SPANPROF_LC(k, i, c)  (((k)[i] | 0x20) == (c))

static APR_INLINE int
spanprof_is_host(const char *k)
{
    return SPANPROF_LC(k, 1, 'o') && SPANPROF_LC(k, 2, 's')
           && SPANPROF_LC(k, 3, 't') && k[4] == '\0';
}


static APR_INLINE int
spanprof_is_user_agent(const char *k)
{
    return SPANPROF_LC(k, 1, 's') && SPANPROF_LC(k, 2, 'e')
           && SPANPROF_LC(k, 3, 'r') && k[4] == '-' && SPANPROF_LC(k, 5, 'a')
           && SPANPROF_LC(k, 6, 'g') && SPANPROF_LC(k, 7, 'e')
           && SPANPROF_LC(k, 8, 'n') && SPANPROF_LC(k, 9, 't')
           && k[10] == '\0';
}


static APR_INLINE int
spanprof_is_content_length(const char *k)
{
    return SPANPROF_LC(k, 1, 'o') && SPANPROF_LC(k, 2, 'n')
           && SPANPROF_LC(k, 3, 't') && SPANPROF_LC(k, 4, 'e')
           && SPANPROF_LC(k, 5, 'n') && SPANPROF_LC(k, 6, 't')
           && k[7] == '-' && SPANPROF_LC(k, 8, 'l') && SPANPROF_LC(k, 9, 'e')
           && SPANPROF_LC(k, 10, 'n') && SPANPROF_LC(k, 11, 'g')
           && SPANPROF_LC(k, 12, 't') && SPANPROF_LC(k, 13, 'h')
           && k[14] == '\0';
}


/* apr's checksums of the three names (apr_table_entry_t's key_checksum,
 * made of a key's first bytes without case, which apr_table_get()
 * compares before the name), learnt from apr itself at check_config:
 * a header whose checksum is none of them is passed with three compares
 * of a number, where a switch on its first byte took ≈ 20 instructions. */
static apr_uint32_t  spanprof_cs_host, spanprof_cs_user_agent,
                     spanprof_cs_content_length;

void
spanprof_span_headers_learn(apr_pool_t *p)
{
    apr_table_t              *t = apr_table_make(p, 3);
    const apr_table_entry_t  *e;

    apr_table_addn(t, "Host", "");
    apr_table_addn(t, "User-Agent", "");
    apr_table_addn(t, "Content-Length", "");
    e = (const apr_table_entry_t *) apr_table_elts(t)->elts;
    spanprof_cs_host = e[0].key_checksum;
    spanprof_cs_user_agent = e[1].key_checksum;
    spanprof_cs_content_length = e[2].key_checksum;
}


/* One pass over the request headers for the three the span reads, where
 * apr_table_get() would walk them three times; each is the first of its
 * name, as apr_table_get() gives. */
static void
spanprof_read_headers(request_rec *r, spanprof_headers_t *h)
{
    int                        i, n, left = 3;
    apr_uint32_t               cs;
    const char                *k;
    const apr_table_entry_t   *e;
    const apr_array_header_t  *a = apr_table_elts(r->headers_in);

    h->host = h->user_agent = h->content_length = NULL;
    e = (const apr_table_entry_t *) a->elts;
    n = a->nelts;
    for (i = 0; i < n && left > 0; i++) {
        cs = e[i].key_checksum;
        if (cs != spanprof_cs_host && cs != spanprof_cs_user_agent
            && cs != spanprof_cs_content_length)
        {
            continue;
        }
        k = e[i].key;
        if (k == NULL || e[i].val == NULL) {
            continue;
        }
        switch (k[0]) {
        case 'H': case 'h':
            if (h->host == NULL && spanprof_is_host(k)) {
                h->host = e[i].val;
                left--;
            }
            break;
        case 'U': case 'u':
            if (h->user_agent == NULL && spanprof_is_user_agent(k)) {
                h->user_agent = e[i].val;
                left--;
            }
            break;
        case 'C': case 'c':
            if (h->content_length == NULL && spanprof_is_content_length(k)) {
                h->content_length = e[i].val;
                left--;
            }
            break;
        }
    }
}


static void
spanprof_server_address(request_rec *r, sp_span_t *s, sp_span_attrs_t *a,
    const char *host)
{
    const char  *p;
    long         port;

    if (r->hostname != NULL && r->hostname[0] != '\0') {
        sp_span_attrs_cstr(a, s, "server.address", r->hostname,
                           strlen(r->hostname));
    } else if (r->server->server_hostname != NULL) {
        sp_span_attrs_cstr(a, s, "server.address", r->server->server_hostname,
                           strlen(r->server->server_hostname));
    }

    /* The port the client asked for in Host, else the one it connected to. */
    port = 0;
    if (host != NULL) {
        p = host;
        if (*p == '[') {
            p = strchr(p, ']');
            if (p == NULL) {
                p = host + strlen(host);
            }
        }
        p = strchr(p, ':');
        if (p != NULL && p[1] != '\0') {
            /* Digits only, at most 65535 (strtol would also take signs,
             * spaces and locales, at several times the cost). */
            for (p++; *p >= '0' && *p <= '9' && port <= 65535; p++) {
                port = port * 10 + (*p - '0');
            }
            if (*p != '\0' || port > 65535) {
                port = 0;
            }
        }
    }
    if (port <= 0 && r->connection->local_addr != NULL) {
        port = r->connection->local_addr->port;
    }
    if (port > 0) {
        sp_span_attrs_cint(a, s, "server.port", port);
    }
}


/* network.protocol.version of r->proto_num, or NULL (not written). */
static APR_INLINE const char *
spanprof_protocol_version(int proto, size_t *len)
{
    switch (proto) {
    case HTTP_VERSION(0, 9):
        *len = 3;
        return "0.9";
    case HTTP_VERSION(1, 0):
        *len = 3;
        return "1.0";
    case HTTP_VERSION(1, 1):
        *len = 3;
        return "1.1";
    case HTTP_VERSION(2, 0):
        *len = 1;
        return "2";
    }
    return NULL;
}


static APR_INLINE void
spanprof_protocol(request_rec *r, sp_span_t *s, sp_span_attrs_t *a)
{
    size_t       len;
    const char  *v = spanprof_protocol_version(r->proto_num, &len);

    if (v != NULL) {
        sp_span_attrs_cstr(a, s, "network.protocol.version", v, len);
    }
}


/* Whether the connection serves more than this request: it served one
 * before, or keeps alive after this one (decided with the response, which
 * log_transaction follows). A connection's only request encodes nothing
 * ahead. */
static APR_INLINE int
spanprof_conn_more(conn_rec *c)
{
    return c->keepalives > 0 || c->keepalive == AP_CONN_KEEPALIVE;
}


/* server.address and server.port follow from the Host header, the host
 * name httpd made of it and the connection: a request of a keep-alive
 * connection with the same two as the one before takes the bytes that
 * one wrote. -1: write them. */
static int
spanprof_server_attrs(request_rec *r, sp_span_attrs_t *a, const char *host)
{
    spanprof_conn_t  *cc;

    if (r->connection->keepalives == 0 || host == NULL
        || r->hostname == NULL)
    {
        return -1;
    }
    cc = ap_get_module_config(r->connection->conn_config, &spanprof_module);
    if (cc == NULL || cc->server_len == 0
        || strcmp(host, cc->server_host) != 0
        || strcmp(r->hostname, cc->server_hostname) != 0)
    {
        return -1;
    }
    return sp_span_attrs_raw(a, cc->server, cc->server_len, cc->server_n);
}


/* After they were written (from start, the row having had left
 * attributes to take): kept for the connection's next requests, when all
 * of them were written there (none dropped). */
static void
spanprof_server_attrs_keep(request_rec *r, const sp_span_attrs_t *a,
    const char *host, const uint8_t *start, unsigned left)
{
    size_t            len, hl, nl;
    unsigned          n;
    spanprof_conn_t  *cc;

    if (!spanprof_conn_more(r->connection) || host == NULL
        || r->hostname == NULL)
    {
        return;
    }
    n = left - a->left;
    len = (size_t) (a->p - start);
    hl = strlen(host);
    nl = strlen(r->hostname);
    if (n == 0 || n > 2 || a->p < start || len > SPANPROF_SERVER_ATTRS_MAX
        || hl >= SPANPROF_HOST_MAX || nl >= SPANPROF_HOST_MAX)
    {
        return;
    }
    cc = spanprof_conn(r->connection, 1);
    memcpy(cc->server, start, len);
    memcpy(cc->server_host, host, hl + 1);
    memcpy(cc->server_hostname, r->hostname, nl + 1);
    cc->server_len = len;
    cc->server_n = n;
}


/* client.address, client.port and network.protocol.version are the same
 * for every request of a keep-alive connection whose client is the
 * connection's (mod_remoteip may give a request another): encoded once,
 * kept with the connection, appended as one copy. -1: write them one by
 * one. */
static int
spanprof_client_attrs(request_rec *r, sp_span_attrs_t *a)
{
    conn_rec         *c = r->connection;
    size_t            n, len, vlen;
    const char       *v;
    spanprof_conn_t  *cc;

    if (!spanprof_conn_more(c) || r->useragent_ip != c->client_ip
        || r->useragent_addr != c->client_addr || c->client_addr == NULL
        || c->client_ip == NULL)
    {
        return -1;
    }
    cc = spanprof_conn(c, 1);
    /* The port too: a connection record reused for another client (as
     * mod_http2's may be) never takes the last one's bytes. */
    if (cc->client_len == 0 || cc->client_proto != r->proto_num
        || cc->client_port != c->client_addr->port)
    {
        cc->client_len = 0;
        len = sp_span_kv_str_encode(cc->client, sizeof(cc->client),
                                    "client.address", 14, c->client_ip,
                                    strlen(c->client_ip));
        n = len ? sp_span_kv_int_encode(cc->client + len,
                                        sizeof(cc->client) - len,
                                        "client.port", 11,
                                        c->client_addr->port)
                : 0;
        if (n == 0) {
            return -1;
        }
        len += n;
        cc->client_n = 2;
        v = spanprof_protocol_version(r->proto_num, &vlen);
        if (v != NULL) {
            n = sp_span_kv_str_encode(cc->client + len,
                                      sizeof(cc->client) - len,
                                      "network.protocol.version", 24, v,
                                      vlen);
            if (n == 0) {
                return -1;
            }
            len += n;
            cc->client_n = 3;
        }
        cc->client_proto = r->proto_num;
        cc->client_port = c->client_addr->port;
        cc->client_len = len;
    }
    return sp_span_attrs_raw(a, cc->client, cc->client_len, cc->client_n);
}


/* Whether the server's ServerName says https:// (http_core's scheme). */
static APR_INLINE int
spanprof_scheme_https(request_rec *r)
{
    const char  *v = r->server->server_scheme;

    return v != NULL && v[0] == 'h' && strcmp(v, "https") == 0;
}


/* ap_http_scheme(r) without running the hook when http_core's is the only
 * one (no mod_ssl): its answer, "https" for a server whose ServerName says
 * https://, else "http". */
static APR_INLINE const char *
spanprof_scheme(request_rec *r, size_t *len)
{
    const char  *v;

    if (!spanprof_globals.scheme_hooked) {
        if (spanprof_scheme_https(r)) {
            *len = 5;
            return "https";
        }
        *len = 4;
        return "http";
    }
    v = ap_http_scheme(r);
    if (v == NULL) {
        v = "http";
    }
    *len = strlen(v);
    return v;
}


static void
spanprof_server_span(request_rec *r, spanprof_ctx_t *ctx, sp_span_t *s,
    uint64_t end_ns)
{
    char                        hex[2 * SP_SPAN_ID_LEN];
    const uint8_t              *start;
    unsigned                    left;
    const char                 *v, *q, *route, *err;
    size_t                      len;
    apr_off_t                   body;
    int                         i, mi;
    spanprof_headers_t          h;
    const spanprof_names_t     *names;
    request_rec                *last;
    spanprof_attr_t            *attr;
    sp_span_attrs_t             a;
    const spanprof_dir_conf_t  *dc;

    /* The request the client got its answer from (after internal
     * redirects): its settings, status and body size, as %>s and %B. */
    last = spanprof_last(r);
    dc = spanprof_dir_conf(last);

    sp_span_init(s, SP_SPAN_KIND_SERVER, ctx->trace_id, ctx->span_id,
                 ctx->has_parent ? ctx->parent_id : NULL, 1,
                 spanprof_flags(ctx), ctx->start_ns);
    s->end_ns = end_ns > ctx->start_ns ? end_ns : ctx->start_ns;
    if (ctx->tracestate != NULL) {
        sp_span_set_tracestate(s, ctx->tracestate, strlen(ctx->tracestate));
    }

    route = dc->route_set ? dc->route : NULL;     /* spanprof_route(last) */

    mi = spanprof_ctx_method_index(r, ctx);
    names = spanprof_names(dc);

    v = NULL;
    if (dc->span_name != NULL) {
        err = NULL;
        v = ap_expr_str_exec(last, dc->span_name, &err);
        if (err != NULL) {
            v = NULL;
        }
    }
    if (v == NULL) {
        /* the names live as long as the configuration */
        sp_span_set_name_ref(s, names->name[mi], names->len[mi]);
    } else {
        sp_span_set_name(s, v, strlen(v));
    }

    if (mi == SPANPROF_OTHER) {
        sp_http_span_method(s, r->method, r->method ? strlen(r->method) : 0);
    }

    /* The module's own attributes as one row (span.h): the writer's
     * position stays in registers from one to the next. */
    a = sp_span_attrs_open(s);

    if (mi != SPANPROF_OTHER) {
        sp_span_attrs_cstr(&a, s, "http.request.method", spanprof_methods[mi],
                           spanprof_method_len[mi]);
    }

    /* The target as the client sent it, before any rewrite: one pass
     * finds both the path's end and the query. */
    if (r->unparsed_uri != NULL && r->unparsed_uri[0] != '\0') {
        q = strchrnul(r->unparsed_uri, '?');
        sp_span_attrs_cstr(&a, s, "url.path", r->unparsed_uri,
                           q - r->unparsed_uri);
        if (q[0] == '?' && q[1] != '\0') {
            spanprof_url_query(&a, s, dc, q + 1);
        }
    }

    /* In a <Location>, with http_core's scheme: both encoded ahead. */
    i = route != NULL && !spanprof_globals.scheme_hooked
        && spanprof_scheme_https(r);
    if (route == NULL || spanprof_globals.scheme_hooked
        || names->scheme_route_len[i] == 0
        || sp_span_attrs_raw(&a, names->scheme_route[i],
                             names->scheme_route_len[i], 2) != 0)
    {
        v = spanprof_scheme(r, &len);
        sp_span_attrs_cstr(&a, s, "url.scheme", v, len);
        if (route) {
            sp_span_attrs_cstr(&a, s, "http.route", route, names->route_len);
        }
    }

    sp_http_attrs_status(&a, s, SP_SPAN_KIND_SERVER, last->status);

    spanprof_read_headers(r, &h);
    if (spanprof_server_attrs(r, &a, h.host) != 0) {
        start = a.p;
        left = a.left;
        spanprof_server_address(r, s, &a, h.host);
        spanprof_server_attrs_keep(r, &a, h.host, start, left);
    }

    if (spanprof_client_attrs(r, &a) != 0) {
        if (r->useragent_ip != NULL) {
            sp_span_attrs_cstr(&a, s, "client.address", r->useragent_ip,
                               strlen(r->useragent_ip));
        }
        if (r->useragent_addr != NULL) {
            sp_span_attrs_cint(&a, s, "client.port", r->useragent_addr->port);
        } else if (r->connection->client_addr != NULL) {
            sp_span_attrs_cint(&a, s, "client.port",
                               r->connection->client_addr->port);
        }
        spanprof_protocol(r, s, &a);
    }

    if (h.user_agent != NULL) {
        sp_span_attrs_cstr(&a, s, "user_agent.original", h.user_agent,
                           strlen(h.user_agent));
    }

    if (h.content_length != NULL
        && apr_strtoff(&body, h.content_length, NULL, 10) == APR_SUCCESS
        && body > 0)
    {
        sp_span_attrs_cint(&a, s, "http.request.body.size", body);
    }

    sp_span_attrs_cint(&a, s, "http.response.body.size",
                       last->bytes_sent > 0 ? last->bytes_sent : 0);

    /* The request's sampled CPU and off-CPU time (sampler.h). */
    if (ctx->profiled && ctx->record != NULL) {
        sp_span_attrs_cint(&a, s, "spanprof.cpu_time_ns",
                           (int64_t) ctx->record->sp_cpu_ns);
        if (ctx->record->sp_wall_ns > 0) {
            sp_span_attrs_cint(&a, s, "spanprof.wall_time_ns",
                               (int64_t) ctx->record->sp_wall_ns);
            sp_span_attrs_cint(&a, s, "spanprof.off_cpu_time_ns",
                               (int64_t) ctx->record->sp_off_cpu_ns);
        }
    }

    /* Grafana's traces-to-profiles link: the span's samples carry its id. */
    if (ctx->profiled && !ctx->unkept) {
        sp_hex_encode(hex, ctx->span_id, SP_SPAN_ID_LEN);
        sp_span_attrs_cstr(&a, s, "pyroscope.profile.id", hex,
                           2 * SP_SPAN_ID_LEN);
    }

    sp_span_attrs_close(s, a);

    if (dc->span_attrs != NULL) {
        attr = (spanprof_attr_t *) dc->span_attrs->elts;
        for (i = 0; i < dc->span_attrs->nelts; i++) {
            err = NULL;
            v = ap_expr_str_exec(last, attr[i].value, &err);
            if (err == NULL && v != NULL) {
                sp_span_attr_set_str(s, attr[i].key, strlen(attr[i].key), v,
                                     strlen(v));
            }
        }
    }
}


static void
spanprof_peer_attrs(sp_span_t *s, unsigned owner, spanprof_ctx_t *ctx,
    int i)
{
    if (ctx->attempts[i].path != NULL) {
        sp_span_attr_ostr(s, owner, "server.address",
                         ctx->attempts[i].path,
                         strlen(ctx->attempts[i].path));
        sp_span_attr_ostr(s, owner, "network.transport", "unix", 4);
        return;
    }
    if (ctx->attempts[i].host != NULL) {
        sp_span_attr_ostr(s, owner, "server.address",
                         ctx->attempts[i].host,
                         strlen(ctx->attempts[i].host));
    }
    if (ctx->attempts[i].port > 0) {
        sp_span_attr_oint(s, owner, "server.port", ctx->attempts[i].port);
    }
}


static void
spanprof_client_span(request_rec *r, spanprof_ctx_t *ctx, sp_span_t *s,
    uint64_t server_end_ns)
{
    int          i, n, last, ev;
    uint64_t     start, end;
    const char  *method;
    char         name[16];

    n = ctx->nattempts < SPANPROF_MAX_ATTEMPTS ? ctx->nattempts
                                               : SPANPROF_MAX_ATTEMPTS;
    last = n - 1;

    start = ctx->attempts[0].start_ns;
    if (start == 0 || start < ctx->start_ns) {
        start = ctx->start_ns;
    }
    end = ctx->proxy_done ? ctx->proxy_end_ns : server_end_ns;
    if (end < start) {
        end = start;
    }

    sp_span_init(s, SP_SPAN_KIND_CLIENT, ctx->trace_id,
                 spanprof_client_span_id(ctx), ctx->span_id, 0,
                 spanprof_flags(ctx), start);
    s->end_ns = end;

    /* OTel names a CLIENT span by its method alone. */
    method = r->method ? r->method : "";
    sp_span_set_name(s, name, sp_http_span_name(name, sizeof(name), method,
                                                strlen(method), NULL, 0));
    sp_http_span_method(s, r->method, r->method ? strlen(r->method) : 0);

    spanprof_peer_attrs(s, SP_OWNER_SPAN, ctx, last);

    if (ctx->peer_answered) {
        sp_http_span_status(s, ctx->proxy_status);
    } else {
        sp_http_span_no_answer(s, SP_OWNER_SPAN,
                               ctx->proxy_done ? ctx->proxy_status
                                               : HTTP_BAD_GATEWAY);
    }

    /* Retries (balancer failover): the resend count and one event per
     * attempt; only the last one may have been answered. */
    if (ctx->nattempts > 1) {
        sp_span_attr_cint(s, "http.request.resend_count", ctx->nattempts - 1);
        for (i = 0; i < n; i++) {
            ev = sp_span_add_event(s, "upstream.attempt", 16,
                                   ctx->attempts[i].start_ns);
            if (ev < 0) {
                continue;
            }
            spanprof_peer_attrs(s, SP_OWNER_EVENT(ev), ctx, i);
            if (i == last && ctx->peer_answered) {
                sp_span_attr_oint(s, SP_OWNER_EVENT(ev),
                                 "http.response.status_code",
                                 ctx->proxy_status);
            } else {
                sp_http_span_no_answer(s, SP_OWNER_EVENT(ev),
                                       i == last ? ctx->proxy_status
                                                 : HTTP_SERVICE_UNAVAILABLE);
            }
        }
    }
}


void
spanprof_export(request_rec *r, spanprof_ctx_t *ctx)
{
    uint64_t    end_ns;
    sp_span_t  *s;

    /* A full queue (the collector down) costs a check, not a clock read. */
    s = sp_exporter_span_begin(spanprof_exporter);
    if (s == NULL) {
        return;         /* queue full: counted by the exporter */
    }
    end_ns = ctx->end_ns ? ctx->end_ns : sp_now_ns();

    spanprof_server_span(r, ctx, s, end_ns);
    sp_exporter_span_end(spanprof_exporter, s);

    if (ctx->nattempts == 0) {
        return;
    }

    s = sp_exporter_span_begin(spanprof_exporter);
    if (s == NULL) {
        return;
    }
    spanprof_client_span(r, ctx, s, end_ns);
    sp_exporter_span_end(spanprof_exporter, s);
}


/* ---- mod_proxy ------------------------------------------------------------ */

/* One exchange with a backend starts (scheme_handler: the worker is
 * chosen, url is "scheme://host:port/..."). */
void
spanprof_proxy_attempt(request_rec *r, const char *url)
{
    int              i;
    char            *bar;
    apr_uri_t        uri;
    spanprof_ctx_t  *ctx;

    /* Exchanges of subrequests give no CLIENT span. */
    if (r->main != NULL) {
        return;
    }
    ctx = spanprof_get_ctx(r, 0);
    if (ctx == NULL || !ctx->ids) {
        return;
    }

    i = ctx->nattempts++;
    if (i >= SPANPROF_MAX_ATTEMPTS) {
        /* keep the first ones and the last */
        i = SPANPROF_MAX_ATTEMPTS - 1;
        ctx->nattempts = SPANPROF_MAX_ATTEMPTS;
    }
    if (ctx->attempts == NULL) {
        ctx->attempts = apr_palloc(ctx->r->pool, SPANPROF_MAX_ATTEMPTS
                                                 * sizeof(*ctx->attempts));
    }
    memset(&ctx->attempts[i], 0, sizeof(ctx->attempts[i]));
    ctx->attempts[i].start_ns = sp_now_ns();
    ctx->proxy_done = 0;

    if (url == NULL) {
        return;
    }
    /* "unix:/path|http://localhost/..." (a unix socket backend) */
    if (strncasecmp(url, "unix:", 5) == 0) {
        ctx->attempts[i].path = apr_pstrdup(ctx->r->pool, url + 5);
        bar = strchr((char *) ctx->attempts[i].path, '|');
        if (bar != NULL) {
            *bar = '\0';
        }
        return;
    }
    if (apr_uri_parse(ctx->r->pool, url, &uri) != APR_SUCCESS) {
        return;
    }
    if (uri.hostname != NULL) {
        ctx->attempts[i].host = uri.hostname;
    }
    ctx->attempts[i].port = uri.port ? uri.port
                            : (uri.scheme ? apr_uri_port_of_scheme(uri.scheme)
                                          : 0);
}


/* mod_proxy is done with the request (request_status): access_status OK or
 * DONE means the backend's response was relayed (r->status is the
 * backend's); anything else is a failure mod_proxy answers itself. */
void
spanprof_proxy_done(request_rec *r, int status)
{
    spanprof_ctx_t  *ctx;

    if (r->main != NULL) {
        return;
    }
    ctx = spanprof_get_ctx(r, 0);
    if (ctx == NULL || !ctx->ids) {
        return;
    }

    if (ctx->nattempts == 0) {
        /* scheme_handler was not hooked (mod_proxy loaded after us):
         * r->filename is "proxy:scheme://host:port/...". */
        if (r->filename == NULL || strncmp(r->filename, "proxy:", 6) != 0) {
            return;
        }
        spanprof_proxy_attempt(r, r->filename + 6);
        if (ctx->proxy_handler_ns != 0 && ctx->nattempts > 0) {
            ctx->attempts[0].start_ns = ctx->proxy_handler_ns;
        }
    }

    ctx->proxy_end_ns = sp_now_ns();
    ctx->proxy_done = 1;
    if (status == OK || status == DONE) {
        ctx->peer_answered = 1;
        ctx->proxy_status = r->status;
    } else {
        ctx->peer_answered = 0;
        ctx->proxy_status = status;
    }
}
