#ifndef SP_ALLOC_TABLE_H
#define SP_ALLOC_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"

/* The live table of sampled allocations: address -> (size, stack, labels),
 * from the sampled malloc until its free. Bounded and lock-free, so that
 * any thread may insert and remove from inside an allocator hook and a
 * fork() never inherits a held lock:
 *  - open addressing with linear probing over a power-of-two array, at most
 *    probe_max slots from an address's home slot: an insert that finds no
 *    free slot there is refused and counted (table full);
 *  - a slot's key is EMPTY (never used), a TOMBSTONE (freed), BUSY (an
 *    insert is filling it) or the address. Insert claims the first EMPTY or
 *    TOMBSTONE slot with a CAS to BUSY, writes the value, then publishes the
 *    address (release). Remove CASes the address to TOMBSTONE. A slot never
 *    goes back to EMPTY, so a lookup stops at the first EMPTY slot;
 *  - a live address is in at most one slot: the hooks remove an address
 *    before the real free() (after it, the allocator may hand the address
 *    to another thread, which may sample and insert it again);
 *  - a counting filter (a counter per address hash, incremented before an
 *    address is published, decremented after it is removed) answers "can
 *    this address be in the table?" with one load, so that free() of an
 *    unsampled block skips the probing.
 * The exporter walks the slots without stopping the writers; a slot that
 * changed while it was read is skipped. */

#define SP_ALLOC_TABLE_PROBE_MAX  64

typedef struct {
    uint64_t   size;          /* requested bytes */
    uint64_t   mean;          /* the sampling interval it was sampled at */
    uint32_t   stack_id;      /* alloc_stacks.h */
    uint8_t    has_ctx;
    uint8_t    keep_pending;  /* labels wait for a keep verdict */
    uint8_t    trace_id[SP_TRACE_ID_LEN];
    uint8_t    span_id[SP_SPAN_ID_LEN];
} sp_alloc_live_t;

typedef struct {
    _Atomic uintptr_t  key;
    _Atomic uint32_t   seq;        /* odd while an insert writes v */
    sp_alloc_live_t    v;
} sp_alloc_slot_t;

typedef struct {
    size_t               mask;
    unsigned             shift;          /* 64 - log2(capacity) */
    size_t               probe_max;
    sp_alloc_slot_t     *slots;
    _Atomic uint16_t    *filter;
    size_t               filter_shift;   /* 64 - log2(filter size) */
    _Atomic uint64_t     live;
    _Atomic uint64_t     full;           /* inserts refused */
} sp_alloc_table_t;

#define SP_ALLOC_TABLE_MIN  64
#define SP_ALLOC_TABLE_MAX  32768    /* so that a 16-bit filter counter
                                        never overflows */

/* capacity rounds up to a power of two within MIN..MAX; the filter gets
 * two 16-bit counters per slot (64 KiB for 16384 slots). 0, or -1 out of
 * memory. */
int  sp_alloc_table_init(sp_alloc_table_t *t, size_t capacity);
void sp_alloc_table_free(sp_alloc_table_t *t);
/* Empties the table; no other thread may use it meanwhile. */
void sp_alloc_table_clear(sp_alloc_table_t *t);

/* 0, or -1 when full (counted). addr must not be 0..3 or already in. */
int  sp_alloc_table_insert(sp_alloc_table_t *t, uintptr_t addr,
    const sp_alloc_live_t *v);
/* 1 and *out filled (if out) when addr was in the table, 0 if not. */
int  sp_alloc_table_remove(sp_alloc_table_t *t, uintptr_t addr,
    sp_alloc_live_t *out);

static inline size_t
sp_alloc_table_filter_index(const sp_alloc_table_t *t, uintptr_t addr)
{
    return (size_t) (((uint64_t) addr * 0x9e3779b97f4a7c15ull)
                     >> t->filter_shift);
}

/* The free() fast path: 0 means addr is certainly not in the table. */
static inline int
sp_alloc_table_maybe(const sp_alloc_table_t *t, uintptr_t addr)
{
    return atomic_load_explicit(&t->filter[sp_alloc_table_filter_index(t,
                                           addr)], memory_order_relaxed) != 0;
}

/* Calls cb for every live entry (a consistent copy of each); returns how
 * many. For the exporter thread; writers keep going. */
size_t sp_alloc_table_each(sp_alloc_table_t *t,
    void (*cb)(uintptr_t addr, const sp_alloc_live_t *v, void *arg),
    void *arg);

static inline uint64_t
sp_alloc_table_live(sp_alloc_table_t *t)
{
    return atomic_load_explicit(&t->live, memory_order_relaxed);
}

static inline uint64_t
sp_alloc_table_full(sp_alloc_table_t *t)
{
    return atomic_load_explicit(&t->full, memory_order_relaxed);
}

#endif
