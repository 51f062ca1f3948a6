/* The exporter (its own thread, as in Apache) with the collector down: how
 * much it holds while it retries; the scratch span each request thread
 * builds its spans in (its own, freed when the thread exits: LeakSanitizer
 * fails this test otherwise); the retry delays (exponential backoff with
 * jitter, Retry-After in seconds or as an HTTP-date); an exporter process's
 * hand-over of the shared span queues at a restart. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/export/backoff.h"
#include "common/export/exporter.h"
#include "common/export/http_client.h"
#include "common/trace/resource.h"
#include "common/trace/span.h"
#include "common/trace/span_queue.h"
#include "common/trace/span_slots.h"

#define BATCH  4

/* A port on 127.0.0.1 where nothing listens (bound, then closed). */
static int
closed_port(void)
{
    struct sockaddr_in  a;
    socklen_t           len = sizeof(a);
    int                 fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0
        || getsockname(fd, (struct sockaddr *) &a, &len) != 0)
    {
        return -1;
    }
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* OTLP/HTTP to url (a closed port), batches of BATCH. */
static void
collector_down_conf(sp_exporter_conf_t *conf, const char *url,
    sp_resource_t *res, uint64_t shutdown_ms)
{
    memset(conf, 0, sizeof(*conf));
    conf->endpoint = url;
    conf->protocol = SP_EXPORT_HTTP_PROTOBUF;
    conf->interval_ms = 20;
    conf->batch_size = BATCH;
    conf->batch_count = 4;
    conf->connect_timeout_ms = 1000;
    conf->timeout_ms = 1000;
    conf->shutdown_timeout_ms = shutdown_ms;
    conf->resource = res;
}

static void
fill(sp_span_t *s, uint64_t i)
{
    static const uint8_t  tid[16] = { 1 }, sid[8] = { 2 };

    sp_span_init(s, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, i);
    sp_span_set_name(s, "GET /x", 6);
    sp_span_attr_cint(s, "n", (int64_t) i);
}

#define THREADS  4

typedef struct {
    sp_exporter_t      *e;
    pthread_barrier_t  *all_in;
    sp_span_t          *first, *second;
} builder_t;

/* Builds two spans; waits until every builder has its scratch, so that
 * they are all alive at once when compared. */
static void *
build_on_thread(void *arg)
{
    builder_t  *b = arg;

    b->first = sp_exporter_span_begin(b->e);
    if (b->first != NULL) {
        fill(b->first, 1);
        sp_exporter_span_end(b->e, b->first);
    }
    pthread_barrier_wait(b->all_in);
    b->second = sp_exporter_span_begin(b->e);
    if (b->second != NULL) {
        fill(b->second, 2);
        sp_exporter_span_end(b->e, b->second);
    }
    return NULL;
}

static void
scratch_per_thread(sp_exporter_t *e, sp_span_t *mine)
{
    pthread_t          t[THREADS];
    pthread_barrier_t  all_in;
    builder_t          b[THREADS];
    int                i, j, distinct = 1, stable = 1, started = 0;

    pthread_barrier_init(&all_in, NULL, THREADS);
    for (i = 0; i < THREADS; i++) {
        b[i] = (builder_t) { e, &all_in, NULL, NULL };
        started += pthread_create(&t[i], NULL, build_on_thread, &b[i]) == 0;
    }
    ok(started == THREADS, "%d span-building threads started", started);
    if (started != THREADS) {
        exit(done_testing());   /* the others wait at the barrier */
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    pthread_barrier_destroy(&all_in);

    for (i = 0; i < THREADS; i++) {
        stable &= b[i].first != NULL && b[i].first == b[i].second;
        distinct &= b[i].first != mine;
        for (j = 0; j < i; j++) {
            distinct &= b[i].first != b[j].first;
        }
    }
    ok(stable, "each thread builds in the same scratch span every time");
    ok(distinct, "each thread's scratch is its own");
}

/* Retry n waits between half and all of 250 << (n-1) ms (at most 30 s),
 * drawn anew each time; a longer Retry-After wins. */
static void
backoff_delays(void)
{
    sp_backoff_rng_t  r, r2;
    uint64_t          d, lo, hi, base, prev_hi = 0, first[2];
    unsigned          n, i, distinct, inside, grows = 1;
    uint64_t          seen[64];

    sp_backoff_seed(&r, 1);
    for (n = 1; n <= 10; n++) {
        base = 250ull << (n - 1);
        base = base > 30000 ? 30000 : base;
        lo = UINT64_MAX;
        hi = 0;
        distinct = 0;
        inside = 1;
        for (i = 0; i < 64; i++) {
            d = sp_backoff_delay_ms(&r, n, 250, 30000, 0);
            inside &= d >= base / 2 && d <= base;
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
            seen[i] = d;
        }
        for (i = 1; i < 64; i++) {
            distinct += seen[i] != seen[i - 1];
        }
        ok(inside, "retry %u: 64 delays within [%llu, %llu] ms (%llu..%llu)",
           n, (unsigned long long) base / 2, (unsigned long long) base,
           (unsigned long long) lo, (unsigned long long) hi);
        ok(distinct >= 48 && hi - lo >= base / 4,
           "retry %u: jitter: %u of 63 consecutive delays differ, spread "
           "%llu ms", n, distinct, (unsigned long long) (hi - lo));
        grows &= lo >= prev_hi / 2 && hi > prev_hi / 2;
        prev_hi = hi;
    }
    ok(grows, "the delays grow exponentially up to the 30 s cap");

    d = sp_backoff_delay_ms(&r, 1, 250, 30000, 5000);
    ok(d == 5000, "a Retry-After longer than the backoff is waited out "
       "(%llu ms)", (unsigned long long) d);
    d = sp_backoff_delay_ms(&r, 5, 250, 30000, 1000);
    ok(d >= 2000 && d <= 4000, "a shorter one does not cut the backoff "
       "(%llu ms)", (unsigned long long) d);

    /* Two workers (two seeds) that fail together do not retry together. */
    sp_backoff_seed(&r, 1000);
    sp_backoff_seed(&r2, 1001);
    for (i = 0, distinct = 0; i < 16; i++) {
        first[0] = sp_backoff_delay_ms(&r, 3, 250, 30000, 0);
        first[1] = sp_backoff_delay_ms(&r2, 3, 250, 30000, 0);
        distinct += first[0] != first[1];
    }
    ok(distinct >= 12, "two seeds: %u of 16 delays differ", distinct);
}

static void
retry_after(void)
{
    /* Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date. */
    const uint64_t  now = 784111777000ull;
    struct {
        const char  *v;
        uint64_t     ms;
    } c[] = {
        { "120", 120000 },
        { " 3 \r\n", 3000 },
        { "0", 0 },
        { "7200", 3600000 },                   /* capped to an hour */
        { "Sun, 06 Nov 1994 08:49:47 GMT", 10000 },
        { " Sun, 06 Nov 1994 08:50:37 GMT\r\n", 60000 },
        { "Sunday, 06-Nov-94 08:49:39 GMT", 2000 },  /* RFC 850 */
        { "Sun Nov  6 08:49:38 1994", 1000 },        /* asctime */
        { "Sun, 06 Nov 1994 08:49:37 GMT", 0 },      /* now */
        { "Sun, 06 Nov 1994 08:49:38 GMT", 1000 },
        { "Sun, 06 Nov 1994 08:40:00 GMT", 0 },      /* past */
        { "Mon, 07 Nov 1994 08:49:37 GMT", 3600000 },
        { "-5", 0 },
        { "1.5", 0 },
        { "soon", 0 },
        { "", 0 },
    };
    size_t    i;
    uint64_t  got;

    for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        got = sp_http_parse_retry_after(c[i].v, strlen(c[i].v), now);
        ok(got == c[i].ms, "Retry-After case %zu: %llu ms (%llu)", i,
           (unsigned long long) got, (unsigned long long) c[i].ms);
    }
    /* A date is waited for to the millisecond, not from the whole second. */
    got = sp_http_parse_retry_after("Sun, 06 Nov 1994 08:49:39 GMT", 29,
                                    now + 250);
    ok(got == 1750, "an HTTP-date 1.75 s ahead: %llu ms",
       (unsigned long long) got);
}

/* Whether another process may become the slots' consumer now. */
static int
other_may_consume(sp_span_slots_t *slots)
{
    pid_t  pid = fork();
    int    st;

    if (pid == 0) {
        _exit(sp_span_slots_consumer_start(slots, (int32_t) getpid()) == 0
              ? 0 : 1);
    }
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st)
           && WEXITSTATUS(st) == 0;
}

/* The exporter process of a restarted server lets the slots go at once
 * (sp_exporter_relay_handover): the next one takes the children's spans
 * while the old one still flushes what it took (here, retrying against a
 * closed port). */
static void
relay_handover(const char *url, sp_resource_t *res)
{
    static sp_span_t     one;
    sp_span_slots_t     *slots = sp_span_slots_create(2, 64 * 1024);
    sp_span_queue_t     *q;
    sp_exporter_conf_t   conf;
    sp_exporter_stats_t  st;
    sp_exporter_t       *e;
    char                 err[256];
    int                  slot = -1, i, let_go = 0;
    struct timespec      ms = { 0, 1000000 };

    ok(slots != NULL, "relay: slots made");
    if (slots == NULL) {
        return;
    }
    q = sp_span_slots_claim(slots, (int32_t) getpid(), &slot);
    for (i = 0; q != NULL && i < 10; i++) {
        fill(&one, (uint64_t) i);
        sp_span_queue_push(q, &one);
    }
    collector_down_conf(&conf, url, res, 300);
    conf.relay = slots;
    e = sp_exporter_start(&conf, err, sizeof(err));
    ok(e != NULL, "relay: exporter started (%s)", e != NULL ? "ok" : err);
    if (e == NULL) {
        sp_span_slots_destroy(slots);
        return;
    }
    for (i = 0; i < 5000; i++) {
        sp_exporter_get_stats(e, &st);
        if (st.spans_queued == 10 && sp_span_queue_pending(q) == 0) {
            break;
        }
        nanosleep(&ms, NULL);
    }
    ok(sp_span_queue_pending(q) == 0, "relay: it took the 10 spans (%llu "
       "queued)", (unsigned long long) st.spans_queued);
    ok(st.relay == 1, "relay: its status says exporter_process");
    ok(!other_may_consume(slots), "relay: no other process may consume");

    sp_exporter_relay_handover(e);
    for (i = 0; i < 2000 && !let_go; i++) {
        let_go = other_may_consume(slots);
        if (!let_go) {
            nanosleep(&ms, NULL);
        }
    }
    sp_exporter_get_stats(e, &st);
    ok(let_go, "relay: handed over, another process may consume at once");
    ok(st.spans_queued == 0 && st.spans_dropped_queue_full == 0,
       "relay: the slots' counts are the next one's (%llu queued)",
       (unsigned long long) st.spans_queued);
    /* The spans it took are still its own to send (or drop, counted). */
    ok(st.queue_depth > 0 || st.spans_dropped_export > 0,
       "relay: it still holds what it took (%llu waiting, %llu dropped)",
       (unsigned long long) st.queue_depth,
       (unsigned long long) st.spans_dropped_export);
    sp_exporter_stop(e);
    sp_span_slots_release(slots, slot);
    sp_span_slots_destroy(slots);
}

int
main(void)
{
    static sp_span_t     one;
    sp_span_queue_t     *q;
    sp_exporter_t       *e;
    sp_exporter_conf_t   conf;
    sp_exporter_stats_t  st;
    sp_resource_t        res;
    sp_span_t           *s;
    char                 url[64], err[256];
    size_t               fits, held, i;
    int                  port = closed_port();
    struct timespec      ms = { 0, 1000000 };

    backoff_delays();
    retry_after();

    ok(port > 0, "a closed port (%d)", port);

    /* What a queue of 4 batches of 4 takes of these spans on its own (as
     * span_begin does: while it has room for a span of any size). */
    q = sp_span_queue_create(4 * BATCH, 0);
    for (fits = 0; sp_span_queue_has_room(q); fits++) {
        fill(&one, fits);
        if (sp_span_queue_push(q, &one) == 0) {
            break;
        }
    }
    sp_span_queue_destroy(q);
    ok(fits > 4 * BATCH, "the queue alone holds %zu such spans", fits);

    sp_resource_init(&res, "test", "exporter-test", NULL);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    collector_down_conf(&conf, url, &res, 200);
    e = sp_exporter_start(&conf, err, sizeof(err));
    ok(e != NULL, "exporter started (%s)", e != NULL ? "ok" : err);
    if (e == NULL) {
        return done_testing();
    }

    /* A first batch, until its post has failed: from then on the exporter
     * knows the collector is failing (before, on a loaded machine, it may
     * encode several batches while the first connect is pending). */
    for (i = 0; i < BATCH; i++) {
        s = sp_exporter_span_begin(e);
        if (s != NULL) {
            fill(s, i);
            sp_exporter_span_end(e, s);
        }
    }
    for (i = 0; i < 5000; i++) {
        sp_exporter_get_stats(e, &st);
        if (st.retries >= 1) {
            break;
        }
        nanosleep(&ms, NULL);
    }

    /* Spans keep coming for 0.6 s while every post is refused: the first
     * batch waits for its retries (250 ms, then 500 ms). */
    for (i = BATCH; i < 600; i++) {
        s = sp_exporter_span_begin(e);
        if (s != NULL) {
            fill(s, i);
            sp_exporter_span_end(e, s);
        }
        nanosleep(&ms, NULL);
    }
    sp_exporter_get_stats(e, &st);
    ok(st.retries >= 1, "the first batch was retried (%llu retries)",
       (unsigned long long) st.retries);
    /* Spans given up after their retries (a slow machine stretches the
     * 0.6 s) are no longer held either. */
    held = 600 - (size_t) st.spans_dropped_queue_full
           - (size_t) st.spans_dropped_export;
    sp_exporter_stop(e);

    ok(held >= fits, "the queue was full (%zu >= %zu)", held, fits);
    ok(held <= fits + 2 * BATCH,
       "no second copy: the queue and at most two encoded batches "
       "(%zu <= %zu + %d), not batch_count of them", held, fits, 2 * BATCH);

    /* A fresh exporter, so the queue has room for every span. */
    e = sp_exporter_start(&conf, err, sizeof(err));
    ok(e != NULL, "a second exporter started (%s)", e != NULL ? "ok" : err);
    if (e != NULL) {
        s = sp_exporter_span_begin(e);
        ok(s != NULL, "the main thread has a scratch span");
        scratch_per_thread(e, s);
        sp_exporter_stop(e);
    }
    relay_handover(url, &res);
    sp_resource_free(&res);
    return done_testing();
}
