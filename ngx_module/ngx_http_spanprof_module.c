/*
 * spanprof for nginx: every request a traced OpenTelemetry span.
 * Directives and variables follow nginx-otel's names and meaning.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/base/clock.h"
#include "common/base/url_mask.h"
#include "common/control/control_tick.h"
#include "common/export/endpoint.h"
#include "common/export/http_client.h"
#include "common/profile/process_context.h"
#include "common/profile/profile_truncate.h"
#include "common/trace/resource.h"
#include "common/profile/sampler.h"


static ngx_int_t ngx_http_spanprof_post_read_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_spanprof_rewrite_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_spanprof_precontent_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_spanprof_log_handler(ngx_http_request_t *r);

static void *ngx_http_spanprof_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_spanprof_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_spanprof_create_srv_conf(ngx_conf_t *cf);
static void *ngx_http_spanprof_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_spanprof_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_spanprof_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_spanprof_postconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_spanprof_init_process(ngx_cycle_t *cycle);
static void ngx_http_spanprof_exit_process(ngx_cycle_t *cycle);

static char *ngx_http_spanprof_exporter_block(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_spanprof_exporter_directive(ngx_conf_t *cf,
    ngx_command_t *dummy, void *conf);
static char *ngx_http_spanprof_endpoint(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_trusted_certificate(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_spanprof_header(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_resource_attr(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_spanprof_trace(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_trace_context(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_spanprof_span_attr(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_profiling(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_shed(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_profiling_keep(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_spanprof_pyroscope(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_redact_query(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_profiling_redact(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);


static ngx_flag_t  ngx_http_spanprof_export_spans;


static ngx_conf_enum_t  ngx_http_spanprof_context_modes[] = {
    { ngx_string("ignore"), NGX_HTTP_SPANPROF_CTX_IGNORE },
    { ngx_string("extract"), NGX_HTTP_SPANPROF_CTX_EXTRACT },
    { ngx_string("inject"), NGX_HTTP_SPANPROF_CTX_INJECT },
    { ngx_string("propagate"), NGX_HTTP_SPANPROF_CTX_PROPAGATE },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_spanprof_compression[] = {
    { ngx_string("none"), 0 },
    { ngx_string("gzip"), 1 },
    { ngx_null_string, 0 }
};


/* Values follow OTEL_EXPORTER_OTLP_PROTOCOL's. */
static ngx_conf_enum_t  ngx_http_spanprof_protocol[] = {
    { ngx_string("grpc"), SP_EXPORT_GRPC },
    { ngx_string("http/protobuf"), SP_EXPORT_HTTP_PROTOBUF },
    { ngx_string("http/json"), SP_EXPORT_HTTP_JSON },
    { ngx_null_string, 0 }
};


static ngx_conf_num_bounds_t  ngx_http_spanprof_batch_size_bounds = {
    ngx_conf_check_num_bounds, 1, 65536
};

static ngx_conf_num_bounds_t  ngx_http_spanprof_batch_count_bounds = {
    ngx_conf_check_num_bounds, 1, 1024
};

static ngx_conf_num_bounds_t  ngx_http_spanprof_rate_bounds = {
    ngx_conf_check_num_bounds, 1, 1000
};

static ngx_conf_num_bounds_t  ngx_http_spanprof_memory_interval_bounds = {
    ngx_conf_check_num_bounds, 1024, 1024 * 1024 * 1024
};

static ngx_conf_num_bounds_t  ngx_http_spanprof_depth_bounds = {
    ngx_conf_check_num_bounds, 1, SP_SAMPLER_MAX_DEPTH
};

/* bytes of one encoded profile: 1k to 1g */
static ngx_conf_num_bounds_t  ngx_http_spanprof_max_size_bounds = {
    ngx_conf_check_num_bounds, SP_PROFILE_MAX_SIZE_MIN, 1024 * 1024 * 1024
};

/* samples of one profile ([truncated] included) */
static ngx_conf_num_bounds_t  ngx_http_spanprof_max_samples_bounds = {
    ngx_conf_check_num_bounds, 1, SP_PROFILE_MAX_SAMPLES_MAX
};


/* The directives inside otel_exporter { }: parsed by our block handler, so
 * they are not registered with nginx. */
static ngx_command_t  ngx_http_spanprof_exporter_commands[] = {

    { ngx_string("endpoint"), NGX_CONF_TAKE1,
      ngx_http_spanprof_endpoint, 0, 0, NULL },

    { ngx_string("protocol"), NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, protocol),
      &ngx_http_spanprof_protocol },

    { ngx_string("interval"), NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, interval), NULL },

    { ngx_string("batch_size"), NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, batch_size),
      &ngx_http_spanprof_batch_size_bounds },

    { ngx_string("batch_count"), NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, batch_count),
      &ngx_http_spanprof_batch_count_bounds },

    { ngx_string("header"), NGX_CONF_TAKE2,
      ngx_http_spanprof_header, 0, 0, NULL },

    { ngx_string("trusted_certificate"), NGX_CONF_TAKE1,
      ngx_http_spanprof_trusted_certificate, 0, 0, NULL },

    { ngx_string("compression"), NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, compression),
      &ngx_http_spanprof_compression },

    { ngx_string("timeout"), NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, timeout), NULL },

    { ngx_string("connect_timeout"), NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, connect_timeout), NULL },

    { ngx_string("shutdown_timeout"), NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, 0,
      offsetof(ngx_http_spanprof_main_conf_t, shutdown_timeout), NULL },

      ngx_null_command
};


static ngx_command_t  ngx_http_spanprof_commands[] = {

    { ngx_string("otel_exporter"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_BLOCK|NGX_CONF_NOARGS,
      ngx_http_spanprof_exporter_block,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_service_name"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, service_name),
      NULL },

    { ngx_string("otel_resource_attr"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_http_spanprof_resource_attr,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_trace"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_trace,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_trace_context"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_trace_context,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_spanprof_loc_conf_t, context),
      &ngx_http_spanprof_context_modes },

    { ngx_string("otel_propagation"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_spanprof_propagation,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_span_name"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_spanprof_loc_conf_t, span_name),
      NULL },

    { ngx_string("otel_span_attr"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE2,
      ngx_http_spanprof_span_attr,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_span_redact_query"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_spanprof_redact_query,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_profiling,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling_keep"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_spanprof_profiling_keep,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling_rate"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_rate),
      &ngx_http_spanprof_rate_bounds },

    { ngx_string("otel_profiling_types"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_spanprof_profiling_types,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling_wall_rate"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_wall_rate),
      &ngx_http_spanprof_rate_bounds },

    { ngx_string("otel_profiling_memory_interval"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_memory_interval),
      &ngx_http_spanprof_memory_interval_bounds },

    { ngx_string("otel_profiling_interval"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_interval),
      NULL },

    { ngx_string("otel_profiling_max_depth"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_max_depth),
      &ngx_http_spanprof_depth_bounds },

    { ngx_string("otel_profiling_shed"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_shed,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling_redact"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_spanprof_profiling_redact,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling_max_size"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_max_size),
      &ngx_http_spanprof_max_size_bounds },

    { ngx_string("otel_profiling_max_samples"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_spanprof_main_conf_t, profiling_max_samples),
      &ngx_http_spanprof_max_samples_bounds },

    { ngx_string("otel_api"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS|NGX_CONF_TAKE1,
      ngx_http_spanprof_api,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("otel_profiling_pyroscope"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_pyroscope,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_spanprof_module_ctx = {
    ngx_http_spanprof_preconfiguration,    /* preconfiguration */
    ngx_http_spanprof_postconfiguration,   /* postconfiguration */

    ngx_http_spanprof_create_main_conf,    /* create main configuration */
    ngx_http_spanprof_init_main_conf,      /* init main configuration */

    ngx_http_spanprof_create_srv_conf,     /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_spanprof_create_loc_conf,     /* create location configuration */
    ngx_http_spanprof_merge_loc_conf       /* merge location configuration */
};


ngx_module_t  ngx_http_spanprof_module = {
    NGX_MODULE_V1,
    &ngx_http_spanprof_module_ctx,         /* module context */
    ngx_http_spanprof_commands,            /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ngx_http_spanprof_files_init_module,   /* init module */
    ngx_http_spanprof_init_process,        /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_spanprof_exit_process,        /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/* ---- request handlers ---------------------------------------------------- */

static ngx_int_t
ngx_http_spanprof_post_read_handler(ngx_http_request_t *r)
{
    ngx_http_spanprof_srv_conf_t  *scf;

    /* Creating the context here stamps the span's start time as soon as the
     * request header has been read; the location is not known yet, so in
     * any server where some location may need it. */
    scf = ngx_http_get_module_srv_conf(r, ngx_http_spanprof_module);
    if (r == r->main && scf->active) {
        (void) ngx_http_spanprof_get_ctx(r, 1);
    }
    return NGX_DECLINED;
}


/* A location that neither traces, propagates nor profiles leaves alone a
 * request whose context nothing has decided yet: no ids, no headers, no
 * span. (A variable such as $otel_trace_id still decides it on use.) */
static ngx_flag_t
ngx_http_spanprof_inactive(ngx_http_request_t *r)
{
    ngx_http_spanprof_ctx_t       *ctx;
    ngx_http_spanprof_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);
    if (lcf->active) {
        return 0;
    }
    ctx = ngx_http_spanprof_get_ctx(r, 0);
    return ctx == NULL || !ctx->resolved;
}


static ngx_int_t
ngx_http_spanprof_rewrite_handler(ngx_http_request_t *r)
{
    ngx_http_spanprof_ctx_t       *ctx;
    ngx_http_spanprof_loc_conf_t  *lcf;

    /* Subrequests share the main request's header list, which the main
     * request has edited already. */
    if (r != r->main || ngx_http_spanprof_inactive(r)) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_spanprof_resolve(r);
    if (ctx == NULL) {
        return NGX_DECLINED;
    }

    /* Runs again after each internal redirect, with the new location's
     * settings: the headers sent upstream follow the final location. */
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);
    if (ngx_http_spanprof_injects(lcf->context)) {
        if (ngx_http_spanprof_inject(r, ctx) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    ngx_http_spanprof_profile_request(r, ctx);

    return NGX_DECLINED;
}


/* Stamps when the content handler (and so an upstream) first starts:
 * nginx's own upstream timings are whole milliseconds. */
static ngx_int_t
ngx_http_spanprof_precontent_handler(ngx_http_request_t *r)
{
    ngx_http_spanprof_ctx_t   *ctx;
    ngx_http_core_loc_conf_t  *clcf;

    if (r == r->main) {
        /* The first one: attempts made before an internal redirect
         * (error_page after a failed upstream) belong to the span too.
         * Only a location with a content handler of its own (proxy_pass
         * and the other *_pass) goes upstream: a static file needs no
         * clock read here. */
        ctx = ngx_http_spanprof_get_ctx(r, 0);
        clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);
        if (ctx != NULL && ctx->content_ns == 0 && clcf->handler != NULL) {
            ctx->content_ns = sp_now_ns();
        }
    }
    ngx_http_spanprof_bind(r);
    return NGX_DECLINED;
}


static ngx_int_t
ngx_http_spanprof_log_handler(ngx_http_request_t *r)
{
    int                       traced;
    ngx_http_spanprof_ctx_t  *ctx;

    if (r != r->main || ngx_http_spanprof_inactive(r)) {
        return NGX_OK;
    }

    /* Requests finalized before the post-read phase (400s) get their
     * context only now; most have it decided since the rewrite phase. */
    ctx = ngx_http_get_module_ctx(r, ngx_http_spanprof_module);
    if (ctx == NULL || !ctx->resolved) {
        ctx = ngx_http_spanprof_resolve(r);
    }
    if (ctx == NULL || ctx->logged) {
        return NGX_OK;
    }
    ctx->logged = 1;

    /* Before the span: only a kept request's span names its profile. */
    traced = ctx->sampled && ngx_http_spanprof_exporter != NULL
             && ngx_http_spanprof_export_spans;
    if (ctx->profiled && ctx->record.sp_keep) {
        ngx_http_spanprof_keep_verdict(r, ctx, traced);
    }

    if (traced) {
        (void) ngx_http_spanprof_export(r, ctx);
    }

    /* The request's code is done; its record goes with its pool. */
    if (ctx->profiled) {
        ngx_http_spanprof_detach();
    }
    return NGX_OK;
}


/* ---- configuration ------------------------------------------------------- */

static void *
ngx_http_spanprof_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_spanprof_main_conf_t  *mcf;

    mcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_spanprof_main_conf_t));
    if (mcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     mcf->endpoint = { 0, NULL };
     *     mcf->headers = NULL;
     *     mcf->trusted_certificate = { 0, NULL };
     *     mcf->trusted_certificate_pem = { 0, NULL };
     *     mcf->service_name = { 0, NULL };
     *     mcf->resource_attrs = NULL;
     *     mcf->used = 0;
     */

    mcf->exporter_set = 0;
    mcf->interval = NGX_CONF_UNSET_MSEC;
    mcf->batch_size = NGX_CONF_UNSET_UINT;
    mcf->batch_count = NGX_CONF_UNSET_UINT;
    mcf->compression = NGX_CONF_UNSET_UINT;
    mcf->protocol = NGX_CONF_UNSET_UINT;
    mcf->timeout = NGX_CONF_UNSET_MSEC;
    mcf->connect_timeout = NGX_CONF_UNSET_MSEC;
    mcf->shutdown_timeout = NGX_CONF_UNSET_MSEC;
    mcf->profiling_rate = NGX_CONF_UNSET_UINT;
    mcf->profiling_wall_rate = NGX_CONF_UNSET_UINT;
    mcf->profiling_memory_interval = NGX_CONF_UNSET_SIZE;
    mcf->profiling_interval = NGX_CONF_UNSET_MSEC;
    mcf->profiling_max_depth = NGX_CONF_UNSET_UINT;
    mcf->profiling_max_size = NGX_CONF_UNSET_SIZE;
    mcf->profiling_max_samples = NGX_CONF_UNSET_UINT;

    return mcf;
}


static char *
ngx_http_spanprof_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    /* Exporter defaults also hold without an otel_exporter block (profiles
     * for Pyroscope only). */
    ngx_conf_init_msec_value(mcf->interval, 5000);
    ngx_conf_init_uint_value(mcf->batch_size, 512);
    ngx_conf_init_uint_value(mcf->batch_count, 4);
    /* OTEL_* variables fill what the directives left unset (and may give
     * an exporter without a block); then the defaults. */
    if ((mcf->used || mcf->exporter_set)
        && ngx_http_spanprof_env_conf(cf, mcf) != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }
    ngx_conf_init_uint_value(mcf->compression, 0);
    ngx_conf_init_uint_value(mcf->protocol, SP_EXPORT_GRPC);
    ngx_conf_init_msec_value(mcf->timeout, 10000);
    ngx_conf_init_msec_value(mcf->connect_timeout, 2000);
    ngx_conf_init_msec_value(mcf->shutdown_timeout, 2000);

    ngx_conf_init_uint_value(mcf->profiling_rate, 100);
    ngx_conf_init_uint_value(mcf->profiling_wall_rate, 100);
    ngx_conf_init_size_value(mcf->profiling_memory_interval, 512 * 1024);
    if (mcf->profiling_types == 0) {
        mcf->profiling_types = SP_SAMPLER_TYPE_CPU;
    }
    ngx_conf_init_msec_value(mcf->profiling_interval, 10000);
    ngx_conf_init_uint_value(mcf->profiling_max_depth, 64);
    ngx_conf_init_size_value(mcf->profiling_max_size,
                             SP_PROFILE_MAX_SIZE_DEFAULT);
    ngx_conf_init_uint_value(mcf->profiling_max_samples,
                             SP_PROFILE_MAX_SAMPLES_DEFAULT);

    return NGX_CONF_OK;
}


static void *
ngx_http_spanprof_create_srv_conf(ngx_conf_t *cf)
{
    /*
     * set by ngx_pcalloc():
     *
     *     scf->active = 0;
     */

    return ngx_pcalloc(cf->pool, sizeof(ngx_http_spanprof_srv_conf_t));
}


static void *
ngx_http_spanprof_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_spanprof_loc_conf_t  *lcf;

    lcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_spanprof_loc_conf_t));
    if (lcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     lcf->trace_var = NULL;
     *     lcf->span_name = NULL;
     *     lcf->redact_query = NULL;
     *     lcf->query_redact = { NULL, 0 };
     */

    lcf->trace = NGX_CONF_UNSET_UINT;
    lcf->context = NGX_CONF_UNSET_UINT;
    lcf->span_attrs = NGX_CONF_UNSET_PTR;
    lcf->profiling = NGX_CONF_UNSET_UINT;

    return lcf;
}


static ngx_int_t
ngx_http_spanprof_merge_redact_query(ngx_conf_t *cf,
    ngx_http_spanprof_loc_conf_t *prev, ngx_http_spanprof_loc_conf_t *conf)
{
    ngx_uint_t        i;
    ngx_array_t      *all;
    sp_query_name_t  *n;

    if (prev->redact_query != NULL && conf->redact_query != NULL) {
        all = ngx_array_create(cf->pool, prev->redact_query->nelts
                                         + conf->redact_query->nelts,
                               sizeof(sp_query_name_t));
        if (all == NULL) {
            return NGX_ERROR;
        }
        n = ngx_array_push_n(all, prev->redact_query->nelts);
        if (n == NULL) {
            return NGX_ERROR;
        }
        ngx_memcpy(n, prev->redact_query->elts,
                   prev->redact_query->nelts * sizeof(sp_query_name_t));
        for (i = 0; i < conf->redact_query->nelts; i++) {
            n = ngx_array_push(all);
            if (n == NULL) {
                return NGX_ERROR;
            }
            *n = ((sp_query_name_t *) conf->redact_query->elts)[i];
        }
        conf->redact_query = all;

    } else if (conf->redact_query == NULL) {
        conf->redact_query = prev->redact_query;
    }

    if (conf->redact_query != NULL) {
        conf->query_redact.names = conf->redact_query->elts;
        conf->query_redact.n = conf->redact_query->nelts;
    }
    return NGX_OK;
}


static char *
ngx_http_spanprof_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_spanprof_loc_conf_t  *prev = parent;
    ngx_http_spanprof_loc_conf_t  *conf = child;

    ngx_http_spanprof_srv_conf_t  *scf;

    if (conf->trace == NGX_CONF_UNSET_UINT) {
        conf->trace = prev->trace;
        conf->trace_var = prev->trace_var;
    }
    ngx_conf_merge_uint_value(conf->trace, prev->trace,
                              NGX_HTTP_SPANPROF_TRACE_OFF);
    ngx_conf_merge_uint_value(conf->context, prev->context,
                              NGX_HTTP_SPANPROF_CTX_IGNORE);
    if (conf->propagation.n == 0) {
        conf->propagation = prev->propagation;   /* zero: w3c */
    }
    if (conf->span_name == NULL) {
        conf->span_name = prev->span_name;
    }
    /* Like add_header: a level with its own otel_span_attr replaces the
     * inherited list. */
    ngx_conf_merge_ptr_value(conf->span_attrs, prev->span_attrs, NULL);
    if (conf->profiling == NGX_CONF_UNSET_UINT) {
        conf->profiling = prev->profiling;
        conf->profiling_var = prev->profiling_var;
    }
    ngx_conf_merge_uint_value(conf->profiling, prev->profiling, 0);
    if (!conf->keep_set) {
        conf->keep = prev->keep_set ? prev->keep : SP_KEEP_RULES_DEFAULT;
        conf->keep_set = prev->keep_set;
    }

    /* otel_span_redact_query adds to the inherited names: a location
     * cannot let through what its server redacts. */
    if (ngx_http_spanprof_merge_redact_query(cf, prev, conf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    conf->active = conf->trace != NGX_HTTP_SPANPROF_TRACE_OFF
                   || conf->context != NGX_HTTP_SPANPROF_CTX_IGNORE
                   || conf->profiling;

    /* Called for a server's own level and then for each of its locations
     * (nested ones and "if" blocks too), with cf->ctx holding that
     * server's srv_conf. */
    if (conf->active) {
        scf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_spanprof_module);
        scf->active = 1;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_exporter_block(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    char        *rv;
    ngx_conf_t   save;

    if (mcf->exporter_set) {
        return "is duplicate";
    }
    mcf->exporter_set = 1;
    mcf->exporter_file = cf->conf_file->file.name;
    mcf->exporter_line = cf->conf_file->line;

    save = *cf;
    cf->handler = ngx_http_spanprof_exporter_directive;
    cf->handler_conf = conf;

    rv = ngx_conf_parse(cf, NULL);

    *cf = save;

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    /* No endpoint, protocol, compression or timeout yet: OTEL_* variables
     * may give them (ngx_http_spanprof_env_conf, at the end of http). */
    ngx_conf_init_msec_value(mcf->interval, 5000);
    ngx_conf_init_uint_value(mcf->batch_size, 512);
    ngx_conf_init_uint_value(mcf->batch_count, 4);
    ngx_conf_init_msec_value(mcf->connect_timeout, 2000);
    ngx_conf_init_msec_value(mcf->shutdown_timeout, 2000);

    /* The queue is preallocated, about 3 KiB a span. */
    if (mcf->batch_size * mcf->batch_count > 65536) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"otel_exporter\" queues \"batch_size\" times "
                           "\"batch_count\" spans, at most 65536");
        return NGX_CONF_ERROR;
    }

    if (mcf->endpoint.len
        && ngx_strncmp(mcf->endpoint.data, "file://", 7) == 0)
    {
        return ngx_http_spanprof_files_conf(cf, mcf);
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_exporter_directive(ngx_conf_t *cf, ngx_command_t *dummy,
    void *conf)
{
    char           *rv;
    ngx_str_t      *name;
    ngx_uint_t      nargs;
    ngx_command_t  *cmd;

    name = cf->args->elts;
    nargs = cf->args->nelts - 1;

    for (cmd = ngx_http_spanprof_exporter_commands; cmd->name.len; cmd++) {

        if (name->len != cmd->name.len
            || ngx_strncmp(name->data, cmd->name.data, name->len) != 0)
        {
            continue;
        }

        if ((cmd->type & NGX_CONF_TAKE1 && nargs == 1)
            || (cmd->type & NGX_CONF_TAKE2 && nargs == 2))
        {
            rv = cmd->set(cf, cmd, conf);
            if (rv == NGX_CONF_OK || rv == NGX_CONF_ERROR) {
                return rv;
            }
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" directive %s", name, rv);
            return NGX_CONF_ERROR;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number of arguments in \"%V\" directive",
                           name);
        return NGX_CONF_ERROR;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "unknown directive \"%V\" in \"otel_exporter\"", name);
    return NGX_CONF_ERROR;
}


/* Read here, in the master as root, and handed to workers as bytes: a
 * worker (an unprivileged user) may not reach the file. */
static char *
ngx_http_spanprof_trusted_certificate(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    ngx_str_t  *value, path;
    char       *pem;
    size_t      len;
    char        err[128];

    if (mcf->trusted_certificate.data) {
        return "is duplicate";
    }

    value = cf->args->elts;
    path = value[1];
    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    /* NUL-terminated: nginx's arguments and full names are. */
    if (sp_http_ca_load((const char *) path.data, &pem, &len, err,
                        sizeof(err)) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "cannot read trusted_certificate \"%V\": %s",
                           &path, err);
        return NGX_CONF_ERROR;
    }

    mcf->trusted_certificate_pem.data = ngx_pnalloc(cf->pool, len + 1);
    if (mcf->trusted_certificate_pem.data == NULL) {
        free(pem);
        return NGX_CONF_ERROR;
    }
    ngx_memcpy(mcf->trusted_certificate_pem.data, pem, len + 1);
    mcf->trusted_certificate_pem.len = len;
    free(pem);

    mcf->trusted_certificate = path;
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_endpoint(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    u_char      *url;
    size_t       len;
    ngx_str_t   *value;
    const char  *why;
    char         masked[512];

    if (mcf->endpoint.data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    /* nginx-otel's forms: a bare host:port becomes http://host:port.
     * NUL-terminated for common/ (nginx's argument strings are). */
    len = value[1].len + SP_ENDPOINT_EXTRA;
    url = ngx_pnalloc(cf->pool, len);
    if (url == NULL) {
        return NGX_CONF_ERROR;
    }
    if (sp_endpoint_normalize((const char *) value[1].data, 1, (char *) url,
                              len, &why) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid endpoint \"%s\": %s",
                           sp_url_mask((const char *) value[1].data, masked,
                                       sizeof(masked)), why);
        return NGX_CONF_ERROR;
    }

    mcf->endpoint.data = url;
    mcf->endpoint.len = ngx_strlen(url);
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_header(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    u_char      *p, **h;
    ngx_str_t   *value;
    ngx_uint_t   i;

    value = cf->args->elts;

    for (i = 0; i < value[1].len; i++) {
        if (value[1].data[i] <= ' ' || value[1].data[i] == ':'
            || value[1].data[i] >= 0x7f)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid header name \"%V\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }
    for (i = 0; i < value[2].len; i++) {
        if (value[2].data[i] == CR || value[2].data[i] == LF
            || value[2].data[i] == '\0')
        {
            /* Named, never shown: the value may be a secret. */
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value of header \"%V\": it has a "
                               "CR, LF or NUL", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    if (mcf->headers == NULL) {
        mcf->headers = ngx_array_create(cf->pool, 4, sizeof(u_char *));
        if (mcf->headers == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    h = ngx_array_push(mcf->headers);
    p = ngx_pnalloc(cf->pool, value[1].len + 2 + value[2].len + 1);
    if (h == NULL || p == NULL) {
        return NGX_CONF_ERROR;
    }
    *h = p;
    *ngx_sprintf(p, "%V: %V", &value[1], &value[2]) = '\0';

    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_resource_attr(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    ngx_str_t     *value;
    ngx_keyval_t  *kv;

    value = cf->args->elts;

    if (mcf->resource_attrs == NULL) {
        mcf->resource_attrs = ngx_array_create(cf->pool, 4,
                                               sizeof(ngx_keyval_t));
        if (mcf->resource_attrs == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    /* Room is left for the attributes the module sets itself. */
    if (mcf->resource_attrs->nelts >= SP_RESOURCE_MAX_ATTRS - 16) {
        return "is given too many times (at most 48 attributes)";
    }

    kv = ngx_array_push(mcf->resource_attrs);
    if (kv == NULL) {
        return NGX_CONF_ERROR;
    }
    kv->key = value[1];
    kv->value = value[2];

    return NGX_CONF_OK;
}


/* A directive's value with variables, compiled for evaluation per
 * request (otel_trace, otel_profiling); NULL on error (logged). */
static ngx_http_complex_value_t *
ngx_http_spanprof_complex_value(ngx_conf_t *cf, ngx_str_t *value)
{
    ngx_http_complex_value_t          *cv;
    ngx_http_compile_complex_value_t   ccv;

    cv = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (cv == NULL) {
        return NULL;
    }

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NULL;
    }
    return cv;
}


static char *
ngx_http_spanprof_trace(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    ngx_str_t                          *value;
    ngx_http_spanprof_main_conf_t      *mcf;
    
    if (lcf->trace != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0) {
        lcf->trace = NGX_HTTP_SPANPROF_TRACE_OFF;
        return NGX_CONF_OK;
    }

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_spanprof_module);
    mcf->used = 1;
    if (mcf->trace_line == 0) {
        mcf->trace_file = cf->conf_file->file.name;
        mcf->trace_line = cf->conf_file->line;
    }

    if (ngx_strcmp(value[1].data, "on") == 0) {
        lcf->trace = NGX_HTTP_SPANPROF_TRACE_ON;
        return NGX_CONF_OK;
    }

    if (ngx_http_script_variables_count(&value[1]) == 0) {
        return "takes \"on\", \"off\" or a value with variables";
    }

    lcf->trace_var = ngx_http_spanprof_complex_value(cf, &value[1]);
    if (lcf->trace_var == NULL) {
        return NGX_CONF_ERROR;
    }

    lcf->trace = NGX_HTTP_SPANPROF_TRACE_VAR;
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_trace_context(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    char                           *rv;
    ngx_http_spanprof_main_conf_t  *mcf;

    rv = ngx_conf_set_enum_slot(cf, cmd, conf);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (lcf->context != NGX_HTTP_SPANPROF_CTX_IGNORE) {
        mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_spanprof_module);
        mcf->used = 1;
    }
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_span_attr(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    ngx_str_t                         *value;
    ngx_http_spanprof_attr_t          *attr;
    ngx_http_compile_complex_value_t   ccv;

    value = cf->args->elts;

    if (lcf->span_attrs == NGX_CONF_UNSET_PTR) {
        lcf->span_attrs = ngx_array_create(cf->pool, 4,
                                           sizeof(ngx_http_spanprof_attr_t));
        if (lcf->span_attrs == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    attr = ngx_array_push(lcf->span_attrs);
    if (attr == NULL) {
        return NGX_CONF_ERROR;
    }
    attr->key = value[1];

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = &value[2];
    ccv.complex_value = &attr->value;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* on, off, or a value with variables decided per request (a header, a
 * split_clients ratio): false when empty, "0" or "off". */
static char *
ngx_http_spanprof_profiling(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    ngx_str_t                          *value;
    ngx_http_spanprof_main_conf_t      *mcf;

    if (lcf->profiling != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcasecmp(value[1].data, (u_char *) "off") == 0) {
        lcf->profiling = 0;
        return NGX_CONF_OK;
    }

    if (ngx_strcasecmp(value[1].data, (u_char *) "on") == 0) {
        lcf->profiling = 1;

    } else {
        if (ngx_http_script_variables_count(&value[1]) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid value \"%V\": "
                               "\"otel_profiling\" takes \"on\", \"off\" or "
                               "a value with variables", &value[1]);
            return NGX_CONF_ERROR;
        }

        lcf->profiling_var = ngx_http_spanprof_complex_value(cf, &value[1]);
        if (lcf->profiling_var == NULL) {
            return NGX_CONF_ERROR;
        }
        lcf->profiling = NGX_HTTP_SPANPROF_PROFILING_VAR;
    }

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_spanprof_module);
    mcf->used = 1;
    mcf->profiling_used = 1;
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_profiling_keep(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    char                            err[160];
    const char                     *argv[8];
    ngx_str_t                      *value;
    ngx_uint_t                      i;
    ngx_http_spanprof_main_conf_t  *mcf;

    if (lcf->keep_set) {
        return "is duplicate";
    }

    value = cf->args->elts;
    if (cf->args->nelts - 1 > sizeof(argv) / sizeof(argv[0])) {
        return "has too many arguments";
    }
    for (i = 1; i < cf->args->nelts; i++) {
        argv[i - 1] = (const char *) value[i].data;
    }

    if (sp_keep_rules_parse(&lcf->keep, argv, cf->args->nelts - 1, err,
                            sizeof(err)) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"otel_profiling_keep\": %s", err);
        return NGX_CONF_ERROR;
    }
    lcf->keep_set = 1;

    if (!sp_keep_rules_all(&lcf->keep)) {
        mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_spanprof_module);
        mcf->keep_used = 1;
    }
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_pyroscope(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    ngx_str_t  *value;
    char        masked[512];

    if (mcf->pyroscope.data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strncmp(value[1].data, "http://", 7) != 0
        && ngx_strncmp(value[1].data, "https://", 8) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid Pyroscope URL \"%s\": must start with "
                           "http:// or https://",
                           sp_url_mask((const char *) value[1].data, masked,
                                       sizeof(masked)));
        return NGX_CONF_ERROR;
    }

    /* Without a trailing slash: "/ingest" is appended. */
    mcf->pyroscope = value[1];
    while (mcf->pyroscope.len && mcf->pyroscope.data[mcf->pyroscope.len - 1]
                                 == '/')
    {
        mcf->pyroscope.data[--mcf->pyroscope.len] = '\0';
    }
    return NGX_CONF_OK;
}


/* otel_profiling_shed off | cpu=PERCENT[,pause] */
static char *
ngx_http_spanprof_shed(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    ngx_str_t  *value;
    char        err[256];

    if (mcf->profiling_shed_set) {
        return "is duplicate";
    }
    mcf->profiling_shed_set = 1;

    value = cf->args->elts;
    if (sp_load_shedder_parse((const char *) value[1].data, value[1].len,
                              &mcf->profiling_shed, err, sizeof(err)) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid "
                           "otel_profiling_shed %s", err);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_redact_query(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_loc_conf_t *lcf = conf;

    ngx_str_t        *value;
    ngx_uint_t        i;
    const char       *why;
    sp_query_name_t  *n;

    value = cf->args->elts;

    if (lcf->redact_query == NULL) {
        lcf->redact_query = ngx_array_create(cf->pool, cf->args->nelts - 1,
                                             sizeof(sp_query_name_t));
        if (lcf->redact_query == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    for (i = 1; i < cf->args->nelts; i++) {
        why = sp_query_redact_name_error((const char *) value[i].data,
                                         value[i].len);
        if (why != NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid query parameter name \"%V\": %s",
                               &value[i], why);
            return NGX_CONF_ERROR;
        }
        n = ngx_array_push(lcf->redact_query);
        if (n == NULL) {
            return NGX_CONF_ERROR;
        }
        n->name = (const char *) value[i].data;
        n->len = value[i].len;
    }
    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_profiling_redact(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;

    ngx_str_t   *value;
    ngx_uint_t   i;
    u_char     **p;

    value = cf->args->elts;

    if (mcf->profiling_redact == NULL) {
        mcf->profiling_redact = ngx_array_create(cf->pool,
                                                 cf->args->nelts - 1,
                                                 sizeof(u_char *));
        if (mcf->profiling_redact == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    for (i = 1; i < cf->args->nelts; i++) {
        if (value[i].len == 0) {
            return "takes non-empty patterns";
        }
        p = ngx_array_push(mcf->profiling_redact);
        if (p == NULL) {
            return NGX_CONF_ERROR;
        }
        *p = value[i].data;     /* NUL-terminated, as nginx's args are */
    }
    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_spanprof_preconfiguration(ngx_conf_t *cf)
{
    return ngx_http_spanprof_add_variables(cf);
}


static ngx_int_t
ngx_http_spanprof_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt            *h;
    ngx_http_core_main_conf_t      *cmcf;
    ngx_http_spanprof_main_conf_t  *mcf;

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_spanprof_module);

    /* Loaded but unused costs nothing per request: no handler at all. */
    if (!mcf->used) {
        return NGX_OK;
    }

    /* In the master, before the workers fork: they inherit the choice,
     * and share the scales (mapped once: a reload's new workers share the
     * same). */
    sp_clock_init();

    if (mcf->trace_line && !mcf->exporter_set) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "\"otel_trace\" is enabled in %V:%ui but no "
                      "\"otel_exporter\" is configured and neither "
                      "OTEL_EXPORTER_OTLP_ENDPOINT nor "
                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set",
                      &mcf->trace_file, mcf->trace_line);
        return NGX_ERROR;
    }

    if (mcf->profiling_used && !mcf->exporter_set && !mcf->pyroscope.len) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "\"otel_profiling\" is on but neither \"otel_exporter\" "
                      "nor \"otel_profiling_pyroscope\" is configured");
        return NGX_ERROR;
    }

    if (mcf->profiling_used
        && ngx_http_spanprof_profiling_init(cf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_POST_READ_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_spanprof_post_read_handler;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_REWRITE_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_spanprof_rewrite_handler;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_spanprof_precontent_handler;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_spanprof_log_handler;

    return NGX_OK;
}


/* ---- worker process ------------------------------------------------------ */

/* Lines from common/ (all on the worker's thread: no exporter thread). */
static void
ngx_http_spanprof_log(void *ud, int level, const char *msg)
{
    static const ngx_uint_t  levels[] = {
        NGX_LOG_ERR, NGX_LOG_WARN, NGX_LOG_INFO, NGX_LOG_DEBUG
    };

    ngx_log_error(levels[level & 3], ngx_cycle->log, 0, "%s", msg);
}


static char *
ngx_http_spanprof_cstr(ngx_pool_t *pool, ngx_str_t *s)
{
    u_char  *p;

    p = ngx_pnalloc(pool, s->len + 1);
    if (p == NULL) {
        return NULL;
    }
    *ngx_cpymem(p, s->data, s->len) = '\0';
    return (char *) p;
}


static ngx_int_t
ngx_http_spanprof_init_process(ngx_cycle_t *cycle)
{
    char                            err[256], *k, *v, *service;
    const char                    **headers, **redact;
    ngx_uint_t                      i, n;
    ngx_keyval_t                   *kv;
    sp_resource_t                   res;
    sp_exporter_conf_t              ec;
    sp_exporter_loop_t              loop;
    sp_file_output_fds_t            files;
    ngx_http_conf_ctx_t            *http;
    ngx_http_spanprof_main_conf_t  *mcf;

    ngx_http_spanprof_exporter = NULL;

    http = (ngx_http_conf_ctx_t *) ngx_get_conf(cycle->conf_ctx,
                                                ngx_http_module);
    if (http == NULL) {
        return NGX_OK;
    }
    mcf = http->main_conf[ngx_http_spanprof_module.ctx_index];
    if (!mcf->used
        || (!mcf->exporter_set
            && !(mcf->profiling_used && mcf->pyroscope.len)))
    {
        return NGX_OK;
    }

    sp_ids_thread_init();

    service = mcf->service_name.len
              ? ngx_http_spanprof_cstr(cycle->pool, &mcf->service_name) : NULL;
    if (sp_resource_init(&res, "nginx", service, NULL) != 0) {
        return NGX_ERROR;
    }
    kv = mcf->resource_attrs ? mcf->resource_attrs->elts : NULL;
    n = mcf->resource_attrs ? mcf->resource_attrs->nelts : 0;
    for (i = 0; i < n; i++) {
        if (service != NULL
            && ngx_strcmp(kv[i].key.data, "service.name") == 0)
        {
            continue;   /* otel_service_name wins */
        }
        k = ngx_http_spanprof_cstr(cycle->pool, &kv[i].key);
        v = ngx_http_spanprof_cstr(cycle->pool, &kv[i].value);
        if (k == NULL || v == NULL || sp_resource_set(&res, k, v) != 0) {
            sp_resource_free(&res);
            return NGX_ERROR;
        }
    }

    n = mcf->headers ? mcf->headers->nelts : 0;
    headers = ngx_pcalloc(cycle->pool, (n + 1) * sizeof(char *));
    if (headers == NULL) {
        sp_resource_free(&res);
        return NGX_ERROR;
    }
    for (i = 0; i < n; i++) {
        headers[i] = ((const char **) mcf->headers->elts)[i];
    }

    /* The exporter runs on this worker's event loop, not a thread. */
    ngx_http_spanprof_exporter_loop(cycle, &loop);

    ngx_memzero(&ec, sizeof(sp_exporter_conf_t));
    ec.loop = &loop;
    ec.endpoint = mcf->endpoint.len ? (const char *) mcf->endpoint.data : NULL;
    ec.headers = headers;
    ec.trusted_certificate = mcf->trusted_certificate.len
                             ? (const char *) mcf->trusted_certificate.data
                             : NULL;
    ec.trusted_certificate_pem =
        mcf->trusted_certificate_pem.len
        ? (const char *) mcf->trusted_certificate_pem.data : NULL;
    ec.trusted_certificate_len = mcf->trusted_certificate_pem.len;
    ec.traces_url = mcf->traces_url.len ? (const char *) mcf->traces_url.data
                                        : NULL;
    ec.protocol = (sp_export_protocol_t) mcf->protocol;
    ec.gzip = (int) mcf->compression;
    ec.interval_ms = mcf->interval;
    ec.batch_size = mcf->batch_size;
    ec.batch_count = mcf->batch_count;
    ec.connect_timeout_ms = mcf->connect_timeout;
    ec.timeout_ms = mcf->timeout;
    ec.shutdown_timeout_ms = mcf->shutdown_timeout;
    ec.resource = &res;
    ec.log.fn = ngx_http_spanprof_log;
    ec.tick = sp_control_tick;          /* the control API, if attached */
    ec.profiling = (int) mcf->profiling_used;
    ec.profiles_interval_ms = mcf->profiling_interval;
    ec.profiles_max_size = mcf->profiling_max_size;
    ec.profiles_max_samples = mcf->profiling_max_samples;
    ec.pyroscope_url = mcf->pyroscope.len ? (const char *) mcf->pyroscope.data
                                          : NULL;
    if (mcf->profiling_redact != NULL) {
        /* NULL-ended for common/. */
        redact = ngx_pcalloc(cycle->pool, (mcf->profiling_redact->nelts + 1)
                                          * sizeof(char *));
        if (redact == NULL) {
            sp_resource_free(&res);
            return NGX_ERROR;
        }
        ngx_memcpy(redact, mcf->profiling_redact->elts,
                   mcf->profiling_redact->nelts * sizeof(char *));
        ec.profiling_redact = redact;
    }
    ngx_http_spanprof_files_worker(mcf, &ec, &files);

    ngx_http_spanprof_api_init_process(mcf);
    ngx_http_spanprof_exporter = sp_exporter_start(&ec, err, sizeof(err));

    /* External profilers read the same resource and request labels. */
    if (ngx_http_spanprof_exporter != NULL && mcf->profiling_used
        && sp_process_context_publish(&res, err, sizeof(err)) != 0)
    {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "spanprof: process context not published: %s", err);
    }
    sp_resource_free(&res);

    if (ngx_http_spanprof_exporter == NULL) {
        /* Requests are still served, just not traced or profiled. */
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "spanprof: exporter not started: %s", err);
        return NGX_OK;
    }
    ngx_http_spanprof_export_spans = mcf->endpoint.len != 0
                                     || mcf->traces_url.len != 0;

    if (mcf->profiling_used) {
        if (ngx_http_spanprof_profiling_start(cycle, mcf) != NGX_OK) {
            return NGX_ERROR;
        }
        /* A worker started while the API paused profiling (or set another
         * rate) follows it from its first sample. */
        sp_control_worker_apply();
    }

    return NGX_OK;
}


static void
ngx_http_spanprof_exit_process(ngx_cycle_t *cycle)
{
    sp_exporter_t  *e = ngx_http_spanprof_exporter;

    /* The sampler first, so the last profile is complete when the
     * exporter flushes it. */
    ngx_http_spanprof_profiling_stop(cycle);

    ngx_http_spanprof_exporter = NULL;
    ngx_http_spanprof_api_exit_process();
    if (e != NULL) {
        sp_exporter_stop(e);
        ngx_http_spanprof_exporter_loop_done();
    }
    sp_process_context_drop();
}
