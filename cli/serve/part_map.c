#include <stdlib.h>
#include <string.h>

#include "cli/serve/part_map.h"

/* A blocked Bloom filter: a key sets one bit in each of the 8 words of
 * one 64-byte block (one cache line to read), at 10 bits a span: about
 * 1% false "maybe". */
#define BITS_PER_SPAN  10
#define BLOCK_BITS     512

static uint64_t
mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The block of a key, and its 8 bits (6 bits each of a second hash). */
static const uint64_t *
block_of(const serve_part_t *p, int64_t tkey, uint64_t *bits)
{
    uint64_t  h = mix64((uint64_t) tkey + 0x9e3779b97f4a7c15ULL);

    *bits = mix64(h);
    return p->bloom + (size_t) (((h >> 32) * p->nblocks) >> 32) * 8;
}

void
serve_part_add(serve_part_t *p, int64_t tkey, int kind, int64_t start,
    int64_t dur)
{
    uint64_t  *b, bits;
    int        i;

    b = (uint64_t *) block_of(p, tkey, &bits);
    for (i = 0; i < 8; i++, bits >>= 6) {
        b[i] |= 1ULL << (bits & 63);
    }
    if (kind == 2) {
        if (dur > p->max_dur) {
            p->max_dur = dur;
        }
        if (start < p->min_start) {
            p->min_start = start;
        }
        if (start > p->max_start) {
            p->max_start = start;
        }
    }
    p->dirty = 1;
}

int
serve_part_may_hold(const serve_part_t *p, int64_t tkey)
{
    const uint64_t  *b;
    uint64_t         bits;
    int              i;

    b = block_of(p, tkey, &bits);
    for (i = 0; i < 8; i++, bits >>= 6) {
        if (!(b[i] >> (bits & 63) & 1)) {
            return 0;
        }
    }
    return 1;
}

/* The index of the first summary of a part >= part. */
static size_t
lower_bound(const serve_part_map_t *m, int64_t part)
{
    size_t  lo = 0, hi = m->n, mid;

    /* Parts are added in ascending order: the newest is looked for most. */
    if (m->n > 0 && m->v[m->n - 1].part < part) {
        return m->n;
    }
    if (m->n > 0 && m->v[m->n - 1].part == part) {
        return m->n - 1;
    }
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (m->v[mid].part < part) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

serve_part_t *
serve_part_find(serve_part_map_t *m, int64_t part)
{
    size_t  i = lower_bound(m, part);

    return i < m->n && m->v[i].part == part ? &m->v[i] : NULL;
}

/* A new empty summary of nblocks blocks in place of any. */
static serve_part_t *
put(serve_part_map_t *m, int64_t part, uint32_t nblocks)
{
    size_t         i = lower_bound(m, part);
    uint64_t      *bloom;
    serve_part_t  *v;

    bloom = calloc((size_t) nblocks * 8, sizeof(uint64_t));
    if (bloom == NULL) {
        return NULL;
    }
    if (i < m->n && m->v[i].part == part) {
        free(m->v[i].bloom);
    } else {
        if (m->n == m->cap) {
            v = realloc(m->v, (m->cap ? m->cap * 2 : 64) * sizeof(*v));
            if (v == NULL) {
                free(bloom);
                return NULL;
            }
            m->v = v;
            m->cap = m->cap ? m->cap * 2 : 64;
        }
        memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
        m->n++;
    }
    memset(&m->v[i], 0, sizeof(m->v[i]));
    m->v[i].part = part;
    m->v[i].max_dur = INT64_MIN;
    m->v[i].min_start = INT64_MAX;
    m->v[i].max_start = INT64_MIN;
    m->v[i].nblocks = nblocks;
    m->v[i].bloom = bloom;
    m->v[i].dirty = 1;
    return &m->v[i];
}

serve_part_t *
serve_part_get(serve_part_map_t *m, int64_t part, size_t spans)
{
    serve_part_t  *p = serve_part_find(m, part);

    return p != NULL ? p : serve_part_new(m, part, spans);
}

serve_part_t *
serve_part_new(serve_part_map_t *m, int64_t part, size_t spans)
{
    size_t  blocks;

    blocks = (spans * BITS_PER_SPAN + BLOCK_BITS - 1) / BLOCK_BITS;
    return put(m, part, blocks < 1 ? 1 : blocks > (1u << 24) ? 1u << 24
                                         : (uint32_t) blocks);
}

serve_part_t *
serve_part_load(serve_part_map_t *m, int64_t part, int64_t max_dur,
    int64_t min_start, int64_t max_start, const void *bloom, size_t len)
{
    const uint8_t  *b = bloom;
    serve_part_t   *p;
    size_t          i;
    int             j;

    if (b == NULL || len == 0 || len % (BLOCK_BITS / 8) != 0
        || len / (BLOCK_BITS / 8) > (1u << 24))
    {
        return NULL;
    }
    p = put(m, part, (uint32_t) (len / (BLOCK_BITS / 8)));
    if (p == NULL) {
        return NULL;
    }
    for (i = 0; i < len / 8; i++) {
        for (j = 7; j >= 0; j--) {
            p->bloom[i] = p->bloom[i] << 8 | b[i * 8 + (size_t) j];
        }
    }
    p->max_dur = max_dur;
    p->min_start = min_start;
    p->max_start = max_start;
    p->dirty = 0;
    return p;
}

size_t
serve_part_encoded_len(const serve_part_t *p)
{
    return (size_t) p->nblocks * (BLOCK_BITS / 8);
}

void
serve_part_encode(const serve_part_t *p, uint8_t *out)
{
    size_t  i;
    int     j;

    for (i = 0; i < (size_t) p->nblocks * 8; i++) {
        for (j = 0; j < 8; j++) {
            *out++ = (uint8_t) (p->bloom[i] >> (8 * j));
        }
    }
}

void
serve_part_map_keep(serve_part_map_t *m, int64_t lo, int64_t hi)
{
    size_t  i, k = 0;

    for (i = 0; i < m->n; i++) {
        if (m->v[i].part < lo || m->v[i].part > hi) {
            free(m->v[i].bloom);
        } else {
            m->v[k++] = m->v[i];
        }
    }
    m->n = k;
}

void
serve_part_map_free(serve_part_map_t *m)
{
    serve_part_map_keep(m, 1, 0);
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
}
