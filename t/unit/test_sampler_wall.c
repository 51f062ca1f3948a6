/* The wall-clock ticker (sampler.h): one thread per process signals only
 * the registered threads whose wall time counts now.
 * 1. A thread waiting for work (registered on demand and inactive, or
 *    always counted but inside idle_begin/end) gets no wall signal while
 *    the ticker ticks 30 times; an active one in the same wait does.
 * 2. An active busy thread: WALL samples with its labels, weights adding
 *    up to its active wall time at the wall rate.
 * 3. An active thread that sleeps half the time: off-CPU share near the
 *    share of its active time it did not run.
 * 4. Going active/inactive 100,000 times makes no system call (a seccomp
 *    filter traps every one but a CLOCK_MONOTONIC read).
 * 5. The ticker stops ticking while paused or with wall sampling off, and
 *    its thread is gone after sp_sampler_stop; a tick held back across a
 *    pause does not leave its thread unsignalled after the resume.
 * Times are checked against what the threads measured themselves, never
 * against fixed wall-clock bounds, so the test holds on a loaded machine. */

#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/base/clock.h"
#include "common/profile/sampler.h"
#include "common/profile/thread_ctx.h"

#define WALL_HZ  200

static volatile uint64_t  sink;

static uint64_t
clock_of(clockid_t id)
{
    struct timespec  t;

    clock_gettime(id, &t);
    return (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec;
}

static uint64_t
ticks(void)
{
    sp_sampler_stats_t  st;

    sp_sampler_get_stats(&st);
    return st.wall_ticks;
}

/* Sleeps (on this thread) until the ticker has ticked n more times; 0 if
 * it did not within 20 s. */
static int
wait_ticks(uint64_t n)
{
    uint64_t  want = ticks() + n, end = sp_mono_ns() + 20000000000ull;

    while (ticks() < want) {
        if (sp_mono_ns() > end) {
            return 0;
        }
        usleep(2000);
    }
    return 1;
}

static int
threads_now(void)
{
    DIR            *d = opendir("/proc/self/task");
    struct dirent  *e;
    int             n = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}


/* ---- 1: waiting threads ------------------------------------------------- */

enum { WAIT_INACTIVE, WAIT_IDLE, WAIT_ACTIVE };

typedef struct {
    int           how;
    int           fd;         /* read end: readable when the test is done */
    atomic_int    ready;
    atomic_int    eintr;      /* wall signals that interrupted the wait */
    int           registered;
} waiter_t;

static void *
waiter(void *arg)
{
    waiter_t           *w = arg;
    sp_sampler_idle_t  *idle;
    struct pollfd       pfd = { .fd = w->fd, .events = POLLIN };

    w->registered = (w->how == WAIT_IDLE ? sp_sampler_thread_register()
                     : sp_sampler_thread_register_on_demand()) == 0;
    idle = sp_sampler_idle_slot();
    if (w->how == WAIT_ACTIVE) {
        sp_sampler_wall_active(1);
    }
    atomic_store(&w->ready, 1);
    for ( ;; ) {
        if (w->how == WAIT_IDLE) {
            sp_sampler_idle_begin(idle);
        }
        /* poll is never restarted after a handler: a signal is an EINTR */
        int rc = poll(&pfd, 1, -1);
        if (w->how == WAIT_IDLE) {
            sp_sampler_idle_end(idle);
        }
        if (rc > 0) {
            break;
        }
        if (rc < 0 && errno == EINTR) {
            atomic_fetch_add(&w->eintr, 1);
        }
    }
    sp_sampler_wall_active(0);
    sp_sampler_thread_unregister();
    return NULL;
}

static void
test_waiting_threads(void)
{
    waiter_t   w[3];
    pthread_t  t[3];
    int        p[3][2], i;
    char       c = 'x';

    for (i = 0; i < 3; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        if (pipe(p[i]) != 0) {
            abort();
        }
        w[i].how = i;
        w[i].fd = p[i][0];
        pthread_create(&t[i], NULL, waiter, &w[i]);
    }
    for (i = 0; i < 3; i++) {
        while (!atomic_load(&w[i].ready)) {
            usleep(1000);
        }
    }
    ok(wait_ticks(30), "the ticker ticked 30 times");
    for (i = 0; i < 3; i++) {
        if (write(p[i][1], &c, 1) != 1) {
            abort();
        }
        pthread_join(t[i], NULL);
        close(p[i][0]);
        close(p[i][1]);
    }
    printf("# wall signals in the wait: inactive %d, idle %d, active %d\n",
           atomic_load(&w[0].eintr), atomic_load(&w[1].eintr),
           atomic_load(&w[2].eintr));
    ok(w[0].registered && w[1].registered && w[2].registered,
       "the three waiters registered");
    is_int(atomic_load(&w[0].eintr), 0,
           "an inactive thread in its wait gets no wall signal");
    is_int(atomic_load(&w[1].eintr), 0,
           "an always-counted thread in its idle wait gets no wall signal");
    ok(atomic_load(&w[2].eintr) >= 5,
       "an active thread in the same wait is signalled (the check works)");
}


/* ---- 2 and 3: active threads -------------------------------------------- */

typedef struct {
    uint8_t    span_byte;
    int        sleep_half;     /* 5 ms of CPU, then 5 ms asleep, ... */
    uint64_t   wall_ns;        /* active, measured by the thread */
    uint64_t   cpu_ns;
} worker_t;

__attribute__((noinline)) static void
spin_cpu(uint64_t ns)
{
    uint64_t  end = clock_of(CLOCK_THREAD_CPUTIME_ID) + ns, x = 1;

    while (clock_of(CLOCK_THREAD_CPUTIME_ID) < end) {
        for (int i = 0; i < 1000; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
        sink = x;
    }
}

static void
sleep_until(uint64_t mono_ns)
{
    struct timespec  at = { .tv_sec = (time_t) (mono_ns / 1000000000ull),
                            .tv_nsec = (long) (mono_ns % 1000000000ull) };

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL)
           == EINTR)
    {
        /* a wall signal: sleep on */
    }
}

static void *
worker(void *arg)
{
    static sp_thread_ctx_record_t  recs[2];
    worker_t                      *w = arg;
    sp_thread_ctx_record_t        *rec = &recs[w->sleep_half];
    uint8_t                        tid[16], sid[8];
    uint64_t                       t0, c0, end, now;

    sp_sampler_thread_register_on_demand();
    memset(tid, 0xab, sizeof(tid));
    memset(sid, w->span_byte, sizeof(sid));
    sp_thread_ctx_record_init(rec, tid, sid, 1, "GET /wall", 9);
    /* CPU spent inactive before going active is not off-CPU time */
    spin_cpu(20000000);

    sp_thread_ctx_attach(rec);
    t0 = sp_mono_ns();
    c0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    sp_sampler_wall_active(1);
    end = t0 + 1000000000ull;
    while ((now = sp_mono_ns()) < end) {
        if (w->sleep_half) {
            spin_cpu(5000000);
            sleep_until(sp_mono_ns() + 5000000);
        } else {
            sink += now;
        }
    }
    sp_sampler_wall_active(0);
    w->wall_ns = sp_mono_ns() - t0;
    w->cpu_ns = clock_of(CLOCK_THREAD_CPUTIME_ID) - c0;
    sp_thread_ctx_detach();
    sp_sampler_thread_unregister();
    return NULL;
}

static void
test_active_threads(void)
{
    worker_t          w[2] = { { .span_byte = 0xc1, .sleep_half = 0 },
                               { .span_byte = 0xc2, .sleep_half = 1 } };
    pthread_t         t[2];
    sp_raw_sample_t  *s[256];
    size_t            n, i, k, total[2] = { 0, 0 }, nonwall = 0, unlabelled = 0;
    uint64_t          wall[2] = { 0, 0 }, off[2] = { 0, 0 };
    double            want_off, got_off, ticks_per_s;
    sp_sampler_stats_t  st;

    /* drop what the tests before left */
    while ((n = sp_sampler_peek(s, 256)) > 0) {
        sp_sampler_release(n);
    }
    for (i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    while ((n = sp_sampler_peek(s, 256)) > 0) {
        for (i = 0; i < n; i++) {
            for (k = 0; k < 2; k++) {
                if (s[i]->span_id[0] != w[k].span_byte) {
                    continue;
                }
                if (s[i]->kind != SP_SAMPLE_WALL) {
                    nonwall++;
                    continue;
                }
                const char  *name;
                size_t       len = sp_thread_ctx_record_span_name(
                                       s[i]->attrs, s[i]->attrs_len, &name);

                if (!s[i]->has_ctx || s[i]->trace_id[0] != 0xab || len != 9
                    || memcmp(name, "GET /wall", 9) != 0)
                {
                    unlabelled++;
                }
                total[k]++;
                wall[k] += (uint64_t) s[i]->weight * s[i]->period_ns;
                off[k] += s[i]->off_cpu_ns;
            }
        }
        sp_sampler_release(n);
    }

    sp_sampler_get_stats(&st);
    printf("# sampler: %llu ticks, %llu signals, %llu coalesced, %llu "
           "re-entered, %llu dropped\n", (unsigned long long) st.wall_ticks,
           (unsigned long long) st.wall_signals,
           (unsigned long long) st.wall_coalesced,
           (unsigned long long) st.reentered,
           (unsigned long long) st.dropped);
    ticks_per_s = (double) wall[0] / 1e9 * WALL_HZ
                  / ((double) w[0].wall_ns / 1e9);
    printf("# busy: %zu samples, %.0f ticks/s of its active time (rate %d), "
           "off-CPU %.2f\n", total[0], ticks_per_s, WALL_HZ,
           wall[0] ? (double) off[0] / (double) wall[0] : 0.0);
    ok(total[0] >= 5, "the active busy thread took wall samples");
    ok(nonwall == 0, "all of them WALL (CPU sampling is off)");
    ok(unlabelled == 0, "every one with the request's labels");
    /* A tick counts for the threads active when the ticker runs: a
     * ticker kept off the CPU past the end of the thread's second (seen
     * once: 0.68 of the rate over 600 ms on this shared machine) loses
     * that thread the ticks it owed. */
    ok(ticks_per_s > WALL_HZ * 0.6 && ticks_per_s < WALL_HZ * 1.3,
       "their weights add up to the wall rate over its active time");

    want_off = 1.0 - (double) w[1].cpu_ns / (double) w[1].wall_ns;
    got_off = wall[1] ? (double) off[1] / (double) wall[1] : 0.0;
    printf("# sleeper: %zu samples, off-CPU %.3f, measured by the thread "
           "%.3f\n", total[1], got_off, want_off);
    ok(total[1] >= 5, "the sleeping thread took wall samples");
    ok(want_off > 0.3, "it slept a good part of its active time");
    /* Under load a tick delivered late to a preempted thread stands for
     * one period, not for the longer stretch it did not run: the share
     * reads low by up to ~0.1 then. */
    ok(got_off > want_off - 0.2 && got_off < want_off + 0.1,
       "its off-CPU share is near the share it did not run");
}


/* ---- 4: no system call to go active or inactive ------------------------- */

static volatile sig_atomic_t  trapped;
static volatile long          trapped_nr;

static void
on_sigsys(int sig, siginfo_t *si, void *uc)
{
    trapped++;
    trapped_nr = si->si_syscall;
}

/* In a child process (its only thread: the dead end of a seccomp filter
 * stays out of the test's process): registers, then counts the system
 * calls 100,000 switches make into result[] (shared memory), and leaves
 * with exit_group, the one call still allowed besides sigreturn and a
 * CLOCK_MONOTONIC read. */
static void
toggler(volatile long *result)
{
    struct sock_filter  f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 5, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 2),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                 offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_MONOTONIC, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog   prog = { .len = sizeof(f) / sizeof(f[0]),
                                 .filter = f };
    struct sigaction    sa;
    sigset_t            set;
    int                 i;

    if (sp_sampler_thread_register_on_demand() != 0) {
        result[0] = -2;
        syscall(SYS_exit_group, 0);
    }
    /* The handler's own clock reads are not the switches': the sampler's
     * signals are held back while the filter counts. */
    sigemptyset(&set);
    sigaddset(&set, SP_SAMPLER_WALL_SIGNAL);
    sigaddset(&set, SIGPROF);
    sigprocmask(SIG_BLOCK, &set, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    {
        result[0] = -1;
        syscall(SYS_exit_group, 0);
    }
    for (i = 0; i < 100000; i++) {
        sp_sampler_wall_active(1);
        sink += i;
        sp_sampler_wall_active(0);
    }
    result[0] = trapped;
    result[1] = trapped_nr;
    syscall(SYS_exit_group, 0);
}

static void
test_toggle_no_syscall(void)
{
    volatile long  *result;
    pid_t           pid;

    result = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (result == MAP_FAILED) {
        abort();
    }
    result[0] = -3;
    pid = fork();
    if (pid == 0) {
        toggler(result);
    }
    waitpid(pid, NULL, 0);
    printf("# system calls trapped while switching: %ld (last nr %ld)\n",
           result[0], result[1]);
    is_int(result[0], 0, "100,000 active/inactive switches: no system call");
    munmap((void *) result, 4096);
}


/* ---- 5: pause, types, stop ---------------------------------------------- */

/* An active thread with a wall signal pending when the sampler pauses (it
 * holds the signal back until then) is signalled again after the resume:
 * the tick the paused handler dropped does not stay owed forever. */
typedef struct {
    atomic_int  stage;
    atomic_int  eintr;
    int         fd;
} held_t;

static void *
held_signal(void *arg)
{
    held_t         *h = arg;
    sigset_t        set;
    struct pollfd   pfd = { .fd = h->fd, .events = POLLIN };
    int             rc;

    sigemptyset(&set);
    sigaddset(&set, SP_SAMPLER_WALL_SIGNAL);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    sp_sampler_thread_register_on_demand();
    sp_sampler_wall_active(1);
    atomic_store(&h->stage, 1);
    while (atomic_load(&h->stage) != 2) {
        usleep(1000);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);   /* taken while paused */
    atomic_store(&h->stage, 3);
    while ((rc = poll(&pfd, 1, -1)) <= 0) {
        if (rc < 0 && errno == EINTR) {
            atomic_fetch_add(&h->eintr, 1);
        }
    }
    sp_sampler_wall_active(0);
    sp_sampler_thread_unregister();
    return NULL;
}

static void
test_held_across_pause(void)
{
    held_t     h;
    pthread_t  t;
    int        p[2];
    char       c = 'x';

    memset(&h, 0, sizeof(h));
    if (pipe(p) != 0) {
        abort();
    }
    h.fd = p[0];
    pthread_create(&t, NULL, held_signal, &h);
    while (atomic_load(&h.stage) != 1) {
        usleep(1000);
    }
    wait_ticks(3);                  /* one signal sent, held back */
    sp_sampler_set_paused(1);
    atomic_store(&h.stage, 2);
    while (atomic_load(&h.stage) != 3) {
        usleep(1000);
    }
    sp_sampler_set_paused(0);
    wait_ticks(20);
    if (write(p[1], &c, 1) != 1) {
        abort();
    }
    pthread_join(t, NULL);
    close(p[0]);
    close(p[1]);
    printf("# wall signals after the resume: %d\n", atomic_load(&h.eintr));
    ok(atomic_load(&h.eintr) >= 5,
       "a tick held back across a pause leaves the thread signalled after");
}

static void
test_ticker_stops(void)
{
    uint64_t  t0, t1;
    int       before;

    test_held_across_pause();
    ok(wait_ticks(5), "ticking");
    sp_sampler_set_paused(1);
    usleep(20000);
    t0 = ticks();
    usleep(200000);
    t1 = ticks();
    printf("# ticks in 200 ms paused: %llu\n", (unsigned long long) (t1 - t0));
    ok(t1 == t0, "paused: no tick");
    sp_sampler_set_paused(0);
    ok(wait_ticks(5), "resumed: ticking again");

    sp_sampler_set_types(SP_SAMPLER_TYPE_CPU);
    usleep(20000);
    t0 = ticks();
    usleep(200000);
    ok(ticks() == t0, "types without wall: no tick");
    sp_sampler_set_types(SP_SAMPLER_TYPE_WALL);
    ok(wait_ticks(5), "wall back on: ticking again");

    before = threads_now();
    sp_sampler_stop();
    t0 = ticks();
    usleep(100000);
    printf("# threads before stop %d, after %d\n", before, threads_now());
    ok(threads_now() == before - 1, "stop joined the ticker thread");
    ok(ticks() == t0, "stopped: no tick");
}


int
main(int argc, char **argv)
{
    sp_sampler_conf_t  conf = { .rate_hz = 100, .max_depth = 32,
                                .ring_capacity = 65536,
                                .wall_rate_hz = WALL_HZ,
                                .types = SP_SAMPLER_TYPE_WALL };
    char               err[256] = "";
    int                before;

    /* Lazy binding would resolve PLT entries from inside the handler. */
    if (getenv("LD_BIND_NOW") == NULL) {
        setenv("LD_BIND_NOW", "1", 1);
        execv("/proc/self/exe", argv);
    }
    alarm(120);     /* a deadlock fails the test instead of hanging it */

    before = threads_now();
    ok(sp_sampler_start(&conf, err, sizeof(err)) == 0, "sampler starts (%s)",
       err);
    is_int(threads_now(), before + 1, "one ticker thread started");

    test_waiting_threads();
    test_active_threads();
    test_toggle_no_syscall();
    test_ticker_stops();
    return done_testing();
}
