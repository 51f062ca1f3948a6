#ifndef SP_SLOT_RING_H
#define SP_SLOT_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A bounded, preallocated multi-producer / single-consumer ring of
 * fixed-size slots (Dmitry Vyukov's bounded queue with per-slot sequence
 * numbers). Producers reserve a slot, fill it in place and commit it; they
 * never block, lock or allocate, so a signal handler may produce (the atomics
 * used are lock-free on every target we build for). A full ring refuses the
 * slot and counts a drop. The single consumer reads committed slots in order
 * and releases them. The span queue and the sample ring are both this. */

typedef struct {
    size_t               mask;
    size_t               slot_size;
    _Atomic size_t      *seq;
    unsigned char       *slots;
    _Alignas(64) _Atomic size_t    enqueue_pos;
    _Alignas(64) _Atomic size_t    dequeue_pos;
    _Atomic uint64_t               dropped;
} sp_slot_ring_t;

/* capacity rounds up to a power of two; slot_size to 16 bytes. */
int sp_slot_ring_init(sp_slot_ring_t *r, size_t capacity, size_t slot_size);
void sp_slot_ring_free(sp_slot_ring_t *r);

static inline size_t
sp_slot_ring_capacity(const sp_slot_ring_t *r)
{
    return r->mask + 1;
}

void *sp_slot_ring_reserve(sp_slot_ring_t *r);
/* Returns how many committed slots wait (approximate). */
size_t sp_slot_ring_commit(sp_slot_ring_t *r, void *slot);
/* Up to max committed slots in order, without removing them. */
size_t sp_slot_ring_peek(sp_slot_ring_t *r, void **out, size_t max);
void sp_slot_ring_release(sp_slot_ring_t *r, size_t n);
size_t sp_slot_ring_pending(sp_slot_ring_t *r);
uint64_t sp_slot_ring_dropped(sp_slot_ring_t *r);

#endif
