/*
 * Profiling in nginx: one sampler per worker, and the binding of the
 * worker's CPU samples to the request whose code is running.
 *
 * A worker interleaves many requests on one thread, so the thread's labels
 * (the OTEP 4947 record pointer) must name a request exactly while code for
 * it runs, and nothing otherwise. All request code runs from an event
 * handler called by the event loop. We wrap the event module's
 * process_events: it collects I/O events as posted events (NGX_POST_EVENTS)
 * instead of running them, and we then run the posted events and the
 * expired timers ourselves, each handler bracketed by binding the request
 * its event belongs to and clearing the labels afterwards. Phase handlers
 * and header/body filters bind too, for work that switches requests within
 * one handler (HTTP/2 streams of one connection, pipelined requests).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"
#include "common/base/clock.h"
#include "common/profile/alloc_hooks.h"
#include "common/profile/sampler.h"

#if (NGX_THREADS)
#include <pthread.h>
#include <signal.h>
#endif


static ngx_int_t ngx_http_spanprof_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_spanprof_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


#if (NGX_HTTP_V2)
static void ngx_http_spanprof_h2_hook(ngx_http_v2_connection_t *h2c);
static void ngx_http_spanprof_h2_unhook(void);
static ngx_http_v2_connection_t *ngx_http_spanprof_event_h2c(ngx_event_t *ev);
#endif


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;

static ngx_int_t  (*ngx_http_spanprof_process_events_next)(
    ngx_cycle_t *cycle, ngx_msec_t timer, ngx_uint_t flags);

static ngx_flag_t  ngx_http_spanprof_sampling;
static ngx_flag_t  ngx_http_spanprof_alloc_hooked;

/* The worker's idle state (sampler.h): its event wait is idle time. */
static sp_sampler_idle_t  *ngx_http_spanprof_idle;


/* ---- which request an event belongs to ------------------------------------ */

static ngx_http_request_t *
ngx_http_spanprof_event_request(ngx_event_t *ev)
{
    void              *data;
    ngx_uint_t         n;
    ngx_cycle_t       *cycle;
    ngx_connection_t  *c;

    cycle = (ngx_cycle_t *) ngx_cycle;
    n = cycle->connection_n;

    /* Events of the cycle's connections are known for certain. */
    if (ev >= cycle->read_events && ev < cycle->read_events + n) {
        c = &cycle->connections[ev - cycle->read_events];

    } else if (ev >= cycle->write_events && ev < cycle->write_events + n) {
        c = &cycle->connections[ev - cycle->write_events];

    } else {
        /* HTTP/2 streams' fake connections and module-owned events: a
         * connection whose event this is, or the request itself. */
        data = ev->data;
        if (data == NULL) {
            return NULL;
        }
        c = data;
        if (c->read != ev && c->write != ev) {
            c = NULL;
        }
        if (c == NULL) {
            return (*(uint32_t *) data == NGX_HTTP_MODULE) ? data : NULL;
        }
    }

    /* c->data is the request while one is active, else the HTTP (or
     * HTTP/2) connection state; requests start with their signature. */
    data = c->data;
    if (data == NULL || *(uint32_t *) data != NGX_HTTP_MODULE) {
        return NULL;
    }
    return data;
}


static void
ngx_http_spanprof_run_event(ngx_event_t *ev)
{
    ngx_http_request_t  *r;

#if (NGX_HTTP_V2)
    ngx_http_v2_connection_t  *h2c;
#endif

    r = ngx_http_spanprof_event_request(ev);
    if (r != NULL) {
        ngx_http_spanprof_bind(r);
    }
#if (NGX_HTTP_V2)
    else if ((h2c = ngx_http_spanprof_event_h2c(ev)) != NULL) {
        ngx_http_spanprof_h2_hook(h2c);
    }
#endif

    ev->handler(ev);

#if (NGX_HTTP_V2)
    ngx_http_spanprof_h2_unhook();
#endif

    /* Back to the event loop: no request runs now. */
    ngx_http_spanprof_detach();
}


static void
ngx_http_spanprof_run_posted(ngx_queue_t *posted)
{
    ngx_queue_t  *q;
    ngx_event_t  *ev;

    while (!ngx_queue_empty(posted)) {
        q = ngx_queue_head(posted);
        ev = ngx_queue_data(q, ngx_event_t, queue);
        ngx_delete_posted_event(ev);
        ngx_http_spanprof_run_event(ev);
    }
}


/* ngx_event_expire_timers(), with each handler bracketed. */
static ngx_flag_t
ngx_http_spanprof_expire_timers(void)
{
    ngx_flag_t          ran;
    ngx_event_t        *ev;
    ngx_rbtree_node_t  *node, *root, *sentinel;

    ran = 0;
    sentinel = ngx_event_timer_rbtree.sentinel;

    for ( ;; ) {
        root = ngx_event_timer_rbtree.root;
        if (root == sentinel) {
            return ran;
        }

        node = ngx_rbtree_min(root, sentinel);
        if ((ngx_msec_int_t) (node->key - ngx_current_msec) > 0) {
            return ran;
        }

        ev = ngx_rbtree_data(node, ngx_event_t, timer);
        ngx_rbtree_delete(&ngx_event_timer_rbtree, &ev->timer);
        ev->timer_set = 0;
        ev->timedout = 1;
        ran = 1;

        ngx_http_spanprof_run_event(ev);
    }
}


static ngx_int_t
ngx_http_spanprof_process_events(ngx_cycle_t *cycle, ngx_msec_t timer,
    ngx_uint_t flags)
{
    ngx_int_t  rc;

    ngx_http_spanprof_detach();

    /* The wait for events is idle, not work: no wall sample is taken in
     * it (the event method's own work after the wait, posting events, is
     * counted idle too: microseconds). A wall signal interrupting the wait
     * sets ngx_event_timer_alarm: the event method then takes the EINTR
     * as a timer wake-up, as with timer_resolution. */
    sp_sampler_idle_begin(ngx_http_spanprof_idle);
    rc = ngx_http_spanprof_process_events_next(cycle, timer,
                                               flags | NGX_POST_EVENTS);
    sp_sampler_idle_end(ngx_http_spanprof_idle);

    /* nginx's own order: accept events, timers, then the other events; our
     * loop leaves nginx nothing to run unbracketed after we return. */
    ngx_http_spanprof_run_posted(&ngx_posted_accept_events);

    /* With accept_mutex on, nginx releases the mutex right after the accept
     * events; so do we (its own unlock after we return is then a no-op). */
    if (ngx_accept_mutex_held) {
        ngx_shmtx_unlock(&ngx_accept_mutex);
    }

    do {
        (void) ngx_http_spanprof_expire_timers();
        ngx_http_spanprof_run_posted(&ngx_posted_events);
    } while (ngx_http_spanprof_expire_timers()
             || !ngx_queue_empty(&ngx_posted_events));

    return rc;
}


/* ---- HTTP/2 connections ------------------------------------------------- */

#if (NGX_HTTP_V2)

/*
 * An HTTP/2 connection's read handler parses the frames of all its streams
 * in one loop, h2c->state.handler(h2c, pos, end) per step, and calls a
 * stream's request code from some steps (a HEADERS frame runs its phases,
 * DATA feeds its body). That request code binds its labels (phase handler,
 * filters) and nothing unbinds them when it returns to the frame parser:
 * the next frames, HPACK, flow control would be sampled as that stream's.
 * So while one of our events runs on an HTTP/2 connection, its state
 * handler is replaced by ngx_http_spanprof_h2_state, which runs the real
 * one and clears the labels after it: the connection's own work is
 * unlabelled, a stream's handlers carry its span. The real handler is put
 * back when the event handler returns (if the connection still exists).
 * The connection's first read (preface, first HEADERS) happens inside the
 * HTTP/1 handler that detects HTTP/2: the hook is set then by the first
 * stream's filters.
 */

static ngx_http_v2_connection_t  *ngx_http_spanprof_h2c;
static ngx_connection_t          *ngx_http_spanprof_h2c_connection;
static ngx_http_v2_handler_pt     ngx_http_spanprof_h2_next;


static u_char *
ngx_http_spanprof_h2_state(ngx_http_v2_connection_t *h2c, u_char *pos,
    u_char *end)
{
    u_char                  *p;
    ngx_http_v2_handler_pt   handler;

    handler = ngx_http_spanprof_h2_next;

    if (h2c != ngx_http_spanprof_h2c || handler == NULL) {
        /* cannot happen: only the hooked connection holds this */
        ngx_log_error(NGX_LOG_ALERT, h2c->connection->log, 0,
                      "spanprof: unknown HTTP/2 state");
        return NULL;
    }

    ngx_http_spanprof_detach();
    p = handler(h2c, pos, end);
    ngx_http_spanprof_detach();

    if (p == NULL) {
        /* A connection error: h2c may be freed; the event's end unhooks
         * it if not. */
        return NULL;
    }

    if (h2c->state.handler != ngx_http_spanprof_h2_state) {
        ngx_http_spanprof_h2_next = h2c->state.handler;
        h2c->state.handler = ngx_http_spanprof_h2_state;
    }

    return p;
}


static void
ngx_http_spanprof_h2_hook(ngx_http_v2_connection_t *h2c)
{
    if (ngx_http_spanprof_h2c != NULL
        || h2c->state.handler == ngx_http_spanprof_h2_state)
    {
        return;
    }
    ngx_http_spanprof_h2c = h2c;
    ngx_http_spanprof_h2c_connection = h2c->connection;
    ngx_http_spanprof_h2_next = h2c->state.handler;
    h2c->state.handler = ngx_http_spanprof_h2_state;
}


static void
ngx_http_spanprof_h2_unhook(void)
{
    ngx_connection_t          *c;
    ngx_http_v2_connection_t  *h2c;

    h2c = ngx_http_spanprof_h2c;
    if (h2c == NULL) {
        return;
    }
    c = ngx_http_spanprof_h2c_connection;

    /* A closed connection went back to the free list (c->data is then the
     * next free one) and its h2c with its pool: not touched. */
    if (c->data == h2c && c->fd != (ngx_socket_t) -1
        && h2c->state.handler == ngx_http_spanprof_h2_state)
    {
        h2c->state.handler = ngx_http_spanprof_h2_next;
    }
    ngx_http_spanprof_h2c = NULL;
    ngx_http_spanprof_h2c_connection = NULL;
    ngx_http_spanprof_h2_next = NULL;
}


/* The HTTP/2 connection state of a cycle connection's read event. */
static ngx_http_v2_connection_t *
ngx_http_spanprof_event_h2c(ngx_event_t *ev)
{
    ngx_uint_t                 n;
    ngx_cycle_t               *cycle;
    ngx_connection_t          *c;
    ngx_http_v2_connection_t  *h2c;

    cycle = (ngx_cycle_t *) ngx_cycle;
    n = cycle->connection_n;
    if (ev < cycle->read_events || ev >= cycle->read_events + n) {
        return NULL;
    }
    c = &cycle->connections[ev - cycle->read_events];

    /* An HTTP client connection whose data starts with its connection:
     * HTTP/1's ngx_http_connection_t starts with a conf pointer. */
    if (c->fd == (ngx_socket_t) -1 || c->listening == NULL
        || c->listening->handler != ngx_http_init_connection
        || c->data == NULL)
    {
        return NULL;
    }
    h2c = c->data;
    return h2c->connection == c ? h2c : NULL;
}

#endif


/* ---- thread pool tasks (aio threads) -------------------------------------- */

#if (NGX_THREADS)

/*
 * With "aio threads", a request's file reads run as tasks on the worker's
 * thread pool. The copy filter gives each read task to its thread_handler
 * (ngx_output_chain_ctx_t), which posts it to the pool; we put our own
 * thread_handler in its place. It swaps the task's handler for
 * ngx_http_spanprof_task_run and notes the original and the request's
 * record in a small in-flight table, keyed by the task's ctx (the value the
 * pool thread passes to the handler). On the pool thread that function
 * restores the task, registers the thread with the sampler on its first
 * task, and runs the original with the request's labels attached and the
 * thread's wall timer armed: an idle pool thread (waiting on its queue)
 * takes no sample.
 *
 * task->ctx itself is never touched: nginx reads it while a task is in
 * flight (a duplicate sendfile call); task->handler it reads only when
 * posting. The copy filter's context exists after its first call only, so
 * a request's first read task runs unwrapped (unsampled, or unlabelled on
 * a pool thread already registered).
 */

typedef void (*ngx_http_spanprof_task_pt)(void *data, ngx_log_t *log);

typedef struct ngx_http_spanprof_task_s  ngx_http_spanprof_task_t;

struct ngx_http_spanprof_task_s {
    void                       *data;      /* the task's ctx: the key */
    ngx_thread_task_t          *task;
    ngx_http_spanprof_task_pt   handler;   /* the task's own */
    sp_thread_ctx_record_t     *record;    /* NULL: unlabelled */
    ngx_http_spanprof_task_t   *next;
};

typedef ngx_int_t (*ngx_http_spanprof_thread_handler_pt)(
    ngx_thread_task_t *task, ngx_file_t *file);

/* nginx's copy filter: no header declares it. */
extern ngx_module_t  ngx_http_copy_filter_module;

static ngx_http_spanprof_thread_handler_pt  ngx_http_spanprof_copy_thread_next;

static pthread_mutex_t            ngx_http_spanprof_tasks_lock =
    PTHREAD_MUTEX_INITIALIZER;
static ngx_http_spanprof_task_t  *ngx_http_spanprof_tasks;

/* The pool thread was registered with the sampler (0: not yet, -1: that
 * failed; it is not tried again). */
static __thread int  ngx_http_spanprof_pool_thread;


static void
ngx_http_spanprof_task_run(void *data, ngx_log_t *log)
{
    sigset_t                   set;
    ngx_http_spanprof_task_t  *t, **pt;

    (void) pthread_mutex_lock(&ngx_http_spanprof_tasks_lock);
    for (pt = &ngx_http_spanprof_tasks; *pt != NULL; pt = &(*pt)->next) {
        if ((*pt)->data == data) {
            break;
        }
    }
    t = *pt;
    if (t != NULL) {
        *pt = t->next;
    }
    (void) pthread_mutex_unlock(&ngx_http_spanprof_tasks_lock);

    if (t == NULL) {
        /* cannot happen: every swapped task is in the table */
        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "spanprof: thread task %p not found", data);
        return;
    }

    /* Back to nginx's own: the next post of this task may bypass us. */
    t->task->handler = t->handler;

    if (ngx_http_spanprof_pool_thread == 0) {
        /* nginx blocks every signal on its pool threads: let the sampler's
         * two in (their timers target this thread alone), then warm TLS
         * and arm the CPU timer; the wall timer waits for a task. */
        ngx_http_spanprof_pool_thread = -1;
        if (sp_sampler_running()
            && sp_sampler_thread_register_on_demand() == 0)
        {
            sigemptyset(&set);
            sigaddset(&set, SIGPROF);
            sigaddset(&set, SP_SAMPLER_WALL_SIGNAL);
            (void) pthread_sigmask(SIG_UNBLOCK, &set, NULL);
            ngx_http_spanprof_pool_thread = 1;
        }
    }

    if (ngx_http_spanprof_pool_thread == 1) {
        sp_sampler_wall_active(1);
        sp_thread_ctx_attach(t->record);
        t->handler(data, log);
        sp_thread_ctx_detach();
        sp_sampler_wall_active(0);

    } else {
        t->handler(data, log);
    }

    ngx_free(t);
}


static ngx_int_t
ngx_http_spanprof_copy_thread_handler(ngx_thread_task_t *task,
    ngx_file_t *file)
{
    ngx_int_t                  rc;
    ngx_http_request_t        *r;
    ngx_http_spanprof_ctx_t   *ctx;
    ngx_http_spanprof_task_t  *t, **pt;

    r = file->thread_ctx;

    /* A task in flight (nginx tolerates a second sendfile call then), or
     * one that is ours already: nginx's handler as is. */
    if (r->aio || task->handler == ngx_http_spanprof_task_run
        || !ngx_http_spanprof_sampling)
    {
        return ngx_http_spanprof_copy_thread_next(task, file);
    }

    t = ngx_alloc(sizeof(ngx_http_spanprof_task_t), r->connection->log);
    if (t == NULL) {
        return ngx_http_spanprof_copy_thread_next(task, file);
    }

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_spanprof_module);
    t->data = task->ctx;
    t->task = task;
    t->handler = task->handler;
    t->record = (ctx != NULL && ctx->profiled) ? &ctx->record : NULL;

    (void) pthread_mutex_lock(&ngx_http_spanprof_tasks_lock);
    t->next = ngx_http_spanprof_tasks;
    ngx_http_spanprof_tasks = t;
    (void) pthread_mutex_unlock(&ngx_http_spanprof_tasks_lock);

    task->handler = ngx_http_spanprof_task_run;

    rc = ngx_http_spanprof_copy_thread_next(task, file);

    if (rc != NGX_OK || !r->aio) {
        /* Not posted (an error, or nothing to do): undo, unless a pool
         * thread took it already. */
        (void) pthread_mutex_lock(&ngx_http_spanprof_tasks_lock);
        for (pt = &ngx_http_spanprof_tasks; *pt != NULL; pt = &(*pt)->next)
        {
            if (*pt == t) {
                *pt = t->next;
                task->handler = t->handler;
                ngx_free(t);
                break;
            }
        }
        (void) pthread_mutex_unlock(&ngx_http_spanprof_tasks_lock);
    }

    return rc;
}


/* Puts our thread_handler into the request's copy filter context, once it
 * exists (its first call made it). */
static void
ngx_http_spanprof_wrap_copy_filter(ngx_http_request_t *r)
{
    ngx_output_chain_ctx_t  *octx;

    octx = ngx_http_get_module_ctx(r, ngx_http_copy_filter_module);
    if (octx == NULL || octx->thread_handler == NULL
        || octx->thread_handler == ngx_http_spanprof_copy_thread_handler)
    {
        return;
    }
    if (ngx_http_spanprof_copy_thread_next == NULL) {
        ngx_http_spanprof_copy_thread_next = octx->thread_handler;

    } else if (octx->thread_handler != ngx_http_spanprof_copy_thread_next) {
        return;     /* another module's: left alone */
    }
    octx->thread_handler = ngx_http_spanprof_copy_thread_handler;
}

#endif


/* ---- requests ------------------------------------------------------------- */

/* otel_profiling on, or its value true for r. */
static ngx_flag_t
ngx_http_spanprof_profiles(ngx_http_request_t *r,
    ngx_http_spanprof_loc_conf_t *lcf)
{
    ngx_str_t  v;

    if (lcf->profiling != NGX_HTTP_SPANPROF_PROFILING_VAR) {
        return lcf->profiling == 1;
    }
    if (ngx_http_complex_value(r, lcf->profiling_var, &v) != NGX_OK) {
        return 0;
    }
    return !(v.len == 0
             || (v.len == 1 && v.data[0] == '0')
             || (v.len == 3 && ngx_strncasecmp(v.data, (u_char *) "off", 3)
                               == 0));
}


/* Called at the rewrite phase (again after internal redirects): decides
 * whether the request is profiled in its location and fills its record. */
void
ngx_http_spanprof_profile_request(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx)
{
    size_t                         len;
    u_char                         name[SP_HTTP_SPAN_NAME_LEN];
    const char                    *kept;
    ngx_http_spanprof_loc_conf_t  *lcf;

    if (!ngx_http_spanprof_sampling) {
        return;
    }

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);
    if (!ngx_http_spanprof_profiles(r, lcf)) {
        if (ctx->profiled) {
            ctx->profiled = 0;
            ngx_http_spanprof_detach();
        }
        return;
    }

    /* Readers follow the pointer only: never rewrite an attached record. */
    if (ngx_http_spanprof_attached() == &ctx->record) {
        ngx_http_spanprof_detach();
    }
    len = ngx_http_spanprof_default_name(r, name, sizeof(name));
    sp_thread_ctx_record_init(&ctx->record, ctx->trace_id, ctx->span_id,
                              ngx_http_spanprof_flags(ctx),
                              (const char *) name, len);
    /* The span may reuse the name if the record holds all of it. */
    ctx->record_loc = NULL;
    if (len > 0
        && sp_thread_ctx_record_span_name(ctx->record.attrs_data,
                                          ctx->record.attrs_data_size, &kept)
           == len)
    {
        ctx->record_loc = ngx_http_get_module_loc_conf(r,
                                                       ngx_http_core_module);
        ctx->record_method = r->method_name.data;
    }
    /* Once some location's keep rules applied, the samples wait for the
     * verdict, which the final location's rules give. */
    if (!sp_keep_rules_all(&lcf->keep) && sp_keep_started()) {
        ctx->record.sp_keep = 1;
    }
    ctx->profiled = 1;
    ngx_http_spanprof_attach(&ctx->record);
}


/* At the log phase of a request whose samples wait for a verdict: its
 * final location's keep rules decide; the verdict goes to the profile
 * builder if the request has samples. traced: its span will be exported. */
void
ngx_http_spanprof_keep_verdict(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx, int traced)
{
    uint64_t                       end_ns;
    int                            keep, failed;
    ngx_uint_t                     i, status;
    ngx_http_upstream_state_t     *st;
    ngx_http_spanprof_loc_conf_t  *lcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_spanprof_module);

    failed = 0;
    if ((lcf->keep.flags & SP_KEEP_ERRORS) && r->upstream_states != NULL) {
        st = r->upstream_states->elts;
        for (i = 0; i < r->upstream_states->nelts; i++) {
            /* A peer that never answered, or answered an error that
             * nginx then retried elsewhere. */
            if (st[i].peer != NULL
                && (st[i].status == 0 || st[i].status >= 500
                    || st[i].header_time == (ngx_msec_t) -1))
            {
                failed = 1;
            }
        }
    }

    /* nginx's cached time does not move while a handler burns CPU: a
     * clock is read, once; a traced request's span ends then too, an
     * untraced one reads the tick's time (keep_rules.h). */
    end_ns = 0;
    if (lcf->keep.flags & SP_KEEP_SLOW) {
        end_ns = sp_keep_end_ns(traced);
        if (traced) {
            ctx->end_ns = end_ns;
        }
    }

    status = r->err_status ? r->err_status : r->headers_out.status;
    keep = sp_keep_rules_match(&lcf->keep,
                               end_ns > ctx->start_ns
                               ? end_ns - ctx->start_ns : 0,
                               (int) status, failed, ctx->record.sp_cpu_ns);

    /* Samples were taken (its CPU or wall time counts them): they wait for
     * this. Its allocations are not counted in the record: with memory
     * profiling on, any request may have allocation samples waiting. */
    if ((ctx->record.sp_cpu_ns > 0 || ctx->record.sp_wall_ns > 0
         || (ngx_http_spanprof_alloc_hooked && sp_alloc_sampler_enabled()))
        && sp_keep_send(ctx->span_id, keep) != 0)
    {
        keep = 0;
    }
    ctx->unkept = !keep;
}


static ngx_int_t
ngx_http_spanprof_header_filter(ngx_http_request_t *r)
{
    ngx_http_spanprof_bind(r);
#if (NGX_HTTP_V2)
    /* A stream's first response may come from the connection's first
     * read, before any event of ours saw an HTTP/2 connection. */
    if (r->stream != NULL && ngx_http_spanprof_sampling) {
        ngx_http_spanprof_h2_hook(r->stream->connection);
    }
#endif
    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_spanprof_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_http_spanprof_bind(r);
#if (NGX_THREADS)
    if (ngx_http_spanprof_sampling) {
        ngx_http_spanprof_wrap_copy_filter(r);
    }
#endif
    return ngx_http_next_body_filter(r, in);
}


/* ---- configuration and process hooks ------------------------------------- */

/* otel_profiling_types cpu [wall] [memory]; */
char *
ngx_http_spanprof_profiling_types(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_spanprof_main_conf_t *mcf = conf;
    ngx_str_t                     *value;
    ngx_uint_t                     i, t, types;

    if (mcf->profiling_types != 0) {
        return "is duplicate";
    }
    value = cf->args->elts;
    types = 0;
    for (i = 1; i < cf->args->nelts; i++) {
        if (ngx_strcmp(value[i].data, "cpu") == 0) {
            t = SP_SAMPLER_TYPE_CPU;
        } else if (ngx_strcmp(value[i].data, "wall") == 0) {
            t = SP_SAMPLER_TYPE_WALL;
        } else if (ngx_strcmp(value[i].data, "memory") == 0) {
            t = SP_SAMPLER_TYPE_MEMORY;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid profiling type \"%V\" (cpu, wall, "
                               "memory)", &value[i]);
            return NGX_CONF_ERROR;
        }
        if (types & t) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "profiling type \"%V\" given twice",
                               &value[i]);
            return NGX_CONF_ERROR;
        }
        types |= t;
    }
    mcf->profiling_types = types;
    return NGX_CONF_OK;
}

ngx_int_t
ngx_http_spanprof_profiling_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_spanprof_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_spanprof_body_filter;

    return NGX_OK;
}


static void
ngx_http_spanprof_alloc_start(ngx_cycle_t *cycle,
    ngx_http_spanprof_main_conf_t *mcf)
{
    char                   err[256];
    sp_alloc_hooks_conf_t  hc;

    ngx_memzero(&hc, sizeof(hc));
    hc.sampler.mean_bytes = mcf->profiling_memory_interval;
    /* Allocation stacks are kept to SP_ALLOC_DEPTH_MAX frames. */
    hc.sampler.max_depth = (unsigned) ngx_min(mcf->profiling_max_depth,
                                              SP_ALLOC_DEPTH_MAX);
    if (sp_alloc_hooks_install(&hc, err, sizeof(err)) != 0) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "spanprof: memory profiling disabled: %s", err);
        return;
    }
    ngx_http_spanprof_alloc_hooked = 1;
}


ngx_int_t
ngx_http_spanprof_profiling_start(ngx_cycle_t *cycle,
    ngx_http_spanprof_main_conf_t *mcf)
{
    char               err[256];
    sp_sampler_conf_t  sc;

    ngx_memzero(&sc, sizeof(sc));
    sc.rate_hz = (unsigned) mcf->profiling_rate;
    sc.wall_rate_hz = (unsigned) mcf->profiling_wall_rate;
    sc.types = (unsigned) mcf->profiling_types;
    sc.max_depth = (unsigned) mcf->profiling_max_depth;
    /* A few seconds of samples at the full rate: the exporter drains the
     * ring every 200 ms. */
    sc.ring_capacity = 4 * (mcf->profiling_rate + mcf->profiling_wall_rate)
                       < 1024
                       ? 1024
                       : 4 * (mcf->profiling_rate + mcf->profiling_wall_rate);

    ngx_http_spanprof_labels = sp_thread_ctx_slot();

    if (sp_sampler_start(&sc, err, sizeof(err)) != 0) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "spanprof: profiling disabled: %s", err);
        return NGX_OK;
    }

    if (sp_sampler_thread_register() != 0) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_errno,
                      "spanprof: profiling disabled: the CPU timer could not "
                      "be set");
        sp_sampler_stop();
        return NGX_OK;
    }

    /* Acted on by the exporter's tick, once a second. */
    sp_load_shedder_configure(&mcf->profiling_shed);
    if (mcf->keep_used && sp_keep_start(SP_KEEP_CHANNEL_CAPACITY) != 0) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "spanprof: keep rules "
                      "off: out of memory; every request's labels are kept");
        mcf->keep_used = 0;
    }

    /* Memory: the allocator calls of every object of this worker (the
     * master never hooks: it only forks). On this thread, as the sampler's
     * start: both may write libunwind's read-only GOT page. New objects
     * are hooked from the exporter's tick. */
    if (mcf->profiling_types & SP_SAMPLER_TYPE_MEMORY) {
        ngx_http_spanprof_alloc_start(cycle, mcf);
    }

    ngx_http_spanprof_idle = sp_sampler_idle_slot();
    sp_sampler_set_idle_wake(&ngx_event_timer_alarm);
    ngx_http_spanprof_process_events_next = ngx_event_actions.process_events;
    ngx_event_actions.process_events = ngx_http_spanprof_process_events;
    ngx_http_spanprof_sampling = 1;

    return NGX_OK;
}


void
ngx_http_spanprof_profiling_stop(ngx_cycle_t *cycle)
{
    if (!ngx_http_spanprof_sampling) {
        return;
    }
    ngx_http_spanprof_sampling = 0;
    sp_sampler_stop();
    if (ngx_http_spanprof_alloc_hooked) {
        /* Before the module can be unloaded (a reload's new cycle) and
         * while the exporter still runs: no slot may point into us. */
        ngx_http_spanprof_alloc_hooked = 0;
        if (sp_alloc_hooks_uninstall(0) != 0) {
            ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                          "spanprof: a thread stayed in the allocation "
                          "hooks: the module stays mapped");
        }
    }
    ngx_http_spanprof_detach();
}
