/*
 * bench/sample_cost.c - what one CPU-profiling sample costs the thread it
 * interrupts, by stack depth.
 *
 *   sample_cost [--max-depth M] [--n N]
 *
 * Starts spanprof's sampler (common/profile/sampler.c) as a worker does, registers
 * this thread (so the handler takes the same path as in nginx, including
 * timer_getoverrun), attaches a request record (so the labels are copied),
 * then for each depth d recurses d frames (noinline) and raises SIGPROF
 * synchronously N times, timing each raise() with CLOCK_MONOTONIC. raise()
 * delivers the signal to the calling thread before it returns, so each
 * timing is: tgkill + kernel signal delivery + the handler + sigreturn.
 * The ring is drained outside the timed region.
 *
 * The baseline is the same loop after sp_sampler_stop(): the handler is
 * still installed but returns at once. cost = sampled - median(baseline).
 *
 * The thread's CPU timer runs at 1 Hz here (not the 100 Hz of nginx) so
 * that timer expiries do not land inside the timed raises; what the handler
 * does per sample does not depend on the rate.
 *
 * Output: one line per depth:
 *   depth=D frames=F base_med=NS med=NS p99=NS cost_med=NS cost_p99=NS
 * F is the number of frames the sampler recorded (d + main + libc start).
 */

#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/profile/sampler.h"
#include "common/profile/thread_ctx.h"

#define MAX_N  200000

static const unsigned  depths[] = { 8, 16, 32, 64, 128 };
#define NDEPTHS  (sizeof(depths) / sizeof(depths[0]))

static unsigned   n_iter = 20000;
#define BLOCK  250     /* raises per block; the ring holds 1024 */

static uint64_t  *times, *base_times;
static unsigned   n_done;

static double     base_med[NDEPTHS], med[NDEPTHS], p99[NDEPTHS];
static double     base_p99[NDEPTHS], stopped_med[NDEPTHS];
static unsigned   frames_seen[NDEPTHS];
static volatile unsigned  sink;

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t  x = *(const uint64_t *) a, y = *(const uint64_t *) b;

    return x < y ? -1 : x > y;
}

static double
pct(uint64_t *v, unsigned n, double p)
{
    size_t  i = (size_t) (p * (n - 1) + 0.5);

    return (double) v[i];
}

static void
drain(unsigned *max_frames)
{
    sp_raw_sample_t  *s[256];
    size_t            n, i;

    while ((n = sp_sampler_peek(s, 256)) > 0) {
        for (i = 0; i < n; i++) {
            if (max_frames != NULL && s[i]->nframes > *max_frames) {
                *max_frames = s[i]->nframes;
            }
        }
        sp_sampler_release(n);
    }
}

static struct sigaction  sampler_action, empty_action;

/* The baseline handler: what the sampler's handler does when sampling is
 * off (save errno, return). */
static void
empty_handler(int sig, siginfo_t *si, void *uc)
{
    int  saved_errno = errno;

    errno = saved_errno;
}

static void
timed_block(uint64_t *out, unsigned n)
{
    struct timespec  a, b;
    unsigned         i;

    for (i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        raise(SIGPROF);
        clock_gettime(CLOCK_MONOTONIC, &b);
        out[i] = (uint64_t) (b.tv_sec - a.tv_sec) * 1000000000u
                 + (uint64_t) b.tv_nsec - (uint64_t) a.tv_nsec;
    }
}

/* The measurement, at the bottom of the recursion: blocks of sampled and
 * baseline raises alternate, so drift (other tenants of the VM, frequency)
 * hits both alike. The ring is drained between blocks. */
__attribute__((noinline)) static void
measure(unsigned di)
{
    unsigned  blk, per = BLOCK, fr = 0;

    drain(NULL);
    for (blk = 0; blk < n_iter / per; blk++) {
        sigaction(SIGPROF, &sampler_action, NULL);
        timed_block(times + blk * per, per);
        drain(&fr);
        sigaction(SIGPROF, &empty_action, NULL);
        timed_block(base_times + blk * per, per);
    }
    sigaction(SIGPROF, &sampler_action, NULL);
    n_done = n_iter / per * per;
    qsort(times, n_done, sizeof(uint64_t), cmp_u64);
    qsort(base_times, n_done, sizeof(uint64_t), cmp_u64);
    med[di] = pct(times, n_done, 0.5);
    p99[di] = pct(times, n_done, 0.99);
    base_med[di] = pct(base_times, n_done, 0.5);
    base_p99[di] = pct(base_times, n_done, 0.99);
    frames_seen[di] = fr;
}

/* The same raises after sp_sampler_stop() (its handler returns at once):
 * a check that the empty handler is a fair baseline. */
__attribute__((noinline)) static void
measure_stopped(unsigned di)
{
    timed_block(base_times, n_iter);
    qsort(base_times, n_iter, sizeof(uint64_t), cmp_u64);
    stopped_med[di] = pct(base_times, n_iter, 0.5);
}

__attribute__((noinline)) static void
recurse(unsigned d, unsigned di, int sampled)
{
    if (d <= 1) {
        if (sampled) {
            measure(di);
        } else {
            measure_stopped(di);
        }
    } else {
        recurse(d - 1, di, sampled);
    }
    sink += d;      /* not a tail call: every level keeps its frame */
}

int
main(int argc, char **argv)
{
    static sp_thread_ctx_record_t  rec;
    /* The ring nginx uses at 100 Hz (1024 slots), drained every 256
     * samples: its slots stay in cache, as in a worker. */
    sp_sampler_conf_t  conf = { .rate_hz = 1, .max_depth = 256,
                                .ring_capacity = 1024 };
    sp_sampler_stats_t st;
    uint8_t            tid[16], sid[8];
    char               err[256];
    unsigned           di;
    int                i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max-depth") == 0 && i + 1 < argc) {
            conf.max_depth = (unsigned) atoi(argv[++i]);
        } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            n_iter = (unsigned) atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--max-depth M] [--n N]\n", argv[0]);
            return 2;
        }
    }
    if (n_iter < 100 || n_iter > MAX_N) {
        fprintf(stderr, "--n must be 100..%d\n", MAX_N);
        return 2;
    }
    times = calloc(n_iter, sizeof(uint64_t));
    base_times = calloc(n_iter, sizeof(uint64_t));

    /* As in nginx (linked with -z now): no lazy PLT binding in the handler. */
    if (getenv("LD_BIND_NOW") == NULL) {
        setenv("LD_BIND_NOW", "1", 1);
        execv("/proc/self/exe", argv);
    }

    if (sp_sampler_start(&conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "sampler: %s\n", err);
        return 1;
    }
    if (sp_sampler_thread_register() != 0) {
        perror("sp_sampler_thread_register");
        return 1;
    }
    memset(tid, 0xab, sizeof(tid));
    memset(sid, 0xcd, sizeof(sid));
    sp_thread_ctx_record_init(&rec, tid, sid, 1, "GET /bench", 10);
    sp_thread_ctx_attach(&rec);

    sigaction(SIGPROF, NULL, &sampler_action);
    memset(&empty_action, 0, sizeof(empty_action));
    empty_action.sa_sigaction = empty_handler;
    empty_action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&empty_action.sa_mask);

    /* Warm-up: libunwind's caches for every depth. */
    for (di = 0; di < NDEPTHS; di++) {
        recurse(depths[di], di, 1);
    }
    for (di = 0; di < NDEPTHS; di++) {
        recurse(depths[di], di, 1);
    }
    sp_sampler_get_stats(&st);

    sp_sampler_stop();
    for (di = 0; di < NDEPTHS; di++) {
        recurse(depths[di], di, 0);
    }

    printf("# max_depth=%u n=%u samples=%llu dropped=%llu skipped_loader=%llu "
           "reentered=%llu\n", conf.max_depth, n_iter,
           (unsigned long long) st.samples, (unsigned long long) st.dropped,
           (unsigned long long) st.skipped_loader,
           (unsigned long long) st.reentered);
    for (di = 0; di < NDEPTHS; di++) {
        printf("depth=%u frames=%u base_med=%.0f base_p99=%.0f med=%.0f "
               "p99=%.0f cost_med=%.0f cost_p99=%.0f stopped_med=%.0f\n",
               depths[di], frames_seen[di], base_med[di], base_p99[di],
               med[di], p99[di], med[di] - base_med[di],
               p99[di] - base_med[di], stopped_med[di]);
    }
    return 0;
}
