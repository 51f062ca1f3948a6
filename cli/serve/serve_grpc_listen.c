#define _GNU_SOURCE     /* accept4, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/serve/serve_grpc.h"

/* The OTLP/gRPC listener: one thread, one poll() over the listening
 * socket, a pipe that says "stop", and the connections (non-blocking).
 * A connection only costs the others time when a whole message is in
 * and is stored, as on the libmicrohttpd side; a slow or silent client
 * is closed once idle. */

typedef struct {
    int                  fd;
    serve_grpc_conn_t   *c;
    time_t               last_read;
} conn_slot_t;

static serve_t      *grpc_sv;
static int           listen_fd = -1, wake[2] = { -1, -1 };
static pthread_t     thread;
static int           running;
static conn_slot_t  *slots[SERVE_GRPC_MAX_CONNS];  /* nslots in use */
static size_t        nslots;

static ssize_t
sock_write(void *ud, const uint8_t *p, size_t n)
{
    conn_slot_t  *sl = ud;
    ssize_t       w = send(sl->fd, p, n, MSG_NOSIGNAL);

    if (w < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
               ? 0 : -1;
    }
    return w;
}

/* The last slot takes the closed one's place. */
static void
slot_close(size_t i)
{
    serve_grpc_conn_free(slots[i]->c);
    close(slots[i]->fd);
    free(slots[i]);
    slots[i] = slots[--nslots];
}

static void
accept_one(void)
{
    int           fd = accept4(listen_fd, NULL, NULL,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
    conn_slot_t  *sl;
    int           one = 1;

    if (fd < 0) {
        return;
    }
    /* A response is several frames, each its own write: without this the
     * trailers wait for the client's delayed ACK (40 ms a call). */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (nslots == SERVE_GRPC_MAX_CONNS) {
        close(fd);
        pthread_mutex_lock(&grpc_sv->lock);
        grpc_sv->counters.grpc_connections_refused++;
        pthread_mutex_unlock(&grpc_sv->lock);
        return;
    }
    sl = calloc(1, sizeof(*sl));
    if (sl != NULL) {
        sl->c = serve_grpc_conn_new(grpc_sv, sock_write, sl);
    }
    if (sl == NULL || sl->c == NULL) {
        free(sl);
        close(fd);
        pthread_mutex_lock(&grpc_sv->lock);
        grpc_sv->counters.grpc_connections_refused++;
        pthread_mutex_unlock(&grpc_sv->lock);
        return;
    }
    sl->fd = fd;
    sl->last_read = time(NULL);
    slots[nslots++] = sl;
    pthread_mutex_lock(&grpc_sv->lock);
    grpc_sv->counters.grpc_connections++;
    pthread_mutex_unlock(&grpc_sv->lock);
}

/* Reads what is there; 0, or -1 when the connection is to be closed. */
static int
slot_read(conn_slot_t *sl)
{
    uint8_t  buf[16384];
    ssize_t  n;
    int      i;

    /* A few reads at most, so that one fast client does not starve the
     * others. */
    for (i = 0; i < 8; i++) {
        n = recv(sl->fd, buf, sizeof(buf), 0);
        if (n == 0) {
            return -1;
        }
        if (n < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? 0 : -1;
        }
        sl->last_read = time(NULL);
        if (serve_grpc_conn_recv(sl->c, buf, (size_t) n) != 0) {
            return -1;
        }
    }
    return 0;
}

static void *
grpc_thread(void *arg)
{
    struct pollfd  pfd[SERVE_GRPC_MAX_CONNS + 2];
    size_t         i, n;
    time_t         now;

    (void) arg;
    for ( ;; ) {
        pfd[0].fd = wake[0];
        pfd[0].events = POLLIN;
        pfd[1].fd = listen_fd;
        pfd[1].events = POLLIN;
        for (i = 0; i < nslots; i++) {
            pfd[i + 2].fd = slots[i]->fd;
            pfd[i + 2].events = POLLIN;
            if (serve_grpc_conn_want_write(slots[i]->c)) {
                pfd[i + 2].events |= POLLOUT;
            }
            pfd[i + 2].revents = 0;
        }
        n = nslots;
        if (poll(pfd, n + 2, 1000) < 0 && errno != EINTR) {
            break;
        }
        if (pfd[0].revents & POLLIN) {
            break;
        }
        now = time(NULL);
        /* Backwards, as slot_close moves the last slot into the hole. */
        for (i = n; i-- > 0; ) {
            conn_slot_t  *sl = slots[i];
            int           bad = 0;

            if (!bad && (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) {
                bad = slot_read(sl) != 0;
            }
            if (!bad && now - sl->last_read >= SERVE_GRPC_IDLE_SECONDS) {
                serve_grpc_conn_goaway(sl->c);
                pthread_mutex_lock(&grpc_sv->lock);
                grpc_sv->counters.grpc_idle_closed++;
                pthread_mutex_unlock(&grpc_sv->lock);
                (void) serve_grpc_conn_send(sl->c);
                bad = 1;
            }
            if (!bad) {
                bad = serve_grpc_conn_send(sl->c) != 0
                      || !serve_grpc_conn_alive(sl->c);
            }
            if (bad) {
                slot_close(i);
            }
        }
        if (pfd[1].revents & POLLIN) {
            accept_one();
        }
    }
    /* Stopping: a GOAWAY (best effort) tells clients not to retry here. */
    while (nslots > 0) {
        serve_grpc_conn_goaway(slots[nslots - 1]->c);
        (void) serve_grpc_conn_send(slots[nslots - 1]->c);
        slot_close(nslots - 1);
    }
    return NULL;
}

int
serve_grpc_start(serve_t *sv, char *err, size_t errlen)
{
    struct sockaddr_in  sa;
    int                 one = 1;
    const char         *addr = sv->conf.grpc_addr;

    if (addr == NULL) {
        return 0;
    }
    if (serve_parse_addr(addr, &sa) != 0) {
        snprintf(err, errlen, "invalid --otlp-grpc address \"%s\": expected "
                 "IPV4:PORT or off", addr);
        return -1;
    }
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       0);
    if (listen_fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa)) != 0
        || listen(listen_fd, 128) != 0)
    {
        snprintf(err, errlen, "cannot listen on %s (in use, or not an "
                 "address of this machine)", addr);
        close(listen_fd);
        listen_fd = -1;
        return -1;
    }
    if (pipe2(wake, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(listen_fd);
        listen_fd = -1;
        return -1;
    }
    grpc_sv = sv;
    if (pthread_create(&thread, NULL, grpc_thread, NULL) != 0) {
        snprintf(err, errlen, "cannot start the gRPC listener's thread");
        close(listen_fd);
        close(wake[0]);
        close(wake[1]);
        listen_fd = -1;
        return -1;
    }
    running = 1;
    return 0;
}

void
serve_grpc_stop(void)
{
    if (!running) {
        return;
    }
    if (write(wake[1], "x", 1) != 1) {
        /* the thread still ends at its next poll: the pipe is closed */
    }
    pthread_join(thread, NULL);
    close(listen_fd);
    close(wake[0]);
    close(wake[1]);
    listen_fd = -1;
    running = 0;
}
