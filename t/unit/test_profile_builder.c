/* The profile builder: identical (stack, labels) samples are aggregated
 * with their weights and timestamps; different labels or stacks stay apart;
 * return addresses are looked up one byte back; functions are named by the
 * symbolizer and shared between locations. */

#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "common/profile/profile_builder.h"

__attribute__((noinline)) void
sp_test_leaf(void)
{
    __asm__ volatile("");
}

__attribute__((noinline)) void
sp_test_caller(void)
{
    sp_test_leaf();
    __asm__ volatile("");
}

static sp_raw_sample_t *
raw(uintptr_t leaf, uintptr_t ret, int span, uint64_t t, uint32_t weight,
    const char *name)
{
    sp_raw_sample_t  *s = calloc(1, sizeof(*s) + 4 * sizeof(uintptr_t));

    s->time_ns = t;
    s->weight = weight;
    s->nframes = 2;
    s->frames[0] = leaf;
    s->frames[1] = ret;
    if (span) {
        s->has_ctx = 1;
        memset(s->trace_id, 0x11, sizeof(s->trace_id));
        memset(s->span_id, span, sizeof(s->span_id));
        if (name != NULL) {
            s->attrs[0] = SP_THREAD_CTX_ATTR_SPAN_NAME;
            s->attrs[1] = (uint8_t) strlen(name);
            memcpy(s->attrs + 2, name, strlen(name));
            s->attrs_len = (uint8_t) (2 + strlen(name));
        }
    }
    return s;
}

int
main(void)
{
    sp_profile_builder_t  *b = sp_profile_builder_new();
    sp_symbolizer_t       *sym = sp_symbolizer_new(NULL);
    sp_resource_t          res;
    sp_profile_t           p;
    sp_raw_sample_t       *s[6];
    uintptr_t              leaf = (uintptr_t) sp_test_leaf;
    /* A return address just past a call in sp_test_caller. */
    uintptr_t              ret = (uintptr_t) sp_test_caller + 5;
    size_t                 i, j;
    int                    span_a = -1, span_b = -1, none = -1;

    sp_resource_init(&res, "test", "builder", NULL);

    s[0] = raw(leaf, ret, 0xaa, 100, 1, "GET /a");
    s[1] = raw(leaf, ret, 0xaa, 200, 3, "GET /a");     /* same: aggregated */
    s[2] = raw(leaf, ret, 0xbb, 300, 1, "GET /b");     /* other span */
    s[3] = raw(leaf, ret, 0, 400, 1, NULL);            /* no span */
    s[4] = raw(leaf, ret, 0xaa, 500, 2, "GET /a");
    s[5] = raw(ret, leaf, 0, 600, 1, NULL);            /* other stack */

    /* span a's signals at three rates: 1 x 1 ms, 3 x 2 ms, 2 x 4 ms */
    s[0]->period_ns = 1000000;
    s[1]->period_ns = 2000000;
    s[4]->period_ns = 4000000;
    for (i = 0; i < 6; i++) {
        sp_profile_builder_add(b, s[i]);
    }
    is_int(sp_profile_builder_samples(b), 6, "6 samples added");
    ok(sp_profile_builder_build(b, sym, &res, 0, 1000, 10000000, &p) == 0,
       "built");
    is_int(p.nsamples, 4, "4 distinct (stack, labels)");

    for (i = 0; i < p.nsamples; i++) {
        if (p.samples[i].has_span && p.samples[i].span_id[0] == 0xaa) {
            span_a = (int) i;
        } else if (p.samples[i].has_span) {
            span_b = (int) i;
        } else if (p.locs[p.samples[i].stack_off]
                   == p.locs[p.samples[0].stack_off])
        {
            none = (int) i;
        }
    }
    ok(span_a >= 0 && span_b >= 0 && none >= 0, "the three label sets");
    if (span_a < 0 || span_b < 0 || none < 0) {
        return done_testing();
    }
    is_int(p.samples[span_a].count, 6, "span a: weights 1+3+2");
    is_int(p.samples[span_a].ts_len, 3, "span a: 3 timestamps");
    {
        uint64_t  *ts = p.timestamps + p.samples[span_a].ts_off;

        ok(ts[0] == 100 && ts[1] == 200 && ts[2] == 500,
           "span a: timestamps in order");
    }
    {
        int64_t  *c = p.ts_cpu_ns + p.samples[span_a].ts_off;

        ok(p.ts_cpu_ns != NULL && c[0] == 1000000 && c[1] == 6000000
           && c[2] == 8000000,
           "span a: each timestamp's CPU is its weight x its own period");
        is_int(p.samples[span_a].cpu_ns, 15000000, "span a: cpu_ns 15 ms");
    }
    is_str(p.samples[span_a].span_name, "GET /a", "span a: name");
    is_str(p.samples[span_b].span_name, "GET /b", "span b: name");
    ok(p.samples[none].span_name == NULL, "no span: no name");
    is_int(p.ntimestamps, 6, "one timestamp per raw sample");

    /* Locations: leaf exact, caller one byte back; named by the symbolizer. */
    {
        sp_profile_location_t  *l0 = &p.locations[p.locs[p.samples[span_a].stack_off]];
        sp_profile_location_t  *l1 = &p.locations[p.locs[p.samples[span_a].stack_off + 1]];

        is_int(l0->address, leaf, "leaf address as sampled");
        is_int(l1->address, ret - 1, "return address minus one");
        is_str(p.functions[l0->function].name, "sp_test_leaf", "leaf function");
        is_str(p.functions[l1->function].name, "sp_test_caller",
               "caller function");
        ok(l0->mapping >= 0 && strstr(p.mappings[l0->mapping].filename,
                                      "test_profile_builder") != NULL,
           "mapping is the test binary");
    }
    /* Locations and functions are shared, not repeated per sample. */
    ok(p.nlocations <= 4, "at most 4 locations for 2 pcs (+1 each as return)");
    for (i = 0; i < p.nfunctions; i++) {
        for (j = i + 1; j < p.nfunctions; j++) {
            ok(p.functions[i].name != p.functions[j].name
               || p.functions[i].filename != p.functions[j].filename,
               "functions %zu and %zu differ", i, j);
        }
    }

    sp_profile_builder_reset(b);
    is_int(sp_profile_builder_samples(b), 0, "reset empties it");
    ok(sp_profile_builder_build(b, sym, &res, 0, 1, 1, &p) == 0
       && p.nsamples == 0, "an empty profile builds");

    for (i = 0; i < 6; i++) {
        free(s[i]);
    }
    sp_profile_builder_free(b);
    sp_symbolizer_free(sym);
    sp_resource_free(&res);
    return done_testing();
}
