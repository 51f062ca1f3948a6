#include <poll.h>
#include <stdlib.h>

#include <curl/curl.h>

#include "common/base/clock.h"
#include "common/export/http_loop.h"

#define MS          1000000ull
#define MAX_FDS     16      /* a few connections and a resolver's pipe */

typedef struct {
    int       fd;
    unsigned  events;
} watched_t;

struct sp_http_loop {
    CURLM             *multi;
    watched_t          fds[MAX_FDS];
    int                nfds;
    uint64_t           deadline;
    sp_http_watch_fn   watch;
    void              *watch_ud;
    sp_h2c_reuse_t     h2c;
};

static int
on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *sockp)
{
    sp_http_loop_t  *l = ud;
    unsigned         events;
    int              i;

    (void) easy;
    (void) sockp;

    events = what == CURL_POLL_IN ? SP_IO_IN
             : what == CURL_POLL_OUT ? SP_IO_OUT
             : what == CURL_POLL_INOUT ? SP_IO_IN | SP_IO_OUT : 0;

    for (i = 0; i < l->nfds && l->fds[i].fd != s; i++) {
        /* find */
    }
    if (events == 0) {
        if (i < l->nfds) {
            l->fds[i] = l->fds[--l->nfds];
        }
    } else if (i < l->nfds) {
        l->fds[i].events = events;
    } else if (l->nfds < MAX_FDS) {
        l->fds[l->nfds].fd = s;
        l->fds[l->nfds].events = events;
        l->nfds++;
    } else {
        return -1;      /* fails the transfer that asked */
    }
    if (l->watch != NULL) {
        l->watch(l->watch_ud, s, events);
    }
    return 0;
}

static int
on_timer(CURLM *multi, long timeout_ms, void *ud)
{
    sp_http_loop_t  *l = ud;

    (void) multi;
    l->deadline = timeout_ms < 0 ? UINT64_MAX
                  : sp_mono_ns() + (uint64_t) timeout_ms * MS;
    return 0;
}

/* The deadline from libcurl's own view of when it next wants a call.
 * Its timer callback announces changes only, and libcurl 7.88 misses one:
 * when a call ends on an HTTP/2 connection, the 0 it announced is dropped
 * with no -1 to say so, and a deadline kept from that woke the server's
 * event loop every millisecond until the next call (each wake a round of
 * epoll, nginx's timers and curl_multi_socket_action, on the worker
 * serving requests). ran_timers: libcurl just ran its due timers; one it
 * still says is due was rounded down and is tried again in a millisecond
 * rather than at once. */
static void
sync_deadline(sp_http_loop_t *l, int ran_timers)
{
    long      ms;
    uint64_t  now;

    if (curl_multi_timeout(l->multi, &ms) != CURLM_OK) {
        return;
    }
    now = sp_mono_ns();
    l->deadline = ms < 0 ? UINT64_MAX
                  : ms == 0 && ran_timers ? now + MS
                  : now + (uint64_t) ms * MS;
}

sp_http_loop_t *
sp_http_loop_new(void)
{
    sp_http_loop_t  *l = calloc(1, sizeof(*l));

    if (l == NULL) {
        return NULL;
    }
    l->multi = curl_multi_init();
    if (l->multi == NULL) {
        free(l);
        return NULL;
    }
    l->deadline = UINT64_MAX;
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
    /* HTTP/2 transfers to one host (gRPC's spans and profiles) share
     * one connection as streams (libcurl's default since 7.62; said
     * here, since the worker's one connection depends on it). */
    curl_multi_setopt(l->multi, CURLMOPT_PIPELINING, (long) CURLPIPE_MULTIPLEX);
    return l;
}

void
sp_http_loop_free(sp_http_loop_t *l)
{
    if (l == NULL) {
        return;
    }
    sp_http_loop_drive(l, NULL, NULL);
    curl_multi_cleanup(l->multi);
    free(l);
}

void
sp_http_loop_drive(sp_http_loop_t *l, sp_http_watch_fn fn, void *ud)
{
    int  i;

    for (i = 0; l->watch != NULL && i < l->nfds; i++) {
        l->watch(l->watch_ud, l->fds[i].fd, 0);
    }
    l->watch = fn;
    l->watch_ud = ud;
    for (i = 0; fn != NULL && i < l->nfds; i++) {
        fn(ud, l->fds[i].fd, l->fds[i].events);
    }
}

uint64_t
sp_http_loop_deadline(const sp_http_loop_t *l)
{
    return l->deadline;
}

void
sp_http_loop_io(sp_http_loop_t *l, int fd, unsigned events)
{
    CURLMsg             *msg;
    CURL                *easy;
    CURLcode             result;
    sp_http_transfer_t  *t;
    int                  running, left, mask = 0, removed = 0;

    if (fd < 0) {
        fd = CURL_SOCKET_TIMEOUT;
    } else {
        mask = (events & SP_IO_IN ? CURL_CSELECT_IN : 0)
               | (events & SP_IO_OUT ? CURL_CSELECT_OUT : 0);
    }
    curl_multi_socket_action(l->multi, fd, mask, &running);
    sync_deadline(l, fd == CURL_SOCKET_TIMEOUT);

    while ((msg = curl_multi_info_read(l->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        easy = msg->easy_handle;
        result = msg->data.result;
        t = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &t);
        /* msg is not valid past the removal. */
        curl_multi_remove_handle(l->multi, easy);
        if (t != NULL) {
            /* May start the owner's next transfer. */
            t->done(t, (int) result);
        }
        removed = 1;
    }
    if (removed) {
        sync_deadline(l, 0);
    }
}

int
sp_http_loop_poll(sp_http_loop_t *l, int extra_fd, uint64_t timeout_ms)
{
    struct pollfd  pfd[MAX_FDS + 1];
    uint64_t       now = sp_mono_ns(), wait;
    int            n = 0, i, woken = 0, rc;

    for (i = 0; i < l->nfds; i++) {
        pfd[n].fd = l->fds[i].fd;
        pfd[n].events = (short) ((l->fds[i].events & SP_IO_IN ? POLLIN : 0)
                                 | (l->fds[i].events & SP_IO_OUT ? POLLOUT
                                                                 : 0));
        pfd[n].revents = 0;
        n++;
    }
    if (extra_fd >= 0) {
        pfd[n].fd = extra_fd;
        pfd[n].events = POLLIN;
        pfd[n].revents = 0;
        n++;
    }

    wait = timeout_ms;
    if (l->deadline != UINT64_MAX) {
        uint64_t  d = l->deadline > now ? (l->deadline - now + MS - 1) / MS
                                        : 0;
        if (d < wait) {
            wait = d;
        }
    }
    rc = poll(pfd, (nfds_t) n, wait > 60000 ? 60000 : (int) wait);

    for (i = 0; rc > 0 && i < n; i++) {
        if (pfd[i].revents == 0) {
            continue;
        }
        if (pfd[i].fd == extra_fd) {
            woken = 1;
            continue;
        }
        /* Errors and hang-ups are for libcurl to read. */
        sp_http_loop_io(l, pfd[i].fd,
                        (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)
                         ? SP_IO_IN : 0)
                        | (pfd[i].revents & (POLLOUT | POLLERR) ? SP_IO_OUT
                                                                : 0));
    }
    if (l->deadline <= sp_mono_ns()) {
        sp_http_loop_io(l, -1, 0);
    }
    return woken;
}

sp_h2c_reuse_t *
sp_http_loop_h2c(sp_http_loop_t *l)
{
    return &l->h2c;
}

int
sp_http_loop_start(sp_http_loop_t *l, sp_http_transfer_t *t)
{
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    return curl_multi_add_handle(l->multi, t->easy) == CURLM_OK ? 0 : -1;
}

void
sp_http_loop_cancel(sp_http_loop_t *l, sp_http_transfer_t *t)
{
    curl_multi_remove_handle(l->multi, t->easy);
}
