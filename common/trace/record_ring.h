#ifndef SP_RECORD_RING_H
#define SP_RECORD_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A bounded, preallocated multi-producer / single-consumer ring of
 * variable-length records in one byte buffer. A producer reserves exactly
 * the bytes its record needs (one compare-and-swap on the head), copies the
 * record in and commits it; it never blocks, locks or allocates, and a ring
 * without room refuses the record and counts a drop. Records are contiguous
 * (a record that would wrap leaves a padding record at the end), 8-byte
 * aligned, and read by the single consumer in reservation order: a record
 * reserved but not yet committed holds back the ones after it.
 *
 * Compared with fixed slots sized for the largest record, the memory a
 * producer writes is only what the record holds, written sequentially, and
 * the ring goes round (and stays in cache) several times faster.
 *
 * A ring made for one thread (producers and consumer never run at the same
 * time: nginx's worker builds spans and exports them on one event loop) does
 * the same without atomic read-modify-writes, which are full barriers on
 * x86 and wait for the record just written to reach the cache, and without
 * zeroing released bytes, which only serves concurrent producers; and when
 * it is empty far into its buffer, the next record goes to the start again
 * (a rewind), so a consumer that keeps up keeps the ring's bytes in cache.
 *
 * With concurrent producers the ring rewinds too, without touching the
 * tail (the consumer's alone): when the records it still holds all lie far
 * enough into the buffer (sp_record_ring_set_rewind) and are at most a
 * quarter of where they start (the consumer keeps up: while it lags the
 * ring goes on into its buffer, whose room a burst needs), a producer
 * reserves the rest of the buffer as a padding record and its own record
 * at the start, in one compare-and-swap, as a record that would wrap
 * does. The padding's room comes back when the consumer passes it (at its
 * next peek when it held nothing before it); its bytes are never written
 * nor zeroed, so the pages past that point (and a batch or two) stay
 * untouched while the consumer keeps up. sp_record_ring_rewinds() counts
 * the rewinds of both kinds of ring. */

typedef struct {
    size_t                          mask;
    unsigned char                  *buf;
    /* Consumer-private: where the last peek stopped. */
    uint64_t                        peek_pos;
    size_t                          peeked;
    /* Consumer-private: the last padding peeked that ends at the end of
     * the buffer, whose bytes past the header need no zeroing. */
    uint64_t                        pad_from;
    uint64_t                        pad_to;
    int                             one_thread; /* set at init */
    int                             external;   /* buf is the caller's */
    size_t                          rewind_at;  /* sp_record_ring_set_rewind */
    _Alignas(64) _Atomic uint64_t   head;       /* next byte to reserve */
    _Atomic uint64_t                committed;  /* records committed */
    _Atomic uint64_t                dropped;
    _Atomic uint64_t                rewound;    /* where the last rewind's
                                                   padding starts, or 0 */
    _Atomic uint64_t                rewinds;    /* counted on the rewind's
                                                   path only */
    _Alignas(64) _Atomic uint64_t   tail;       /* first byte not released */
    _Atomic uint64_t                consumed;   /* records released */
    /* Concurrent producers: where a release under way will move the tail
     * (0: none), stored before its bytes are zeroed, so that a consumer
     * taking over from one killed inside it finishes it
     * (sp_record_ring_consumer_reset). */
    _Atomic uint64_t                releasing_to;
} sp_record_ring_t;

/* capacity (bytes) rounds up to a power of two, at least 4 KiB;
 * one_thread: see above. */
int sp_record_ring_init(sp_record_ring_t *r, size_t capacity, int one_thread);
void sp_record_ring_free(sp_record_ring_t *r);

/* A ring with concurrent producers in the caller's memory: cap bytes (a
 * power of two, at least 4 KiB), zero, not touched here, and not freed by
 * sp_record_ring_free. The ring and its buffer may be in memory shared by
 * processes (producers in some, the consumer in another), mapped before
 * they fork: buf is an address, the same in all of them. -1 when cap is
 * not such a size. */
int sp_record_ring_init_in(sp_record_ring_t *r, void *buf, size_t cap);
/* Concurrent producers: the ring rewinds once the records it holds all lie
 * `bytes` or more into the buffer (by default a quarter of it; never less
 * than 64 KiB; never when it is the capacity or more). That is the room
 * the start has while the rewind's padding waits for the consumer: enough
 * for what producers queue until the consumer's next batch. */
void sp_record_ring_set_rewind(sp_record_ring_t *r, size_t bytes);

static inline size_t
sp_record_ring_capacity(const sp_record_ring_t *r)
{
    return r->mask + 1;
}

/* Producer: room for len bytes (8-byte aligned), or NULL when the ring is
 * full (counted). Every reservation must be committed. */
void *sp_record_ring_reserve(sp_record_ring_t *r, size_t len);
/* A record of up to len bytes (NULL when they do not fit, without counting
 * a drop), to be shrunk to its real length before it is committed: a
 * producer writes a record whose size it learns only at the end straight
 * into the ring. In a one-thread ring no other reservation may come in
 * between. With concurrent producers the bytes past the real length must
 * be left zero (as free space is): the head takes them back when no one
 * has reserved since, else they become a padding record the consumer
 * skips (and the ring holds them until it is released). */
void *sp_record_ring_reserve_upto(sp_record_ring_t *r, size_t len);
void sp_record_ring_shrink(sp_record_ring_t *r, void *rec, size_t len);

/* Producer: publishes a reserved record; returns how many committed records
 * wait (approximate, at least 1), so the caller can wake the consumer at a
 * batch. */
size_t sp_record_ring_commit(sp_record_ring_t *r, void *rec);

/* Producer: a record of about len bytes is coming soon: brings the bytes
 * where the next reservation will start toward the cache (a hint; with
 * concurrent producers another one may take them first). */
void sp_record_ring_prefetch(sp_record_ring_t *r, size_t len);

/* Free bytes (approximate: producers may be reserving meanwhile). */
size_t sp_record_ring_room(sp_record_ring_t *r);
/* Free bytes counting a rewind's padding (see above) as free before the
 * consumer passes it, as it does at its next batch: for a producer judging
 * how full the ring is, never for whether a record fits now. */
size_t sp_record_ring_room_unpadded(sp_record_ring_t *r);

/* Consumer: up to max committed records in order, without removing them;
 * a later peek continues after the records already returned. A peek when
 * none are held frees a padding it starts at (see above). */
size_t sp_record_ring_peek(sp_record_ring_t *r, void **out, size_t max);
/* Consumer: frees the first n records returned by peek (all of them, in
 * the order returned) and zeroes their bytes for the next round. */
void sp_record_ring_release(sp_record_ring_t *r, size_t n);

/* Consumer: where the last peek stopped; the records peeked up to now end
 * there. */
static inline uint64_t
sp_record_ring_mark(const sp_record_ring_t *r)
{
    return r->peek_pos;
}
/* Consumer: frees the first n records returned by peek, which end at mark
 * (taken after the peek that returned the last of them), without walking
 * them: a consumer that holds several peeks releases them in order. */
void sp_record_ring_release_to(sp_record_ring_t *r, size_t n, uint64_t mark);

/* Consumer: forgets the records peeked and not released: the next peek
 * returns them again (a consumer that could take only some of a peek). */
void sp_record_ring_unpeek(sp_record_ring_t *r);

/* Consumer, concurrent producers: a consumer taking over a shared ring
 * from one that is gone (a process killed or restarted): finishes a
 * release it was killed inside and forgets its peeks (what it peeked and
 * did not release is read again). */
void sp_record_ring_consumer_reset(sp_record_ring_t *r);

/* Consumer: where the next peek starts. */
uint64_t sp_record_ring_next(const sp_record_ring_t *r);

/* Consumer, concurrent producers: the next peek is held back by a record
 * that will never be committed, whose producer is gone (a process killed
 * between its reservation and its commit), and `end` is where that
 * reservation ended: the head a producer read after it was gone (a
 * process that took its place, at its start). The record, and whatever
 * the gone producer left up to `end`, becomes a padding record, zeroed.
 * 1 when there was such a record at sp_record_ring_next(), else 0 (the
 * record there is committed, or end is not past it). */
int sp_record_ring_seal(sp_record_ring_t *r, uint64_t end);

size_t sp_record_ring_pending(sp_record_ring_t *r);
uint64_t sp_record_ring_dropped(sp_record_ring_t *r);
/* Times the ring went back to the start of its buffer early (a rewind, in
 * either kind of ring; a record that would wrap is not one). */
uint64_t sp_record_ring_rewinds(sp_record_ring_t *r);

#endif
