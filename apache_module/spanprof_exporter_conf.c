/*
 * The exporter's settings from the main server's directives: read by a
 * child's exporter (child_init) and by prefork's exporter process
 * (spanprof_relay.c), which must send the same way.
 */

#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"

#include "mod_spanprof.h"
#include "common/profile/profile_truncate.h"

APLOG_USE_MODULE(spanprof);


static void
spanprof_exporter_log(void *ud, int level, const char *msg)
{
    static const int  levels[] = {
        APLOG_ERR, APLOG_WARNING, APLOG_INFO, APLOG_DEBUG
    };

    ap_log_error(APLOG_MARK, levels[level & 3], 0, spanprof_main_server,
                 "%s", msg);
}


int
spanprof_exporter_conf(apr_pool_t *p, server_rec *s, spanprof_srv_conf_t *sc,
    sp_exporter_conf_t *ec, sp_resource_t *res)
{
    int              i, n;
    const char     **headers, **redact, *service;
    spanprof_kv_t   *kv;

    service = sc->service_name;
    if (sp_resource_init(res, "apache2", service, NULL) != 0) {
        ap_log_error(APLOG_MARK, APLOG_ALERT, 0, s,
                     "spanprof: exporter not started: out of memory");
        return -1;
    }
    kv = sc->resource_attrs ? (spanprof_kv_t *) sc->resource_attrs->elts
                            : NULL;
    n = sc->resource_attrs ? sc->resource_attrs->nelts : 0;
    for (i = 0; i < n; i++) {
        if (service != NULL && strcmp(kv[i].key, "service.name") == 0) {
            continue;   /* OtelServiceName wins */
        }
        if (sp_resource_set(res, kv[i].key, kv[i].value) != 0) {
            sp_resource_free(res);
            ap_log_error(APLOG_MARK, APLOG_ALERT, 0, s,
                         "spanprof: exporter not started: out of memory");
            return -1;
        }
    }

    n = sc->headers ? sc->headers->nelts : 0;
    headers = apr_pcalloc(p, (n + 1) * sizeof(char *));
    for (i = 0; i < n; i++) {
        headers[i] = ((const char **) sc->headers->elts)[i];
    }

    memset(ec, 0, sizeof(*ec));
    ec->endpoint = sc->endpoint;
    ec->headers = headers;
    ec->trusted_certificate = sc->trusted_certificate;
    ec->trusted_certificate_pem = sc->trusted_certificate_pem;
    ec->trusted_certificate_len = sc->trusted_certificate_len;
    ec->traces_url = sc->traces_url;
    ec->protocol = sc->protocol == SPANPROF_UNSET
                   ? SP_EXPORT_GRPC      /* as nginx-otel exports */
                   : (sp_export_protocol_t) sc->protocol;
    ec->gzip = sc->compression == 1;
    ec->interval_ms = sc->interval_ms != SPANPROF_UNSET ? sc->interval_ms
                                                        : 5000;
    ec->batch_size = sc->batch_size != SPANPROF_UNSET ? sc->batch_size : 512;
    ec->batch_count = sc->batch_count != SPANPROF_UNSET ? sc->batch_count : 4;
    ec->connect_timeout_ms = sc->connect_timeout_ms != SPANPROF_UNSET
                             ? sc->connect_timeout_ms : 2000;
    ec->timeout_ms = sc->timeout_ms != SPANPROF_UNSET ? sc->timeout_ms
                                                      : 10000;
    ec->shutdown_timeout_ms = sc->shutdown_timeout_ms != SPANPROF_UNSET
                              ? sc->shutdown_timeout_ms : 2000;
    ec->resource = res;
    ec->log.fn = spanprof_exporter_log;
    ec->profiling = spanprof_globals.profiling_used;
    ec->profiles_interval_ms = sc->profiling_interval_ms != SPANPROF_UNSET
                               ? sc->profiling_interval_ms : 10000;
    ec->pyroscope_url = sc->pyroscope;
    ec->profiles_max_size = sc->profiling_max_size != SPANPROF_UNSET
                            ? (size_t) sc->profiling_max_size
                            : SP_PROFILE_MAX_SIZE_DEFAULT;
    ec->profiles_max_samples = sc->profiling_max_samples != SPANPROF_UNSET
                               ? (size_t) sc->profiling_max_samples
                               : SP_PROFILE_MAX_SAMPLES_DEFAULT;
    if (sc->profiling_redact != NULL) {
        /* NULL-ended for common/. */
        n = sc->profiling_redact->nelts;
        redact = apr_pcalloc(p, (n + 1) * sizeof(char *));
        for (i = 0; i < n; i++) {
            redact[i] = ((const char **) sc->profiling_redact->elts)[i];
        }
        ec->profiling_redact = redact;
    }
    spanprof_files_child(ec);
    return 0;
}
