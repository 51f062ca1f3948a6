/* The span clock (common/base/clock.h): the counter's readings against
 * CLOCK_REALTIME, read from threads and a signal handler at once, its
 * recovery from a wall clock that went back, a rebase claimed by another
 * thread (held, and stale), scales shared by forked processes, and
 * clock_gettime mode. */

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "common/base/clock.h"

#define THREADS  4


/* For ms milliseconds: each reading taken between two clock_gettime reads
 * no more than 2 us apart, its distance out of that window. Returns how
 * many were checked; *worst in ns, *near how many were within 200 ns. */
static uint64_t
against_realtime(unsigned ms, uint64_t *worst, uint64_t *near)
{
    uint64_t  n = 0, r1, t, r2, end, o;

    *worst = 0;
    *near = 0;
    end = sp_clock_realtime_ns() + (uint64_t) ms * 1000000;
    for ( ;; ) {
        r1 = sp_clock_realtime_ns();
        t = sp_now_ns();
        r2 = sp_clock_realtime_ns();
        if (r1 > end) {
            return n;
        }
        if (r2 - r1 > 2000) {
            continue;               /* preempted between the reads */
        }
        o = t < r1 ? r1 - t : t > r2 ? t - r2 : 0;
        *worst = o > *worst ? o : *worst;
        *near += o <= 200;
        n++;
    }
}


static atomic_int       stop;
static atomic_uint_fast64_t  handler_reads, handler_bad;

static void
on_alarm(int sig)
{
    uint64_t  r1, t, r2;

    r1 = sp_clock_realtime_ns();
    t = sp_now_ns();
    r2 = sp_clock_realtime_ns();
    atomic_fetch_add(&handler_reads, 1);
    if (t + 5000 < r1 || t > r2 + 5000) {
        atomic_fetch_add(&handler_bad, 1);
    }
}


typedef struct {
    uint64_t  reads;
    uint64_t  back;         /* largest step back between two readings */
} reader_t;

static void *
reader(void *arg)
{
    reader_t  *rd = arg;
    uint64_t   prev = sp_now_ns(), t;

    while (!atomic_load(&stop)) {
        t = sp_now_ns();
        if (t < prev && prev - t > rd->back) {
            rd->back = prev - t;
        }
        prev = t;
        rd->reads++;
    }
    return NULL;
}


static void readings_after_release(void);

/* Processes forked after sp_clock_init() share its scales: four that read
 * the clock for 200 ms rebase about 50 times together (every 4 ms), where
 * with scales of their own each would rebase every 4 ms it runs. Each checks its
 * readings against CLOCK_REALTIME as well. */
#define PROCS  4

static void
shared_processes(void)
{
    int               fd[2];
    pid_t             pid[PROCS];
    unsigned          i;
    uint64_t          total = 0, bad = 0, msg[2], worst, near;
    sp_clock_stats_t  st;

    if (sp_clock_init() != SP_CLOCK_TSC) {
        ok(1, "the kernel's clocksource is not tsc: sharing not tested");
        return;
    }
    sp_clock_get_stats(&st);
    ok(st.shared, "after sp_clock_init: the scales are shared");
    if (pipe(fd) != 0) {
        ok(0, "pipe");
        return;
    }
    for (i = 0; i < PROCS; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            sp_clock_stats_t  cs;

            sp_clock_get_stats(&cs);
            msg[1] = against_realtime(200, &worst, &near) == 0
                     || worst > 5000;
            msg[0] = 0;
            sp_clock_get_stats(&st);
            msg[0] = st.rebases - cs.rebases;
            if (write(fd[1], msg, sizeof(msg)) != sizeof(msg)) {
                _exit(1);
            }
            _exit(0);
        }
    }
    close(fd[1]);
    for (i = 0; i < PROCS; i++) {
        if (read(fd[0], msg, sizeof(msg)) == sizeof(msg)) {
            total += msg[0];
            bad += msg[1];
        } else {
            bad++;
        }
    }
    close(fd[0]);
    for (i = 0; i < PROCS; i++) {
        waitpid(pid[i], NULL, 0);
    }
    is_int((long long) bad, 0, "%u processes: readings within 5 us of "
           "CLOCK_REALTIME", PROCS);
    /* Scales of their own: each rebases every 4 ms it runs (107 on two
     * CPUs, up to 200 on four or more). */
    ok(total >= 10 && total <= 50 * 3 / 2,
       "%u processes, 200 ms: %llu rebases together (shared: about 50)",
       PROCS, (unsigned long long) total);

    sp_clock_release();
    sp_clock_get_stats(&st);
    ok(!st.shared, "released: scales of the process's own again");
    readings_after_release();
}


/* After sp_clock_release(): still good readings, from fresh scales. */
static void
readings_after_release(void)
{
    uint64_t  worst, near, n;

    n = against_realtime(20, &worst, &near);
    ok(n > 100 && worst <= 5000, "after release: %llu readings, worst %llu "
       "ns", (unsigned long long) n, (unsigned long long) worst);
}


int
main(void)
{
    uint64_t          n, worst, near, before, t, r, stale;
    unsigned          cur, i;
    pthread_t         th[THREADS];
    reader_t          rd[THREADS];
    sp_clock_stats_t  st;
    struct itimerval  it;
    struct sigaction  sa;

    /* clock_gettime mode: the readings are CLOCK_REALTIME's. */
    is_int(sp_clock_use(SP_CLOCK_GETTIME), SP_CLOCK_GETTIME,
           "clock_gettime mode");
    r = sp_clock_realtime_ns();
    t = sp_now_ns();
    ok(t >= r && t - r < 1000000, "a reading is CLOCK_REALTIME's");
    sp_clock_get_stats(&st);
    ok(st.tsc == 0 && st.rebases == 0, "no counter, no rebase");

#if !defined(__x86_64__)
    ok(1, "no time-stamp counter here: the rest skipped");
    return done_testing();
#else
    is_int(sp_clock_use(SP_CLOCK_TSC), SP_CLOCK_TSC, "counter mode");

    /* The readings against CLOCK_REALTIME, over 75 scales. */
    n = against_realtime(300, &worst, &near);
    sp_clock_get_stats(&st);
    ok(n > 10000, "%llu readings checked", (unsigned long long) n);
    ok(st.tsc == 1, "stats: counter mode");
    ok(st.rebases >= 20, "rebased %llu times in 300 ms (every 4 ms)",
       (unsigned long long) st.rebases);
    ok(near * 2 > n, "%llu of %llu within 200 ns of CLOCK_REALTIME",
       (unsigned long long) near, (unsigned long long) n);
    ok(worst <= 5000, "worst distance from CLOCK_REALTIME %llu ns",
       (unsigned long long) worst);
    is_int(st.rate_resets, 0, "no rate thrown away");

    /* The fast path: a reading costs no clock_gettime. Rebases are at most
     * one per 4 ms whatever the number of reads. */
    before = st.rebases;
    r = sp_clock_realtime_ns();
    for (i = 0; i < 1000000; i++) {
        t = sp_now_ns();
    }
    r = sp_clock_realtime_ns() - r;
    sp_clock_get_stats(&st);
    ok(st.rebases - before <= r / SP_CLOCK_REBASE_NS + 1,
       "1M readings in %llu ns: %llu rebases", (unsigned long long) r,
       (unsigned long long) (st.rebases - before));

    /* Four threads and a 10 kHz signal handler reading at once. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    memset(rd, 0, sizeof(rd));
    for (i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, reader, &rd[i]);
    }
    it.it_interval.tv_sec = 0;
    it.it_interval.tv_usec = 100;
    it.it_value = it.it_interval;
    setitimer(ITIMER_REAL, &it, NULL);
    n = against_realtime(300, &worst, &near);
    memset(&it, 0, sizeof(it));
    setitimer(ITIMER_REAL, &it, NULL);
    atomic_store(&stop, 1);
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ok(rd[i].reads > 1000 && rd[i].back <= 2000,
           "thread %u: %llu readings, largest step back %llu ns", i,
           (unsigned long long) rd[i].reads,
           (unsigned long long) rd[i].back);
    }
    ok(atomic_load(&handler_reads) > 100, "%llu readings in the handler",
       (unsigned long long) atomic_load(&handler_reads));
    is_int(atomic_load(&handler_bad), 0,
           "handler readings within 5 us of CLOCK_REALTIME");
    ok(worst <= 5000, "with threads: worst distance %llu ns (%llu of %llu "
       "within 200)", (unsigned long long) worst, (unsigned long long) near,
       (unsigned long long) n);

    /* The wall clock went back a second (as a step would): the next rebase
     * finds the scale's base after now, throws its rate away, counts it,
     * and measures again; the readings follow CLOCK_REALTIME throughout. */
    sp_clock_get_stats(&st);
    before = st.rate_resets;
    cur = atomic_load(&sp_clock.state->cur) & 1;
    atomic_fetch_add(&sp_clock.state->scale[cur].seq, 1);
    atomic_fetch_add(&sp_clock.state->scale[cur].ns, 1000000000u);
    atomic_store(&sp_clock.state->scale[cur].limit, 0);
    atomic_fetch_add(&sp_clock.state->scale[cur].seq, 1);
    n = against_realtime(50, &worst, &near);
    sp_clock_get_stats(&st);
    is_int(st.rate_resets - before, 1, "the step back: one rate reset");
    ok(worst <= 5000, "after it: worst distance %llu ns",
       (unsigned long long) worst);
    ok(atomic_load(&sp_clock.state->scale[atomic_load(&sp_clock.state->cur)
                                          & 1].mult)
       != 0, "a rate measured again");

    /* While another thread rebases (its claim is fresh), readings are
     * clock_gettime's and the claim stays its. */
    sp_clock_get_stats(&st);
    before = st.rebases;
    cur = atomic_load(&sp_clock.state->cur) & 1;
    atomic_store(&sp_clock.state->scale[cur].limit, 0);
    atomic_store(&sp_clock.state->claim, __builtin_ia32_rdtsc() | 1);
    r = sp_clock_realtime_ns();
    t = sp_now_ns();
    ok(t >= r && t - r < 1000000, "claimed: a reading is CLOCK_REALTIME's");
    sp_clock_get_stats(&st);
    ok(st.rebases == before && atomic_load(&sp_clock.state->claim) != 0,
       "claimed: no rebase, the claim left alone");

    /* A claim stamped a little after this thread's own reading (made on
     * another CPU just after it): fresh too, not taken over. */
    atomic_store(&sp_clock.state->claim, (__builtin_ia32_rdtsc() + 100000) | 1);
    r = sp_clock_realtime_ns();
    t = sp_now_ns();
    sp_clock_get_stats(&st);
    ok(st.rebases == before && t >= r && t - r < 1000000,
       "a claim from just ahead: left alone, the reading CLOCK_REALTIME's");

    /* A claim older than a rebase can take (its thread killed or
     * stopped): the next reader takes it over, rebases and lets go. A
     * rebase needs its pair uninterrupted and 1 ms since the last base
     * (RATE_MIN_NS): readers keep trying, here for up to 200 ms (1,000
     * reads in a row could all fall within that millisecond, or be
     * preempted on a loaded machine: 2 runs in 20 failed so under .ci/run's
     * load). */
    stale = (__builtin_ia32_rdtsc() - (UINT64_C(1) << 26)) | 1;
    atomic_store(&sp_clock.state->claim, stale);
    (void) sp_now_ns();
    ok(atomic_load(&sp_clock.state->claim) != stale,
       "a stale claim taken over by the next reader");
    for (i = 0; i < 2000; i++) {
        (void) sp_now_ns();
        sp_clock_get_stats(&st);
        if (st.rebases > before) {
            break;
        }
        usleep(100);
    }
    ok(st.rebases > before, "a stale claim taken over: rebased");
    is_int((long long) atomic_load(&sp_clock.state->claim), 0,
           "and let go");

    shared_processes();

    return done_testing();
#endif
}
