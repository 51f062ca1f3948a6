#ifndef SP_ARENA_H
#define SP_ARENA_H

#include <stddef.h>

/* A bump allocator for the exporter's encoders: protobuf-c message
 * trees are built in it and thrown away at once with sp_arena_reset, which
 * keeps the memory for the next batch. */

typedef struct sp_arena_block sp_arena_block_t;

typedef struct {
    sp_arena_block_t  *head;
    size_t             block_size;
    int                failed;
} sp_arena_t;

void sp_arena_init(sp_arena_t *a, size_t block_size);
/* Zeroed, 16-byte aligned memory; NULL (and a->failed set) when out. */
void *sp_arena_alloc(sp_arena_t *a, size_t n);
/* A NUL-terminated copy of n bytes. */
char *sp_arena_strndup(sp_arena_t *a, const char *s, size_t n);
/* Frees all but the first block and rewinds it. */
void sp_arena_reset(sp_arena_t *a);
void sp_arena_free(sp_arena_t *a);

#endif
