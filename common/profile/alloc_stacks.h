#ifndef SP_ALLOC_STACKS_H
#define SP_ALLOC_STACKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Interned call stacks of sampled allocations, so that the live table and
 * the sample ring carry a 32-bit id instead of the frames. Insert-only,
 * bounded and lock-free (any thread, from inside an allocator hook; fork
 * safe): open addressing keyed by a hash of the frames; a stack that finds
 * no slot within the probe limit gets SP_ALLOC_STACK_NONE and is counted.
 * An id stays valid (and its frames unchanged) until the table is freed.
 * Two threads interning the same new stack at once may get two ids: the
 * exporter merges by frames anyway. */

#define SP_ALLOC_STACK_NONE  UINT32_MAX

typedef struct {
    _Atomic uint64_t   key;        /* 0 empty, 1 being filled, else hash */
    uint32_t           nframes;
} sp_alloc_stack_slot_t;

typedef struct {
    size_t                  mask;
    unsigned                max_depth;
    sp_alloc_stack_slot_t  *slots;
    uintptr_t              *frames;   /* [capacity][max_depth] */
    _Atomic uint64_t        used;
    _Atomic uint64_t        full;     /* stacks refused */
} sp_alloc_stacks_t;

int  sp_alloc_stacks_init(sp_alloc_stacks_t *s, size_t capacity,
    unsigned max_depth);
void sp_alloc_stacks_free(sp_alloc_stacks_t *s);

/* n is clamped to max_depth. */
uint32_t sp_alloc_stacks_intern(sp_alloc_stacks_t *s, const uintptr_t *frames,
    unsigned n);

/* The frames of id (0 frames for NONE or an id not yet published). */
unsigned sp_alloc_stacks_get(const sp_alloc_stacks_t *s, uint32_t id,
    const uintptr_t **frames);

#endif
