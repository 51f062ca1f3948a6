#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/base/clock.h"
#include "common/base/file_read.h"

/* Readers load mode, cur and a scale: one or two cache lines, written by
 * one thread every SP_CLOCK_REBASE_NS. */
_Alignas(64) sp_clock_t  sp_clock = { .busy = ATOMIC_FLAG_INIT };

/* A (counter, CLOCK_REALTIME) pair is kept only when the two counter reads
 * around clock_gettime are this close (0.3 us at 3 GHz; the call takes
 * about 70 ticks): a pair with an interrupt or a preemption inside would
 * carry its delay into the rate. Its middle is then within 0.2 us. */
#define PAIR_MAX_TICKS  1000

/* The shortest span a rate is measured over (after a reset; a rebase
 * measures over SP_CLOCK_REBASE_NS): pairs good to 0.2 us make it good to
 * 2e-4, 0.8 us at the end of a scale's 4 ms at worst. */
#define RATE_MIN_NS     (1000 * 1000)

/* ns per tick << 32 of a counter between 20 GHz and 100 MHz. */
#define MULT_MIN        ((UINT64_C(1) << 32) / 20)
#define MULT_MAX        (UINT64_C(10) << 32)


static int
clocksource_is_tsc(void)
{
    int      tsc;
    char    *name, err[128];
    size_t   len;

    /* A sysfs attribute: 4096 bytes by its size, a line by its contents. */
    if (sp_file_read_all("/sys/devices/system/clocksource/clocksource0/"
                         "current_clocksource", 4096, &name, &len, err,
                         sizeof(err)) != 0)
    {
        return 0;
    }
    tsc = strcmp(name, "tsc\n") == 0 || strcmp(name, "tsc") == 0;
    free(name);
    return tsc;
}


static int
counter_invariant(void)
{
#if defined(__x86_64__)
    unsigned  a, b, c, d;

    /* CPUID 0x80000007 EDX bit 8: the counter runs at one rate in every
     * P-, C- and T-state (Linux's constant_tsc and nonstop_tsc). */
    return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
#else
    return 0;
#endif
}


int
sp_clock_init(void)
{
    const char  *env = getenv("SPANPROF_CLOCK");

    if (env != NULL && strcmp(env, "clock_gettime") == 0) {
        return sp_clock_use(SP_CLOCK_GETTIME);
    }
    if (counter_invariant() && clocksource_is_tsc()) {
        return sp_clock_use(SP_CLOCK_TSC);
    }
    return sp_clock_use(SP_CLOCK_GETTIME);
}


int
sp_clock_use(int mode)
{
#if defined(__x86_64__)
    if (mode != SP_CLOCK_TSC) {
        mode = SP_CLOCK_GETTIME;
    }
#else
    mode = SP_CLOCK_GETTIME;
#endif
    atomic_store_explicit(&sp_clock.mode, (unsigned) mode,
                          memory_order_relaxed);
    return mode;
}


void
sp_clock_get_stats(sp_clock_stats_t *st)
{
    st->tsc = atomic_load_explicit(&sp_clock.mode, memory_order_relaxed)
              == SP_CLOCK_TSC;
    st->rebases = atomic_load_explicit(&sp_clock.rebases,
                                       memory_order_relaxed);
    st->rate_resets = atomic_load_explicit(&sp_clock.rate_resets,
                                           memory_order_relaxed);
}


#if defined(__x86_64__)

/* The rate from the scale in use to the pair (tsc, now); 0 when it cannot
 * be trusted yet (too soon) or at all (the clock stepped, or the counter's
 * rate jumped: counted, and measured again from this pair). *keep is set
 * when it is too soon: the old base stays, to be measured from later. */
static uint64_t
measure_rate(const sp_clock_scale_t *old, uint64_t tsc, uint64_t now,
    int *keep)
{
    uint64_t  old_tsc, old_ns, old_mult, dn, dt, mult;

    *keep = 0;
    old_tsc = atomic_load_explicit(&old->tsc, memory_order_relaxed);
    old_ns = atomic_load_explicit(&old->ns, memory_order_relaxed);
    old_mult = atomic_load_explicit(&old->mult, memory_order_relaxed);

    if (old_ns == 0) {
        return 0;                       /* the first pair */
    }
    if (tsc <= old_tsc || now <= old_ns) {
        atomic_fetch_add_explicit(&sp_clock.rate_resets, 1,
                                  memory_order_relaxed);
        return 0;
    }
    dn = now - old_ns;
    dt = tsc - old_tsc;
    if (dn < RATE_MIN_NS) {
        *keep = 1;
        return 0;
    }

    mult = (uint64_t) (((unsigned __int128) dn << 32) / dt);
    if (mult < MULT_MIN || mult > MULT_MAX
        || (old_mult != 0 && (mult > old_mult + old_mult / 64
                              || mult < old_mult - old_mult / 64)))
    {
        atomic_fetch_add_explicit(&sp_clock.rate_resets, 1,
                                  memory_order_relaxed);
        return 0;
    }
    return mult;
}


static void
publish(unsigned cur, uint64_t tsc, uint64_t now, uint64_t mult)
{
    sp_clock_scale_t  *next = &sp_clock.scale[(cur + 1) & 1];
    uint64_t           seq;

    seq = atomic_load_explicit(&next->seq, memory_order_relaxed);
    atomic_store_explicit(&next->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&next->tsc, tsc, memory_order_relaxed);
    atomic_store_explicit(&next->ns, now, memory_order_relaxed);
    atomic_store_explicit(&next->mult, mult, memory_order_relaxed);
    atomic_store_explicit(&next->limit,
                          mult ? (uint64_t) (((unsigned __int128)
                                              SP_CLOCK_REBASE_NS << 32)
                                             / mult)
                               : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&next->seq, seq + 2, memory_order_release);
    atomic_store_explicit(&sp_clock.cur, cur + 1, memory_order_release);
}


uint64_t
sp_clock_slow_ns(void)
{
    int        keep;
    unsigned   cur;
    uint64_t   t1, t2, now, mult;

    if (atomic_load_explicit(&sp_clock.mode, memory_order_relaxed)
        != SP_CLOCK_TSC
        || atomic_flag_test_and_set_explicit(&sp_clock.busy,
                                             memory_order_acquire))
    {
        return sp_clock_realtime_ns();
    }

    t1 = __builtin_ia32_rdtsc();
    now = sp_clock_realtime_ns();
    t2 = __builtin_ia32_rdtsc();

    /* An interrupted pair is not used: the next read tries again. */
    if (t2 - t1 <= PAIR_MAX_TICKS) {
        cur = atomic_load_explicit(&sp_clock.cur, memory_order_relaxed);
        mult = measure_rate(&sp_clock.scale[cur & 1], t1 + (t2 - t1) / 2,
                            now, &keep);
        if (!keep) {
            publish(cur, t1 + (t2 - t1) / 2, now, mult);
            if (mult != 0) {
                atomic_fetch_add_explicit(&sp_clock.rebases, 1,
                                          memory_order_relaxed);
            }
        }
    }

    atomic_flag_clear_explicit(&sp_clock.busy, memory_order_release);
    return now;
}

#else

uint64_t
sp_clock_slow_ns(void)
{
    return sp_clock_realtime_ns();
}

#endif
