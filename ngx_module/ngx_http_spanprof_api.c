/*
 * otel_api [write=on|off]: the control and status API in a location, as
 * stub_status is (nginx's own allow/deny/auth_basic protect it). The
 * control state and the workers' status slots live in a shared zone the
 * module makes; the workers publish and apply from their exporter's side
 * (common/control/control_tick.h), never on the request path.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdlib.h>

#include "ngx_http_spanprof_module.h"
#include "common/control/api_request.h"
#include "common/control/control_body.h"
#include "common/control/control_tick.h"


static ngx_int_t ngx_http_spanprof_api_init_zone(ngx_shm_zone_t *zone,
    void *data);
static ngx_int_t ngx_http_spanprof_api_handler(ngx_http_request_t *r);
static void ngx_http_spanprof_api_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_spanprof_api_respond(ngx_http_request_t *r,
    const char *body, size_t len);


static ngx_str_t  ngx_http_spanprof_api_zone_name =
    ngx_string("spanprof_api");


char *
ngx_http_spanprof_api(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_loc_conf_t  *lcf = conf;

    size_t                          size;
    ngx_str_t                      *value;
    ngx_http_core_loc_conf_t       *clcf;
    ngx_http_spanprof_main_conf_t  *mcf;

    if (lcf->api) {
        return "is duplicate";
    }
    value = cf->args->elts;
    if (cf->args->nelts == 2) {
        if (ngx_strcmp(value[1].data, "write=on") == 0) {
            lcf->api_write = 1;
        } else if (ngx_strcmp(value[1].data, "write=off") != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": expected "
                               "\"write=on\" or \"write=off\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }
    lcf->api = 1;

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_spanprof_module);
    if (mcf->api_zone == NULL) {
        /* The control block, and room for the slab pool's own pages. */
        size = ngx_align(sp_control_shm_size(), ngx_pagesize)
               + 8 * ngx_pagesize;
        mcf->api_zone = ngx_shared_memory_add(cf,
                                              &ngx_http_spanprof_api_zone_name,
                                              size, &ngx_http_spanprof_module);
        if (mcf->api_zone == NULL) {
            return NGX_CONF_ERROR;
        }
        mcf->api_zone->init = ngx_http_spanprof_api_init_zone;
        mcf->api_zone->data = mcf;
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_spanprof_api_handler;

    return NGX_CONF_OK;
}


/* In the master, once the configuration is read: the configured state.
 * A reload that keeps the zone (same size) gets the previous block in
 * data: its wanted state goes back to the new configuration. */
static ngx_int_t
ngx_http_spanprof_api_init_zone(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_spanprof_main_conf_t  *mcf = zone->data;

    void              *mem;
    ngx_slab_pool_t   *shpool;
    sp_control_shm_t  *ctl;

    if (data != NULL) {
        ctl = sp_control_shm_reset(data, (int) mcf->profiling_used,
                                   (unsigned) mcf->profiling_rate);
        if (ctl != NULL) {
            sp_control_shm_configure_types(ctl,
                (unsigned) mcf->profiling_types,
                (unsigned) mcf->profiling_wall_rate);
            zone->data = ctl;
            return NGX_OK;
        }
    }

    shpool = (ngx_slab_pool_t *) zone->shm.addr;
    mem = ngx_slab_alloc(shpool, sp_control_shm_size());
    if (mem == NULL) {
        return NGX_ERROR;
    }
    ctl = sp_control_shm_init(mem, (int) mcf->profiling_used,
                              (unsigned) mcf->profiling_rate);
    sp_control_shm_configure_types(ctl, (unsigned) mcf->profiling_types,
                                   (unsigned) mcf->profiling_wall_rate);
    zone->data = ctl;
    return NGX_OK;
}


/* The worker's status slot: before its exporter starts, so the first
 * tick publishes. */
void
ngx_http_spanprof_api_init_process(ngx_http_spanprof_main_conf_t *mcf)
{
    if (mcf->api_zone != NULL && mcf->api_zone->data != NULL) {
        if (sp_control_worker_attach(mcf->api_zone->data) != 0) {
            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "spanprof: no free status slot for this worker: "
                          "its counters are not in the API");
        }
    }
}


void
ngx_http_spanprof_api_exit_process(void)
{
    sp_control_worker_detach();
}


static ngx_int_t
ngx_http_spanprof_api_handler(ngx_http_request_t *r)
{
    ngx_int_t                      rc;
    ngx_http_spanprof_loc_conf_t  *lcf;

    if (r != r->main) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);

    if ((r->method & (NGX_HTTP_POST|NGX_HTTP_PUT)) && lcf->api_write) {
        if (r->headers_in.content_length_n > SP_CONTROL_BODY_MAX) {
            rc = ngx_http_discard_request_body(r);
            if (rc != NGX_OK) {
                return rc;
            }
            return ngx_http_spanprof_api_respond(r, "", SP_CONTROL_BODY_MAX
                                                        + 1);
        }
        /* Small bodies stay in one memory buffer. */
        r->request_body_in_single_buf = 1;
        rc = ngx_http_read_client_request_body(r, ngx_http_spanprof_api_body);
        if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
            return rc;
        }
        return NGX_DONE;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }
    return ngx_http_spanprof_api_respond(r, NULL, 0);
}


static void
ngx_http_spanprof_api_body(ngx_http_request_t *r)
{
    u_char       *p;
    size_t        len = 0;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;
    u_char        body[SP_CONTROL_BODY_MAX];

    if (r->request_body == NULL || r->request_body->temp_file != NULL) {
        /* Written to a file: larger than any valid body. */
        ngx_http_finalize_request(r,
            ngx_http_spanprof_api_respond(r, "", SP_CONTROL_BODY_MAX + 1));
        return;
    }
    p = body;
    for (cl = r->request_body->bufs; cl != NULL; cl = cl->next) {
        b = cl->buf;
        if (b->in_file || len + (size_t) (b->last - b->pos)
                          > SP_CONTROL_BODY_MAX)
        {
            len = SP_CONTROL_BODY_MAX + 1;
            break;
        }
        if (b->last == b->pos) {
            continue;   /* an empty buffer's pos may be NULL */
        }
        p = ngx_cpymem(p, b->pos, b->last - b->pos);
        len += b->last - b->pos;
    }
    ngx_http_finalize_request(r,
        ngx_http_spanprof_api_respond(r, len > SP_CONTROL_BODY_MAX
                                         ? "" : (const char *) body, len));
}


static char *
ngx_http_spanprof_api_cstr(ngx_pool_t *pool, ngx_str_t *s)
{
    u_char  *p;

    if (s->len == 0) {
        return NULL;
    }
    p = ngx_pnalloc(pool, s->len + 1);
    if (p != NULL) {
        *ngx_cpymem(p, s->data, s->len) = '\0';
    }
    return (char *) p;
}


static const char *
ngx_http_spanprof_api_accept(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    for (part = &r->headers_in.headers.part; part; part = part->next) {
        h = part->elts;
        for (i = 0; i < part->nelts; i++) {
            if (h[i].key.len == 6
                && ngx_strncasecmp(h[i].key.data, (u_char *) "Accept", 6)
                   == 0)
            {
                return ngx_http_spanprof_api_cstr(r->pool, &h[i].value);
            }
        }
    }
    return NULL;
}


/* body NULL: no body read; len past SP_CONTROL_BODY_MAX: too large. */
static ngx_int_t
ngx_http_spanprof_api_respond(ngx_http_request_t *r, const char *body,
    size_t len)
{
    char                           *method;
    char                            ep[1024], py[1024], tu[1024];
    ngx_int_t                       rc;
    ngx_buf_t                      *b;
    ngx_chain_t                     out;
    ngx_table_elt_t                *h;
    sp_api_info_t                   info;
    sp_api_request_t                req;
    sp_api_response_t               resp;
    ngx_http_spanprof_loc_conf_t   *lcf;
    ngx_http_spanprof_main_conf_t  *mcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);
    mcf = ngx_http_get_module_main_conf(r, ngx_http_spanprof_module);
    if (mcf->api_zone == NULL || mcf->api_zone->data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memzero(&info, sizeof(info));
    info.server = "nginx";
    info.endpoint = mcf->endpoint.len
                    ? sp_api_public_url((char *) mcf->endpoint.data, ep,
                                        sizeof(ep))
                    : NULL;
    info.traces_url = mcf->traces_url.len
                      ? sp_api_public_url((char *) mcf->traces_url.data, tu,
                                          sizeof(tu))
                      : NULL;
    info.protocol = sp_export_protocol_name(
                        (sp_export_protocol_t) mcf->protocol);
    info.pyroscope = mcf->pyroscope.len
                     ? sp_api_public_url((char *) mcf->pyroscope.data, py,
                                         sizeof(py))
                     : NULL;
    info.service_name = ngx_http_spanprof_api_cstr(r->pool,
                                                   &mcf->service_name);
    info.profiling = (int) mcf->profiling_used;
    info.profiling_rate = (unsigned) mcf->profiling_rate;
    info.profiling_interval_ms = (unsigned) mcf->profiling_interval;
    info.profiling_max_depth = (unsigned) mcf->profiling_max_depth;
    info.export_interval_ms = (unsigned) mcf->interval;
    info.batch_size = (unsigned) mcf->batch_size;
    info.batch_count = (unsigned) mcf->batch_count;
    info.headers = mcf->headers ? (unsigned) mcf->headers->nelts : 0;
    info.gzip = (int) mcf->compression;
    info.write = (int) lcf->api_write;

    method = ngx_http_spanprof_api_cstr(r->pool, &r->method_name);
    if (method == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    req.method = method;
    req.query = ngx_http_spanprof_api_cstr(r->pool, &r->args);
    req.accept = ngx_http_spanprof_api_accept(r);
    req.body = body;
    req.body_len = len;

    if (sp_api_handle(&req, &info, mcf->api_zone->data, &resp) != 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = ngx_create_temp_buf(r->pool, resp.body_len ? resp.body_len : 1);
    if (b == NULL) {
        free(resp.body);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    b->last = ngx_cpymem(b->last, resp.body, resp.body_len);
    free(resp.body);

    r->headers_out.status = resp.status;
    r->headers_out.content_type.len = ngx_strlen(resp.content_type);
    r->headers_out.content_type.data = (u_char *) resp.content_type;
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_length_n = b->last - b->pos;
    if (resp.allow != NULL) {
        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        h->hash = 1;
        ngx_str_set(&h->key, "Allow");
        h->value.data = (u_char *) resp.allow;
        h->value.len = ngx_strlen(resp.allow);
    }
    /* Status changes from one request to the next. */
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "Cache-Control");
    ngx_str_set(&h->value, "no-store");

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}
