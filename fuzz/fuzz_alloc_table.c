/* alloc_table: the live table of sampled allocations (alloc_table.h).
 * The first byte chooses the table (bit 0: 64 or 128 slots) and the mode
 * (bits 1-2):
 *  - 0, 1: a sequence of operations (4 bytes each: insert or remove, which
 *    address of a small pool, a size) run against the table and a plain
 *    model, as t/unit/test_alloc_table.c does with random sequences.
 *    Properties: remove finds exactly what the model holds and gives back
 *    its value; the live count, the refused-insert count and the walk
 *    match the model; the capacity bound holds; the filter never misses a
 *    live address, and every counter is back to zero once emptied;
 *  - 2: the same with addresses the input chooses (9 bytes an operation:
 *    the kind, then a 64-bit address, 16-byte aligned), so that the fuzzer
 *    can build home-slot and filter collisions the pool does not have; and
 *    a refused insert must mean a full probe window: at least probe_max
 *    entries live (a tombstone is never left unused);
 *  - 3: sp_alloc_table_init with a capacity the input chooses: a power of
 *    two within SP_ALLOC_TABLE_MIN..MAX, at least the capacity asked (up to
 *    MAX) and less than twice it, the probe limit within the table, an
 *    empty table and filter. */

#include <stdint.h>
#include <string.h>

#include "common/profile/alloc_table.h"
#include "fuzz/fuzz.h"
#include "t/unit/alloc_table_model.h"

typedef struct {
    const uint8_t  *data;
    size_t          size, pos;
} input_t;

static uint32_t
next_op(void *state)
{
    input_t   *in = state;
    uint32_t   v = 0;
    size_t     i;

    for (i = 0; i < 4; i++) {
        v = (v << 8) | (in->pos < in->size ? in->data[in->pos] : 0);
        in->pos++;
    }
    return v;
}

/* Mode 2: addresses from the input, a model of up to WILD_MAX entries. */
#define WILD_MAX  256

typedef struct {
    uintptr_t  addr[WILD_MAX];
    uint64_t   size[WILD_MAX];
    size_t     n;
} wild_model_t;

static size_t
wild_find(const wild_model_t *m, uintptr_t a)
{
    size_t  i;

    for (i = 0; i < m->n; i++) {
        if (m->addr[i] == a) {
            return i;
        }
    }
    return WILD_MAX;
}

typedef struct {
    const wild_model_t  *m;
    size_t               seen, bad;
} wild_walk_t;

static void
wild_walk_cb(uintptr_t addr, const sp_alloc_live_t *v, void *arg)
{
    wild_walk_t  *w = arg;
    size_t        i = wild_find(w->m, addr);

    w->seen++;
    if (i == WILD_MAX || w->m->size[i] != v->size
        || v->stack_id != (uint32_t) (addr >> 4))
    {
        w->bad++;
    }
}

static void
run_wild(sp_alloc_table_t *t, const uint8_t *data, size_t size)
{
    static wild_model_t  m;
    sp_alloc_live_t      v, out;
    wild_walk_t          w;
    uint64_t             refused = 0, a64;
    uintptr_t            a;
    size_t               pos, i, k;
    uint8_t              op;

    memset(&m, 0, sizeof(m));
    for (pos = 0; pos + 9 <= size; pos += 9) {
        op = data[pos];
        memcpy(&a64, data + pos + 1, 8);
        a = (uintptr_t) a64 & ~(uintptr_t) 15;
        if (a == 0) {
            continue;               /* keys 0..3 are states, not addresses */
        }
        i = wild_find(&m, a);
        if (op < 150) {
            if (i != WILD_MAX || m.n == WILD_MAX) {
                continue;           /* a live address is not handed out */
            }
            memset(&v, 0, sizeof(v));
            v.size = op;
            v.stack_id = (uint32_t) (a >> 4);
            if (sp_alloc_table_insert(t, a, &v) == 0) {
                m.addr[m.n] = a;
                m.size[m.n] = op;
                m.n++;
            } else {
                refused++;
                FUZZ_CHECK(m.n >= t->probe_max);
            }
        } else {
            k = (size_t) sp_alloc_table_remove(t, a, &out);
            FUZZ_CHECK(k == (i != WILD_MAX));
            if (k) {
                FUZZ_CHECK(out.size == m.size[i]
                           && out.stack_id == (uint32_t) (a >> 4));
                m.n--;
                m.addr[i] = m.addr[m.n];
                m.size[i] = m.size[m.n];
            }
        }
        FUZZ_CHECK(sp_alloc_table_live(t) == m.n);
        FUZZ_CHECK(sp_alloc_table_full(t) == refused);
        for (k = 0; k < m.n; k++) {
            FUZZ_CHECK(sp_alloc_table_maybe(t, m.addr[k]));
        }
    }
    w.m = &m;
    w.seen = 0;
    w.bad = 0;
    sp_alloc_table_each(t, wild_walk_cb, &w);
    FUZZ_CHECK(w.seen == m.n && w.bad == 0);
    for (k = 0; k < m.n; k++) {
        FUZZ_CHECK(sp_alloc_table_remove(t, m.addr[k], NULL) == 1);
    }
    FUZZ_CHECK(sp_alloc_table_live(t) == 0);
    for (k = 0; k < (t->mask + 1) * 2; k++) {
        FUZZ_CHECK(atomic_load(&t->filter[k]) == 0);
    }
}

static void
run_init(const uint8_t *data, size_t size)
{
    sp_alloc_table_t  t;
    uint32_t          c32 = 0;
    size_t            cap, n, want, i;

    memcpy(&c32, data, size < 4 ? size : 4);
    cap = c32 % (4 * SP_ALLOC_TABLE_MAX);
    FUZZ_CHECK(sp_alloc_table_init(&t, cap) == 0);
    n = t.mask + 1;
    want = cap < SP_ALLOC_TABLE_MAX ? cap : SP_ALLOC_TABLE_MAX;
    FUZZ_CHECK((n & (n - 1)) == 0);
    FUZZ_CHECK(n >= SP_ALLOC_TABLE_MIN && n <= SP_ALLOC_TABLE_MAX);
    FUZZ_CHECK(n >= want);
    FUZZ_CHECK(n == SP_ALLOC_TABLE_MIN || n < 2 * want);
    FUZZ_CHECK(t.probe_max >= 1 && t.probe_max <= n
               && t.probe_max <= SP_ALLOC_TABLE_PROBE_MAX);
    /* the home hash and the filter index stay inside their arrays */
    FUZZ_CHECK((1ull << (64 - t.shift)) == n);
    FUZZ_CHECK((1ull << (64 - t.filter_shift)) == 2 * n);
    FUZZ_CHECK(sp_alloc_table_live(&t) == 0 && sp_alloc_table_full(&t) == 0);
    for (i = 0; i < n; i++) {
        FUZZ_CHECK(atomic_load(&t.slots[i].key) == 0);
    }
    sp_alloc_table_free(&t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sp_alloc_table_t  t[2];
    static int               ready;
    static alloc_model_t     m;
    input_t                  in = { data, size, 1 };
    sp_alloc_table_t        *tab;
    const char              *why = "";
    size_t                   fail;

    if (!ready) {
        FUZZ_CHECK(sp_alloc_table_init(&t[0], 64) == 0);
        FUZZ_CHECK(sp_alloc_table_init(&t[1], 128) == 0);
        ready = 1;
    }
    if (size < 1) {
        return 0;
    }
    if (((data[0] >> 1) & 3) == 3) {
        run_init(data + 1, size - 1);
        return 0;
    }
    tab = &t[data[0] & 1];
    sp_alloc_table_clear(tab);
    atomic_store(&tab->full, 0);
    if (((data[0] >> 1) & 3) == 2) {
        run_wild(tab, data + 1, size - 1);
        return 0;
    }
    fail = alloc_model_run(tab, &m, (size - 1) / 4, next_op, &in, &why);
    if (fail != 0) {
        fuzz_fail(__FILE__, __LINE__, why);
    }
    return 0;
}
