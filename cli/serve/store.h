#ifndef SERVE_STORE_H
#define SERVE_STORE_H

/* spanprof serve's database: spans and CPU samples in SQLite, in one file
 * (DIR/spanprof.db, WAL journal), indexed for the UI's and the API's
 * queries. Writes come in batches (serve_store_begin .. commit), and
 * batches are committed together, at least every 250 ms or 50,000 rows
 * (serve_store_flush): a crash loses at most that last uncommitted group,
 * and the file opens again. A batch that fails in the store is rolled
 * back with the rest of its group (counted in rows_lost): check input
 * before adding it. Queries on the store
 * see what is not committed yet. One thread at a time. A file of another
 * schema (PRAGMA user_version) is refused by serve_store_open, untouched. */

#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

typedef struct serve_store serve_store_t;

/* A string given by its bytes (not NUL-terminated); p NULL: absent. */
typedef struct {
    const char  *p;
    size_t       len;
} serve_str_t;

/* One span, as ingested. */
typedef struct {
    uint8_t      trace_id[16];
    uint8_t      span_id[8];
    uint8_t      parent_id[8];
    int          has_parent;
    serve_str_t  service;
    serve_str_t  name;
    serve_str_t  route;             /* http.route */
    serve_str_t  method;            /* http.request.method */
    serve_str_t  target;            /* url.path, or the peer of a CLIENT */
    int          kind;              /* OTLP SpanKind */
    int          http_status;       /* 0: none */
    int          error;             /* status code ERROR */
    int64_t      start_ns, end_ns;
    /* The span's attributes as protobuf: KeyValue messages, each as a
     * length-delimited field; stored packed, keys numbered (attrs_json.h). */
    const uint8_t *attrs;
    size_t       attrs_len;
} serve_span_t;

/* The sample type every database has, number 1: cpu/nanoseconds. */
#define SERVE_TYPE_CPU  1

/* One aggregated sample: a stack (root first, frames joined by ';') and
 * its count and value (in its type's unit: CPU nanoseconds for cpu), in
 * the labels it was taken under. */
typedef struct {
    int64_t      time_ns;           /* the profile's start */
    int64_t      duration_ns;       /* the profile's length */
    const char  *service;
    int64_t      pid;               /* process.pid, 0: unknown */
    const uint8_t *trace_id;        /* 16 bytes, NULL: no request */
    const uint8_t *span_id;         /* 8 bytes */
    const char  *span_name;
    const char  *stack;             /* "main;ngx_...;leaf" */
    int64_t      count;
    int64_t      value;
    int          type;              /* serve_store_type(); 0: cpu */
} serve_sample_t;

typedef struct {
    uint64_t     spans_stored;
    uint64_t     samples_stored;
    uint64_t     spans_deleted;     /* by retention */
    uint64_t     samples_deleted;
    uint64_t     batches_failed;    /* a batch rolled back */
    uint64_t     rows_lost;         /* in a group rolled back */
} serve_store_stats_t;

/* Opens (creating) DIR/spanprof.db; NULL with err set. */
serve_store_t *serve_store_open(const char *dir, char *err, size_t errlen);
void serve_store_close(serve_store_t *s);
/* Spans are stored in parts of 2^bits in arrival order (15 unless set),
 * each part with its own subtree of the indexes on random keys and its
 * summary (part_map.h); tests set small parts to have many. */
void serve_store_set_part_bits(serve_store_t *s, int bits);

/* A batch: begin, adds, then commit (or rollback on a failed add: the
 * batch and the uncommitted ones before it are undone). Each returns 0,
 * or -1 with serve_store_error() saying why. */
int serve_store_begin(serve_store_t *s);
int serve_store_commit(serve_store_t *s);
void serve_store_rollback(serve_store_t *s);
/* Commits what the batches since the last commit hold (also done by
 * commit when due, retain and close); 0, or -1 when the commit failed
 * (those rows are lost and counted). Call it every 250 ms or so. */
int serve_store_flush(serve_store_t *s);
int serve_store_add_span(serve_store_t *s, const serve_span_t *span);
int serve_store_add_sample(serve_store_t *s, const serve_sample_t *sample);
/* The number of sample type `name` (a profile's sample_type, e.g. cpu,
 * wall, off_cpu, inuse_space; unit as it came), added in the open batch
 * when new: > 0; 0 when the database holds as many types as it can (the
 * profile is to be refused), -1 on a store failure. */
int serve_store_type(serve_store_t *s, const char *name, const char *unit);
/* The number of a known type (0: none such), its unit (NULL: none). */
int serve_store_type_find(const serve_store_t *s, const char *name);
const char *serve_store_type_unit(const serve_store_t *s, int type);
const char *serve_store_error(const serve_store_t *s);

/* Retention: deletes spans and samples older than now_ns - max_age_ns
 * (max_age_ns 0: no age bound), then, while the database is larger than
 * max_bytes (0: no bound), the oldest tenth of what is left. Counted in
 * the stats. 0, or -1. */
int serve_store_retain(serve_store_t *s, int64_t now_ns, int64_t max_age_ns,
    int64_t max_bytes);
int64_t serve_store_size(serve_store_t *s);
void serve_store_get_stats(const serve_store_t *s, serve_store_stats_t *st);

/* --- queries: each appends JSON to out; 0, or -1 ------------------------ */

typedef struct {
    const char  *service;           /* NULL: any */
    const char  *route;
    const char  *method;
    int          status;            /* 0: any */
    int64_t      min_duration_ns;
    int64_t      from_ns, to_ns;    /* start in [from, to) */
    int          limit;
    int          slowest;           /* order by duration, not start */
} serve_trace_query_t;

/* ["svc", ...] */
int serve_store_services(serve_store_t *s, sp_buf_t *out);
/* [{"trace_id","root":{span},"spans":N,"duration_ns",...}, ...]: one entry
 * per trace whose root SERVER span (or first span) matches. */
int serve_store_traces(serve_store_t *s, const serve_trace_query_t *q,
    sp_buf_t *out);
/* {"trace_id":..,"spans":[{..., "cpu_samples":N,"cpu_ns":N,"wall_ns":N,
 * "off_cpu_ns":N}, ...]}: the times from the span's spanprof.*_time_ns
 * attributes when it has them, else from its samples (wall_ns and
 * off_cpu_ns null when it has none of the type); 1 when the trace is
 * unknown. */
int serve_store_trace(serve_store_t *s, const uint8_t trace_id[16],
    sp_buf_t *out);

/* [{"pid":N,"service":..,"samples":N,"cpu_ns":N,"in_requests_ns":N,
 *   "first_ns":N,"last_ns":N}, ...]: the workers that sent samples in
 * [from, to), busiest first. */
int serve_store_workers(serve_store_t *s, int64_t from_ns, int64_t to_ns,
    sp_buf_t *out);

/* What a flame graph shows: the samples of a span, of a route's requests
 * in a time range, or of a worker's interval. */
typedef struct {
    const uint8_t *trace_id;        /* with span_id: one span */
    const uint8_t *span_id;
    const char    *service;         /* with route: a route's requests */
    const char    *route;
    int64_t        min_duration_ns, max_duration_ns; /* of those requests */
    int64_t        from_ns, to_ns;  /* sample time / request start */
    int64_t        pid;             /* a worker (0: any), no span filter */
    int            whole;           /* every sample of the range */
    int            type;            /* samples of this type (0: cpu) */
} serve_sample_query_t;

/* [{"type":"cpu","unit":"nanoseconds","gauge":false,"value":N,
 *   "samples":N}, ...]: the types of the samples a query selects (its
 * type ignored). gauge: each profile is a snapshot (inuse_*). */
int serve_store_types(serve_store_t *s, const serve_sample_query_t *q,
    sp_buf_t *out);
/* [{"pid":N,"service":..,"points":[[time_ns,bytes],...]}, ...]: each
 * worker's in-use memory (its inuse_space profiles' sums) in [from, to),
 * by profile; [] when none came. */
int serve_store_memory(serve_store_t *s, int64_t from_ns, int64_t to_ns,
    sp_buf_t *out);

/* Calls fn once per distinct stack of the selected samples of the query's
 * type (of a gauge type, each worker's latest profile in the range); the
 * value is in the type's unit. */
typedef int (*serve_stack_fn)(void *ud, const char *stack, int64_t count,
    int64_t value, int in_request);
int serve_store_stacks(serve_store_t *s, const serve_sample_query_t *q,
    serve_stack_fn fn, void *ud);

#endif
