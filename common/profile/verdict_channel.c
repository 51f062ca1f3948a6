#include <stdlib.h>

#include "common/profile/verdict_channel.h"

int
sp_verdict_channel_init(sp_verdict_channel_t *ch, size_t capacity)
{
    size_t  cap = 2, i;

    while (cap < capacity) {
        cap *= 2;
    }
    ch->cells = malloc(cap * sizeof(*ch->cells));
    if (ch->cells == NULL) {
        return -1;
    }
    for (i = 0; i < cap; i++) {
        atomic_init(&ch->cells[i].seq, i);
    }
    ch->mask = cap - 1;
    atomic_init(&ch->head, 0);
    atomic_init(&ch->tail, 0);
    return 0;
}

void
sp_verdict_channel_free(sp_verdict_channel_t *ch)
{
    free(ch->cells);
    ch->cells = NULL;
}

int
sp_verdict_channel_push(sp_verdict_channel_t *ch, const sp_verdict_t *v)
{
    sp_verdict_cell_t  *c;
    size_t              pos, seq;
    intptr_t            dif;

    pos = atomic_load_explicit(&ch->head, memory_order_relaxed);
    for ( ;; ) {
        c = &ch->cells[pos & ch->mask];
        seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        dif = (intptr_t) seq - (intptr_t) pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&ch->head, &pos,
                    pos + 1, memory_order_relaxed, memory_order_relaxed))
            {
                break;
            }
        } else if (dif < 0) {
            return -1;                  /* full */
        } else {
            pos = atomic_load_explicit(&ch->head, memory_order_relaxed);
        }
    }
    c->v = *v;
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
    return 0;
}

size_t
sp_verdict_channel_take(sp_verdict_channel_t *ch, sp_verdict_t *out,
    size_t max)
{
    sp_verdict_cell_t  *c;
    size_t              pos, n = 0;

    if (ch->cells == NULL) {
        return 0;
    }
    pos = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    while (n < max) {
        c = &ch->cells[pos & ch->mask];
        /* A cell claimed but not yet written stops the take: it and what
         * follows it come next time. */
        if (atomic_load_explicit(&c->seq, memory_order_acquire) != pos + 1) {
            break;
        }
        out[n++] = c->v;
        atomic_store_explicit(&c->seq, pos + ch->mask + 1,
                              memory_order_release);
        pos++;
    }
    atomic_store_explicit(&ch->tail, pos, memory_order_relaxed);
    return n;
}
