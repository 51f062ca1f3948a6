#ifndef SERVE_PART_MAP_H
#define SERVE_PART_MAP_H

/* What each part of spans serve's store holds (store.c stores spans in
 * parts of consecutive spans), summed up in memory so that a query visits
 * only the parts that can answer it, whatever their number:
 * - a Bloom filter of the trace keys of the part's spans: does the part
 *   hold spans of this trace? "no", or "maybe" (about 1% of the parts
 *   that do not: one cache line read a part);
 * - the longest duration of its SERVER spans: can the part hold one of
 *   the N slowest? and the first and last start of its SERVER spans:
 *   can it hold one of a time range?
 * Both only ever err towards "maybe": a span added is always counted, a
 * span deleted or rolled back may still be. About 1.25 bytes a span. */

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t    part;
    int64_t    max_dur;         /* of its SERVER spans; INT64_MIN: none */
    int64_t    min_start, max_start;    /* of its SERVER spans */
    uint32_t   nblocks;         /* of the filter, each 8 words */
    uint64_t  *bloom;
    int        dirty;           /* changed since written to the database */
    uint64_t   written_in;      /* the transaction that wrote it */
} serve_part_t;

/* The parts' summaries, by ascending part. */
typedef struct {
    serve_part_t  *v;
    size_t         n, cap;
} serve_part_map_t;

/* The summary of a part, NULL if none. */
serve_part_t *serve_part_find(serve_part_map_t *m, int64_t part);
/* The summary of a part, added empty (a filter sized for `spans` spans,
 * dirty) if none; NULL when out of memory. */
serve_part_t *serve_part_get(serve_part_map_t *m, int64_t part,
    size_t spans);
/* A new empty summary of a part, in place of any; NULL when out of
 * memory. */
serve_part_t *serve_part_new(serve_part_map_t *m, int64_t part,
    size_t spans);
/* A summary as stored (serve_part_encode's bytes), replacing any; NULL
 * when out of memory or the bytes are not a filter. */
serve_part_t *serve_part_load(serve_part_map_t *m, int64_t part,
    int64_t max_dur, int64_t min_start, int64_t max_start,
    const void *bloom, size_t len);
/* Counts a span: its trace key, its kind (2: SERVER), start and
 * duration. */
void serve_part_add(serve_part_t *p, int64_t tkey, int kind, int64_t start,
    int64_t dur);
/* 0: the part holds no span of that trace key; 1: it may. */
int serve_part_may_hold(const serve_part_t *p, int64_t tkey);
/* The filter as stored: 8 * 8 * nblocks bytes, little-endian words. */
size_t serve_part_encoded_len(const serve_part_t *p);
void serve_part_encode(const serve_part_t *p, uint8_t *out);
/* Forgets the parts below `lo` and above `hi`. */
void serve_part_map_keep(serve_part_map_t *m, int64_t lo, int64_t hi);
void serve_part_map_free(serve_part_map_t *m);

#endif
