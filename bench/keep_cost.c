/*
 * bench/keep_cost.c - what otel_profiling_keep adds to a request, and what
 * it costs the exporter side.
 *
 *   keep_cost [--n N]
 *
 * The request path: the end of a profiled request as the nginx glue runs it
 * (ngx_http_spanprof_keep_verdict, the same in Apache): nothing with `keep
 * all` (its record is not marked: one flag test), otherwise the rules'
 * match and, when the request had samples, one push into the verdict
 * channel; with a slow= rule one clock read: the precise one, which a
 * traced request's span then reuses as its end (so a traced request reads
 * the clock no more than before), or for a request that is not traced the
 * kernel tick's time (CLOCK_REALTIME_COARSE, sp_keep_end_ns); the case
 * "precise" measures the earlier code, which read the precise clock for
 * those too. Each case runs N times per round (the channel is drained outside
 * the timed region), 15 rounds, and the median round is reported in ns per
 * request, minus the same loop with an empty body.
 *
 * The exporter side: adding S labelled samples to the profile builder with
 * keep all, against adding them marked (they wait) and deciding their
 * spans' verdicts, per sample.
 *
 * Output: one "name=value" line per measure.
 */

#define _GNU_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/profile/keep_rules.h"
#include "common/profile/profile_builder.h"
#include "common/profile/thread_ctx.h"

#define ROUNDS  15

/* The parts of a request's context the glue reads at its end. */
typedef struct {
    uint8_t                 span_id[SP_SPAN_ID_LEN];
    uint64_t                start_ns, end_ns;
    int                     status, upstream_failed, profiled, traced;
    unsigned                unkept;
    sp_thread_ctx_record_t  record;
} req_t;

static volatile unsigned  sink;
static int                precise_untraced;    /* the code before */

/* ngx_http_spanprof_log_handler + ngx_http_spanprof_keep_verdict. */
__attribute__((noinline)) static void
request_end(req_t *q, const sp_keep_rules_t *rules)
{
    int       keep;
    uint64_t  end_ns;

    if (!(q->profiled && q->record.sp_keep)) {
        return;
    }
    /* A traced request's span reads the clock for its end anyway: the
     * glue reads it here instead and the span reuses it (q->traced
     * stands for that read having been moved, not added). */
    end_ns = q->end_ns;
    if ((rules->flags & SP_KEEP_SLOW) && !q->traced) {
        end_ns = precise_untraced ? sp_now_ns() : sp_keep_end_ns(0);
    }
    keep = sp_keep_rules_match(rules,
                               end_ns > q->start_ns
                               ? end_ns - q->start_ns : 0,
                               q->status, q->upstream_failed,
                               q->record.sp_cpu_ns);
    if (q->record.sp_cpu_ns > 0 && sp_keep_send(q->span_id, keep) != 0) {
        keep = 0;
    }
    q->unkept = !keep;
}

__attribute__((noinline)) static void
empty_end(req_t *q, const sp_keep_rules_t *rules)
{
    (void) q;
    (void) rules;
    __asm__ volatile("" ::: "memory");
}

static int
cmp_d(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t) n, sizeof(double), cmp_d);
    return v[n / 2];
}

/* ns per request of fn over n requests, median of ROUNDS rounds; the
 * channel is emptied between blocks of 8192 (outside the timing). */
static double
measure(void (*fn)(req_t *, const sp_keep_rules_t *), req_t *q,
    const sp_keep_rules_t *rules, unsigned n)
{
    double        r[ROUNDS];
    sp_verdict_t  v[1024];
    unsigned      i, j, block;
    uint64_t      t, total;
    int           k;

    for (k = 0; k < ROUNDS; k++) {
        total = 0;
        for (i = 0; i < n; i += block) {
            block = n - i < 8192 ? n - i : 8192;
            t = sp_mono_ns();
            for (j = 0; j < block; j++) {
                q->span_id[0] = (uint8_t) j;
                fn(q, rules);
            }
            total += sp_mono_ns() - t;
            while (sp_keep_take(v, 1024) > 0) {
                /* drain */
            }
        }
        r[k] = (double) total / n;
    }
    return median(r, ROUNDS);
}

static sp_raw_sample_t *
raw(uint64_t span, int pending)
{
    sp_raw_sample_t  *s = calloc(1, sizeof(*s) + 8 * sizeof(uintptr_t));
    int               i;

    s->weight = 1;
    s->nframes = 8;
    for (i = 0; i < 8; i++) {
        s->frames[i] = (uintptr_t) &raw + (uintptr_t) (i * 16 + span % 4);
    }
    s->has_ctx = 1;
    s->keep_pending = (uint8_t) pending;
    memcpy(s->span_id, &span, sizeof(span));
    s->attrs[0] = SP_THREAD_CTX_ATTR_SPAN_NAME;
    s->attrs[1] = 6;
    memcpy(s->attrs + 2, "GET /x", 6);
    s->attrs_len = 8;
    return s;
}

/* ns per sample to add S samples of S/4 spans (and decide them). */
static double
builder_cost(unsigned nsamples, int pending)
{
    double                 r[ROUNDS];
    sp_profile_builder_t  *b = sp_profile_builder_new();
    sp_raw_sample_t      **s = calloc(nsamples, sizeof(*s));
    sp_verdict_t          *v = calloc(nsamples / 4 + 1, sizeof(*v));
    unsigned               i;
    uint64_t               t, span;
    int                    k;

    for (i = 0; i < nsamples; i++) {
        span = 1 + i / 4;
        s[i] = raw(span, pending);
        if (i % 4 == 0) {
            memcpy(v[i / 4].span_id, &span, sizeof(span));
            v[i / 4].keep = (uint8_t) (i % 8 == 0);
        }
    }
    for (k = 0; k < ROUNDS; k++) {
        t = sp_mono_ns();
        for (i = 0; i < nsamples; i++) {
            sp_profile_builder_add(b, s[i]);
        }
        if (pending) {
            sp_profile_builder_decide(b, v, nsamples / 4);
        }
        r[k] = (double) (sp_mono_ns() - t) / nsamples;
        sp_profile_builder_expire(b, UINT64_MAX);
        sp_profile_builder_expire(b, UINT64_MAX);
        sp_profile_builder_reset(b);
    }
    for (i = 0; i < nsamples; i++) {
        free(s[i]);
    }
    free(s);
    free(v);
    sp_profile_builder_free(b);
    return median(r, ROUNDS);
}

int
main(int argc, char **argv)
{
    unsigned         n = 1000000;
    req_t            q;
    sp_keep_rules_t  all = SP_KEEP_RULES_DEFAULT, slow, errors;
    char             err[128];
    const char      *a_slow[] = { "slow=100ms" }, *a_err[] = { "errors" };
    double           base, c_all, c_err, c_slow, c_push, c_clock, c_traced,
                     c_precise, c_coarse;

    if (argc == 3 && strcmp(argv[1], "--n") == 0) {
        n = (unsigned) strtoul(argv[2], NULL, 10);
    }
    if (sp_keep_rules_parse(&slow, a_slow, 1, err, sizeof(err)) != 0
        || sp_keep_rules_parse(&errors, a_err, 1, err, sizeof(err)) != 0
        || sp_keep_start(SP_KEEP_CHANNEL_CAPACITY) != 0)
    {
        fprintf(stderr, "keep_cost: setup failed\n");
        return 1;
    }

    memset(&q, 0, sizeof(q));
    memset(q.span_id, 0xab, sizeof(q.span_id));
    q.profiled = 1;
    q.status = 200;
    q.start_ns = sp_now_ns();

    base = measure(empty_end, &q, &all, n);

    q.record.sp_keep = 0;                   /* keep all: not marked */
    c_all = measure(request_end, &q, &all, n);

    q.record.sp_keep = 1;
    q.record.sp_cpu_ns = 0;                 /* no sample: no verdict */
    c_err = measure(request_end, &q, &errors, n);
    c_slow = measure(request_end, &q, &slow, n);
    precise_untraced = 1;
    c_precise = measure(request_end, &q, &slow, n);
    precise_untraced = 0;
    q.traced = 1;
    q.end_ns = q.start_ns + 1000;
    c_traced = measure(request_end, &q, &slow, n);
    q.traced = 0;

    q.record.sp_cpu_ns = 10000000;          /* sampled: a verdict */
    c_push = measure(request_end, &q, &errors, n);

    {
        uint64_t  t = sp_mono_ns();
        unsigned  i;

        for (i = 0; i < n; i++) {
            sink += (unsigned) sp_now_ns();
        }
        c_clock = (double) (sp_mono_ns() - t) / n;
        t = sp_mono_ns();
        for (i = 0; i < n; i++) {
            sink += (unsigned) sp_keep_end_ns(0);
        }
        c_coarse = (double) (sp_mono_ns() - t) / n;
    }

    printf("requests=%u\n", n);
    printf("empty_loop_ns=%.2f\n", base);
    printf("keep_all_ns=%.2f\n", c_all - base);
    printf("errors_no_samples_ns=%.2f\n", c_err - base);
    printf("slow_no_samples_ns=%.2f\n", c_slow - base);
    printf("errors_with_samples_ns=%.2f\n", c_push - base);
    printf("slow_no_samples_precise_ns=%.2f\n", c_precise - base);
    printf("clock_read_ns=%.2f\n", c_clock);
    printf("coarse_clock_read_ns=%.2f\n", c_coarse);
    printf("slow_traced_added_ns=%.2f\n", c_traced - base);
    printf("builder_keep_all_ns_per_sample=%.1f\n", builder_cost(40000, 0));
    printf("builder_pending_ns_per_sample=%.1f\n", builder_cost(40000, 1));
    return 0;
}
