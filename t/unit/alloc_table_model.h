#ifndef SP_ALLOC_TABLE_MODEL_H
#define SP_ALLOC_TABLE_MODEL_H

/* A random sequence of inserts and removes on the live table, checked
 * step by step against a plain model (an array of the addresses in the
 * table): shared by t/unit/test_alloc_table.c and fuzz/fuzz_alloc_table.c.
 * Returns 0, or the step (1-based) where table and model disagree, with
 * *why set. Addresses come from a small pool so that the same address is
 * inserted, removed and inserted again, and many share home slots. */

#include <stdint.h>
#include <string.h>

#include "common/profile/alloc_table.h"

#define MODEL_POOL  512

typedef struct {
    uintptr_t  addr[MODEL_POOL];
    uint64_t   size[MODEL_POOL];
    int        in[MODEL_POOL];
    size_t     live;
    uint64_t   refused;
} alloc_model_t;

typedef struct {
    alloc_model_t  *m;
    size_t          seen, bad;
} model_walk_t;

static void
model_walk_cb(uintptr_t addr, const sp_alloc_live_t *v, void *arg)
{
    model_walk_t  *w = arg;
    size_t         i = (size_t) (v->mean);    /* the pool index */

    w->seen++;
    if (i >= MODEL_POOL || !w->m->in[i] || w->m->addr[i] != addr
        || w->m->size[i] != v->size)
    {
        w->bad++;
    }
}

/* next(state) gives the random bytes; steps operations. */
static size_t
alloc_model_run(sp_alloc_table_t *t, alloc_model_t *m, size_t steps,
    uint32_t (*next)(void *), void *state, const char **why)
{
    size_t           step, i;
    uint32_t         r;
    sp_alloc_live_t  v, out;
    model_walk_t     w;
    int              rc;

    memset(m, 0, sizeof(*m));
    for (i = 0; i < MODEL_POOL; i++) {
        /* 16-byte aligned, a spread like a heap's, never 0..3 */
        m->addr[i] = 0x7f0000001000 + (uintptr_t) i * 48
                     + ((uintptr_t) (i % 7) << 20);
    }
    for (step = 1; step <= steps; step++) {
        r = next(state);
        i = (r >> 8) % MODEL_POOL;
        if ((r & 0xff) < 140) {
            if (m->in[i]) {
                continue;           /* a live address is not handed out */
            }
            memset(&v, 0, sizeof(v));
            v.size = (r >> 3) & 0xfff;
            v.mean = i;
            v.stack_id = (uint32_t) i;
            rc = sp_alloc_table_insert(t, m->addr[i], &v);
            if (rc == 0) {
                m->in[i] = 1;
                m->size[i] = v.size;
                m->live++;
            } else {
                m->refused++;
            }
        } else {
            rc = sp_alloc_table_remove(t, m->addr[i], &out);
            if (rc != m->in[i]) {
                *why = "remove disagrees with the model";
                return step;
            }
            if (rc && (out.size != m->size[i] || out.mean != i)) {
                *why = "remove returned another entry's value";
                return step;
            }
            if (rc) {
                m->in[i] = 0;
                m->live--;
            }
        }
        if (sp_alloc_table_live(t) != m->live) {
            *why = "live count differs from the model";
            return step;
        }
        if (sp_alloc_table_full(t) != m->refused) {
            *why = "refused inserts not counted";
            return step;
        }
        if (m->live > t->mask + 1) {
            *why = "more live entries than the capacity";
            return step;
        }
        if (step % 64 == 0 || step == steps) {
            for (i = 0; i < MODEL_POOL; i++) {
                if (m->in[i] && !sp_alloc_table_maybe(t, m->addr[i])) {
                    *why = "the filter misses a live address";
                    return step;
                }
            }
            w.m = m;
            w.seen = 0;
            w.bad = 0;
            sp_alloc_table_each(t, model_walk_cb, &w);
            if (w.seen != m->live || w.bad != 0) {
                *why = "the walk differs from the model";
                return step;
            }
        }
    }
    /* Empty it: every counter of the filter back to zero. */
    for (i = 0; i < MODEL_POOL; i++) {
        if (m->in[i] && sp_alloc_table_remove(t, m->addr[i], NULL) != 1) {
            *why = "final remove failed";
            return steps + 1;
        }
    }
    for (i = 0; i < (t->mask + 1) * 2; i++) {
        if (atomic_load(&t->filter[i]) != 0) {
            *why = "a filter counter is not back to zero";
            return steps + 1;
        }
    }
    if (sp_alloc_table_live(t) != 0) {
        *why = "live count not zero when empty";
        return steps + 1;
    }
    return 0;
}

#endif
