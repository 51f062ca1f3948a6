#ifndef SERVE_SERVE_GRPC_H
#define SERVE_SERVE_GRPC_H

/* spanprof serve's OTLP/gRPC receiver: one HTTP/2 connection (libnghttp2,
 * server side, h2c with prior knowledge, as gRPC clients talk to http://
 * endpoints) answering the unary calls
 *   /opentelemetry.proto.collector.trace.v1.TraceService/Export
 *   /opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export
 * with the OTLP/HTTP side's ingest (otlp_ingest.h), limits and counters.
 * A message is length-prefixed (a compressed flag, 4 bytes of length);
 * grpc-encoding gzip or identity. Status codes: INVALID_ARGUMENT (not the
 * message, bad gzip, bad framing), RESOURCE_EXHAUSTED (over 16 MiB),
 * UNIMPLEMENTED (another method or encoding), UNAVAILABLE (the store
 * failed, or too much is buffered: the client retries); a content-type
 * other than application/grpc gets HTTP 415, a method other than POST 405.
 *
 * The connection does no I/O itself: bytes read are given to
 * serve_grpc_conn_recv, bytes to send go through the write function, so
 * the listener (serve_grpc_start) and the fuzz target drive it alike.
 * Everything here runs on one thread. */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/serve/serve.h"

#define SERVE_GRPC_MAX_STREAMS   16        /* concurrent, per connection */
#define SERVE_GRPC_MAX_CONNS     256
#define SERVE_GRPC_IDLE_SECONDS  60        /* nothing read: GOAWAY, close */
/* The request bodies all connections may hold at once; past it a call is
 * answered UNAVAILABLE. */
#define SERVE_GRPC_MAX_BUFFERED  (256 * 1024 * 1024)

typedef struct serve_grpc_conn_s  serve_grpc_conn_t;

/* Writes up to n bytes: how many it wrote, 0 when it would block, -1 on
 * an error (the connection is then closed). */
typedef ssize_t (*serve_grpc_write_pt)(void *ud, const uint8_t *p,
    size_t n);

/* NULL when out of memory. Queues the server's SETTINGS. */
serve_grpc_conn_t *serve_grpc_conn_new(serve_t *sv, serve_grpc_write_pt w,
    void *ud);
/* Feeds bytes read from the client (answers are queued); 0, or -1 when
 * the connection must be closed (not HTTP/2, a protocol error: counted in
 * grpc_protocol_errors). */
int serve_grpc_conn_recv(serve_grpc_conn_t *c, const uint8_t *p, size_t n);
/* Writes what is queued until done or the write function would block; 0,
 * or -1 when the connection must be closed. */
int serve_grpc_conn_send(serve_grpc_conn_t *c);
int serve_grpc_conn_want_write(const serve_grpc_conn_t *c);
/* 0 once both sides are done (after a GOAWAY): close it. */
int serve_grpc_conn_alive(const serve_grpc_conn_t *c);
/* Queues a GOAWAY (idle, or serve is stopping). */
void serve_grpc_conn_goaway(serve_grpc_conn_t *c);
void serve_grpc_conn_free(serve_grpc_conn_t *c);

/* --- serve_grpc_listen.c ------------------------------------------------- */

/* Listens on sv->conf.grpc_addr and serves connections on a thread of its
 * own (nothing when grpc_addr is NULL); 0, or -1 with err set. */
int serve_grpc_start(serve_t *sv, char *err, size_t errlen);
void serve_grpc_stop(void);

#endif
