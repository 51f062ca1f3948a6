#ifndef SP_SPAN_QUEUE_H
#define SP_SPAN_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/span.h"

/* A bounded, preallocated multi-producer / single-consumer queue of span
 * records: a record ring (record_ring.h) holding each span already encoded.
 * Producers never block, lock or allocate: a push writes the encoded span
 * straight into the ring, or drops and counts it when there is no room.
 * The consumer (the exporter) reads committed spans in order and
 * releases them. */

/* The bytes a span is budgeted in the queue: a typical encoded server span
 * (15 attributes, a short URL) takes 350 to 600. */
#define SP_SPAN_QUEUE_BYTES_PER_SPAN  1024

/* A queued span: the ScopeSpans.spans field (tag, length, Span message),
 * `len` bytes, ready to be concatenated into an ExportTraceServiceRequest. */
typedef struct {
    uint32_t  len;
    uint8_t   data[];
} sp_span_rec_t;

typedef struct sp_span_queue sp_span_queue_t;

/* Room for about `spans` spans (bytes rounded up to a power of two); NULL
 * on allocation failure. one_thread: spans are pushed and taken by one
 * thread only (see record_ring.h). */
sp_span_queue_t *sp_span_queue_create(size_t spans, int one_thread);
void sp_span_queue_destroy(sp_span_queue_t *q);

/* A queue for concurrent producers in the caller's memory, which may be
 * shared by processes (record_ring.h, sp_record_ring_init_in): `mem` holds
 * sp_span_queue_footprint(bytes) bytes, zero, 64-byte aligned; bytes a
 * power of two, at least 4 KiB. Not freed by sp_span_queue_destroy (never
 * call it on one). NULL when bytes is not such a size. */
size_t sp_span_queue_footprint(size_t bytes);
sp_span_queue_t *sp_span_queue_init_in(void *mem, size_t bytes);
/* The consumer takes spans in batches of up to `spans` (or sooner, on a
 * timer): with concurrent producers the queue rewinds to the start of its
 * buffer once the spans it holds are two batches (of 1 KiB spans) in,
 * instead of a quarter of it (record_ring.h). */
void sp_span_queue_set_batch(sp_span_queue_t *q, size_t spans);
size_t sp_span_queue_bytes(const sp_span_queue_t *q);

/* Producer: whether a span of a typical size would fit now (so a caller
 * can skip building a span that would be dropped). */
int sp_span_queue_has_room(sp_span_queue_t *q);

/* Counts a span that was not queued for another reason than room. */
void sp_span_queue_refuse(sp_span_queue_t *q);
/* Producer: encodes the span into the queue. Returns the number of committed spans
 * waiting (approximate, at least 1), or 0 when the queue is full (counted
 * as a drop). */
size_t sp_span_queue_push(sp_span_queue_t *q, const sp_span_t *span);

/* Producer: a span already encoded (a record another queue's consumer
 * peeked), copied in. 1, or 0 when it does not fit now (not counted as a
 * drop: the caller keeps it). */
int sp_span_queue_push_record(sp_span_queue_t *q, const sp_span_rec_t *rec);

/* Producer: a slot for a span built in place, sized for the largest span.
 * Returns where its attributes go (for span->place before sp_span_init),
 * or NULL when the largest span does not fit (with concurrent producers:
 * when the queue is half full; then build it elsewhere and push it; no
 * drop is counted). In a one-thread queue a placed span must be committed
 * before anything else is queued; with concurrent producers it holds back
 * the consumer until it is committed, and nothing may be written in the
 * slot past the span (span.h keeps to this). */
uint8_t *sp_span_queue_place(sp_span_queue_t *q);
/* Producer: a span is coming soon: brings the bytes its slot will take
 * (about a typical span's) toward the cache. */
void sp_span_queue_prefetch(sp_span_queue_t *q);
/* Producer: completes and queues the span built at the place above; as
 * sp_span_queue_push() but never 0. */
size_t sp_span_queue_commit_placed(sp_span_queue_t *q, const sp_span_t *span);

/* Consumer: up to max committed spans in order, without removing them;
 * the next peek continues after them. */
size_t sp_span_queue_peek(sp_span_queue_t *q, const sp_span_rec_t **out,
    size_t max);
/* Consumer: frees the first n spans returned by peek. */
void sp_span_queue_release(sp_span_queue_t *q, size_t n);

/* Consumer: where the last peek ended, and a release of the first n spans
 * peeked, which end at such a mark (record_ring.h). */
uint64_t sp_span_queue_mark(const sp_span_queue_t *q);
void sp_span_queue_release_to(sp_span_queue_t *q, size_t n, uint64_t mark);

/* Consumer, a shared queue (record_ring.h): the peeks not released read
 * again; a consumer taking over from one that is gone; where the next peek
 * starts; a record held back by a producer that is gone, turned into a
 * padding up to end (1 when there was one). */
void sp_span_queue_unpeek(sp_span_queue_t *q);
void sp_span_queue_consumer_reset(sp_span_queue_t *q);
uint64_t sp_span_queue_next(const sp_span_queue_t *q);
int sp_span_queue_seal(sp_span_queue_t *q, uint64_t end);
/* Where the next span will be reserved: a producer's start, for seal. */
uint64_t sp_span_queue_head(const sp_span_queue_t *q);

size_t sp_span_queue_pending(const sp_span_queue_t *q);
uint64_t sp_span_queue_dropped(const sp_span_queue_t *q);
/* Spans queued since the queue was made. */
uint64_t sp_span_queue_committed(const sp_span_queue_t *q);
/* Times the queue went back to the start of its buffer (record_ring.h). */
uint64_t sp_span_queue_rewinds(const sp_span_queue_t *q);

#endif
