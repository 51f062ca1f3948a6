/*
 * The OpenTelemetry SDK's OTEL_* variables (common/export/otel_env.h) as
 * defaults of what the Otel* directives leave unset, read by the parent at
 * check_config (at start and at each restart or graceful restart, from its
 * own environment: the one it was started with; apachectl adds
 * /etc/apache2/envvars). The children get the values through the
 * configuration. mod_env's SetEnv/PassEnv are per request and play no
 * part here.
 */

#include <string.h>
#include <strings.h>

#include "apr_strings.h"

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"

#include "mod_spanprof.h"
#include "common/base/url_mask.h"
#include "common/export/endpoint.h"
#include "common/export/otel_env.h"
#include "common/trace/resource.h"


/* The headers named by OtelExporterHeader win. */
static void
spanprof_env_headers(apr_pool_t *p, spanprof_srv_conf_t *sc,
    sp_otel_env_t *env)
{
    size_t        i, klen;
    int           j, n;
    const char  **have;

    n = sc->headers ? sc->headers->nelts : 0;
    for (i = 0; i < env->nheaders; i++) {
        klen = strlen(env->headers[i].key);
        have = sc->headers ? (const char **) sc->headers->elts : NULL;
        for (j = 0; j < n; j++) {
            if (strncasecmp(have[j], env->headers[i].key, klen) == 0
                && have[j][klen] == ':')
            {
                break;
            }
        }
        if (j < n) {
            continue;
        }
        if (sc->headers == NULL) {
            sc->headers = apr_array_make(p, 4, sizeof(char *));
        }
        *(const char **) apr_array_push(sc->headers) =
            apr_pstrcat(p, env->headers[i].key, ": ", env->headers[i].value,
                        NULL);
    }
}


/* The OtelResourceAttr keys (and OtelServiceName) win. */
static int
spanprof_env_resource(apr_pool_t *p, spanprof_srv_conf_t *sc,
    sp_otel_env_t *env)
{
    size_t          i;
    int             j, n;
    spanprof_kv_t  *kv, *have;

    n = sc->resource_attrs ? sc->resource_attrs->nelts : 0;
    have = sc->resource_attrs ? (spanprof_kv_t *) sc->resource_attrs->elts
                              : NULL;
    if (sc->service_name == NULL && env->service_name != NULL) {
        for (j = 0; j < n; j++) {
            if (strcmp(have[j].key, "service.name") == 0) {
                break;
            }
        }
        if (j == n) {
            sc->service_name = apr_pstrdup(p, env->service_name);
        }
    }
    for (i = 0; i < env->nresource; i++) {
        for (j = 0; j < n; j++) {
            if (strcmp(have[j].key, env->resource[i].key) == 0) {
                break;
            }
        }
        if (j < n) {
            continue;
        }
        if (sc->resource_attrs == NULL) {
            sc->resource_attrs = apr_array_make(p, 4, sizeof(spanprof_kv_t));
        }
        if (sc->resource_attrs->nelts >= SP_RESOURCE_MAX_ATTRS - 16) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                         "spanprof: OtelResourceAttr and "
                         "OTEL_RESOURCE_ATTRIBUTES give more than 48 "
                         "attributes");
            return !OK;
        }
        kv = apr_array_push(sc->resource_attrs);
        kv->key = apr_pstrdup(p, env->resource[i].key);
        kv->value = apr_pstrdup(p, env->resource[i].value);
        have = (spanprof_kv_t *) sc->resource_attrs->elts;
    }
    return OK;
}


/* The endpoint: OtelExporterEndpoint, else OTEL_EXPORTER_OTLP_TRACES_
 * ENDPOINT (the traces URL as is over HTTP, the endpoint under grpc), else
 * OTEL_EXPORTER_OTLP_ENDPOINT. A path under grpc is refused: the service
 * path is fixed, and such a path most likely is an OTLP/HTTP base given
 * without OtelExporterProtocol http/protobuf. */
static int
spanprof_env_endpoint(apr_pool_t *p, spanprof_srv_conf_t *sc,
    sp_otel_env_t *env)
{
    int          grpc = sc->protocol == SP_EXPORT_GRPC;
    char         masked[512];
    const char  *from = NULL;

    if (sc->endpoint == NULL) {
        if (env->traces_endpoint != NULL) {
            from = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
            if (grpc) {
                sc->endpoint = apr_pstrdup(p, env->traces_endpoint);
            } else {
                /* No base: the exporter derives one from the URL. */
                sc->traces_url = apr_pstrdup(p, env->traces_endpoint);
                sc->endpoint = env->endpoint != NULL
                               ? apr_pstrdup(p, env->endpoint) : NULL;
            }
        } else if (env->endpoint != NULL) {
            from = "OTEL_EXPORTER_OTLP_ENDPOINT";
            sc->endpoint = apr_pstrdup(p, env->endpoint);
        }
    }

    if (grpc && sc->endpoint != NULL
        && strncmp(sc->endpoint, "file://", 7) != 0
        && sp_endpoint_has_path(sc->endpoint))
    {
        sp_url_mask(sc->endpoint, masked, sizeof(masked));
        if (from != NULL) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                         "spanprof: %s \"%s\" has a path, which OTLP/gRPC "
                         "does not use: remove it, or set "
                         "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
                         from, masked);
        } else {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                         "spanprof: OtelExporterEndpoint \"%s\" in %s:%d has "
                         "a path, which OTLP/gRPC (the default protocol) "
                         "does not use: remove it, or add "
                         "\"OtelExporterProtocol http/protobuf\"",
                         masked, sc->endpoint_file, sc->endpoint_line);
        }
        return !OK;
    }
    return OK;
}


int
spanprof_env_conf(apr_pool_t *p, spanprof_srv_conf_t *sc)
{
    int            rc = !OK;
    char           err[256];
    sp_otel_env_t  env;

    if (sp_otel_env_read(&env, sp_otel_env_getenv, NULL, err, sizeof(err))
        != 0)
    {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     "spanprof: invalid environment variable %s", err);
        goto done;
    }

    if (sc->protocol == SPANPROF_UNSET) {
        sc->protocol = env.protocol_set ? (int) env.protocol
                                        : (int) SP_EXPORT_GRPC;
    }
    if (sc->compression == SPANPROF_UNSET && env.compression >= 0) {
        sc->compression = env.compression;
    }
    if (sc->timeout_ms == SPANPROF_UNSET && env.timeout_ms > 0) {
        sc->timeout_ms = env.timeout_ms;
    }
    if (spanprof_env_endpoint(p, sc, &env) != OK
        || spanprof_env_resource(p, sc, &env) != OK)
    {
        goto done;
    }
    spanprof_env_headers(p, sc, &env);
    rc = OK;

done:
    sp_otel_env_free(&env);
    return rc;
}
