#include <stdlib.h>

#include "common/profile/slot_ring.h"

/* Slot i is free for the producer that claims position p when seq[i] == p,
 * and readable by the consumer when seq[i] == p + 1. The sequence numbers
 * live apart from the slots so that a new ring touches few pages; the slots'
 * pages become resident as the ring first goes round. */

int
sp_slot_ring_init(sp_slot_ring_t *r, size_t capacity, size_t slot_size)
{
    size_t  n = 2, i;

    while (n < capacity) {
        n <<= 1;
    }
    r->mask = n - 1;
    r->slot_size = (slot_size + 15) & ~(size_t) 15;
    r->seq = calloc(n, sizeof(*r->seq));
    r->slots = calloc(n, r->slot_size);
    if (r->seq == NULL || r->slots == NULL) {
        sp_slot_ring_free(r);
        return -1;
    }
    for (i = 0; i < n; i++) {
        atomic_init(&r->seq[i], i);
    }
    atomic_init(&r->enqueue_pos, 0);
    atomic_init(&r->dequeue_pos, 0);
    atomic_init(&r->dropped, 0);
    return 0;
}

void
sp_slot_ring_free(sp_slot_ring_t *r)
{
    free((void *) r->seq);
    free(r->slots);
    r->seq = NULL;
    r->slots = NULL;
}

void *
sp_slot_ring_reserve(sp_slot_ring_t *r)
{
    size_t     pos, seq;
    ptrdiff_t  diff;

    pos = atomic_load_explicit(&r->enqueue_pos, memory_order_relaxed);
    for ( ;; ) {
        seq = atomic_load_explicit(&r->seq[pos & r->mask],
                                   memory_order_acquire);
        diff = (ptrdiff_t) seq - (ptrdiff_t) pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&r->enqueue_pos, &pos,
                    pos + 1, memory_order_relaxed, memory_order_relaxed))
            {
                return r->slots + (pos & r->mask) * r->slot_size;
            }
        } else if (diff < 0) {
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
            return NULL;
        } else {
            pos = atomic_load_explicit(&r->enqueue_pos, memory_order_relaxed);
        }
    }
}

size_t
sp_slot_ring_commit(sp_slot_ring_t *r, void *slot)
{
    size_t  i = (size_t) ((unsigned char *) slot - r->slots) / r->slot_size;
    size_t  seq = atomic_load_explicit(&r->seq[i], memory_order_relaxed);

    atomic_store_explicit(&r->seq[i], seq + 1, memory_order_release);
    return seq + 1 - atomic_load_explicit(&r->dequeue_pos,
                                          memory_order_relaxed);
}

size_t
sp_slot_ring_peek(sp_slot_ring_t *r, void **out, size_t max)
{
    size_t  pos = atomic_load_explicit(&r->dequeue_pos, memory_order_relaxed);
    size_t  n;

    for (n = 0; n < max && n <= r->mask; n++) {
        if (atomic_load_explicit(&r->seq[(pos + n) & r->mask],
                                 memory_order_acquire) != pos + n + 1)
        {
            break;
        }
        out[n] = r->slots + ((pos + n) & r->mask) * r->slot_size;
    }
    return n;
}

void
sp_slot_ring_release(sp_slot_ring_t *r, size_t n)
{
    size_t  pos = atomic_load_explicit(&r->dequeue_pos, memory_order_relaxed);
    size_t  i;

    for (i = 0; i < n; i++) {
        atomic_store_explicit(&r->seq[(pos + i) & r->mask],
                              pos + i + r->mask + 1, memory_order_release);
    }
    atomic_store_explicit(&r->dequeue_pos, pos + n, memory_order_relaxed);
}

size_t
sp_slot_ring_pending(sp_slot_ring_t *r)
{
    return atomic_load_explicit(&r->enqueue_pos, memory_order_relaxed)
           - atomic_load_explicit(&r->dequeue_pos, memory_order_relaxed);
}

uint64_t
sp_slot_ring_dropped(sp_slot_ring_t *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}
