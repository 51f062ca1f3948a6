/*
 * The control and status API for Apache: SetHandler spanprof-api in a
 * <Location> (httpd's own Require/auth protect it), OtelApiWrite On|Off
 * (Off by default: read-only). The parent makes the shared memory at
 * post_config (anonymous, in pconf: a graceful restart makes a new one,
 * in the configured state, for the new children); each child attaches to
 * a status slot before its exporter starts and the exporter's thread
 * publishes and applies (common/control/control_tick.h).
 */

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "apr_shm.h"
#include "apr_strings.h"

#include <stdlib.h>

#include "mod_spanprof.h"
#include "common/profile/sampler.h"
#include "common/control/api_request.h"
#include "common/control/control_body.h"
#include "common/control/control_tick.h"

#define SPANPROF_API_HANDLER  "spanprof-api"

/* Set in the parent at post_config, inherited by the children. */
static sp_control_shm_t     *spanprof_api_ctl;
static spanprof_srv_conf_t  *spanprof_api_sc;


const char *
spanprof_set_api_write(cmd_parms *cmd, void *conf, int on)
{
    spanprof_dir_conf_t  *dc = conf;

    dc->api_write = on;
    return NULL;
}


static int
spanprof_api_post_config(apr_pool_t *pconf, apr_pool_t *plog,
    apr_pool_t *ptemp, server_rec *s)
{
    apr_shm_t     *shm;
    apr_status_t   rv;
    int            rate;

    spanprof_api_sc = ap_get_module_config(s->module_config, &spanprof_module);
    rate = spanprof_api_sc->profiling_rate != SPANPROF_UNSET
           ? spanprof_api_sc->profiling_rate : 100;

    rv = apr_shm_create(&shm, sp_control_shm_size(), NULL, pconf);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s, "spanprof: cannot make "
                     "the control API's shared memory: the API answers 503");
        spanprof_api_ctl = NULL;
        return OK;
    }
    spanprof_api_ctl = sp_control_shm_init(apr_shm_baseaddr_get(shm),
                                           spanprof_globals.profiling_used,
                                           (unsigned) rate);
    sp_control_shm_configure_types(spanprof_api_ctl,
        spanprof_api_sc->profiling_types
        ? (unsigned) spanprof_api_sc->profiling_types
        : SP_SAMPLER_TYPE_CPU,
        spanprof_api_sc->profiling_wall_rate != SPANPROF_UNSET
        ? (unsigned) spanprof_api_sc->profiling_wall_rate : 100);
    return OK;
}


static apr_status_t
spanprof_api_child_exit(void *data)
{
    sp_control_worker_detach();
    return APR_SUCCESS;
}


void
spanprof_api_attach(apr_pool_t *p, server_rec *s)
{
    if (spanprof_api_ctl == NULL || !spanprof_globals.used) {
        return;
    }
    if (sp_control_worker_attach(spanprof_api_ctl) != 0) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, "spanprof: no free "
                     "status slot for this child: its counters are not in "
                     "the API");
    }
    apr_pool_cleanup_register(p, NULL, spanprof_api_child_exit,
                              apr_pool_cleanup_null);
}


/* Before mod_spanprof's own child_init starts the exporter: its first
 * tick publishes. */
static void
spanprof_api_child_init(apr_pool_t *p, server_rec *s)
{
    spanprof_api_attach(p, s);
}


/* The body of a write, up to SP_CONTROL_BODY_MAX + 1 bytes (more: too
 * large, said by the parser). */
static int
spanprof_api_read_body(request_rec *r, char *buf, size_t *len)
{
    int        rc;
    long       n;
    size_t     got = 0;
    char       sink[1024];

    rc = ap_setup_client_block(r, REQUEST_CHUNKED_DECHUNK);
    if (rc != OK) {
        return rc;
    }
    if (ap_should_client_block(r)) {
        for ( ;; ) {
            if (got <= SP_CONTROL_BODY_MAX) {
                n = ap_get_client_block(r, buf + got,
                                        SP_CONTROL_BODY_MAX + 1 - got);
            } else {
                n = ap_get_client_block(r, sink, sizeof(sink));
            }
            if (n < 0) {
                return HTTP_BAD_REQUEST;
            }
            if (n == 0) {
                break;
            }
            if (got <= SP_CONTROL_BODY_MAX) {
                got += (size_t) n;
            }
        }
    }
    *len = got;
    return OK;
}


/* The API's request (its handler name checked): its 7 KiB of buffers
 * are set up only here. */
static __attribute__((noinline)) int
spanprof_api_serve(request_rec *r)
{
    int                         rc, write;
    char                        ep[1024], py[1024], tu[1024];
    char                        body[SP_CONTROL_BODY_MAX + 1];
    size_t                      len = 0;
    const spanprof_dir_conf_t  *dc;
    spanprof_srv_conf_t        *sc = spanprof_api_sc;
    sp_api_info_t               info;
    sp_api_request_t            req;
    sp_api_response_t           resp;

    if (spanprof_api_ctl == NULL || sc == NULL) {
        return HTTP_SERVICE_UNAVAILABLE;
    }
    dc = spanprof_dir_conf(r);
    write = dc->api_write == 1;

    if (write && (r->method_number == M_POST || r->method_number == M_PUT)) {
        rc = spanprof_api_read_body(r, body, &len);
        if (rc != OK) {
            return rc;
        }
    } else {
        rc = ap_discard_request_body(r);
        if (rc != OK) {
            return rc;
        }
    }

    memset(&info, 0, sizeof(info));
    info.server = "apache";
    info.endpoint = sc->endpoint != NULL
                    ? sp_api_public_url(sc->endpoint, ep, sizeof(ep)) : NULL;
    info.traces_url = sc->traces_url != NULL
                      ? sp_api_public_url(sc->traces_url, tu, sizeof(tu))
                      : NULL;
    info.protocol = sp_export_protocol_name(
                        sc->protocol == SPANPROF_UNSET
                        ? SP_EXPORT_GRPC : (sp_export_protocol_t) sc->protocol);
    info.pyroscope = sc->pyroscope != NULL
                     ? sp_api_public_url(sc->pyroscope, py, sizeof(py))
                     : NULL;
    info.service_name = sc->service_name;
    info.profiling = spanprof_globals.profiling_used;
    info.profiling_rate = sc->profiling_rate != SPANPROF_UNSET
                          ? (unsigned) sc->profiling_rate : 100;
    info.profiling_interval_ms = sc->profiling_interval_ms != SPANPROF_UNSET
                                 ? (unsigned) sc->profiling_interval_ms
                                 : 10000;
    info.profiling_max_depth = sc->profiling_max_depth != SPANPROF_UNSET
                               ? (unsigned) sc->profiling_max_depth : 64;
    info.export_interval_ms = sc->interval_ms != SPANPROF_UNSET
                              ? (unsigned) sc->interval_ms : 5000;
    info.batch_size = sc->batch_size != SPANPROF_UNSET
                      ? (unsigned) sc->batch_size : 512;
    info.batch_count = sc->batch_count != SPANPROF_UNSET
                       ? (unsigned) sc->batch_count : 4;
    info.headers = sc->headers ? (unsigned) sc->headers->nelts : 0;
    info.gzip = sc->compression == 1;
    info.write = write;

    req.method = r->method;
    req.query = r->args;
    req.accept = apr_table_get(r->headers_in, "Accept");
    req.body = body;
    req.body_len = len;

    if (sp_api_handle(&req, &info, spanprof_api_ctl, &resp) != 0) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    r->status = resp.status;
    ap_set_content_type(r, apr_pstrdup(r->pool, resp.content_type));
    if (resp.allow != NULL) {
        apr_table_setn(r->headers_out, "Allow", resp.allow);
    }
    apr_table_setn(r->headers_out, "Cache-Control", "no-store");
    ap_set_content_length(r, (apr_off_t) resp.body_len);
    if (!r->header_only) {
        ap_rwrite(resp.body, (int) resp.body_len, r);
    }
    free(resp.body);
    return OK;
}


/* Every request that reaches the handler phase asks: the handler name's
 * first byte first (a static file's handler is its content type). */
static int
spanprof_api_handler(request_rec *r)
{
    if (r->handler == NULL || r->handler[0] != 's'
        || strcmp(r->handler, SPANPROF_API_HANDLER) != 0)
    {
        return DECLINED;
    }
    return spanprof_api_serve(r);
}


void
spanprof_register_api_hooks(void)
{
    ap_hook_post_config(spanprof_api_post_config, NULL, NULL,
                        APR_HOOK_MIDDLE);
    ap_hook_child_init(spanprof_api_child_init, NULL, NULL, APR_HOOK_FIRST);
    ap_hook_handler(spanprof_api_handler, NULL, NULL, APR_HOOK_MIDDLE);
}
