/* The record ring with concurrent producers (Apache's span queue): its
 * rewind to the start of the buffer, alone and under N producers and a
 * consumer. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "ring_fixture.h"
#include "common/trace/record_ring.h"

#define PRODUCERS   4
#define PER_THREAD  40000

static sp_record_ring_t  ring;

/* Where a record sits in the buffer. */
static size_t
off_of(const sp_record_ring_t *r, const void *rec)
{
    return (size_t) ((const unsigned char *) rec - r->buf);
}

/* Pages of the buffer in memory from byte `from` on. */
static size_t
resident_from(const sp_record_ring_t *r, size_t from)
{
    size_t          page = (size_t) sysconf(_SC_PAGESIZE);
    size_t          cap = sp_record_ring_capacity(r), k, n = 0;
    unsigned char  *v = malloc(cap / page);

    if (mincore(r->buf, cap, v) != 0) {
        free(v);
        return (size_t) -1;
    }
    for (k = from / page; k < cap / page; k++) {
        n += v[k] & 1;
    }
    free(v);
    return n;
}

/* A record's bytes: its number, then a pattern from it. */
static void
fill(unsigned char *p, size_t len, uint64_t id)
{
    size_t  k;

    memcpy(p, &id, sizeof(id));
    for (k = sizeof(id); k < len; k++) {
        p[k] = (unsigned char) (id * 31 + k);
    }
}

/* Reserves, fills and commits record number id of len bytes: where it
 * went, or NULL when the ring had no room. */
static unsigned char *
put(sp_record_ring_t *r, size_t len, uint64_t id)
{
    unsigned char  *a = sp_record_ring_reserve(r, len);

    if (a != NULL) {
        fill(a, len, id);
        sp_record_ring_commit(r, a);
    }
    return a;
}

static int
intact(const unsigned char *p, size_t len, uint64_t id)
{
    uint64_t  got;
    size_t    k;

    memcpy(&got, p, sizeof(got));
    if (got != id) {
        return 0;
    }
    for (k = sizeof(id); k < len; k++) {
        if (p[k] != (unsigned char) (id * 31 + k)) {
            return 0;
        }
    }
    return 1;
}

/* A record's length from its number: 16 to 1000 bytes. */
static size_t
len_of(uint64_t id)
{
    return 16 + (size_t) ((id * 2654435761u) % 985);
}

static void *
producer(void *arg)
{
    uint64_t        p = (uint64_t) (uintptr_t) arg, i = 0, id;
    unsigned char  *rec;
    size_t          len;

    while (i < PER_THREAD) {
        /* Half the time the producers wait while 16 KiB are held (a server
         * whose exporter keeps up: the ring rewinds), half the time they
         * run it full. The tail is read first: never past that head. */
        if (i / 4000 % 2 == 0) {
            uint64_t  t = atomic_load(&ring.tail);

            if (atomic_load(&ring.head) - t > 16 * 1024) {
                sched_yield();
                continue;
            }
        }
        id = p << 32 | i;
        len = len_of(id);
        /* Every third record written in a slot of 1500 bytes, then shrunk
         * (Apache's spans built in place). */
        if (i % 3 == 0) {
            rec = sp_record_ring_reserve_upto(&ring, 1500);
            if (rec == NULL) {
                continue;
            }
            fill(rec, len, id);
            sp_record_ring_shrink(&ring, rec, len);
        } else if ((rec = sp_record_ring_reserve(&ring, len)) != NULL) {
            fill(rec, len, id);
        } else {
            continue;           /* full (counted): the consumer catches up */
        }
        sp_record_ring_commit(&ring, rec);
        i++;
    }
    return NULL;
}

/* Checks the n records peeked: each producer's in order, each whole. */
static void
check(void **recs, size_t n, uint64_t *next, int *in_order, int *whole)
{
    size_t    k;
    uint64_t  id, p;

    for (k = 0; k < n; k++) {
        memcpy(&id, recs[k], sizeof(id));
        p = id >> 32;
        if (p >= PRODUCERS || (id & 0xffffffffu) != next[p]) {
            *in_order = 0;
            continue;
        }
        *whole &= intact(recs[k], len_of(id), id);
        next[p]++;
    }
}

int
main(void)
{
    pthread_t       th[PRODUCERS];
    void           *recs[256], *recs2[256], *a;
    uint64_t        next[PRODUCERS] = { 0 }, got = 0, mark, mark2, seen, i;
    size_t          n, n2, k, h = 0, cap, quarter, maxend;
    int             whole = 1, in_order = 1, rewinds, rounds;
    uintptr_t       t;

    /* One caller, concurrent-producer ring of 256 KiB: a quarter is
     * 64 KiB. Records of 200 bytes (208 with the header) taken back one by
     * one. */
    ok(sp_record_ring_init(&ring, 256 * 1024, 0) == 0, "ring of 256 KiB");
    cap = sp_record_ring_capacity(&ring);
    quarter = cap / 4;
    for (i = 0; (h = (size_t) (atomic_load(&ring.head) & ring.mask)) < quarter;
         i++)
    {
        a = sp_record_ring_reserve(&ring, 200);
        if (off_of(&ring, a) != h + 8) {
            break;
        }
        fill(a, 200, i);
        sp_record_ring_commit(&ring, a);
        n = sp_record_ring_peek(&ring, recs, 8);
        whole &= n == 1 && recs[0] == a && intact(a, 200, i);
        sp_record_ring_release(&ring, n);
    }
    is_int(h, (quarter + 207) / 208 * 208,
           "an empty ring less than a quarter in: no rewind (%d records in a row)",
           (int) i);
    ok(whole, "and each one read back whole");
    is_int(sp_record_ring_rewinds(&ring), 0, "no rewind counted before");
    a = sp_record_ring_reserve(&ring, 200);
    ok(off_of(&ring, a) == 8, "the next one goes to the start of the buffer");
    is_int(sp_record_ring_rewinds(&ring), 1, "a rewind counted");
    is_int(sp_record_ring_room(&ring), h - 208,
           "the padding to the end counts as used until it is released");
    is_int(sp_record_ring_room_unpadded(&ring), cap - 208,
           "but not in the room that leaves the rewind's padding out");
    fill(a, 200, i);
    sp_record_ring_commit(&ring, a);
    is_int(sp_record_ring_pending(&ring), 1, "one record pending (the padding is none)");
    n = sp_record_ring_peek(&ring, recs, 8);
    ok(n == 1 && recs[0] == a && intact(a, 200, i),
       "peek skips the padding: that record, whole");
    is_int(sp_record_ring_room(&ring), cap - 208,
           "nothing was held before it: the padding's room back at the peek");
    sp_record_ring_release(&ring, n);
    is_int(sp_record_ring_room(&ring), cap, "released: all room back");
    is_int(atomic_load(&ring.committed), i + 1, "%d committed", (int) i + 1);
    is_int(atomic_load(&ring.consumed), i + 1, "%d consumed", (int) i + 1);
    is_int(sp_record_ring_dropped(&ring), 0, "none dropped");
    ok(ring_zero(&ring), "every byte zero again");

    /* Records held while the head passes a quarter: the ring rewinds once
     * the ones held all lie past it, and its records stay in its first
     * half; each read back whole, in order, through peeks held and
     * released by their marks, and by the walk of a partial release. */
    whole = 1;
    rewinds = 0;
    maxend = 0;
    seen = atomic_load(&ring.rewound);
    for (i = 0; i < 60000; i++) {
        size_t  len = 40 + (size_t) (i * 37 % 300);

        a = put(&ring, len, i);
        if (a == NULL) {
            whole = 0;
            break;
        }
        if (off_of(&ring, a) + len > maxend) {
            maxend = off_of(&ring, a) + len;
        }
        if (atomic_load(&ring.rewound) != seen) {
            seen = atomic_load(&ring.rewound);
            rewinds++;
        }
        if (i % 3 != 2) {
            continue;
        }
        /* Three records queued: the first two in one peek, the third in
         * another; released by marks, or the first alone (a walk). */
        n = sp_record_ring_peek(&ring, recs, 2);
        mark = sp_record_ring_mark(&ring);
        n2 = sp_record_ring_peek(&ring, recs2, 8);
        mark2 = sp_record_ring_mark(&ring);
        whole &= n == 2 && n2 == 1
                 && intact(recs[0], 40 + (i - 2) * 37 % 300, i - 2)
                 && intact(recs[1], 40 + (i - 1) * 37 % 300, i - 1)
                 && intact(recs2[0], len, i);
        if (i % 2) {
            sp_record_ring_release_to(&ring, n, mark);
            sp_record_ring_release_to(&ring, n2, mark2);
        } else {
            sp_record_ring_release(&ring, 1);
            sp_record_ring_release(&ring, 2);
        }
    }
    ok(whole, "60000 records of 48 to 344 bytes, each read back whole and in order");
    ok(rewinds > 50, "with rewinds while records were held (%d)", rewinds);
    is_int(sp_record_ring_rewinds(&ring), 1 + rewinds,
           "each rewind counted by the ring (and the first one)");
    /* Rewound once the tail is a quarter in: the head is at most the
     * three records held further. */
    ok(maxend <= quarter + 3 * 352,
       "the records stay in the buffer's first quarter and 3 records (up to %zu)", maxend);
    is_int(sp_record_ring_pending(&ring), 0, "nothing pending");
    is_int(atomic_load(&ring.committed), atomic_load(&ring.consumed),
           "as many consumed as committed");
    is_int(sp_record_ring_dropped(&ring), 0, "none dropped");
    ok(ring_zero(&ring), "every byte zero again");

    /* A full ring after a rewind refuses (counted) and takes records again
     * once the consumer passes the padding. */
    while ((atomic_load(&ring.head) & ring.mask) < quarter) {
        a = sp_record_ring_reserve(&ring, 200);
        sp_record_ring_commit(&ring, a);
        sp_record_ring_release(&ring, sp_record_ring_peek(&ring, recs, 8));
    }
    h = (size_t) (atomic_load(&ring.head) & ring.mask);
    for (k = 0; (a = sp_record_ring_reserve(&ring, 200)) != NULL; k++) {
        sp_record_ring_commit(&ring, a);
    }
    ok(k >= 1 && k == h / 208, "after a rewind at %zu only the start takes records (%zu)",
       h, k);
    is_int(sp_record_ring_dropped(&ring), 1, "the refused one is counted");
    is_int(sp_record_ring_pending(&ring), k, "all the others pending");
    for (n = 0; (n2 = sp_record_ring_peek(&ring, recs, 256)) > 0; n += n2) {
    }
    is_int(n, k, "all of them peeked");
    sp_record_ring_release(&ring, n);
    is_int(sp_record_ring_room(&ring), cap, "the padding released with them: all room back");
    ok(ring_zero(&ring), "every byte zero again");
    sp_record_ring_free(&ring);

    /* A consumer that lags: the records it holds lie past the rewind
     * point but are more than a quarter of it, so the start might not have
     * room for what comes while it reads them; the ring goes on into its
     * buffer, and rewinds once the consumer has caught up. */
    ok(sp_record_ring_init(&ring, 256 * 1024, 0) == 0, "ring of 256 KiB");
    whole = 1;
    for (i = 0; i < 580; i++) {
        whole &= put(&ring, 200, i) != NULL;
    }
    n = sp_record_ring_peek(&ring, recs, 200);
    sp_record_ring_release(&ring, 100);
    n2 = sp_record_ring_peek(&ring, recs2, 256);
    whole &= n == 200 && n2 == 256 && intact(recs2[255], 200, 455);
    /* Records 340 to 579 held from 340 x 208 = 70,720 bytes in: past
     * 64 KiB, but 49,920 bytes, more than a quarter of it. */
    sp_record_ring_release(&ring, 240);
    a = put(&ring, 200, i++);
    ok(whole && a != NULL && off_of(&ring, a) == 580 * 208 + 8,
       "a lagging consumer: the next record follows the last one");
    is_int(sp_record_ring_rewinds(&ring), 0, "no rewind");
    /* Caught up to 556: 25 records (5,200 bytes) held from 115,648. */
    n2 = sp_record_ring_peek(&ring, recs2, 256);
    whole &= n2 == 125 && intact(recs2[124], 200, 580);
    sp_record_ring_release(&ring, 216);
    a = put(&ring, 200, i++);
    ok(a != NULL && off_of(&ring, a) == 8,
       "the consumer caught up: the next record goes to the start");
    is_int(sp_record_ring_rewinds(&ring), 1, "a rewind");
    sp_record_ring_release(&ring, 25);
    for (k = 581; (n = sp_record_ring_peek(&ring, recs, 64)) > 0; k += n) {
        whole &= intact(recs[n - 1], 200, k + n - 1);
        sp_record_ring_release(&ring, n);
    }
    ok(whole && k == i, "all %d records back, whole", (int) k);
    ok(ring_zero(&ring), "every byte zero again");
    sp_record_ring_free(&ring);

    /* A ring of 4 MiB drained in batches of 64 records (kept up with): its
     * pages past the first quarter and a few batches are never touched, by
     * a record or by zeroing a rewind's padding on release. */
    ok(sp_record_ring_init(&ring, 4 << 20, 0) == 0, "ring of 4 MiB");
    cap = sp_record_ring_capacity(&ring);
    whole = 1;
    seen = 0;
    for (i = 0, rounds = 0; i < 40000; i++) {
        size_t  len = len_of(i);

        a = put(&ring, len, i);
        if (a == NULL) {
            whole = 0;
            break;
        }
        if (i % 64 == 63) {
            n = sp_record_ring_peek(&ring, recs, 64);
            whole &= n == 64 && intact(recs[63], len, i);
            /* Batches released by their mark and by a plain release. */
            if (i % 128 == 127) {
                sp_record_ring_release_to(&ring, n, sp_record_ring_mark(&ring));
            } else {
                sp_record_ring_release(&ring, n);
            }
        }
        if (atomic_load(&ring.rewound) != seen) {
            seen = atomic_load(&ring.rewound);
            rounds++;
        }
    }
    ok(whole, "40000 records (about 20 MB: 5 times the ring) read back");
    ok(rounds > 10, "rounds of the ring's first quarter (%d rewinds)", rounds);
    is_int(sp_record_ring_rewinds(&ring), rounds, "each counted by the ring");
    is_int(resident_from(&ring, cap / 4 + 256 * 1024), 0,
           "no page past the first quarter and 256 KiB was ever touched");
    sp_record_ring_free(&ring);

    /* Concurrent producers (records of 16 to 1000 bytes, a third in slots
     * shrunk after) and the consumer, in a 256 KiB ring: rewinds happen
     * while records are reserved, written and read; each record arrives
     * once, whole, in its producer's order. */
    ok(sp_record_ring_init(&ring, 256 * 1024, 0) == 0, "ring of 256 KiB");
    for (t = 0; t < PRODUCERS; t++) {
        pthread_create(&th[t], NULL, producer, (void *) t);
    }
    rewinds = 0;
    seen = 0;
    whole = 1;
    for (k = 0; got < (uint64_t) PRODUCERS * PER_THREAD; k++) {
        /* In turn: a peek released whole, one released in part (walked),
         * and two peeks held and released by their marks. */
        n = sp_record_ring_peek(&ring, recs, 64);
        check(recs, n, next, &in_order, &whole);
        if (k % 3 == 0) {
            sp_record_ring_release(&ring, n);
        } else if (k % 3 == 1) {
            sp_record_ring_release(&ring, n / 2);
            n2 = sp_record_ring_peek(&ring, recs2, 64);
            check(recs2, n2, next, &in_order, &whole);
            sp_record_ring_release(&ring, n - n / 2 + n2);
            n += n2;
        } else {
            mark = sp_record_ring_mark(&ring);
            n2 = sp_record_ring_peek(&ring, recs2, 64);
            check(recs2, n2, next, &in_order, &whole);
            mark2 = sp_record_ring_mark(&ring);
            sp_record_ring_release_to(&ring, n, mark);
            sp_record_ring_release_to(&ring, n2, mark2);
            n += n2;
        }
        got += n;
        if (atomic_load(&ring.rewound) != seen) {
            seen = atomic_load(&ring.rewound);
            rewinds++;
        }
    }
    for (t = 0; t < PRODUCERS; t++) {
        pthread_join(th[t], NULL);
    }
    ok(in_order, "%d producers: every record once, in each producer's order", PRODUCERS);
    ok(whole, "every record whole");
    for (t = 0; t < PRODUCERS; t++) {
        is_int(next[t], PER_THREAD, "producer %d: all records arrived", (int) t);
    }
    ok(rewinds > 10, "with rewinds meanwhile (at least %d)", rewinds);
    ok(sp_record_ring_rewinds(&ring) >= (uint64_t) rewinds,
       "counted by the ring: %llu",
       (unsigned long long) sp_record_ring_rewinds(&ring));
    is_int(sp_record_ring_pending(&ring), 0, "nothing pending");
    is_int(atomic_load(&ring.committed), (uint64_t) PRODUCERS * PER_THREAD,
           "committed: every record");
    is_int(atomic_load(&ring.consumed), (uint64_t) PRODUCERS * PER_THREAD,
           "consumed: every record");
    ok(ring_zero(&ring), "every byte zero again (paddings' bytes never written)");
    sp_record_ring_free(&ring);
    return done_testing();
}
