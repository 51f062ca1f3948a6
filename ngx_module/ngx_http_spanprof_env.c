/*
 * The OpenTelemetry SDK's OTEL_* variables (common/export/otel_env.h) as
 * defaults of what the otel_* directives leave unset, read by the master
 * while it parses the configuration (at start and at each reload, from its
 * own environment: the one it was started with). nginx's `env NAME=value;`
 * (main context, before http) is honoured as the worker would see it: its
 * value wins over the master's environment. Workers get the values through
 * the configuration, so no `env OTEL_...;` is needed to pass them on.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/base/url_mask.h"
#include "common/export/endpoint.h"
#include "common/export/otel_env.h"
#include "common/trace/resource.h"


/* getenv, with `env NAME=value;` directives first. */
static const char *
ngx_http_spanprof_getenv(void *ud, const char *name)
{
    size_t            len = ngx_strlen(name);
    ngx_str_t        *var;
    ngx_uint_t        i;
    ngx_core_conf_t  *ccf = ud;

    /* nginx keeps "NAME=value" with len the name's (ngx_set_env). */
    var = ccf->env.elts;
    for (i = 0; i < ccf->env.nelts; i++) {
        if (var[i].len == len && var[i].data[len] == '='
            && ngx_strncmp(var[i].data, name, len) == 0)
        {
            return (const char *) var[i].data + len + 1;  /* NUL-ended */
        }
    }
    return getenv(name);
}


static ngx_int_t
ngx_http_spanprof_env_str(ngx_conf_t *cf, ngx_str_t *to, const char *from)
{
    to->len = ngx_strlen(from);
    to->data = ngx_pnalloc(cf->pool, to->len + 1);
    if (to->data == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(to->data, from, to->len + 1);
    return NGX_OK;
}


/* The headers named by an exporter `header` directive win. */
static ngx_int_t
ngx_http_spanprof_env_headers(ngx_conf_t *cf,
    ngx_http_spanprof_main_conf_t *mcf, sp_otel_env_t *env)
{
    size_t       klen, vlen;
    u_char      *p, **h, **have;
    ngx_uint_t   i, j, n;

    n = mcf->headers ? mcf->headers->nelts : 0;
    for (i = 0; i < env->nheaders; i++) {
        klen = ngx_strlen(env->headers[i].key);
        have = mcf->headers ? mcf->headers->elts : NULL;
        for (j = 0; j < n; j++) {
            if (ngx_strncasecmp(have[j], (u_char *) env->headers[i].key, klen)
                    == 0
                && have[j][klen] == ':')
            {
                break;
            }
        }
        if (j < n) {
            continue;
        }
        if (mcf->headers == NULL) {
            mcf->headers = ngx_array_create(cf->pool, 4, sizeof(u_char *));
            if (mcf->headers == NULL) {
                return NGX_ERROR;
            }
        }
        vlen = ngx_strlen(env->headers[i].value);
        h = ngx_array_push(mcf->headers);
        p = ngx_pnalloc(cf->pool, klen + 2 + vlen + 1);
        if (h == NULL || p == NULL) {
            return NGX_ERROR;
        }
        *h = p;
        *ngx_sprintf(p, "%s: %s", env->headers[i].key, env->headers[i].value)
            = '\0';
    }
    return NGX_OK;
}


/* The otel_resource_attr keys (and otel_service_name) win. */
static char *
ngx_http_spanprof_env_resource(ngx_conf_t *cf,
    ngx_http_spanprof_main_conf_t *mcf, sp_otel_env_t *env)
{
    ngx_uint_t     i, j, n;
    ngx_keyval_t  *kv, *have;

    n = mcf->resource_attrs ? mcf->resource_attrs->nelts : 0;
    have = mcf->resource_attrs ? mcf->resource_attrs->elts : NULL;

    if (mcf->service_name.len == 0 && env->service_name != NULL) {
        for (j = 0; j < n; j++) {
            if (ngx_strcmp(have[j].key.data, "service.name") == 0) {
                break;
            }
        }
        if (j == n && ngx_http_spanprof_env_str(cf, &mcf->service_name,
                                                env->service_name) != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }
    }

    for (i = 0; i < env->nresource; i++) {
        for (j = 0; j < n; j++) {
            if (ngx_strcmp(have[j].key.data, env->resource[i].key) == 0) {
                break;
            }
        }
        if (j < n) {
            continue;
        }
        if (mcf->resource_attrs == NULL) {
            mcf->resource_attrs = ngx_array_create(cf->pool, 4,
                                                   sizeof(ngx_keyval_t));
            if (mcf->resource_attrs == NULL) {
                return NGX_CONF_ERROR;
            }
        }
        if (mcf->resource_attrs->nelts >= SP_RESOURCE_MAX_ATTRS - 16) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "spanprof: otel_resource_attr and "
                          "OTEL_RESOURCE_ATTRIBUTES give more than 48 "
                          "attributes");
            return NGX_CONF_ERROR;
        }
        kv = ngx_array_push(mcf->resource_attrs);
        if (kv == NULL
            || ngx_http_spanprof_env_str(cf, &kv->key, env->resource[i].key)
               != NGX_OK
            || ngx_http_spanprof_env_str(cf, &kv->value,
                                         env->resource[i].value) != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }
        have = mcf->resource_attrs->elts;     /* may have moved */
    }
    return NGX_CONF_OK;
}


/* The endpoint: the directive's, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * (the traces URL as is over HTTP, the endpoint under grpc), else
 * OTEL_EXPORTER_OTLP_ENDPOINT. A path under grpc is refused: the service
 * path is fixed, and a path there most likely means an OTLP/HTTP base
 * given without "protocol http/protobuf". */
static char *
ngx_http_spanprof_env_endpoint(ngx_conf_t *cf,
    ngx_http_spanprof_main_conf_t *mcf, sp_otel_env_t *env)
{
    int          grpc = mcf->protocol == SP_EXPORT_GRPC;
    char         masked[512];
    const char  *from = NULL;

    if (mcf->endpoint.len == 0) {
        if (env->traces_endpoint != NULL) {
            from = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
            if (grpc || env->endpoint == NULL) {
                /* Over HTTP with no base: the exporter derives one. */
                if (ngx_http_spanprof_env_str(cf, grpc ? &mcf->endpoint
                                                       : &mcf->traces_url,
                                              env->traces_endpoint)
                    != NGX_OK)
                {
                    return NGX_CONF_ERROR;
                }
            } else if (ngx_http_spanprof_env_str(cf, &mcf->traces_url,
                                                 env->traces_endpoint)
                       != NGX_OK
                       || ngx_http_spanprof_env_str(cf, &mcf->endpoint,
                                                    env->endpoint) != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }
        } else if (env->endpoint != NULL) {
            from = "OTEL_EXPORTER_OTLP_ENDPOINT";
            if (ngx_http_spanprof_env_str(cf, &mcf->endpoint, env->endpoint)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }
        }
    }

    if (mcf->endpoint.len == 0 && mcf->traces_url.len == 0) {
        if (mcf->exporter_set) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "\"otel_exporter\" in %V:%ui has no \"endpoint\" "
                          "and neither OTEL_EXPORTER_OTLP_ENDPOINT nor "
                          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set",
                          &mcf->exporter_file, mcf->exporter_line);
            return NGX_CONF_ERROR;
        }
        return NGX_CONF_OK;
    }

    if (grpc && mcf->endpoint.len
        && ngx_strncmp(mcf->endpoint.data, "file://", 7) != 0
        && sp_endpoint_has_path((const char *) mcf->endpoint.data))
    {
        sp_url_mask((const char *) mcf->endpoint.data, masked,
                    sizeof(masked));
        if (from != NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "%s \"%s\" has a path, which OTLP/gRPC does not "
                          "use: remove it, or set "
                          "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
                          from, masked);
        } else {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "\"endpoint\" \"%s\" in \"otel_exporter\" in "
                          "%V:%ui has a path, which OTLP/gRPC (the default "
                          "protocol) does not use: remove it, or add "
                          "\"protocol http/protobuf;\"",
                          masked, &mcf->exporter_file, mcf->exporter_line);
        }
        return NGX_CONF_ERROR;
    }

    /* Tracing works with no otel_exporter block at all. */
    mcf->exporter_set = 1;
    return NGX_CONF_OK;
}


char *
ngx_http_spanprof_env_conf(ngx_conf_t *cf, ngx_http_spanprof_main_conf_t *mcf)
{
    char             err[256], *rv = NGX_CONF_ERROR;
    sp_otel_env_t    env;
    ngx_core_conf_t  *ccf;

    if (ngx_process == NGX_PROCESS_SIGNALLER) {
        /* "nginx -s reload" parses the configuration only for the pid
         * file, maybe in a shell without the variables: the master checks
         * them, in its own environment, when it reloads. */
        mcf->exporter_set = 1;
        return NGX_CONF_OK;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cf->cycle->conf_ctx,
                                           ngx_core_module);
    if (sp_otel_env_read(&env, ngx_http_spanprof_getenv, ccf, err,
                         sizeof(err)) != 0)
    {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "spanprof: invalid environment variable %s", err);
        goto done;
    }

    if (mcf->protocol == NGX_CONF_UNSET_UINT) {
        mcf->protocol = env.protocol_set ? env.protocol : SP_EXPORT_GRPC;
    }
    if (mcf->compression == NGX_CONF_UNSET_UINT && env.compression >= 0) {
        mcf->compression = (ngx_uint_t) env.compression;
    }
    if (mcf->timeout == NGX_CONF_UNSET_MSEC && env.timeout_ms > 0) {
        mcf->timeout = (ngx_msec_t) env.timeout_ms;
    }

    if (ngx_http_spanprof_env_endpoint(cf, mcf, &env) != NGX_CONF_OK
        || ngx_http_spanprof_env_resource(cf, mcf, &env) != NGX_CONF_OK
        || ngx_http_spanprof_env_headers(cf, mcf, &env) != NGX_OK)
    {
        goto done;
    }
    rv = NGX_CONF_OK;

done:
    sp_otel_env_free(&env);
    return rv;
}
