#include <stdlib.h>
#include <string.h>

#include "common/profile/alloc_table.h"

#define KEY_EMPTY      ((uintptr_t) 0)
#define KEY_TOMBSTONE  ((uintptr_t) 1)
#define KEY_BUSY       ((uintptr_t) 2)
#define KEY_RESERVED   ((uintptr_t) 3)    /* keys 0..3 are states */


int
sp_alloc_table_init(sp_alloc_table_t *t, size_t capacity)
{
    size_t  n = SP_ALLOC_TABLE_MIN;
    unsigned bits = 6;

    while (n < capacity && n < SP_ALLOC_TABLE_MAX) {
        n <<= 1;
        bits++;
    }
    memset(t, 0, sizeof(*t));
    t->mask = n - 1;
    t->shift = 64 - bits;
    t->probe_max = n < SP_ALLOC_TABLE_PROBE_MAX ? n : SP_ALLOC_TABLE_PROBE_MAX;
    t->filter_shift = 64 - (bits + 1);
    t->slots = calloc(n, sizeof(*t->slots));
    t->filter = calloc(n * 2, sizeof(*t->filter));
    if (t->slots == NULL || t->filter == NULL) {
        sp_alloc_table_free(t);
        return -1;
    }
    return 0;
}

void
sp_alloc_table_free(sp_alloc_table_t *t)
{
    free(t->slots);
    free((void *) t->filter);
    t->slots = NULL;
    t->filter = NULL;
}

void
sp_alloc_table_clear(sp_alloc_table_t *t)
{
    memset(t->slots, 0, (t->mask + 1) * sizeof(*t->slots));
    memset((void *) t->filter, 0, (t->mask + 1) * 2 * sizeof(*t->filter));
    atomic_store(&t->live, 0);
}

static size_t
home(const sp_alloc_table_t *t, uintptr_t addr)
{
    /* Allocations are 16-byte aligned: mix the bits above. */
    return (size_t) ((((uint64_t) addr >> 4) * 0xff51afd7ed558ccdull)
                     >> t->shift);
}

int
sp_alloc_table_insert(sp_alloc_table_t *t, uintptr_t addr,
    const sp_alloc_live_t *v)
{
    size_t            i, h = home(t, addr);
    sp_alloc_slot_t  *s;
    uintptr_t         k;
    uint32_t          seq;

    for (i = 0; i < t->probe_max; i++) {
        s = &t->slots[(h + i) & t->mask];
        k = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (k != KEY_EMPTY && k != KEY_TOMBSTONE) {
            continue;
        }
        if (!atomic_compare_exchange_strong_explicit(&s->key, &k, KEY_BUSY,
                memory_order_acquire, memory_order_relaxed))
        {
            continue;       /* another insert took it: look further */
        }
        seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
        atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        s->v = *v;
        atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
        atomic_fetch_add_explicit(
            &t->filter[sp_alloc_table_filter_index(t, addr)], 1,
            memory_order_relaxed);
        atomic_fetch_add_explicit(&t->live, 1, memory_order_relaxed);
        atomic_store_explicit(&s->key, addr, memory_order_release);
        return 0;
    }
    atomic_fetch_add_explicit(&t->full, 1, memory_order_relaxed);
    return -1;
}

int
sp_alloc_table_remove(sp_alloc_table_t *t, uintptr_t addr,
    sp_alloc_live_t *out)
{
    size_t            i, h = home(t, addr);
    sp_alloc_slot_t  *s;
    uintptr_t         k;

    for (i = 0; i < t->probe_max; i++) {
        s = &t->slots[(h + i) & t->mask];
        k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == KEY_EMPTY) {
            return 0;
        }
        if (k != addr) {
            continue;
        }
        if (out != NULL) {
            *out = s->v;
        }
        /* Only the thread freeing addr removes it: the CAS cannot lose
         * to another remove of the same address. */
        if (!atomic_compare_exchange_strong_explicit(&s->key, &k,
                KEY_TOMBSTONE, memory_order_acq_rel, memory_order_relaxed))
        {
            return 0;
        }
        atomic_fetch_sub_explicit(
            &t->filter[sp_alloc_table_filter_index(t, addr)], 1,
            memory_order_relaxed);
        atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}

size_t
sp_alloc_table_each(sp_alloc_table_t *t,
    void (*cb)(uintptr_t addr, const sp_alloc_live_t *v, void *arg),
    void *arg)
{
    size_t            i, n = 0;
    sp_alloc_slot_t  *s;
    sp_alloc_live_t   copy;
    uintptr_t         k1, k2;
    uint32_t          q1, q2;

    for (i = 0; i <= t->mask; i++) {
        s = &t->slots[i];
        k1 = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k1 <= KEY_RESERVED) {
            continue;
        }
        q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        copy = s->v;
        atomic_thread_fence(memory_order_acquire);
        q2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
        k2 = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (q1 != q2 || (q1 & 1) || k1 != k2) {
            continue;       /* freed or refilled while we read it */
        }
        cb(k1, &copy, arg);
        n++;
    }
    return n;
}
