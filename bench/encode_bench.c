/*
 * bench/encode_bench.c - what a span costs to encode, apart from nginx and
 * the network: on the request thread, building it (straight to the wire
 * format, common/trace/span.c) and writing it into the queue; on the exporter
 * thread, batching queued spans into a request (common/otlp_traces*.c,
 * protobuf and the file exporter's JSON).
 *
 *   encode_bench [--seconds S] [--post URL]
 *
 * Spans are built the way ngx_module/ngx_http_spanprof_span.c builds them
 * for a plain "GET /r200" request (a SERVER span with 12 attributes).
 * "build" times building and queueing one span (the queue is drained
 * every 512 spans, untimed). The batch cases encode 8192 queued spans in
 * batches (arena reset after each batch, output buffer reused, as the
 * exporter thread does) for about S seconds per case.
 *
 * Output: one line per case:
 *   format=build batch=1 spans_per_s=N ns_per_span=N bytes_per_span=N
 *   format=pb batch=512 spans_per_s=N ns_per_span=N bytes_per_span=N
 *
 * With --post URL it also POSTs one encoded batch of 2048 spans to URL
 * (bench/receiver) over and over through common/export/http_client.c, as the
 * exporter thread does, and reports the CPU time of that thread per span,
 * user and system apart: what sending costs beyond encoding.
 *   post batch=2048 bytes_per_span=N user_ns_per_span=N sys_ns_per_span=N
 */

#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/base/clock.h"
#include "common/export/http_client.h"
#include "common/trace/ids.h"
#include "common/export/otlp_traces.h"
#include "common/trace/resource.h"
#include "common/trace/span.h"
#include "common/trace/span_queue.h"

#define NSPANS  8192

static void
fill_server_span(sp_span_t *s, unsigned i)
{
    uint8_t   tid[SP_TRACE_ID_LEN], sid[SP_SPAN_ID_LEN];
    uint64_t  start = sp_now_ns();

    sp_trace_id_generate(tid);
    sp_span_id_generate(sid);
    sp_span_init(s, SP_SPAN_KIND_SERVER, tid, sid, NULL, 1, 0x03, start);
    s->end_ns = start + 35000 + (i % 97) * 100;
    sp_span_set_name(s, "GET /r200", 9);
    sp_span_attr_cstr(s, "http.request.method", "GET", 3);
    sp_span_attr_cstr(s, "url.path", "/r200", 5);
    sp_span_attr_cstr(s, "url.scheme", "http", 4);
    sp_span_attr_cstr(s, "http.route", "/r200", 5);
    sp_span_attr_cint(s, "http.response.status_code", 200);
    sp_span_attr_cstr(s, "server.address", "127.0.0.1", 9);
    sp_span_attr_cint(s, "server.port", 18480);
    sp_span_attr_cstr(s, "client.address", "127.0.0.1", 9);
    sp_span_attr_cint(s, "client.port", 40000 + (i % 20000));
    sp_span_attr_cstr(s, "network.protocol.version", "1.1", 3);
    sp_span_attr_cstr(s, "user_agent.original", "wrk/4.1.0", 9);
    sp_span_attr_cint(s, "http.response.body.size", 0);
}

static void
run(const char *format, sp_resource_t *res, const sp_span_rec_t **ptrs,
    size_t batch, double seconds)
{
    sp_arena_t  arena;
    sp_buf_t    out;
    uint64_t    t0, t, spans = 0, bytes = 0, deadline;
    size_t      off = 0;
    int         rc;

    sp_arena_init(&arena, 256 * 1024);
    sp_buf_init(&out);

    /* One untimed pass: arena blocks and buffer capacity reach their size. */
    for (off = 0; off + batch <= NSPANS; off += batch) {
        sp_buf_reset(&out);
        if (strcmp(format, "pb") == 0) {
            sp_otlp_traces_encode(&arena, res, ptrs + off, batch, &out);
        } else {
            sp_otlp_traces_encode_json(&arena, res, ptrs + off, batch, &out);
        }
        sp_arena_reset(&arena);
    }

    t0 = sp_mono_ns();
    deadline = t0 + (uint64_t) (seconds * 1e9);
    off = 0;
    do {
        sp_buf_reset(&out);
        rc = strcmp(format, "pb") == 0
             ? sp_otlp_traces_encode(&arena, res, ptrs + off, batch, &out)
             : sp_otlp_traces_encode_json(&arena, res, ptrs + off, batch,
                                          &out);
        sp_arena_reset(&arena);
        if (rc != 0) {
            fprintf(stderr, "encode failed\n");
            exit(1);
        }
        spans += batch;
        bytes += out.len;
        off += batch;
        if (off + batch > NSPANS) {
            off = 0;
        }
        t = sp_mono_ns();
    } while (t < deadline);

    printf("format=%s batch=%zu spans_per_s=%.0f ns_per_span=%.1f "
           "bytes_per_span=%.1f\n", format, batch,
           (double) spans / ((double) (t - t0) / 1e9),
           (double) (t - t0) / (double) spans, (double) bytes / (double) spans);
    sp_buf_free(&out);
    sp_arena_free(&arena);
}

static uint64_t
thread_ns(const struct timeval *tv)
{
    return (uint64_t) tv->tv_sec * 1000000000u + (uint64_t) tv->tv_usec * 1000u;
}

static void
posted(void *ud, const sp_http_response_t *resp)
{
    sp_http_response_t  *out = ud;

    out->status = resp->status;
    memcpy(out->error, resp->error, sizeof(out->error));
}

/* One POST on the exporter's loop, polled to its end as the exporter
 * thread would. */
static int
post_once(sp_http_loop_t *loop, sp_http_client_t *c, const char *url,
    const sp_buf_t *body, sp_http_response_t *resp)
{
    resp->status = -1;
    snprintf(resp->error, sizeof(resp->error), "cannot start");
    if (sp_http_client_post(c, url, "application/x-protobuf", body->data,
                            body->len, 5000, posted, resp) != 0)
    {
        return -1;
    }
    while (resp->status == -1) {
        sp_http_loop_poll(loop, -1, 100);
    }
    return resp->status == 200 ? 0 : -1;
}

/* The transport alone: the same body POSTed again and again. */
static int
post(const char *url, sp_resource_t *res, const sp_span_rec_t **ptrs,
    double seconds)
{
    enum { BATCH = 2048 };
    sp_arena_t             arena;
    sp_buf_t               out;
    sp_http_loop_t        *loop;
    sp_http_client_t      *c = NULL;
    sp_http_client_conf_t  conf;
    sp_http_response_t     resp;
    struct rusage          r0, r1;
    uint64_t               deadline, spans = 0;

    memset(&conf, 0, sizeof(conf));
    memset(&resp, 0, sizeof(resp));
    sp_arena_init(&arena, 256 * 1024);
    sp_buf_init(&out);
    loop = sp_http_loop_new();
    if (loop != NULL) {
        c = sp_http_client_new(loop, &conf);
    }
    if (c == NULL
        || sp_otlp_traces_encode(&arena, res, ptrs, BATCH, &out) != 0
        || post_once(loop, c, url, &out, &resp) != 0)
    {
        fprintf(stderr, "post to %s failed: %ld %s\n", url, resp.status,
                resp.error);
        return 1;
    }
    getrusage(RUSAGE_THREAD, &r0);
    deadline = sp_mono_ns() + (uint64_t) (seconds * 1e9);
    do {
        if (post_once(loop, c, url, &out, &resp) != 0) {
            fprintf(stderr, "post to %s failed: %ld %s\n", url, resp.status,
                    resp.error);
            return 1;
        }
        spans += BATCH;
    } while (sp_mono_ns() < deadline);
    getrusage(RUSAGE_THREAD, &r1);

    printf("post batch=%d bytes_per_span=%.1f user_ns_per_span=%.1f "
           "sys_ns_per_span=%.1f\n", BATCH, (double) out.len / BATCH,
           (double) (thread_ns(&r1.ru_utime) - thread_ns(&r0.ru_utime))
           / (double) spans,
           (double) (thread_ns(&r1.ru_stime) - thread_ns(&r0.ru_stime))
           / (double) spans);
    sp_http_client_free(c);
    sp_http_loop_free(loop);
    sp_buf_free(&out);
    sp_arena_free(&arena);
    return 0;
}

/* Building and queueing, as the request thread does per request. */
static void
build(double seconds)
{
    enum { DRAIN = 512 };
    static sp_span_t      s;
    const sp_span_rec_t  *recs[DRAIN];
    sp_span_queue_t      *q = sp_span_queue_create(2 * DRAIN, 0);
    uint64_t              t0, t1, busy = 0, spans = 0, bytes = 0, deadline;
    size_t                i, n;

    deadline = sp_mono_ns() + (uint64_t) (seconds * 1e9);
    do {
        t0 = sp_mono_ns();
        for (i = 0; i < DRAIN; i++) {
            fill_server_span(&s, (unsigned) i);
            sp_span_queue_push(q, &s);
        }
        t1 = sp_mono_ns();
        busy += t1 - t0;
        n = sp_span_queue_peek(q, recs, DRAIN);
        for (i = 0; i < n; i++) {
            bytes += recs[i]->len;
        }
        sp_span_queue_release(q, n);
        spans += n;
    } while (t1 < deadline);

    printf("format=build batch=1 spans_per_s=%.0f ns_per_span=%.1f "
           "bytes_per_span=%.1f\n", (double) spans / ((double) busy / 1e9),
           (double) busy / (double) spans, (double) bytes / (double) spans);
    sp_span_queue_destroy(q);
}

int
main(int argc, char **argv)
{
    static sp_span_t      s;
    static const sp_span_rec_t *ptrs[NSPANS];
    sp_span_queue_t      *q;
    sp_resource_t     res;
    double            seconds = 2.0;
    const char       *url = NULL;
    unsigned          i;

    for (i = 1; i < (unsigned) argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < (unsigned) argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--post") == 0 && i + 1 < (unsigned) argc) {
            url = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--seconds S] [--post URL]\n",
                    argv[0]);
            return 2;
        }
    }

    if (sp_resource_init(&res, "nginx", NULL, NULL) != 0) {
        fprintf(stderr, "resource init failed\n");
        return 1;
    }
    q = sp_span_queue_create(NSPANS, 0);
    for (i = 0; i < NSPANS; i++) {
        fill_server_span(&s, i);
        if (sp_span_queue_push(q, &s) == 0) {
            fprintf(stderr, "queue full\n");
            return 1;
        }
    }
    if (sp_span_queue_peek(q, ptrs, NSPANS) != NSPANS) {
        fprintf(stderr, "queue lost spans\n");
        return 1;
    }

    if (url != NULL) {
        i = (unsigned) post(url, &res, ptrs, seconds);
        sp_resource_free(&res);
        return (int) i;
    }
    build(seconds);
    run("pb", &res, ptrs, 512, seconds);
    run("pb", &res, ptrs, 2048, seconds);
    run("json", &res, ptrs, 512, seconds);
    run("json", &res, ptrs, 2048, seconds);
    sp_span_queue_destroy(q);
    sp_resource_free(&res);
    return 0;
}
