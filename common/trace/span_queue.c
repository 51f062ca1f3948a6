#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace/record_ring.h"
#include "common/trace/span_queue.h"
#include "common/export/wire.h"

/* The span queue is a record ring whose records are encoded spans. */

/* A placed span's record: the ScopeSpans.spans tag and a two-byte length
 * (rewritten as one byte for a span under 128 bytes), then the Span. */
#define PLACE_HEAD  3
#define PLACE_MAX   (sizeof(sp_span_rec_t) + PLACE_HEAD + SP_SPAN_WIRE \
                     + SP_SPAN_REST_MAX)
_Static_assert(SP_SPAN_WIRE + SP_SPAN_REST_MAX < 16384,
               "a placed span's length fits two varint bytes");

struct sp_span_queue {
    sp_record_ring_t  ring;
    /* Counted here too: a span refused by sp_span_queue_has_room(). */
    _Atomic uint64_t  refused;
};

sp_span_queue_t *
sp_span_queue_create(size_t spans, int one_thread)
{
    sp_span_queue_t  *q = aligned_alloc(64, sizeof(*q));

    if (q == NULL) {
        return NULL;
    }
    atomic_init(&q->refused, 0);
    if (sp_record_ring_init(&q->ring, spans * SP_SPAN_QUEUE_BYTES_PER_SPAN,
                            one_thread)
        != 0)
    {
        free(q);
        return NULL;
    }
    return q;
}

/* The struct, then the buffer from the next page: its pages are touched
 * only as far as the ring is used. */
#define IN_HEAD  4096

size_t
sp_span_queue_footprint(size_t bytes)
{
    return IN_HEAD + bytes;
}

sp_span_queue_t *
sp_span_queue_init_in(void *mem, size_t bytes)
{
    sp_span_queue_t  *q = mem;

    _Static_assert(sizeof(sp_span_queue_t) <= IN_HEAD, "head fits");
    if (sp_record_ring_init_in(&q->ring, (unsigned char *) mem + IN_HEAD,
                               bytes)
        != 0)
    {
        return NULL;
    }
    atomic_init(&q->refused, 0);
    return q;
}

void
sp_span_queue_destroy(sp_span_queue_t *q)
{
    if (q != NULL) {
        sp_record_ring_free(&q->ring);
        free(q);
    }
}

void
sp_span_queue_set_batch(sp_span_queue_t *q, size_t spans)
{
    /* The room left at the start while a rewind's padding waits for the
     * consumer's next batch: what producers queue meanwhile is at most
     * about a batch, and typical spans are under half their budget. */
    sp_record_ring_set_rewind(&q->ring,
                              2 * spans * SP_SPAN_QUEUE_BYTES_PER_SPAN);
}

size_t
sp_span_queue_bytes(const sp_span_queue_t *q)
{
    return sp_record_ring_capacity(&q->ring);
}

int
sp_span_queue_has_room(sp_span_queue_t *q)
{
    if (sp_record_ring_room(&q->ring) >= SP_SPAN_QUEUE_BYTES_PER_SPAN) {
        return 1;
    }
    sp_span_queue_refuse(q);
    return 0;
}

void
sp_span_queue_refuse(sp_span_queue_t *q)
{
    /* With the collector down this runs for every request. */
    if (q->ring.one_thread) {
        atomic_store_explicit(&q->refused,
            atomic_load_explicit(&q->refused, memory_order_relaxed) + 1,
            memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&q->refused, 1, memory_order_relaxed);
    }
}

size_t
sp_span_queue_push(sp_span_queue_t *q, const sp_span_t *span)
{
    sp_span_rec_t  *rec;
    size_t          n = sp_span_encoded_size(span);
    size_t          len = sp_wire_lsize(n);
    uint8_t        *p;

    rec = sp_record_ring_reserve(&q->ring, sizeof(*rec) + len);
    if (rec == NULL) {
        return 0;
    }
    rec->len = (uint32_t) len;
    p = rec->data;
    *p++ = SP_TAG(2, SP_WT_LEN);            /* ScopeSpans.spans */
    p = sp_wire_varint(p, n);
    sp_span_encode(span, p);
    return sp_record_ring_commit(&q->ring, rec);
}

int
sp_span_queue_push_record(sp_span_queue_t *q, const sp_span_rec_t *rec)
{
    size_t          n = sizeof(*rec) + rec->len;
    sp_span_rec_t  *to = sp_record_ring_reserve_upto(&q->ring, n);

    if (to == NULL) {
        return 0;
    }
    memcpy(to, rec, n);
    (void) sp_record_ring_commit(&q->ring, to);
    return 1;
}

uint8_t *
sp_span_queue_place(sp_span_queue_t *q)
{
    sp_span_rec_t  *rec;

    /* With concurrent producers a slot reserved while another producer
     * reserves after it cannot give its unused end back before the
     * consumer releases it: slots are taken only while the ring is less
     * than half full, so that such ends never crowd out spans. A
     * rewind's padding (record_ring.h) is not counted: the consumer frees
     * it at its next batch, and slots are what it rewinds for. */
    if (!q->ring.one_thread
        && sp_record_ring_room_unpadded(&q->ring)
           < sp_record_ring_capacity(&q->ring) / 2)
    {
        return NULL;
    }
    rec = sp_record_ring_reserve_upto(&q->ring, PLACE_MAX);
    return rec != NULL ? rec->data + PLACE_HEAD : NULL;
}

void
sp_span_queue_prefetch(sp_span_queue_t *q)
{
    sp_record_ring_prefetch(&q->ring, 512);
}

size_t
sp_span_queue_commit_placed(sp_span_queue_t *q, const sp_span_t *span)
{
    /* The slot, from where its attributes went (several producers may
     * have one open at once). */
    sp_span_rec_t  *rec = (sp_span_rec_t *) (void *)
                          (span->wire - PLACE_HEAD
                           - offsetof(sp_span_rec_t, data));
    uint8_t        *end = sp_span_encode_rest(span,
                                              span->wire + span->wire_used);
    size_t          n = (size_t) (end - span->wire);

    rec->data[0] = SP_TAG(2, SP_WT_LEN);            /* ScopeSpans.spans */
    if (n < 128) {
        rec->data[1] = (uint8_t) n;
        memmove(rec->data + 2, rec->data + PLACE_HEAD, n);
        rec->len = (uint32_t) (2 + n);
        /* With concurrent producers nothing may stay written past the
         * record (sp_record_ring_shrink): the byte it moved from. */
        rec->data[2 + n] = 0;
    } else {
        rec->data[1] = (uint8_t) (n | 0x80);
        rec->data[2] = (uint8_t) (n >> 7);
        rec->len = (uint32_t) (PLACE_HEAD + n);
    }
    sp_record_ring_shrink(&q->ring, rec, sizeof(*rec) + rec->len);
    return sp_record_ring_commit(&q->ring, rec);
}

size_t
sp_span_queue_peek(sp_span_queue_t *q, const sp_span_rec_t **out,
    size_t max)
{
    return sp_record_ring_peek(&q->ring, (void **) out, max);
}

void
sp_span_queue_release(sp_span_queue_t *q, size_t n)
{
    sp_record_ring_release(&q->ring, n);
}

uint64_t
sp_span_queue_mark(const sp_span_queue_t *q)
{
    return sp_record_ring_mark(&q->ring);
}

void
sp_span_queue_release_to(sp_span_queue_t *q, size_t n, uint64_t mark)
{
    sp_record_ring_release_to(&q->ring, n, mark);
}

void
sp_span_queue_unpeek(sp_span_queue_t *q)
{
    sp_record_ring_unpeek(&q->ring);
}

void
sp_span_queue_consumer_reset(sp_span_queue_t *q)
{
    sp_record_ring_consumer_reset(&q->ring);
}

uint64_t
sp_span_queue_next(const sp_span_queue_t *q)
{
    return sp_record_ring_next(&q->ring);
}

int
sp_span_queue_seal(sp_span_queue_t *q, uint64_t end)
{
    return sp_record_ring_seal(&q->ring, end);
}

uint64_t
sp_span_queue_head(const sp_span_queue_t *q)
{
    return atomic_load_explicit(&((sp_span_queue_t *) q)->ring.head,
                                memory_order_acquire);
}

size_t
sp_span_queue_pending(const sp_span_queue_t *q)
{
    return sp_record_ring_pending((sp_record_ring_t *) &q->ring);
}

uint64_t
sp_span_queue_dropped(const sp_span_queue_t *q)
{
    return sp_record_ring_dropped((sp_record_ring_t *) &q->ring)
           + atomic_load_explicit(&((sp_span_queue_t *) q)->refused,
                                  memory_order_relaxed);
}

uint64_t
sp_span_queue_committed(const sp_span_queue_t *q)
{
    return atomic_load_explicit(&((sp_span_queue_t *) q)->ring.committed,
                                memory_order_relaxed);
}

uint64_t
sp_span_queue_rewinds(const sp_span_queue_t *q)
{
    return sp_record_ring_rewinds((sp_record_ring_t *) &q->ring);
}
