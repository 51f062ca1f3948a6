#include <stdlib.h>
#include <string.h>

#include "cli/serve/attr_keys.h"

/* Open addressing over twice the most keys: never full, short probes. */
#define SLOTS  (2 * SERVE_KEYS_MAX)

typedef struct {
    char    *p;
    size_t   len;
} entry_t;

struct serve_keys {
    entry_t    key[SERVE_KEYS_MAX + 1];      /* by number; 0 unused */
    size_t    n;
    uint16_t  slot[SLOTS];                  /* key numbers, 0: empty */
};

static uint32_t
hash(const char *p, size_t len)
{
    uint32_t  h = 2166136261u;
    size_t    i;

    for (i = 0; i < len; i++) {
        h = (h ^ (uint8_t) p[i]) * 16777619u;
    }
    return h;
}

serve_keys_t *
serve_keys_new(void)
{
    return calloc(1, sizeof(serve_keys_t));
}

void
serve_keys_free(serve_keys_t *k)
{
    if (k != NULL) {
        serve_keys_truncate(k, 0);
        free(k);
    }
}

uint32_t
serve_keys_find(const serve_keys_t *k, const char *p, size_t len)
{
    uint32_t  i = hash(p, len) % SLOTS, id;

    while ((id = k->slot[i]) != 0) {
        if (k->key[id].len == len && memcmp(k->key[id].p, p, len) == 0) {
            return id;
        }
        i = (i + 1) % SLOTS;
    }
    return 0;
}

static void
place(serve_keys_t *k, uint32_t id)
{
    uint32_t  i = hash(k->key[id].p, k->key[id].len) % SLOTS;

    while (k->slot[i] != 0) {
        i = (i + 1) % SLOTS;
    }
    k->slot[i] = (uint16_t) id;
}

uint32_t
serve_keys_add(serve_keys_t *k, const char *p, size_t len)
{
    char  *copy;

    if (k->n >= SERVE_KEYS_MAX || len > SERVE_KEY_MAX_LEN
        || (copy = malloc(len + 1)) == NULL)
    {
        return 0;
    }
    memcpy(copy, p, len);
    copy[len] = '\0';
    k->n++;
    k->key[k->n].p = copy;
    k->key[k->n].len = len;
    place(k, (uint32_t) k->n);
    return (uint32_t) k->n;
}

const char *
serve_keys_get(const serve_keys_t *k, uint32_t id, size_t *len)
{
    if (k == NULL || id == 0 || id > k->n) {
        return NULL;
    }
    *len = k->key[id].len;
    return k->key[id].p;
}

size_t
serve_keys_count(const serve_keys_t *k)
{
    return k->n;
}

void
serve_keys_truncate(serve_keys_t *k, size_t n)
{
    uint32_t  id;

    if (n >= k->n) {
        return;
    }
    for (id = (uint32_t) n + 1; id <= k->n; id++) {
        free(k->key[id].p);
        k->key[id].p = NULL;
    }
    k->n = n;
    /* Rare (a batch rolled back): the slots are rebuilt. */
    memset(k->slot, 0, sizeof(k->slot));
    for (id = 1; id <= k->n; id++) {
        place(k, id);
    }
}
