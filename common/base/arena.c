#include <stdlib.h>
#include <string.h>

#include "common/base/arena.h"

struct sp_arena_block {
    sp_arena_block_t  *next;
    size_t             size;
    size_t             used;
    _Alignas(16) unsigned char  data[];
};

void
sp_arena_init(sp_arena_t *a, size_t block_size)
{
    a->head = NULL;
    a->block_size = block_size ? block_size : 64 * 1024;
    a->failed = 0;
}

void *
sp_arena_alloc(sp_arena_t *a, size_t n)
{
    sp_arena_block_t  *b = a->head;
    size_t             size;
    void              *p;

    n = (n + 15) & ~(size_t) 15;
    if (b == NULL || b->size - b->used < n) {
        size = n > a->block_size ? n : a->block_size;
        b = malloc(sizeof(*b) + size);
        if (b == NULL) {
            a->failed = 1;
            return NULL;
        }
        b->size = size;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *
sp_arena_strndup(sp_arena_t *a, const char *s, size_t n)
{
    char  *p = sp_arena_alloc(a, n + 1);

    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void
sp_arena_reset(sp_arena_t *a)
{
    sp_arena_block_t  *b, *next;

    if (a->head == NULL) {
        return;
    }
    /* Keep the oldest block (the last in the list), which is of block_size
     * unless a single huge allocation made it. */
    for (b = a->head; b->next != NULL; b = next) {
        next = b->next;
        free(b);
    }
    a->head = b;
    b->used = 0;
    a->failed = 0;
}

void
sp_arena_free(sp_arena_t *a)
{
    sp_arena_block_t  *b, *next;

    for (b = a->head; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
}
