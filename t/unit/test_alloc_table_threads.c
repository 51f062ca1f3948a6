/* The live table of sampled allocations (alloc_table.h) under concurrent
 * use, as the allocator hooks use it: a property test. Several threads act
 * as allocator and hooks at once on a table small enough to fill (inserts
 * are refused and counted), over one shared pool of addresses that the
 * threads hand to each other, as a heap reuses a freed block on another
 * thread:
 *  - a thread "allocates" a free pool address (CAS free -> owned), inserts
 *    it (sampled) or not, and some time later "frees" it: asks the filter
 *    (must say maybe for an address it inserted), removes it (must find it,
 *    with its own value, exactly when its insert succeeded: no lost
 *    removal, no entry of another owner), then hands the address back;
 *  - a walker thread reads the table meanwhile, as the exporter does: every
 *    entry it sees is consistent (its value belongs to its key and to a
 *    generation that was inserted), never more than the capacity;
 *  - counts are conserved: inserts that succeeded minus removes equals the
 *    live count, refusals equal the table's full counter, and once every
 *    thread has freed what it holds the table and its filter are empty. */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tap.h"
#include "common/profile/alloc_table.h"

#define THREADS   4
#define POOL      2048            /* addresses shared by all threads */
#define HELD_MAX  96              /* what one thread holds at once */
#define OPS       150000          /* per thread */
#define CAPACITY  256             /* fills: 4 x 96 held > 256 */

typedef struct {
    _Atomic int       owner;      /* 0 free, else thread number + 1 */
    _Atomic uint32_t  gen;        /* bumped at each allocation */
} pool_entry_t;

static sp_alloc_table_t  table;
static pool_entry_t      pool[POOL];
static _Atomic int       stop_walk;
static _Atomic uint64_t  n_inserted, n_removed, n_refused, n_errors,
                         n_walks, n_walk_bad, n_walk_max;

static uintptr_t
pool_addr(size_t i)
{
    /* 16-byte aligned, spread like a heap's, many sharing home slots */
    return 0x7f1000000000ull + (uintptr_t) i * 32
           + ((uintptr_t) (i % 5) << 18);
}

/* The value an insert writes: it names its address and generation. */
static void
value_of(size_t i, uint32_t gen, sp_alloc_live_t *v)
{
    memset(v, 0, sizeof(*v));
    v->size = (uint64_t) i * 7 + 1;
    v->mean = ((uint64_t) gen << 16) | i;
    v->stack_id = (uint32_t) (pool_addr(i) >> 4);
    v->has_ctx = 1;
    v->trace_id[0] = (uint8_t) i;
    v->span_id[0] = (uint8_t) gen;
}

static uint32_t
xorshift(uint32_t *s)
{
    uint32_t  x = *s;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *s = x;
    return x;
}

typedef struct {
    size_t    idx;
    uint32_t  gen;
    int       tracked;
} held_t;

static void
error(const char *what)
{
    if (atomic_fetch_add(&n_errors, 1) < 5) {
        printf("#   %s\n", what);
    }
}

static void
release(held_t *h)
{
    sp_alloc_live_t  out;
    int              maybe, rc;
    uintptr_t        a = pool_addr(h->idx);

    maybe = sp_alloc_table_maybe(&table, a);
    if (h->tracked && !maybe) {
        error("the filter misses an address its owner inserted");
    }
    rc = sp_alloc_table_remove(&table, a, &out);
    if (rc != h->tracked) {
        error(h->tracked ? "a removal lost: an inserted address not found"
                         : "removed an address that was never inserted");
    }
    if (rc == 1) {
        if (out.mean != (((uint64_t) h->gen << 16) | h->idx)
            || out.size != (uint64_t) h->idx * 7 + 1)
        {
            error("remove returned another allocation's value");
        }
        atomic_fetch_add(&n_removed, 1);
    }
    /* Only now may another thread allocate (and insert) it again. */
    atomic_store_explicit(&pool[h->idx].owner, 0, memory_order_release);
}

static void *
allocator(void *arg)
{
    int              me = (int) (uintptr_t) arg + 1, zero;
    uint32_t         seed = 0x9e3779b9u * (uint32_t) me, r;
    held_t           held[HELD_MAX];
    size_t           nheld = 0, k, i, tries;
    sp_alloc_live_t  v;
    long             op;

    for (op = 0; op < OPS; op++) {
        r = xorshift(&seed);
        if (nheld > 0 && (nheld == HELD_MAX || (r & 3) == 0)) {
            k = (r >> 8) % nheld;
            release(&held[k]);
            held[k] = held[--nheld];
            continue;
        }
        for (tries = 0; tries < 8; tries++) {
            i = (xorshift(&seed) >> 4) % POOL;
            zero = 0;
            if (atomic_compare_exchange_strong_explicit(&pool[i].owner, &zero,
                    me, memory_order_acquire, memory_order_relaxed))
            {
                break;
            }
        }
        if (tries == 8) {
            continue;
        }
        held[nheld].idx = i;
        held[nheld].gen = atomic_fetch_add(&pool[i].gen, 1) + 1;
        held[nheld].tracked = 0;
        if ((r & 0x30) != 0) {                  /* sampled: 3 in 4 */
            value_of(i, held[nheld].gen, &v);
            if (sp_alloc_table_insert(&table, pool_addr(i), &v) == 0) {
                held[nheld].tracked = 1;
                atomic_fetch_add(&n_inserted, 1);
            } else {
                atomic_fetch_add(&n_refused, 1);
            }
        }
        nheld++;
    }
    while (nheld > 0) {
        release(&held[--nheld]);
    }
    return NULL;
}

typedef struct {
    uint64_t  seen, bad;
} walk_t;

static void
walk_cb(uintptr_t addr, const sp_alloc_live_t *v, void *arg)
{
    walk_t    *w = arg;
    size_t     i = (size_t) (v->mean & 0xffff);
    uint32_t   gen = (uint32_t) (v->mean >> 16);

    w->seen++;
    if (i >= POOL || pool_addr(i) != addr
        || v->size != (uint64_t) i * 7 + 1
        || v->stack_id != (uint32_t) (addr >> 4)
        || v->trace_id[0] != (uint8_t) i || v->span_id[0] != (uint8_t) gen
        || gen == 0 || gen > atomic_load(&pool[i].gen))
    {
        w->bad++;
    }
}

static void *
walker(void *arg)
{
    walk_t    w;
    uint64_t  max = 0;

    (void) arg;
    while (!atomic_load(&stop_walk)) {
        w.seen = 0;
        w.bad = 0;
        sp_alloc_table_each(&table, walk_cb, &w);
        atomic_fetch_add(&n_walks, 1);
        atomic_fetch_add(&n_walk_bad, w.bad);
        if (w.seen > max) {
            max = w.seen;
        }
    }
    atomic_store(&n_walk_max, max);
    return NULL;
}

int
main(void)
{
    pthread_t  th[THREADS], wt;
    size_t     i, nz;
    int        t;

    ok(sp_alloc_table_init(&table, CAPACITY) == 0, "init, %d slots",
       CAPACITY);
    pthread_create(&wt, NULL, walker, NULL);
    for (t = 0; t < THREADS; t++) {
        pthread_create(&th[t], NULL, allocator, (void *) (uintptr_t) t);
    }
    for (t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
    }
    atomic_store(&stop_walk, 1);
    pthread_join(wt, NULL);

    is_int(atomic_load(&n_errors), 0,
           "%d threads x %d operations on a shared pool: every free found "
           "exactly what its owner inserted, with its value", THREADS, OPS);
    ok(atomic_load(&n_refused) > 0 && atomic_load(&n_inserted) > 0,
       "the table filled up: %llu inserted, %llu refused",
       (unsigned long long) atomic_load(&n_inserted),
       (unsigned long long) atomic_load(&n_refused));
    is_int(sp_alloc_table_full(&table), atomic_load(&n_refused),
           "the full counter is the number of refused inserts");
    is_int(atomic_load(&n_inserted), atomic_load(&n_removed),
           "every inserted entry was removed once");
    is_int(sp_alloc_table_live(&table), 0, "the live count ends at zero");
    ok(atomic_load(&n_walks) > 0, "the walker read the table %llu times",
       (unsigned long long) atomic_load(&n_walks));
    is_int(atomic_load(&n_walk_bad), 0,
           "every entry the walker saw was consistent");
    ok(atomic_load(&n_walk_max) <= CAPACITY,
       "never more entries than the capacity (%llu at most)",
       (unsigned long long) atomic_load(&n_walk_max));
    for (i = 0, nz = 0; i < (table.mask + 1) * 2; i++) {
        nz += atomic_load(&table.filter[i]) != 0;
    }
    is_int(nz, 0, "every filter counter back to zero");
    for (i = 0, nz = 0; i <= table.mask; i++) {
        nz += atomic_load(&table.slots[i].key) > 3;
    }
    is_int(nz, 0, "no slot still holds an address");
    sp_alloc_table_free(&table);
    return done_testing();
}
