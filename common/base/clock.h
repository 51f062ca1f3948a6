#ifndef SP_CLOCK_H
#define SP_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* The wall clock spans and samples are stamped with.
 *
 * Where the kernel itself keeps time with the CPU's time-stamp counter (its
 * clocksource is "tsc": the counter is invariant and in step on every CPU,
 * which the kernel checked), sp_now_ns() reads the counter and scales it,
 * instead of calling clock_gettime: about 10 ns against 23 on the
 * benchmark machine, and a request reads the clock twice. The scale is
 * CLOCK_REALTIME's own rate, measured between two reads of it, and the
 * reading is based again on CLOCK_REALTIME at least every
 * SP_CLOCK_REBASE_NS: so it follows NTP's slewing and any step within that
 * time, and stays within tens of nanoseconds of CLOCK_REALTIME otherwise.
 * A rebase is one clock_gettime, made by whichever thread (of any process
 * of the server) first finds the scale too old.
 *
 * Elsewhere (another clocksource, another architecture, or before
 * sp_clock_init()), clock_gettime(CLOCK_REALTIME).
 *
 * Lock-free and async-signal-safe (the sampler's handler reads it): a
 * reader that finds the scale being replaced, or another thread rebasing,
 * reads clock_gettime instead of waiting. */

#define SP_CLOCK_REBASE_NS  (4 * 1000 * 1000)

enum { SP_CLOCK_GETTIME = 0, SP_CLOCK_TSC = 1 };

/* One scale: CLOCK_REALTIME was ns when the counter read tsc; after it,
 * ns per tick << 32 is mult, for at most limit ticks. seq is odd while the
 * scale is written. mult and limit are 0 while the rate is unknown. */
typedef struct {
    _Atomic uint64_t  seq;
    _Atomic uint64_t  tsc;
    _Atomic uint64_t  ns;
    _Atomic uint64_t  mult;
    _Atomic uint64_t  limit;
} sp_clock_scale_t;

/* The scales, shared by every process of the server where
 * sp_clock_init() could map them before the fork: one rebase per
 * SP_CLOCK_REBASE_NS for the whole server, not one per process (prefork's
 * children each serve a request every few milliseconds and found their
 * own scale old every few requests). claim is 0, or the counter when a
 * thread began to rebase: another thread takes it over once it is older
 * than a rebase can take, so a process killed while rebasing leaves no
 * lock behind. */
typedef struct {
    _Atomic unsigned  cur;          /* scale[cur & 1] is in use */
    _Atomic uint64_t  claim;
    sp_clock_scale_t  scale[2];
} sp_clock_state_t;

/* This process's: its mode, where its scales are, and what it did. */
typedef struct {
    _Atomic unsigned   mode;
    sp_clock_state_t  *state;
    _Atomic uint64_t   rebases;
    _Atomic uint64_t   rate_resets;
} sp_clock_t;

extern sp_clock_t  sp_clock;

typedef struct {
    int       tsc;          /* 1 while timestamps come from the counter */
    int       shared;       /* 1 when the scales are the server's, shared
                             * with the other processes */
    uint64_t  rebases;      /* scales this process measured and put in
                             * use */
    uint64_t  rate_resets;  /* rates it threw away (the clock stepped, or
                             * the counter's rate jumped): measured again */
} sp_clock_stats_t;

/* Once, in the process that forks the others (nginx's master, httpd's
 * parent), before they fork: chooses the counter where the CPU says it is
 * invariant and /sys says the kernel's clocksource is "tsc", and then puts
 * the scales in memory shared with the processes it forks (mapped once;
 * later calls keep it). Returns the mode chosen. Any thread may read the
 * clock before or without it (on scales of its process's own). */
int sp_clock_init(void);

/* Back to scales of this process's own, and the shared ones unmapped (in
 * this process only: those forked keep theirs; in a forked process it does
 * nothing). For a server that unloads the code at a restart (httpd),
 * before it does, in the process that called sp_clock_init(). */
void sp_clock_release(void);

/* Forces a mode (tests and benchmarks; SP_CLOCK_TSC only where the CPU
 * has the counter). Returns the mode in force. */
int sp_clock_use(int mode);

void sp_clock_get_stats(sp_clock_stats_t *st);

static inline uint64_t
sp_clock_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The slow path of sp_now_ns(): rebases the scale when it is too old (or
 * reads clock_gettime while another thread does). */
uint64_t sp_clock_slow_ns(void);

/* Wall clock in nanoseconds since the Unix epoch (span timestamps). */
static inline uint64_t
sp_now_ns(void)
{
#if defined(__x86_64__)
    const sp_clock_state_t  *st;
    const sp_clock_scale_t  *sc;
    uint64_t                 seq, d, ns, mult, limit;

    if (atomic_load_explicit(&sp_clock.mode, memory_order_relaxed)
        == SP_CLOCK_TSC)
    {
        st = sp_clock.state;
        sc = &st->scale[atomic_load_explicit(&st->cur,
                                             memory_order_acquire) & 1];
        seq = atomic_load_explicit(&sc->seq, memory_order_acquire);
        d = __builtin_ia32_rdtsc() - atomic_load_explicit(&sc->tsc, memory_order_relaxed);
        ns = atomic_load_explicit(&sc->ns, memory_order_relaxed);
        mult = atomic_load_explicit(&sc->mult, memory_order_relaxed);
        limit = atomic_load_explicit(&sc->limit, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);

        /* A counter read before the scale's base wraps d: too old. */
        if (d < limit && !(seq & 1)
            && atomic_load_explicit(&sc->seq, memory_order_relaxed) == seq)
        {
            return ns + (uint64_t) (((unsigned __int128) d * mult) >> 32);
        }
        return sp_clock_slow_ns();
    }
#endif
    return sp_clock_realtime_ns();
}

/* Monotonic nanoseconds (deadlines, intervals, backoff). */
static inline uint64_t
sp_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

#endif
