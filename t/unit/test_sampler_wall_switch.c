/* A thread registered on demand (httpd's workers, nginx's pool threads)
 * switching between active and idle many times makes no system call per
 * switch: no timer_settime and no read of its CPU clock (both counted here
 * by wrapping libc's), only the rare re-arm after its timer stopped while
 * idle. Its wall samples still come while it is active, none while it is
 * idle, and an idle stretch is not counted as off-CPU time. */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/profile/sampler.h"

static _Atomic unsigned long  n_settime, n_cpu_reads;

int
timer_settime(timer_t t, int flags, const struct itimerspec *v,
              struct itimerspec *o)
{
    static int (*real)(timer_t, int, const struct itimerspec *,
                       struct itimerspec *);

    if (real == NULL) {
        real = dlsym(RTLD_NEXT, "timer_settime");
    }
    atomic_fetch_add(&n_settime, 1);
    return real(t, flags, v, o);
}

int
clock_gettime(clockid_t id, struct timespec *tp)
{
    static int (*real)(clockid_t, struct timespec *);

    if (real == NULL) {
        real = dlsym(RTLD_NEXT, "clock_gettime");
    }
    if (id == CLOCK_THREAD_CPUTIME_ID) {
        atomic_fetch_add(&n_cpu_reads, 1);
    }
    return real(id, tp);
}

static volatile uint64_t  sink;

static uint64_t
mono_ns(void)
{
    struct timespec  t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec;
}

static uint64_t
cpu_ns(void)
{
    struct timespec  t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec;
}

/* Spins for ms of wall time (on CPU as much as the machine lets it). */
static void
spin(uint64_t ms)
{
    uint64_t  end = mono_ns() + ms * 1000000, x = 1;

    while (mono_ns() < end) {
        for (int i = 0; i < 1000; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
        sink = x;
    }
}

/* Sleeps ms of wall time: a wall signal ends a nanosleep early. */
static void
nap(uint64_t ms)
{
    uint64_t  end = mono_ns() + ms * 1000000, now;

    while ((now = mono_ns()) < end) {
        usleep((useconds_t) ((end - now) / 1000 + 1));
    }
}

typedef struct {
    size_t    wall;          /* wall samples */
    uint64_t  wall_ns, off_ns;
} tally_t;

static void
drain(tally_t *t)
{
    sp_raw_sample_t  *s[256];
    size_t            n, i;

    memset(t, 0, sizeof(*t));
    while ((n = sp_sampler_peek(s, 256)) > 0) {
        for (i = 0; i < n; i++) {
            if (s[i]->kind == SP_SAMPLE_WALL) {
                t->wall++;
                t->wall_ns += (uint64_t) s[i]->weight * s[i]->period_ns;
                t->off_ns += s[i]->off_cpu_ns;
            }
        }
        sp_sampler_release(n);
    }
}

int
main(int argc, char **argv)
{
    sp_sampler_conf_t  conf = { .rate_hz = 100, .max_depth = 16,
                                .ring_capacity = 4096, .wall_rate_hz = 100,
                                .types = SP_SAMPLER_TYPE_CPU
                                         | SP_SAMPLER_TYPE_WALL };
    char               err[256];
    unsigned long      settime, cpu_reads, rearms;
    tally_t            t;
    int                i, n = 20000;
    uint64_t           w0, c0, active_cpu = 0, active_wall = 0;
    double             want, got;

    (void) argc;
    (void) argv;
    alarm(60);

    ok(sp_sampler_start(&conf, err, sizeof(err)) == 0, "sampler starts (%s)",
       err);
    ok(sp_sampler_thread_register_on_demand() == 0, "registered on demand");

    /* Idle since registered: no wall sample. */
    spin(100);
    drain(&t);
    ok(t.wall == 0, "no wall sample while idle (%zu)", t.wall);

    /* Many short units of work: a flag and a vDSO clock read each. */
    settime = atomic_load(&n_settime);
    cpu_reads = atomic_load(&n_cpu_reads);
    rearms = sp_sampler_wall_rearms();
    for (i = 0; i < n; i++) {
        sp_sampler_wall_active(1);
        sink = sink * 3 + 1;
        sp_sampler_wall_active(0);
    }
    settime = atomic_load(&n_settime) - settime;
    cpu_reads = atomic_load(&n_cpu_reads) - cpu_reads;
    rearms = sp_sampler_wall_rearms() - rearms;
    printf("# %d switches: %lu timer_settime, %lu thread CPU clock reads, "
         "%lu re-arms\n", n, settime, cpu_reads, rearms);
    ok(settime <= (unsigned long) n / 20,
       "timer_settime calls %lu << %d switches", settime, n);
    ok(cpu_reads <= (unsigned long) n / 20,
       "thread CPU clock reads %lu << %d switches", cpu_reads, n);
    ok(rearms >= 1, "the timer was armed at the first activation (%lu)",
       rearms);

    /* Active and spinning, with idle stretches between (the timer expires
     * and stops in each): the samples' off-CPU share is the share of the
     * active time the thread did not run (measured here with its own CPU
     * clock: the loaded machine takes some), the idle stretches counting
     * neither as wall nor as off-CPU time. Were they counted, the share
     * would be about 0.75 + 0.25 * that. */
    drain(&t);
    for (i = 0; i < 15; i++) {
        nap(60);                    /* idle, off CPU */
        sp_sampler_wall_active(1);
        w0 = mono_ns();
        c0 = cpu_ns();
        spin(20);
        active_cpu += cpu_ns() - c0;
        active_wall += mono_ns() - w0;
        sp_sampler_wall_active(0);
    }
    drain(&t);
    want = 1.0 - (double) active_cpu / (double) active_wall;
    got = t.wall_ns ? (double) t.off_ns / (double) t.wall_ns : 1.0;
    printf("# 15 x (60 ms idle, 20 ms active on CPU): %zu wall samples, "
           "%.1f ms wall, %.1f ms off-CPU; share %.2f, measured %.2f\n",
           t.wall, t.wall_ns / 1e6, t.off_ns / 1e6, got, want);
    ok(t.wall >= 15, "wall samples while active (%zu)", t.wall);
    ok(got < want + 0.15, "the idle stretches are no off-CPU time");

    /* Active and asleep: off-CPU. */
    sp_sampler_wall_active(1);
    nap(300);
    sp_sampler_wall_active(0);
    drain(&t);
    printf("# active 300 ms asleep: %zu wall samples, %.1f ms wall, %.1f "
         "ms off-CPU\n", t.wall, t.wall_ns / 1e6, t.off_ns / 1e6);
    ok(t.wall >= 10 && t.off_ns >= t.wall_ns * 8 / 10,
       "asleep while active: off-CPU");

    /* Idle again: the timer stops after at most one expiry. */
    nap(50);
    settime = atomic_load(&n_settime);
    nap(200);
    settime = atomic_load(&n_settime) - settime;
    drain(&t);
    ok(t.wall == 0 && settime == 0,
       "idle: no sample, the timer stopped (%zu samples, %lu settime)",
       t.wall, settime);

    /* Runtime control (the control API) while the thread is active: wall
     * off stops its samples, wall on again and a new rate bring them back
     * without the thread switching (its timer is re-armed for it). */
    sp_sampler_wall_active(1);
    sp_sampler_set_types(SP_SAMPLER_TYPE_CPU);
    drain(&t);
    spin(100);
    drain(&t);
    ok(t.wall == 0, "wall off at runtime: no wall sample (%zu)", t.wall);
    sp_sampler_set_wall_rate(50);
    sp_sampler_set_types(SP_SAMPLER_TYPE_CPU | SP_SAMPLER_TYPE_WALL);
    spin(300);
    drain(&t);
    printf("# wall on again at 50 Hz, 300 ms active: %zu wall samples, "
           "%.1f ms wall\n", t.wall, t.wall_ns / 1e6);
    ok(t.wall >= 5 && t.wall <= 17 && t.wall_ns >= 200000000ull
       && t.wall_ns <= 400000000ull,
       "wall on again at runtime, 50 Hz: samples resume on the active "
       "thread (%zu)", t.wall);
    /* Idle while the rate changes: at most one expiry, then stopped. */
    sp_sampler_wall_active(0);
    sp_sampler_set_wall_rate(100);
    nap(50);
    settime = atomic_load(&n_settime);
    nap(200);
    settime = atomic_load(&n_settime) - settime;
    drain(&t);
    ok(t.wall == 0 && settime == 0,
       "rate changed while idle: no sample, the timer stopped again (%zu, "
       "%lu)", t.wall, settime);
    sp_sampler_wall_active(1);
    spin(100);
    sp_sampler_wall_active(0);
    drain(&t);
    ok(t.wall >= 3, "and re-armed at the next activation (%zu)", t.wall);

    sp_sampler_thread_unregister();
    sp_sampler_stop();
    return done_testing();
}
