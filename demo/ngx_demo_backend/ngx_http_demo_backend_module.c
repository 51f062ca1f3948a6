/*
 * spanprof demo backend: a small "pricing service" served by nginx itself,
 * so that its CPU time is spent in the profiled worker and shows up in the
 * flame graphs of its requests.
 *
 *   demo_backend prices;
 *       fast: the price of ?symbol=..., from a short random walk in
 *       demo_price_lookup() (a few microseconds of CPU).
 *   demo_backend report;
 *       slow: the most correlated pair of 400 instruments over 1500 days
 *       of returns: about 200 ms of CPU on a current x86-64 core, nine
 *       tenths of it in demo_price_report_compute(), the demo's hot
 *       function, the rest in demo_price_history_load().
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <math.h>


#define DEMO_REPORT_INSTRUMENTS  400
#define DEMO_REPORT_DAYS         1500
#define DEMO_TICKS_PER_DAY       16


typedef struct {
    ngx_uint_t   route;         /* 0 unset, 1 prices, 2 report */
} ngx_http_demo_backend_loc_conf_t;


typedef struct {
    double       correlation;
    ngx_uint_t   a, b;
} demo_report_t;


static char *ngx_http_demo_backend(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static void *ngx_http_demo_backend_create_loc_conf(ngx_conf_t *cf);


static ngx_command_t  ngx_http_demo_backend_commands[] = {

    { ngx_string("demo_backend"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_demo_backend,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_demo_backend_module_ctx = {
    NULL, NULL, NULL, NULL, NULL, NULL,
    ngx_http_demo_backend_create_loc_conf,
    NULL
};


ngx_module_t  ngx_http_demo_backend_module = {
    NGX_MODULE_V1,
    &ngx_http_demo_backend_module_ctx,
    ngx_http_demo_backend_commands,
    NGX_HTTP_MODULE,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NGX_MODULE_V1_PADDING
};


static uint64_t
demo_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}


/* A daily return between -2% and +2%. */
static double
demo_return(uint64_t *x)
{
    return ((double) (demo_next(x) >> 11) / 9007199254740992.0 - 0.5) * 0.04;
}


/* The price of a symbol today: a random walk seeded by its name. */
__attribute__((noinline)) double
demo_price_lookup(u_char *symbol, size_t len)
{
    uint64_t    x = 0x9e3779b97f4a7c15ULL;
    double      price = 100;
    ngx_uint_t  i;

    for (i = 0; i < len; i++) {
        x = (x ^ symbol[i]) * 0x100000001b3ULL;
    }
    x |= 1;
    for (i = 0; i < 2000; i++) {
        price *= 1 + demo_return(&x);
    }
    return price;
}


/*
 * The slow route's data: each instrument's daily returns, each day made of
 * DEMO_TICKS_PER_DAY simulated trades (roughly a tenth of the route's CPU).
 */
__attribute__((noinline)) void
demo_price_history_load(double *r, ngx_uint_t n, ngx_uint_t days)
{
    double      p;
    uint64_t    x = 88172645463325252ULL;
    ngx_uint_t  i, t;

    for (i = 0; i < n * days; i++) {
        p = 1;
        for (t = 0; t < DEMO_TICKS_PER_DAY; t++) {
            p *= 1 + demo_return(&x) * 0.25;
        }
        r[i] = p - 1;
    }
}


/*
 * The slow route's hot function: the correlation of every pair of
 * instruments over all days, keeping the most correlated pair.
 */
__attribute__((noinline)) void
demo_price_report_compute(const double *r, ngx_uint_t n, ngx_uint_t days,
    demo_report_t *rep)
{
    double        sab, saa, sbb, c;
    const double *a, *b;
    ngx_uint_t    i, j, d;

    rep->correlation = -2;
    rep->a = rep->b = 0;

    for (i = 0; i < n; i++) {
        a = r + i * days;
        for (j = i + 1; j < n; j++) {
            b = r + j * days;
            sab = saa = sbb = 0;
            for (d = 0; d < days; d++) {
                sab += a[d] * b[d];
                saa += a[d] * a[d];
                sbb += b[d] * b[d];
            }
            c = sab / sqrt(saa * sbb);
            if (c > rep->correlation) {
                rep->correlation = c;
                rep->a = i;
                rep->b = j;
            }
        }
    }
}


static ngx_int_t
ngx_http_demo_backend_handler(ngx_http_request_t *r)
{
    u_char                            *p;
    double                            *history;
    ngx_int_t                          rc;
    ngx_buf_t                         *buf;
    ngx_str_t                          symbol;
    ngx_chain_t                        out;
    demo_report_t                      rep;
    ngx_http_demo_backend_loc_conf_t  *lcf;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_demo_backend_module);

    buf = ngx_create_temp_buf(r->pool, 256);
    if (buf == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (lcf->route == 2) {
        history = ngx_alloc(DEMO_REPORT_INSTRUMENTS * DEMO_REPORT_DAYS
                            * sizeof(double), r->connection->log);
        if (history == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        demo_price_history_load(history, DEMO_REPORT_INSTRUMENTS,
                                DEMO_REPORT_DAYS);
        demo_price_report_compute(history, DEMO_REPORT_INSTRUMENTS,
                                  DEMO_REPORT_DAYS, &rep);
        ngx_free(history);
        p = ngx_snprintf(buf->pos, 256,
                         "{\"report\":\"correlation\",\"instruments\":%d,"
                         "\"days\":%d,\"pair\":[%ui,%ui],"
                         "\"correlation\":%.4f}\n",
                         DEMO_REPORT_INSTRUMENTS, DEMO_REPORT_DAYS,
                         rep.a, rep.b, rep.correlation);

    } else {
        if (ngx_http_arg(r, (u_char *) "symbol", 6, &symbol) != NGX_OK
            || symbol.len == 0 || symbol.len > 16)
        {
            ngx_str_set(&symbol, "ACME");
        }
        p = ngx_snprintf(buf->pos, 256, "{\"symbol\":\"%V\",\"price\":%.2f}\n",
                         &symbol, demo_price_lookup(symbol.data, symbol.len));
    }

    buf->last = p;
    buf->last_buf = (r == r->main) ? 1 : 0;
    buf->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = p - buf->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = buf;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


static void *
ngx_http_demo_backend_create_loc_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_demo_backend_loc_conf_t));
}


static char *
ngx_http_demo_backend(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_demo_backend_loc_conf_t *lcf = conf;

    ngx_str_t                 *value;
    ngx_http_core_loc_conf_t  *clcf;

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "prices") == 0) {
        lcf->route = 1;
    } else if (ngx_strcmp(value[1].data, "report") == 0) {
        lcf->route = 2;
    } else {
        return "takes \"prices\" or \"report\"";
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_demo_backend_handler;

    return NGX_CONF_OK;
}
