#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/record_pool.h"

#define SP_RECORD_POOL_SLAB   64
#define SP_RECORD_POOL_CACHE  2

/* The record first, so that a record's address is its entry's. */
typedef struct sp_record_entry_s  sp_record_entry_t;

struct sp_record_entry_s {
    sp_thread_ctx_record_t   rec;
    sp_record_entry_t       *next;
};

/* The slabs stay linked here: never freed, yet never a leak. */
typedef struct sp_record_slab_s  sp_record_slab_t;

struct sp_record_slab_s {
    sp_record_slab_t   *prev;
    sp_record_entry_t   entries[SP_RECORD_POOL_SLAB];
};

/* A thread's own few free records: a request's record is usually given
 * back on the thread that took it (its pool's cleanup), which takes one
 * again for its next request, with no lock either way. state: 0 not set
 * up yet, 1 in use (the thread-exit destructor is registered), -1 no
 * cache (the key could not be made, or the thread is exiting). Never
 * read by a signal handler. */
typedef struct {
    sp_record_entry_t  *e[SP_RECORD_POOL_CACHE];
    unsigned            n;
    int                 state;
} sp_record_cache_t;

static pthread_mutex_t     sp_record_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static sp_record_slab_t   *sp_record_pool_slabs;
static sp_record_entry_t  *sp_record_pool_head;     /* oldest free */
static sp_record_entry_t  *sp_record_pool_tail;
static size_t              sp_record_pool_made;
static size_t              sp_record_pool_free;
static size_t              sp_record_pool_failed;  /* no record: no memory */

static __thread sp_record_cache_t  sp_record_cache;
static pthread_once_t      sp_record_pool_once = PTHREAD_ONCE_INIT;
static pthread_key_t       sp_record_pool_key;
static int                 sp_record_pool_key_ok;


/* Called with the lock held: a new slab, never freed, on the free list. */
static int
sp_record_pool_grow(void)
{
    size_t              i;
    sp_record_slab_t   *sl;
    sp_record_entry_t  *slab;

    sl = calloc(1, sizeof(sp_record_slab_t));
    if (sl == NULL) {
        return -1;
    }
    sl->prev = sp_record_pool_slabs;
    sp_record_pool_slabs = sl;
    slab = sl->entries;
    for (i = 0; i < SP_RECORD_POOL_SLAB; i++) {
        slab[i].next = i + 1 < SP_RECORD_POOL_SLAB ? &slab[i + 1] : NULL;
    }
    if (sp_record_pool_tail != NULL) {
        sp_record_pool_tail->next = &slab[0];
    } else {
        sp_record_pool_head = &slab[0];
    }
    sp_record_pool_tail = &slab[SP_RECORD_POOL_SLAB - 1];
    sp_record_pool_made += SP_RECORD_POOL_SLAB;
    sp_record_pool_free += SP_RECORD_POOL_SLAB;
    return 0;
}


/* Called with the lock held. */
static void
sp_record_pool_append(sp_record_entry_t *e)
{
    e->next = NULL;
    if (sp_record_pool_tail != NULL) {
        sp_record_pool_tail->next = e;
    } else {
        sp_record_pool_head = e;
    }
    sp_record_pool_tail = e;
    sp_record_pool_free++;
}


/* A thread that exits (an MPM's or mod_http2's worker) gives its cached
 * records back to the shared list; a record it took and still holds for
 * a request is given back by that request's cleanup, on any thread. */
static void
sp_record_pool_thread_exit(void *data)
{
    unsigned            i;
    sp_record_cache_t  *c = data;

    pthread_mutex_lock(&sp_record_pool_lock);
    for (i = 0; i < c->n; i++) {
        sp_record_pool_append(c->e[i]);
    }
    pthread_mutex_unlock(&sp_record_pool_lock);
    c->n = 0;
    /* A cleanup that gives a record back later in this thread's exit
     * puts it on the shared list. */
    c->state = -1;
}


static void
sp_record_pool_make_key(void)
{
    sp_record_pool_key_ok =
        pthread_key_create(&sp_record_pool_key, sp_record_pool_thread_exit)
        == 0;
}


sp_thread_ctx_record_t *
sp_record_pool_get(void)
{
    sp_record_entry_t  *e = NULL;
    sp_record_cache_t  *c = &sp_record_cache;

    if (c->n > 0) {
        return &c->e[--c->n]->rec;
    }

    pthread_mutex_lock(&sp_record_pool_lock);
    if (sp_record_pool_head != NULL || sp_record_pool_grow() == 0) {
        e = sp_record_pool_head;
        sp_record_pool_head = e->next;
        if (sp_record_pool_head == NULL) {
            sp_record_pool_tail = NULL;
        }
        e->next = NULL;
        sp_record_pool_free--;
    } else {
        sp_record_pool_failed++;
    }
    pthread_mutex_unlock(&sp_record_pool_lock);
    return e != NULL ? &e->rec : NULL;
}


void
sp_record_pool_put(sp_thread_ctx_record_t *rec)
{
    sp_record_entry_t  *e = (sp_record_entry_t *) rec;
    sp_record_cache_t  *c = &sp_record_cache;

    if (rec == NULL) {
        return;
    }
    /* A thread still pointing here must see it invalid before it is
     * reused: the record's next owner refills it while it is invalid. */
    atomic_signal_fence(memory_order_seq_cst);
    rec->valid = 0;
    atomic_thread_fence(memory_order_seq_cst);

    if (c->state == 0) {
        /* This thread's first record given back: its cache is handed to
         * the shared list when it exits. */
        pthread_once(&sp_record_pool_once, sp_record_pool_make_key);
        c->state = sp_record_pool_key_ok
                   && pthread_setspecific(sp_record_pool_key, c) == 0
                   ? 1 : -1;
    }
    if (c->state == 1 && c->n < SP_RECORD_POOL_CACHE) {
        c->e[c->n++] = e;
        return;
    }

    pthread_mutex_lock(&sp_record_pool_lock);
    sp_record_pool_append(e);
    pthread_mutex_unlock(&sp_record_pool_lock);
}


void
sp_record_pool_stats(size_t *made, size_t *free_now, size_t *failed)
{
    pthread_mutex_lock(&sp_record_pool_lock);
    *made = sp_record_pool_made;
    *free_now = sp_record_pool_free;
    *failed = sp_record_pool_failed;
    pthread_mutex_unlock(&sp_record_pool_lock);
}
