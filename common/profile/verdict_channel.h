#ifndef SP_VERDICT_CHANNEL_H
#define SP_VERDICT_CHANNEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"

/* A bounded lock-free queue of keep verdicts (span id, kept or not) from
 * the threads that end requests to the one consumer that builds profiles
 * (D. Vyukov's bounded MPMC queue, used with one consumer). A push is one
 * CAS and never waits; a full queue refuses the verdict (the caller counts
 * it). Capacity is a power of two, allocated once. */

typedef struct {
    uint8_t   span_id[SP_SPAN_ID_LEN];
    uint8_t   keep;
} sp_verdict_t;

typedef struct {
    _Atomic size_t  seq;
    sp_verdict_t    v;
} sp_verdict_cell_t;

typedef struct {
    sp_verdict_cell_t  *cells;
    size_t              mask;
    _Atomic size_t      head;          /* next to push */
    _Atomic size_t      tail;          /* next to take (consumer only) */
} sp_verdict_channel_t;

/* capacity is rounded up to a power of two (at least 2). 0, or -1. */
int sp_verdict_channel_init(sp_verdict_channel_t *ch, size_t capacity);
void sp_verdict_channel_free(sp_verdict_channel_t *ch);

/* Any thread, async-signal-safe. 0, or -1 when full. */
int sp_verdict_channel_push(sp_verdict_channel_t *ch, const sp_verdict_t *v);

/* The one consumer: up to max verdicts, oldest first. */
size_t sp_verdict_channel_take(sp_verdict_channel_t *ch, sp_verdict_t *out,
    size_t max);

#endif
