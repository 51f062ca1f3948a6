/*
 * spanprof for nginx: the declarations shared by the module's files.
 * ngx_http_spanprof_module.c   directives, configuration, process hooks
 * ngx_http_spanprof_context.c  per-request trace context and propagation
 * ngx_http_spanprof_span.c     SERVER and CLIENT spans at the log phase
 * ngx_http_spanprof_variables.c  $otel_* variables
 * ngx_http_spanprof_profiling.c  the sampler in each worker and the binding
 *                                of requests to the worker's CPU samples
 * ngx_http_spanprof_exporter.c   the exporter on the worker's event loop
 * ngx_http_spanprof_files.c      descriptors the master opens for workers
 * ngx_http_spanprof_api.c        otel_api: the control and status API
 */

#ifndef _NGX_HTTP_SPANPROF_MODULE_H_INCLUDED_
#define _NGX_HTTP_SPANPROF_MODULE_H_INCLUDED_

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "common/export/exporter.h"
#include "common/profile/load_shedder.h"
#include "common/trace/http_span.h"
#include "common/trace/ids.h"
#include "common/trace/propagation.h"
#include "common/profile/keep_rules.h"
#include "common/trace/query_redact.h"
#include "common/profile/thread_ctx.h"


#define NGX_HTTP_SPANPROF_TRACE_OFF   0
#define NGX_HTTP_SPANPROF_TRACE_ON    1
#define NGX_HTTP_SPANPROF_TRACE_VAR   2

/* otel_profiling: off, on, or a value with variables (false when empty,
 * "0" or "off"), as NGX_HTTP_SPANPROF_TRACE_*. */
#define NGX_HTTP_SPANPROF_PROFILING_VAR  2

#define NGX_HTTP_SPANPROF_CTX_IGNORE     0
#define NGX_HTTP_SPANPROF_CTX_EXTRACT    1
#define NGX_HTTP_SPANPROF_CTX_INJECT     2
#define NGX_HTTP_SPANPROF_CTX_PROPAGATE  3

#define ngx_http_spanprof_extracts(mode)                                      \
    ((mode) == NGX_HTTP_SPANPROF_CTX_EXTRACT                                  \
     || (mode) == NGX_HTTP_SPANPROF_CTX_PROPAGATE)
#define ngx_http_spanprof_injects(mode)                                       \
    ((mode) == NGX_HTTP_SPANPROF_CTX_INJECT                                   \
     || (mode) == NGX_HTTP_SPANPROF_CTX_PROPAGATE)


typedef struct {
    ngx_str_t                    key;
    ngx_http_complex_value_t     value;
} ngx_http_spanprof_attr_t;


typedef struct {
    /* otel_exporter { ... } */
    ngx_flag_t                   exporter_set;
    ngx_str_t                    exporter_file;  /* where the block is */
    ngx_uint_t                   exporter_line;
    ngx_str_t                    endpoint;       /* normalized URL */
    ngx_str_t                    traces_url;     /* OTEL_..._TRACES_ENDPOINT */
    ngx_msec_t                   interval;
    ngx_uint_t                   batch_size;
    ngx_uint_t                   batch_count;
    ngx_array_t                 *headers;        /* of char * "Name: value" */
    ngx_str_t                    trusted_certificate;   /* full path */
    ngx_str_t                    trusted_certificate_pem; /* its bytes */
    ngx_uint_t                   compression;
    ngx_uint_t                   protocol;   /* sp_export_protocol_t */
    ngx_msec_t                   timeout;
    ngx_msec_t                   connect_timeout;
    ngx_msec_t                   shutdown_timeout;
    /* file:// endpoint: its directory (one of the cycle's paths) and
     * traces.jsonl (one of its open files) */
    ngx_str_t                    file_dir;
    ngx_open_file_t             *traces_file;

    ngx_str_t                    service_name;
    ngx_array_t                 *resource_attrs; /* of ngx_keyval_t */

    /* otel_profiling_* */
    ngx_uint_t                   profiling_rate;
    ngx_uint_t                   profiling_types;  /* SP_SAMPLER_TYPE_* */
    ngx_uint_t                   profiling_wall_rate;
    size_t                       profiling_memory_interval;
    ngx_msec_t                   profiling_interval;
    ngx_uint_t                   profiling_max_depth;
    size_t                       profiling_max_size;
    ngx_uint_t                   profiling_max_samples;
    ngx_str_t                    pyroscope;
    sp_load_shedder_conf_t       profiling_shed;  /* zero: off */
    ngx_flag_t                   profiling_shed_set;
    ngx_array_t                 *profiling_redact; /* of char *, or NULL */
    ngx_flag_t                   profiling_used;
    /* Some location has keep rules other than "all". */
    ngx_flag_t                   keep_used;

    /* otel_api: the control state and status slots (one zone) */
    ngx_shm_zone_t              *api_zone;

    /* Set while parsing: some location traces, propagates or profiles. */
    ngx_flag_t                   used;
    ngx_uint_t                   trace_line;
    ngx_str_t                    trace_file;
} ngx_http_spanprof_main_conf_t;


/* Whether any location of a server traces, propagates or profiles: the
 * others' requests get no context before their location is known. */
typedef struct {
    ngx_flag_t                   active;
} ngx_http_spanprof_srv_conf_t;


typedef struct {
    ngx_uint_t                   trace;          /* NGX_HTTP_SPANPROF_TRACE_* */
    ngx_http_complex_value_t    *trace_var;
    ngx_uint_t                   context;        /* NGX_HTTP_SPANPROF_CTX_* */
    sp_propagation_t             propagation;    /* otel_propagation; zero:
                                                    unset (w3c) */
    ngx_http_complex_value_t    *span_name;
    ngx_array_t                 *span_attrs;     /* of ngx_http_spanprof_attr_t */
    ngx_uint_t                   profiling;      /* 0, 1, _PROFILING_VAR */
    ngx_http_complex_value_t    *profiling_var;
    /* otel_profiling_keep; keep_set: given at this level */
    sp_keep_rules_t              keep;
    ngx_flag_t                   keep_set;
    /* otel_span_redact_query: this level's names and the inherited ones
     * (of sp_query_name_t), and their view for query_redact.h */
    ngx_array_t                 *redact_query;
    sp_query_redact_t            query_redact;
    /* otel_api in this location (not inherited: a content handler) */
    unsigned                     api:1;
    unsigned                     api_write:1;
    /* Traces (or may: a variable), propagates or profiles; set at merge. */
    ngx_flag_t                   active;
} ngx_http_spanprof_loc_conf_t;


/* The trace context of one (main) request. It survives internal redirects
 * (which clear r->ctx) through a pool cleanup entry, as realip does. */
typedef struct {
    u_char                       trace_id[SP_TRACE_ID_LEN];
    u_char                       span_id[SP_SPAN_ID_LEN];
    u_char                       parent_id[SP_SPAN_ID_LEN];
    u_char                       client_span_id[SP_SPAN_ID_LEN];
    uint64_t                     start_ns;
    uint64_t                     content_ns;     /* last precontent phase */
    off_t                        body_size;      /* Content-Length, before
                                                    a discard zeroes it */
    ngx_str_t                    tracestate;     /* valid incoming, joined */
    u_char                      *traceparent;    /* sent upstream, 55 chars */
    uint8_t                      parent_flags;

    unsigned                     resolved:1;
    unsigned                     sampled:1;
    unsigned                     has_parent:1;
    unsigned                     random:1;
    unsigned                     client_span:1;
    unsigned                     logged:1;
    unsigned                     profiled:1;
    /* Its keep rules did not keep it: its span has no profile id. */
    unsigned                     unkept:1;
    /* Its labels' record was made (and its counters zeroed) once. */
    unsigned                     record_made:1;
    /* When its keep verdict read the clock: the span's end. */
    uint64_t                     end_ns;

    /* The labels of this request's CPU samples (OTEP 4947 record), and
     * the location and method its span name was made for, when whole:
     * the span reuses it if they are still the request's. Not zeroed
     * with the context (get_ctx): read only once profiled is set. */
    sp_thread_ctx_record_t       record;
    void                        *record_loc;
    u_char                      *record_method;
} ngx_http_spanprof_ctx_t;


extern ngx_module_t  ngx_http_spanprof_module;
extern sp_exporter_t  *ngx_http_spanprof_exporter;


ngx_http_spanprof_ctx_t *ngx_http_spanprof_get_ctx(ngx_http_request_t *r,
    ngx_flag_t create);
ngx_http_spanprof_ctx_t *ngx_http_spanprof_resolve(ngx_http_request_t *r);
const u_char *ngx_http_spanprof_client_span_id(ngx_http_spanprof_ctx_t *ctx);
u_char *ngx_http_spanprof_traceparent(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx);
uint8_t ngx_http_spanprof_flags(ngx_http_spanprof_ctx_t *ctx);
ngx_int_t ngx_http_spanprof_inject(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx);
char *ngx_http_spanprof_propagation(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

ngx_int_t ngx_http_spanprof_export(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx);

ngx_int_t ngx_http_spanprof_add_variables(ngx_conf_t *cf);

/* The default span name into buf (SP_HTTP_SPAN_NAME_LEN bytes). */
size_t ngx_http_spanprof_default_name(ngx_http_request_t *r, u_char *buf,
    size_t cap);

ngx_int_t ngx_http_spanprof_profiling_init(ngx_conf_t *cf);
char *ngx_http_spanprof_profiling_types(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
void ngx_http_spanprof_profile_request(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx);
/* traced: the request's span will be exported (it reuses the end time). */
void ngx_http_spanprof_keep_verdict(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx, int traced);
ngx_int_t ngx_http_spanprof_profiling_start(ngx_cycle_t *cycle,
    ngx_http_spanprof_main_conf_t *mcf);
void ngx_http_spanprof_profiling_stop(ngx_cycle_t *cycle);

char *ngx_http_spanprof_files_conf(ngx_conf_t *cf,
    ngx_http_spanprof_main_conf_t *mcf);
ngx_int_t ngx_http_spanprof_files_init_module(ngx_cycle_t *cycle);
void ngx_http_spanprof_files_worker(ngx_http_spanprof_main_conf_t *mcf,
    sp_exporter_conf_t *ec, sp_file_output_fds_t *files);

/* OTEL_* variables as defaults of what the directives left unset, and
 * the exporter's last checks (ngx_http_spanprof_env.c). */
char *ngx_http_spanprof_env_conf(ngx_conf_t *cf,
    ngx_http_spanprof_main_conf_t *mcf);

char *ngx_http_spanprof_api(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
void ngx_http_spanprof_api_init_process(ngx_http_spanprof_main_conf_t *mcf);
void ngx_http_spanprof_api_exit_process(void);

void ngx_http_spanprof_exporter_loop(ngx_cycle_t *cycle,
    sp_exporter_loop_t *loop);
void ngx_http_spanprof_exporter_loop_done(void);

/* The worker thread's profile labels (its otel_thread_ctx_v1), by
 * address: all request code runs on that thread, and a TLS access from a
 * dynamic module costs a call into the loader every time. */
extern sp_thread_ctx_record_t  **ngx_http_spanprof_labels;

static ngx_inline void
ngx_http_spanprof_attach(sp_thread_ctx_record_t *rec)
{
    sp_thread_ctx_store(ngx_http_spanprof_labels, rec);
}

static ngx_inline void
ngx_http_spanprof_detach(void)
{
    sp_thread_ctx_store(ngx_http_spanprof_labels, NULL);
}

static ngx_inline sp_thread_ctx_record_t *
ngx_http_spanprof_attached(void)
{
    return *ngx_http_spanprof_labels;
}

/* Labels the thread with the request, if it is profiled; the caller runs
 * code for r next. */
static ngx_inline void
ngx_http_spanprof_bind(ngx_http_request_t *r)
{
    ngx_http_spanprof_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_spanprof_module);
    if (ctx != NULL && ctx->profiled) {
        ngx_http_spanprof_attach(&ctx->record);
    }
}


#endif /* _NGX_HTTP_SPANPROF_MODULE_H_INCLUDED_ */
