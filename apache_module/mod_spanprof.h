/*
 * spanprof for Apache httpd 2.4: the declarations shared by the module's
 * files.
 *   mod_spanprof.c        directives, configuration, hooks, child process
 *   spanprof_context.c    per-request trace context, propagation, env vars
 *   spanprof_expr.c       the OTEL_* variables and otel_ratio() of ap_expr
 *   spanprof_span.c       SERVER and CLIENT spans at log_transaction
 *   spanprof_profiling.c  the sampler in each child and the binding of
 *                         requests to the threads' CPU samples
 *   spanprof_files.c      descriptors the parent opens for the children
 *   spanprof_api.c        SetHandler spanprof-api: control and status API
 *   spanprof_exporter_conf.c  the exporter's settings from the directives
 *   spanprof_relay.c      prefork: one exporter process for the children
 */

#ifndef MOD_SPANPROF_H
#define MOD_SPANPROF_H

#include "httpd.h"
#include "http_config.h"
#include "ap_expr.h"
#include "apr_tables.h"

#include "common/export/exporter.h"
#include "common/profile/load_shedder.h"
#include "common/trace/http_span.h"
#include "common/trace/ids.h"
#include "common/trace/propagation.h"
#include "common/profile/keep_rules.h"
#include "common/trace/query_redact.h"
#include "common/profile/thread_ctx.h"
#include "common/trace/resource.h"
#include "common/trace/traceparent.h"


#define SPANPROF_CTX_IGNORE     0
#define SPANPROF_CTX_EXTRACT    1
#define SPANPROF_CTX_INJECT     2
#define SPANPROF_CTX_PROPAGATE  3

#define spanprof_extracts(mode)                                               \
    ((mode) == SPANPROF_CTX_EXTRACT || (mode) == SPANPROF_CTX_PROPAGATE)
#define spanprof_injects(mode)                                                \
    ((mode) == SPANPROF_CTX_INJECT || (mode) == SPANPROF_CTX_PROPAGATE)

#define SPANPROF_UNSET  (-1)

/* OtelTrace: Off (0), On (1), or an expression. */
#define SPANPROF_TRACE_EXPR  2
/* OtelProfiling: Off (0), On (1), or expr=: a boolean expression, or a
 * string one false when empty, "0" or "off". */
#define SPANPROF_PROFILING_EXPR  2

#define SPANPROF_MAX_ATTEMPTS  8

/* The standard methods (as OTel names them), then SPANPROF_OTHER for any
 * other: an index into spanprof_names_t. */
#define SPANPROF_NMETHODS  10
#define SPANPROF_OTHER     (SPANPROF_NMETHODS - 1)

/* The default span names of one route ("{method} {route}", "{method}"
 * without one, "HTTP ..." for another method), made once when the
 * configuration is read: a request's name is then a lookup, not a
 * formatting (spanprof_span.c). */
#define SPANPROF_SCHEME_ROUTE_MAX  160
#define SPANPROF_CLIENT_ATTRS_MAX  160
#define SPANPROF_SERVER_ATTRS_MAX  128
#define SPANPROF_HOST_MAX          64

typedef struct {
    const char  *name[SPANPROF_NMETHODS];
    apr_size_t   len[SPANPROF_NMETHODS];
    apr_size_t   route_len;
    /* The span's url.scheme and http.route attributes, encoded once
     * (sp_span_kv_str_encode): [0] "http", [1] "https"; length 0 where
     * the route is too long for it (written one by one then). */
    uint8_t      scheme_route[2][SPANPROF_SCHEME_ROUTE_MAX];
    apr_size_t   scheme_route_len[2];
} spanprof_names_t;


/* Process-wide settings: only in the main server configuration (the
 * exporter and the sampler are one per child process). */
typedef struct {
    const char          *endpoint;         /* normalized URL */
    const char          *endpoint_file;    /* where OtelExporterEndpoint is */
    int                  endpoint_line;
    const char          *traces_url;       /* OTEL_..._TRACES_ENDPOINT */
    apr_array_header_t  *headers;          /* of char * "Name: value" */
    const char          *trusted_certificate;      /* full path */
    const char          *trusted_certificate_pem;  /* its bytes */
    size_t               trusted_certificate_len;
    apr_int64_t          interval_ms;      /* SPANPROF_UNSET: default */
    int                  batch_size;
    int                  batch_count;
    int                  compression;      /* 0 none, 1 gzip */
    int                  protocol;         /* sp_export_protocol_t */
    apr_int64_t          timeout_ms;
    apr_int64_t          connect_timeout_ms;
    apr_int64_t          shutdown_timeout_ms;

    const char          *service_name;
    apr_array_header_t  *resource_attrs;   /* of spanprof_kv_t */

    int                  profiling_rate;
    int                  profiling_types;     /* SP_SAMPLER_TYPE_*, 0 unset */
    int                  profiling_wall_rate;
    apr_int64_t          profiling_memory_interval;  /* bytes */
    apr_int64_t          profiling_interval_ms;
    int                  profiling_max_depth;
    apr_int64_t          profiling_max_size;  /* bytes */
    int                  profiling_max_samples;
    const char          *pyroscope;
    sp_load_shedder_conf_t  profiling_shed;   /* zero: off */
    apr_array_header_t  *profiling_redact; /* of const char *, or NULL */

    /* Per virtual host, set after the configuration is read: some section
     * that applies to it (or the host itself) traces, propagates or
     * profiles. The others' requests get no context at all. */
    int                  active;
} spanprof_srv_conf_t;


typedef struct {
    const char          *key;
    const char          *value;
} spanprof_kv_t;


typedef struct {
    const char          *key;
    ap_expr_info_t      *value;
} spanprof_attr_t;


/* A route-only <Location>'s merges made ahead, at most (for the first
 * hosts it applies to; the others' requests merge it as before). */
#define SPANPROF_PREMERGED  4

/* Per directory/location; merged like httpd's own modules. */
typedef struct {
    int                  trace;            /* SPANPROF_UNSET, 0, 1, _EXPR */
    ap_expr_info_t      *trace_expr;       /* SPANPROF_TRACE_EXPR */
    int                  context;          /* SPANPROF_UNSET, SPANPROF_CTX_* */
    sp_propagation_t     propagation;      /* OtelPropagation; zero: unset
                                              (w3c) */
    ap_expr_info_t      *span_name;        /* NULL: inherit / default */
    apr_array_header_t  *span_attrs;       /* NULL: inherit */
    int                  profiling;        /* SPANPROF_UNSET, 0, 1, _EXPR */
    ap_expr_info_t      *profiling_expr;
    int                  profiling_string; /* the expression is a string */
    /* OtelProfilingKeep; keep_set: given in this section */
    sp_keep_rules_t      keep;
    int                  keep_set;
    /* OtelSpanRedactQuery: the section's names and the inherited ones
     * (of sp_query_name_t), or NULL */
    apr_array_header_t  *redact_query;
    int                  api_write;        /* OtelApiWrite: UNSET, 0, 1 */

    /* The route: set (after the configuration is read) on the
     * configurations of <Location> sections; a regex one has none. */
    int                  route_set;
    const char          *route;
    const spanprof_names_t  *names;        /* the route's; NULL: none */
    /* Made for the route alone (no directive of ours in the section):
     * merged as a copy of the base with this route. */
    int                  route_only;
    /* Of a route-only section: its merges onto the settings of the hosts
     * it applies to, made once after the configuration is read (httpd
     * merges it per request, nearly always onto its host's own). */
    int                  nmerged;
    struct {
        const void      *base;
        void            *merged;
    }                    merged[SPANPROF_PREMERGED];
} spanprof_dir_conf_t;

/* The settings trace, propagate or profile (merged or a section's own). */
#define spanprof_dir_active(dc)                                               \
    ((dc)->trace >= 1 || (dc)->profiling >= 1                                 \
     || spanprof_extracts((dc)->context) || spanprof_injects((dc)->context))


/* One exchange with a proxied request's backend. */
typedef struct {
    uint64_t                 start_ns;
    const char              *host;
    int                      port;
    const char              *path;            /* unix socket, or NULL */
} spanprof_attempt_t;

/* The trace context of one request (the original request: internal
 * redirects share its pool, subrequests point to it through r->main). */
typedef struct {
    /* From here to `r`: zeroed when the context is made. */
    const char              *tracestate;      /* valid incoming, or NULL */
    /* The request whose environment has the OTEL_* variables: the hooks
     * that set them run several times per request. */
    request_rec             *env_r;
    uint8_t                  parent_flags;

    unsigned                 ids:1;          /* trace/span ids known */
    unsigned                 resolved:1;     /* and sampling decided */
    unsigned                 sampled:1;
    unsigned                 has_parent:1;
    unsigned                 random:1;
    unsigned                 client_span:1;
    unsigned                 logged:1;
    unsigned                 profiled:1;
    /* Its keep rules did not keep it: its span has no profile id. */
    unsigned                 unkept:1;
    /* When its keep verdict read the clock: the span's end. */
    uint64_t                 end_ns;

    /* The proxied exchange (CLIENT span). */
    uint64_t                 proxy_handler_ns;
    unsigned                 proxy_done:1;
    unsigned                 peer_answered:1;
    int                      proxy_status;    /* peer's, or the failure */
    int                      nattempts;
    uint64_t                 proxy_start_ns;
    uint64_t                 proxy_end_ns;
    /* SPANPROF_MAX_ATTEMPTS of them, made at the first (proxied requests
     * alone): inline they were half the context, which then took the
     * request pool past its first block on every request (an allocator
     * call and a second 8 KiB block, in httpd's own later allocations). */
    spanprof_attempt_t      *attempts;

    /* From here to the end: not zeroed when the context is made (set
     * before they are read: the ids once `ids` is, client_span_id with
     * `client_span`, traceparent's first byte cleared). */
    request_rec             *r;               /* original request */
    uint64_t                 start_ns;
    uint8_t                  trace_id[SP_TRACE_ID_LEN];
    uint8_t                  span_id[SP_SPAN_ID_LEN];
    uint8_t                  parent_id[SP_SPAN_ID_LEN];
    uint8_t                  client_span_id[SP_SPAN_ID_LEN];
    char                     traceparent[SP_TRACEPARENT_LEN + 1];

    /* The labels of this request's CPU samples (OTEP 4947 record), the
     * name (spanprof_names_t's) and flags it holds, and the method whose
     * index the name was looked up with: the record is rewritten only
     * when they change (spanprof_profile_request). */
    sp_thread_ctx_record_t  *record;            /* from sp_record_pool */
    /* The settings the record was last (re)filled or checked with. */
    const spanprof_dir_conf_t *record_dc;
    const char              *record_name;
    const char              *record_method;
    uint8_t                  record_mi;
    uint8_t                  record_flags;
} spanprof_ctx_t;

/* Per connection: the request being served on it, so that a thread that
 * resumes the connection (event MPM write completion) runs labelled; the
 * SERVER span's attributes that its next requests share, encoded once
 * (spanprof_span.c): client.address, client.port and
 * network.protocol.version for the protocol client_proto and the client
 * port client_port, server.address
 * and server.port as written for a request with this Host header and
 * host name. */
typedef struct {
    spanprof_ctx_t          *active;
    int                      client_proto;
    apr_port_t               client_port;
    unsigned                 client_n;
    size_t                   client_len;
    uint8_t                  client[SPANPROF_CLIENT_ATTRS_MAX];
    unsigned                 server_n;
    size_t                   server_len;
    uint8_t                  server[SPANPROF_SERVER_ATTRS_MAX];
    char                     server_host[SPANPROF_HOST_MAX];
    char                     server_hostname[SPANPROF_HOST_MAX];
} spanprof_conn_t;


/* Set while the configuration is read (reset in pre_config). */
typedef struct {
    int                  used;             /* some tracing/propagation/profiling */
    int                  profiling_used;
    int                  keep_used;        /* OtelProfilingKeep not all */
    int                  section_context;  /* OtelTraceContext in a section */
    const char          *trace_arg;        /* first OtelTrace not Off */
    const char          *trace_file;
    int                  trace_line;
    /* Some directive names an OTEL_* variable (a log format, a header, a
     * rewrite condition...): the variables are then set before the
     * handler phase too (translate_name, log_transaction), not only at
     * fixups for the handlers (CGI, SSI, FastCGI...). */
    int                  env_named;
    /* The first loaded module that is not one of httpd's known to
     * spanprof (mod_spanprof.c's spanprof_known), or NULL: it may read
     * the OTEL_* variables in its handler or filters (CGI, SSI, FastCGI,
     * PHP, a third-party module), or write a request's output from
     * another thread than the handler's (a suspended request resumed by
     * an MPM callback). */
    const char          *foreign_module;
    /* And at fixups: some directive names one, or foreign_module. */
    int                  env_handler;
    /* A module besides http_core hooks http_scheme (mod_ssl): the span's
     * url.scheme asks the hook; else it is http_core's answer, from the
     * server's ServerName scheme (spanprof_span.c). */
    int                  scheme_hooked;
} spanprof_globals_t;


extern module AP_MODULE_DECLARE_DATA spanprof_module;

/* spanprof_process.c: what the process holds, written by the module file
 * and read by the others. */
extern spanprof_globals_t  spanprof_globals;
extern sp_exporter_t      *spanprof_exporter;
extern int                 spanprof_export_spans;
extern server_rec         *spanprof_main_server;

extern const spanprof_dir_conf_t  spanprof_dir_defaults;

/* The request's per-directory settings. Inline: the hooks ask for them
 * about ten times per request. */
static inline const spanprof_dir_conf_t *
spanprof_dir_conf(request_rec *r)
{
    const spanprof_dir_conf_t  *dc;

    dc = r->per_dir_config
         ? ap_get_module_config(r->per_dir_config, &spanprof_module) : NULL;
    return dc != NULL ? dc : &spanprof_dir_defaults;
}

/* spanprof_api.c */
const char *spanprof_set_api_write(cmd_parms *cmd, void *conf, int on);
void spanprof_register_api_hooks(void);
/* A process of the server other than a child (prefork's exporter
 * process) takes a status slot, as each child does at child_init. */
void spanprof_api_attach(apr_pool_t *p, server_rec *s);

/* spanprof_exporter_conf.c: the exporter's settings (ec, its resource in
 * res, to be freed with sp_resource_free) from the main server's; 0, or -1
 * logged. */
int spanprof_exporter_conf(apr_pool_t *p, server_rec *s,
    spanprof_srv_conf_t *sc, sp_exporter_conf_t *ec, sp_resource_t *res);

/* spanprof_relay.c. Parent, post_config: under prefork with spans to
 * send, the children's shared span queues and the exporter process,
 * which takes a status slot through attach. Child: the queue its spans go
 * into (its slot, let go at p's cleanup), or NULL: it exports its own. */
typedef void (*spanprof_attach_fn)(apr_pool_t *p, server_rec *s);
void spanprof_relay_start(apr_pool_t *pconf, server_rec *s,
    spanprof_srv_conf_t *sc, spanprof_attach_fn attach);
sp_span_queue_t *spanprof_relay_child_queue(apr_pool_t *p, server_rec *s);
void spanprof_register_relay_hooks(void);

/* spanprof_context.c */
/* The request's context (create: made if it has none). Inline for a
 * main request's context already made, which the hooks ask for about six
 * times per request; the rest (subrequests, internal redirects, the
 * first time) in spanprof_ctx_find. */
spanprof_ctx_t *spanprof_ctx_find(request_rec *r, int create);

static inline spanprof_ctx_t *
spanprof_get_ctx(request_rec *r, int create)
{
    spanprof_ctx_t  *ctx;

    if (r->main == NULL) {
        ctx = ap_get_module_config(r->request_config, &spanprof_module);
        if (ctx != NULL) {
            return ctx;
        }
    }
    return spanprof_ctx_find(r, create);
}
spanprof_conn_t *spanprof_conn(conn_rec *c, int create);
void spanprof_resolve_ids(request_rec *r, spanprof_ctx_t *ctx);
spanprof_ctx_t *spanprof_resolve(request_rec *r);
int spanprof_trace_expr(request_rec *r, const spanprof_dir_conf_t *dc);
const uint8_t *spanprof_client_span_id(spanprof_ctx_t *ctx);
const char *spanprof_traceparent(spanprof_ctx_t *ctx);
void spanprof_inject(request_rec *r, spanprof_ctx_t *ctx);
const char *spanprof_set_propagation(cmd_parms *cmd, void *conf,
    const char *args);
int spanprof_has_incoming_context(request_rec *r);
void spanprof_set_env(request_rec *r, spanprof_ctx_t *ctx);
/* The variables for the phases before the handler's, if a directive can
 * read them there. */
#define spanprof_set_env_early(r, ctx)                                        \
    do {                                                                      \
        if (spanprof_globals.env_named) {                                     \
            spanprof_set_env(r, ctx);                                         \
        }                                                                     \
    } while (0)
request_rec *spanprof_last(request_rec *r);

/* spanprof_env.c: OTEL_* variables as defaults of what the directives
 * left unset (the parent, at check_config); OK, or !OK logged. */
int spanprof_env_conf(apr_pool_t *p, spanprof_srv_conf_t *sc);

/* spanprof_expr.c */
void spanprof_register_expr_hooks(void);

/* spanprof_span.c */
void spanprof_export(request_rec *r, spanprof_ctx_t *ctx);
/* At check_config: apr's checksums of the request header names the span
 * reads. */
void spanprof_span_headers_learn(apr_pool_t *p);
/* The names of a route (NULL: none), from p; at configuration time. */
const spanprof_names_t *spanprof_names_make(apr_pool_t *p,
    const char *route);
/* The names of the route of these settings. */
const spanprof_names_t *spanprof_names(const spanprof_dir_conf_t *dc);
/* r's method as an index into spanprof_names_t. */
int spanprof_method_index(request_rec *r);
const char *spanprof_route(request_rec *r);
void spanprof_proxy_attempt(request_rec *r, const char *url);
void spanprof_proxy_done(request_rec *r, int status);

/* spanprof_files.c */
int spanprof_files_open_logs(apr_pool_t *pconf, apr_pool_t *plog,
    apr_pool_t *ptemp, server_rec *s);
void spanprof_files_child(sp_exporter_conf_t *ec);

/* spanprof_profiling.c */
int spanprof_profiling_start(server_rec *s, spanprof_srv_conf_t *sc);
void spanprof_profiling_stop(void);
int spanprof_sampling(void);
void spanprof_thread_serves(void);
void spanprof_request_starts(void);
void spanprof_request_ends(void);
void spanprof_wall_serving(int on);
void spanprof_profile_request(request_rec *r, spanprof_ctx_t *ctx);
/* The same at fixups, checking first whether the record stands. */
void spanprof_profile_final(request_rec *r, spanprof_ctx_t *ctx);
/* traced: the request's span will be exported (it reuses the end time). */
void spanprof_keep_verdict(request_rec *r, spanprof_ctx_t *ctx, int traced);
void spanprof_register_profiling_hooks(void);
/* At check_config, when no directive profiles: the profiling hooks out
 * of httpd's lists. */
void spanprof_unhook_profiling(void);

/* The request's W3C trace-flags byte. Inline: the labels' record is
 * (re)filled with it up to three times per request. */
static APR_INLINE uint8_t
spanprof_flags(const spanprof_ctx_t *ctx)
{
    return (ctx->sampled ? SP_TRACE_FLAG_SAMPLED : 0)
           | (ctx->random ? SP_TRACE_FLAG_RANDOM : 0);
}

/* r's method index (spanprof_names_t), the one the labels' record kept
 * while r->method is the same string: the span needs it again. */
static APR_INLINE int
spanprof_ctx_method_index(request_rec *r, const spanprof_ctx_t *ctx)
{
    const char  *m = r->method;

    if (ctx->record != NULL && ctx->record_method == m) {
        return ctx->record_mi;
    }
    /* GET (index 0, nearly every request) without the call. */
    if (r->method_number == M_GET && m != NULL && m[0] == 'G'
        && m[1] == 'E' && m[2] == 'T' && m[3] == '\0')
    {
        return 0;
    }
    return spanprof_method_index(r);
}

/* OtelTrace On, or its expression true for r. */
static APR_INLINE int
spanprof_traced(request_rec *r, const spanprof_dir_conf_t *dc)
{
    return dc->trace == SPANPROF_TRACE_EXPR ? spanprof_trace_expr(r, dc)
                                            : dc->trace == 1;
}

/* Labels the thread with the request, if it is profiled: the caller runs
 * code for it next. */
static APR_INLINE void
spanprof_bind(spanprof_ctx_t *ctx)
{
    if (ctx != NULL && ctx->profiled) {
        sp_thread_ctx_attach(ctx->record);
    }
}

#endif
