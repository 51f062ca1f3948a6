/* The span queue under concurrent producers: every committed span reaches
 * the consumer exactly once and in each producer's order; a full queue drops
 * and counts instead of blocking. */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "common/span_queue.h"

#define PRODUCERS  4
#define PER_THREAD 20000

static sp_span_queue_t  *q;

static void *
producer(void *arg)
{
    uintptr_t   id = (uintptr_t) arg;
    uint64_t    i;
    sp_span_t  *s;

    for (i = 0; i < PER_THREAD; ) {
        s = sp_span_queue_reserve(q);
        if (s == NULL) {
            continue;           /* full: the consumer will catch up */
        }
        s->start_ns = i;
        s->kind = (uint8_t) id;
        sp_span_queue_commit(q, s);
        i++;
    }
    return NULL;
}

int
main(void)
{
    pthread_t   th[PRODUCERS];
    sp_span_t  *out[64];
    uint64_t    next[PRODUCERS] = { 0 }, got = 0, dropped_before;
    int         in_order = 1;
    size_t      n, i;
    uintptr_t   t;

    q = sp_span_queue_create(100);
    ok(q != NULL, "queue created");
    is_int(sp_span_queue_capacity(q), 128, "capacity rounds up to a power of two");

    /* Fill to the brim: the 129th reservation is a counted drop. */
    for (i = 0; i < 128; i++) {
        sp_span_queue_commit(q, sp_span_queue_reserve(q));
    }
    dropped_before = sp_span_queue_dropped(q);
    ok(sp_span_queue_reserve(q) == NULL, "full queue refuses a slot");
    is_int(sp_span_queue_dropped(q), dropped_before + 1, "and counts the drop");
    is_int(sp_span_queue_pending(q), 128, "128 pending");
    n = sp_span_queue_peek(q, out, 64);
    is_int(n, 64, "peek returns at most max");
    sp_span_queue_release(q, 64);
    n = sp_span_queue_peek(q, out, 64);
    sp_span_queue_release(q, n);
    is_int(sp_span_queue_pending(q), 0, "drained");

    /* A reserved but uncommitted slot holds back the consumer, in order. */
    {
        sp_span_t *a = sp_span_queue_reserve(q), *b = sp_span_queue_reserve(q);
        sp_span_queue_commit(q, b);
        is_int(sp_span_queue_peek(q, out, 64), 0,
               "nothing readable before the first reserved slot commits");
        sp_span_queue_commit(q, a);
        is_int(sp_span_queue_peek(q, out, 64), 2, "both readable after");
        sp_span_queue_release(q, 2);
    }

    for (t = 0; t < PRODUCERS; t++) {
        pthread_create(&th[t], NULL, producer, (void *) t);
    }
    while (got < (uint64_t) PRODUCERS * PER_THREAD) {
        n = sp_span_queue_peek(q, out, 64);
        for (i = 0; i < n; i++) {
            if (out[i]->kind >= PRODUCERS
                || out[i]->start_ns != next[out[i]->kind])
            {
                in_order = 0;
            } else {
                next[out[i]->kind]++;
            }
        }
        sp_span_queue_release(q, n);
        got += n;
    }
    for (t = 0; t < PRODUCERS; t++) {
        pthread_join(th[t], NULL);
    }
    ok(in_order, "every span once, in each producer's order");
    for (t = 0; t < PRODUCERS; t++) {
        is_int(next[t], PER_THREAD, "producer %d: all spans arrived", (int) t);
    }
    is_int(sp_span_queue_pending(q), 0, "nothing left behind");

    sp_span_queue_destroy(q);
    return done_testing();
}
