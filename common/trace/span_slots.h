#ifndef SP_SPAN_SLOTS_H
#define SP_SPAN_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/span_queue.h"

/* Span queues shared by a server's processes: one queue per producing
 * process (a prefork child), all in one shared mapping the server's parent
 * makes before it forks, drained by one consuming process (an exporter
 * process): a child then writes its spans where the exporter reads them,
 * and needs neither a thread nor a connection of its own.
 *
 * A process is known by its pid and its start time: one whose pid another
 * process has since been given is gone.
 *
 * A process takes a free slot (or one whose process is gone) and writes
 * into its queue for as long as it lives; a process killed between a
 * span's reservation and its commit leaves a record that holds the queue
 * back. The next process to take the slot notes where the queue's head
 * was (the end of what the gone one reserved), and the consumer turns
 * such a record into padding up to there (sp_span_slots_stats_t.sealed)
 * and reads on. One process at a time is the consumer
 * (sp_span_slots_consumer_start): one taking over from one that let go or
 * is gone (killed) reads again the spans that one read and did not
 * release. */

typedef struct sp_span_slots sp_span_slots_t;

/* nslots queues of bytes_per_slot bytes each (a power of two, at least 4
 * KiB), in a MAP_SHARED mapping of which only the pages used are ever
 * touched; NULL on failure. In the parent, before it forks. */
sp_span_slots_t *sp_span_slots_create(size_t nslots, size_t bytes_per_slot);
/* In the process that created it, once no other uses it. */
void sp_span_slots_destroy(sp_span_slots_t *s);
size_t sp_span_slots_count(const sp_span_slots_t *s);
/* Bytes of each slot's queue. */
size_t sp_span_slots_queue_bytes(const sp_span_slots_t *s);
/* Slots held by a process that is still there (one that exited without
 * letting its slot go is not counted once it is gone). */
size_t sp_span_slots_live(const sp_span_slots_t *s);

/* Producer process: takes a free slot, or one whose process is gone, for
 * pid: returns its queue (spans pushed or placed as into any queue with
 * concurrent producers) and the slot's number; NULL when every slot is
 * held by a live process. */
sp_span_queue_t *sp_span_slots_claim(sp_span_slots_t *s, int32_t pid,
    int *slot);
/* Producer process, at its exit: the slot is free again. */
void sp_span_slots_release(sp_span_slots_t *s, int slot);

/* Consumer: taking over the queues, for pid: 0 when it is now the
 * consumer (the first one, or one after a consumer that let go or is
 * gone: what that one read and did not release is read again), -1 while
 * another live process is. */
int sp_span_slots_consumer_start(sp_span_slots_t *s, int32_t pid);
/* Consumer: lets go (the next one may start). */
void sp_span_slots_consumer_stop(sp_span_slots_t *s, int32_t pid);

/* Consumer: takes up to n of the spans given (in order) and returns how
 * many it took; fewer when it has no room for more (the rest are given
 * again at the next drain). */
typedef size_t (*sp_span_slots_take_fn)(void *data,
    const sp_span_rec_t *const *recs, size_t n);

/* Consumer: gives take() the committed spans of every slot, slot after
 * slot from where the last drain stopped, up to max in all, and releases
 * those taken. Returns how many were taken. */
size_t sp_span_slots_drain(sp_span_slots_t *s, sp_span_slots_take_fn take,
    void *data, size_t max);

typedef struct {
    uint64_t  committed;    /* spans queued, all slots, since creation */
    uint64_t  dropped;      /* refused: a slot's queue full */
    uint64_t  sealed;       /* records of processes killed mid-span */
    uint64_t  rewinds;      /* span_queue.h */
    uint64_t  pending;      /* spans waiting */
    uint64_t  held;         /* slots held by a process now */
    uint64_t  claims;       /* slots taken since creation */
} sp_span_slots_stats_t;

/* Any process; approximate while producers write. */
void sp_span_slots_get_stats(const sp_span_slots_t *s,
    sp_span_slots_stats_t *st);

#endif
