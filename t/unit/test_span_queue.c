/* The span queue and the record ring under it: spans of every size go in as
 * compact records and come out whole, every committed span reaches the
 * consumer exactly once and in each producer's order (across many wraps of
 * the ring, with padding records), a full queue drops and counts instead of
 * blocking, and an uncommitted record holds back the ones after it. */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "ring_fixture.h"
#include "common/trace/record_ring.h"
#include "common/trace/span_queue.h"
#include "common/export/wire.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"

#define PRODUCERS  4
#define PER_THREAD 20000

static sp_span_queue_t  *q;

/* Span number i of producer id: a size that varies from a few bytes of
 * strings to over a kilobyte, and content that names both. */
static void
build(sp_span_t *s, unsigned id, uint64_t i)
{
    static const uint8_t  tid[16] = { 1 }, sid[8] = { 2 };
    char                  val[1200];
    size_t                len = (i * 37 + id * 11) % sizeof(val), k;

    sp_span_init(s, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, i);
    s->kind = (uint8_t) id;
    for (k = 0; k < len; k++) {
        val[k] = (char) ('a' + (i + k) % 26);
    }
    sp_span_set_name(s, val, len < 100 ? len : 100);
    sp_span_attr_cint(s, "n", (int64_t) i);
    if (len > 100) {
        sp_span_attr_str(s, SP_OWNER_SPAN, "big", 3, val + 100, len - 100);
    }
}

/* Whether a record is byte for byte what build() encodes. */
static int
intact(const sp_span_rec_t *r, unsigned id, uint64_t i)
{
    static sp_span_t  w;
    static uint8_t    buf[8192];
    size_t            n;
    uint8_t          *p = buf;

    build(&w, id, i);
    n = sp_span_encoded_size(&w);
    *p++ = SP_TAG(2, SP_WT_LEN);
    p = sp_wire_varint(p, n);
    p = sp_span_encode(&w, p);
    return r->len == (size_t) (p - buf) && memcmp(r->data, buf, r->len) == 0;
}

/* Whether two records hold the same span, field by field: each decoded by
 * protobuf-c and packed again (packing writes fields in number order). */
static int
same_span(const sp_span_rec_t *a, const sp_span_rec_t *b)
{
    static uint8_t  pa[16384], pb[16384];
    Opentelemetry__Proto__Trace__V1__Span  *da = span_rec_decode(a);
    Opentelemetry__Proto__Trace__V1__Span  *db = span_rec_decode(b);
    size_t          na = 0, nb = 1;

    if (da != NULL && db != NULL
        && opentelemetry__proto__trace__v1__span__get_packed_size(da) <= sizeof(pa)
        && opentelemetry__proto__trace__v1__span__get_packed_size(db) <= sizeof(pb))
    {
        na = opentelemetry__proto__trace__v1__span__pack(da, pa);
        nb = opentelemetry__proto__trace__v1__span__pack(db, pb);
    }
    if (da != NULL) {
        opentelemetry__proto__trace__v1__span__free_unpacked(da, NULL);
    }
    if (db != NULL) {
        opentelemetry__proto__trace__v1__span__free_unpacked(db, NULL);
    }
    return na == nb && memcmp(pa, pb, na) == 0;
}

/* build() and the rest of a span's fields: an overridden attribute, an
 * event with an attribute, a status with a message. */
static void
build_full(sp_span_t *s, uint64_t i)
{
    int  ev;

    build(s, 1, i);
    sp_span_set_tracestate(s, "k=v", 3);
    sp_span_attr_cstr(s, "user", "one", 3);
    sp_span_attr_set_str(s, "user", 4, "two", 3);
    ev = sp_span_add_event(s, "upstream.attempt", 16, i + 1);
    if (ev >= 0) {
        sp_span_attr_oint(s, SP_OWNER_EVENT(ev), "http.response.status_code",
                          502);
    }
    sp_span_set_status(s, SP_STATUS_ERROR, "bad", 3);
}

/* What the concurrent producers build: build(), and every third span an
 * attribute overridden by a shorter one (the bytes it cut must not stay in
 * a slot's unused end). */
static void
pbuild(sp_span_t *s, unsigned id, uint64_t i)
{
    char  big[200];

    build(s, id, i);
    if (i % 3 == 1) {
        memset(big, 'v', sizeof(big));
        sp_span_attr_cstr(s, "cut", big, sizeof(big));
        sp_span_attr_set_str(s, "cut", 3, "x", 1);
    }
}

/* Whether a record holds the span pbuild() makes, in any field order (a
 * span built in place has its attributes first). */
static int
same_as_pbuilt(const sp_span_rec_t *r, unsigned id, uint64_t i)
{
    static sp_span_t  w;
    static uint64_t   buf[2048];
    sp_span_rec_t    *b = (sp_span_rec_t *) (void *) buf;
    uint8_t          *p = b->data;

    pbuild(&w, id, i);
    *p++ = SP_TAG(2, SP_WT_LEN);
    p = sp_wire_varint(p, sp_span_encoded_size(&w));
    p = sp_span_encode(&w, p);
    b->len = (uint32_t) (p - b->data);
    return same_span(r, b);
}

static void *
producer(void *arg)
{
    unsigned        id = (unsigned) (uintptr_t) arg;
    sp_span_t      *s = calloc(1, sizeof(sp_span_t));
    uint64_t        i;
    uint8_t        *place;

    for (i = 0; i < PER_THREAD; ) {
        /* Every other span in a slot (Apache's threads), when there is one. */
        if (i % 2 && (place = sp_span_queue_place(q)) != NULL) {
            s->place = place;
            pbuild(s, id, i);
            s->place = NULL;
            sp_span_queue_commit_placed(q, s);
            i++;
            continue;
        }
        pbuild(s, id, i);
        if (sp_span_queue_push(q, s) == 0) {
            continue;           /* full: the consumer will catch up */
        }
        i++;
    }
    free(s);
    return NULL;
}

int
main(void)
{
    pthread_t         th[PRODUCERS];
    const sp_span_rec_t  *out[64];
    sp_span_t        *s = calloc(1, sizeof(sp_span_t));
    Opentelemetry__Proto__Trace__V1__Span  *d;
    sp_record_ring_t  r;
    uint64_t          next[PRODUCERS] = { 0 }, got = 0, dropped_before, i;
    int               in_order = 1, whole = 1;
    size_t            n, k, pushed;
    uintptr_t         t;
    void             *a, *c, *prev, *recs[8];
    const sp_span_rec_t  *first;
    size_t            step = 0;
    int               pass;
    uint8_t          *place;
    int               wraps = 0;

    q = sp_span_queue_create(4, 0);
    ok(q != NULL, "queue created");
    is_int(sp_span_queue_bytes(q), 4096, "4 spans of 1 KiB: 4096 bytes");

    /* Fill to the brim with small spans: the next push is a counted drop. */
    for (pushed = 0; ; pushed++) {
        build(s, 0, pushed * 1200);        /* no value bytes: ~160 bytes */
        if (sp_span_queue_push(q, s) == 0) {
            break;
        }
    }
    ok(pushed > 4, "small spans: more than the nominal 4 fit (%zu)", pushed);
    dropped_before = sp_span_queue_dropped(q);
    ok(sp_span_queue_push(q, s) == 0, "full queue refuses a span");
    ok(!sp_span_queue_has_room(q), "and says so before one is built");
    is_int(sp_span_queue_dropped(q), dropped_before + 2, "both counted");
    is_int(sp_span_queue_pending(q), pushed, "all pending");
    n = sp_span_queue_peek(q, out, 3);
    is_int(n, 3, "peek returns at most max");
    ok(intact(out[0], 0, 0) && intact(out[2], 0, 2400), "records read back whole");
    sp_span_queue_release(q, 3);
    n = sp_span_queue_peek(q, out, 64);
    is_int(n, pushed - 3, "the rest after release");
    sp_span_queue_release(q, n);
    is_int(sp_span_queue_pending(q), 0, "drained");
    ok(sp_span_queue_has_room(q), "room again");
    sp_span_queue_destroy(q);

    /* A record too big for half the ring is refused, never wrapped. */
    sp_record_ring_init(&r, 4096, 0);
    ok(sp_record_ring_reserve(&r, 2100) == NULL, "oversized record refused");
    is_int(sp_record_ring_dropped(&r), 1, "and counted");

    /* A ring filled exactly: peek returns each record once, never the
     * first again from where the head meets the tail. */
    for (k = 0; k < 4; k++) {
        a = sp_record_ring_reserve(&r, 1024 - 8);
        ok(a != NULL, "exact fill: record %zu of 1 KiB", k);
        if (a != NULL) {
            sp_record_ring_commit(&r, a);
        }
    }
    is_int(sp_record_ring_room(&r), 0, "ring full to the byte");
    is_int(sp_record_ring_peek(&r, recs, 8), 4, "a full ring peeks 4 records, not more");
    sp_record_ring_release(&r, 4);

    /* An uncommitted record holds back the consumer, in order. */
    a = sp_record_ring_reserve(&r, 100);
    c = sp_record_ring_reserve(&r, 100);
    sp_record_ring_commit(&r, c);
    is_int(sp_record_ring_peek(&r, recs, 8), 0,
           "nothing readable before the first reserved record commits");
    sp_record_ring_commit(&r, a);
    is_int(sp_record_ring_peek(&r, recs, 8), 2, "both readable after");
    ok(recs[0] == a && recs[1] == c, "in reservation order");
    sp_record_ring_release(&r, 2);

    /* Wrapping: with a record always outstanding (the ring is never empty
     * at a reservation), a record that does not fit the end goes to the
     * start, behind a padding record the consumer skips. */
    prev = NULL;
    for (i = 0; i < 200; i++) {
        a = sp_record_ring_reserve(&r, 24 + (i * 56) % 1000);
        ok(a != NULL && ((uintptr_t) a & 7) == 0, "record %d: 8-byte aligned",
           (int) i);
        wraps += prev != NULL && (unsigned char *) a < (unsigned char *) prev;
        memset(a, (int) i, 24);
        sp_record_ring_commit(&r, a);
        n = sp_record_ring_peek(&r, recs, 8);
        is_int(n, 1, "record %d: one record back, padding skipped", (int) i);
        ok(n == 1 && recs[0] == a && ((unsigned char *) a)[23] == (i & 0xff),
           "record %d: the same bytes", (int) i);
        if (prev != NULL) {
            sp_record_ring_release(&r, 1);      /* the one before */
        }
        prev = a;
    }
    sp_record_ring_release(&r, 1);
    ok(wraps >= 10, "the records went round the ring (%d times)", wraps);
    is_int(sp_record_ring_pending(&r), 0, "ring empty after the wraps");

    ok(ring_zero(&r), "every released byte is zero again");
    whole = 1;

    /* Released a whole peek at a time (by where the peek ended, without
     * walking the records), across the wrap and its padding: the same
     * records back, and every released byte zero again. */
    for (i = 0, wraps = 0, prev = NULL; i < 60; i++) {
        size_t  j;
        void   *got[3];

        for (j = 0; j < 3; j++) {
            got[j] = a = sp_record_ring_reserve(&r, 24 + ((i * 3 + j) * 56) % 700);
            wraps += prev != NULL && (unsigned char *) a < (unsigned char *) prev;
            prev = a;
            memset(a, (int) (i * 3 + j), 24);
            sp_record_ring_commit(&r, a);
        }
        n = sp_record_ring_peek(&r, recs, 8);
        whole &= n == 3 && recs[0] == got[0] && recs[2] == got[2]
                 && ((unsigned char *) recs[2])[23] == ((i * 3 + 2) & 0xff);
        sp_record_ring_release(&r, n);
    }
    ok(whole, "whole peeks released: the records read back in order");
    ok(wraps >= 5, "and went round the ring (%d times)", wraps);
    is_int(sp_record_ring_pending(&r), 0, "ring empty after them");
    ok(ring_zero(&r), "every byte released by a whole peek is zero again");
    whole = 1;

    /* Two peeks held at once (the exporter's batches waiting to be sent),
     * each released by its mark, in order: the second peek continues
     * after the first, and what is released is zero again. */
    for (i = 0, prev = NULL, wraps = 0; i < 40; i++) {
        size_t    j, n1, n2;
        uint64_t  m1, m2;
        void     *first[2], *second[2];

        for (j = 0; j < 4; j++) {
            a = sp_record_ring_reserve(&r, 40 + ((i * 4 + j) * 91) % 600);
            wraps += prev != NULL && (unsigned char *) a < (unsigned char *) prev;
            prev = a;
            memset(a, (int) (i * 4 + j + 1), 40);
            sp_record_ring_commit(&r, a);
        }
        n1 = sp_record_ring_peek(&r, first, 2);
        m1 = sp_record_ring_mark(&r);
        n2 = sp_record_ring_peek(&r, second, 2);
        m2 = sp_record_ring_mark(&r);
        whole &= n1 == 2 && n2 == 2
                 && ((unsigned char *) first[0])[39] == ((i * 4 + 1) & 0xff)
                 && ((unsigned char *) second[1])[39] == ((i * 4 + 4) & 0xff);
        sp_record_ring_release_to(&r, n1, m1);
        whole &= sp_record_ring_pending(&r) == 2
                 && ((unsigned char *) second[0])[39] == ((i * 4 + 3) & 0xff);
        sp_record_ring_release_to(&r, n2, m2);
    }
    ok(whole, "two peeks held, released by their marks in order");
    ok(wraps >= 3, "and round the ring (%d times)", wraps);
    is_int(sp_record_ring_pending(&r), 0, "ring empty after them");
    ok(ring_zero(&r), "every byte released by a mark is zero again");
    whole = 1;

    /* With concurrent producers a ring of 64 KiB or less does not rewind
     * (record_ring.h): the next record goes where the last one ended. */
    for (k = 0; k < 8 && (atomic_load(&r.head) & r.mask) < 2048; k++) {
        a = sp_record_ring_reserve(&r, 392);
        sp_record_ring_commit(&r, a);
    }
    sp_record_ring_release(&r, sp_record_ring_peek(&r, recs, 8));
    ok((atomic_load(&r.head) & r.mask) >= 2048, "an empty ring past half way");
    c = r.buf + (atomic_load(&r.head) & r.mask) + 8;
    a = sp_record_ring_reserve(&r, 100);
    ok(a == c, "with concurrent producers the next record follows the last one");
    sp_record_ring_commit(&r, a);
    sp_record_ring_release(&r, sp_record_ring_peek(&r, recs, 8));
    sp_record_ring_free(&r);

    /* A one-thread ring that is empty half way into its buffer starts
     * again at the beginning (hot in the cache). */
    sp_record_ring_init(&r, 4096, 1);
    for (k = 0; k < 8 && (atomic_load(&r.head) & r.mask) < 2048; k++) {
        a = sp_record_ring_reserve(&r, 392);
        memset(a, 0xab, 392);
        sp_record_ring_commit(&r, a);
    }
    is_int(sp_record_ring_peek(&r, recs, 8), k, "records up to half way");
    sp_record_ring_release(&r, k);
    ok((atomic_load(&r.head) & r.mask) >= 2048, "the ring is empty past half way");
    a = sp_record_ring_reserve(&r, 100);
    ok(a == (void *) (r.buf + 8), "the next record is at the start of the buffer");
    is_int(sp_record_ring_rewinds(&r), 1, "a rewind, counted");
    is_int(sp_record_ring_room(&r), 4096 - 112, "and the whole ring is free but it");
    memset(a, 0xef, 100);
    sp_record_ring_commit(&r, a);
    is_int(sp_record_ring_peek(&r, recs, 8), 1, "one record back");
    ok(recs[0] == a, "that one");
    sp_record_ring_release(&r, 1);
    sp_record_ring_free(&r);

    /* Concurrent producers, a queue of 256 KiB: once the records it holds
     * are a quarter in (64 KiB), or two batches when the consumer's batch
     * is set (48 spans: 96 KiB), the next span goes to the start of the
     * buffer (a rewind) and the rest of the buffer is a padding until the
     * consumer passes it. Slots for spans built in place are still given,
     * though less than half the ring is free meanwhile. */
    for (pass = 0; pass < 2; pass++) {
    size_t  at = pass == 0 ? 64 * 1024 : 96 * 1024;

    q = sp_span_queue_create(256, 0);
    if (pass == 1) {
        sp_span_queue_set_batch(q, 48);
    }
    build(s, 0, 0);
    sp_span_queue_push(q, s);
    is_int(sp_span_queue_peek(q, out, 1), 1, "256 KiB queue: the first span");
    first = out[0];
    sp_span_queue_release(q, 1);
    for (i = 1; i < 4000; i++) {
        sp_span_queue_push(q, s);
        sp_span_queue_peek(q, out, 1);
        if (i == 1) {
            step = (size_t) ((const uint8_t *) out[0] - (const uint8_t *) first);
        }
        if (out[0] == first) {
            break;              /* peeked, held: the padding stays */
        }
        sp_span_queue_release(q, 1);
    }
    ok(i < 4000, "a drained queue rewinds: span %d back at the start of the buffer",
       (int) i);
    is_int(sp_span_queue_rewinds(q), 1, "the rewind counted by the queue");
    ok(i * step >= at && (i - 1) * step < at,
       "as soon as it is %zu KiB in (%d records of %zu bytes)", at / 1024, (int) i,
       step);
    place = sp_span_queue_place(q);
    ok(place != NULL, "while the padding holds the rest, a slot is given");
    if (place != NULL) {
        s->place = place;
        build(s, 0, 1);
        s->place = NULL;
        sp_span_queue_commit_placed(q, s);
    }
    build(s, 0, 1);
    sp_span_queue_push(q, s);
    n = sp_span_queue_peek(q, out, 8);
    is_int(n, 1 + (place != NULL), "the spans after it back");
    ok(n == 2 && same_span(out[0], out[1]), "the placed one whole");
    sp_span_queue_release(q, n + 1);
    is_int(sp_span_queue_pending(q), 0, "all released");
    is_int(sp_span_queue_dropped(q), 0, "none dropped");
    sp_span_queue_destroy(q);
    }

    /* A one-thread ring (nginx: spans are queued and sent on the worker's
     * loop) works the same without locked instructions and without zeroing
     * what it releases: stale bytes from the last round never show. */
    q = sp_span_queue_create(4, 1);
    for (pushed = 0; ; pushed++) {
        build(s, 0, pushed * 1200);
        if (sp_span_queue_push(q, s) == 0) {
            break;
        }
    }
    ok(pushed > 4, "one thread: the queue fills (%zu spans)", pushed);
    ok(!sp_span_queue_has_room(q), "one thread: full queue says so");
    is_int(sp_span_queue_dropped(q), 1 + 1, "one thread: push and check counted");
    is_int(sp_span_queue_pending(q), pushed, "one thread: all pending");
    sp_span_queue_release(q, sp_span_queue_peek(q, out, 64));
    is_int(sp_span_queue_pending(q), 0, "one thread: drained");
    for (i = 0; i < 300; i++) {
        build(s, (unsigned) (i % 3), i * 1200 + (i * 77) % 700);
        k = sp_span_queue_push(q, s);
        if (k == 0) {
            break;
        }
        n = sp_span_queue_peek(q, out, 64);
        if (n != 1 || !intact(out[0], (unsigned) (i % 3), i * 1200 + (i * 77) % 700)) {
            break;
        }
        sp_span_queue_release(q, 1);
    }
    is_int(i, 300, "one thread: 300 spans of varied size round the ring, each read back whole");
    sp_span_queue_destroy(q);

    /* A span built in place (nginx's one-thread queue, Apache's queue of
     * concurrent producers): written once, in its slot, attributes first;
     * the same span as built and pushed, small ones (one length byte) and
     * large, round the ring. */
    for (t = 0; t < 2; t++) {
    const char  *kind = t == 0 ? "one thread" : "concurrent producers";

    q = sp_span_queue_create(64, t == 0);
    whole = 1;
    for (i = 0; i < 300; i++) {
        uint64_t  at = i == 0 ? 0 : i * 1200 + (i * 77) % 1200;
        uint8_t  *place = sp_span_queue_place(q);

        if (place == NULL) {
            whole = 0;
            break;
        }
        s->place = place;
        if (i % 2) {
            build_full(s, at);
        } else {
            build(s, 1, at);
        }
        if (i == 0) {
            ok(s->wire == place, "the attributes are written in the slot");
        }
        s->place = NULL;
        k = sp_span_queue_commit_placed(q, s);
        if (i % 2) {
            build_full(s, at);
        } else {
            build(s, 1, at);
        }
        k += sp_span_queue_push(q, s);
        n = sp_span_queue_peek(q, out, 64);
        if (k != 1 + 2 || n != 2
            || !same_span(out[0], out[1]))
        {
            whole = 0;
            break;
        }
        if (i == 0) {
            ok(out[0]->len < 130 && out[0]->data[1] < 128,
               "a span under 128 bytes has a one-byte length (%u bytes)",
               out[0]->len);
        }
        sp_span_queue_release(q, 2);
    }
    ok(whole, "%s: 300 spans built in place equal the same spans pushed (%d)", kind, (int) i);
    for (pushed = 0; sp_span_queue_has_room(q); pushed++) {
        build(s, 0, pushed * 1200);
        sp_span_queue_push(q, s);
    }
    dropped_before = sp_span_queue_dropped(q);
    ok(sp_span_queue_place(q) == NULL, "%s: a full queue has no place", kind);
    is_int(sp_span_queue_dropped(q), dropped_before, "%s: and counts no drop for it (the push does)", kind);
    sp_span_queue_destroy(q);
    }

    /* With concurrent producers a placed span gives its slot's unused end
     * back, and leaves nothing written there (it is free space again,
     * which must be zero): the byte a short span's length moved it from,
     * the attributes an overriding one cut. */
    q = sp_span_queue_create(64, 0);
    whole = 1;
    for (i = 0; i < 40; i++) {
        uint8_t        *place = sp_span_queue_place(q), *b, *next_place;
        sp_span_rec_t  *rec;
        uint64_t        total, at;

        if (place == NULL) {
            whole = 0;
            break;
        }
        s->place = place;
        /* names of 11 + i bytes (37 * 973 = 1 mod 1200): spans of
         * every length mod 8, most under 128 bytes */
        at = i * 1200 + (973 * i) % 1200;
        pbuild(s, 1, at);
        s->place = NULL;
        sp_span_queue_commit_placed(q, s);
        rec = (sp_span_rec_t *) (void *) (place - 3 - offsetof(sp_span_rec_t, data));
        memcpy(&total, (uint8_t *) rec - 8, 8);
        total &= ~(uint64_t) 7;
        for (b = (uint8_t *) rec - 8 + total; b < place + 9000; b++) {
            whole &= *b == 0;
        }
        n = sp_span_queue_peek(q, out, 64);
        whole &= n == 1 && same_as_pbuilt(out[0], 1, at);
        if (i == 0) {
            ok(total < 200, "a small placed span takes only its bytes in the ring (%u)", (unsigned) total);
            next_place = sp_span_queue_place(q);
            ok(next_place == (uint8_t *) rec - 8 + total + 8 + 4 + 3,
               "the next slot follows it");
            s->place = next_place;
            build(s, 1, 0);
            s->place = NULL;
            sp_span_queue_commit_placed(q, s);
            n += sp_span_queue_peek(q, out + 1, 63);
        }
        sp_span_queue_release(q, n);
    }
    ok(whole, "placed spans leave the free space zero (%d)", (int) i);
    /* A queue at least half full has no slots for concurrent producers:
     * an unused end left as padding (another producer reserved after the
     * slot) cannot crowd out the spans. */
    for (pushed = 0; ; pushed++) {
        uint8_t  *place = sp_span_queue_place(q);

        if (place == NULL) {
            break;
        }
        s->place = place;
        build(s, 0, pushed * 1200);
        s->place = NULL;
        sp_span_queue_commit_placed(q, s);
        build(s, 0, pushed * 1200 + 500);
        sp_span_queue_push(q, s);
    }
    for (k = 0; sp_span_queue_has_room(q); k++) {
        build(s, 0, pushed * 1200 + 500);       /* about 500 bytes */
        sp_span_queue_push(q, s);
    }
    ok(pushed > 10 && k > 40,
       "concurrent producers: no slot once the queue is half full (%zu slots), with room for %zu spans left",
       pushed, k);
    sp_span_queue_destroy(q);

    /* With concurrent producers a record reserved for more than it holds,
     * after which another was reserved, leaves the rest as padding that
     * the consumer skips, and that is zero again after its release; with
     * none after it, the head takes the rest back. */
    sp_record_ring_init(&r, 4096, 0);
    a = sp_record_ring_reserve_upto(&r, 2000);
    c = sp_record_ring_reserve(&r, 100);
    memset(c, 0x5c, 100);
    sp_record_ring_commit(&r, c);
    memset(a, 0x3a, 100);
    sp_record_ring_shrink(&r, a, 100);
    sp_record_ring_commit(&r, a);
    is_int(sp_record_ring_peek(&r, recs, 8), 2, "shrunk record and the one after: two records");
    ok(recs[0] == a && recs[1] == c, "the padding between them skipped");
    sp_record_ring_release(&r, 2);
    ok(ring_zero(&r), "all bytes zero after the release");
    a = sp_record_ring_reserve_upto(&r, 2000);
    memset(a, 0x3a, 100);
    sp_record_ring_shrink(&r, a, 100);
    c = sp_record_ring_reserve(&r, 100);
    ok((unsigned char *) c == (unsigned char *) a + 104 + 8,
       "nothing reserved after it: the next record follows the shrunk one");
    sp_record_ring_commit(&r, a);
    sp_record_ring_commit(&r, c);
    is_int(sp_record_ring_peek(&r, recs, 8), 2, "both read");
    sp_record_ring_release(&r, 2);
    sp_record_ring_free(&r);
    whole = 1;

    sp_record_ring_init(&r, 4096, 1);
    for (i = 0; i < 40; i++) {
        a = sp_record_ring_reserve(&r, 392);
        memset(a, 0xab, 392);
        is_int(sp_record_ring_commit(&r, a), 1, "one thread: record %d commits, 1 waiting", (int) i);
        is_int(sp_record_ring_peek(&r, recs, 8), 1, "one thread: record %d back", (int) i);
        sp_record_ring_release(&r, 1);
    }
    for (k = 0, whole = 0; k < sp_record_ring_capacity(&r); k++) {
        whole |= r.buf[k] != 0;
    }
    ok(whole, "one thread: released bytes are left as they were");
    whole = 1;
    is_int(sp_record_ring_pending(&r), 0, "one thread: nothing pending");
    sp_record_ring_free(&r);

    /* Concurrent producers of every size, across many wraps. */
    q = sp_span_queue_create(64, 0);
    for (t = 0; t < PRODUCERS; t++) {
        pthread_create(&th[t], NULL, producer, (void *) t);
    }
    while (got < (uint64_t) PRODUCERS * PER_THREAD) {
        n = sp_span_queue_peek(q, out, 64);
        for (k = 0; k < n; k++) {
            d = span_rec_decode(out[k]);
            if (d == NULL) {
                whole = 0;
                continue;
            }
            if (d->kind >= PRODUCERS
                || d->start_time_unix_nano != next[d->kind])
            {
                in_order = 0;
            } else {
                whole &= same_as_pbuilt(out[k], d->kind, next[d->kind]);
                next[d->kind]++;
            }
            opentelemetry__proto__trace__v1__span__free_unpacked(d, NULL);
        }
        sp_span_queue_release(q, n);
        got += n;
    }
    for (t = 0; t < PRODUCERS; t++) {
        pthread_join(th[t], NULL);
    }
    ok(in_order, "every span once, in each producer's order");
    ok(whole, "every span arrived whole");
    for (t = 0; t < PRODUCERS; t++) {
        is_int(next[t], PER_THREAD, "producer %d: all spans arrived", (int) t);
    }
    is_int(sp_span_queue_pending(q), 0, "nothing left behind");

    sp_span_queue_destroy(q);
    free(s);
    return done_testing();
}
