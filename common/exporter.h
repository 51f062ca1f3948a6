#ifndef SP_EXPORTER_H
#define SP_EXPORTER_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "resource.h"
#include "span.h"

/* One exporter per worker process: a background thread that drains the span
 * queue, batches, encodes and sends. The worker side (span_begin/span_end)
 * never blocks, never does I/O and never allocates.
 *
 * endpoint "http(s)://host[:port][/base]": POST {base}/v1/traces (OTLP/HTTP
 * protobuf), retried with exponential backoff on 429/502/503/504 and network
 * errors (honouring Retry-After) while at most batch_count encoded batches
 * wait; other 4xx/5xx drop the batch with an error line.
 * endpoint "file:///dir": appends OTLP/JSON lines to dir/traces.jsonl.
 *
 * With profiling on (and the sampler started in this process) the thread
 * also drains the sample ring, and every profiles_interval_ms exports the
 * aggregated, symbolized CPU profile: OTLP profiles to
 * {base}/v1development/profiles, or dir/cpu-<unix ms>-<pid>.pb.gz (gzip'd
 * pprof) with a file endpoint, and pprof to Pyroscope's {pyroscope}/ingest
 * when pyroscope_url is set. */

typedef struct {
    const char          *endpoint;           /* NULL: profiles only */
    const char *const   *headers;            /* "Name: value", NULL-ended */
    const char          *trusted_certificate;
    int                  gzip;
    uint64_t             interval_ms;        /* flush at least this often */
    size_t               batch_size;         /* spans per request */
    size_t               batch_count;        /* pending batches */
    uint64_t             connect_timeout_ms;
    uint64_t             timeout_ms;         /* one request, all in */
    uint64_t             shutdown_timeout_ms;/* flush bound at stop */
    const sp_resource_t *resource;           /* copied by start */
    sp_logger_t          log;

    int                  profiling;
    uint64_t             profiles_interval_ms;
    const char          *pyroscope_url;      /* NULL: none */
} sp_exporter_conf_t;

typedef struct sp_exporter sp_exporter_t;

typedef struct {
    uint64_t  spans_queued;
    uint64_t  spans_exported;
    uint64_t  spans_dropped_queue_full;
    uint64_t  spans_dropped_export;    /* in batches given up or rejected */
    uint64_t  spans_rejected;          /* partial success */
    uint64_t  batches_sent;
    uint64_t  batches_failed;
    uint64_t  retries;
    uint64_t  profiles_exported;
    uint64_t  profiles_failed;
    uint64_t  profile_samples;
} sp_exporter_stats_t;

/* Checks an endpoint URL; NULL when fine, else a static reason. */
const char *sp_exporter_endpoint_error(const char *endpoint);

/* Allocates the queue (room for about batch_size * batch_count spans,
 * SP_SPAN_QUEUE_BYTES_PER_SPAN bytes each: 2 MiB by default) and starts the
 * thread. NULL with err filled on failure. Call in each worker after fork. */
sp_exporter_t *sp_exporter_start(const sp_exporter_conf_t *conf, char *err,
    size_t errlen);

/* Worker side: the calling thread's span to build (sp_span_init, then
 * attributes), NULL when the queue is full (counted); span_end encodes it
 * into the queue (span.h: it is built in the wire format already). One
 * span per thread at a time. */
sp_span_t *sp_exporter_span_begin(sp_exporter_t *e);
void sp_exporter_span_end(sp_exporter_t *e, sp_span_t *span);

/* Flushes what is queued within shutdown_timeout_ms, stops and frees. */
void sp_exporter_stop(sp_exporter_t *e);

void sp_exporter_get_stats(sp_exporter_t *e, sp_exporter_stats_t *st);

#endif
