/* Keep rules: parsing (and its errors), the verdict, the verdict channel
 * (bounded, lock-free, full refuses and counts), and the profile builder's
 * waiting samples: labelled when kept, unlabelled when not, carried into
 * the next interval while undecided, forced out unlabelled when too old or
 * too many, and a late sample of a decided span follows its verdict. */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "common/base/clock.h"
#include "common/profile/keep_rules.h"
#include "common/profile/profile_builder.h"

static int
parse(sp_keep_rules_t *r, const char *line, char *err)
{
    const char  *argv[8];
    char         buf[256], *save = NULL, *tok;
    size_t       n = 0;

    snprintf(buf, sizeof(buf), "%s", line);
    for (tok = strtok_r(buf, " ", &save); tok && n < 8;
         tok = strtok_r(NULL, " ", &save))
    {
        argv[n++] = tok;
    }
    err[0] = '\0';
    return sp_keep_rules_parse(r, argv, n, err, 200);
}

static sp_raw_sample_t *
raw(int span, uint64_t t, int pending)
{
    sp_raw_sample_t  *s = calloc(1, sizeof(*s) + 2 * sizeof(uintptr_t));

    s->time_ns = t;
    s->weight = 1;
    s->nframes = 1;
    s->frames[0] = (uintptr_t) &raw;
    if (span) {
        s->has_ctx = 1;
        s->keep_pending = (uint8_t) pending;
        memset(s->trace_id, 0x11, sizeof(s->trace_id));
        memset(s->span_id, span, sizeof(s->span_id));
        s->attrs[0] = SP_THREAD_CTX_ATTR_SPAN_NAME;
        s->attrs[1] = 6;
        memcpy(s->attrs + 2, "GET /x", 6);
        s->attrs_len = 8;
    }
    return s;
}

static sp_verdict_t
verdict(int span, int keep)
{
    sp_verdict_t  v;

    memset(v.span_id, span, sizeof(v.span_id));
    v.keep = (uint8_t) keep;
    return v;
}

/* Samples of the built profile with span byte `span` (0: unlabelled). */
static int64_t
count(sp_profile_builder_t *b, sp_symbolizer_t *sym, sp_resource_t *res,
    int span)
{
    sp_profile_t  p;
    size_t        i;
    int64_t       n = 0;

    if (sp_profile_builder_build(b, sym, res, 0, 1, 1, &p) != 0) {
        return -1;
    }
    for (i = 0; i < p.nsamples; i++) {
        if (span == 0 ? !p.samples[i].has_span
                      : p.samples[i].has_span
                        && p.samples[i].span_id[0] == span)
        {
            n += p.samples[i].count;
        }
    }
    return n;
}

static sp_verdict_channel_t  shared;
static _Atomic int           pushed_ok, producers_done;

static void *
producer(void *arg)
{
    int           i;
    sp_verdict_t  v = verdict((int) (uintptr_t) arg, 1);

    for (i = 0; i < 1000; i++) {
        if (sp_verdict_channel_push(&shared, &v) == 0) {
            atomic_fetch_add(&pushed_ok, 1);
        }
    }
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

int
main(void)
{
    sp_keep_rules_t        r;
    char                   err[256], buf[128];
    sp_verdict_channel_t   ch;
    sp_verdict_t           v, out[64];
    sp_profile_builder_t  *b = sp_profile_builder_new();
    sp_symbolizer_t       *sym = sp_symbolizer_new(NULL);
    sp_resource_t          res;
    sp_keep_stats_t        st;
    sp_raw_sample_t       *s;
    size_t                 i, n;
    pthread_t              th[3];

    sp_resource_init(&res, "test", "keep", NULL);

    /* ---- parsing ---- */
    ok(parse(&r, "all", err) == 0 && sp_keep_rules_all(&r), "all");
    ok(parse(&r, "slow=100ms errors cpu=2s", err) == 0
       && r.flags == (SP_KEEP_SLOW | SP_KEEP_ERRORS | SP_KEEP_CPU)
       && r.slow_ns == 100000000ull && r.cpu_ns == 2000000000ull,
       "slow=100ms errors cpu=2s");
    ok(parse(&r, "slow=250", err) == 0 && r.slow_ns == 250000000ull,
       "a bare number is milliseconds");
    ok(parse(&r, "cpu=500us", err) == 0 && r.cpu_ns == 500000ull, "us");
    ok(parse(&r, "slow=1m", err) == 0 && r.slow_ns == 60000000000ull, "m");
    sp_keep_rules_format(&(sp_keep_rules_t) { .flags = SP_KEEP_SLOW
                           | SP_KEEP_ERRORS, .slow_ns = 100000000ull },
                         buf, sizeof(buf));
    is_str(buf, "slow=100000us errors", "formatted");
    ok(parse(&r, "slow=abc", err) != 0 && strstr(err, "slow=abc"),
       "bad time refused: %s", err);
    ok(parse(&r, "slow=", err) != 0, "empty time refused");
    ok(parse(&r, "slow=10x", err) != 0, "bad unit refused");
    ok(parse(&r, "slow=99999999999999999999", err) != 0, "overflow refused");
    ok(parse(&r, "slow=2d", err) != 0, "days refused");
    ok(parse(&r, "cpu=25h", err) != 0, "unknown unit refused");
    ok(parse(&r, "fast", err) != 0 && strstr(err, "unknown"),
       "unknown condition refused: %s", err);
    ok(parse(&r, "errors errors", err) != 0 && strstr(err, "twice"),
       "a condition twice refused: %s", err);
    ok(parse(&r, "all errors", err) != 0 && strstr(err, "combined"),
       "all with a condition refused: %s", err);
    ok(parse(&r, "", err) != 0, "nothing refused");

    /* ---- the verdict ---- */
    parse(&r, "slow=100ms errors cpu=50ms", err);
    ok(!sp_keep_rules_match(&r, 99999999, 200, 0, 49999999), "fast ok cheap");
    ok(sp_keep_rules_match(&r, 100000000, 200, 0, 0), "slow");
    ok(sp_keep_rules_match(&r, 0, 500, 0, 0), "500");
    ok(!sp_keep_rules_match(&r, 0, 404, 0, 0), "404 is no error");
    ok(sp_keep_rules_match(&r, 0, 200, 1, 0), "a failed upstream");
    ok(sp_keep_rules_match(&r, 0, 200, 0, 50000000), "cpu");
    parse(&r, "slow=1s", err);
    ok(!sp_keep_rules_match(&r, 0, 503, 1, UINT64_MAX),
       "only the conditions given count");
    ok(sp_keep_rules_match(&SP_KEEP_RULES_DEFAULT, 0, 200, 0, 0),
       "all keeps everything");

    /* ---- the channel ---- */
    ok(sp_verdict_channel_init(&ch, 5) == 0 && ch.mask == 7, "capacity 8");
    for (i = 0; i < 8; i++) {
        v = verdict((int) i + 1, (int) i & 1);
        ok(sp_verdict_channel_push(&ch, &v) == 0, "push %zu", i);
    }
    v = verdict(9, 1);
    ok(sp_verdict_channel_push(&ch, &v) != 0, "full: refused");
    n = sp_verdict_channel_take(&ch, out, 3);
    ok(n == 3 && out[0].span_id[0] == 1 && out[2].span_id[0] == 3
       && out[1].keep == 1 && out[0].keep == 0, "oldest first");
    ok(sp_verdict_channel_push(&ch, &v) == 0, "room again");
    n = sp_verdict_channel_take(&ch, out, 64);
    ok(n == 6 && out[5].span_id[0] == 9, "the rest in order");
    is_int(sp_verdict_channel_take(&ch, out, 64), 0, "empty");
    sp_verdict_channel_free(&ch);

    /* Three producers race into a small queue, one consumer takes. */
    sp_verdict_channel_init(&shared, 256);
    for (i = 0; i < 3; i++) {
        pthread_create(&th[i], NULL, producer, (void *) (uintptr_t) (i + 1));
    }
    {
        size_t  taken = 0;
        int     bad = 0, last;

        do {
            last = atomic_load(&producers_done) == 3;
            n = sp_verdict_channel_take(&shared, out, 64);
            for (i = 0; i < n; i++) {
                bad += out[i].span_id[0] < 1 || out[i].span_id[0] > 3
                       || out[i].span_id[7] != out[i].span_id[0];
            }
            taken += n;
        } while (!last || n > 0);
        for (i = 0; i < 3; i++) {
            pthread_join(th[i], NULL);
        }
        ok(atomic_load(&pushed_ok) >= 256, "some pushes refused or not: "
           "%d of 3000 in", atomic_load(&pushed_ok));
        is_int(taken, atomic_load(&pushed_ok),
               "every verdict pushed is taken once");
        is_int(bad, 0, "none torn");
    }
    sp_verdict_channel_free(&shared);

    /* ---- the builder's waiting samples ---- */
    s = raw(0xaa, 100, 1);
    sp_profile_builder_add(b, s);
    sp_profile_builder_add(b, s);
    free(s);
    s = raw(0xbb, 110, 1);
    sp_profile_builder_add(b, s);
    free(s);
    s = raw(0xcc, 120, 0);          /* keep all: labelled at once */
    sp_profile_builder_add(b, s);
    free(s);
    s = raw(0, 130, 0);             /* no request */
    sp_profile_builder_add(b, s);
    free(s);
    is_int(sp_profile_builder_pending(b), 3, "3 samples wait");
    is_int(sp_profile_builder_samples(b), 2, "2 in the interval");
    is_int(count(b, sym, &res, 0xcc), 1, "keep-all span labelled");
    is_int(count(b, sym, &res, 0xaa), 0, "undecided span not in it");

    v = verdict(0xaa, 1);
    sp_profile_builder_decide(b, &v, 1);
    v = verdict(0xbb, 0);
    sp_profile_builder_decide(b, &v, 1);
    is_int(sp_profile_builder_pending(b), 0, "none waits");
    is_int(count(b, sym, &res, 0xaa), 2, "kept span: 2 labelled samples");
    is_int(count(b, sym, &res, 0xbb), 0, "dropped span: no labels");
    is_int(count(b, sym, &res, 0), 2, "its sample is there unlabelled");
    sp_keep_get_stats(&st);
    is_int(st.samples_kept, 2, "kept counted");
    is_int(st.samples_unlabelled, 1, "unlabelled counted");

    /* A late sample of a decided span follows the verdict. */
    s = raw(0xbb, 140, 1);
    sp_profile_builder_add(b, s);
    free(s);
    s = raw(0xaa, 150, 1);
    sp_profile_builder_add(b, s);
    free(s);
    is_int(sp_profile_builder_pending(b), 0, "late samples do not wait");
    is_int(count(b, sym, &res, 0xaa), 3, "late sample of a kept span");
    is_int(count(b, sym, &res, 0), 3, "late sample of a dropped one");

    /* Undecided across an interval: decided in the next one. */
    s = raw(0xdd, 1000, 1);
    sp_profile_builder_add(b, s);
    free(s);
    sp_profile_builder_expire(b, 500);
    sp_profile_builder_reset(b);
    is_int(sp_profile_builder_pending(b), 1, "still waits after the interval");
    is_int(sp_profile_builder_samples(b), 0, "not in the next interval yet");
    v = verdict(0xdd, 1);
    sp_profile_builder_decide(b, &v, 1);
    is_int(count(b, sym, &res, 0xdd), 1, "labelled in the later interval");

    /* Too old: forced out unlabelled. */
    sp_profile_builder_reset(b);
    s = raw(0xee, 2000, 1);
    sp_profile_builder_add(b, s);
    free(s);
    sp_profile_builder_expire(b, 2001);
    is_int(sp_profile_builder_pending(b), 0, "too old: no longer waits");
    is_int(count(b, sym, &res, 0), 1, "forced out unlabelled");
    sp_keep_get_stats(&st);
    is_int(st.undecided_forced, 1, "forced counted");
    v = verdict(0xee, 1);
    sp_profile_builder_decide(b, &v, 1);
    is_int(count(b, sym, &res, 0xee), 0, "a verdict after that changes "
           "nothing");

    /* Decided spans are forgotten after the next-but-one expire. */
    sp_profile_builder_expire(b, 0);
    sp_profile_builder_expire(b, 0);
    sp_profile_builder_reset(b);
    s = raw(0xaa, 3000, 1);
    sp_profile_builder_add(b, s);
    free(s);
    is_int(sp_profile_builder_pending(b), 1, "an old verdict is forgotten");

    /* Too many: the ones past the bound go in unlabelled at once. */
    sp_profile_builder_expire(b, UINT64_MAX);
    sp_profile_builder_reset(b);
    for (i = 0; i < SP_PROFILE_MAX_PENDING + 10; i++) {
        s = raw((int) (i % 200) + 1, 4000 + i, 1);
        sp_profile_builder_add(b, s);
        free(s);
    }
    is_int(sp_profile_builder_pending(b), SP_PROFILE_MAX_PENDING,
           "waiting samples bounded");
    is_int(sp_profile_builder_samples(b), 10, "the rest went in");
    is_int(count(b, sym, &res, 0), 10, "unlabelled");
    sp_keep_get_stats(&st);
    is_int(st.samples_pending, SP_PROFILE_MAX_PENDING, "pending gauge");
    sp_profile_builder_expire(b, UINT64_MAX);
    is_int(sp_profile_builder_pending(b), 0, "all forced at the end");

    /* ---- the process channel ---- */
    sp_keep_get_stats(&st);
    ok(sp_keep_send(v.span_id, 1) != 0, "not started: refused");
    ok(sp_keep_start(2) == 0, "started");
    ok(sp_keep_send(v.span_id, 1) == 0 && sp_keep_send(v.span_id, 0) == 0
       && sp_keep_send(v.span_id, 1) != 0, "capacity 2");
    {
        sp_keep_stats_t  st2;

        sp_keep_get_stats(&st2);
        is_int(st2.verdicts_dropped - st.verdicts_dropped, 2,
               "refused verdicts counted");
    }
    is_int(sp_keep_take(out, 64), 2, "taken");

    /* ---- the end time for slow= ---- */
    {
        struct timespec  res_c;
        uint64_t         t0, coarse, precise, t1, tick;

        clock_getres(CLOCK_REALTIME_COARSE, &res_c);
        tick = (uint64_t) res_c.tv_sec * 1000000000u
               + (uint64_t) res_c.tv_nsec;
        t0 = sp_now_ns();
        coarse = sp_keep_end_ns(0);
        precise = sp_keep_end_ns(1);
        t1 = sp_now_ns();
        ok(precise >= t0 && precise <= t1, "traced: the precise clock");
        /* the last tick's time: not after now, about a tick before (a
         * tick may come late on a loaded VM: 50 ms of slack) */
        ok(coarse <= t1 && coarse + tick + 50000000 >= t0,
           "not traced: the tick's time (%llu ns before, tick %llu ns)",
           (unsigned long long) (t0 > coarse ? t0 - coarse : 0),
           (unsigned long long) tick);
    }

    sp_profile_builder_free(b);
    sp_symbolizer_free(sym);
    sp_resource_free(&res);
    return done_testing();
}
