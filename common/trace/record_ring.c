#include <string.h>
#include <sys/mman.h>

#include "common/base/prefetch.h"
#include "common/trace/record_ring.h"

/* Each record starts with one 8-byte header word: the record's length in
 * bytes (header included, a multiple of 8) with flags in the low bits.
 * Released bytes are zeroed, so a header word the consumer finds without
 * COMMITTED belongs to a record still being written (or to free space). */

#define HDR        8u
#define COMMITTED  1u
#define PAD        2u
#define LEN_MASK   (~(uint64_t) 7)

/* How far ahead of its walk a peek asks for the records' lines: about ten
 * spans, the lines a memory latency takes to walk over. */
#define PEEK_AHEAD  4096u

/* An empty one-thread ring is rewound to its start once this far in (or
 * half way, in a smaller ring). */
#define REWIND_MIN  (64 * 1024)

/* With concurrent producers a rewind leaves the rest of the buffer as a
 * padding record, which holds its room until the consumer passes it (at
 * its next batch): the start must then have room for what producers queue
 * meanwhile. By default a quarter of the ring (the span queue sets two
 * batches: sp_span_queue_set_batch). Never less than REWIND_MIN: a ring of
 * 64 KiB or less does not rewind. */
#define MP_REWIND(cap)  ((cap) / 4 > REWIND_MIN ? (cap) / 4 : REWIND_MIN)

static inline _Atomic uint64_t *
word_at(sp_record_ring_t *r, uint64_t pos)
{
    return (_Atomic uint64_t *) (void *) (r->buf + (pos & r->mask));
}

/* Adds v to a counter: one thread needs no locked instruction. */
static inline uint64_t
counter_add(sp_record_ring_t *r, _Atomic uint64_t *c, uint64_t v)
{
    uint64_t  n;

    if (r->one_thread) {
        n = atomic_load_explicit(c, memory_order_relaxed);
        atomic_store_explicit(c, n + v, memory_order_relaxed);
        return n;
    }
    return atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

int
sp_record_ring_init(sp_record_ring_t *r, size_t capacity, int one_thread)
{
    size_t  cap = 4096;

    while (cap < capacity) {
        cap <<= 1;
    }
    memset(r, 0, sizeof(*r));
    /* Zeroed by the kernel and not touched here: a worker's memory grows
     * only as far as the ring is used. */
    r->buf = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r->buf == MAP_FAILED) {
        r->buf = NULL;
        return -1;
    }
    r->mask = cap - 1;
    r->one_thread = one_thread;
    r->rewind_at = MP_REWIND(cap);
    return 0;
}

int
sp_record_ring_init_in(sp_record_ring_t *r, void *buf, size_t cap)
{
    if (cap < 4096 || (cap & (cap - 1)) != 0) {
        return -1;
    }
    memset(r, 0, sizeof(*r));
    r->buf = buf;
    r->external = 1;
    r->mask = cap - 1;
    r->rewind_at = MP_REWIND(cap);
    return 0;
}

void
sp_record_ring_set_rewind(sp_record_ring_t *r, size_t bytes)
{
    r->rewind_at = bytes < REWIND_MIN ? REWIND_MIN : bytes;
}

void
sp_record_ring_free(sp_record_ring_t *r)
{
    if (r->buf != NULL) {
        if (!r->external) {
            munmap(r->buf, r->mask + 1);
        }
        r->buf = NULL;
    }
}

static void *
reserve(sp_record_ring_t *r, size_t len, int count_drop)
{
    uint64_t  total = HDR + ((len + 7) & ~(size_t) 7);
    uint64_t  cap = r->mask + 1, h, t, off, contig, need;
    int       rewind;

    /* A record plus the padding before it always fits an empty ring. */
    if (total > cap / 2) {
        if (count_drop) {
            (void) counter_add(r, &r->dropped, 1);
        }
        return NULL;
    }
    h = atomic_load_explicit(&r->head, memory_order_relaxed);
    for ( ;; ) {
        off = h & r->mask;
        contig = cap - off;
        t = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (t > h) {
            /* The head read is stale: others reserved, committed and were
             * released meanwhile. Not a full ring. */
            h = atomic_load_explicit(&r->head, memory_order_relaxed);
            continue;
        }
        /* A ring far into its buffer starts again at the beginning (a
         * rewind): while the consumer keeps up, producers rewrite the same
         * (cached) bytes instead of walking the whole buffer. One thread:
         * when the ring is empty, by moving the tail. With concurrent
         * producers and a consumer, moving the tail from a producer raced
         * with the consumer's own tail stores (the concurrent unit test
         * lost and mangled records, 3 runs in 40), so they pad instead. */
        if (r->one_thread) {
            rewind = h == t && off >= total
                     && off >= (cap / 2 < REWIND_MIN ? cap / 2 : REWIND_MIN);
        } else {
            /* Concurrent producers: the rest of the buffer becomes a
             * padding record and this record goes to the start, reserved
             * in the same compare-and-swap as a wrap's. Done when the
             * records still held (head - tail) all lie rewind_at or more
             * into this round of the buffer, not only when the ring is
             * empty: under load a batch is in flight while requests go
             * on, so an Apache child's ring is seldom empty when it
             * reserves. */
            int64_t  held_from = (int64_t) off - (int64_t) (h - t);

            /* held_from: where the records held start in this round of
             * the buffer (negative when they wrap round its end), which
             * is the room the start has until the consumer passes the
             * padding, after reading the records held: they must be at
             * most a quarter of it (producers may go on up to four times
             * as fast as the consumer meanwhile). A consumer that lags (a
             * burst, a slow collector) would otherwise leave producers
             * only the start for as long as it reads all it holds, and
             * spans the rest of the buffer had room for were dropped: the
             * real-server test (t/71-apache-queue-rewind.t) dropped 581 of
             * 3,000 in a 16 MiB queue without this test, 392 of 2,000 with
             * half instead of a quarter. While it lags the ring goes on
             * into its buffer, as it did before rewinds. */
            rewind = held_from >= (int64_t) r->rewind_at
                     && held_from >= (int64_t) total
                     && held_from >= (int64_t) (4 * (h - t));
        }
        need = total <= contig && !rewind ? total : contig + total;
        if (h + need - t > cap) {
            if (count_drop) {
                (void) counter_add(r, &r->dropped, 1);
            }
            return NULL;
        }
        if (r->one_thread) {
            atomic_store_explicit(&r->head, h + need, memory_order_relaxed);
            break;
        }
        if (atomic_compare_exchange_weak_explicit(&r->head, &h, h + need,
                memory_order_relaxed, memory_order_relaxed))
        {
            break;
        }
    }
    if (rewind && r->one_thread) {
        /* Nothing to read or release before the start: the tail moves
         * there at once (the consumer is this thread, not running now). */
        atomic_store_explicit(&r->tail, h + contig, memory_order_release);
        (void) counter_add(r, &r->rewinds, 1);
        h += contig;
    } else if (need != total) {
        if (rewind) {
            /* Told to sp_record_ring_room_unpadded() before the consumer
             * can pass the padding (its header is a release store). */
            atomic_store_explicit(&r->rewound, h, memory_order_relaxed);
            (void) counter_add(r, &r->rewinds, 1);
        }
        /* The tail end of the buffer becomes a committed padding record.
         * Its bytes past the header were free, so zero, and are never
         * written: the consumer clears only its header word. */
        atomic_store_explicit(word_at(r, h), contig | PAD | COMMITTED,
                              memory_order_release);
        h += contig;
    }
    atomic_store_explicit(word_at(r, h), total, memory_order_relaxed);
    return r->buf + (h & r->mask) + HDR;
}

void *
sp_record_ring_reserve(sp_record_ring_t *r, size_t len)
{
    return reserve(r, len, 1);
}

void *
sp_record_ring_reserve_upto(sp_record_ring_t *r, size_t len)
{
    return reserve(r, len, 0);
}

void
sp_record_ring_shrink(sp_record_ring_t *r, void *rec, size_t len)
{
    _Atomic uint64_t  *w = (_Atomic uint64_t *) (void *)
                           ((unsigned char *) rec - HDR);
    uint64_t           old = atomic_load_explicit(w, memory_order_relaxed);
    uint64_t           total = HDR + ((len + 7) & ~(size_t) 7);
    uint64_t           h, end;

    if (total >= old) {
        return;
    }
    h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (r->one_thread) {
        /* The last record reserved: the head was just past it. */
        atomic_store_explicit(&r->head, h - (old - total),
                              memory_order_relaxed);
        atomic_store_explicit(w, total, memory_order_relaxed);
        return;
    }
    /* Concurrent producers. While no one has reserved after the record
     * the head is just past it, and gives the rest back. (The head cannot
     * be a whole ring further on: the tail waits for this record.) A
     * consumer that read the older head finds the first word past the
     * record zero, as free space is, since the producer wrote nothing
     * there. */
    end = (unsigned char *) rec - HDR - r->buf + old;
    if ((h & r->mask) == (end & r->mask)
        && atomic_compare_exchange_strong_explicit(&r->head, &h,
               h - (old - total), memory_order_relaxed, memory_order_relaxed))
    {
        atomic_store_explicit(w, total, memory_order_relaxed);
        return;
    }
    /* Others have reserved after it: the rest becomes a committed padding
     * record, published with the record (its commit is a release store).
     * Its bytes were never written, so they are still zero, and its
     * release clears only its header word. */
    atomic_store_explicit(word_at(r, (uint64_t) ((unsigned char *) w
                                                 - r->buf) + total),
                          (old - total) | PAD | COMMITTED,
                          memory_order_relaxed);
    atomic_store_explicit(w, total, memory_order_relaxed);
}

size_t
sp_record_ring_commit(sp_record_ring_t *r, void *rec)
{
    _Atomic uint64_t  *w = (_Atomic uint64_t *) (void *)
                           ((unsigned char *) rec - HDR);
    uint64_t           total, n, c;

    total = atomic_load_explicit(w, memory_order_relaxed);
    atomic_store_explicit(w, total | COMMITTED, memory_order_release);
    n = counter_add(r, &r->committed, 1) + 1;
    c = atomic_load_explicit(&r->consumed, memory_order_relaxed);
    /* The consumer may already have taken this record (and others whose
     * producers have not counted them yet): never 0 or a wrapped value. */
    return n > c ? (size_t) (n - c) : 1;
}

void
sp_record_ring_prefetch(sp_record_ring_t *r, size_t len)
{
    uint64_t  off = atomic_load_explicit(&r->head, memory_order_relaxed)
                    & r->mask;

    sp_prefetch_for_write(r->buf + off,
                          r->buf + (off + len > r->mask + 1 ? r->mask + 1
                                                            : off + len));
}

size_t
sp_record_ring_room(sp_record_ring_t *r)
{
    uint64_t  h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t  t = atomic_load_explicit(&r->tail, memory_order_relaxed);

    return h - t >= r->mask + 1 ? 0 : (size_t) (r->mask + 1 - (h - t));
}

size_t
sp_record_ring_room_unpadded(sp_record_ring_t *r)
{
    uint64_t  h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t  t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t  p = atomic_load_explicit(&r->rewound, memory_order_relaxed);
    uint64_t  used = h - t, pad;

    /* A padding the tail has not passed yet (a rewind's is never at 0). */
    if (p != 0 && p >= t) {
        pad = (p | r->mask) + 1 - p;
        used = used > pad ? used - pad : 0;
    }
    return used >= r->mask + 1 ? 0 : (size_t) (r->mask + 1 - used);
}

size_t
sp_record_ring_peek(sp_record_ring_t *r, void **out, size_t max)
{
    uint64_t  pos, w, h, pf, ahead;
    size_t    n = 0;

    pos = r->peeked == 0 ? atomic_load_explicit(&r->tail, memory_order_relaxed)
                         : r->peek_pos;
    /* Never past the head: in a full ring the word there is the first
     * record's, still committed. */
    h = atomic_load_explicit(&r->head, memory_order_acquire);
    if (r->peeked == 0 && !r->one_thread && pos < h) {
        /* Nothing held, and a padding first (a rewind on an idle ring's
         * or a wrap's): the tail passes it now, not when the batch after
         * it is released, so that its room comes back while that batch is
         * sent: a rewind on an idle ring otherwise leaves producers only
         * the start for as long as that first post takes, however long
         * the collector is to answer. Its bytes past the header were
         * never written. */
        w = atomic_load_explicit(word_at(r, pos), memory_order_acquire);
        if ((w & (COMMITTED | PAD)) == (COMMITTED | PAD)) {
            atomic_store_explicit(&r->releasing_to, pos + (w & LEN_MASK),
                                  memory_order_relaxed);
            atomic_store_explicit(word_at(r, pos), 0, memory_order_relaxed);
            pos += w & LEN_MASK;
            atomic_store_explicit(&r->tail, pos, memory_order_release);
            atomic_store_explicit(&r->releasing_to, 0, memory_order_relaxed);
        }
    }
    /* The records were written a batch ago and have left the nearer
     * caches, and each step of the walk waits for the header the last one
     * pointed to: every line up to PEEK_AHEAD bytes ahead is asked for,
     * each once, so that the headers (and the bytes the sender copies
     * next) are near when reached. Prefetching any address is harmless. */
    pf = pos & ~(uint64_t) 63;
    while (n < max && pos < h) {
        ahead = pos + PEEK_AHEAD < h ? pos + PEEK_AHEAD : h;
        for ( ; pf < ahead; pf += 64) {
            __builtin_prefetch(r->buf + (pf & r->mask));
        }
        w = atomic_load_explicit(word_at(r, pos), memory_order_acquire);
        if (!(w & COMMITTED)) {
            break;
        }
        if (!(w & PAD)) {
            out[n++] = r->buf + (pos & r->mask) + HDR;
        } else if (((pos + (w & LEN_MASK)) & r->mask) == 0) {
            /* A padding to the end of the buffer (a wrap's or a rewind's,
             * at most one in what is held): its bytes stay unzeroed. */
            r->pad_from = pos + HDR;
            r->pad_to = pos + (w & LEN_MASK);
        }
        pos += w & LEN_MASK;
    }
    r->peek_pos = pos;
    r->peeked += n;
    return n;
}

static void
zero_range(sp_record_ring_t *r, uint64_t from, uint64_t to)
{
    size_t  off = (size_t) (from & r->mask), len = (size_t) (to - from);
    size_t  first = len <= r->mask + 1 - off ? len : r->mask + 1 - off;

    memset(r->buf + off, 0, first);
    memset(r->buf, 0, len - first);
}

/* Zeroes the released bytes from..to before the tail moves on, so that
 * concurrent producers find them clean (a one-thread ring need not: it
 * never peeks at a record it has not committed). A padding to the end of
 * the buffer is skipped past its header: its bytes were never written, and
 * a rewind's may be most of the buffer, whose pages would all be touched.
 * Released bytes are at most a ring, so hold at most one such padding. */
static void
release_range(sp_record_ring_t *r, uint64_t from, uint64_t to)
{
    if (r->one_thread || from == to) {
        return;
    }
    if (r->pad_to != 0 && from < r->pad_from && r->pad_to <= to) {
        zero_range(r, from, r->pad_from);
        zero_range(r, r->pad_to, to);
        return;
    }
    zero_range(r, from, to);
}

void
sp_record_ring_release(sp_record_ring_t *r, size_t n)
{
    uint64_t  t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t  w, len, end;
    size_t    done = 0;

    if (n > r->peeked) {
        n = r->peeked;
    }
    /* Nothing released, nothing stored. */
    if (n == 0) {
        return;
    }
    if (n == r->peeked) {
        /* All that was peeked (the exporter's usual release): the tail
         * goes to where the peek stopped, without walking the records. */
        sp_record_ring_release_to(r, n, r->peek_pos);
        return;
    }
    /* Some of them: where they end, then their bytes. */
    for (end = t; done < n; end += len) {
        w = atomic_load_explicit(word_at(r, end), memory_order_relaxed);
        len = w & LEN_MASK;
        done += !(w & PAD);
    }
    if (!r->one_thread) {
        atomic_store_explicit(&r->releasing_to, end, memory_order_relaxed);
        for ( ; t < end; t += len) {
            w = atomic_load_explicit(word_at(r, t), memory_order_relaxed);
            len = w & LEN_MASK;
            /* Zeroed before the tail moves on: producers see it clean. A
             * padding record's bytes past its header were never
             * written. */
            memset(r->buf + (t & r->mask), 0, (w & PAD) ? HDR : len);
        }
    }
    r->peeked -= n;
    atomic_store_explicit(&r->tail, end, memory_order_release);
    if (!r->one_thread) {
        atomic_store_explicit(&r->releasing_to, 0, memory_order_relaxed);
    }
    (void) counter_add(r, &r->consumed, n);
}

void
sp_record_ring_release_to(sp_record_ring_t *r, size_t n, uint64_t mark)
{
    uint64_t  t = atomic_load_explicit(&r->tail, memory_order_relaxed);

    if (n == 0 || n > r->peeked) {
        return;
    }
    if (!r->one_thread) {
        atomic_store_explicit(&r->releasing_to, mark, memory_order_relaxed);
    }
    release_range(r, t, mark);
    r->peeked -= n;
    atomic_store_explicit(&r->tail, mark, memory_order_release);
    if (!r->one_thread) {
        atomic_store_explicit(&r->releasing_to, 0, memory_order_relaxed);
    }
    (void) counter_add(r, &r->consumed, n);
}

void
sp_record_ring_unpeek(sp_record_ring_t *r)
{
    r->peeked = 0;
    r->peek_pos = 0;
    r->pad_from = r->pad_to = 0;
}

void
sp_record_ring_consumer_reset(sp_record_ring_t *r)
{
    uint64_t  to = atomic_load_explicit(&r->releasing_to,
                                        memory_order_relaxed);
    uint64_t  t = atomic_load_explicit(&r->tail, memory_order_relaxed);

    if (to > t) {
        /* All of it, paddings' bytes included (zero already, or written
         * here first: either way zero, as free space must be). */
        zero_range(r, t, to);
        atomic_store_explicit(&r->tail, to, memory_order_release);
    }
    atomic_store_explicit(&r->releasing_to, 0, memory_order_relaxed);
    sp_record_ring_unpeek(r);
}

uint64_t
sp_record_ring_next(const sp_record_ring_t *r)
{
    return r->peeked != 0
           ? r->peek_pos
           : atomic_load_explicit(&((sp_record_ring_t *) r)->tail,
                                  memory_order_relaxed);
}

int
sp_record_ring_seal(sp_record_ring_t *r, uint64_t end)
{
    uint64_t  pos = sp_record_ring_next(r), w;

    if (r->one_thread || end <= pos || end - pos > r->mask + 1
        || end > atomic_load_explicit(&r->head, memory_order_acquire))
    {
        return 0;
    }
    w = atomic_load_explicit(word_at(r, pos), memory_order_acquire);
    if (w & COMMITTED) {
        return 0;
    }
    /* The gone producer's bytes (no one else writes there: producers
     * reserve past end, and the consumer stops here). Zeroed as released
     * bytes are, then published as one padding the next peek skips. */
    zero_range(r, pos + HDR, end);
    atomic_store_explicit(word_at(r, pos), (end - pos) | PAD | COMMITTED,
                          memory_order_release);
    return 1;
}

size_t
sp_record_ring_pending(sp_record_ring_t *r)
{
    uint64_t  c = atomic_load_explicit(&r->consumed, memory_order_relaxed);
    uint64_t  n = atomic_load_explicit(&r->committed, memory_order_relaxed);

    /* consumed is read first: a record counted as consumed is counted as
     * committed too, unless its producer has not counted it yet. */
    return n > c ? (size_t) (n - c) : 0;
}

uint64_t
sp_record_ring_dropped(sp_record_ring_t *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}

uint64_t
sp_record_ring_rewinds(sp_record_ring_t *r)
{
    return atomic_load_explicit(&r->rewinds, memory_order_relaxed);
}
