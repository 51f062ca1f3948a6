#ifndef SP_H2C_REUSE_H
#define SP_H2C_REUSE_H

#include <stdatomic.h>
#include <stdint.h>

/* One h2c (HTTP/2 over plain TCP) connection per loop with libcurl before
 * 8.0.0, which breaks a reused connection when the reusing transfer asks
 * for prior knowledge (it stacks a second HTTP/2 layer on it:
 * curl/curl#10634, fixed in 8.0). Asking for plain HTTP/2 instead reuses
 * and multiplexes fine, but with no live connection it opens one with
 * HTTP/1.1 and "Upgrade: h2c", which a gRPC server refuses. So, per
 * origin (scheme://host:port):
 *   - no live connection: the call goes with prior knowledge on a new
 *     connection (SP_H2C_PRIOR);
 *   - once such a call was answered over HTTP/2, or while one is still
 *     connecting: plain HTTP/2, reusing the connection or waiting for the
 *     one being set up (SP_H2C_REUSE);
 *   - a SP_H2C_REUSE call that opened a new connection and got no HTTP/2
 *     answer (the old connection was dead: the Upgrade path) is re-sent
 *     at once with prior knowledge (counted in reconnects), and the
 *     origin has no live connection again.
 * Only the state machine: no libcurl here (http_client.c applies it). One
 * thread at a time, but reconnects may be read from any. */

#define SP_H2C_ORIGINS     4      /* the exporter uses one or two */
#define SP_H2C_ORIGIN_MAX  256

enum {
    SP_H2C_PRIOR = 1,   /* prior knowledge, on a new connection */
    SP_H2C_REUSE = 2,   /* HTTP/2, reusing / waiting for the connection */
};

typedef struct {
    char      origin[SP_H2C_ORIGIN_MAX];   /* "" when unused */
    int       live;                        /* a prior-knowledge call was
                                              answered over HTTP/2 */
    unsigned  connecting;                  /* SP_H2C_PRIOR calls under way */
    uint64_t  used;                        /* for replacing the oldest */
} sp_h2c_origin_t;

typedef struct {
    sp_h2c_origin_t   o[SP_H2C_ORIGINS];
    uint64_t          clock;
    _Atomic uint64_t  reconnects;          /* calls re-sent (see above) */
} sp_h2c_reuse_t;

/* 1 when the linked libcurl needs all this (before 8.0.0). */
int sp_h2c_reuse_broken(void);

/* How to send a call to url ("http://host:port/path"): SP_H2C_PRIOR or
 * SP_H2C_REUSE; prior forces SP_H2C_PRIOR (a re-sent call: counted in
 * reconnects). */
int sp_h2c_begin(sp_h2c_reuse_t *r, const char *url, int prior);

/* The call sent as mode ended: h2 when it was answered over HTTP/2,
 * new_conn when it opened a connection. Returns 1 when it is to be re-sent
 * at once with sp_h2c_begin(r, url, 1). */
int sp_h2c_end(sp_h2c_reuse_t *r, const char *url, int mode, int h2,
    int new_conn);

uint64_t sp_h2c_reconnects(const sp_h2c_reuse_t *r);

#endif
