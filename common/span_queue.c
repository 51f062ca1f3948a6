#include <stdlib.h>

#include "slot_ring.h"
#include "span_queue.h"

/* The span queue is a slot ring whose slots are span records. */

struct sp_span_queue {
    sp_slot_ring_t  ring;
};

sp_span_queue_t *
sp_span_queue_create(size_t capacity)
{
    sp_span_queue_t  *q = aligned_alloc(64, sizeof(*q));

    if (q == NULL) {
        return NULL;
    }
    if (sp_slot_ring_init(&q->ring, capacity, sizeof(sp_span_t)) != 0) {
        free(q);
        return NULL;
    }
    return q;
}

void
sp_span_queue_destroy(sp_span_queue_t *q)
{
    if (q != NULL) {
        sp_slot_ring_free(&q->ring);
        free(q);
    }
}

size_t
sp_span_queue_capacity(const sp_span_queue_t *q)
{
    return sp_slot_ring_capacity(&q->ring);
}

sp_span_t *
sp_span_queue_reserve(sp_span_queue_t *q)
{
    return sp_slot_ring_reserve(&q->ring);
}

size_t
sp_span_queue_commit(sp_span_queue_t *q, sp_span_t *slot)
{
    return sp_slot_ring_commit(&q->ring, slot);
}

size_t
sp_span_queue_peek(sp_span_queue_t *q, sp_span_t **out, size_t max)
{
    return sp_slot_ring_peek(&q->ring, (void **) out, max);
}

void
sp_span_queue_release(sp_span_queue_t *q, size_t n)
{
    sp_slot_ring_release(&q->ring, n);
}

size_t
sp_span_queue_pending(const sp_span_queue_t *q)
{
    return sp_slot_ring_pending((sp_slot_ring_t *) &q->ring);
}

uint64_t
sp_span_queue_dropped(const sp_span_queue_t *q)
{
    return sp_slot_ring_dropped((sp_slot_ring_t *) &q->ring);
}
