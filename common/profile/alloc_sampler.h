#ifndef SP_ALLOC_SAMPLER_H
#define SP_ALLOC_SAMPLER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"
#include "common/profile/alloc_stacks.h"
#include "common/profile/alloc_table.h"
#include "common/profile/thread_ctx.h"

/* What happens to an allocation the hooks (alloc_hooks.h) decided to
 * sample, and what the exporter reads back. Sampling is by bytes, as
 * tcmalloc and Go do: each thread counts down a random number of bytes
 * drawn from an exponential distribution of mean `mean` (a Poisson process
 * over allocated bytes), and the allocation that crosses zero is sampled.
 * An allocation of s bytes is so sampled with probability 1 - exp(-s/mean),
 * and stands for 1/(1 - exp(-s/mean)) allocations of its size
 * (sp_alloc_weight(), Go's scaleHeapSample).
 *
 * A sampled allocation is unwound (libunwind), labelled with the thread's
 * OTEP 4947 record (thread_ctx.h), its stack interned (alloc_stacks.h),
 * written to a bounded ring (alloc_space / alloc_objects: a full ring drops
 * and counts) and put in the live table (alloc_table.h) until freed
 * (inuse_space / inuse_objects: a full table counts). */

#define SP_ALLOC_MEAN_DEFAULT   (512 * 1024)
#define SP_ALLOC_DEPTH_MAX      128

typedef struct {
    size_t     mean_bytes;       /* 0: SP_ALLOC_MEAN_DEFAULT */
    size_t     table_capacity;   /* live sampled allocations; 0: 16384 */
    size_t     stack_capacity;   /* distinct stacks; 0: 8192 */
    size_t     ring_capacity;    /* samples between drains; 0: 4096 */
    unsigned   max_depth;        /* frames; 0: 64 */
} sp_alloc_conf_t;

/* One sampled allocation, as the exporter drains it. */
typedef struct {
    uint64_t   time_ns;          /* wall clock */
    uint64_t   size;             /* requested bytes */
    uint64_t   mean;             /* the mean interval it was sampled at */
    uint32_t   stack_id;         /* sp_alloc_sampler_stack() */
    uint8_t    has_ctx;
    uint8_t    keep_pending;
    uint8_t    attrs_len;
    uint8_t    trace_id[SP_TRACE_ID_LEN];
    uint8_t    span_id[SP_SPAN_ID_LEN];
    uint8_t    attrs[SP_THREAD_CTX_ATTRS_MAX];
} sp_alloc_sample_t;

/* The in-use view of one stack: sampled allocations still live. */
typedef struct {
    uint32_t   stack_id;
    uint64_t   samples;          /* live sampled allocations */
    double     objects;          /* inuse_objects (scaled) */
    double     bytes;            /* inuse_space (scaled) */
} sp_alloc_inuse_t;

typedef struct {
    uint64_t   sampled;          /* allocations sampled */
    uint64_t   dropped_ring;     /* samples lost: ring full */
    uint64_t   table_full;       /* sampled but not tracked as live */
    uint64_t   stacks_full;      /* sampled with no stack: stack table full */
    uint64_t   live;             /* sampled allocations not yet freed */
    uint64_t   freed;            /* sampled allocations freed */
    uint64_t   reentered;        /* allocations by the profiler itself */
    uint64_t   mean_bytes;       /* the interval in force (shed included) */
} sp_alloc_sampler_stats_t;

/* Per-thread state (the hooks own the TLS variable). left is the number
 * of bytes until the next sample; the hot path subtracts and compares. */
typedef struct {
    int64_t    left;
    uint64_t   rng;
    uint8_t    seeded;
    uint8_t    busy;             /* inside the profiler: do not sample */
} sp_alloc_thread_t;

/* The live table, read by the free() hook's fast path. */
extern sp_alloc_table_t  sp_alloc_live __attribute__((visibility("hidden")));

/* Allocates the ring and tables (once per process; again after
 * sp_alloc_sampler_fini). 0, or -1 with err. */
int  sp_alloc_sampler_init(const sp_alloc_conf_t *conf, char *err,
    size_t errlen);
int  sp_alloc_sampler_ready(void);
/* Frees them: only when no hook can run any more. */
void sp_alloc_sampler_fini(void);
/* After fork, in the child: the ring may hold a slot that a thread which
 * does not exist in the child was filling. */
void sp_alloc_sampler_atfork_child(void);

/* Empties the live table: only while no hook can run (installing). */
void sp_alloc_sampler_clear_live(void);

/* Runtime control, any thread. Enabled by default once initialized;
 * disabled, the hooks still count bytes but record nothing. */
void     sp_alloc_sampler_set_enabled(int on);
int      sp_alloc_sampler_enabled(void);
/* 0, or -1 (errno EINVAL) outside 1 KiB .. 1 GiB. New draws use it. */
int      sp_alloc_sampler_set_mean(size_t bytes);
size_t   sp_alloc_sampler_mean(void);
/* Load shedding (load_shedder.c): the mean in force is the configured one
 * doubled per level (at most 1 GiB); paused, nothing is recorded. Each
 * sample keeps the mean it was taken at, so its weight stays right. */
void     sp_alloc_sampler_set_shed(unsigned level, int paused);
size_t   sp_alloc_sampler_effective_mean(void);

/* The hooks' slow path: t->left dropped to <= 0 for an allocation of size
 * bytes at p (p may be NULL: a failed allocation is not sampled). Draws
 * the next interval; records p when this is a real sample. caller is the
 * return address into the allocating code (the stack starts there). */
void sp_alloc_sampler_take(sp_alloc_thread_t *t, void *p, size_t size,
    uintptr_t caller);
/* p (which sp_alloc_table_maybe() flagged) is being freed or reallocated:
 * drop it from the live table. */
void sp_alloc_sampler_forget(void *p);

/* Exporter thread. Up to max samples in order; release after use. */
size_t sp_alloc_sampler_peek(sp_alloc_sample_t **out, size_t max);
void   sp_alloc_sampler_release(size_t n);
/* The frames of a stack id (valid until fini); frames[0] is the pc in the
 * allocating function, then return addresses. */
unsigned sp_alloc_sampler_stack(uint32_t stack_id, const uintptr_t **frames);
/* In-use now, per stack: fills up to max entries, returns how many stacks
 * there were (more than max: the rest were left out). */
size_t sp_alloc_sampler_inuse(sp_alloc_inuse_t *out, size_t max);
/* Every live sampled allocation (with its labels). */
size_t sp_alloc_sampler_each_live(
    void (*cb)(uintptr_t addr, const sp_alloc_live_t *v, void *arg),
    void *arg);
void   sp_alloc_sampler_get_stats(sp_alloc_sampler_stats_t *st);

/* Go's scaleHeapSample: what one sampled allocation of size bytes, taken
 * at mean interval mean, stands for. */
void   sp_alloc_weight(uint64_t size, uint64_t mean, double *objects,
    double *bytes);
/* The next interval for a uniform 64-bit random value: -mean * ln(U),
 * at least 1. */
int64_t sp_alloc_draw_interval(uint64_t random, uint64_t mean);

#endif
