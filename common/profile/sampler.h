#ifndef SP_SAMPLER_H
#define SP_SAMPLER_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "common/trace/ids.h"
#include "common/profile/thread_ctx.h"

/* One sampler per process. Each thread that serves requests registers
 * itself and gets its own CPU-time timer (CLOCK_THREAD_CPUTIME_ID, delivered
 * to that thread with SIGEV_THREAD_ID) firing SIGPROF at rate_hz, its first
 * expiry at a random point of the period. With wall-clock sampling on, one
 * ticker thread per process (started by the sampler, joined by
 * sp_sampler_stop, waiting without ticking while wall sampling is paused or
 * off) wakes at wall_rate_hz on absolute CLOCK_MONOTONIC deadlines, its
 * first tick at a random point of the period, and sends
 * SP_SAMPLER_WALL_SIGNAL (tgkill) to each registered thread whose wall time
 * counts now: active (sp_sampler_wall_active) and not idle
 * (sp_sampler_idle_begin/end). A thread that waits for work is never
 * signalled. The ticker walks an array of slots (tid and flags) without a
 * lock; the registry's mutex is taken only to register and unregister.
 * A wall sample is its wall time (weight * period) and the part of it the
 * thread did not run (see "Off-CPU share" below). The handler is
 * async-signal-safe: it saves errno, guards against re-entry, reads the
 * thread's OTEP 4947 record, unwinds with libunwind over a lock-free loader
 * snapshot, and writes (time, weight, labels, frames) into a preallocated
 * lock-free ring; a full ring drops and counts the sample. The exporter
 * drains the ring.
 *
 * Off-CPU share (an approximation): the handler keeps, per thread, the
 * monotonic time and thread CPU time of the last wall signal it took. The
 * wall time counted is from the later of that signal and the moment the
 * thread last went active, minus the idle time in between; the CPU time
 * is the thread CPU clock's advance since the last wall signal, clamped to
 * that wall time (so CPU spent while inactive just before going active may
 * count as run time). off_cpu_ns = weight * period * (wall - cpu) / wall.
 *
 * A thread must unregister, or be inactive, when it exits: the ticker
 * signals a slot's tid only while it is active. */

#define SP_SAMPLER_MAX_DEPTH  256

/* The wall timer's signal: a real-time one of its own, so that it never
 * mixes with the CPU timer's SIGPROF (nginx and httpd use no RT signal). */
#define SP_SAMPLER_WALL_SIGNAL  (SIGRTMIN + 4)

/* What a raw sample measures. ALLOC and INUSE are memory samples, made by
 * the exporter from alloc_sampler.h's (never by the signal handler):
 * weight is the objects the sample stands for (rounded, at least 1),
 * off_cpu_ns carries its bytes (the profile's cpu_ns of the sample). */
typedef enum {
    SP_SAMPLE_CPU = 0,        /* weight * period_ns: CPU ns */
    SP_SAMPLE_WALL = 1,       /* weight * period_ns: wall ns; off_cpu_ns */
    SP_SAMPLE_ALLOC = 2,
    SP_SAMPLE_INUSE = 3,
    SP_SAMPLE_NKINDS
} sp_sample_kind_t;

/* Sample types as a bit mask (otel_profiling_types). */
#define SP_SAMPLER_TYPE_CPU     (1u << SP_SAMPLE_CPU)
#define SP_SAMPLER_TYPE_WALL    (1u << SP_SAMPLE_WALL)
#define SP_SAMPLER_TYPE_MEMORY  (1u << SP_SAMPLE_ALLOC | 1u << SP_SAMPLE_INUSE)

typedef struct {
    uint64_t   time_ns;           /* wall clock */
    uint64_t   off_cpu_ns;        /* WALL: of weight * period_ns, the time
                                   * the thread did not run; else 0 */
    uint32_t   weight;            /* 1 + timer overruns; WALL: ticks */
    uint32_t   period_ns;         /* the timer's period when taken */
    uint8_t    kind;              /* sp_sample_kind_t */
    uint16_t   nframes;           /* frames[0] is the interrupted pc */
    uint8_t    has_ctx;
    uint8_t    attrs_len;
    uint8_t    keep_pending;      /* labels wait for a keep verdict */
    uint8_t    trace_id[SP_TRACE_ID_LEN];
    uint8_t    span_id[SP_SPAN_ID_LEN];
    uint8_t    attrs[SP_THREAD_CTX_ATTRS_MAX];
    uintptr_t  frames[];          /* return addresses after frames[0] */
} sp_raw_sample_t;

typedef struct {
    unsigned   rate_hz;           /* 1..1000 */
    unsigned   max_depth;         /* 1..SP_SAMPLER_MAX_DEPTH */
    size_t     ring_capacity;     /* samples */
    unsigned   wall_rate_hz;      /* 1..1000 (0: 100) */
    unsigned   types;             /* SP_SAMPLER_TYPE_*; 0: CPU */
} sp_sampler_conf_t;

typedef struct {
    uint64_t   samples;           /* written to the ring */
    uint64_t   dropped;           /* ring full */
    uint64_t   skipped_loader;    /* loader mid-update: pc only */
    uint64_t   reentered;
    uint64_t   wall_samples;      /* of samples: wall ones */
    uint64_t   idle_ns;           /* threads' time in the idle wait */
    uint64_t   wall_ticks;        /* the ticker's wake-ups */
    uint64_t   wall_signals;      /* wall signals it sent */
    uint64_t   wall_coalesced;    /* not sent: the thread's last pending */
} sp_sampler_stats_t;

/* Runtime control, from any thread (the exporter's, nginx's event loop, the
 * control API). Every registered thread's CPU timer is re-armed at once with
 * timer_settime (the registry of timers is under a mutex the signal handler
 * never touches) and the wall ticker is woken to take the new wall period;
 * the handler reads only the current period (one atomic),
 * which each raw sample records, so weights stay true CPU time across a
 * change. A signal already pending when the period changes is recorded with
 * the new period: at most one sample per thread per change is off. */

/* The base rate (1..1000 Hz), e.g. set by the control API. 0, or -1 with
 * errno EINVAL when out of range. */
int      sp_sampler_set_rate(unsigned rate_hz);
unsigned sp_sampler_rate(void);            /* base rate */
/* Load shedding: the effective rate is max(1, base >> level). */
void     sp_sampler_set_shed_level(unsigned level);
unsigned sp_sampler_shed_level(void);
unsigned sp_sampler_effective_rate(void);
/* Which types sample now (SP_SAMPLER_TYPE_*, memory ignored here): a
 * type switched off has its timers disarmed (wall: the ticker waits). */
void     sp_sampler_set_types(unsigned types);
unsigned sp_sampler_types(void);
/* The wall timer's base rate (1..1000 Hz), shed like the CPU one. */
int      sp_sampler_set_wall_rate(unsigned rate_hz);
unsigned sp_sampler_wall_rate(void);
unsigned sp_sampler_wall_effective_rate(void);
/* Pause: timers disarmed and the ticker waiting, no samples; resume
 * re-arms. */
void     sp_sampler_set_paused(int paused);
int      sp_sampler_paused(void);

/* Installs the SIGPROF handler and the loader snapshot, and starts the
 * wall ticker if wall sampling is on (else it starts when wall sampling is
 * first switched on); call once per process (worker), before any thread
 * registers, in the process that serves (the ticker does not survive a
 * fork). The base rate becomes conf->rate_hz; a shed level or a pause set
 * before stays. 0, or -1 with err. */
int sp_sampler_start(const sp_sampler_conf_t *conf, char *err, size_t errlen);

/* On each serving thread: warms up TLS and libunwind, then arms the
 * thread's timer. Idempotent. 0, or -1 (errno set). */
int sp_sampler_thread_register(void);
void sp_sampler_thread_unregister(void);

/* Wall time a thread spends waiting for work (nginx's event wait) is idle:
 * counted (two clock reads around the wait), never unwound, and left out
 * of the off-CPU time of the next wall sample. The server glue brackets the
 * wait with idle_begin/end on a pointer it took once (sp_sampler_idle_slot,
 * after register): two flag stores each (one the ticker reads: an idle
 * thread is not signalled). A wall signal the ticker sent just before the
 * thread began its wait may still interrupt it (no signal mask is changed
 * around the wait: a pair of sigprocmask calls costs microseconds on every
 * loop iteration); the handler then sets the flag given to
 * sp_sampler_set_idle_wake (nginx: ngx_event_timer_alarm, so that its event
 * method takes the EINTR as a timer wake-up, silently, as with
 * timer_resolution). */
typedef struct {
    volatile sig_atomic_t  idle;
    volatile uint64_t      idle_ns;   /* this thread's, in total */
    uint64_t               since;     /* monotonic ns the wait began */
    int                    counted;   /* wall sampling was on at begin */
    void                  *ticker_slot;   /* the ticker's view of it */
} sp_sampler_idle_t;

sp_sampler_idle_t *sp_sampler_idle_slot(void);
void sp_sampler_idle_begin(sp_sampler_idle_t *st);
void sp_sampler_idle_end(sp_sampler_idle_t *st);
void sp_sampler_set_idle_wake(sig_atomic_t *flag);

/* A thread whose wall time counts only while it serves a request (httpd's
 * workers, not while they wait for a connection; nginx's thread pool
 * threads while they run a task) is marked active at the request's start
 * and inactive at its end: a flag store (and, going active, a vDSO clock
 * read), no lock, no system call. Threads registered with
 * sp_sampler_thread_register_on_demand() start inactive; those registered
 * with sp_sampler_thread_register() start active. A unit of work shorter
 * than the period is sampled with probability duration / period. */
int  sp_sampler_thread_register_on_demand(void);
void sp_sampler_wall_active(int on);

/* Stops sampling in this process: no further samples are recorded; the
 * ticker is told to quit and joined, the CPU timers of threads that did not
 * unregister are disarmed, and SIGPROF and the wall signal are ignored
 * until the next start (the handler must not be reached once the module
 * that holds it may be unloaded). */
void sp_sampler_stop(void);

int sp_sampler_running(void);
/* The effective period now (1e9 / effective rate), also when paused. */
uint64_t sp_sampler_period_ns(void);

/* Exporter thread: up to max samples in order; release after use. */
size_t sp_sampler_peek(sp_raw_sample_t **out, size_t max);
void sp_sampler_release(size_t n);
void sp_sampler_get_stats(sp_sampler_stats_t *st);

#endif
