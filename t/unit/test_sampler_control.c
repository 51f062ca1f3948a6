/* The sampler's runtime control: the base rate and the shed level change the
 * period of every registered thread's timer (re-armed from another thread),
 * each sample records the period it was taken with, a pause stops sampling
 * and a resume restarts it; the builder sums weight * period into cpu_ns and
 * the pprof encoder exports it as cpu/nanoseconds, so CPU time stays true
 * across a rate change. */

#define _GNU_SOURCE

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "pprof/profile.pb-c.h"
#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/export/pprof.h"
#include "common/profile/profile_builder.h"
#include "common/profile/sampler.h"

static volatile uint64_t  sink;

static uint64_t
thread_cpu_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Burns ms of this thread's CPU time; returns what it really burnt. */
static uint64_t
burn(uint64_t ms)
{
    uint64_t  start = thread_cpu_ns(), end = start + ms * 1000000, x = 1, now;

    while ((now = thread_cpu_ns()) < end) {
        for (int i = 0; i < 10000; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
        sink = x;
    }
    return now - start;
}

typedef struct {
    size_t    n;            /* raw samples */
    uint64_t  weight;       /* sum of weights */
    uint64_t  cpu_ns;       /* sum of weight * period */
    size_t    bad_period;   /* period differing from the expected one */
} tally_t;

/* Drains the ring; every sample should carry `period` (0: any). */
static void
drain(tally_t *t, uint32_t period, sp_profile_builder_t *b)
{
    sp_raw_sample_t  *s[256];
    size_t            n, i;

    memset(t, 0, sizeof(*t));
    while ((n = sp_sampler_peek(s, 256)) > 0) {
        for (i = 0; i < n; i++) {
            t->n++;
            t->weight += s[i]->weight;
            t->cpu_ns += (uint64_t) s[i]->weight * s[i]->period_ns;
            t->bad_period += period != 0 && s[i]->period_ns != period;
            if (b != NULL) {
                sp_profile_builder_add(b, s[i]);
            }
        }
        sp_sampler_release(n);
    }
}

/* A second thread registered on its own; the main thread changes its rate. */
static atomic_int  phase;
static uint64_t    worker_burnt[2];

static void *
worker(void *arg)
{
    (void) arg;
    sp_sampler_thread_register();
    worker_burnt[0] = burn(300);
    atomic_store(&phase, 1);
    while (atomic_load(&phase) != 2) {
        usleep(1000);
    }
    worker_burnt[1] = burn(300);
    sp_sampler_thread_unregister();
    return NULL;
}

static void *
set_level_from_thread(void *arg)
{
    sp_sampler_set_shed_level((unsigned) (uintptr_t) arg);
    return NULL;
}

static int
near(uint64_t got, uint64_t want, unsigned pct)
{
    uint64_t  tol = want * pct / 100;

    return got + tol >= want && got <= want + tol;
}

int
main(int argc, char **argv)
{
    sp_sampler_conf_t      conf = { .rate_hz = 1000, .max_depth = 64,
                                    .ring_capacity = 65536 };
    sp_profile_builder_t  *b = sp_profile_builder_new();
    sp_symbolizer_t       *sym = sp_symbolizer_new(NULL);
    sp_resource_t          res;
    sp_profile_t           p;
    sp_arena_t             a;
    sp_buf_t               out;
    Perftools__Profiles__Profile  *pb;
    tally_t                t;
    char                   err[256];
    uint64_t               burnt, total_burnt = 0, total_ns = 0, sum;
    pthread_t              th;
    size_t                 i;

    if (getenv("LD_BIND_NOW") == NULL) {
        setenv("LD_BIND_NOW", "1", 1);
        execv("/proc/self/exe", argv);
    }
    alarm(60);

    ok(sp_sampler_start(&conf, err, sizeof(err)) == 0, "sampler starts (%s)",
       err);
    ok(sp_sampler_thread_register() == 0, "main thread registered");
    is_int(sp_sampler_rate(), 1000, "base rate from the conf");
    is_int(sp_sampler_effective_rate(), 1000, "effective = base at level 0");

    /* 1000 Hz. */
    burnt = burn(300);
    drain(&t, 1000000, b);
    total_burnt += burnt;
    total_ns += t.cpu_ns;
    printf("# 1000 Hz: %zu samples, weight %llu, cpu %llu ns of %llu\n", t.n,
           (unsigned long long) t.weight, (unsigned long long) t.cpu_ns,
           (unsigned long long) burnt);
    ok(t.n > 0 && t.bad_period == 0, "1000 Hz: every sample says 1 ms");
    ok(near(t.cpu_ns, burnt, 25), "1000 Hz: weight * period = CPU burnt");

    /* Level 3 set from another thread: 125 Hz, the main thread's timer is
     * re-armed by that thread. */
    pthread_create(&th, NULL, set_level_from_thread, (void *) (uintptr_t) 3);
    pthread_join(th, NULL);
    is_int(sp_sampler_shed_level(), 3, "level 3");
    is_int(sp_sampler_effective_rate(), 125, "1000 >> 3 = 125 Hz");
    is_int(sp_sampler_period_ns(), 8000000, "period 8 ms");
    drain(&t, 0, NULL);     /* a signal pending across the change */
    burnt = burn(600);
    drain(&t, 8000000, b);
    total_burnt += burnt;
    total_ns += t.cpu_ns;
    printf("# 125 Hz: %zu samples, weight %llu, cpu %llu ns of %llu\n", t.n,
           (unsigned long long) t.weight, (unsigned long long) t.cpu_ns,
           (unsigned long long) burnt);
    ok(t.n > 0 && t.bad_period == 0, "125 Hz: every sample says 8 ms");
    ok(t.weight >= 60 && t.weight <= 90,
       "125 Hz: about 75 periods in 600 ms (not 600)");
    ok(near(t.cpu_ns, burnt, 25), "125 Hz: weight * period = CPU burnt");

    /* The builder and pprof: cpu/nanoseconds is the sum of the periods,
     * not count * one period. */
    sp_resource_init(&res, "test", "control", NULL);
    ok(sp_profile_builder_build(b, sym, &res, 0, 1000,
                                sp_sampler_period_ns(), &p) == 0, "built");
    sum = 0;
    for (i = 0; i < p.nsamples; i++) {
        sum += (uint64_t) p.samples[i].cpu_ns;
    }
    is_int(sum, total_ns, "profile cpu_ns = sum of weight * period");
    ok(near(sum, total_burnt, 25), "profile cpu_ns = CPU burnt at both rates");
    sp_arena_init(&a, 1 << 20);
    sp_buf_init(&out);
    ok(sp_pprof_encode(&a, &p, 0, &out) == 0, "pprof encodes");
    pb = perftools__profiles__profile__unpack(NULL, out.len, out.data);
    ok(pb != NULL, "pprof decodes");
    if (pb != NULL) {
        uint64_t  v1 = 0, v0 = 0;

        for (i = 0; i < pb->n_sample; i++) {
            v0 += (uint64_t) pb->sample[i]->value[0];
            v1 += (uint64_t) pb->sample[i]->value[1];
        }
        printf("# pprof: %llu samples, %llu cpu ns, period %lld\n",
               (unsigned long long) v0, (unsigned long long) v1,
               (long long) pb->period);
        is_int(v1, total_ns, "pprof cpu/nanoseconds = sum of the periods");
        ok(v1 != v0 * (uint64_t) pb->period, "... not count * period");
        perftools__profiles__profile__free_unpacked(pb, NULL);
    }
    sp_buf_free(&out);
    sp_arena_free(&a);
    sp_profile_builder_reset(b);

    /* The base rate; the level still applies. */
    ok(sp_sampler_set_rate(0) == -1 && errno == EINVAL, "rate 0 refused");
    ok(sp_sampler_set_rate(1001) == -1 && errno == EINVAL, "rate 1001 refused");
    is_int(sp_sampler_rate(), 1000, "rate unchanged by a refusal");
    ok(sp_sampler_set_rate(100) == 0, "rate 100");
    is_int(sp_sampler_effective_rate(), 12, "100 >> 3 = 12 Hz");
    sp_sampler_set_shed_level(20);
    is_int(sp_sampler_effective_rate(), 1, "never below 1 Hz");
    sp_sampler_set_shed_level(0);
    is_int(sp_sampler_effective_rate(), 100, "level 0: 100 Hz");
    drain(&t, 0, NULL);
    burnt = burn(300);
    drain(&t, 10000000, NULL);
    printf("# 100 Hz: %zu samples, weight %llu\n", t.n,
           (unsigned long long) t.weight);
    ok(t.n > 0 && t.bad_period == 0, "100 Hz: every sample says 10 ms");
    ok(near(t.cpu_ns, burnt, 25), "100 Hz: weight * period = CPU burnt");

    /* Pause: nothing; resume: samples again. */
    sp_sampler_set_paused(1);
    ok(sp_sampler_paused(), "paused");
    drain(&t, 0, NULL);
    burn(300);
    drain(&t, 0, NULL);
    is_int(t.n, 0, "paused: no samples in 300 ms of CPU");
    sp_sampler_set_paused(0);
    ok(!sp_sampler_paused(), "resumed");
    burnt = burn(300);
    drain(&t, 10000000, NULL);
    ok(t.n > 0 && near(t.cpu_ns, burnt, 25), "resumed: samples at 100 Hz");

    /* Another registered thread: its timer follows the changes made here. */
    ok(sp_sampler_set_rate(1000) == 0, "rate 1000");
    drain(&t, 0, NULL);
    atomic_store(&phase, 0);
    pthread_create(&th, NULL, worker, NULL);
    while (atomic_load(&phase) != 1) {
        usleep(1000);
    }
    drain(&t, 1000000, NULL);
    ok(t.n > 0 && t.bad_period == 0 && near(t.cpu_ns, worker_burnt[0], 25),
       "worker at 1000 Hz");
    sp_sampler_set_shed_level(2);
    drain(&t, 0, NULL);
    atomic_store(&phase, 2);
    pthread_join(th, NULL);
    drain(&t, 4000000, NULL);
    printf("# worker at 250 Hz: %zu samples, weight %llu, cpu %llu of %llu\n",
           t.n, (unsigned long long) t.weight, (unsigned long long) t.cpu_ns,
           (unsigned long long) worker_burnt[1]);
    ok(t.n > 0 && t.bad_period == 0, "worker re-armed: every sample says 4 ms");
    ok(t.weight >= 55 && t.weight <= 95, "worker: about 75 periods in 300 ms");
    ok(near(t.cpu_ns, worker_burnt[1], 25), "worker: weight * period = CPU");

    sp_sampler_stop();
    sp_profile_builder_free(b);
    sp_symbolizer_free(sym);
    sp_resource_free(&res);
    return done_testing();
}
