#ifndef SP_EXPORTER_H
#define SP_EXPORTER_H

#include <stddef.h>
#include <stdint.h>

#include "common/export/export_protocol.h"
#include "common/export/file_output.h"
#include "common/export/http_loop.h"
#include "common/base/log.h"
#include "common/trace/resource.h"
#include "common/trace/span.h"
#include "common/trace/span_queue.h"
#include "common/trace/span_slots.h"
#include "common/profile/symbol_files.h"

/* One exporter per worker process: it drains the span queue, batches,
 * encodes and sends, never blocking on the network. It runs on a thread of
 * its own, or on the server's event loop (conf.loop: nginx, whose worker
 * then stays single-threaded). The request side (span_begin/span_end) never
 * blocks, never does I/O and never allocates.
 *
 * endpoint "http(s)://host[:port][/base]": POST {base}/v1/traces (OTLP/HTTP
 * protobuf, or JSON with protocol http/json: otlp_http_json.h), retried with exponential backoff with jitter (backoff.h) on
 * 429/502/503/504 and network errors, honouring Retry-After (no post before
 * the wait is over, the next batch's included), while at most batch_count
 * encoded batches wait (one while the collector keeps failing: the rest
 * stay in the queue); other 4xx/5xx drop the batch with an error line.
 * With protocol grpc, unary Export calls on the endpoint's scheme://host:
 * port instead (http_client.h), the OTLP retryable gRPC codes and
 * RetryInfo's delay taking the place of those statuses and Retry-After.
 * endpoint "file:///dir": appends OTLP/JSON lines to dir/traces.jsonl,
 * through the descriptors a privileged parent opened (conf.files; see
 * file_output.h: rotation is followed), else by path.
 *
 * With profiling on (and the sampler started in this process) the thread
 * also drains the sample ring, and every profiles_interval_ms exports the
 * aggregated, symbolized CPU profile: OTLP profiles to
 * {base}/v1development/profiles, or dir/cpu-<unix ms>-<pid>.pb.gz (gzip'd
 * pprof) with a file endpoint, and pprof to Pyroscope's {pyroscope}/ingest
 * when pyroscope_url is set.
 *
 * A server whose processes each serve one request at a time (Apache's
 * prefork) shares one exporter among them: each process writes its spans
 * into a queue of shared memory (conf.span_queue, a slot of
 * span_slots.h), and one exporter process (conf.relay) takes them from
 * every slot and sends them. A writer sends no span itself and runs no
 * thread unless it profiles. */

/* The server's event loop running the exporter instead of a thread: it
 * watches the fds watch() names and calls sp_exporter_io when one is
 * ready, and calls sp_exporter_run when the time last given to timer() has
 * passed and soon after wake() (a batch is full; called from span_end). */
typedef struct {
    void    *data;
    void   (*watch)(void *data, int fd, unsigned events); /* SP_IO_*; 0: stop */
    void   (*timer)(void *data, uint64_t ms);   /* UINT64_MAX: none */
    void   (*wake)(void *data);
} sp_exporter_loop_t;

struct sp_exporter;

typedef struct {
    const sp_exporter_loop_t *loop;          /* NULL: a thread of its own */
    const char          *endpoint;           /* NULL: profiles only */
    /* How spans and OTLP profiles go to an http(s) endpoint (export_
     * protocol.h); not used for file:// and Pyroscope. */
    sp_export_protocol_t protocol;
    /* OTEL_EXPORTER_OTLP_TRACES_ENDPOINT over HTTP: the traces URL as is
     * (NULL: {endpoint}/v1/traces). OTLP profiles still go to
     * {endpoint}/v1development/profiles, or with no endpoint to this URL's
     * base (a trailing /v1/traces taken off). Used only in start. */
    const char          *traces_url;
    const char *const   *headers;            /* "Name: value", NULL-ended */
    /* PEM CA certificates for https (copied; NULL: the system's), read
     * by the master/parent: workers may not reach the file. The path
     * only names them in TLS errors. */
    const char          *trusted_certificate;
    const char          *trusted_certificate_pem;
    size_t               trusted_certificate_len;
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
    size_t               profiles_max_size;  /* bytes; 0: the default */
    size_t               profiles_max_samples; /* 0: the default */
    /* otel_profiling_redact: function names containing any of these
     * (case-insensitive) are exported as [REDACTED]; NULL-ended, copied;
     * NULL: off. See symbol_redact.h. */
    const char *const   *profiling_redact;

    /* Opened by the server's master/parent before workers drop their
     * privileges (NULL: by path, in this process); both must outlive
     * the exporter. */
    const sp_file_output_fds_t *files;       /* the file endpoint's */
    const sp_symbol_files_t    *symbol_files;/* mapped ELF files */

    /* Run from the exporter's loop (its thread, or conf.loop's) at every
     * pass, with the monotonic time now: returns the earlier of next and
     * when it wants to run again. The server's glue hands the control
     * API's tick here (control_tick.h), so the exporter need not know
     * the control API. NULL: none. */
    uint64_t           (*tick)(void *data, struct sp_exporter *e,
                               uint64_t now, uint64_t next);
    void                *tick_data;

    /* A writer: spans go into this queue (the caller's, with concurrent
     * producers: a slot of span_slots.h), which another process sends;
     * none is sent from here. Without profiling there is no thread: the
     * tick then runs from sp_exporter_span_end when due. NULL: a queue of
     * its own. */
    sp_span_queue_t     *span_queue;
    /* The exporter process: spans are taken from every slot of these
     * queues (written by other processes) every few ms, and sent. */
    sp_span_slots_t     *relay;
} sp_exporter_conf_t;

typedef struct sp_exporter sp_exporter_t;

typedef struct {
    uint64_t  spans_queued;            /* relay: 0 (counted by writers) */
    uint64_t  spans_exported;
    uint64_t  spans_dropped_queue_full;
    uint64_t  spans_dropped_export;    /* in batches given up or rejected */
    uint64_t  spans_rejected;          /* partial success */
    uint64_t  batches_sent;
    uint64_t  batches_failed;
    uint64_t  retries;
    uint64_t  h2c_reconnects;          /* gRPC calls re-sent (h2c_reuse.h) */
    uint64_t  profiles_exported;
    uint64_t  profiles_failed;
    uint64_t  profiles_rejected;       /* partial success */
    uint64_t  profile_samples;
    uint64_t  functions_redacted;      /* otel_profiling_redact */
    uint64_t  queue_depth;             /* spans waiting in the queue */
    uint64_t  queue_rewinds;           /* span_queue.h */
    uint64_t  profile_builder_dropped;
    uint64_t  profile_bytes_exported;
    uint64_t  profile_bytes_failed;
    /* relay: spans lost with a process killed while writing one
     * (span_slots.h's sealed records) */
    uint64_t  spans_dropped_process_killed;
    uint64_t  relay;                   /* 1: conf.relay's exporter */
} sp_exporter_stats_t;

/* Checks an endpoint URL; NULL when fine, else a static reason. */
const char *sp_exporter_endpoint_error(const char *endpoint);

/* Allocates the queue (room for about batch_size * batch_count spans,
 * SP_SPAN_QUEUE_BYTES_PER_SPAN bytes each: 2 MiB by default) and starts the
 * thread, or arms conf.loop's timer. NULL with err filled on failure. Call
 * in each worker after fork. */
sp_exporter_t *sp_exporter_start(const sp_exporter_conf_t *conf, char *err,
    size_t errlen);

/* Worker side: the calling thread's span to build (sp_span_init, then
 * attributes), NULL when the queue is full (counted); span_end encodes it
 * into the queue (span.h: it is built in the wire format already, most
 * often straight into its queue slot, which holds back the exporter until
 * span_end: every span_begin that returns a span must be ended). One
 * span per thread at a time; with conf.loop, on the loop's thread only
 * (the queue is then a one-thread ring). */
sp_span_t *sp_exporter_span_begin(sp_exporter_t *e);
void sp_exporter_span_end(sp_exporter_t *e, sp_span_t *span);
/* The calling thread will begin a span soon (a server whose threads take
 * turns finds their spans cold): brings its scratch span and the queue's
 * next bytes toward the cache. A hint only. */
void sp_exporter_span_prefetch(sp_exporter_t *e);

/* With conf.loop: the event loop's calls (see sp_exporter_loop_t). */
void sp_exporter_run(sp_exporter_t *e);
void sp_exporter_io(sp_exporter_t *e, int fd, unsigned events);

/* Flushes what is queued within shutdown_timeout_ms, the retries keeping
 * their backoff and Retry-After; a retry due after the bound is not made.
 * What is left is dropped, counted and logged in one line. Stops and
 * frees.
 * With conf.loop, the sockets are first handed back (watch(fd, 0)) and the
 * flush runs in the calling thread. */
void sp_exporter_stop(sp_exporter_t *e);

/* conf.relay: takes no more spans from the slots and lets them go to
 * another process (a restart's next exporter process) at the next step;
 * what this exporter already took is still sent (sp_exporter_stop). Any
 * thread; call it before sp_exporter_stop. */
void sp_exporter_relay_handover(sp_exporter_t *e);

void sp_exporter_get_stats(sp_exporter_t *e, sp_exporter_stats_t *st);

#endif
