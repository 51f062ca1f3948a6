/* The allocation sampler without hooks (alloc_sampler.h, alloc_stacks.h):
 * Go's unbiasing weights; exponential intervals with the configured mean;
 * a sampled allocation reaches the ring with the thread's labels and the
 * live table until forgotten, and the in-use view sums it per stack;
 * re-entry is counted, not sampled; interned stacks are shared and a full
 * stack table is counted. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "common/profile/alloc_sampler.h"

/* 1/(1-exp(-x)), computed elsewhere (no libm here). */
static const struct { double x, scale; } expected[] = {
    { 0.37, 3.2334659131770578 },
    { 1.0, 1.5819767068693265 },
    { 2.5, 1.089425489833852 },
    { 3.7, 1.0253502746568484 },
    { 10.0, 1.0000454019910097 },
    { 40.5, 1 },
};
#define E_INV  0.36787944117144233     /* exp(-1) */

static int
close_to(double got, double want, double rel)
{
    double  d = got - want;

    return (d < 0 ? -d : d) <= rel * (want < 0 ? -want : want);
}

static uint64_t
splitmix(uint64_t *s)
{
    uint64_t  z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__attribute__((noinline)) static void
sample_here(sp_alloc_thread_t *t, void *p, size_t size)
{
    t->left = 0;
    sp_alloc_sampler_take(t, p, size, (uintptr_t) __builtin_return_address(0));
}

int
main(void)
{
    sp_alloc_conf_t           conf;
    sp_alloc_thread_t         t;
    sp_alloc_sampler_stats_t  st;
    sp_alloc_sample_t        *s[8];
    sp_alloc_inuse_t          in[8];
    sp_thread_ctx_record_t    rec;
    sp_alloc_stacks_t         stacks;
    uint8_t                   tid[SP_TRACE_ID_LEN], sid[SP_SPAN_ID_LEN];
    uintptr_t                 frames[4] = { 1, 2, 3, 4 };
    const uintptr_t          *f;
    double                    objects, bytes, sum = 0;
    uint64_t                  seed = 42, above = 0;
    char                      err[128], block[64], block2[64];
    int64_t                   d;
    size_t                    i, n;
    uint32_t                  id;
    volatile int              two = 2;     /* a loop, not unrolled */

    /* weights */
    sp_alloc_weight(512 * 1024, 512 * 1024, &objects, &bytes);
    ok(close_to(objects, 1.5819767068693265, 1e-9),
       "size = mean: 1/(1-e^-1) objects (%.6f)", objects);
    sp_alloc_weight(16, 512 * 1024, &objects, &bytes);
    ok(close_to(objects, 32768.50000250335, 1e-9)
       && close_to(bytes, objects * 16, 1e-12),
       "a small block stands for about mean/size blocks (%.1f)", objects);
    sp_alloc_weight(100 * 1024 * 1024, 512 * 1024, &objects, &bytes);
    ok(objects == 1.0, "a block far above the mean stands for itself");
    for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        sp_alloc_weight((uint64_t) (expected[i].x * 1e6), 1000000, &objects,
                        &bytes);
        if (!close_to(objects, expected[i].scale, 1e-9)) {
            printf("#   x %.2f: %.12f\n", expected[i].x, objects);
            break;
        }
    }
    is_int(i, sizeof(expected) / sizeof(expected[0]),
           "1/(1-exp(-size/mean)) from 0.37 to 40 means");

    /* intervals */
    for (i = 0; i < 200000; i++) {
        d = sp_alloc_draw_interval(splitmix(&seed), 512 * 1024);
        sum += (double) d;
        above += d > 512 * 1024;
    }
    ok(close_to(sum / 200000, 512 * 1024, 0.02),
       "200000 intervals average %.0f for a 524288 mean", sum / 200000);
    ok(close_to((double) above / 200000, E_INV, 0.03),
       "and %.4f of them exceed the mean (exponential: e^-1)",
       (double) above / 200000);
    ok(sp_alloc_draw_interval(0, 1024) >= 1
       && sp_alloc_draw_interval(UINT64_MAX, 1024) >= 1,
       "the extremes give a positive interval");

    /* the slow path, called directly */
    memset(&conf, 0, sizeof(conf));
    conf.mean_bytes = 1000;
    ok(sp_alloc_sampler_init(&conf, err, sizeof(err)) == -1,
       "an interval under 1 KiB is refused: %s", err);
    conf.mean_bytes = 0;
    conf.table_capacity = 64;
    ok(sp_alloc_sampler_init(&conf, err, sizeof(err)) == 0, "init");
    is_int(sp_alloc_sampler_mean(), 512 * 1024, "default mean 512 KiB");

    memset(&t, 0, sizeof(t));
    sample_here(&t, block, 100);
    sp_alloc_sampler_get_stats(&st);
    ok(st.sampled == 0 && t.left > 0,
       "a thread's first crossing only starts its count");

    memset(tid, 0xab, sizeof(tid));
    memset(sid, 0xcd, sizeof(sid));
    sp_thread_ctx_record_init(&rec, tid, sid, 1, "GET /x", 6);
    sp_thread_ctx_attach(&rec);
    for (i = 0; i < (size_t) two; i++) {      /* one call site */
        sample_here(&t, i == 0 ? block : block2, i == 0 ? 100 : 200);
    }
    sp_thread_ctx_detach();
    sp_alloc_sampler_get_stats(&st);
    is_int(st.sampled, 2, "two samples");
    is_int(st.live, 2, "both live");
    n = sp_alloc_sampler_peek(s, 8);
    is_int(n, 2, "both in the ring");
    ok(n == 2 && s[0]->size == 100 && s[0]->has_ctx
       && s[0]->trace_id[0] == 0xab && s[0]->span_id[7] == 0xcd
       && s[0]->attrs_len == 8 && memcmp(s[0]->attrs + 2, "GET /x", 6) == 0,
       "labelled with the thread's request");
    ok(n == 2 && s[0]->stack_id == s[1]->stack_id
       && s[0]->stack_id != SP_ALLOC_STACK_NONE,
       "same call site: one interned stack");
    ok(n == 2 && sp_alloc_sampler_stack(s[0]->stack_id, &f) >= 1
       && f[0] != 0, "its frames are there");
    sp_alloc_sampler_release(n);

    n = sp_alloc_sampler_inuse(in, 8);
    sp_alloc_weight(100, 512 * 1024, &objects, &bytes);
    sum = bytes;
    sp_alloc_weight(200, 512 * 1024, &objects, &bytes);
    ok(n == 1 && in[0].samples == 2 && close_to(in[0].bytes, sum + bytes,
       1e-9), "in use: one stack, two blocks, %.0f bytes", in[0].bytes);
    sp_alloc_sampler_forget(block);
    n = sp_alloc_sampler_inuse(in, 8);
    ok(n == 1 && in[0].samples == 1 && close_to(in[0].bytes, bytes, 1e-9),
       "one freed: the other is left");
    sp_alloc_sampler_forget(block2);
    is_int(sp_alloc_sampler_inuse(in, 8), 0, "both freed: nothing in use");

    t.busy = 1;
    sample_here(&t, block, 100);
    t.busy = 0;
    sp_alloc_sampler_get_stats(&st);
    ok(st.sampled == 2 && st.reentered == 1,
       "an allocation by the profiler itself is counted, not sampled");
    sp_alloc_sampler_set_enabled(0);
    sample_here(&t, block, 100);
    sp_alloc_sampler_set_enabled(1);
    sp_alloc_sampler_get_stats(&st);
    is_int(st.sampled, 2, "disabled: nothing sampled");

    /* load shedding: the mean doubles per level, a sample keeps its own */
    sp_alloc_sampler_set_shed(2, 0);
    is_int(sp_alloc_sampler_effective_mean(), 4 * 512 * 1024,
           "shed level 2: the mean in force is 4 x 512 KiB");
    is_int(sp_alloc_sampler_mean(), 512 * 1024, "the configured one stays");
    sp_alloc_sampler_get_stats(&st);
    is_int(st.mean_bytes, 4 * 512 * 1024, "the stats show the one in force");
    sample_here(&t, block, 100);
    n = sp_alloc_sampler_peek(s, 8);
    ok(n == 1 && s[0]->mean == 4 * 512 * 1024,
       "a sample taken while shed carries its mean (its weight stays right)");
    sp_alloc_sampler_release(n);
    sp_alloc_sampler_forget(block);
    ok(t.left > 0, "the next interval drawn");
    sp_alloc_sampler_set_shed(30, 0);
    is_int(sp_alloc_sampler_effective_mean(), 1u << 30, "at most 1 GiB");
    sp_alloc_sampler_set_shed(0, 1);
    sample_here(&t, block, 100);
    sp_alloc_sampler_get_stats(&st);
    is_int(st.sampled, 3, "paused by the shedder: nothing sampled");
    sp_alloc_sampler_set_shed(0, 0);
    is_int(sp_alloc_sampler_effective_mean(), 512 * 1024, "back to 512 KiB");
    sp_alloc_sampler_fini();

    /* stacks */
    ok(sp_alloc_stacks_init(&stacks, 64, 4) == 0, "stack table init");
    id = sp_alloc_stacks_intern(&stacks, frames, 4);
    is_int(sp_alloc_stacks_intern(&stacks, frames, 4), id,
           "the same frames: the same id");
    frames[3] = 5;
    ok(sp_alloc_stacks_intern(&stacks, frames, 4) != id,
       "other frames: another id");
    for (i = 0; i < 200; i++) {
        frames[0] = 1000 + i;
        sp_alloc_stacks_intern(&stacks, frames, 4);
    }
    ok(atomic_load(&stacks.full) > 0 && atomic_load(&stacks.used) <= 64,
       "a full stack table refuses and counts (%llu used, %llu refused)",
       (unsigned long long) atomic_load(&stacks.used),
       (unsigned long long) atomic_load(&stacks.full));
    sp_alloc_stacks_free(&stacks);

    return done_testing();
}
