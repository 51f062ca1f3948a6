/* The thread context record pool: a record comes out invalid and owned by
 * one taker at a time, a given-back record is marked invalid and stays
 * readable (never freed: ASan would report a stale read of freed memory),
 * a thread reuses the last two records it gave back (its cache) before
 * the shared list, where given-back records are reused oldest first, an
 * exiting thread hands its cache back, and under threads taking and giving
 * back at once no record has two owners and the slabs stay bounded by the
 * most records in use. */

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "common/profile/record_pool.h"

#define THREADS     4
#define ROUNDS      20000
#define HELD        8

static int               overlaps;
static pthread_mutex_t   overlap_lock = PTHREAD_MUTEX_INITIALIZER;

static void *
churn(void *arg)
{
    unsigned                 id = (unsigned) (uintptr_t) arg, i, k;
    sp_thread_ctx_record_t  *held[HELD] = { NULL };
    uint8_t                  tid[SP_TRACE_ID_LEN], sid[SP_SPAN_ID_LEN];

    for (i = 0; i < ROUNDS; i++) {
        k = i % HELD;
        if (held[k] != NULL) {
            /* still ours: nobody else refilled it meanwhile */
            if (held[k]->trace_id[0] != (uint8_t) id
                || held[k]->span_id[0] != (uint8_t) k)
            {
                pthread_mutex_lock(&overlap_lock);
                overlaps++;
                pthread_mutex_unlock(&overlap_lock);
            }
            sp_record_pool_put(held[k]);
        }
        held[k] = sp_record_pool_get();
        if (held[k] == NULL) {
            continue;
        }
        memset(tid, (int) id, sizeof(tid));
        memset(sid, (int) k, sizeof(sid));
        sp_thread_ctx_record_init(held[k], tid, sid, 1, "GET /x", 6);
    }
    for (k = 0; k < HELD; k++) {
        sp_record_pool_put(held[k]);
    }
    return NULL;
}

int
main(void)
{
    static const uint8_t     tid[SP_TRACE_ID_LEN] = { 1 };
    static const uint8_t     sid[SP_SPAN_ID_LEN] = { 2 };
    sp_thread_ctx_record_t  *a, *b, *c, *d, *e;
    pthread_t                th[THREADS];
    size_t                   made, free_now, failed, i, held_here;
    int                      distinct = 1;

    a = sp_record_pool_get();
    ok(a != NULL && a->valid == 0, "a new record is not valid");
    sp_thread_ctx_record_init(a, tid, sid, 1, "GET /a", 6);
    ok(a->valid == 1, "filled, it is valid");

    /* A thread left pointing at it (the h2 worker) reads it after it is
     * given back: still our memory, and marked invalid. */
    sp_record_pool_put(a);
    ok(a->valid == 0, "given back: a stale reader sees it invalid");
    ok(a->trace_id[0] == 1, "... and reads memory that was not freed");

    sp_record_pool_stats(&made, &free_now, &failed);
    ok(made > 1 && free_now == made - 1, "%zu records free on the shared "
       "list, the one given back in this thread's cache", free_now);
    b = sp_record_pool_get();
    ok(b == a, "this thread takes the record it gave back first");
    c = sp_record_pool_get();
    ok(c != a, "... and then one from the shared list");
    d = sp_record_pool_get();
    e = sp_record_pool_get();
    sp_record_pool_put(a);
    sp_record_pool_put(c);
    sp_record_pool_put(d);
    sp_record_pool_stats(&made, &free_now, &failed);
    ok(free_now == made - 3, "the cache holds two records: a third given "
       "back goes to the shared list");
    b = sp_record_pool_get();
    ok(b == c && sp_record_pool_get() == a,
       "the cache is reused last in, first out");

    /* The shared list, oldest first: c goes there last (the cache is
     * full), so every other free record is handed out before it. */
    sp_record_pool_put(e);
    sp_record_pool_put(a);
    sp_record_pool_put(c);
    ok(sp_record_pool_get() == a && sp_record_pool_get() == e,
       "the cache holds the first two given back");
    sp_record_pool_stats(&made, &free_now, &failed);
    for (i = 0; i + 1 < free_now; i++) {
        b = sp_record_pool_get();
        if (b == c) {
            distinct = 0;
        }
    }
    ok(distinct, "the record given back last is reused last");
    b = sp_record_pool_get();
    ok(b == c, "... once the older ones are taken");
    sp_record_pool_stats(&made, &free_now, &failed);
    is_int(free_now, 0, "none free");
    b = sp_record_pool_get();
    ok(b != NULL && b != a && b != c, "an empty pool grows a slab");
    sp_record_pool_put(NULL);
    ok(1, "giving back NULL is ignored");
    held_here = made + 1;

    for (i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, churn, (void *) (uintptr_t) (i + 1));
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    is_int(overlaps, 0, "%d threads taking and giving back: no record had "
           "two owners", THREADS);
    sp_record_pool_stats(&made, &free_now, &failed);
    ok(made <= 2 * 64, "no slab beyond the two made before: "
       "%d in use at most, %d in caches (%zu made)", THREADS * HELD,
       THREADS * 2, made);
    /* This thread holds every record of the first slab and b; the exited
     * threads' caches went back to the shared list. */
    ok(free_now == made - held_here, "the exited threads' caches were "
       "given back: %zu free of %zu made, %zu held here", free_now, made,
       held_here);
    is_int(failed, 0, "no get went without a record");

    return done_testing();
}
