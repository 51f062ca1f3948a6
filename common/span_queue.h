#ifndef SP_SPAN_QUEUE_H
#define SP_SPAN_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "span.h"

/* A bounded, preallocated multi-producer / single-consumer queue of span
 * records (a ring of slots with per-slot sequence numbers). Producers never
 * block, lock or allocate: they reserve a slot, fill it in place, commit it.
 * When every slot is taken the span is dropped and counted. The consumer
 * (the exporter thread) reads committed slots in order and releases them. */

typedef struct sp_span_queue sp_span_queue_t;

/* capacity is rounded up to a power of two; NULL on allocation failure. */
sp_span_queue_t *sp_span_queue_create(size_t capacity);
void sp_span_queue_destroy(sp_span_queue_t *q);
size_t sp_span_queue_capacity(const sp_span_queue_t *q);

/* Producer: a slot to fill, or NULL when full (counted as a drop). */
sp_span_t *sp_span_queue_reserve(sp_span_queue_t *q);
/* Producer: publishes a reserved slot; returns the number of committed spans
 * waiting (approximate), so the caller can wake the consumer at a batch. */
size_t sp_span_queue_commit(sp_span_queue_t *q, sp_span_t *slot);

/* Consumer: up to max committed spans in order, without removing them. */
size_t sp_span_queue_peek(sp_span_queue_t *q, sp_span_t **out, size_t max);
/* Consumer: frees the first n spans returned by the last peek. */
void sp_span_queue_release(sp_span_queue_t *q, size_t n);

size_t sp_span_queue_pending(const sp_span_queue_t *q);
uint64_t sp_span_queue_dropped(const sp_span_queue_t *q);

#endif
