#define _GNU_SOURCE

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "common/base/clock.h"
#include "common/profile/loader_snapshot.h"
#include "common/profile/sampler.h"
#include "common/profile/slot_ring.h"

/* Frames of the handler itself (and the signal trampoline) above the
 * interrupted one; unwound, then skipped. */
#define HANDLER_FRAMES  4

/* What the ticker reads of a registered thread: one cache line each, so
 * that a thread's flag stores never bounce another's line. */
typedef struct {
    _Atomic pid_t     tid;        /* 0: free */
    _Atomic int       active;     /* its wall time counts (on demand) */
    _Atomic int       idle;       /* in its idle wait (nginx's event wait) */
    _Atomic uint32_t  pending;    /* ticks sent, not yet taken */
    char              pad[64 - 3 * sizeof(int) - sizeof(uint32_t)];
} wall_slot_t;

/* Slots come in chunks that are never freed nor moved, so the ticker
 * walks them without the registry's lock. */
#define SLOTS_PER_CHUNK  64
#define MAX_CHUNKS       1024

typedef struct {
    timer_t                timer;
    int                    armed;
    size_t                 slot;      /* in the registry */
    volatile sig_atomic_t  busy;
    wall_slot_t           *wall;      /* its slot */
    int                    active;    /* its wall time counts (not idle) */
    /* Where the last wall signal left the thread's clocks (monotonic, its
     * CPU clock, its idle total), and when it last went active. */
    uint64_t               last_tick_ns;
    uint64_t               last_cpu_ns;
    uint64_t               last_idle_ns;
    uint64_t               active_ns;
    uint64_t               active_idle_ns;
    sp_sampler_idle_t      idle;
} thread_state_t;

/* Registered threads' CPU timers, so that any thread can re-arm them all. */
typedef struct {
    timer_t   timer;
    int       used;
} reg_entry_t;

static sp_slot_ring_t         ring;
static sp_sampler_conf_t      conf;
static _Atomic int            running;
static int                    installed;
static struct sigaction       old_action;
static _Atomic uint64_t       n_samples, n_skipped_loader, n_reentered;
static _Atomic uint64_t       n_wall_samples, idle_total_ns;
static __thread thread_state_t  ts;
static pthread_mutex_t        reg_lock = PTHREAD_MUTEX_INITIALIZER;
static reg_entry_t           *reg;
static size_t                 reg_n, reg_cap;
/* Control state; written under reg_lock, read anywhere. */
static _Atomic unsigned       base_rate;
static _Atomic unsigned       shed_level;
static _Atomic int            paused;
static _Atomic unsigned       types = SP_SAMPLER_TYPE_CPU;
static _Atomic unsigned       wall_base_rate = 100;
/* What the handler reads: the periods in force, 0 when off or paused. */
static _Atomic uint32_t       cur_period;
static _Atomic uint32_t       cur_wall_period;
static sig_atomic_t *volatile idle_wake;
/* The wall ticker: one thread per process (see sampler.h). */
static wall_slot_t *_Atomic   wall_chunks[MAX_CHUNKS];
static _Atomic size_t         wall_hwm;       /* slots in use, at most */
static pthread_mutex_t        tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t         tick_cond;
static pthread_t              ticker;
static pid_t                  ticker_pid;     /* 0: no ticker */
static int                    ticker_quit;
static _Atomic uint64_t       n_ticks, n_wall_signals, n_wall_coalesced;

static int apply_locked(void);


static uint64_t
clock_ns(clockid_t id)
{
    struct timespec  t;

    if (clock_gettime(id, &t) != 0) {
        return 0;
    }
    return (uint64_t) t.tv_sec * 1000000000ull + (uint64_t) t.tv_nsec;
}

/* Of a wall sample's wall_ns, the part the thread did not run: since the
 * later of its last wall signal and the moment it went active, the time it
 * was busy (not idle) minus its CPU clock's advance since its last wall
 * signal (clamped to that busy time), as a share of the busy time. Moves
 * the baseline on. */
static uint64_t
off_cpu_share(uint64_t wall_ns)
{
    uint64_t  now = clock_ns(CLOCK_MONOTONIC);
    uint64_t  cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t  idle = ts.idle.idle_ns;
    uint64_t  from = ts.last_tick_ns, from_idle = ts.last_idle_ns;
    uint64_t  span, idle_in, busy, ran, off = 0;

    if (ts.active_ns > from) {
        from = ts.active_ns;
        from_idle = ts.active_idle_ns;
    }
    span = now > from ? now - from : 0;
    idle_in = idle > from_idle ? idle - from_idle : 0;
    busy = span > idle_in ? span - idle_in : 0;
    ran = cpu > ts.last_cpu_ns ? cpu - ts.last_cpu_ns : 0;
    if (ran > busy) {
        ran = busy;
    }
    if (busy > ran) {
        off = (uint64_t) ((unsigned __int128) wall_ns * (busy - ran) / busy);
    }
    ts.last_tick_ns = now;
    ts.last_cpu_ns = cpu;
    ts.last_idle_ns = idle;
    return off;
}

/* A wall signal while the thread waits for work: its baseline moves to
 * now (the wait's time until now is in no sample). */
static void
idle_tick(void)
{
    uint64_t  now = clock_ns(CLOCK_MONOTONIC);

    ts.last_tick_ns = now;
    ts.last_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    ts.last_idle_ns = ts.idle.idle_ns
                      + (ts.idle.counted && now > ts.idle.since
                         ? now - ts.idle.since : 0);
}

static void
sigprof_handler(int sig, siginfo_t *si, void *ucv)
{
    int                      saved_errno = errno;
    ucontext_t              *uc = ucv;
    sp_raw_sample_t         *s;
    sp_thread_ctx_record_t  *rec;
    uintptr_t                pc;
    int                      n, i, overrun, wall;
    uint32_t                 period, weight;
    uint64_t                 value, off = 0;

    wall = sig != SIGPROF;
    weight = 1;
    if (wall) {
        /* The ticks sent since the last one taken (more than one when the
         * ticker overslept or the signal waited): the weight. Taken first,
         * whatever becomes of this signal: the ticker sends this thread no
         * further one until it is back to 0. */
        weight = ts.wall != NULL
                 ? atomic_exchange_explicit(&ts.wall->pending, 0,
                                            memory_order_relaxed)
                 : 0;
        if (weight == 0) {
            weight = 1;
        }
    }
    if (!atomic_load_explicit(&running, memory_order_relaxed)) {
        goto out;
    }
    period = atomic_load_explicit(wall ? &cur_wall_period : &cur_period,
                                  memory_order_relaxed);
    if (period == 0) {
        goto out;       /* paused: a signal that was already pending */
    }
    if (ts.busy) {
        atomic_fetch_add_explicit(&n_reentered, 1, memory_order_relaxed);
        goto out;
    }
    ts.busy = 1;

    if (!wall) {
        overrun = ts.armed ? timer_getoverrun(ts.timer) : 0;
        weight = 1 + (overrun > 0 ? (uint32_t) overrun : 0);
    }
    value = (uint64_t) weight * period;

    if (wall) {
        if (!ts.active) {
            goto done;      /* sent just before it went inactive */
        }
        if (ts.idle.idle) {
            idle_tick();
            if (idle_wake != NULL) {
                *idle_wake = 1;     /* the wait was interrupted: a wake-up */
            }
            goto done;      /* idle: counted by the glue's clock reads */
        }
        off = off_cpu_share(value);
    }

    /* The request's own times, counted even if the ring is full. */
    rec = sp_thread_ctx_current();
    if (rec != NULL && rec->valid) {
        if (wall) {
            rec->sp_wall_ns += value;
            rec->sp_off_cpu_ns += off;
        } else {
            rec->sp_cpu_ns += value;
        }
    }

    s = sp_slot_ring_reserve(&ring);
    if (s == NULL) {
        goto done;      /* counted by the ring */
    }

    s->time_ns = sp_now_ns();
    s->weight = weight;
    s->period_ns = period;
    s->kind = wall ? SP_SAMPLE_WALL : SP_SAMPLE_CPU;
    s->off_cpu_ns = off;

    s->has_ctx = 0;
    s->attrs_len = 0;
    s->keep_pending = 0;
    if (rec != NULL && rec->valid) {
        memcpy(s->trace_id, rec->trace_id, SP_TRACE_ID_LEN);
        memcpy(s->span_id, rec->span_id, SP_SPAN_ID_LEN);
        n = rec->attrs_data_size;
        if (n > SP_THREAD_CTX_ATTRS_MAX) {
            n = SP_THREAD_CTX_ATTRS_MAX;
        }
        memcpy(s->attrs, rec->attrs_data, (size_t) n);
        s->attrs_len = (uint8_t) n;
        s->keep_pending = rec->sp_keep;
        s->has_ctx = 1;
    }

#if defined(__x86_64__)
    pc = (uintptr_t) uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t) uc->uc_mcontext.pc;
#else
#error "spanprof's sampler knows the pc register of x86_64 and aarch64 only"
#endif
    s->frames[0] = pc;
    s->nframes = 1;

    if (sp_loader_unwind_safe()) {
        n = unw_backtrace((void **) s->frames,
                          (int) conf.max_depth + HANDLER_FRAMES);

        /* Drop our own frames: everything above the interrupted pc. */
        for (i = 0; i < n && s->frames[i] != pc; i++) {
            /* void */
        }
        if (i < n) {
            n -= i;
            if ((unsigned) n > conf.max_depth) {
                n = (int) conf.max_depth;
            }
            memmove(s->frames, s->frames + i, (size_t) n * sizeof(uintptr_t));
            s->nframes = (uint16_t) n;
        } else {
            s->frames[0] = pc;
        }
    } else {
        atomic_fetch_add_explicit(&n_skipped_loader, 1, memory_order_relaxed);
    }

    sp_slot_ring_commit(&ring, s);
    atomic_fetch_add_explicit(&n_samples, 1, memory_order_relaxed);
    if (wall) {
        atomic_fetch_add_explicit(&n_wall_samples, 1, memory_order_relaxed);
    }

done:
    ts.busy = 0;
out:
    errno = saved_errno;
}


int
sp_sampler_start(const sp_sampler_conf_t *c, char *err, size_t errlen)
{
    struct sigaction  sa;

    if (atomic_load(&running)) {
        return 0;
    }
    conf = *c;
    if (conf.rate_hz < 1 || conf.rate_hz > 1000) {
        snprintf(err, errlen, "rate %u Hz is outside 1..1000", conf.rate_hz);
        return -1;
    }
    if (conf.max_depth < 1 || conf.max_depth > SP_SAMPLER_MAX_DEPTH) {
        snprintf(err, errlen, "max depth %u is outside 1..%d", conf.max_depth,
                 SP_SAMPLER_MAX_DEPTH);
        return -1;
    }
    if (conf.ring_capacity == 0) {
        conf.ring_capacity = 4096;
    }
    if (conf.wall_rate_hz == 0) {
        conf.wall_rate_hz = 100;
    }
    if (conf.wall_rate_hz > 1000) {
        snprintf(err, errlen, "wall rate %u Hz is outside 1..1000",
                 conf.wall_rate_hz);
        return -1;
    }
    if (conf.types == 0) {
        conf.types = SP_SAMPLER_TYPE_CPU;
    }

    if (ring.slots == NULL
        && sp_slot_ring_init(&ring, conf.ring_capacity,
                             sizeof(sp_raw_sample_t)
                             + (conf.max_depth + HANDLER_FRAMES)
                               * sizeof(uintptr_t)) != 0)
    {
        snprintf(err, errlen, "out of memory for the sample ring");
        return -1;
    }

    if (sp_loader_snapshot_init(err, errlen) != 0) {
        return -1;
    }

    /* libunwind's register-state cache is global in Debian's build (no
     * per-thread one). Its lock is taken with every signal masked, so no
     * handler interrupts its holder; and since libunwind never reaches the
     * loader's lock (see loader_snapshot.h), a holder only ever waits for
     * short, bounded work on another thread. */
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_GLOBAL);

    if (!installed) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = sigprof_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        /* Each timer's handler holds the other's signal back until it is
         * done (rather than a re-entry that drops a sample). */
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGPROF);
        sigaddset(&sa.sa_mask, SP_SAMPLER_WALL_SIGNAL);
        if (sigaction(SIGPROF, &sa, &old_action) != 0
            || sigaction(SP_SAMPLER_WALL_SIGNAL, &sa, NULL) != 0)
        {
            snprintf(err, errlen, "sigaction(SIGPROF) failed: %s",
                     strerror(errno));
            return -1;
        }
        installed = 1;
    }

    /* The configured rate; a shed level or a pause set before stays. */
    pthread_mutex_lock(&reg_lock);
    atomic_store(&base_rate, conf.rate_hz);
    atomic_store(&wall_base_rate, conf.wall_rate_hz);
    atomic_store(&types, conf.types);
    atomic_store(&running, 1);
    if (apply_locked() != 0) {
        atomic_store(&running, 0);
        pthread_mutex_unlock(&reg_lock);
        snprintf(err, errlen, "the wall-clock ticker thread could not "
                 "start: %s", strerror(errno));
        return -1;
    }
    pthread_mutex_unlock(&reg_lock);
    return 0;
}


/* Effective rate from the control state: max(1, base >> level). */
static unsigned
shed(unsigned base)
{
    unsigned  level = atomic_load(&shed_level);

    if (base == 0) {
        return 0;
    }
    return level >= 16 || (base >> level) == 0 ? 1 : base >> level;
}

static unsigned
effective_rate(void)
{
    return shed(atomic_load(&base_rate));
}

static unsigned
wall_effective_rate(void)
{
    return shed(atomic_load(&wall_base_rate));
}

static void
period_spec(struct itimerspec *its, uint64_t period, uint64_t first)
{
    its->it_interval.tv_sec = (time_t) (period / 1000000000ull);
    its->it_interval.tv_nsec = (long) (period % 1000000000ull);
    its->it_value.tv_sec = (time_t) (first / 1000000000ull);
    its->it_value.tv_nsec = (long) (first % 1000000000ull);
}

/* The period a type's timers run at now; 0: disarmed. */
static uint64_t
type_period(unsigned type, unsigned rate)
{
    if (atomic_load(&paused) || !(atomic_load(&types) & type) || rate == 0) {
        return 0;
    }
    return 1000000000ull / rate;
}

static uint64_t
random_below(uint64_t n)
{
    uint8_t   rnd[8];
    uint64_t  r;

    sp_span_id_generate(rnd);
    memcpy(&r, rnd, sizeof(r));
    return r % n;
}


/* ---- the wall ticker ---------------------------------------------------- */

static wall_slot_t *
wall_slot_at(size_t i)
{
    wall_slot_t  *c;

    c = atomic_load_explicit(&wall_chunks[i / SLOTS_PER_CHUNK],
                             memory_order_acquire);
    return c != NULL ? &c[i % SLOTS_PER_CHUNK] : NULL;
}

/* One tick: a wall signal to every registered thread whose wall time counts
 * now; weight ticks are due (more than 1 after an oversleep). A thread
 * whose last signal is still pending gets none: its next sample weighs the
 * ticks it missed, as a timer's overruns. */
static void
ticker_tick(pid_t pid, uint32_t weight)
{
    size_t        n, i;
    wall_slot_t  *sl;
    pid_t         tid;

    n = atomic_load_explicit(&wall_hwm, memory_order_acquire);
    for (i = 0; i < n; i++) {
        sl = wall_slot_at(i);
        if (sl == NULL
            || !atomic_load_explicit(&sl->active, memory_order_relaxed)
            || atomic_load_explicit(&sl->idle, memory_order_relaxed))
        {
            continue;
        }
        tid = atomic_load_explicit(&sl->tid, memory_order_acquire);
        if (tid == 0) {
            continue;
        }
        if (atomic_fetch_add_explicit(&sl->pending, weight,
                                      memory_order_relaxed) != 0)
        {
            atomic_fetch_add_explicit(&n_wall_coalesced, 1,
                                      memory_order_relaxed);
            continue;
        }
        if (syscall(SYS_tgkill, pid, tid, SP_SAMPLER_WALL_SIGNAL) == 0) {
            atomic_fetch_add_explicit(&n_wall_signals, 1,
                                      memory_order_relaxed);
        } else {
            /* The thread is gone (it exited without unregistering). */
            atomic_store_explicit(&sl->pending, 0, memory_order_relaxed);
        }
    }
    atomic_fetch_add_explicit(&n_ticks, 1, memory_order_relaxed);
}

/* Wakes at the wall period on absolute CLOCK_MONOTONIC deadlines (no
 * drift), its first tick at a random point of the period. The sleep is a
 * timed wait on tick_cond (a futex wait with the same absolute deadline as
 * clock_nanosleep), so that a pause, a rate change or the stop is seen at
 * once rather than at the next tick. While wall sampling is off (paused,
 * rate 0, types without wall) it waits on tick_cond alone. */
static void *
ticker_main(void *arg)
{
    struct timespec  at;
    uint64_t         period, deadline = 0, now, missed;
    pid_t            pid = getpid();

    (void) arg;
    /* Named for operators (top -H, /proc/PID/task/TID/comm). */
    (void) pthread_setname_np(pthread_self(), "spanprof-wall");
    pthread_mutex_lock(&tick_lock);
    while (!ticker_quit) {
        period = atomic_load(&cur_wall_period);
        if (period == 0) {
            deadline = 0;
            pthread_cond_wait(&tick_cond, &tick_lock);
            continue;
        }
        now = clock_ns(CLOCK_MONOTONIC);
        if (deadline == 0 || deadline > now + period) {
            deadline = now + random_below(period) + 1;   /* a new phase */
        }
        at.tv_sec = (time_t) (deadline / 1000000000ull);
        at.tv_nsec = (long) (deadline % 1000000000ull);
        if (pthread_cond_timedwait(&tick_cond, &tick_lock, &at) != ETIMEDOUT) {
            continue;       /* woken: the state may have changed */
        }
        now = clock_ns(CLOCK_MONOTONIC);
        if (now < deadline) {
            continue;
        }
        /* Overslept whole periods count in the weight (at most 1 s's). */
        missed = (now - deadline) / period;
        deadline += (missed + 1) * period;
        if (missed >= 1000000000ull / period) {
            missed = 1000000000ull / period;
        }
        pthread_mutex_unlock(&tick_lock);
        ticker_tick(pid, (uint32_t) (1 + missed));
        pthread_mutex_lock(&tick_lock);
    }
    pthread_mutex_unlock(&tick_lock);
    return NULL;
}

/* Under reg_lock: the ticker runs in this process (a fork's child has none
 * of its parent's). It blocks every signal: the server's own (SIGTERM,
 * SIGHUP, ...) must reach the threads that wait for them. 0 or -1. */
static int
ticker_start_locked(void)
{
    pthread_condattr_t  ca;
    sigset_t            all, old;
    int                 rc;

    if (ticker_pid == getpid()) {
        return 0;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tick_cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&tick_lock, NULL);
    ticker_quit = 0;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&ticker, NULL, ticker_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    ticker_pid = getpid();
    return 0;
}

static void
ticker_wake(void)
{
    if (ticker_pid == getpid()) {
        pthread_mutex_lock(&tick_lock);
        pthread_cond_signal(&tick_cond);
        pthread_mutex_unlock(&tick_lock);
    }
}

/* Under reg_lock: the ticker told to quit, and joined. */
static void
ticker_stop_locked(void)
{
    if (ticker_pid != getpid()) {
        ticker_pid = 0;
        return;
    }
    pthread_mutex_lock(&tick_lock);
    ticker_quit = 1;
    pthread_cond_signal(&tick_cond);
    pthread_mutex_unlock(&tick_lock);
    pthread_join(ticker, NULL);
    ticker_pid = 0;
}

/* Under reg_lock: publishes the periods in force, re-arms every registered
 * CPU timer with its period (or disarms them all when paused), and starts
 * or wakes the wall ticker. -1 (errno set) if the ticker could not start. */
static int
apply_locked(void)
{
    struct itimerspec  its;
    uint64_t           period, wall;
    size_t             i;
    int                rc = 0;

    period = type_period(SP_SAMPLER_TYPE_CPU, effective_rate());
    wall = type_period(SP_SAMPLER_TYPE_WALL, wall_effective_rate());
    memset(&its, 0, sizeof(its));
    if (period != 0) {
        period_spec(&its, period, period);
    }
    atomic_store(&cur_period, (uint32_t) period);
    atomic_store(&cur_wall_period, (uint32_t) wall);
    for (i = 0; i < reg_n; i++) {
        if (reg[i].used) {
            /* A thread that exited without unregistering leaves a timer
             * the kernel may refuse: nothing to do about it here. */
            (void) timer_settime(reg[i].timer, 0, &its, NULL);
        }
    }
    if (wall != 0 && atomic_load(&running)) {
        rc = ticker_start_locked();
    }
    ticker_wake();
    return rc;
}


int
sp_sampler_set_rate(unsigned rate_hz)
{
    if (rate_hz < 1 || rate_hz > 1000) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&reg_lock);
    atomic_store(&base_rate, rate_hz);
    (void) apply_locked();
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

unsigned
sp_sampler_rate(void)
{
    return atomic_load(&base_rate);
}

int
sp_sampler_set_wall_rate(unsigned rate_hz)
{
    if (rate_hz < 1 || rate_hz > 1000) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&reg_lock);
    atomic_store(&wall_base_rate, rate_hz);
    (void) apply_locked();
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

unsigned
sp_sampler_wall_rate(void)
{
    return atomic_load(&wall_base_rate);
}

unsigned
sp_sampler_wall_effective_rate(void)
{
    return wall_effective_rate();
}

void
sp_sampler_set_types(unsigned t)
{
    t &= SP_SAMPLER_TYPE_CPU | SP_SAMPLER_TYPE_WALL;
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&types) != t) {
        atomic_store(&types, t);
        (void) apply_locked();
    }
    pthread_mutex_unlock(&reg_lock);
}

unsigned
sp_sampler_types(void)
{
    return atomic_load(&types);
}

void
sp_sampler_set_shed_level(unsigned level)
{
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&shed_level) != level) {
        atomic_store(&shed_level, level);
        (void) apply_locked();
    }
    pthread_mutex_unlock(&reg_lock);
}

unsigned
sp_sampler_shed_level(void)
{
    return atomic_load(&shed_level);
}

unsigned
sp_sampler_effective_rate(void)
{
    return effective_rate();
}

void
sp_sampler_set_paused(int p)
{
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&paused) != !!p) {
        atomic_store(&paused, !!p);
        (void) apply_locked();
    }
    pthread_mutex_unlock(&reg_lock);
}

int
sp_sampler_paused(void)
{
    return atomic_load(&paused);
}


static int thread_register(int wall_on);

int
sp_sampler_thread_register(void)
{
    return thread_register(1);
}

int
sp_sampler_thread_register_on_demand(void)
{
    return thread_register(0);
}

/* Under reg_lock: slot i's chunk, allocated if new. */
static wall_slot_t *
wall_slot_make_locked(size_t i)
{
    wall_slot_t  *c;

    if (i / SLOTS_PER_CHUNK >= MAX_CHUNKS) {
        return NULL;
    }
    c = atomic_load(&wall_chunks[i / SLOTS_PER_CHUNK]);
    if (c == NULL) {
        if (posix_memalign((void **) &c, 64,
                           SLOTS_PER_CHUNK * sizeof(wall_slot_t)) != 0)
        {
            return NULL;
        }
        memset(c, 0, SLOTS_PER_CHUNK * sizeof(wall_slot_t));
        atomic_store_explicit(&wall_chunks[i / SLOTS_PER_CHUNK], c,
                              memory_order_release);
    }
    return &c[i % SLOTS_PER_CHUNK];
}

static int
thread_register(int wall_on)
{
    struct sigevent    sev;
    struct itimerspec  its;
    uint64_t           period;
    void              *warm[8];
    wall_slot_t       *sl;
    size_t             i;
    pid_t              tid;
    int                rc = 0;

    if (!atomic_load(&running)) {
        errno = EINVAL;
        return -1;
    }
    if (ts.armed) {
        return 0;
    }

    /* First touches of every TLS variable the handler reads, and a first
     * unwind (libunwind sets up its per-thread cache), happen here. */
    ts.busy = 1;
    sp_thread_ctx_thread_init();
    sp_loader_snapshot_refresh();
    (void) unw_backtrace(warm, 8);
    memset(&ts.idle, 0, sizeof(ts.idle));
    ts.last_tick_ns = clock_ns(CLOCK_MONOTONIC);
    ts.last_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    ts.last_idle_ns = 0;
    ts.active_ns = ts.last_tick_ns;
    ts.active_idle_ns = 0;
    ts.active = wall_on;
    ts.wall = NULL;
    ts.busy = 0;

    tid = (pid_t) syscall(SYS_gettid);
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = tid;
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &ts.timer) != 0) {
        return -1;
    }

    pthread_mutex_lock(&reg_lock);
    for (i = 0; i < reg_n && reg[i].used; i++) {
        /* void */
    }
    if (i == reg_cap) {
        size_t        cap = reg_cap ? reg_cap * 2 : 16;
        reg_entry_t  *r = realloc(reg, cap * sizeof(*r));

        if (r == NULL) {
            pthread_mutex_unlock(&reg_lock);
            timer_delete(ts.timer);
            errno = ENOMEM;
            return -1;
        }
        reg = r;
        reg_cap = cap;
    }
    sl = wall_slot_make_locked(i);
    if (sl == NULL) {
        pthread_mutex_unlock(&reg_lock);
        timer_delete(ts.timer);
        errno = ENOMEM;
        return -1;
    }
    if (i == reg_n) {
        reg_n++;
    }
    reg[i].timer = ts.timer;
    reg[i].used = 1;
    ts.slot = i;
    ts.armed = 1;

    /* The ticker's view of it, published last (tid with release). */
    atomic_store_explicit(&sl->pending, 0, memory_order_relaxed);
    atomic_store_explicit(&sl->idle, 0, memory_order_relaxed);
    atomic_store_explicit(&sl->active, wall_on, memory_order_relaxed);
    ts.wall = sl;
    ts.idle.ticker_slot = sl;
    atomic_store_explicit(&sl->tid, tid, memory_order_release);
    if (i + 1 > atomic_load(&wall_hwm)) {
        atomic_store_explicit(&wall_hwm, i + 1, memory_order_release);
    }

    /* A random first expiry: threads started together do not sample in
     * lockstep, and a periodic workload is not aliased. Armed under the
     * lock, so a concurrent rate change cannot be overwritten. */
    period = atomic_load(&cur_period);
    if (period != 0) {
        period_spec(&its, period, random_below(period) + 1);
        if (timer_settime(ts.timer, 0, &its, NULL) != 0) {
            rc = -1;
        }
    }
    if (rc != 0) {
        atomic_store(&sl->active, 0);
        atomic_store(&sl->tid, 0);
        reg[i].used = 0;
        ts.armed = 0;
        ts.active = 0;
        ts.wall = NULL;
        ts.idle.ticker_slot = NULL;
        timer_delete(ts.timer);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}


void
sp_sampler_thread_unregister(void)
{
    if (ts.armed) {
        pthread_mutex_lock(&reg_lock);
        atomic_store(&ts.wall->active, 0);
        atomic_store(&ts.wall->tid, 0);
        ts.active = 0;
        ts.idle.ticker_slot = NULL;
        ts.wall = NULL;
        reg[ts.slot].used = 0;
        ts.armed = 0;
        timer_delete(ts.timer);
        pthread_mutex_unlock(&reg_lock);
    }
}


/* No lock and no system call: two flag stores and, going active, a vDSO
 * clock read (the off-CPU baseline the next wall sample starts from). */
void
sp_sampler_wall_active(int on)
{
    wall_slot_t  *sl = ts.wall;

    on = !!on;
    if (sl == NULL || ts.active == on) {
        return;
    }
    if (on) {
        ts.active_ns = clock_ns(CLOCK_MONOTONIC);
        ts.active_idle_ns = ts.idle.idle_ns;
    }
    atomic_signal_fence(memory_order_seq_cst);
    ts.active = on;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&sl->active, on, memory_order_relaxed);
}


sp_sampler_idle_t *
sp_sampler_idle_slot(void)
{
    return &ts.idle;
}

void
sp_sampler_set_idle_wake(sig_atomic_t *flag)
{
    idle_wake = flag;
}

void
sp_sampler_idle_begin(sp_sampler_idle_t *st)
{
    wall_slot_t  *sl = st->ticker_slot;

    st->counted = atomic_load_explicit(&cur_wall_period,
                                       memory_order_relaxed) != 0;
    if (st->counted) {
        st->since = clock_ns(CLOCK_MONOTONIC);
    }
    atomic_signal_fence(memory_order_seq_cst);
    st->idle = 1;
    atomic_signal_fence(memory_order_seq_cst);
    if (sl != NULL) {
        atomic_store_explicit(&sl->idle, 1, memory_order_relaxed);
    }
}

void
sp_sampler_idle_end(sp_sampler_idle_t *st)
{
    wall_slot_t  *sl = st->ticker_slot;
    uint64_t      d;

    if (sl != NULL) {
        atomic_store_explicit(&sl->idle, 0, memory_order_relaxed);
    }
    atomic_signal_fence(memory_order_seq_cst);
    st->idle = 0;
    atomic_signal_fence(memory_order_seq_cst);
    if (!st->counted) {
        return;
    }
    st->counted = 0;
    d = clock_ns(CLOCK_MONOTONIC) - st->since;
    st->idle_ns += d;
    atomic_fetch_add_explicit(&idle_total_ns, d, memory_order_relaxed);
}


void
sp_sampler_stop(void)
{
    struct itimerspec  off;
    struct sigaction   sa;
    size_t             i;

    atomic_store(&running, 0);
    sp_sampler_thread_unregister();
    pthread_mutex_lock(&reg_lock);
    ticker_stop_locked();
    /* Every other thread's CPU timer disarmed, and both signals ignored
     * from now on (start installs the handler again): the handler lives in
     * the module, which httpd may unload after this (apache2 -X, a
     * restart), and a signal delivered into unmapped code is a crash. An
     * ignored one is discarded, a pending one included. */
    memset(&off, 0, sizeof(off));
    for (i = 0; i < reg_n; i++) {
        if (reg[i].used) {
            (void) timer_settime(reg[i].timer, 0, &off, NULL);
        }
    }
    if (installed) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGPROF, &sa, NULL);
        (void) sigaction(SP_SAMPLER_WALL_SIGNAL, &sa, NULL);
        installed = 0;
    }
    pthread_mutex_unlock(&reg_lock);
}


int
sp_sampler_running(void)
{
    return atomic_load(&running);
}


uint64_t
sp_sampler_period_ns(void)
{
    unsigned  rate = effective_rate();

    return rate ? 1000000000ull / rate : 0;
}


size_t
sp_sampler_peek(sp_raw_sample_t **out, size_t max)
{
    if (ring.slots == NULL) {
        return 0;
    }
    return sp_slot_ring_peek(&ring, (void **) out, max);
}


void
sp_sampler_release(size_t n)
{
    sp_slot_ring_release(&ring, n);
}


void
sp_sampler_get_stats(sp_sampler_stats_t *st)
{
    st->samples = atomic_load(&n_samples);
    st->dropped = ring.slots ? sp_slot_ring_dropped(&ring) : 0;
    st->skipped_loader = atomic_load(&n_skipped_loader);
    st->reentered = atomic_load(&n_reentered);
    st->wall_samples = atomic_load(&n_wall_samples);
    st->idle_ns = atomic_load(&idle_total_ns);
    st->wall_ticks = atomic_load(&n_ticks);
    st->wall_signals = atomic_load(&n_wall_signals);
    st->wall_coalesced = atomic_load(&n_wall_coalesced);
}
