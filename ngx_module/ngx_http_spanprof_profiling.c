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
static void ngx_http_spanprof_h2_event(ngx_event_t *ev, ngx_connection_t *c);

/* The HTTP/2 connection whose parser is stepped in this event; the
 * connection whose c->recv (or TLS handshake end) is wrapped in it. */
static ngx_http_v2_connection_t  *ngx_http_spanprof_h2c;
static ngx_connection_t          *ngx_http_spanprof_h2_first;
#endif


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;
static ngx_http_request_body_filter_pt   ngx_http_next_request_body_filter;
#if (NGX_THREADS)
static ngx_http_output_body_filter_pt    ngx_http_spanprof_next_top_body_filter;
#endif

static ngx_int_t  (*ngx_http_spanprof_process_events_next)(
    ngx_cycle_t *cycle, ngx_msec_t timer, ngx_uint_t flags);

static ngx_flag_t  ngx_http_spanprof_sampling;
static ngx_flag_t  ngx_http_spanprof_alloc_hooked;

/* The worker's idle state (sampler.h): its event wait is idle time. */
static sp_sampler_idle_t  *ngx_http_spanprof_idle;


/* ---- which request an event belongs to ------------------------------------ */

/*
 * The cycle's connections' events are known for certain: c->data is the
 * request while one is active (requests start with their signature), else
 * the HTTP (or HTTP/2) connection state. Other events (HTTP/2 streams' fake
 * connections, module-owned events) name a connection whose event this is,
 * or the request itself.
 */
static void
ngx_http_spanprof_run_event(ngx_event_t *ev)
{
    void              *data;
    ngx_uint_t         n;
    ngx_cycle_t       *cycle;
    ngx_connection_t  *c;

    cycle = (ngx_cycle_t *) ngx_cycle;
    n = cycle->connection_n;

    if (ev >= cycle->read_events && ev < cycle->read_events + n) {
        c = &cycle->connections[ev - cycle->read_events];

    } else if (ev >= cycle->write_events && ev < cycle->write_events + n) {
        c = &cycle->connections[ev - cycle->write_events];

    } else {
        c = NULL;
        data = ev->data;
        if (data != NULL) {
            c = data;
            if (c->read != ev && c->write != ev) {
                c = NULL;
                if (*(uint32_t *) data == NGX_HTTP_MODULE) {
                    ngx_http_spanprof_bind(data);
                }
            }
        }
    }

    if (c != NULL && (data = c->data) != NULL) {
        if (*(uint32_t *) data == NGX_HTTP_MODULE) {
            ngx_http_spanprof_bind(data);
        }
#if (NGX_HTTP_V2)
        else if (c->fd != (ngx_socket_t) -1) {
            ngx_http_spanprof_h2_event(ev, c);
        }
#endif
    }

    ev->handler(ev);

#if (NGX_HTTP_V2)
    if (ngx_http_spanprof_h2c != NULL || ngx_http_spanprof_h2_first != NULL) {
        ngx_http_spanprof_h2_unhook();
    }
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

    /* The wait for events is idle, not work: the sampler's wall ticker
     * does not signal the worker in it (the event method's own work after
     * the wait, posting events, is counted idle too: microseconds). A tick
     * sent just before the wait began may still interrupt it: it sets
     * ngx_event_timer_alarm, and the event method takes the EINTR as a
     * timer wake-up, as with timer_resolution. */
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
 * filters, request body filter) and nothing unbinds them when it returns
 * to the frame parser: the next frames, HPACK, flow control would be
 * sampled as that stream's. So while one of our events runs on an HTTP/2
 * connection, its state handler is replaced by ngx_http_spanprof_h2_state,
 * which runs the real one and clears the labels after it: the connection's
 * own work is unlabelled, a stream's handlers carry its span. The real
 * handler is put back when the event handler returns (if the connection
 * still exists).
 *
 * A connection's first HTTP/2 read happens inside the event that made it
 * HTTP/2 (ngx_http_v2_init, called by nginx's HTTP/1 or TLS handshake
 * handler, sets the first state and then reads): for the events of an
 * HTTP connection that has had no request yet, c->recv is wrapped for the
 * event (and, during a TLS handshake, the handler that runs when it ends,
 * which installs the wrapper on the TLS c->recv). The first read of the
 * HTTP/2 handler comes through it: the parser is stepped from there on.
 * nginx >= 1.25.1 first parses what its HTTP/1 handler read to detect the
 * cleartext preface (client_header_buffer_size bytes) before it reads:
 * those bytes are not stepped, and the wrapper clears the labels when the
 * HTTP/2 read comes.
 */

static ngx_connection_t          *ngx_http_spanprof_h2c_connection;
static ngx_http_v2_handler_pt     ngx_http_spanprof_h2_next;
static ngx_recv_pt                ngx_http_spanprof_h2_recv_next;
#if (NGX_HTTP_SSL)
static ngx_connection_handler_pt  ngx_http_spanprof_h2_ssl_next;
#endif


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


#if (nginx_version >= 1025001)

/* nginx >= 1.25.1 detects cleartext HTTP/2 from what its HTTP/1 handler
 * read first, and ngx_http_v2_init parses all of those bytes before its
 * own first read: frames there would not be stepped (a stream run from
 * them would keep its labels over the next frames). On a cleartext
 * listener where HTTP/2 may start, the HTTP/1 handler's first read is cut
 * to the preface's length: nginx takes a short read in its stride (a
 * partial preface waits for more), HTTP/2 then parses only the preface
 * before its own read, and an HTTP/1 request reads the rest of its header
 * with one more recv(). A PROXY protocol header must come in one read:
 * left alone. */
static size_t
ngx_http_spanprof_h2_preface_size(ngx_connection_t *c, size_t size)
{
    ngx_http_connection_t    *hc;
    ngx_http_v2_srv_conf_t   *h2scf;

    hc = c->data;
    if (size <= sizeof(NGX_HTTP_V2_PREFACE) - 1 || c->requests != 0
        || hc->ssl || hc->proxy_protocol || c->buffer == NULL
        || c->buffer->last != c->buffer->pos)
    {
        return size;
    }
    h2scf = ngx_http_get_module_srv_conf(hc->conf_ctx, ngx_http_v2_module);
    if (!h2scf->enable && !hc->addr_conf->http2) {
        return size;
    }
    return sizeof(NGX_HTTP_V2_PREFACE) - 1;
}

#endif


/* c->recv of a connection that may become HTTP/2 in this event. */
static ssize_t
ngx_http_spanprof_h2_first_recv(ngx_connection_t *c, u_char *buf,
    size_t size)
{
    ngx_recv_pt                recv;
    ngx_http_v2_connection_t  *h2c;

    recv = ngx_http_spanprof_h2_recv_next;
    if (c != ngx_http_spanprof_h2_first || recv == NULL) {
        /* cannot happen: the wrapper is taken out at the event's end */
        ngx_log_error(NGX_LOG_ALERT, c->log, 0,
                      "spanprof: unknown connection read");
        return NGX_ERROR;
    }

    h2c = c->data;
    if (h2c != NULL && h2c->connection == c) {
        /* HTTP/2's read handler: step its parser from here. */
        c->recv = recv;
        ngx_http_spanprof_h2_first = NULL;
        ngx_http_spanprof_h2_recv_next = NULL;
        ngx_http_spanprof_detach();
        ngx_http_spanprof_h2_hook(h2c);
    }
#if (nginx_version >= 1025001)
    else if (h2c != NULL && *(uint32_t *) h2c != NGX_HTTP_MODULE) {
        size = ngx_http_spanprof_h2_preface_size(c, size);
    }
#endif

    return recv(c, buf, size);
}


#if (NGX_HTTP_SSL)

/* The TLS handshake ended (c->recv is the TLS one now): nginx's handler
 * may start HTTP/2 and read. */
static void
ngx_http_spanprof_h2_ssl_handler(ngx_connection_t *c)
{
    ngx_connection_handler_pt  handler;

    handler = ngx_http_spanprof_h2_ssl_next;
    if (c != ngx_http_spanprof_h2_first || handler == NULL) {
        ngx_log_error(NGX_LOG_ALERT, c->log, 0,
                      "spanprof: unknown TLS handshake");
        ngx_http_close_connection(c);
        return;
    }
    c->ssl->handler = handler;
    ngx_http_spanprof_h2_ssl_next = NULL;

    if (c->recv != ngx_http_spanprof_h2_first_recv) {
        ngx_http_spanprof_h2_recv_next = c->recv;
        c->recv = ngx_http_spanprof_h2_first_recv;
    }
    handler(c);
}

#endif


/* Before an event handler runs on a cycle connection with no request in
 * c->data: an HTTP/2 connection's parser is stepped; an HTTP connection
 * with no request yet may become one in this event. */
static void
ngx_http_spanprof_h2_event(ngx_event_t *ev, ngx_connection_t *c)
{
    ngx_http_v2_connection_t  *h2c;

    /* HTTP/1's ngx_http_connection_t starts with a conf pointer, HTTP/2's
     * state with its connection (so does a resolver's UDP connection:
     * the listening socket tells). */
    h2c = c->data;
    if (h2c->connection == c) {
        if (ev == c->read && c->listening != NULL
            && c->listening->handler == ngx_http_init_connection)
        {
            ngx_http_spanprof_h2_hook(h2c);
        }
        return;
    }

    if (c->requests != 0 || ngx_http_spanprof_h2_first != NULL
        || c->listening == NULL
        || c->listening->handler != ngx_http_init_connection)
    {
        return;
    }

    /* No request yet (c->data is its ngx_http_connection_t): this event
     * may start HTTP/2 and read its first frames. */
    ngx_http_spanprof_h2_first = c;
    ngx_http_spanprof_h2_recv_next = c->recv;
    c->recv = ngx_http_spanprof_h2_first_recv;
#if (NGX_HTTP_SSL)
    if (c->ssl != NULL && !c->ssl->handshaked && c->ssl->handler != NULL) {
        ngx_http_spanprof_h2_ssl_next = c->ssl->handler;
        c->ssl->handler = ngx_http_spanprof_h2_ssl_handler;
    }
#endif
}


static void
ngx_http_spanprof_h2_unhook(void)
{
    ngx_connection_t          *c;
    ngx_http_v2_connection_t  *h2c;

    c = ngx_http_spanprof_h2_first;
    if (c != NULL) {
        /* A closed connection stays in the cycle's array (zeroed when
         * reused): its c->recv is put back all the same; its TLS state
         * went with its pool. */
        if (c->recv == ngx_http_spanprof_h2_first_recv) {
            c->recv = ngx_http_spanprof_h2_recv_next;
        }
#if (NGX_HTTP_SSL)
        if (ngx_http_spanprof_h2_ssl_next != NULL
            && c->fd != (ngx_socket_t) -1 && c->ssl != NULL
            && c->ssl->handler == ngx_http_spanprof_h2_ssl_handler)
        {
            c->ssl->handler = ngx_http_spanprof_h2_ssl_next;
        }
        ngx_http_spanprof_h2_ssl_next = NULL;
#endif
        ngx_http_spanprof_h2_first = NULL;
        ngx_http_spanprof_h2_recv_next = NULL;
    }

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
 * thread marked active for the sampler's wall ticker: an idle pool thread
 * (waiting on its queue) takes no sample.
 *
 * The copy filter's context exists after its first call only, and that
 * call posts the request's first read task already: our filter at the top
 * of the chain (ngx_http_spanprof_first_task_filter) gets that task before
 * its post in a location served by the "default" pool. Elsewhere, once
 * that call returns with a task posted (r->aio set), the task (the
 * context's thread_task, or the connection's sendfile task) is swapped
 * after its post. A pool thread reads task->handler once, after taking the
 * task off its queue; it sees either nginx's handler (it took the task
 * before the swap: the task runs unwrapped) or ours (the table entry is in
 * place before the swap). That task's completion handler, which runs on
 * this thread, is ours as well: it takes out an entry that no pool thread
 * used and puts nginx's task handler back, then runs nginx's with the
 * request bound (the request's code that continues after its read is its
 * own).
 *
 * task->ctx itself is never touched: nginx reads it while a task is in
 * flight (a duplicate sendfile call).
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

/* nginx's copy filter and thread pools: no header declares them. */
extern ngx_module_t  ngx_http_copy_filter_module;
extern ngx_module_t  ngx_thread_pool_module;

static ngx_http_spanprof_thread_handler_pt  ngx_http_spanprof_copy_thread_next;
/* The copy filter's completion handler (one for all its tasks). */
static ngx_event_handler_pt                 ngx_http_spanprof_copy_event_next;

static pthread_mutex_t            ngx_http_spanprof_tasks_lock =
    PTHREAD_MUTEX_INITIALIZER;
static ngx_http_spanprof_task_t  *ngx_http_spanprof_tasks;

/* The first read of a request in a location served by the "default" pool:
 * see ngx_http_spanprof_first_task_filter. */
static ngx_thread_pool_t         *ngx_http_spanprof_default_pool;
static ngx_http_complex_value_t   ngx_http_spanprof_pool_cv;
static ngx_http_core_loc_conf_t  *ngx_http_spanprof_pool_clcf;
static ngx_http_spanprof_task_t  *ngx_http_spanprof_first_entry;

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
         * and arm the CPU timer; its wall time counts only in a task. */
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


/* The task's completion, on the worker: see above. */
static void
ngx_http_spanprof_task_done(ngx_event_t *ev)
{
    ngx_thread_task_t         *task;
    ngx_http_spanprof_task_t  *t, **pt;

    if (ev->active) {
        /* nginx >= 1.25's "took too long" timer: the task still runs;
         * its completion comes here later. */
        ngx_http_spanprof_copy_event_next(ev);
        return;
    }
    ev->handler = ngx_http_spanprof_copy_event_next;

    task = (ngx_thread_task_t *) ((u_char *) ev
                                  - offsetof(ngx_thread_task_t, event));
    t = NULL;
    (void) pthread_mutex_lock(&ngx_http_spanprof_tasks_lock);
    for (pt = &ngx_http_spanprof_tasks; *pt != NULL; pt = &(*pt)->next) {
        if ((*pt)->data == task->ctx) {
            t = *pt;
            *pt = t->next;
            /* A pool thread took it before the swap and ran nginx's. */
            task->handler = t->handler;
            break;
        }
    }
    (void) pthread_mutex_unlock(&ngx_http_spanprof_tasks_lock);
    if (t != NULL) {
        ngx_free(t);
    }

    ngx_http_spanprof_bind(ev->data);
    ngx_http_spanprof_copy_event_next(ev);
}


/* Notes a task of r in the table and makes it run through
 * ngx_http_spanprof_task_run: before its post, or (posted) after. */
static ngx_http_spanprof_task_t *
ngx_http_spanprof_task_wrap(ngx_http_request_t *r, ngx_thread_task_t *task)
{
    ngx_http_spanprof_ctx_t   *ctx;
    ngx_http_spanprof_task_t  *t;

    t = ngx_alloc(sizeof(ngx_http_spanprof_task_t), r->connection->log);
    if (t == NULL) {
        return NULL;
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

    /* A pool thread may read it now (a posted task): one store. */
    __atomic_store_n(&task->handler, ngx_http_spanprof_task_run,
                     __ATOMIC_RELEASE);
    return t;
}


/* A posted task's completion handler: ours, if it is the copy filter's. */
static void
ngx_http_spanprof_task_wrap_done(ngx_thread_task_t *task)
{
    if (ngx_http_spanprof_copy_event_next == NULL) {
        ngx_http_spanprof_copy_event_next = task->event.handler;

    } else if (task->event.handler != ngx_http_spanprof_copy_event_next) {
        return;
    }
    task->event.handler = ngx_http_spanprof_task_done;
}


static ngx_int_t
ngx_http_spanprof_copy_thread_handler(ngx_thread_task_t *task,
    ngx_file_t *file)
{
    ngx_int_t                  rc;
    ngx_http_request_t        *r;
    ngx_http_spanprof_task_t  *t, **pt;

    r = file->thread_ctx;

    /* A task in flight (nginx tolerates a second sendfile call then), or
     * one that is ours already: nginx's handler as is. */
    if (r->aio || task->handler == ngx_http_spanprof_task_run
        || !ngx_http_spanprof_sampling)
    {
        return ngx_http_spanprof_copy_thread_next(task, file);
    }

    t = ngx_http_spanprof_task_wrap(r, task);
    if (t == NULL) {
        return ngx_http_spanprof_copy_thread_next(task, file);
    }

    rc = ngx_http_spanprof_copy_thread_next(task, file);

    if (rc == NGX_OK && r->aio) {
        ngx_http_spanprof_task_wrap_done(task);
        return rc;
    }

    /* Not posted (an error, or nothing to do): undo, unless a pool thread
     * took it already. */
    (void) pthread_mutex_lock(&ngx_http_spanprof_tasks_lock);
    for (pt = &ngx_http_spanprof_tasks; *pt != NULL; pt = &(*pt)->next) {
        if (*pt == t) {
            *pt = t->next;
            task->handler = t->handler;
            ngx_free(t);
            break;
        }
    }
    (void) pthread_mutex_unlock(&ngx_http_spanprof_tasks_lock);

    return rc;
}


/* Puts our thread_handler into the request's copy filter context, once it
 * exists (its first call made it). 0: there is no context yet. */
static ngx_flag_t
ngx_http_spanprof_wrap_copy_filter(ngx_http_request_t *r)
{
    ngx_output_chain_ctx_t  *octx;

    octx = ngx_http_get_module_ctx(r, ngx_http_copy_filter_module);
    if (octx == NULL) {
        return 0;
    }
    if (octx->thread_handler == NULL
        || octx->thread_handler == ngx_http_spanprof_copy_thread_handler)
    {
        return 1;
    }
    if (ngx_http_spanprof_copy_thread_next == NULL) {
        ngx_http_spanprof_copy_thread_next = octx->thread_handler;

    } else if (octx->thread_handler != ngx_http_spanprof_copy_thread_next) {
        return 1;   /* another module's: left alone */
    }
    octx->thread_handler = ngx_http_spanprof_copy_thread_handler;
    return 1;
}


/* After the copy filter's first call for r posted a task (its first read,
 * or a sendfile in threads): that task, swapped after its post. */
static void
ngx_http_spanprof_wrap_first_task(ngx_http_request_t *r)
{
    ngx_uint_t               i;
    ngx_connection_t        *c;
    ngx_thread_task_t       *task, *tasks[3];
    ngx_output_chain_ctx_t  *octx;

    if (!ngx_http_spanprof_wrap_copy_filter(r)) {
        return;
    }
    octx = ngx_http_get_module_ctx(r, ngx_http_copy_filter_module);
    if (octx->thread_handler != ngx_http_spanprof_copy_thread_handler) {
        return;     /* not nginx's copy thread handler: not its tasks */
    }

    c = r->connection;
    tasks[0] = octx->thread_task;
    tasks[1] = c->sendfile_task;
    tasks[2] = NULL;
#if (NGX_HTTP_V2)
    if (r->stream != NULL) {
        tasks[2] = r->stream->connection->connection->sendfile_task;
    }
#endif

    for (i = 0; i < 3; i++) {
        task = tasks[i];
        /* Posted (active until its completion runs, on this thread) by
         * the copy filter for r. */
        if (task != NULL && task->event.active && task->event.data == r
            && task->handler != ngx_http_spanprof_task_run
            && (ngx_http_spanprof_copy_event_next == NULL
                || task->event.handler == ngx_http_spanprof_copy_event_next))
        {
            if (ngx_http_spanprof_task_wrap(r, task) != NULL) {
                ngx_http_spanprof_task_wrap_done(task);
            }
            return;
        }
    }
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
 * whether the request is profiled in its location and fills its record.
 * The check for a process that samples comes before the frame with the
 * name's buffer (and its stack protector): tracing alone pays a compare. */
static void ngx_http_spanprof_profile_location(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx) __attribute__((noinline));

void
ngx_http_spanprof_profile_request(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx)
{
    if (ngx_http_spanprof_sampling) {
        ngx_http_spanprof_profile_location(r, ctx);
    }
}


static void
ngx_http_spanprof_profile_location(ngx_http_request_t *r,
    ngx_http_spanprof_ctx_t *ctx)
{
    size_t                         len;
    u_char                         name[SP_HTTP_SPAN_NAME_LEN];
    const char                    *kept;
    ngx_http_spanprof_loc_conf_t  *lcf;

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
    if (!ctx->record_made) {
        /* The counters add up over internal redirects: zeroed once. */
        ctx->record.sp_cpu_ns = 0;
        ctx->record.sp_keep = 0;
        ctx->record.sp_wall_ns = 0;
        ctx->record.sp_off_cpu_ns = 0;
        ctx->record_made = 1;
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
    return ngx_http_next_body_filter(r, in);
}


#if (NGX_THREADS)

/*
 * At the top of the body filter chain (set in each worker that has thread
 * pools), above the copy filter, which our body filter is below: the copy
 * filter's first call for a request creates its context and may post the
 * first read task at once. nginx's copy thread handler takes the location's
 * pool (clcf->thread_pool), or, if it has none, evaluates the location's
 * pool name (clcf->thread_pool_value) before it posts the task. For that one
 * call, a location served by the "default" pool gets no pool and our name,
 * a variable whose handler puts the location back, finds the task that is
 * about to be posted (task->handler set, not posted yet) and swaps it, and
 * answers "default". Other pools: the task is swapped after its post
 * (ngx_http_spanprof_wrap_first_task).
 */
static ngx_int_t
ngx_http_spanprof_first_task_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_int_t                  rc;
    ngx_output_chain_ctx_t    *octx;
    ngx_http_core_loc_conf_t  *clcf;
    ngx_http_spanprof_task_t  *t, **pt;

    octx = ngx_http_get_module_ctx(r, ngx_http_copy_filter_module);
    if (octx != NULL) {
        /* The next tasks: through our thread_handler. */
        if (octx->thread_handler != NULL
            && octx->thread_handler != ngx_http_spanprof_copy_thread_handler
            && ngx_http_spanprof_sampling)
        {
            (void) ngx_http_spanprof_wrap_copy_filter(r);
        }
        return ngx_http_spanprof_next_top_body_filter(r, in);
    }

    if (r->aio || !ngx_http_spanprof_sampling) {
        return ngx_http_spanprof_next_top_body_filter(r, in);
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (clcf->aio != NGX_HTTP_AIO_THREADS || clcf->thread_pool == NULL
        || clcf->thread_pool != ngx_http_spanprof_default_pool
        || ngx_http_spanprof_pool_cv.lengths == NULL)
    {
        rc = ngx_http_spanprof_next_top_body_filter(r, in);
        if (r->aio) {
            ngx_http_spanprof_wrap_first_task(r);
        }
        return rc;
    }

    ngx_http_spanprof_pool_clcf = clcf;
    ngx_http_spanprof_first_entry = NULL;
    clcf->thread_pool_value = &ngx_http_spanprof_pool_cv;
    clcf->thread_pool = NULL;

    rc = ngx_http_spanprof_next_top_body_filter(r, in);

    if (ngx_http_spanprof_pool_clcf != NULL) {
        /* No task was posted: the location as it was. */
        clcf->thread_pool = ngx_http_spanprof_default_pool;
        clcf->thread_pool_value = NULL;
        ngx_http_spanprof_pool_clcf = NULL;
    }

    t = ngx_http_spanprof_first_entry;
    ngx_http_spanprof_first_entry = NULL;
    if (t != NULL && !r->aio) {
        /* Swapped, then not posted (an error): undo, unless a pool thread
         * took it. */
        (void) pthread_mutex_lock(&ngx_http_spanprof_tasks_lock);
        for (pt = &ngx_http_spanprof_tasks; *pt != NULL; pt = &(*pt)->next) {
            if (*pt == t) {
                *pt = t->next;
                t->task->handler = t->handler;
                ngx_free(t);
                break;
            }
        }
        (void) pthread_mutex_unlock(&ngx_http_spanprof_tasks_lock);
    }

    return rc;
}


/* $spanprof_internal_thread_pool: see above. */
static ngx_int_t
ngx_http_spanprof_pool_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_thread_task_t         *task;
    ngx_output_chain_ctx_t    *octx;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_spanprof_pool_clcf;
    if (clcf != NULL) {
        clcf->thread_pool = ngx_http_spanprof_default_pool;
        clcf->thread_pool_value = NULL;
        ngx_http_spanprof_pool_clcf = NULL;
    }

    v->data = (u_char *) "default";
    v->len = sizeof("default") - 1;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    /* The copy filter's context exists; its thread_handler becomes ours
     * for the next tasks. The task being posted: a read of its first
     * buffer (its file's task), or a sendfile. */
    if (clcf == NULL || !ngx_http_spanprof_wrap_copy_filter(r)) {
        return NGX_OK;
    }
    octx = ngx_http_get_module_ctx(r, ngx_http_copy_filter_module);

    task = NULL;
    if (octx->in != NULL && octx->in->buf->in_file
        && octx->in->buf->file != NULL)
    {
        task = octx->in->buf->file->thread_task;
    }
    if (task == NULL || task->event.active) {
        task = r->connection->sendfile_task;
#if (NGX_HTTP_V2)
        if (r->stream != NULL) {
            task = r->stream->connection->connection->sendfile_task;
        }
#endif
    }
    if (task != NULL && !task->event.active
        && task->handler != ngx_http_spanprof_task_run)
    {
        ngx_http_spanprof_first_entry = ngx_http_spanprof_task_wrap(r, task);
    }
    return NGX_OK;
}


/* Compiles our pool name: at the http block's postconfiguration. */
static ngx_int_t
ngx_http_spanprof_pool_variable_init(ngx_conf_t *cf)
{
    ngx_str_t                          name = ngx_string(
                                           "spanprof_internal_thread_pool");
    ngx_str_t                          value = ngx_string(
                                           "$spanprof_internal_thread_pool");
    ngx_http_variable_t               *var;
    ngx_http_compile_complex_value_t   ccv;

    ngx_memzero(&ngx_http_spanprof_pool_cv, sizeof(ngx_http_complex_value_t));

    var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }
    var->get_handler = ngx_http_spanprof_pool_variable;

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = &value;
    ccv.complex_value = &ngx_http_spanprof_pool_cv;

    return ngx_http_compile_complex_value(&ccv);
}

#endif


/* A request body's filters run for its stream from the HTTP/2 frame
 * parser (a DATA frame that fills the body buffer), not from a request
 * event: bind first. At the top of the chain (set in each worker, after
 * every module's postconfiguration), so that other modules' request body
 * filters are labelled too. */
static ngx_int_t
ngx_http_spanprof_request_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in)
{
    ngx_http_spanprof_bind(r);
    return ngx_http_next_request_body_filter(r, in);
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
#if (NGX_THREADS)
    if (ngx_http_spanprof_pool_variable_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }
#endif

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
#if (NGX_THREADS)
    ngx_array_t       *pools;
    ngx_str_t          default_pool = ngx_string("default");
#endif

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
    ngx_http_next_request_body_filter = ngx_http_top_request_body_filter;
    ngx_http_top_request_body_filter = ngx_http_spanprof_request_body_filter;
#if (NGX_THREADS)
    /* ngx_thread_pool.c's conf is { ngx_array_t pools; } (1.7.11 to
     * 1.31): no pool, no task, and no filter call to pay for. */
    pools = (ngx_array_t *) ngx_get_conf(cycle->conf_ctx,
                                         ngx_thread_pool_module);
    if (pools != NULL && pools->nelts > 0) {
        ngx_http_spanprof_default_pool = ngx_thread_pool_get(cycle,
                                                             &default_pool);
        ngx_http_spanprof_next_top_body_filter = ngx_http_top_body_filter;
        ngx_http_top_body_filter = ngx_http_spanprof_first_task_filter;
    }
#endif
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
