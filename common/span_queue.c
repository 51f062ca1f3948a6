#include <stdatomic.h>
#include <stdlib.h>

#include "span_queue.h"

/* A bounded MPSC ring after Dmitry Vyukov's MPMC queue: slot i is free for
 * the producer that claims position p when seq[i] == p, and readable by the
 * consumer when seq[i] == p + 1. The sequence numbers live apart from the
 * span records so that a new queue touches only a few pages; the records'
 * pages become resident as the ring first goes round. */

struct sp_span_queue {
    size_t                  mask;
    _Atomic size_t         *seq;
    sp_span_t              *spans;
    /* Producers and the consumer write different lines. */
    _Alignas(64) _Atomic size_t    enqueue_pos;
    _Alignas(64) _Atomic size_t    dequeue_pos;
    _Atomic uint64_t               dropped;
};

sp_span_queue_t *
sp_span_queue_create(size_t capacity)
{
    sp_span_queue_t  *q;
    size_t            n = 2, i;

    while (n < capacity) {
        n <<= 1;
    }
    q = aligned_alloc(64, sizeof(*q));
    if (q == NULL) {
        return NULL;
    }
    q->mask = n - 1;
    q->seq = calloc(n, sizeof(*q->seq));
    q->spans = calloc(n, sizeof(*q->spans));
    if (q->seq == NULL || q->spans == NULL) {
        free((void *) q->seq);
        free(q->spans);
        free(q);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        atomic_init(&q->seq[i], i);
    }
    atomic_init(&q->enqueue_pos, 0);
    atomic_init(&q->dequeue_pos, 0);
    atomic_init(&q->dropped, 0);
    return q;
}

void
sp_span_queue_destroy(sp_span_queue_t *q)
{
    if (q != NULL) {
        free((void *) q->seq);
        free(q->spans);
        free(q);
    }
}

size_t
sp_span_queue_capacity(const sp_span_queue_t *q)
{
    return q->mask + 1;
}

sp_span_t *
sp_span_queue_reserve(sp_span_queue_t *q)
{
    size_t     pos, seq;
    ptrdiff_t  diff;

    pos = atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed);
    for ( ;; ) {
        seq = atomic_load_explicit(&q->seq[pos & q->mask],
                                   memory_order_acquire);
        diff = (ptrdiff_t) seq - (ptrdiff_t) pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->enqueue_pos, &pos,
                    pos + 1, memory_order_relaxed, memory_order_relaxed))
            {
                return &q->spans[pos & q->mask];
            }
        } else if (diff < 0) {
            atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
            return NULL;
        } else {
            pos = atomic_load_explicit(&q->enqueue_pos, memory_order_relaxed);
        }
    }
}

size_t
sp_span_queue_commit(sp_span_queue_t *q, sp_span_t *slot)
{
    size_t  i = (size_t) (slot - q->spans);
    size_t  seq = atomic_load_explicit(&q->seq[i], memory_order_relaxed);

    atomic_store_explicit(&q->seq[i], seq + 1, memory_order_release);
    return seq + 1 - atomic_load_explicit(&q->dequeue_pos,
                                          memory_order_relaxed);
}

size_t
sp_span_queue_peek(sp_span_queue_t *q, sp_span_t **out, size_t max)
{
    size_t  pos = atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
    size_t  n;

    for (n = 0; n < max && n <= q->mask; n++) {
        if (atomic_load_explicit(&q->seq[(pos + n) & q->mask],
                                 memory_order_acquire) != pos + n + 1)
        {
            break;
        }
        out[n] = &q->spans[(pos + n) & q->mask];
    }
    return n;
}

void
sp_span_queue_release(sp_span_queue_t *q, size_t n)
{
    size_t  pos = atomic_load_explicit(&q->dequeue_pos, memory_order_relaxed);
    size_t  i;

    for (i = 0; i < n; i++) {
        atomic_store_explicit(&q->seq[(pos + i) & q->mask],
                              pos + i + q->mask + 1, memory_order_release);
    }
    atomic_store_explicit(&q->dequeue_pos, pos + n, memory_order_relaxed);
}

size_t
sp_span_queue_pending(const sp_span_queue_t *q)
{
    sp_span_queue_t  *m = (sp_span_queue_t *) q;

    return atomic_load_explicit(&m->enqueue_pos, memory_order_relaxed)
           - atomic_load_explicit(&m->dequeue_pos, memory_order_relaxed);
}

uint64_t
sp_span_queue_dropped(const sp_span_queue_t *q)
{
    sp_span_queue_t  *m = (sp_span_queue_t *) q;

    return atomic_load_explicit(&m->dropped, memory_order_relaxed);
}
