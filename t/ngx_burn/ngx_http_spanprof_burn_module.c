/*
 * Test-only: content handlers that use CPU in functions with known names,
 * so that the profiling tests can tell from a stack which request ran.
 *
 *   spanprof_burn alpha|beta <total ms> [slices];
 *       burns <total ms> of thread CPU time in spanprof_burn_alpha() or
 *       spanprof_burn_beta(); with slices > 1 it burns a slice, then yields
 *       to the event loop on a 1 ms timer of the connection's write event
 *       (as limit_req delays do) before the next slice.
 *   spanprof_burn_status <code>;
 *       the status burners and waiters answer with (default 200).
 *   spanprof_wait <ms>;
 *       answers after <ms> without using CPU (a slow upstream).
 *   spanprof_block <ms>;
 *       blocks the worker for <ms> in spanprof_burn_block_on_pipe(),
 *       reading a pipe that a helper thread fills after <ms> (a blocking
 *       call, for the wall-clock and off-CPU profile).
 *   spanprof_spin <iterations>;            (http, server, location)
 *       runs a register-only loop in the log phase of every request, for
 *       bench/amplification: the same fixed work beside different requests.
 *       The worker logs at exit (notice) how long the loop took on average.
 *   spanprof_alloc <KB>;
 *       allocates <KB> in 16 KB blocks in spanprof_burn_alloc(), touching
 *       and freeing each (memory profiling: alloc_space, no in-use).
 *   spanprof_leak <KB> <max KB>;
 *       allocates <KB> in 16 KB blocks in spanprof_burn_leak() and never
 *       frees them, until the worker holds <max KB> (then it allocates
 *       nothing: the leak is bounded).
 *   spanprof_burn_body <ms>;
 *       reads the request body and answers when it is all read; a request
 *       body filter of this module burns <ms> in
 *       spanprof_burn_request_body() for each buffer of it that passes
 *       (over HTTP/2, nginx runs the filters from a DATA frame).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../spin_loop.h"


typedef struct {
    ngx_uint_t   fn;            /* 0 alpha, 1 beta, 2 wait, 3 block */
    ngx_msec_t   total;
    ngx_uint_t   slices;
    ngx_uint_t   spin;          /* spanprof_spin iterations */
    ngx_uint_t   status;        /* spanprof_burn_status */
    size_t       alloc_kb;      /* spanprof_alloc, spanprof_leak */
    size_t       leak_max_kb;
    ngx_msec_t   body_ms;       /* spanprof_burn_body */
} ngx_http_spanprof_burn_loc_conf_t;


typedef struct {
    ngx_uint_t   done;
} ngx_http_spanprof_burn_ctx_t;


static char *ngx_http_spanprof_burn(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_wait(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_block(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_spanprof_alloc(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static void *ngx_http_spanprof_burn_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_spanprof_burn_merge_loc_conf(ngx_conf_t *cf,
    void *parent, void *child);
static char *ngx_http_spanprof_burn_body(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_spanprof_burn_init(ngx_conf_t *cf);
static void ngx_http_spanprof_burn_exit(ngx_cycle_t *cycle);


static ngx_command_t  ngx_http_spanprof_burn_commands[] = {

    { ngx_string("spanprof_burn"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE23,
      ngx_http_spanprof_burn,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("spanprof_wait"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_wait,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("spanprof_block"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_block,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("spanprof_alloc"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_alloc,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("spanprof_leak"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE2,
      ngx_http_spanprof_alloc,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("spanprof_burn_body"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_spanprof_burn_body,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("spanprof_burn_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_spanprof_burn_loc_conf_t, status),
      NULL },

    { ngx_string("spanprof_spin"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_spanprof_burn_loc_conf_t, spin),
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_spanprof_burn_module_ctx = {
    NULL, ngx_http_spanprof_burn_init, NULL, NULL, NULL, NULL,
    ngx_http_spanprof_burn_create_loc_conf,
    ngx_http_spanprof_burn_merge_loc_conf
};


ngx_module_t  ngx_http_spanprof_burn_module = {
    NGX_MODULE_V1,
    &ngx_http_spanprof_burn_module_ctx,
    ngx_http_spanprof_burn_commands,
    NGX_HTTP_MODULE,
    NULL, NULL, NULL, NULL, NULL,
    ngx_http_spanprof_burn_exit,
    NULL,
    NGX_MODULE_V1_PADDING
};


static ngx_http_request_body_filter_pt  ngx_http_spanprof_burn_next_body;

static volatile uint64_t  ngx_http_spanprof_burn_sink;
static uint64_t           ngx_http_spanprof_spin_ns, ngx_http_spanprof_spins;


static uint64_t
ngx_http_spanprof_cpu_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}


/* The two burners differ in name only; noinline keeps them on the stack. */
__attribute__((noinline)) void
spanprof_burn_alpha(ngx_msec_t ms)
{
    uint64_t  end = ngx_http_spanprof_cpu_ns() + ms * 1000000, x = 1;

    while (ngx_http_spanprof_cpu_ns() < end) {
        for (int i = 0; i < 5000; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        }
        ngx_http_spanprof_burn_sink = x;
    }
}


__attribute__((noinline)) void
spanprof_burn_beta(ngx_msec_t ms)
{
    uint64_t  end = ngx_http_spanprof_cpu_ns() + ms * 1000000, x = 3;

    while (ngx_http_spanprof_cpu_ns() < end) {
        for (int i = 0; i < 5000; i++) {
            x = x * 2862933555777941757ULL + 3037000493ULL;
        }
        ngx_http_spanprof_burn_sink = x;
    }
}


__attribute__((noinline)) void
spanprof_burn_request_body(ngx_msec_t ms)
{
    uint64_t  end = ngx_http_spanprof_cpu_ns() + ms * 1000000, x = 5;

    while (ngx_http_spanprof_cpu_ns() < end) {
        for (int i = 0; i < 5000; i++) {
            x = x * 3935559000370003845ULL + 2691343689449507681ULL;
        }
        ngx_http_spanprof_burn_sink = x;
    }
}


typedef struct {
    int         fd;
    ngx_msec_t  ms;
} ngx_http_spanprof_filler_t;


static void *
ngx_http_spanprof_fill_late(void *arg)
{
    ngx_http_spanprof_filler_t  f = *(ngx_http_spanprof_filler_t *) arg;

    free(arg);
    usleep((useconds_t) f.ms * 1000);
    if (write(f.fd, "x", 1) != 1) {
        /* the reader then sees end of file */
    }
    close(f.fd);
    return NULL;
}


/* Blocks the calling thread until the pipe has a byte (or is closed). */
__attribute__((noinline)) void
spanprof_burn_block_on_pipe(int fd)
{
    char     c;
    ssize_t  n;

    do {
        n = read(fd, &c, 1);
    } while (n < 0 && errno == EINTR);
    __asm__ volatile ("" ::: "memory");
}


static void
ngx_http_spanprof_block_ms(ngx_msec_t ms)
{
    int                          fds[2];
    pthread_t                    tid;
    ngx_http_spanprof_filler_t  *f;

    if (pipe(fds) != 0) {
        return;
    }
    f = malloc(sizeof(*f));
    if (f == NULL) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    f->fd = fds[1];
    f->ms = ms;
    if (pthread_create(&tid, NULL, ngx_http_spanprof_fill_late, f) != 0) {
        free(f);
        close(fds[1]);
    } else {
        pthread_detach(tid);
    }
    spanprof_burn_block_on_pipe(fds[0]);
    close(fds[0]);
}


#define SPANPROF_BLOCK  (16 * 1024)

/* Escapes every block, so the compiler keeps each malloc/free pair (and
 * calls them through the PLT: the hooks see this object's calls). */
static void *volatile  ngx_http_spanprof_alloc_last;
static size_t          ngx_http_spanprof_leaked_kb;


__attribute__((noinline, visibility("default"))) void
spanprof_burn_alloc(size_t kb)
{
    size_t  i;
    char   *p;

    for (i = 0; i < kb * 1024 / SPANPROF_BLOCK; i++) {
        p = malloc(SPANPROF_BLOCK);
        if (p == NULL) {
            return;
        }
        p[0] = (char) i;
        ngx_http_spanprof_alloc_last = p;
        free(p);
    }
}


__attribute__((noinline, visibility("default"))) void
spanprof_burn_leak(size_t kb, size_t max_kb)
{
    size_t  i;
    char   *p;

    for (i = 0; i < kb * 1024 / SPANPROF_BLOCK; i++) {
        if (ngx_http_spanprof_leaked_kb + SPANPROF_BLOCK / 1024 > max_kb) {
            return;
        }
        p = malloc(SPANPROF_BLOCK);
        if (p == NULL) {
            return;
        }
        p[0] = (char) i;
        ngx_http_spanprof_alloc_last = p;      /* never freed */
        ngx_http_spanprof_leaked_kb += SPANPROF_BLOCK / 1024;
    }
}


static ngx_int_t
ngx_http_spanprof_burn_respond(ngx_http_request_t *r)
{
    ngx_int_t                           rc;
    ngx_buf_t                          *b;
    ngx_chain_t                         out;
    ngx_http_spanprof_burn_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_burn_module);
    r->headers_out.status = lcf->status;
    r->headers_out.content_length_n = 5;
    ngx_str_set(&r->headers_out.content_type, "text/plain");

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }
    b->pos = (u_char *) "done\n";
    b->last = b->pos + 5;
    b->memory = 1;
    b->last_buf = 1;
    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


static void
ngx_http_spanprof_burn_step(ngx_http_request_t *r)
{
    ngx_event_t                        *wev;
    ngx_http_spanprof_burn_ctx_t       *ctx;
    ngx_http_spanprof_burn_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_burn_module);
    ctx = ngx_http_get_module_ctx(r, ngx_http_spanprof_burn_module);
    wev = r->connection->write;

    if (wev->timedout) {
        wev->timedout = 0;
    }

    if (lcf->fn == 3) {
        ngx_http_spanprof_block_ms(lcf->total);
        ctx->done = lcf->slices + 1;

    } else if (lcf->fn != 2 && ctx->done < lcf->slices) {
        if (lcf->fn == 0) {
            spanprof_burn_alpha(lcf->total / lcf->slices);
        } else {
            spanprof_burn_beta(lcf->total / lcf->slices);
        }
        ctx->done++;
    } else if (lcf->fn == 2 && ctx->done == 0) {
        ctx->done = 1;
        ngx_add_timer(wev, lcf->total);
        return;
    } else {
        ctx->done = lcf->slices + 1;
    }

    if (lcf->fn < 2 && ctx->done < lcf->slices) {
        /* Back to the event loop until the next slice. */
        ngx_add_timer(wev, 1);
        return;
    }

    ngx_http_finalize_request(r, ngx_http_spanprof_burn_respond(r));
}


static ngx_int_t
ngx_http_spanprof_burn_handler(ngx_http_request_t *r)
{
    ngx_int_t                      rc;
    ngx_http_spanprof_burn_ctx_t  *ctx;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_spanprof_burn_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_http_set_ctx(r, ctx, ngx_http_spanprof_burn_module);

    r->main->count++;
    r->write_event_handler = ngx_http_spanprof_burn_step;
    ngx_http_spanprof_burn_step(r);

    return NGX_DONE;
}


static uint64_t
ngx_http_spanprof_mono_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}


/* The loop of t/spin_loop.h, timed. */
static ngx_int_t
ngx_http_spanprof_spin_handler(ngx_http_request_t *r)
{
    uint64_t                            t0;
    ngx_http_spanprof_burn_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_burn_module);
    if (lcf->spin == 0 || r != r->main) {
        return NGX_OK;
    }

    t0 = ngx_http_spanprof_mono_ns();
    ngx_http_spanprof_burn_sink = spanprof_spin_loop((uintptr_t) r,
                                                     lcf->spin);
    ngx_http_spanprof_spin_ns += ngx_http_spanprof_mono_ns() - t0;
    ngx_http_spanprof_spins++;

    return NGX_OK;
}


static ngx_int_t
ngx_http_spanprof_alloc_handler(ngx_http_request_t *r)
{
    ngx_int_t                           rc;
    ngx_http_spanprof_burn_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_burn_module);
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }
    if (lcf->leak_max_kb) {
        spanprof_burn_leak(lcf->alloc_kb, lcf->leak_max_kb);
    } else {
        spanprof_burn_alloc(lcf->alloc_kb);
    }
    return ngx_http_spanprof_burn_respond(r);
}


static char *
ngx_http_spanprof_alloc(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_burn_loc_conf_t *lcf = conf;

    ngx_str_t                 *value;
    ngx_int_t                  n;
    ngx_http_core_loc_conf_t  *clcf;

    value = cf->args->elts;
    n = ngx_atoi(value[1].data, value[1].len);
    if (n <= 0) {
        return "takes a positive number of KB";
    }
    lcf->alloc_kb = n;
    if (cf->args->nelts == 3) {
        n = ngx_atoi(value[2].data, value[2].len);
        if (n <= 0) {
            return "takes a positive maximum number of KB";
        }
        lcf->leak_max_kb = n;
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_spanprof_alloc_handler;

    return NGX_CONF_OK;
}


static void
ngx_http_spanprof_burn_body_done(ngx_http_request_t *r)
{
    ngx_http_finalize_request(r, ngx_http_spanprof_burn_respond(r));
}


static ngx_int_t
ngx_http_spanprof_burn_body_handler(ngx_http_request_t *r)
{
    ngx_int_t  rc;

    rc = ngx_http_read_client_request_body(r,
                                           ngx_http_spanprof_burn_body_done);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }
    return NGX_DONE;
}


static ngx_int_t
ngx_http_spanprof_burn_request_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in)
{
    ngx_chain_t                        *cl;
    ngx_http_spanprof_burn_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_burn_module);
    if (lcf->body_ms) {
        for (cl = in; cl != NULL; cl = cl->next) {
            if (ngx_buf_size(cl->buf) > 0) {
                spanprof_burn_request_body(lcf->body_ms);
            }
        }
    }
    return ngx_http_spanprof_burn_next_body(r, in);
}


static char *
ngx_http_spanprof_burn_body(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_burn_loc_conf_t *lcf = conf;

    ngx_str_t                 *value;
    ngx_int_t                  n;
    ngx_http_core_loc_conf_t  *clcf;

    value = cf->args->elts;
    n = ngx_atoi(value[1].data, value[1].len);
    if (n <= 0) {
        return "takes a positive number of milliseconds";
    }
    lcf->body_ms = n;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_spanprof_burn_body_handler;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_spanprof_burn_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_spanprof_spin_handler;

    ngx_http_spanprof_burn_next_body = ngx_http_top_request_body_filter;
    ngx_http_top_request_body_filter =
        ngx_http_spanprof_burn_request_body_filter;

    return NGX_OK;
}


static void
ngx_http_spanprof_burn_exit(ngx_cycle_t *cycle)
{
    if (ngx_http_spanprof_spins > 0) {
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "spanprof_spin: %uL loops, %uL ns each",
                      ngx_http_spanprof_spins,
                      ngx_http_spanprof_spin_ns / ngx_http_spanprof_spins);
    }
}


static void *
ngx_http_spanprof_burn_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_spanprof_burn_loc_conf_t  *lcf;

    lcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_spanprof_burn_loc_conf_t));
    if (lcf == NULL) {
        return NULL;
    }
    lcf->spin = NGX_CONF_UNSET_UINT;
    lcf->status = NGX_CONF_UNSET_UINT;

    return lcf;
}


static char *
ngx_http_spanprof_burn_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child)
{
    ngx_http_spanprof_burn_loc_conf_t  *prev = parent;
    ngx_http_spanprof_burn_loc_conf_t  *conf = child;

    ngx_conf_merge_uint_value(conf->spin, prev->spin, 0);
    ngx_conf_merge_uint_value(conf->status, prev->status, NGX_HTTP_OK);

    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_burn(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_burn_loc_conf_t *lcf = conf;

    ngx_str_t                 *value;
    ngx_int_t                  n;
    ngx_http_core_loc_conf_t  *clcf;

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "alpha") == 0) {
        lcf->fn = 0;
    } else if (ngx_strcmp(value[1].data, "beta") == 0) {
        lcf->fn = 1;
    } else {
        return "takes \"alpha\" or \"beta\"";
    }

    n = ngx_atoi(value[2].data, value[2].len);
    if (n <= 0) {
        return "takes a positive number of milliseconds";
    }
    lcf->total = n;
    lcf->slices = 1;

    if (cf->args->nelts == 4) {
        n = ngx_atoi(value[3].data, value[3].len);
        if (n <= 0) {
            return "takes a positive number of slices";
        }
        lcf->slices = n;
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_spanprof_burn_handler;

    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_wait(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_burn_loc_conf_t *lcf = conf;

    ngx_str_t                 *value;
    ngx_int_t                  n;
    ngx_http_core_loc_conf_t  *clcf;

    value = cf->args->elts;
    n = ngx_atoi(value[1].data, value[1].len);
    if (n < 0) {
        return "takes a number of milliseconds";
    }
    lcf->fn = 2;
    lcf->total = n;
    lcf->slices = 1;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_spanprof_burn_handler;

    return NGX_CONF_OK;
}


static char *
ngx_http_spanprof_block(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_spanprof_burn_loc_conf_t *lcf = conf;

    ngx_str_t                 *value;
    ngx_int_t                  n;
    ngx_http_core_loc_conf_t  *clcf;

    value = cf->args->elts;
    n = ngx_atoi(value[1].data, value[1].len);
    if (n <= 0) {
        return "takes a positive number of milliseconds";
    }
    lcf->fn = 3;
    lcf->total = n;
    lcf->slices = 1;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_spanprof_burn_handler;

    return NGX_CONF_OK;
}
