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

typedef struct {
    timer_t                timer;
    int                    armed;
    size_t                 slot;      /* in the registry */
    volatile sig_atomic_t  busy;
} thread_state_t;

/* Registered threads' timers, so that any thread can re-arm them all. */
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
static __thread thread_state_t  ts;

static pthread_mutex_t        reg_lock = PTHREAD_MUTEX_INITIALIZER;
static reg_entry_t           *reg;
static size_t                 reg_n, reg_cap;
/* Control state; written under reg_lock, read anywhere. */
static _Atomic unsigned       base_rate;
static _Atomic unsigned       shed_level;
static _Atomic int            paused;
/* What the handler reads: the period in force, 0 when paused. */
static _Atomic uint32_t       cur_period;

static void apply_locked(void);


static void
sigprof_handler(int sig, siginfo_t *si, void *ucv)
{
    int                      saved_errno = errno;
    ucontext_t              *uc = ucv;
    sp_raw_sample_t         *s;
    sp_thread_ctx_record_t  *rec;
    uintptr_t                pc;
    int                      n, i, overrun;
    uint32_t                 period;

    if (!atomic_load_explicit(&running, memory_order_relaxed)) {
        goto out;
    }
    period = atomic_load_explicit(&cur_period, memory_order_relaxed);
    if (period == 0) {
        goto out;       /* paused: a signal that was already pending */
    }
    if (ts.busy) {
        atomic_fetch_add_explicit(&n_reentered, 1, memory_order_relaxed);
        goto out;
    }
    ts.busy = 1;

    s = sp_slot_ring_reserve(&ring);
    if (s == NULL) {
        goto done;      /* counted by the ring */
    }

    s->time_ns = sp_now_ns();
    overrun = ts.armed ? timer_getoverrun(ts.timer) : 0;
    s->weight = 1 + (overrun > 0 ? (uint32_t) overrun : 0);
    s->period_ns = period;

    rec = sp_thread_ctx_current();
    s->has_ctx = 0;
    s->attrs_len = 0;
    if (rec != NULL && rec->valid) {
        memcpy(s->trace_id, rec->trace_id, SP_TRACE_ID_LEN);
        memcpy(s->span_id, rec->span_id, SP_SPAN_ID_LEN);
        n = rec->attrs_data_size;
        if (n > SP_THREAD_CTX_ATTRS_MAX) {
            n = SP_THREAD_CTX_ATTRS_MAX;
        }
        memcpy(s->attrs, rec->attrs_data, (size_t) n);
        s->attrs_len = (uint8_t) n;
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
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGPROF, &sa, &old_action) != 0) {
            snprintf(err, errlen, "sigaction(SIGPROF) failed: %s",
                     strerror(errno));
            return -1;
        }
        installed = 1;
    }

    /* The configured rate; a shed level or a pause set before stays. */
    pthread_mutex_lock(&reg_lock);
    atomic_store(&base_rate, conf.rate_hz);
    apply_locked();
    pthread_mutex_unlock(&reg_lock);

    atomic_store(&running, 1);
    return 0;
}


/* Effective rate from the control state: max(1, base >> level). */
static unsigned
effective_rate(void)
{
    unsigned  base = atomic_load(&base_rate), level = atomic_load(&shed_level);

    if (base == 0) {
        return 0;
    }
    return level >= 16 || (base >> level) == 0 ? 1 : base >> level;
}

static void
period_spec(struct itimerspec *its, uint64_t period, uint64_t first)
{
    its->it_interval.tv_sec = (time_t) (period / 1000000000ull);
    its->it_interval.tv_nsec = (long) (period % 1000000000ull);
    its->it_value.tv_sec = (time_t) (first / 1000000000ull);
    its->it_value.tv_nsec = (long) (first % 1000000000ull);
}

/* Under reg_lock: publishes the period in force and re-arms every
 * registered timer with it (or disarms them all when paused). */
static void
apply_locked(void)
{
    struct itimerspec  its;
    unsigned           rate = effective_rate();
    uint64_t           period = rate ? 1000000000ull / rate : 0;
    size_t             i;

    if (atomic_load(&paused) || period == 0) {
        memset(&its, 0, sizeof(its));
        atomic_store(&cur_period, 0);
    } else {
        period_spec(&its, period, period);
        atomic_store(&cur_period, (uint32_t) period);
    }
    for (i = 0; i < reg_n; i++) {
        if (reg[i].used) {
            /* A thread that exited without unregistering leaves a timer
             * the kernel may refuse: nothing to do about it here. */
            (void) timer_settime(reg[i].timer, 0, &its, NULL);
        }
    }
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
    apply_locked();
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

unsigned
sp_sampler_rate(void)
{
    return atomic_load(&base_rate);
}

void
sp_sampler_set_shed_level(unsigned level)
{
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&shed_level) != level) {
        atomic_store(&shed_level, level);
        apply_locked();
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
        apply_locked();
    }
    pthread_mutex_unlock(&reg_lock);
}

int
sp_sampler_paused(void)
{
    return atomic_load(&paused);
}


int
sp_sampler_thread_register(void)
{
    struct sigevent    sev;
    struct itimerspec  its;
    uint64_t           period, first;
    uint8_t            rnd[8];
    void              *warm[8];
    size_t             i;
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
    ts.busy = 0;

    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t) syscall(SYS_gettid);
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
    if (i == reg_n) {
        reg_n++;
    }
    reg[i].timer = ts.timer;
    reg[i].used = 1;
    ts.slot = i;
    ts.armed = 1;

    /* A random first expiry: threads started together do not sample in
     * lockstep, and a periodic workload is not aliased. Armed under the
     * lock, so a concurrent rate change cannot be overwritten. */
    period = atomic_load(&cur_period);
    if (period != 0) {
        sp_span_id_generate(rnd);
        memcpy(&first, rnd, sizeof(first));
        first = first % period + 1;
        period_spec(&its, period, first);
        if (timer_settime(ts.timer, 0, &its, NULL) != 0) {
            rc = -1;
        }
    }
    if (rc != 0) {
        reg[i].used = 0;
        ts.armed = 0;
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
        reg[ts.slot].used = 0;
        ts.armed = 0;
        timer_delete(ts.timer);
        pthread_mutex_unlock(&reg_lock);
    }
}


void
sp_sampler_stop(void)
{
    atomic_store(&running, 0);
    sp_sampler_thread_unregister();
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
}
