#ifndef SERVE_SERVE_H
#define SERVE_SERVE_H

/* spanprof serve: one process that receives what the modules export over
 * OTLP/HTTP and OTLP/gRPC, stores it (store.h) and serves it: a JSON API
 * under /api/ and the web UI. Three listeners, a thread each: --otlp
 * (libmicrohttpd) and --otlp-grpc (libnghttp2, serve_grpc.h) for the
 * exporters, --ui (libmicrohttpd) for browsers and scripts; one lock
 * serializes the store and the counters. */

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>

#include "cli/serve/otlp_ingest.h"
#include "cli/serve/store.h"

#define SERVE_MAX_BODY  (16 * 1024 * 1024)  /* an OTLP request, unzipped */

typedef struct {
    const char   *otlp_addr;        /* "127.0.0.1:4318" */
    const char   *grpc_addr;        /* "127.0.0.1:4317"; NULL: off */
    const char   *ui_addr;          /* "127.0.0.1:16686" */
    const char   *data_dir;
    const char   *token;            /* NULL: none (local UI only) */
    int64_t       retention_ns;     /* 0: keep by age forever */
    int64_t       max_bytes;        /* 0: no size bound */
} serve_conf_t;

/* What an operator can read at /api/stats. */
typedef struct {
    uint64_t  otlp_requests;
    uint64_t  otlp_bad_requests;    /* 400: not the message, bad gzip */
    uint64_t  otlp_too_large;       /* 413 */
    uint64_t  otlp_unsupported;     /* 404, 405, 415 */
    /* OTLP/gRPC: calls by outcome (grpc_requests: the Export calls that
     * reached the message, as otlp_requests), and connections. */
    uint64_t  grpc_requests;
    uint64_t  grpc_bad_requests;    /* INVALID_ARGUMENT, INTERNAL */
    uint64_t  grpc_too_large;       /* RESOURCE_EXHAUSTED */
    uint64_t  grpc_unsupported;     /* UNIMPLEMENTED, HTTP 405/415 */
    uint64_t  grpc_unavailable;     /* UNAVAILABLE: store failed, overload */
    uint64_t  grpc_connections;     /* accepted */
    uint64_t  grpc_connections_refused;  /* over the connection limit */
    uint64_t  grpc_protocol_errors; /* connections closed on bad HTTP/2 */
    uint64_t  grpc_idle_closed;     /* connections closed when idle */
    uint64_t  spans_accepted, spans_rejected;
    uint64_t  profiles_accepted, profiles_rejected;
    uint64_t  api_requests;
    uint64_t  api_unauthorized;
} serve_counters_t;

typedef struct {
    serve_conf_t       conf;
    serve_store_t     *store;
    pthread_mutex_t    lock;        /* the store and the counters */
    serve_counters_t   counters;
} serve_t;

/* --- serve_http.c: the listeners ----------------------------------------- */

/* Starts both listeners; 0, or -1 with err set. */
int serve_http_start(serve_t *sv, char *err, size_t errlen);
void serve_http_stop(void);

/* "IPV4:PORT" ("localhost:PORT" too); 0, or -1 when invalid. */
int serve_parse_addr(const char *s, struct sockaddr_in *sa);

/* --- request_store.c ----------------------------------------------------- */

/* Stores one OTLP request (traces or profiles, protobuf or JSON) for
 * either listener and counts it: accepted and rejected spans or profiles,
 * or *bad (the listener's own bad-request counter) when it is not the
 * message. With sv->lock held. Returns what the ingest returned. */
int serve_store_request(serve_t *sv, int traces, const uint8_t *body,
    size_t len, int json, serve_ingest_result_t *r, uint64_t *bad);

/* --- serve_api.c: /api/ and the UI's pages ------------------------------- */

typedef struct {
    int          status;
    const char  *content_type;
    sp_buf_t     body;
    const char  *disposition;       /* Content-Disposition, or NULL */
} serve_reply_t;

/* Answers a GET of url (the path) with its query arguments read through
 * arg(ud, name) (NULL: absent). Called under sv->lock. */
void serve_api_get(serve_t *sv, const char *url,
    const char *(*arg)(void *ud, const char *name), void *ud,
    serve_reply_t *r);

/* --- import_dir.c: what the file exporter wrote ------------------------- */

/* The kinds of profile files, in this order: cpu-, wall- (wall and
 * off_cpu), alloc- (alloc_objects, alloc_space), inuse- (inuse_objects,
 * inuse_space). */
#define SERVE_IMPORT_KINDS  4

typedef struct {
    size_t  lines, bad_lines;       /* of traces.jsonl */
    size_t  spans, spans_rejected;
    size_t  profiles, samples;      /* profile files, samples stored */
    size_t  files[SERVE_IMPORT_KINDS];  /* profile files by kind */
    size_t  profiles_rejected;      /* a type of a file with a value out of
                                     * range, or one type too many */
} serve_import_stats_t;

/* Stores DIR/traces.jsonl's spans and the samples of DIR's cpu-, wall-,
 * alloc- and inuse-*.pb.gz, each sample type as OTLP ingest stores it
 * (bad lines are skipped with a warning; a file's type with a value out of
 * range is skipped with a warning and counted); 0, or -1 with err set (an
 * unreadable or undecodable profile file, a store failure). */
int serve_import_dir(serve_t *sv, const char *dir, serve_import_stats_t *st,
    char *err, size_t errlen);

/* --- serve_main.c -------------------------------------------------------- */

int cli_serve_main(int argc, char **argv);

#endif
