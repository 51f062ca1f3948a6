#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/record_pool.h"

#define SP_RECORD_POOL_SLAB  64

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

static pthread_mutex_t     sp_record_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static sp_record_slab_t   *sp_record_pool_slabs;
static sp_record_entry_t  *sp_record_pool_head;     /* oldest free */
static sp_record_entry_t  *sp_record_pool_tail;
static size_t              sp_record_pool_made;
static size_t              sp_record_pool_free;


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


sp_thread_ctx_record_t *
sp_record_pool_get(void)
{
    sp_record_entry_t  *e = NULL;

    pthread_mutex_lock(&sp_record_pool_lock);
    if (sp_record_pool_head != NULL || sp_record_pool_grow() == 0) {
        e = sp_record_pool_head;
        sp_record_pool_head = e->next;
        if (sp_record_pool_head == NULL) {
            sp_record_pool_tail = NULL;
        }
        e->next = NULL;
        sp_record_pool_free--;
    }
    pthread_mutex_unlock(&sp_record_pool_lock);
    return e != NULL ? &e->rec : NULL;
}


void
sp_record_pool_put(sp_thread_ctx_record_t *rec)
{
    sp_record_entry_t  *e = (sp_record_entry_t *) rec;

    if (rec == NULL) {
        return;
    }
    /* A thread still pointing here must see it invalid before it is
     * reused: the record's next owner refills it while it is invalid. */
    atomic_signal_fence(memory_order_seq_cst);
    rec->valid = 0;
    atomic_thread_fence(memory_order_seq_cst);

    pthread_mutex_lock(&sp_record_pool_lock);
    e->next = NULL;
    if (sp_record_pool_tail != NULL) {
        sp_record_pool_tail->next = e;
    } else {
        sp_record_pool_head = e;
    }
    sp_record_pool_tail = e;
    sp_record_pool_free++;
    pthread_mutex_unlock(&sp_record_pool_lock);
}


void
sp_record_pool_stats(size_t *made, size_t *free_now)
{
    pthread_mutex_lock(&sp_record_pool_lock);
    *made = sp_record_pool_made;
    *free_now = sp_record_pool_free;
    pthread_mutex_unlock(&sp_record_pool_lock);
}
