#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/base/clock.h"
#include "common/base/file_read.h"

/* Readers load mode and the state's address (one line of this process's),
 * then cur and a scale: written by one thread every SP_CLOCK_REBASE_NS. */
static _Alignas(64) sp_clock_state_t  sp_clock_local;
_Alignas(64) sp_clock_t  sp_clock = { .state = &sp_clock_local };

/* The shared state mapped by sp_clock_init(), if any, and in which
 * process: only that one lets it go (a forked process's threads may read
 * it until they exit). */
static sp_clock_state_t  *sp_clock_mapped;
static pid_t              sp_clock_mapped_by;

/* A (counter, CLOCK_REALTIME) pair is kept only when the two counter reads
 * around clock_gettime are this close (0.3 us at 3 GHz; the call takes
 * about 70 ticks): a pair with an interrupt or a preemption inside would
 * carry its delay into the rate. Its middle is then within 0.2 us. */
#define PAIR_MAX_TICKS  1000

/* The shortest span a rate is measured over (after a reset; a rebase
 * measures over SP_CLOCK_REBASE_NS): pairs good to 0.2 us make it good to
 * 2e-4, 0.8 us at the end of a scale's 4 ms at worst. */
#define RATE_MIN_NS     (1000 * 1000)

/* A claim older than this many ticks (5 ms at 3.3 GHz; a rebase takes
 * under a microsecond) is a rebase that will not finish: its thread was
 * killed, or stopped. */
#define CLAIM_STALE_TICKS  (UINT64_C(1) << 24)

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


static void share_state(void);


int
sp_clock_init(void)
{
    const char  *env = getenv("SPANPROF_CLOCK");

    if (env != NULL && strcmp(env, "clock_gettime") == 0) {
        return sp_clock_use(SP_CLOCK_GETTIME);
    }
    if (counter_invariant() && clocksource_is_tsc()) {
        share_state();
        return sp_clock_use(SP_CLOCK_TSC);
    }
    return sp_clock_use(SP_CLOCK_GETTIME);
}


/* The scales into memory the processes forked from here share (zeroed:
 * the first reader makes the first pair). Without it, each process keeps
 * its own, as before. */
static void
share_state(void)
{
    void  *p;

    if (sp_clock_mapped != NULL) {
        return;
    }
    p = mmap(NULL, sizeof(sp_clock_state_t), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return;
    }
    sp_clock_mapped = p;
    sp_clock_mapped_by = getpid();
    sp_clock.state = p;
}


void
sp_clock_release(void)
{
    sp_clock_state_t  *p = sp_clock_mapped;

    if (p == NULL || getpid() != sp_clock_mapped_by) {
        return;
    }
    sp_clock.state = &sp_clock_local;
    sp_clock_mapped = NULL;
    munmap(p, sizeof(sp_clock_state_t));
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
    st->shared = sp_clock.state != &sp_clock_local;
    st->rebases = atomic_load_explicit(&sp_clock.rebases,
                                       memory_order_relaxed);
    st->rate_resets = atomic_load_explicit(&sp_clock.rate_resets,
                                           memory_order_relaxed);
}


#if defined(__x86_64__)

/* The rate from the scale in use to the pair (tsc, now); 0 when it cannot
 * be trusted yet (too soon) or at all (the clock stepped, or the counter's
 * rate jumped: counted, and measured again from this pair). *keep is set
 * when it is too soon: the old base stays, to be measured from later. The
 * old scale is read under its seq: a thread that took over a stale claim
 * may be writing it. */
static uint64_t
measure_rate(const sp_clock_scale_t *old, uint64_t tsc, uint64_t now,
    int *keep)
{
    uint64_t  seq, old_tsc, old_ns, old_mult, dn, dt, mult;

    *keep = 0;
    seq = atomic_load_explicit(&old->seq, memory_order_acquire);
    old_tsc = atomic_load_explicit(&old->tsc, memory_order_relaxed);
    old_ns = atomic_load_explicit(&old->ns, memory_order_relaxed);
    old_mult = atomic_load_explicit(&old->mult, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if ((seq & 1)
        || atomic_load_explicit(&old->seq, memory_order_relaxed) != seq)
    {
        return 0;                       /* being written: start again */
    }

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


/* Writes the scale after cur and puts it in use. Its seq is taken from
 * even to odd first: of two threads that would write it (one that took
 * over a stale claim, and the one it took it from), one writes and the
 * other gives up. Returns 0 when this one gave up. */
static int
publish(sp_clock_state_t *st, unsigned cur, uint64_t tsc, uint64_t now,
    uint64_t mult)
{
    sp_clock_scale_t  *next = &st->scale[(cur + 1) & 1];
    uint64_t           seq;

    seq = atomic_load_explicit(&next->seq, memory_order_relaxed);
    if ((seq & 1)
        || !atomic_compare_exchange_strong_explicit(&next->seq, &seq,
                                                    seq + 1,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed))
    {
        return 0;
    }
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
    /* Only from the cur this scale was made after: a late writer's scale
     * is not put back in use over a newer one. */
    atomic_compare_exchange_strong_explicit(&st->cur, &cur, cur + 1,
                                            memory_order_release,
                                            memory_order_relaxed);
    return 1;
}


/* Takes the right to rebase: a free claim, or one older than a rebase can
 * take. Returns the claim's value (never 0), or 0 when another thread is
 * rebasing. */
static uint64_t
claim(sp_clock_state_t *st, uint64_t tsc)
{
    uint64_t  c = atomic_load_explicit(&st->claim, memory_order_relaxed);

    /* Signed: a claim made on another CPU a few ticks after this read is
     * fresh, not 2^64 ticks old. */
    if (c != 0 && (int64_t) (tsc - c) < (int64_t) CLAIM_STALE_TICKS) {
        return 0;
    }
    tsc |= 1;                           /* never 0 */
    return atomic_compare_exchange_strong_explicit(&st->claim, &c, tsc,
                                                   memory_order_acquire,
                                                   memory_order_relaxed)
           ? tsc : 0;
}


uint64_t
sp_clock_slow_ns(void)
{
    int                keep;
    unsigned           cur;
    uint64_t           t1, t2, now, mult, mine;
    sp_clock_state_t  *st = sp_clock.state;

    if (atomic_load_explicit(&sp_clock.mode, memory_order_relaxed)
        != SP_CLOCK_TSC)
    {
        return sp_clock_realtime_ns();
    }

    t1 = __builtin_ia32_rdtsc();
    mine = claim(st, t1);
    if (mine == 0) {
        return sp_clock_realtime_ns();
    }
    now = sp_clock_realtime_ns();
    t2 = __builtin_ia32_rdtsc();

    /* An interrupted pair is not used: the next read tries again. */
    if (t2 - t1 <= PAIR_MAX_TICKS) {
        cur = atomic_load_explicit(&st->cur, memory_order_relaxed);
        mult = measure_rate(&st->scale[cur & 1], t1 + (t2 - t1) / 2, now,
                            &keep);
        if (!keep && publish(st, cur, t1 + (t2 - t1) / 2, now, mult)
            && mult != 0)
        {
            atomic_fetch_add_explicit(&sp_clock.rebases, 1,
                                      memory_order_relaxed);
        }
    }

    /* Unless another thread has taken the claim over meanwhile. */
    atomic_compare_exchange_strong_explicit(&st->claim, &mine, 0,
                                            memory_order_release,
                                            memory_order_relaxed);
    return now;
}

#else

uint64_t
sp_clock_slow_ns(void)
{
    return sp_clock_realtime_ns();
}

#endif
