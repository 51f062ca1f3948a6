/*
 * The exporter on the worker's event loop: libcurl's sockets become nginx
 * connections with level-triggered events, its timer and the exporter's
 * own deadlines one nginx timer, a full batch a posted event. The worker
 * keeps a single thread: a second one would put every syscall of every
 * request on glibc's and the kernel's multi-threaded paths.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>

#include "ngx_http_spanprof_module.h"


/* libcurl's sockets: a connection or two per endpoint, a resolver pipe. */
#define NGX_HTTP_SPANPROF_EXPORTER_CONNS  16


static void ngx_http_spanprof_exporter_watch(void *data, int fd,
    unsigned events);
static void ngx_http_spanprof_exporter_timer(void *data, uint64_t ms);
static void ngx_http_spanprof_exporter_wake(void *data);
static void ngx_http_spanprof_exporter_run_handler(ngx_event_t *ev);
static void ngx_http_spanprof_exporter_io_handler(ngx_event_t *ev);


/* The events' data, as nginx's cache manager does: debug logging of timers
 * reads a connection's fd from it, and profiling's event wrapper finds no
 * request in it. */
static ngx_connection_t   ngx_http_spanprof_exporter_dummy;

static ngx_event_t        ngx_http_spanprof_exporter_timer_ev;
static ngx_event_t        ngx_http_spanprof_exporter_wake_ev;
static ngx_connection_t  *ngx_http_spanprof_exporter_conns[
                                            NGX_HTTP_SPANPROF_EXPORTER_CONNS];
static ngx_log_t         *ngx_http_spanprof_exporter_log;

/* The worker's exporter: set by the module's init_process, read by the
 * span file at a request's end. */
sp_exporter_t            *ngx_http_spanprof_exporter;


void
ngx_http_spanprof_exporter_loop(ngx_cycle_t *cycle, sp_exporter_loop_t *loop)
{
    ngx_event_t  *ev;

    ngx_http_spanprof_exporter_log = cycle->log;

    ngx_memzero(&ngx_http_spanprof_exporter_dummy, sizeof(ngx_connection_t));
    ngx_http_spanprof_exporter_dummy.fd = (ngx_socket_t) -1;

    ev = &ngx_http_spanprof_exporter_timer_ev;
    ngx_memzero(ev, sizeof(ngx_event_t));
    ev->handler = ngx_http_spanprof_exporter_run_handler;
    ev->log = cycle->log;
    ev->data = &ngx_http_spanprof_exporter_dummy;
    /* A graceful shutdown does not wait for it: exit_process flushes. */
    ev->cancelable = 1;

    ev = &ngx_http_spanprof_exporter_wake_ev;
    ngx_memzero(ev, sizeof(ngx_event_t));
    ev->handler = ngx_http_spanprof_exporter_run_handler;
    ev->log = cycle->log;
    ev->data = &ngx_http_spanprof_exporter_dummy;

    ngx_memzero(ngx_http_spanprof_exporter_conns,
                sizeof(ngx_http_spanprof_exporter_conns));

    loop->data = NULL;
    loop->watch = ngx_http_spanprof_exporter_watch;
    loop->timer = ngx_http_spanprof_exporter_timer;
    loop->wake = ngx_http_spanprof_exporter_wake;
}


/* After sp_exporter_stop (which unwatched every socket): nothing of the
 * exporter may stay in the event loop. */
void
ngx_http_spanprof_exporter_loop_done(void)
{
    if (ngx_http_spanprof_exporter_timer_ev.timer_set) {
        ngx_del_timer(&ngx_http_spanprof_exporter_timer_ev);
    }
    if (ngx_http_spanprof_exporter_wake_ev.posted) {
        ngx_delete_posted_event(&ngx_http_spanprof_exporter_wake_ev);
    }
}


static void
ngx_http_spanprof_exporter_watch(void *data, int fd, unsigned events)
{
    ngx_uint_t         i, slot;
    ngx_event_t       *rev, *wev;
    ngx_connection_t  *c;

    slot = NGX_HTTP_SPANPROF_EXPORTER_CONNS;
    c = NULL;

    for (i = 0; i < NGX_HTTP_SPANPROF_EXPORTER_CONNS; i++) {
        if (ngx_http_spanprof_exporter_conns[i] == NULL) {
            if (slot == NGX_HTTP_SPANPROF_EXPORTER_CONNS) {
                slot = i;
            }
            continue;
        }
        if (ngx_http_spanprof_exporter_conns[i]->fd == fd) {
            c = ngx_http_spanprof_exporter_conns[i];
            break;
        }
    }

    if (c == NULL) {
        if (events == 0) {
            return;
        }
        if (slot == NGX_HTTP_SPANPROF_EXPORTER_CONNS) {
            ngx_log_error(NGX_LOG_ALERT, ngx_http_spanprof_exporter_log, 0,
                          "spanprof: more than %d exporter sockets",
                          NGX_HTTP_SPANPROF_EXPORTER_CONNS);
            return;
        }
        c = ngx_get_connection(fd, ngx_http_spanprof_exporter_log);
        if (c == NULL) {
            return;
        }
        c->data = NULL;
        c->read->handler = ngx_http_spanprof_exporter_io_handler;
        c->write->handler = ngx_http_spanprof_exporter_io_handler;
        c->read->log = c->log;
        c->write->log = c->log;
        ngx_http_spanprof_exporter_conns[slot] = c;
        i = slot;
    }

    rev = c->read;
    wev = c->write;

    /* Level-triggered: libcurl reads and writes as much as it wants. */
    if ((events & SP_IO_IN) && !rev->active) {
        (void) ngx_add_event(rev, NGX_READ_EVENT, NGX_LEVEL_EVENT);
    } else if (!(events & SP_IO_IN) && rev->active) {
        (void) ngx_del_event(rev, NGX_READ_EVENT, 0);
    }
    if ((events & SP_IO_OUT) && !wev->active) {
        (void) ngx_add_event(wev, NGX_WRITE_EVENT, NGX_LEVEL_EVENT);
    } else if (!(events & SP_IO_OUT) && wev->active) {
        (void) ngx_del_event(wev, NGX_WRITE_EVENT, 0);
    }

    if (events == 0) {
        /* As ngx_close_connection: an event of this socket that epoll
         * reported with the one being handled is still posted, and
         * ngx_get_connection zeroes it when the slot (and the fd) is
         * reused, which would cut the posted queue. */
        if (rev->posted) {
            ngx_delete_posted_event(rev);
        }
        if (wev->posted) {
            ngx_delete_posted_event(wev);
        }
        /* libcurl closes the socket itself, after this. */
        ngx_http_spanprof_exporter_conns[i] = NULL;
        ngx_free_connection(c);
        c->fd = (ngx_socket_t) -1;
    }
}


static void
ngx_http_spanprof_exporter_timer(void *data, uint64_t ms)
{
    ngx_event_t  *ev = &ngx_http_spanprof_exporter_timer_ev;

    /* ngx_add_timer() would keep an armed timer within 300 ms of the new
     * time; a wake-up asked for now must not wait that long. */
    if (ev->timer_set) {
        ngx_del_timer(ev);
    }
    if (ms != UINT64_MAX) {
        ngx_add_timer(ev, ms > 86400000 ? 86400000 : (ngx_msec_t) ms);
    }
}


static void
ngx_http_spanprof_exporter_wake(void *data)
{
    ngx_event_t  *ev = &ngx_http_spanprof_exporter_wake_ev;

    if (!ev->posted) {
        ngx_post_event(ev, &ngx_posted_events);
    }
}


static void
ngx_http_spanprof_exporter_run_handler(ngx_event_t *ev)
{
    if (ngx_http_spanprof_exporter != NULL) {
        sp_exporter_run(ngx_http_spanprof_exporter);
    }
}


static void
ngx_http_spanprof_exporter_io_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c = ev->data;

    /* Also called, not ready, by worker_shutdown_timeout's closing of all
     * connections: libcurl takes a readiness that is not there in its
     * stride, and closes its sockets itself, at exit. */
    if (ngx_http_spanprof_exporter != NULL) {
        /* May unwatch and free c. */
        sp_exporter_io(ngx_http_spanprof_exporter, (int) c->fd,
                       ev->write ? SP_IO_OUT : SP_IO_IN);
    }
}
