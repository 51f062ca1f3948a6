#define _GNU_SOURCE     /* pthread_timedjoin_np */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/base/clock.h"
#include "common/base/prefetch.h"
#include "common/base/url_mask.h"
#include "common/export/backoff.h"
#include "common/export/exporter.h"
#include "common/export/file_output.h"
#include "common/export/grpc_call.h"
#include "common/export/http_client.h"
#include "common/export/otlp_http_json.h"
#include "common/export/otlp_traces.h"
#include "common/profile/load_shedder.h"
#include "common/profile/profile_export.h"
#include "common/trace/span_queue.h"

#define MS                      1000000ull
#define BACKOFF_INITIAL_MS      250
#define BACKOFF_MAX_MS          30000
#define MAX_ATTEMPTS            6
#define REPORT_EVERY_MS         1000
#define ERROR_LOG_EVERY_MS      5000
#define SAMPLE_DRAIN_MS         200     /* the sample ring is emptied this
                                           often, whatever the interval */
#define RELAY_POLL_MS           10      /* the relay takes spans from the
                                           writers' queues this often */

/* An encoded request waiting to be sent (or retried). Sent without a
 * copy (e->in_place), its spans stay in the queue until it is done: the
 * request is then parts, its two heads, the resource and scope packed
 * once, and the spans' records, and mark where its spans end in the
 * queue. */
typedef struct {
    sp_buf_t        body;
    size_t          nspans;
    unsigned        attempts;
    sp_http_part_t *parts;              /* in place: 4 + nspans */
    size_t          len;                /* in place: the request's bytes */
    uint64_t        mark;
    uint8_t         head1[SP_OTLP_TRACES_HEAD_MAX];
    uint8_t         head2[SP_OTLP_TRACES_HEAD_MAX];
} batch_t;

struct sp_exporter {
    sp_exporter_conf_t   conf;
    sp_resource_t        resource;
    char               **headers;
    char                *endpoint;
    char                *trusted_certificate;
    char                *trusted_certificate_pem;
    char                *url;              /* {endpoint}/v1/traces */
    int                  to_file;          /* file://: {dir}/traces.jsonl */
    sp_file_output_t     file;
    char                *profiles_url;     /* {endpoint}/v1development/... */
    char                *pyroscope_url;

    sp_span_queue_t     *queue;
    int                  writer;           /* conf.span_queue: not ours */
    uint64_t             writer_base[2];   /* its committed and dropped
                                              when this process took it */
    int                  writer_ticks;     /* a writer without a thread */
    uint64_t             writer_next_tick; /* span end time (ns) */
    uint64_t             next_relay;       /* conf.relay: mono ns */
    int                  relay_consumer;   /* the slots' consumer now */
    _Atomic int          relay_handover;   /* take no more: let go */
    int                  relay_handed;     /* let go (exporter side) */
    uint64_t             relay_dropped_kept; /* the slots' drops then */
    /* OTLP protobuf over HTTP or gRPC without gzip: batches are sent from
     * the queue (batch_t). held: the spans of pending batches, which the
     * queue still counts. */
    int                  in_place;
    sp_otlp_traces_fixed_t fixed;
    _Atomic size_t       held;
    sp_exporter_loop_t   driver;           /* .timer NULL: own thread */
    int                  wake_fd;          /* the thread's, else -1 */
    pthread_t            thread;
    int                  running;
    _Atomic int          stopping;
    _Atomic uint64_t     deadline;         /* monotonic ns, once stopping */

    /* Exporter side only (its thread or the event loop). */
    sp_http_loop_t      *loop;
    sp_http_client_t    *http;
    int                  sending;          /* the head batch is being posted */
    int                  failing;          /* the last post failed */
    uint64_t             retry_at;         /* no post before (mono ns) */
    sp_backoff_rng_t     rng;              /* the retries' jitter */
    int                  abandon;          /* stopping: no retry in time */
    int                  stop_reported;    /* drops before stop logged */
    int                  profile_flushed;  /* the last one, once stopping */
    int                  finished;
    sp_arena_t           arena;
    const sp_span_rec_t **scratch;
    batch_t             *batches;          /* ring of batch_count */
    size_t               head, npending;
    uint64_t             next_flush;
    uint64_t             last_report, last_error_log;
    uint64_t             reported_queue_drops, reported_export_drops;
    sp_profile_export_t *profiles;
    uint64_t             next_drain;

    _Atomic uint64_t     spans_exported, spans_dropped_export, spans_rejected,
                         batches_sent, batches_failed, retries, spans_queued;
};

const char *
sp_exporter_endpoint_error(const char *endpoint)
{
    if (strncmp(endpoint, "http://", 7) == 0
        || strncmp(endpoint, "https://", 8) == 0)
    {
        if (endpoint[endpoint[4] == 's' ? 8 : 7] == '\0') {
            return "has no host";
        }
        return NULL;
    }
    if (strncmp(endpoint, "file://", 7) == 0) {
        if (endpoint[7] != '/') {
            return "must name an absolute directory (file:///dir)";
        }
        return NULL;
    }
    return "must start with http://, https:// or file://";
}

static char *
concat(const char *a, const char *b)
{
    size_t  la = strlen(a), lb = strlen(b);
    char   *p = malloc(la + lb + 1);

    if (p != NULL) {
        memcpy(p, a, la);
        memcpy(p + la, b, lb + 1);
    }
    return p;
}

static char *
dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static void
exporter_free(sp_exporter_t *e)
{
    size_t  i;

    if (e->headers != NULL) {
        for (i = 0; e->headers[i] != NULL; i++) {
            free(e->headers[i]);
        }
        free(e->headers);
    }
    if (e->batches != NULL) {
        for (i = 0; i < e->conf.batch_count; i++) {
            sp_buf_free(&e->batches[i].body);
            free(e->batches[i].parts);
        }
        free(e->batches);
    }
    free((void *) e->scratch);
    sp_profile_export_free(e->profiles);
    sp_http_client_free(e->http);
    sp_http_loop_free(e->loop);
    free(e->endpoint);
    free(e->trusted_certificate);
    free(e->trusted_certificate_pem);
    free(e->url);
    sp_file_output_close(&e->file);
    free(e->profiles_url);
    free(e->pyroscope_url);
    if (!e->writer) {
        sp_span_queue_destroy(e->queue);
    }
    if (e->relay_consumer) {
        sp_span_slots_consumer_stop(e->conf.relay, (int32_t) getpid());
    }
    sp_otlp_traces_fixed_free(&e->fixed);
    sp_resource_free(&e->resource);
    sp_arena_free(&e->arena);
    if (e->wake_fd >= 0) {
        close(e->wake_fd);
    }
    free(e);
}

/* ---- exporter side: its thread or the server's event loop --------------- */

static void writer_tick(sp_exporter_t *e, uint64_t now_rt);

/* Spans dropped for want of room, as this exporter reports them: the
 * relay's include every writer's (a writer reports none: its drops are
 * the relay's to log, and its status counts them). */
static uint64_t
queue_drops(sp_exporter_t *e)
{
    sp_span_slots_stats_t  ss;

    if (e->writer) {
        return 0;
    }
    if (e->conf.relay != NULL) {
        if (e->relay_handed) {
            return e->relay_dropped_kept + sp_span_queue_dropped(e->queue);
        }
        sp_span_slots_get_stats(e->conf.relay, &ss);
        return ss.dropped + sp_span_queue_dropped(e->queue);
    }
    return sp_span_queue_dropped(e->queue);
}

static int
rate_ok(uint64_t *last, uint64_t now, uint64_t every_ms)
{
    if (*last != 0 && now - *last < every_ms * MS) {
        return 0;
    }
    *last = now;
    return 1;
}

static void
report_drops(sp_exporter_t *e, uint64_t now, int force)
{
    uint64_t  q = queue_drops(e);
    uint64_t  x = atomic_load(&e->spans_dropped_export);

    if ((q == e->reported_queue_drops && x == e->reported_export_drops)
        || (!force && !rate_ok(&e->last_report, now, REPORT_EVERY_MS)))
    {
        return;
    }
    sp_logf(&e->conf.log, SP_LOG_ERR,
            "spanprof: dropped %llu spans (queue full) and %llu spans "
            "(export failed) since the last report",
            (unsigned long long) (q - e->reported_queue_drops),
            (unsigned long long) (x - e->reported_export_drops));
    e->reported_queue_drops = q;
    e->reported_export_drops = x;
}

/* The one line for every span dropped since the stop began: given up
 * before the deadline (the next retry was due after it), or at it. */
static void
report_stop_drops(sp_exporter_t *e)
{
    int       early = e->abandon && sp_mono_ns() < atomic_load(&e->deadline);
    uint64_t  q = queue_drops(e);
    uint64_t  x = atomic_load(&e->spans_dropped_export);
    uint64_t  n = (q - e->reported_queue_drops)
                  + (x - e->reported_export_drops);

    if (n > 0) {
        sp_logf(&e->conf.log, SP_LOG_ERR,
                "spanprof: dropped %llu spans at shutdown: %s the "
                "shutdown timeout (%llu ms)", (unsigned long long) n,
                early ? "the collector's next retry was due after"
                      : "not sent within",
                (unsigned long long) e->conf.shutdown_timeout_ms);
    }
    e->reported_queue_drops = q;
    e->reported_export_drops = x;
}

static void
drop_batch(sp_exporter_t *e, batch_t *b)
{
    atomic_fetch_add(&e->spans_dropped_export, b->nspans);
    atomic_fetch_add(&e->batches_failed, 1);
}

static void
pop_batch(sp_exporter_t *e)
{
    batch_t  t;

    if (e->in_place) {
        /* Its spans leave the queue now (batches end in order). */
        sp_span_queue_release_to(e->queue, e->batches[e->head].nspans,
                                 e->batches[e->head].mark);
        atomic_store_explicit(&e->held, atomic_load_explicit(&e->held,
                              memory_order_relaxed)
                              - e->batches[e->head].nspans,
                              memory_order_relaxed);
    }
    e->head = (e->head + 1) % e->conf.batch_count;
    e->npending--;
    /* With nothing waiting, the next batch goes into the first buffer
     * again: while the collector keeps up, one buffer (hot in the cache)
     * is reused instead of a round of batch_count cold ones. One batch
     * left moves to the first buffer too (the structs swap, not the
     * bytes): while the collector fails, batches are encoded one or two
     * at a time and two buffers are all that is ever used. */
    if (e->npending == 1 && e->head != 0) {
        t = e->batches[0];
        e->batches[0] = e->batches[e->head];
        e->batches[e->head] = t;
    }
    if (e->npending <= 1) {
        e->head = 0;
    }
}

/* A batch of the n spans just peeked, sent from where they are. */
static void
encode_in_place(sp_exporter_t *e, batch_t *b, size_t n)
{
    sp_http_part_t  *pt = b->parts + 4;
    size_t           i, spans_len = 0, h1, h2;

    for (i = 0; i < n; i++) {
        pt[i].data = e->scratch[i]->data;
        pt[i].len = e->scratch[i]->len;
        spans_len += e->scratch[i]->len;
    }
    b->len = sp_otlp_traces_heads(&e->fixed, spans_len, b->head1, &h1,
                                  b->head2, &h2);
    b->parts[0] = (sp_http_part_t) { b->head1, h1 };
    b->parts[1] = (sp_http_part_t) { e->fixed.res, e->fixed.res_len };
    b->parts[2] = (sp_http_part_t) { b->head2, h2 };
    b->parts[3] = (sp_http_part_t) { e->fixed.scope, e->fixed.scope_len };
    b->mark = sp_span_queue_mark(e->queue);
    b->nspans = n;
    b->attempts = 0;
    atomic_store_explicit(&e->held, atomic_load_explicit(&e->held,
                          memory_order_relaxed) + n, memory_order_relaxed);
    e->npending++;
}

static int encode_copy(sp_exporter_t *e, batch_t *b, size_t n);

/* Encodes up to batch_size queued spans into a free pending slot. */
static int
encode_batch(sp_exporter_t *e)
{
    batch_t  *b = &e->batches[(e->head + e->npending) % e->conf.batch_count];
    size_t    n;

    n = sp_span_queue_peek(e->queue, e->scratch, e->conf.batch_size);
    if (n == 0) {
        return 0;
    }
    if (e->in_place) {
        encode_in_place(e, b, n);
    } else if (encode_copy(e, b, n) != 0) {
        return (int) n;
    }
    sp_logf(&e->conf.log, SP_LOG_DEBUG,
            "spanprof: %zu spans encoded, %zu batches pending", n,
            e->npending);
    return (int) n;
}

/* A batch of the n spans just peeked, encoded into its own buffer (gzip,
 * JSON, file): the spans leave the queue at once. -1 when out of memory
 * (the spans are dropped and counted). */
static int
encode_copy(sp_exporter_t *e, batch_t *b, size_t n)
{
    int  rc;

    sp_buf_reset(&b->body);
    rc = e->to_file
         ? sp_otlp_traces_encode_json(&e->arena, &e->resource, e->scratch, n,
                                      &b->body)
         : e->conf.protocol == SP_EXPORT_HTTP_JSON
         ? sp_otlp_http_json_traces(&e->arena, &e->resource, e->scratch, n,
                                    &b->body)
         : sp_otlp_traces_encode(&e->arena, &e->resource, e->scratch, n,
                                 &b->body);
    sp_arena_reset(&e->arena);
    sp_span_queue_release(e->queue, n);
    if (rc != 0) {
        atomic_fetch_add(&e->spans_dropped_export, n);
        sp_logf(&e->conf.log, SP_LOG_ERR,
                "spanprof: out of memory encoding %zu spans", n);
        return -1;
    }
    b->nspans = n;
    b->attempts = 0;
    e->npending++;
    return 0;
}

static void
write_file(sp_exporter_t *e, batch_t *b, uint64_t now)
{
    ssize_t  n;

    /* One write() per batch of lines: with O_APPEND, lines of several
     * worker processes do not interleave. */
    n = sp_file_output_append(&e->file, b->body.data, b->body.len);
    if (n == (ssize_t) b->body.len) {
        atomic_fetch_add(&e->spans_exported, b->nspans);
        atomic_fetch_add(&e->batches_sent, 1);
    } else {
        drop_batch(e, b);
        if (rate_ok(&e->last_error_log, now, ERROR_LOG_EVERY_MS)) {
            sp_logf(&e->conf.log, SP_LOG_ERR,
                    "spanprof: cannot write \"%s/" SP_FILE_OUTPUT_TRACES
                    "\": %s", e->file.dir, strerror(n < 0 ? errno : EIO));
        }
    }
    pop_batch(e);
}


/* HTTP: 429/502/503/504 and network errors; gRPC: the OTLP codes. */
static int
retryable(const sp_http_response_t *resp)
{
    return sp_http_response_retryable(resp);
}

static void traces_posted(void *ud, const sp_http_response_t *resp);

/* Writes the head batch, or starts posting it. */
static void
send_head(sp_exporter_t *e, uint64_t now)
{
    batch_t             *b = &e->batches[e->head];
    sp_http_response_t   failed;
    uint64_t             timeout, deadline;

    if (e->to_file) {
        write_file(e, b, now);
        return;
    }

    timeout = e->conf.timeout_ms * MS;
    if (atomic_load(&e->stopping)) {
        deadline = atomic_load(&e->deadline);
        timeout = deadline > now ? deadline - now : 0;
        if (timeout > e->conf.timeout_ms * MS) {
            timeout = e->conf.timeout_ms * MS;
        }
    }
    if (timeout < MS) {
        timeout = MS;
    }

    b->attempts++;
    e->sending = 1;
    if (e->in_place) {
        /* Its heads, where the batch is now (pop_batch moves batches). */
        b->parts[0].data = b->head1;
        b->parts[2].data = b->head2;
    }
    if ((e->in_place
         ? sp_http_client_post_parts(e->http, e->url,
                                     "application/x-protobuf", b->parts,
                                     4 + b->nspans, b->len, timeout / MS,
                                     traces_posted, e)
         : sp_http_client_post(e->http, e->url,
                               e->conf.protocol == SP_EXPORT_HTTP_JSON
                               ? SP_OTLP_HTTP_JSON_CONTENT_TYPE
                               : "application/x-protobuf",
                               b->body.data, b->body.len, timeout / MS,
                               traces_posted, e)) != 0)
    {
        memset(&failed, 0, sizeof(failed));
        snprintf(failed.error, sizeof(failed.error),
                 "cannot start the request");
        traces_posted(e, &failed);
    }
}

static void
traces_posted(void *ud, const sp_http_response_t *resp)
{
    sp_exporter_t  *e = ud;
    batch_t        *b = &e->batches[e->head];
    uint64_t        now = sp_mono_ns(), delay = 0;
    int64_t         rejected = 0;       /* as with no body */
    int             stopping = atomic_load(&e->stopping);
    char            msg[256], answer[320];

    e->sending = 0;
    e->failing = !sp_http_response_ok(resp);

    if (retryable(resp)) {
        /* The collector is failing or asked for a pause: no post, this
         * batch's retry or the next batch, before the delay is over. */
        delay = sp_backoff_delay_ms(&e->rng, b->attempts, BACKOFF_INITIAL_MS,
                                    BACKOFF_MAX_MS, resp->retry_after_ms);
        e->retry_at = now + delay * MS;
        if (stopping && e->retry_at >= atomic_load(&e->deadline)) {
            /* A retry after the flush bound is not made, nor one sent
             * early: the batch and what waits behind it are dropped and
             * counted when the flush ends (exporter_finish). */
            e->abandon = 1;
            return;
        }
    }

    if (sp_http_response_ok(resp)) {
        atomic_fetch_add(&e->batches_sent, 1);
        if (resp->body.len > 0
            && (e->conf.protocol == SP_EXPORT_HTTP_JSON
                ? sp_otlp_http_json_parse_response(resp->body.data,
                      resp->body.len, "rejectedSpans", &rejected, msg,
                      sizeof(msg))
                : sp_otlp_traces_parse_response(resp->body.data,
                      resp->body.len, &rejected, msg, sizeof(msg))) != 0)
        {
            /* The spans were accepted; only the answer is unreadable. */
            rejected = 0;
            if (rate_ok(&e->last_error_log, now, ERROR_LOG_EVERY_MS)) {
                sp_logf(&e->conf.log, SP_LOG_WARN,
                        "spanprof: collector at %s answered %ld with a body "
                        "that is not an ExportTraceServiceResponse",
                        e->url, resp->status);
            }
        }
        if (rejected > (int64_t) b->nspans) {
            /* A collector cannot reject more than it was sent: the
             * difference would wrap spans_exported round. */
            rejected = (int64_t) b->nspans;
        }
        if (rejected > 0) {
            atomic_fetch_add(&e->spans_rejected, (uint64_t) rejected);
            sp_logf(&e->conf.log, SP_LOG_ERR,
                    "spanprof: collector rejected %lld of %zu spans: %s",
                    (long long) rejected, b->nspans, msg);
        }
        atomic_fetch_add(&e->spans_exported,
                         b->nspans - (rejected > 0 ? (size_t) rejected : 0));
        pop_batch(e);

    } else if (retryable(resp) && b->attempts < MAX_ATTEMPTS) {
        atomic_fetch_add(&e->retries, 1);
        if (rate_ok(&e->last_error_log, now, ERROR_LOG_EVERY_MS)) {
            if (resp->status == 0) {
                sp_logf(&e->conf.log, SP_LOG_ERR,
                        "spanprof: export to %s failed: %s; retrying in "
                        "%llu ms", e->url, resp->error,
                        (unsigned long long) delay);
            } else {
                sp_logf(&e->conf.log, SP_LOG_ERR,
                        "spanprof: collector at %s answered %s; retrying in "
                        "%llu ms", e->url,
                        sp_http_response_describe(resp, answer,
                                                  sizeof(answer)),
                        (unsigned long long) delay);
            }
        }

    } else {
        drop_batch(e, b);
        /* Stopping, a batch given up is in the one line at the end. */
        if (!(stopping && retryable(resp))
            && (rate_ok(&e->last_error_log, now, ERROR_LOG_EVERY_MS)
                || !retryable(resp)))
        {
            if (resp->status == 0) {
                sp_logf(&e->conf.log, SP_LOG_ERR,
                        "spanprof: export to %s failed after %u attempts: "
                        "%s; dropping %zu spans", e->url, b->attempts,
                        resp->error, b->nspans);
            } else {
                sp_logf(&e->conf.log, SP_LOG_ERR,
                        "spanprof: collector at %s answered %s after %u "
                        "attempts; dropping %zu spans", e->url,
                        sp_http_response_describe(resp, answer,
                                                  sizeof(answer)),
                        b->attempts, b->nspans);
            }
        }
        pop_batch(e);
    }
}

/* Spans queued and not yet in a batch. */
static size_t
queue_waiting(sp_exporter_t *e)
{
    size_t  n, h;

    if (e->writer) {
        return 0;       /* sent by another process */
    }
    n = sp_span_queue_pending(e->queue);
    h = atomic_load_explicit(&e->held, memory_order_relaxed);

    return n > h ? n - h : 0;
}

/* The relay's take (span_slots.h): copies spans into this exporter's
 * queue while they fit. */
static size_t
relay_take(void *data, const sp_span_rec_t *const *recs, size_t n)
{
    sp_exporter_t  *e = data;
    size_t          k;

    for (k = 0; k < n; k++) {
        if (!sp_span_queue_push_record(e->queue, recs[k])) {
            break;
        }
    }
    return k;
}

/* Everything the writers have committed, as far as this queue has room
 * (the rest waits in theirs, whose room the writers see). */
static void
relay_take_all(sp_exporter_t *e)
{
    /* Handed over: the next exporter process takes them from here on. */
    if (atomic_load(&e->relay_handover)) {
        if (!e->relay_handed) {
            sp_span_slots_stats_t  ss;

            /* The drops reported so far stay this one's; later ones are
             * the next process's to report. */
            sp_span_slots_get_stats(e->conf.relay, &ss);
            e->relay_dropped_kept = ss.dropped;
            e->relay_handed = 1;
            if (e->relay_consumer) {
                sp_span_slots_consumer_stop(e->conf.relay,
                                            (int32_t) getpid());
                e->relay_consumer = 0;
            }
        }
        return;
    }
    /* One consumer at a time: after a restart, the old exporter process
     * may still be taking its last spans. */
    if (!e->relay_consumer) {
        if (sp_span_slots_consumer_start(e->conf.relay, (int32_t) getpid())
            != 0)
        {
            return;
        }
        e->relay_consumer = 1;
    }
    while (sp_span_slots_drain(e->conf.relay, relay_take, e,
                               e->conf.batch_size)
           == e->conf.batch_size)
    {
        /* more */
    }
}

/* Does what is due without blocking; returns when it next has something to
 * do (monotonic ns). Sets e->finished once stopping and done. */
static uint64_t
exporter_step(sp_exporter_t *e)
{
    uint64_t  now = sp_mono_ns(), t, deadline;
    int       stopping, progress;

    stopping = atomic_load(&e->stopping);
    deadline = stopping ? atomic_load(&e->deadline) : 0;

    if (sp_http_loop_deadline(e->loop) <= now) {
        sp_http_loop_io(e->loop, -1, 0);
    }

    if (stopping && !e->stop_reported) {
        /* Drops from before the stop get their line now: the flush's own
         * are said once, when it ends. A retry already due past the
         * deadline is not waited for. */
        report_drops(e, now, 1);
        e->stop_reported = 1;
        if (e->retry_at >= deadline) {
            e->abandon = 1;
        }
    }

    if (e->profiles != NULL) {
        if (stopping ? !e->profile_flushed
                     : now >= sp_profile_export_due(e->profiles))
        {
            uint64_t  t0 = now;
            int       postponed;

            /* The last one goes out with what time is left. */
            postponed = sp_profile_export_flush(e->profiles,
                                    !stopping ? e->conf.timeout_ms
                                    : deadline > now + MS
                                    ? (deadline - now) / MS : 1);
            /* Stopping, a postponed last profile is tried again when
             * the post ahead of it ends (or the deadline comes). */
            e->profile_flushed = stopping && !postponed;
            now = sp_mono_ns();
            /* On nginx this time is taken from the worker's event loop. */
            sp_logf(&e->conf.log, SP_LOG_DEBUG,
                    "spanprof: profile built, encoded and handed over in "
                    "%llu us", (unsigned long long) ((now - t0) / 1000));
        } else if (now >= e->next_drain) {
            sp_profile_export_drain(e->profiles);
        }
        sp_load_shedder_tick(&e->conf.log);     /* acts once a second */
        if (now >= e->next_drain) {
            e->next_drain = now + SAMPLE_DRAIN_MS * MS;
        }
    }

    if (e->conf.relay != NULL && (now >= e->next_relay || stopping)) {
        relay_take_all(e);
        e->next_relay = now + RELAY_POLL_MS * MS;
    }

    /* Fill pending batches: full batches at once, partial ones when the
     * interval is due or the process stops. One at a time while posts
     * fail: the spans behind it wait in the queue, so a collector that is
     * down holds the queue and one encoded batch, not a second copy of
     * everything in batch_count buffers. */
    do {
        progress = 0;
        if (!e->writer && e->npending < e->conf.batch_count && !e->abandon
            && (!e->failing || e->npending == 0)
            && (queue_waiting(e) >= e->conf.batch_size
                || now >= e->next_flush || stopping))
        {
            progress = encode_batch(e) > 0;
        }
    } while (progress);
    if (now >= e->next_flush) {
        e->next_flush = now + e->conf.interval_ms * MS;
    }

    /* Files are written at once; a post runs on the loop. Backoff and
     * Retry-After hold while stopping too, within the deadline. */
    while (e->npending > 0 && !e->sending && !e->abandon
           && now >= e->retry_at && !(stopping && now >= deadline))
    {
        send_head(e, now);
        if (!e->to_file) {
            break;
        }
    }

    if (!stopping) {
        report_drops(e, now, 0);
    }

    if (stopping
        && (now >= deadline
            || ((e->abandon
                 || (e->npending == 0 && queue_waiting(e) == 0))
                && !(e->profiles != NULL
                     && sp_profile_export_busy(e->profiles)))))
    {
        e->finished = 1;
        return now;
    }

    t = stopping ? deadline : e->next_flush;
    if (e->npending > 0 && !e->sending && !e->abandon && e->retry_at < t) {
        t = e->retry_at;
    }
    if (e->profiles != NULL && !stopping) {
        if (e->next_drain < t) {
            t = e->next_drain;
        }
        if (sp_profile_export_due(e->profiles) < t) {
            t = sp_profile_export_due(e->profiles);
        }
    }
    if (sp_http_loop_deadline(e->loop) < t) {
        t = sp_http_loop_deadline(e->loop);
    }
    if (e->conf.relay != NULL && !stopping && e->next_relay < t) {
        t = e->next_relay;
    }
    if (e->conf.tick != NULL) {        /* the control API's status/control */
        t = e->conf.tick(e->conf.tick_data, e, now, t);
    }
    return t;
}

/* Whatever is left when stopping could not be sent in time. */
static void
exporter_finish(sp_exporter_t *e)
{
    uint64_t  v;

    while (e->npending > 0) {
        drop_batch(e, &e->batches[e->head]);
        pop_batch(e);
    }
    v = sp_span_queue_pending(e->queue);
    atomic_fetch_add(&e->spans_dropped_export, v);
    report_stop_drops(e);
}

/* Runs the exporter in the calling thread until it is stopped and done. */
static void
exporter_loop(sp_exporter_t *e)
{
    uint64_t  t, now, wait, v;

    for ( ;; ) {
        t = exporter_step(e);
        if (e->finished) {
            break;
        }
        now = sp_mono_ns();
        wait = t > now ? (t - now + MS - 1) / MS : 0;
        if (sp_http_loop_poll(e->loop, e->wake_fd, wait)
            && read(e->wake_fd, &v, sizeof(v)) < 0)
        {
            /* EAGAIN: another read took it; nothing to do. */
        }
    }
    exporter_finish(e);
}

static void *
exporter_thread(void *arg)
{
    sp_exporter_t  *e = arg;

    exporter_loop(e);
    return NULL;
}

void
sp_exporter_run(sp_exporter_t *e)
{
    uint64_t  t, now;

    if (atomic_load(&e->stopping)) {
        return;
    }
    t = exporter_step(e);
    now = sp_mono_ns();
    e->driver.timer(e->driver.data,
                    t == UINT64_MAX ? UINT64_MAX
                    : t > now ? (t - now + MS - 1) / MS : 0);
}

void
sp_exporter_io(sp_exporter_t *e, int fd, unsigned events)
{
    sp_http_loop_io(e->loop, fd, events);
    sp_exporter_run(e);
}

/* ---- worker side ------------------------------------------------------- */

/* A writer's queue is another process's to read: its counts from here on
 * are this process's. */
static void
writer_attach(sp_exporter_t *e, sp_span_queue_t *q)
{
    e->queue = q;
    e->writer = 1;
    e->writer_base[0] = sp_span_queue_committed(q);
    e->writer_base[1] = sp_span_queue_dropped(q);
}

sp_exporter_t *
sp_exporter_start(const sp_exporter_conf_t *conf, char *err, size_t errlen)
{
    sp_exporter_t  *e;
    const char             *why, *ep;
    size_t                  n, i;
    int                     rc;
    sp_http_client_conf_t   client_conf;

    /* No endpoint: profiles for Pyroscope only, no spans. */
    ep = conf->endpoint != NULL ? conf->endpoint : conf->traces_url;
    why = ep != NULL ? sp_exporter_endpoint_error(ep) : NULL;
    if (why == NULL && conf->traces_url != NULL) {
        why = sp_exporter_endpoint_error(ep = conf->traces_url);
    }
    if (why != NULL) {
        char  masked[512];

        /* err goes to a log line: no credentials (url_mask.h). */
        snprintf(err, errlen, "endpoint \"%s\" %s",
                 sp_url_mask(ep, masked, sizeof(masked)), why);
        return NULL;
    }

    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->wake_fd = -1;
    e->file.dir_fd = -1;
    e->file.traces_fd = -1;
    e->conf = *conf;
    if (conf->loop != NULL) {
        e->driver = *conf->loop;
    }
    e->conf.loop = NULL;
    if (e->conf.batch_size == 0) {
        e->conf.batch_size = 512;
    }
    if (e->conf.batch_count == 0) {
        e->conf.batch_count = 4;
    }
    if (e->conf.interval_ms == 0) {
        e->conf.interval_ms = 5000;
    }
    if (e->conf.timeout_ms == 0) {
        e->conf.timeout_ms = 10000;
    }
    if (e->conf.shutdown_timeout_ms == 0) {
        e->conf.shutdown_timeout_ms = 2000;
    }
    sp_arena_init(&e->arena, 256 * 1024);

    /* Own copies of everything the thread reads. */
    ep = conf->endpoint != NULL ? conf->endpoint : conf->traces_url;
    e->endpoint = strdup(ep != NULL ? ep : "");
    e->conf.traces_url = NULL;          /* the caller's; read below only */
    e->trusted_certificate = dup_or_null(conf->trusted_certificate);
    if (conf->trusted_certificate_pem != NULL) {
        e->trusted_certificate_pem = malloc(conf->trusted_certificate_len + 1);
        if (e->trusted_certificate_pem == NULL) {
            goto nomem;
        }
        memcpy(e->trusted_certificate_pem, conf->trusted_certificate_pem,
               conf->trusted_certificate_len);
        e->trusted_certificate_pem[conf->trusted_certificate_len] = '\0';
    }
    for (n = 0; conf->headers != NULL && conf->headers[n] != NULL; n++) {
        /* count */
    }
    e->headers = calloc(n + 1, sizeof(char *));
    for (i = 0; e->headers != NULL && i < n; i++) {
        e->headers[i] = strdup(conf->headers[i]);
        if (e->headers[i] == NULL) {
            goto nomem;
        }
    }
    if (e->endpoint == NULL || e->headers == NULL) {
        goto nomem;
    }
    e->conf.endpoint = e->endpoint;
    e->conf.trusted_certificate = e->trusted_certificate;
    e->conf.trusted_certificate_pem = e->trusted_certificate_pem;
    e->conf.headers = (const char *const *) e->headers;
    e->conf.resource = NULL;
    e->conf.profiling_redact = NULL;    /* copied by the profile export */
    if (conf->resource != NULL) {
        memset(&e->resource, 0, sizeof(e->resource));
        for (i = 0; i < conf->resource->nattrs; i++) {
            const sp_resource_attr_t  *a = &conf->resource->attrs[i];
            char                       num[32];

            if (a->str == NULL) {
                snprintf(num, sizeof(num), "%lld", (long long) a->num);
            }
            if (sp_resource_set(&e->resource, a->key,
                                a->str != NULL ? a->str : num) != 0)
            {
                goto nomem;
            }
            if (a->str == NULL) {
                e->resource.attrs[e->resource.nattrs - 1].str = NULL;
                e->resource.attrs[e->resource.nattrs - 1].num = a->num;
            }
        }
    }

    /* A writer that does not profile sends nothing from this process (the
     * exporter process sends its spans): no libcurl, no client, no batch
     * buffers. Under prefork that is every child's start. */
    if (conf->span_queue != NULL && !conf->profiling && conf->loop == NULL) {
        writer_attach(e, conf->span_queue);
        if (e->conf.tick != NULL) {
            /* Nothing to run but the tick: from span_end, and once now. */
            e->writer_ticks = 1;
            writer_tick(e, sp_now_ns());
        }
        return e;
    }

    curl_global_init(CURL_GLOBAL_DEFAULT);
    e->loop = sp_http_loop_new();
    if (e->loop == NULL) {
        goto nomem;
    }
    client_conf = (sp_http_client_conf_t) {
        .headers = e->conf.headers,
        .ca_pem = e->trusted_certificate_pem,
        .ca_pem_len = e->conf.trusted_certificate_len,
        .ca_name = e->trusted_certificate,
        .connect_timeout_ms = e->conf.connect_timeout_ms,
        .gzip = e->conf.gzip,
    };
    if (e->endpoint[0] == '\0') {
        /* no span export */
    } else if (strncmp(e->endpoint, "file://", 7) == 0) {
        if (sp_file_output_open(&e->file, e->endpoint + 7, conf->files, err,
                                errlen) != 0)
        {
            exporter_free(e);
            return NULL;
        }
        e->to_file = 1;
    } else if (conf->protocol == SP_EXPORT_GRPC) {
        /* The services' methods on scheme://host:port; a base path of
         * the endpoint is not gRPC's. */
        e->url = sp_grpc_method_url(e->endpoint, SP_GRPC_TRACES_METHOD);
        e->profiles_url = sp_grpc_method_url(e->endpoint,
                                             SP_GRPC_PROFILES_METHOD);
        if (e->url == NULL || e->profiles_url == NULL) {
            goto nomem;
        }
        client_conf.grpc = 1;
        e->http = sp_http_client_new(e->loop, &client_conf);
        if (e->http == NULL) {
            goto nomem;
        }
    } else {
        n = strlen(e->endpoint);
        if (conf->traces_url != NULL && conf->endpoint == NULL) {
            /* Profiles to the traces URL's base: "/v1/traces" off. */
            if (n >= 10 && strcmp(e->endpoint + n - 10, "/v1/traces") == 0) {
                e->endpoint[n -= 10] = '\0';
            }
        }
        /* "http://h:4318/" and "http://h:4318" name the same base. */
        e->url = conf->traces_url != NULL
                 ? strdup(conf->traces_url)
                 : concat(e->endpoint,
                          n > 0 && e->endpoint[n - 1] == '/' ? "v1/traces"
                                                             : "/v1/traces");
        e->profiles_url = concat(e->endpoint,
                                 n > 0 && e->endpoint[n - 1] == '/'
                                 ? "v1development/profiles"
                                 : "/v1development/profiles");
        if (e->url == NULL || e->profiles_url == NULL) {
            goto nomem;
        }
        e->http = sp_http_client_new(e->loop, &client_conf);
        if (e->http == NULL) {
            goto nomem;
        }
    }

    /* Batches sent from the queue: OTLP protobuf (HTTP or gRPC) without
     * gzip, which needs the request whole. Their spans stay in the queue
     * while they wait (no batch buffers: the queue is the whole memory
     * bound). */
    e->in_place = !e->to_file && e->http != NULL && !conf->gzip
                  && conf->protocol != SP_EXPORT_HTTP_JSON;
    /* On a server's event loop, spans are queued and sent by one thread. */
    /* The relay's queue is filled and read by its thread alone. */
    if (conf->span_queue != NULL) {
        writer_attach(e, conf->span_queue);
    } else {
        e->queue = sp_span_queue_create(e->conf.batch_size
                                        * e->conf.batch_count,
                                        e->driver.timer != NULL
                                        || conf->relay != NULL);
    }
    e->scratch = calloc(e->conf.batch_size, sizeof(sp_span_rec_t *));
    e->batches = calloc(e->conf.batch_count, sizeof(batch_t));
    if (e->queue == NULL || e->scratch == NULL || e->batches == NULL) {
        goto nomem;
    }
    /* Spans leave the queue a batch at a time (record_ring.h's rewind). A
     * writer's queue is the relay's to set. */
    if (!e->writer) {
        sp_span_queue_set_batch(e->queue, e->conf.batch_size);
    }
    for (i = 0; i < e->conf.batch_count; i++) {
        sp_buf_init(&e->batches[i].body);
        if (e->in_place) {
            e->batches[i].parts = calloc(4 + e->conf.batch_size,
                                         sizeof(sp_http_part_t));
            if (e->batches[i].parts == NULL) {
                goto nomem;
            }
        }
    }
    if (e->in_place
        && sp_otlp_traces_fixed_init(&e->fixed, &e->arena, &e->resource) != 0)
    {
        goto nomem;
    }
    sp_arena_reset(&e->arena);

    if (conf->profiling) {
        if (conf->pyroscope_url != NULL) {
            e->pyroscope_url = strdup(conf->pyroscope_url);
            if (e->pyroscope_url == NULL) {
                goto nomem;
            }
        }
        e->profiles = sp_profile_export_new(&(sp_profile_export_conf_t) {
            .loop = e->loop,
            .otlp_url = e->profiles_url,
            .otlp_http = &client_conf,
            .otlp_json = conf->protocol == SP_EXPORT_HTTP_JSON,
            .file = e->to_file ? &e->file : NULL,
            .symbol_files = conf->symbol_files,
            .pyroscope_url = e->pyroscope_url,
            .resource = &e->resource,
            .interval_ms = conf->profiles_interval_ms
                           ? conf->profiles_interval_ms : 10000,
            .max_size = conf->profiles_max_size,
            .max_samples = conf->profiles_max_samples,
            .log = &e->conf.log,
            .redact = conf->profiling_redact,
        });
        if (e->profiles == NULL) {
            goto nomem;
        }
    }

    /* Workers that fail together must not retry together. */
    sp_backoff_seed(&e->rng, sp_mono_ns() ^ ((uint64_t) getpid() << 32)
                             ^ (uint64_t) (uintptr_t) e);
    e->next_flush = sp_mono_ns() + e->conf.interval_ms * MS;
    e->next_drain = sp_mono_ns() + SAMPLE_DRAIN_MS * MS;

    if (e->driver.timer != NULL) {
        sp_http_loop_drive(e->loop, e->driver.watch, e->driver.data);
        sp_exporter_run(e);
        return e;
    }
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->wake_fd < 0) {
        snprintf(err, errlen, "eventfd() failed: %s", strerror(errno));
        exporter_free(e);
        return NULL;
    }

    rc = pthread_create(&e->thread, NULL, exporter_thread, e);
    if (rc != 0) {
        snprintf(err, errlen, "pthread_create() failed: %s", strerror(rc));
        exporter_free(e);
        return NULL;
    }
    e->running = 1;
    return e;

nomem:
    snprintf(err, errlen, "out of memory");
    exporter_free(e);
    return NULL;
}

/* Each thread builds its spans in a scratch span of its own, hot in its
 * cache, before they are encoded into the queue. Touched only from request
 * code, never from a signal handler.
 *
 * The scratch is on the heap and the TLS holds only its address: that
 * keeps the module's whole TLS block under 100 bytes, small enough for
 * glibc to place a dlopen()ed module's block in its surplus static TLS,
 * where every TLSDESC access (otel_thread_ctx_v1 included) resolves to
 * _dl_tlsdesc_return, a load, instead of a ~35-instruction call into
 * _dl_tlsdesc_dynamic; Apache binds and reads its labels about ten times
 * per request. glibc does not give that budget back on dlclose(): after
 * about five loads into one process (apache2 loads modules twice at start
 * and again at each restart, nginx at each reload) the block is dynamic
 * again, which is only slower. The key frees the scratch when its thread exits (mod_http2
 * ends idle workers). */
static _Thread_local sp_span_t  *span_scratch;
static pthread_key_t             span_scratch_key;
static pthread_once_t            span_scratch_once = PTHREAD_ONCE_INIT;
static int                       span_scratch_keyed;

static void
span_scratch_key_create(void)
{
    span_scratch_keyed = pthread_key_create(&span_scratch_key, free) == 0;
}

static __attribute__((noinline)) sp_span_t *
span_scratch_create(void)
{
    sp_span_t  *s;

    pthread_once(&span_scratch_once, span_scratch_key_create);
    if (!span_scratch_keyed) {
        return NULL;
    }
    s = calloc(1, sizeof(*s));     /* as the TLS span it replaces */
    if (s == NULL) {
        return NULL;
    }
    if (pthread_setspecific(span_scratch_key, s) != 0) {
        free(s);
        return NULL;
    }
    span_scratch = s;
    return s;
}

/* A writer without a thread: the tick its loop would run, at a span's
 * end (now_rt: its end time) once the tick is due. */
static void
writer_tick(sp_exporter_t *e, uint64_t now_rt)
{
    uint64_t  now = sp_mono_ns(), t;

    t = e->conf.tick(e->conf.tick_data, e, now, UINT64_MAX);
    e->writer_next_tick = now_rt + (t > now ? t - now : 0);
}

sp_span_t *
sp_exporter_span_begin(sp_exporter_t *e)
{
    sp_span_t  *s;

    s = span_scratch;
    if (s == NULL && (s = span_scratch_create()) == NULL) {
        sp_span_queue_refuse(e->queue);     /* no memory: a drop */
        return NULL;
    }
    /* The span is written into its queue slot, whose reservation is the
     * room check. Without a slot (no room for the largest span; with
     * concurrent producers, a queue half full), a span that would not fit
     * is not built at all (counted as a drop). */
    s->place = sp_span_queue_place(e->queue);
    if (s->place == NULL && !sp_span_queue_has_room(e->queue)) {
        return NULL;
    }
    return s;
}

void
sp_exporter_span_prefetch(sp_exporter_t *e)
{
    sp_span_t  *s = span_scratch;

    /* The span's fields before its storage (ids, times, counts, where its
     * attributes go): the lines sp_span_init() and the server's span
     * writer touch whatever the span holds. */
    if (s != NULL) {
        sp_prefetch_for_write(s, (char *) s + offsetof(sp_span_t, events));
    }
    sp_span_queue_prefetch(e->queue);
}

void
sp_exporter_span_end(sp_exporter_t *e, sp_span_t *span)
{
    static const uint64_t  one = 1;
    size_t                 n;

    if (span->place != NULL) {
        span->place = NULL;
        n = sp_span_queue_commit_placed(e->queue, span);
    } else {
        n = sp_span_queue_push(e->queue, span);
    }
    if (e->writer_ticks && span->end_ns >= e->writer_next_tick) {
        writer_tick(e, span->end_ns);
    }
    /* Wake the exporter once per full batch, not per span (a writer's is
     * another process, which polls). */
    if (n == e->conf.batch_size && !e->writer) {
        if (e->driver.wake != NULL) {
            e->driver.wake(e->driver.data);
        } else if (write(e->wake_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is saturated, the thread is awake. */
        }
    }
}

/* The line a stopping exporter ends with. A writer's spans are this
 * process's since it took its queue (no other writes into it meanwhile). */
static void
exporter_log_totals(sp_exporter_t *e)
{
    sp_exporter_stats_t  st;
    char                 spans[160];

    sp_exporter_get_stats(e, &st);
    if (e->writer) {
        snprintf(spans, sizeof(spans), "span writer stopped: %llu spans "
                 "queued for the exporter process, %llu dropped (queue full)",
                 (unsigned long long) (sp_span_queue_committed(e->queue)
                                       - e->writer_base[0]),
                 (unsigned long long) (sp_span_queue_dropped(e->queue)
                                       - e->writer_base[1]));
    } else {
        snprintf(spans, sizeof(spans), "exporter stopped: %llu spans "
                 "exported, %llu dropped (queue full), %llu dropped (export "
                 "failed)", (unsigned long long) st.spans_exported,
                 (unsigned long long) st.spans_dropped_queue_full,
                 (unsigned long long) st.spans_dropped_export);
    }
    sp_logf(&e->conf.log, SP_LOG_INFO, "spanprof: %s; %llu profiles "
            "exported from %llu samples, %llu failed", spans,
            (unsigned long long) st.profiles_exported,
            (unsigned long long) st.profile_samples,
            (unsigned long long) st.profiles_failed);
}

void
sp_exporter_stop(sp_exporter_t *e)
{
    static const uint64_t  one = 1;
    struct timespec        ts;
    uint64_t               grace;
    int                    rc;

    if (e == NULL) {
        return;
    }
    if (e->driver.timer != NULL) {
        /* The event loop lets go; the flush runs here, self-driven. */
        atomic_store(&e->deadline,
                     sp_mono_ns() + e->conf.shutdown_timeout_ms * MS);
        atomic_store(&e->stopping, 1);
        e->driver.timer(e->driver.data, UINT64_MAX);
        sp_http_loop_drive(e->loop, NULL, NULL);
        exporter_loop(e);

    } else if (e->running) {
        atomic_store(&e->deadline,
                     sp_mono_ns() + e->conf.shutdown_timeout_ms * MS);
        atomic_store(&e->stopping, 1);
        if (write(e->wake_fd, &one, sizeof(one)) < 0) {
            /* saturated: already awake */
        }
        /* The thread keeps to the deadline itself; the join allows some
         * slack for a request that is being torn down. */
        clock_gettime(CLOCK_REALTIME, &ts);
        grace = (e->conf.shutdown_timeout_ms + 1000) * MS;
        ts.tv_sec += (time_t) (grace / 1000000000u);
        ts.tv_nsec += (long) (grace % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        rc = pthread_timedjoin_np(e->thread, NULL, &ts);
        if (rc != 0) {
            /* Still inside a request: leave it (and its memory) to process
             * exit rather than free what it uses. */
            sp_logf(&e->conf.log, SP_LOG_ERR,
                    "spanprof: exporter thread did not stop in time");
            return;
        }
    }
    exporter_log_totals(e);
    exporter_free(e);
}

void
sp_exporter_relay_handover(sp_exporter_t *e)
{
    static const uint64_t  one = 1;

    if (e == NULL || e->conf.relay == NULL) {
        return;
    }
    atomic_store(&e->relay_handover, 1);
    if (e->wake_fd >= 0 && write(e->wake_fd, &one, sizeof(one)) < 0) {
        /* saturated: already awake */
    }
}

void
sp_exporter_get_stats(sp_exporter_t *e, sp_exporter_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    st->spans_exported = atomic_load(&e->spans_exported);
    st->spans_queued = sp_span_queue_committed(e->queue);
    st->queue_depth = queue_waiting(e);
    st->spans_dropped_queue_full = sp_span_queue_dropped(e->queue);
    st->queue_rewinds = sp_span_queue_rewinds(e->queue);
    if (e->writer) {
        /* The relay counts what every writer queued (the slots' counters
         * are shared): a writer's own would be read late (it publishes at
         * its requests' ends) and lost when it exits. */
        st->spans_queued = 0;
        st->spans_dropped_queue_full = 0;
        st->queue_rewinds = 0;
    } else if (e->conf.relay != NULL && atomic_load(&e->relay_handover)) {
        /* The slots' counters are the next exporter process's now: this
         * one reports only what is left in its own queue. */
        st->spans_queued = 0;
        st->relay = 1;
    } else if (e->conf.relay != NULL) {
        sp_span_slots_stats_t  ss;

        /* Its own queue's spans were counted in the slots already. */
        sp_span_slots_get_stats(e->conf.relay, &ss);
        st->spans_queued = ss.committed;
        st->spans_dropped_queue_full += ss.dropped;
        st->queue_depth += ss.pending;
        st->queue_rewinds += ss.rewinds;
        st->spans_dropped_process_killed = ss.sealed;
        st->relay = 1;
    }
    st->spans_dropped_export = atomic_load(&e->spans_dropped_export);
    st->spans_rejected = atomic_load(&e->spans_rejected);
    st->batches_sent = atomic_load(&e->batches_sent);
    st->batches_failed = atomic_load(&e->batches_failed);
    st->retries = atomic_load(&e->retries);
    if (e->loop != NULL) {
        st->h2c_reconnects = sp_h2c_reconnects(sp_http_loop_h2c(e->loop));
    }
    /* Read from another thread: only approximate while running. */
    if (e->profiles != NULL) {
        sp_profile_export_stats(e->profiles, &st->profiles_exported,
                                &st->profiles_failed, &st->profile_samples);
        st->profiles_rejected = sp_profile_export_rejected(e->profiles);
        st->functions_redacted = sp_profile_export_functions_redacted(
                                     e->profiles);
        sp_profile_export_more_stats(e->profiles,
                                     &st->profile_builder_dropped,
                                     &st->profile_bytes_exported,
                                     &st->profile_bytes_failed);
    }
}
