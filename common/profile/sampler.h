#ifndef SP_SAMPLER_H
#define SP_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"
#include "common/profile/thread_ctx.h"

/* One CPU sampler per process. Each thread that serves requests registers
 * itself and gets its own CPU-time timer (CLOCK_THREAD_CPUTIME_ID, delivered
 * to that thread with SIGEV_THREAD_ID) firing SIGPROF at rate_hz, its first
 * expiry at a random point of the period. The handler is async-signal-safe:
 * it saves errno, guards against re-entry, reads the thread's OTEP 4947
 * record, unwinds with libunwind over a lock-free loader snapshot, and writes
 * (time, weight, labels, frames) into a preallocated lock-free ring; a full
 * ring drops and counts the sample. The exporter drains the ring. */

#define SP_SAMPLER_MAX_DEPTH  256

typedef struct {
    uint64_t   time_ns;           /* wall clock */
    uint32_t   weight;            /* 1 + timer overruns */
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
} sp_sampler_conf_t;

typedef struct {
    uint64_t   samples;           /* written to the ring */
    uint64_t   dropped;           /* ring full */
    uint64_t   skipped_loader;    /* loader mid-update: pc only */
    uint64_t   reentered;
} sp_sampler_stats_t;

/* Installs the SIGPROF handler and the loader snapshot; call once per
 * process (worker), before any thread registers. 0, or -1 with err. */
int sp_sampler_start(const sp_sampler_conf_t *conf, char *err, size_t errlen);

/* On each serving thread: warms up TLS and libunwind, then arms the
 * thread's timer. Idempotent. 0, or -1 (errno set). */
int sp_sampler_thread_register(void);
void sp_sampler_thread_unregister(void);

/* Stops sampling in this process: no further samples are recorded (timers
 * of threads that did not unregister fire into an ignoring handler). */
void sp_sampler_stop(void);

int sp_sampler_running(void);
uint64_t sp_sampler_period_ns(void);

/* Exporter thread: up to max samples in order; release after use. */
size_t sp_sampler_peek(sp_raw_sample_t **out, size_t max);
void sp_sampler_release(size_t n);
void sp_sampler_get_stats(sp_sampler_stats_t *st);

#endif
