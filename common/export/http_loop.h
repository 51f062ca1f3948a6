#ifndef SP_HTTP_LOOP_H
#define SP_HTTP_LOOP_H

#include <stdint.h>

#include "common/export/h2c_reuse.h"

/* The exporter's HTTP transfers, all on one libcurl multi handle, never
 * blocking: libcurl says which sockets it waits on and when it next wants a
 * call, and someone runs it. Either the loop polls itself
 * (sp_http_loop_poll: the exporter thread, or a final flush at exit), or a
 * server's event loop watches those sockets (sp_http_loop_drive, then
 * sp_http_loop_io on readiness and at sp_http_loop_deadline).
 * Transfers (http_client.h) complete through their callbacks, called from
 * sp_http_loop_io and sp_http_loop_poll only. One thread at a time.
 * HTTP/2 transfers to the same host are multiplexed on one connection. */

#define SP_IO_IN   1u
#define SP_IO_OUT  2u

typedef struct sp_http_loop sp_http_loop_t;

/* Watch fd for the SP_IO_* in events, or stop watching it (events 0). */
typedef void (*sp_http_watch_fn)(void *ud, int fd, unsigned events);

sp_http_loop_t *sp_http_loop_new(void);
/* Transfers still under way are abandoned (their clients freed first). */
void sp_http_loop_free(sp_http_loop_t *l);

/* Hands the sockets to a server's event loop (fn called at once for those
 * already open), or takes them back (fn NULL: the old watcher is told to
 * stop watching each). */
void sp_http_loop_drive(sp_http_loop_t *l, sp_http_watch_fn fn, void *ud);

/* Monotonic ns at which libcurl wants sp_http_loop_io(l, -1, 0) (its
 * timeouts, connection progress); UINT64_MAX: no such time. */
uint64_t sp_http_loop_deadline(const sp_http_loop_t *l);

/* Progress on fd (ready for SP_IO_* events), or on time (fd -1). */
void sp_http_loop_io(sp_http_loop_t *l, int fd, unsigned events);

/* Self-driven: waits up to timeout_ms (or libcurl's deadline, if sooner)
 * for the sockets and for extra_fd (-1: none) and makes progress. Returns
 * 1 when extra_fd became readable. */
int sp_http_loop_poll(sp_http_loop_t *l, int extra_fd, uint64_t timeout_ms);

/* The state of the loop's h2c connections (h2c_reuse.h), which live in
 * its connection pool: for http_client.c, and its reconnects counter for
 * anyone. */
sp_h2c_reuse_t *sp_http_loop_h2c(sp_http_loop_t *l);

/* One transfer: a libcurl easy handle, set up by its owner (http_client.c),
 * and what to call when it ends. The loop knows nothing else of it, so the
 * dependency runs one way: client -> loop. */
typedef struct sp_http_transfer  sp_http_transfer_t;

struct sp_http_transfer {
    void   *easy;                          /* CURL * */
    /* From sp_http_loop_io/poll, the handle already out of the loop (done
     * may start the next transfer); curl_result is a CURLcode. */
    void  (*done)(sp_http_transfer_t *t, int curl_result);
};

/* Starts running t; 0, or -1 when libcurl refuses it. */
int sp_http_loop_start(sp_http_loop_t *l, sp_http_transfer_t *t);

/* Takes back a transfer under way; its done is not called. */
void sp_http_loop_cancel(sp_http_loop_t *l, sp_http_transfer_t *t);

#endif
