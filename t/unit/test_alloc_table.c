/* The live table of sampled allocations (alloc_table.h): random insert /
 * remove sequences against a model, at capacities where it fills up (so
 * refusals are counted and the bound holds) and where it does not; a
 * re-insert after remove; and threads inserting and removing at once,
 * each its own addresses, leaving an empty table and filter. */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "tap.h"
#include "alloc_table_model.h"

static uint32_t
xorshift(void *state)
{
    uint32_t  *s = state, x = *s;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *s = x;
    return x;
}

#define THREADS  4
#define PER      2000
#define ROUNDS   50

static sp_alloc_table_t  shared;
static _Atomic int       thread_errors;

static void *
churn(void *arg)
{
    uintptr_t        base = 0x100000000ull * (1 + (uintptr_t) arg);
    sp_alloc_live_t  v = { 0 }, out;
    int              r, i, n = 0;

    for (r = 0; r < ROUNDS; r++) {
        for (i = 0; i < PER; i++) {
            v.size = (uint64_t) i;
            if (sp_alloc_table_insert(&shared, base + (uintptr_t) i * 16, &v)
                != 0)
            {
                n++;
            }
        }
        for (i = 0; i < PER; i++) {
            if (sp_alloc_table_remove(&shared, base + (uintptr_t) i * 16,
                                      &out) != 1 || out.size != (uint64_t) i)
            {
                n++;
            }
        }
    }
    atomic_fetch_add(&thread_errors, n);
    return NULL;
}

int
main(void)
{
    static const size_t  caps[] = { 64, 128, 1024 };
    sp_alloc_table_t     t;
    alloc_model_t        m;
    sp_alloc_live_t      v = { 0 }, out;
    const char          *why = "";
    uint32_t             seed;
    size_t               c, s, fail;
    uint64_t             refused = 0;
    pthread_t            th[THREADS];
    int                  i;

    for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        ok(sp_alloc_table_init(&t, caps[c]) == 0, "init capacity %zu",
           caps[c]);
        fail = 0;
        for (s = 1; s <= 20 && fail == 0; s++) {
            seed = (uint32_t) (s * 2654435761u + c);
            fail = alloc_model_run(&t, &m, 20000, xorshift, &seed, &why);
            refused += m.refused;
            sp_alloc_table_clear(&t);
            atomic_store(&t.full, 0);
        }
        ok(fail == 0, "capacity %zu: 20 random runs of 20000 steps agree "
           "with the model", caps[c]);
        if (fail) {
            printf("#   step %zu: %s\n", fail, why);
        }
        sp_alloc_table_free(&t);
    }
    ok(refused > 0, "small tables filled up and counted %llu refusals",
       (unsigned long long) refused);

    /* Full: every slot within the probe limit taken, the next refused. */
    sp_alloc_table_init(&t, 64);
    for (i = 0; i < 64; i++) {
        v.size = (uint64_t) i;
        sp_alloc_table_insert(&t, 0x1000 + (uintptr_t) i * 16, &v);
    }
    is_int(sp_alloc_table_live(&t), 64, "64 entries in a 64-slot table");
    ok(sp_alloc_table_insert(&t, 0x9990, &v) == -1
       && sp_alloc_table_full(&t) == 1, "the 65th is refused and counted");
    ok(sp_alloc_table_remove(&t, 0x1000 + 5 * 16, &out) == 1
       && out.size == 5, "remove gives the value back");
    ok(sp_alloc_table_insert(&t, 0x9990, &v) == 0,
       "a freed slot (tombstone) is reused");
    ok(sp_alloc_table_remove(&t, 0x1000 + 5 * 16, NULL) == 0,
       "a removed address is gone");
    ok(sp_alloc_table_maybe(&t, 0x9990), "the filter knows a live address");
    sp_alloc_table_free(&t);

    /* Threads at once. */
    sp_alloc_table_init(&shared, 16384);
    for (i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, churn, (void *) (uintptr_t) i);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    is_int(atomic_load(&thread_errors), 0,
           "%d threads x %d rounds inserting and removing: each finds its "
           "own entries", THREADS, ROUNDS);
    is_int(sp_alloc_table_live(&shared), 0, "and the table ends empty");
    for (s = 0, c = 0; s < (shared.mask + 1) * 2; s++) {
        c += atomic_load(&shared.filter[s]) != 0;
    }
    is_int(c, 0, "with every filter counter back to zero");
    sp_alloc_table_free(&shared);

    return done_testing();
}
