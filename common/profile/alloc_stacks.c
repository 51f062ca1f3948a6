#include <stdlib.h>
#include <string.h>

#include "common/profile/alloc_stacks.h"

#define PROBE_MAX  32
#define KEY_EMPTY  0
#define KEY_BUSY   1


int
sp_alloc_stacks_init(sp_alloc_stacks_t *s, size_t capacity,
    unsigned max_depth)
{
    size_t  n = 64;

    while (n < capacity && n < (1u << 20)) {
        n <<= 1;
    }
    memset(s, 0, sizeof(*s));
    s->mask = n - 1;
    s->max_depth = max_depth ? max_depth : 1;
    s->slots = calloc(n, sizeof(*s->slots));
    s->frames = calloc(n * s->max_depth, sizeof(uintptr_t));
    if (s->slots == NULL || s->frames == NULL) {
        sp_alloc_stacks_free(s);
        return -1;
    }
    return 0;
}

void
sp_alloc_stacks_free(sp_alloc_stacks_t *s)
{
    free(s->slots);
    free(s->frames);
    s->slots = NULL;
    s->frames = NULL;
}

static uint64_t
hash_frames(const uintptr_t *f, unsigned n)
{
    uint64_t  h = 0xcbf29ce484222325ull ^ n;
    unsigned  i;

    for (i = 0; i < n; i++) {
        h ^= (uint64_t) f[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h < 2 ? h + 2 : h;
}

uint32_t
sp_alloc_stacks_intern(sp_alloc_stacks_t *s, const uintptr_t *frames,
    unsigned n)
{
    uint64_t                h, k;
    size_t                  i, idx;
    sp_alloc_stack_slot_t  *sl;
    uintptr_t              *f;

    if (n > s->max_depth) {
        n = s->max_depth;
    }
    h = hash_frames(frames, n);
    for (i = 0; i < PROBE_MAX && i <= s->mask; i++) {
        idx = (size_t) (h + i) & s->mask;
        sl = &s->slots[idx];
        f = s->frames + idx * s->max_depth;
        k = atomic_load_explicit(&sl->key, memory_order_acquire);
        if (k == h && sl->nframes == n
            && memcmp(f, frames, n * sizeof(uintptr_t)) == 0)
        {
            return (uint32_t) idx;
        }
        if (k != KEY_EMPTY) {
            continue;
        }
        if (!atomic_compare_exchange_strong_explicit(&sl->key, &k, KEY_BUSY,
                memory_order_acquire, memory_order_relaxed))
        {
            continue;
        }
        memcpy(f, frames, n * sizeof(uintptr_t));
        sl->nframes = n;
        atomic_store_explicit(&sl->key, h, memory_order_release);
        atomic_fetch_add_explicit(&s->used, 1, memory_order_relaxed);
        return (uint32_t) idx;
    }
    atomic_fetch_add_explicit(&s->full, 1, memory_order_relaxed);
    return SP_ALLOC_STACK_NONE;
}

unsigned
sp_alloc_stacks_get(const sp_alloc_stacks_t *s, uint32_t id,
    const uintptr_t **frames)
{
    const sp_alloc_stack_slot_t  *sl;
    uint64_t                      k;

    *frames = NULL;
    if (id == SP_ALLOC_STACK_NONE || id > s->mask) {
        return 0;
    }
    sl = &s->slots[id];
    k = atomic_load_explicit(&((sp_alloc_stack_slot_t *) sl)->key,
                             memory_order_acquire);
    if (k == KEY_EMPTY || k == KEY_BUSY) {
        return 0;
    }
    *frames = s->frames + (size_t) id * s->max_depth;
    return sl->nframes;
}
