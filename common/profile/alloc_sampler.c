#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "common/base/clock.h"
#include "common/profile/alloc_sampler.h"
#include "common/profile/slot_ring.h"

/* Frames of the profiler itself above the allocating function: unwound,
 * then dropped (up to the caller's return address). */
#define OWN_FRAMES  6

sp_alloc_table_t         sp_alloc_live;
static sp_alloc_stacks_t stacks;
static sp_slot_ring_t    ring;
static sp_alloc_conf_t   conf;
static _Atomic int       ready;
static _Atomic int       enabled;
static _Atomic uint64_t  mean_bytes;
static _Atomic unsigned  shed_shift;       /* load shedding: mean << shift */
static _Atomic int       shed_paused;
static _Atomic uint64_t  n_sampled, n_freed, n_reentered;
static _Atomic uint64_t  seed_counter;


/* ---- math without libm (the module does not link it) -------------------- */

/* Natural logarithm of x > 0, to about 1e-10. */
static double
ln(double x)
{
    union { double d; uint64_t u; } v = { .d = x };
    int     e = (int) ((v.u >> 52) & 0x7ff) - 1023;
    double  m, s, s2;

    v.u = (v.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    m = v.d;                                 /* [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    s = (m - 1.0) / (m + 1.0);               /* |s| <= 0.172 */
    s2 = s * s;
    return e * 0.6931471805599453
           + 2.0 * s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7
             + s2 * (1.0 / 9 + s2 * (1.0 / 11 + s2 / 13))))));
}

/* 1 - exp(-x) for x >= 0, accurate for small x as well. */
static double
one_minus_exp_neg(double x)
{
    double  term, sum, y;
    int     k, halvings = 0;

    if (x > 40.0) {
        return 1.0;
    }
    if (x < 0.5) {
        /* x - x^2/2! + x^3/3! - ... */
        term = x;
        sum = x;
        for (k = 2; k < 20; k++) {
            term *= -x / k;
            sum += term;
        }
        return sum;
    }
    /* exp(-x) = exp(-x / 2^h)^(2^h) */
    y = x;
    while (y > 0.5) {
        y *= 0.5;
        halvings++;
    }
    term = 1.0;
    sum = 1.0;
    for (k = 1; k < 20; k++) {
        term *= -y / k;
        sum += term;
    }
    while (halvings-- > 0) {
        sum *= sum;
    }
    return 1.0 - sum;
}

void
sp_alloc_weight(uint64_t size, uint64_t mean, double *objects, double *bytes)
{
    double  scale;

    if (size == 0 || mean == 0) {
        *objects = 1.0;
        *bytes = (double) size;
        return;
    }
    scale = 1.0 / one_minus_exp_neg((double) size / (double) mean);
    *objects = scale;
    *bytes = scale * (double) size;
}

int64_t
sp_alloc_draw_interval(uint64_t random, uint64_t mean)
{
    /* U in (0, 1]: never ln(0). */
    double  u = (double) ((random >> 11) + 1) * (1.0 / 9007199254740992.0);
    double  d = -ln(u) * (double) mean;

    return d < 1.0 ? 1 : (int64_t) d;
}

static uint64_t
next_random(sp_alloc_thread_t *t)
{
    /* xorshift64* */
    uint64_t  x = t->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

static void
seed(sp_alloc_thread_t *t)
{
    /* splitmix64 of the thread's state address, the clock and a counter:
     * threads and forked children draw different sequences. */
    uint64_t  z = (uint64_t) (uintptr_t) t ^ sp_mono_ns()
                  ^ (atomic_fetch_add(&seed_counter, 1) << 32);

    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    t->rng = z ? z : 0x9e3779b97f4a7c15ull;
    t->seeded = 1;
}


/* ---- lifecycle and control ------------------------------------------------ */

/* libunwind keeps a per-thread cache behind a pthread key whose destructor
 * is in libunwind: if libunwind were unloaded with us (httpd's graceful
 * restart), every thread that had unwound would jump into unmapped code
 * when it exits. Keep libunwind loaded for the life of the process. */
static void
pin_unwinder(void)
{
    Dl_info  dli;
    void    *h;

    if (dladdr((void *) unw_backtrace, &dli) != 0 && dli.dli_fname != NULL) {
        h = dlopen(dli.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        if (h != NULL) {
            dlclose(h);
        }
    }
}

int
sp_alloc_sampler_init(const sp_alloc_conf_t *c, char *err, size_t errlen)
{
    if (atomic_load(&ready)) {
        return 0;
    }
    conf = *c;
    if (conf.mean_bytes == 0) {
        conf.mean_bytes = SP_ALLOC_MEAN_DEFAULT;
    }
    if (conf.mean_bytes < 1024 || conf.mean_bytes > (1ull << 30)) {
        snprintf(err, errlen, "sampling interval %zu bytes is outside "
                 "1 KiB..1 GiB", conf.mean_bytes);
        return -1;
    }
    if (conf.table_capacity == 0) {
        conf.table_capacity = 16384;
    }
    if (conf.table_capacity > SP_ALLOC_TABLE_MAX) {
        snprintf(err, errlen, "live table capacity %zu is above %d",
                 conf.table_capacity, SP_ALLOC_TABLE_MAX);
        return -1;
    }
    if (conf.stack_capacity == 0) {
        conf.stack_capacity = 8192;
    }
    if (conf.ring_capacity == 0) {
        conf.ring_capacity = 4096;
    }
    if (conf.max_depth == 0) {
        conf.max_depth = 64;
    }
    if (conf.max_depth > SP_ALLOC_DEPTH_MAX) {
        snprintf(err, errlen, "max depth %u is above %d", conf.max_depth,
                 SP_ALLOC_DEPTH_MAX);
        return -1;
    }
    if (sp_alloc_table_init(&sp_alloc_live, conf.table_capacity) != 0
        || sp_alloc_stacks_init(&stacks, conf.stack_capacity,
                                conf.max_depth) != 0
        || sp_slot_ring_init(&ring, conf.ring_capacity,
                             sizeof(sp_alloc_sample_t)) != 0)
    {
        sp_alloc_table_free(&sp_alloc_live);
        sp_alloc_stacks_free(&stacks);
        snprintf(err, errlen, "out of memory for the allocation profiler");
        return -1;
    }
    pin_unwinder();
    atomic_store(&mean_bytes, conf.mean_bytes);
    atomic_store(&n_sampled, 0);
    atomic_store(&n_freed, 0);
    atomic_store(&n_reentered, 0);
    atomic_store(&enabled, 1);
    atomic_store(&ready, 1);
    return 0;
}

int
sp_alloc_sampler_ready(void)
{
    return atomic_load(&ready);
}

void
sp_alloc_sampler_fini(void)
{
    if (!atomic_exchange(&ready, 0)) {
        return;
    }
    sp_alloc_table_free(&sp_alloc_live);
    sp_alloc_stacks_free(&stacks);
    sp_slot_ring_free(&ring);
}

void
sp_alloc_sampler_atfork_child(void)
{
    if (!atomic_load(&ready)) {
        return;
    }
    /* Samples not yet drained belong to the parent's exporter anyway. */
    sp_slot_ring_free(&ring);
    if (sp_slot_ring_init(&ring, conf.ring_capacity,
                          sizeof(sp_alloc_sample_t)) != 0)
    {
        atomic_store(&enabled, 0);
    }
}

void
sp_alloc_sampler_clear_live(void)
{
    if (atomic_load(&ready)) {
        sp_alloc_table_clear(&sp_alloc_live);
    }
}

void
sp_alloc_sampler_set_enabled(int on)
{
    atomic_store(&enabled, on ? 1 : 0);
}

int
sp_alloc_sampler_enabled(void)
{
    return atomic_load(&enabled);
}

int
sp_alloc_sampler_set_mean(size_t bytes)
{
    if (bytes < 1024 || bytes > (1ull << 30)) {
        errno = EINVAL;
        return -1;
    }
    atomic_store(&mean_bytes, bytes);
    return 0;
}

size_t
sp_alloc_sampler_mean(void)
{
    return (size_t) atomic_load(&mean_bytes);
}

void
sp_alloc_sampler_set_shed(unsigned level, int paused)
{
    atomic_store(&shed_shift, level > 20 ? 20 : level);
    atomic_store(&shed_paused, paused != 0);
}

/* The configured mean, doubled per shed level, at most 1 GiB. */
static uint64_t
effective_mean(uint64_t mean, unsigned shift)
{
    if (mean == 0) {
        mean = SP_ALLOC_MEAN_DEFAULT;
    }
    return (mean << shift) > (1ull << 30) || (mean << shift) < mean
           ? (1ull << 30) : mean << shift;
}

size_t
sp_alloc_sampler_effective_mean(void)
{
    return (size_t) effective_mean(atomic_load(&mean_bytes),
                                   atomic_load(&shed_shift));
}


/* ---- the hooks' slow path ------------------------------------------------- */

void
sp_alloc_sampler_take(sp_alloc_thread_t *t, void *p, size_t size,
    uintptr_t caller)
{
    uintptr_t                frames[SP_ALLOC_DEPTH_MAX + OWN_FRAMES];
    uint64_t                 mean = effective_mean(
        atomic_load_explicit(&mean_bytes, memory_order_relaxed),
        atomic_load_explicit(&shed_shift, memory_order_relaxed));
    sp_thread_ctx_record_t  *rec;
    sp_alloc_sample_t       *s;
    sp_alloc_live_t          live;
    int                      n, i;
    uint32_t                 stack_id;

    if (!t->seeded) {
        /* The thread's first allocation: start counting. */
        seed(t);
        t->left = sp_alloc_draw_interval(next_random(t), mean);
        return;
    }
    t->left = sp_alloc_draw_interval(next_random(t), mean);

    if (p == NULL || !atomic_load_explicit(&ready, memory_order_acquire)
        || !atomic_load_explicit(&enabled, memory_order_relaxed)
        || atomic_load_explicit(&shed_paused, memory_order_relaxed))
    {
        return;
    }
    if (t->busy) {
        /* Allocated by our own bookkeeping or by libunwind. */
        atomic_fetch_add_explicit(&n_reentered, 1, memory_order_relaxed);
        return;
    }
    t->busy = 1;

    n = unw_backtrace((void **) frames, (int) conf.max_depth + OWN_FRAMES);
    for (i = 0; i < n && frames[i] != caller; i++) {
        /* our own frames */
    }
    if (i < n) {
        /* The return address points after the call: the call is in the
         * allocating function all the same. */
        stack_id = sp_alloc_stacks_intern(&stacks, frames + i,
                                          (unsigned) (n - i));
    } else {
        frames[0] = caller;
        stack_id = sp_alloc_stacks_intern(&stacks, frames, 1);
    }

    memset(&live, 0, sizeof(live));
    live.size = size;
    live.mean = mean;
    live.stack_id = stack_id;
    rec = sp_thread_ctx_current();
    if (rec != NULL && rec->valid) {
        memcpy(live.trace_id, rec->trace_id, SP_TRACE_ID_LEN);
        memcpy(live.span_id, rec->span_id, SP_SPAN_ID_LEN);
        live.keep_pending = rec->sp_keep;
        live.has_ctx = 1;
    }
    (void) sp_alloc_table_insert(&sp_alloc_live, (uintptr_t) p, &live);

    s = sp_slot_ring_reserve(&ring);
    if (s != NULL) {
        s->time_ns = sp_now_ns();
        s->size = size;
        s->mean = mean;
        s->stack_id = stack_id;
        s->has_ctx = live.has_ctx;
        s->keep_pending = live.keep_pending;
        s->attrs_len = 0;
        if (live.has_ctx) {
            memcpy(s->trace_id, live.trace_id, SP_TRACE_ID_LEN);
            memcpy(s->span_id, live.span_id, SP_SPAN_ID_LEN);
            n = rec->attrs_data_size;
            if (n > SP_THREAD_CTX_ATTRS_MAX) {
                n = SP_THREAD_CTX_ATTRS_MAX;
            }
            memcpy(s->attrs, rec->attrs_data, (size_t) n);
            s->attrs_len = (uint8_t) n;
        }
        sp_slot_ring_commit(&ring, s);
    }
    atomic_fetch_add_explicit(&n_sampled, 1, memory_order_relaxed);
    t->busy = 0;
}

void
sp_alloc_sampler_forget(void *p)
{
    if (!atomic_load_explicit(&ready, memory_order_acquire)) {
        return;
    }
    if (sp_alloc_table_remove(&sp_alloc_live, (uintptr_t) p, NULL)) {
        atomic_fetch_add_explicit(&n_freed, 1, memory_order_relaxed);
    }
}


/* ---- the exporter's side -------------------------------------------------- */

size_t
sp_alloc_sampler_peek(sp_alloc_sample_t **out, size_t max)
{
    if (!atomic_load(&ready)) {
        return 0;
    }
    return sp_slot_ring_peek(&ring, (void **) out, max);
}

void
sp_alloc_sampler_release(size_t n)
{
    if (atomic_load(&ready)) {
        sp_slot_ring_release(&ring, n);
    }
}

unsigned
sp_alloc_sampler_stack(uint32_t stack_id, const uintptr_t **frames)
{
    if (!atomic_load(&ready)) {
        *frames = NULL;
        return 0;
    }
    return sp_alloc_stacks_get(&stacks, stack_id, frames);
}

typedef struct {
    uint32_t   stack_id;
    uint32_t   pos;               /* 0 empty, 1 + index in out, or LEFT_OUT */
} inuse_index_t;

#define LEFT_OUT  UINT32_MAX

typedef struct {
    sp_alloc_inuse_t  *out;
    size_t             max, n;
    inuse_index_t     *index;     /* open addressing by stack id */
    size_t             mask;
} inuse_acc_t;

static void
inuse_add(uintptr_t addr, const sp_alloc_live_t *v, void *arg)
{
    inuse_acc_t       *a = arg;
    size_t             h = (size_t) (((uint64_t) v->stack_id
                                      * 0x9e3779b97f4a7c15ull) >> 20)
                           & a->mask;
    inuse_index_t     *e;
    sp_alloc_inuse_t  *o;
    double             objects, bytes;

    for ( ;; h = (h + 1) & a->mask) {
        e = &a->index[h];
        if (e->pos == 0) {
            e->stack_id = v->stack_id;
            if (a->n < a->max) {
                o = &a->out[a->n];
                o->stack_id = v->stack_id;
                o->samples = 0;
                o->objects = 0;
                o->bytes = 0;
                e->pos = (uint32_t) (a->n + 1);
            } else {
                e->pos = LEFT_OUT;
            }
            a->n++;
            break;
        }
        if (e->stack_id == v->stack_id) {
            break;
        }
    }
    if (e->pos == LEFT_OUT) {
        return;
    }
    sp_alloc_weight(v->size, v->mean, &objects, &bytes);
    o = &a->out[e->pos - 1];
    o->samples++;
    o->objects += objects;
    o->bytes += bytes;
}

size_t
sp_alloc_sampler_inuse(sp_alloc_inuse_t *out, size_t max)
{
    inuse_acc_t  a;
    size_t       slots = 64;

    if (!atomic_load(&ready)) {
        return 0;
    }
    /* At most table-capacity distinct stacks are live: the index stays
     * at most half full. */
    while (slots < 2 * (sp_alloc_live.mask + 1)) {
        slots <<= 1;
    }
    memset(&a, 0, sizeof(a));
    a.out = out;
    a.max = max;
    a.mask = slots - 1;
    a.index = calloc(slots, sizeof(*a.index));
    if (a.index == NULL) {
        return 0;
    }
    sp_alloc_table_each(&sp_alloc_live, inuse_add, &a);
    free(a.index);
    return a.n;
}

size_t
sp_alloc_sampler_each_live(
    void (*cb)(uintptr_t addr, const sp_alloc_live_t *v, void *arg),
    void *arg)
{
    if (!atomic_load(&ready)) {
        return 0;
    }
    return sp_alloc_table_each(&sp_alloc_live, cb, arg);
}

void
sp_alloc_sampler_get_stats(sp_alloc_sampler_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    st->mean_bytes = sp_alloc_sampler_effective_mean();
    st->sampled = atomic_load(&n_sampled);
    st->freed = atomic_load(&n_freed);
    st->reentered = atomic_load(&n_reentered);
    if (atomic_load(&ready)) {
        st->dropped_ring = sp_slot_ring_dropped(&ring);
        st->table_full = sp_alloc_table_full(&sp_alloc_live);
        st->stacks_full = atomic_load(&stacks.full);
        st->live = sp_alloc_table_live(&sp_alloc_live);
    }
}
