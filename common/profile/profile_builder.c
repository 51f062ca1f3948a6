#include <stdlib.h>
#include <string.h>

#include "common/profile/keep_rules.h"
#include "common/profile/profile_builder.h"

/* An aggregated entry: one stack with one set of labels. */
typedef struct {
    uint64_t   hash;
    uint32_t   frames_off;
    uint16_t   nframes;
    uint8_t    has_span;
    uint8_t    trace_id[SP_TRACE_ID_LEN];
    uint8_t    span_id[SP_SPAN_ID_LEN];
    int32_t    name;          /* into names, -1 when none */
    uint8_t    kind;          /* sp_sample_kind_t */
    int64_t    count;
    int64_t    cpu_ns;        /* sum of weight * period */
    int64_t    off_cpu_ns;
    uint32_t   nts;
} entry_t;

typedef struct {
    uint32_t   entry;
    uint64_t   ns;
    int64_t    cpu_ns;        /* this signal's weight * its own period */
    int64_t    off_cpu_ns;
} stamp_t;

/* Open addressing map from a 64-bit key to an index. */
typedef struct {
    uint64_t  *keys;
    int32_t   *vals;
    size_t     cap, n;
} map_t;

/* Samples waiting for their span's keep verdict: copies of the raw
 * samples in one pool, each linked to the span's previous one. */
typedef struct {
    size_t     off;           /* into pend_pool; SIZE_MAX once decided */
    int32_t    prev;          /* the span's earlier pending sample, -1 */
} pend_t;

/* Spans with pending samples, or decided lately (a sample committed just
 * after its span's verdict gets that verdict). Open addressing on the
 * span id; key 0 is an empty slot (span ids are never 0). */
#define SPAN_PENDING  0
#define SPAN_KEPT     1
#define SPAN_DROPPED  2

typedef struct {
    uint64_t   key;
    int32_t    head;          /* last pending sample, -1 */
    uint8_t    state;
    uint32_t   gen;           /* when decided */
} span_t;

struct sp_profile_builder {
    entry_t     *entries;
    size_t       nentries, entries_cap;
    uintptr_t   *frames;
    size_t       nframes, frames_cap;
    stamp_t     *stamps;
    size_t       nstamps, stamps_cap;
    char       **names;
    size_t       nnames, names_cap;
    map_t        by_hash;
    uint64_t     dropped;
    size_t       kind_stamps[SP_SAMPLE_NKINDS];
    /* Of the last build: where each kind's samples are in samples[]. */
    size_t       kind_off[SP_SAMPLE_NKINDS], kind_n[SP_SAMPLE_NKINDS];

    /* Keep rules (nothing here is touched while no sample waits). */
    pend_t      *pend;
    size_t       npend, pend_cap, pend_live;
    uint8_t     *pend_pool;
    size_t       pend_pool_len, pend_pool_cap;
    span_t      *spans;
    size_t       nspans, spans_cap;
    uint32_t     gen;

    /* Output of the last build. */
    sp_profile_sample_t    *samples;
    int32_t                *locs;
    uint64_t               *timestamps;
    int64_t                *ts_cpu_ns;
    int64_t                *ts_off_cpu_ns;
    sp_profile_location_t  *locations;
    sp_profile_function_t  *functions;
    sp_profile_mapping_t   *mappings;
    size_t                  nlocations, nfunctions, nmappings;
    size_t                  locations_cap, functions_cap, mappings_cap;
    map_t                   loc_by_pc, fn_by_key, map_by_start;
};


static int
grow(void **p, size_t *cap, size_t need, size_t size)
{
    size_t  n = *cap ? *cap : 64;
    void   *q;

    if (need <= *cap) {
        return 0;
    }
    while (n < need) {
        n *= 2;
    }
    q = realloc(*p, n * size);
    if (q == NULL) {
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

static uint64_t
mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

static int
map_reserve(map_t *m)
{
    size_t     i, cap;
    uint64_t  *keys;
    int32_t   *vals;

    if ((m->n + 1) * 2 <= m->cap) {
        return 0;
    }
    cap = m->cap ? m->cap * 2 : 1024;
    keys = calloc(cap, sizeof(*keys));
    vals = malloc(cap * sizeof(*vals));
    if (keys == NULL || vals == NULL) {
        free(keys);
        free(vals);
        return -1;
    }
    for (i = 0; i < cap; i++) {
        vals[i] = -1;
    }
    for (i = 0; i < m->cap; i++) {
        if (m->vals[i] >= 0) {
            size_t  j = (size_t) m->keys[i] & (cap - 1);

            while (vals[j] >= 0) {
                j = (j + 1) & (cap - 1);
            }
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

/* The slot for key: its value is >= 0 when present. Colliding keys (a
 * different entry with the same key) are the caller's to tell apart, by
 * walking on with map_next. */
static size_t
map_find(const map_t *m, uint64_t key)
{
    size_t  j = (size_t) key & (m->cap - 1);

    while (m->vals[j] >= 0 && m->keys[j] != key) {
        j = (j + 1) & (m->cap - 1);
    }
    return j;
}

static size_t
map_next(const map_t *m, size_t j, uint64_t key)
{
    j = (j + 1) & (m->cap - 1);
    while (m->vals[j] >= 0 && m->keys[j] != key) {
        j = (j + 1) & (m->cap - 1);
    }
    return j;
}

static void
map_put(map_t *m, size_t slot, uint64_t key, int32_t val)
{
    m->keys[slot] = key;
    m->vals[slot] = val;
    m->n++;
}

static void
map_clear(map_t *m)
{
    size_t  i;

    for (i = 0; i < m->cap; i++) {
        m->vals[i] = -1;
    }
    m->n = 0;
}

static void
map_free(map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}


sp_profile_builder_t *
sp_profile_builder_new(void)
{
    return calloc(1, sizeof(sp_profile_builder_t));
}

void
sp_profile_builder_free(sp_profile_builder_t *b)
{
    size_t  i;

    if (b == NULL) {
        return;
    }
    for (i = 0; i < b->nnames; i++) {
        free(b->names[i]);
    }
    free(b->names);
    free(b->entries);
    free(b->frames);
    free(b->stamps);
    free(b->samples);
    free(b->locs);
    free(b->timestamps);
    free(b->ts_cpu_ns);
    free(b->ts_off_cpu_ns);
    free(b->locations);
    free(b->functions);
    free(b->mappings);
    map_free(&b->by_hash);
    map_free(&b->loc_by_pc);
    map_free(&b->fn_by_key);
    map_free(&b->map_by_start);
    free(b->pend);
    free(b->pend_pool);
    free(b->spans);
    free(b);
}

static int32_t
intern_name(sp_profile_builder_t *b, const char *name, size_t len)
{
    size_t  i;

    for (i = 0; i < b->nnames; i++) {
        if (strncmp(b->names[i], name, len) == 0 && b->names[i][len] == '\0') {
            return (int32_t) i;
        }
    }
    /* Span names are few (one per route); bound them all the same. */
    if (b->nnames == 4096
        || grow((void **) &b->names, &b->names_cap, b->nnames + 1,
                sizeof(char *)) != 0)
    {
        return -1;
    }
    b->names[b->nnames] = strndup(name, len);
    if (b->names[b->nnames] == NULL) {
        return -1;
    }
    return (int32_t) b->nnames++;
}

static int
same_entry(const sp_profile_builder_t *b, const entry_t *e,
    const sp_raw_sample_t *s, int has_span, int32_t name)
{
    return e->nframes == s->nframes && e->has_span == has_span
           && e->name == name && e->kind == s->kind
           && (!e->has_span
               || (memcmp(e->trace_id, s->trace_id, SP_TRACE_ID_LEN) == 0
                   && memcmp(e->span_id, s->span_id, SP_SPAN_ID_LEN) == 0))
           && memcmp(b->frames + e->frames_off, s->frames,
                     s->nframes * sizeof(uintptr_t)) == 0;
}

/* Into the interval's aggregate, with its span labels or without. */
static void
aggregate(sp_profile_builder_t *b, const sp_raw_sample_t *s, int labelled)
{
    int          has_span = labelled && s->has_ctx;
    int          memory = s->kind == SP_SAMPLE_ALLOC
                          || s->kind == SP_SAMPLE_INUSE;
    int64_t      value, off;
    uint64_t     h = 0;
    size_t       i, slot;
    int32_t      name = -1, idx;
    entry_t     *e;
    const char  *n;
    size_t       nlen;

    if (has_span) {
        nlen = sp_thread_ctx_record_span_name(s->attrs, s->attrs_len, &n);
        if (nlen > 0) {
            name = intern_name(b, n, nlen);
        }
        for (i = 0; i < SP_SPAN_ID_LEN; i++) {
            h = mix(h, s->span_id[i]);
        }
    }
    for (i = 0; i < s->nframes; i++) {
        h = mix(h, s->frames[i]);
    }
    h = mix(h, (uint64_t) s->nframes << 8 | (uint64_t) (name + 1) << 16
               | (uint64_t) s->kind << 56);

    if (s->kind >= SP_SAMPLE_NKINDS) {
        b->dropped++;
        return;
    }
    if (b->nstamps == SP_PROFILE_MAX_TIMESTAMPS
        || map_reserve(&b->by_hash) != 0)
    {
        b->dropped++;
        return;
    }

    slot = map_find(&b->by_hash, h);
    while (b->by_hash.vals[slot] >= 0) {
        e = &b->entries[b->by_hash.vals[slot]];
        if (same_entry(b, e, s, has_span, name)) {
            break;
        }
        slot = map_next(&b->by_hash, slot, h);
    }

    if (b->by_hash.vals[slot] >= 0) {
        idx = b->by_hash.vals[slot];
    } else {
        if (b->nentries == SP_PROFILE_MAX_STACKS
            || grow((void **) &b->entries, &b->entries_cap, b->nentries + 1,
                    sizeof(entry_t)) != 0
            || grow((void **) &b->frames, &b->frames_cap,
                    b->nframes + s->nframes, sizeof(uintptr_t)) != 0)
        {
            b->dropped++;
            return;
        }
        idx = (int32_t) b->nentries++;
        e = &b->entries[idx];
        memset(e, 0, sizeof(*e));
        e->hash = h;
        e->frames_off = (uint32_t) b->nframes;
        e->nframes = s->nframes;
        memcpy(b->frames + b->nframes, s->frames,
               s->nframes * sizeof(uintptr_t));
        b->nframes += s->nframes;
        e->has_span = (uint8_t) has_span;
        if (has_span) {
            memcpy(e->trace_id, s->trace_id, SP_TRACE_ID_LEN);
            memcpy(e->span_id, s->span_id, SP_SPAN_ID_LEN);
        }
        e->name = name;
        e->kind = s->kind;
        map_put(&b->by_hash, slot, h, idx);
    }

    if (grow((void **) &b->stamps, &b->stamps_cap, b->nstamps + 1,
             sizeof(stamp_t)) != 0)
    {
        b->dropped++;
        return;
    }
    /* Memory samples carry their bytes where wall ones carry off-CPU
     * time (sampler.h): they become the value (cpu_ns) of the sample. */
    value = memory ? (int64_t) s->off_cpu_ns
                   : (int64_t) s->weight * s->period_ns;
    off = memory ? 0 : (int64_t) s->off_cpu_ns;
    b->entries[idx].count += s->weight;
    b->entries[idx].cpu_ns += value;
    b->entries[idx].off_cpu_ns += off;
    b->entries[idx].nts++;
    b->stamps[b->nstamps].entry = (uint32_t) idx;
    b->stamps[b->nstamps].ns = s->time_ns;
    b->stamps[b->nstamps].cpu_ns = value;
    b->stamps[b->nstamps].off_cpu_ns = off;
    b->nstamps++;
    b->kind_stamps[s->kind]++;
}


/* ---- keep rules: samples waiting for their span's verdict ---------------- */

static uint64_t
span_key(const uint8_t id[SP_SPAN_ID_LEN])
{
    uint64_t  k;

    memcpy(&k, id, sizeof(k));
    return k;
}

static size_t
span_slot(const sp_profile_builder_t *b, uint64_t key)
{
    size_t  j = (size_t) mix(0, key) & (b->spans_cap - 1);

    while (b->spans[j].key != 0 && b->spans[j].key != key) {
        j = (j + 1) & (b->spans_cap - 1);
    }
    return j;
}

static int
spans_grow(sp_profile_builder_t *b)
{
    size_t   i, cap = b->spans_cap ? b->spans_cap * 2 : 1024;
    span_t  *old = b->spans;

    b->spans = calloc(cap, sizeof(*b->spans));
    if (b->spans == NULL) {
        b->spans = old;
        return -1;
    }
    i = b->spans_cap;
    b->spans_cap = cap;
    while (i-- > 0) {
        if (old[i].key != 0) {
            b->spans[span_slot(b, old[i].key)] = old[i];
        }
    }
    free(old);
    return 0;
}

/* The span's entry, made if missing (and create); NULL when the table is
 * at its bound (or out of memory). */
static span_t *
span_get(sp_profile_builder_t *b, uint64_t key, int create)
{
    span_t  *sp;

    if (b->spans_cap == 0 || (b->nspans + 1) * 4 > b->spans_cap * 3) {
        if (b->spans_cap >= SP_PROFILE_MAX_SPANS || spans_grow(b) != 0) {
            if (b->spans_cap == 0) {
                return NULL;
            }
            create = 0;
        }
    }
    sp = &b->spans[span_slot(b, key)];
    if (sp->key == 0) {
        if (!create) {
            return NULL;
        }
        sp->key = key;
        sp->head = -1;
        sp->state = SPAN_PENDING;
        b->nspans++;
    }
    return sp;
}

static const sp_raw_sample_t *
pend_sample(const sp_profile_builder_t *b, size_t i)
{
    return (const sp_raw_sample_t *) (b->pend_pool + b->pend[i].off);
}

static size_t
raw_size(const sp_raw_sample_t *s)
{
    /* Kept aligned for the next copy in the pool. */
    return (sizeof(sp_raw_sample_t) + s->nframes * sizeof(uintptr_t) + 15)
           & ~(size_t) 15;
}

/* Holds a labelled sample until its span is decided. 0, or -1 when the
 * bounds are reached. */
static int
pend_add(sp_profile_builder_t *b, span_t *sp, const sp_raw_sample_t *s)
{
    size_t  size = raw_size(s);

    if (b->pend_live >= SP_PROFILE_MAX_PENDING
        || b->pend_pool_len + size > SP_PROFILE_MAX_PENDING_BYTES
        || grow((void **) &b->pend, &b->pend_cap, b->npend + 1,
                sizeof(pend_t)) != 0
        || grow((void **) &b->pend_pool, &b->pend_pool_cap,
                b->pend_pool_len + size, 1) != 0)
    {
        return -1;
    }
    memcpy(b->pend_pool + b->pend_pool_len, s,
           sizeof(sp_raw_sample_t) + s->nframes * sizeof(uintptr_t));
    b->pend[b->npend].off = b->pend_pool_len;
    b->pend[b->npend].prev = sp->head;
    sp->head = (int32_t) b->npend++;
    b->pend_pool_len += size;
    b->pend_live++;
    return 0;
}

void
sp_profile_builder_add(sp_profile_builder_t *b, const sp_raw_sample_t *s)
{
    span_t  *sp;
    uint64_t key;

    if (!s->has_ctx || !s->keep_pending) {
        aggregate(b, s, 1);
        return;
    }
    key = span_key(s->span_id);
    sp = key != 0 ? span_get(b, key, 1) : NULL;
    if (sp != NULL && sp->state != SPAN_PENDING) {
        aggregate(b, s, sp->state == SPAN_KEPT);
        sp_keep_count(sp->state == SPAN_KEPT, sp->state != SPAN_KEPT, 0);
        return;
    }
    if (sp == NULL || pend_add(b, sp, s) != 0) {
        aggregate(b, s, 0);
        sp_keep_count(0, 0, 1);
        return;
    }
    sp_keep_set_pending(b->pend_live);
}

void
sp_profile_builder_decide(sp_profile_builder_t *b, const sp_verdict_t *v,
    size_t n)
{
    size_t    i;
    int32_t   j;
    uint64_t  key, done;
    span_t   *sp;

    for (i = 0; i < n; i++) {
        key = span_key(v[i].span_id);
        sp = key != 0 ? span_get(b, key, 1) : NULL;
        if (sp == NULL || sp->state != SPAN_PENDING) {
            continue;
        }
        done = 0;
        for (j = sp->head; j >= 0; j = b->pend[j].prev) {
            aggregate(b, pend_sample(b, (size_t) j), v[i].keep);
            b->pend[j].off = SIZE_MAX;
            done++;
        }
        b->pend_live -= done;
        sp->head = -1;
        sp->state = v[i].keep ? SPAN_KEPT : SPAN_DROPPED;
        sp->gen = b->gen;
        sp_keep_count(v[i].keep ? done : 0, v[i].keep ? 0 : done, 0);
    }
    sp_keep_set_pending(b->pend_live);
}

void
sp_profile_builder_expire(sp_profile_builder_t *b, uint64_t older_than_ns)
{
    size_t           i, npend = 0, len = 0, size, cap;
    uint64_t         forced = 0;
    span_t          *old, *sp;
    const sp_raw_sample_t  *s;

    if (b->spans_cap == 0) {
        return;
    }
    /* Spans decided before the last interval are forgotten. */
    old = b->spans;
    cap = b->spans_cap;
    b->spans = calloc(cap, sizeof(*b->spans));
    if (b->spans == NULL) {
        b->spans = old;
        return;
    }
    b->nspans = 0;
    for (i = 0; i < cap; i++) {
        if (old[i].key != 0 && old[i].state != SPAN_PENDING
            && old[i].gen == b->gen)
        {
            sp = &b->spans[span_slot(b, old[i].key)];
            *sp = old[i];
            b->nspans++;
        }
    }
    free(old);

    /* Too old ones lose their labels; the others are packed and linked
     * again, oldest first. */
    for (i = 0; i < b->npend; i++) {
        if (b->pend[i].off == SIZE_MAX) {
            continue;
        }
        s = pend_sample(b, i);
        if (s->time_ns < older_than_ns
            || (sp = span_get(b, span_key(s->span_id), 1)) == NULL)
        {
            aggregate(b, s, 0);
            forced++;
            continue;
        }
        size = raw_size(s);
        memmove(b->pend_pool + len, s, size);
        b->pend[npend].off = len;
        b->pend[npend].prev = sp->head;
        sp->head = (int32_t) npend++;
        len += size;
    }
    b->npend = npend;
    b->pend_live = npend;
    b->pend_pool_len = len;
    b->gen++;
    sp_keep_count(0, 0, forced);
    sp_keep_set_pending(b->pend_live);
}

size_t
sp_profile_builder_pending(const sp_profile_builder_t *b)
{
    return b->pend_live;
}

size_t
sp_profile_builder_samples(const sp_profile_builder_t *b)
{
    return b->nstamps;
}

uint64_t
sp_profile_builder_dropped(const sp_profile_builder_t *b)
{
    return b->dropped;
}

/* The location of one pc: symbolized once per build. */
static int32_t
location_of(sp_profile_builder_t *b, sp_symbolizer_t *sym, uint64_t pc)
{
    size_t                 slot;
    sp_symbol_t            s;
    sp_profile_location_t *loc;
    uint64_t               key;
    int32_t                fn = -1, map = -1;

    if (map_reserve(&b->loc_by_pc) != 0
        || map_reserve(&b->fn_by_key) != 0
        || map_reserve(&b->map_by_start) != 0)
    {
        return -1;
    }
    slot = map_find(&b->loc_by_pc, pc);
    if (b->loc_by_pc.vals[slot] >= 0) {
        return b->loc_by_pc.vals[slot];
    }

    sp_symbolize(sym, pc, &s);

    if (s.object != NULL) {
        size_t  ms = map_find(&b->map_by_start, s.map_start);

        if (b->map_by_start.vals[ms] >= 0) {
            map = b->map_by_start.vals[ms];
        } else {
            if (grow((void **) &b->mappings, &b->mappings_cap,
                     b->nmappings + 1, sizeof(sp_profile_mapping_t)) != 0)
            {
                return -1;
            }
            map = (int32_t) b->nmappings++;
            b->mappings[map].filename = s.object;
            b->mappings[map].build_id = s.build_id;
            b->mappings[map].start = s.map_start;
            b->mappings[map].limit = s.map_limit;
            b->mappings[map].offset = s.map_offset;
            map_put(&b->map_by_start, ms, s.map_start, map);
        }
    }

    /* A function per name and object; an address outside every symbol
     * gets one named "lib+0xoffset", so it shows in a flame graph. Names
     * are interned by the symbolizer: their addresses identify them. */
    key = mix((uint64_t) (uintptr_t) s.display, (uint64_t) (uintptr_t) s.object);
    {
        size_t  fs = map_find(&b->fn_by_key, key);

        while (b->fn_by_key.vals[fs] >= 0
               && (b->functions[b->fn_by_key.vals[fs]].name != s.display
                   || b->functions[b->fn_by_key.vals[fs]].filename
                      != s.object))
        {
            fs = map_next(&b->fn_by_key, fs, key);
        }
        if (b->fn_by_key.vals[fs] >= 0) {
            fn = b->fn_by_key.vals[fs];
        } else {
            if (grow((void **) &b->functions, &b->functions_cap,
                     b->nfunctions + 1, sizeof(sp_profile_function_t)) != 0)
            {
                return -1;
            }
            fn = (int32_t) b->nfunctions++;
            b->functions[fn].name = s.display;
            b->functions[fn].filename = s.object;
            map_put(&b->fn_by_key, fs, key, fn);
        }
    }

    if (grow((void **) &b->locations, &b->locations_cap, b->nlocations + 1,
             sizeof(sp_profile_location_t)) != 0)
    {
        return -1;
    }
    loc = &b->locations[b->nlocations];
    loc->address = pc;
    loc->mapping = map;
    loc->function = fn;
    map_put(&b->loc_by_pc, slot, pc, (int32_t) b->nlocations);
    return (int32_t) b->nlocations++;
}

int
sp_profile_builder_build(sp_profile_builder_t *b, sp_symbolizer_t *sym,
    const sp_resource_t *res, uint64_t start_ns, uint64_t end_ns,
    uint64_t period_ns, sp_profile_t *p)
{
    size_t                i, j, k, nlocs = 0, off;
    size_t                pos[SP_SAMPLE_NKINDS];
    uint32_t             *at;
    entry_t              *e;
    sp_profile_sample_t  *ps;
    uint32_t             *fill;
    uint64_t              pc;

    memset(p, 0, sizeof(*p));
    p->resource = res;
    p->start_ns = start_ns;
    p->end_ns = end_ns;
    p->period_ns = period_ns;

    free(b->samples);
    free(b->locs);
    free(b->timestamps);
    free(b->ts_cpu_ns);
    free(b->ts_off_cpu_ns);
    b->samples = calloc(b->nentries ? b->nentries : 1, sizeof(*b->samples));
    b->locs = malloc((b->nframes ? b->nframes : 1) * sizeof(*b->locs));
    b->timestamps = malloc((b->nstamps ? b->nstamps : 1)
                           * sizeof(*b->timestamps));
    b->ts_cpu_ns = malloc((b->nstamps ? b->nstamps : 1)
                          * sizeof(*b->ts_cpu_ns));
    b->ts_off_cpu_ns = malloc((b->nstamps ? b->nstamps : 1)
                              * sizeof(*b->ts_off_cpu_ns));
    fill = calloc(b->nentries ? b->nentries : 1, sizeof(*fill));
    at = malloc((b->nentries ? b->nentries : 1) * sizeof(*at));
    if (b->samples == NULL || b->locs == NULL || b->timestamps == NULL
        || b->ts_cpu_ns == NULL || b->ts_off_cpu_ns == NULL || fill == NULL
        || at == NULL)
    {
        free(fill);
        free(at);
        return -1;
    }
    /* samples[] holds each kind's samples together, CPU first. */
    memset(b->kind_n, 0, sizeof(b->kind_n));
    for (i = 0; i < b->nentries; i++) {
        b->kind_n[b->entries[i].kind]++;
    }
    for (k = 0, off = 0; k < SP_SAMPLE_NKINDS; k++) {
        b->kind_off[k] = pos[k] = off;
        off += b->kind_n[k];
    }
    for (i = 0; i < b->nentries; i++) {
        at[i] = (uint32_t) pos[b->entries[i].kind]++;
    }
    b->nlocations = b->nfunctions = b->nmappings = 0;
    if (b->loc_by_pc.cap) {
        map_clear(&b->loc_by_pc);
        map_clear(&b->fn_by_key);
        map_clear(&b->map_by_start);
    }

    off = 0;
    for (i = 0; i < b->nentries; i++) {
        e = &b->entries[i];
        ps = &b->samples[at[i]];
        ps->stack_off = (uint32_t) nlocs;
        ps->stack_len = e->nframes;
        for (j = 0; j < e->nframes; j++) {
            /* Frames above the leaf are return addresses: the call is the
             * instruction before. */
            pc = b->frames[e->frames_off + j];
            b->locs[nlocs] = location_of(b, sym, j == 0 ? pc : pc - 1);
            if (b->locs[nlocs++] < 0) {
                free(fill);
                free(at);
                return -1;
            }
        }
        ps->count = e->count;
        ps->cpu_ns = e->cpu_ns;
        ps->off_cpu_ns = e->off_cpu_ns;
        ps->ts_off = (uint32_t) off;
        ps->ts_len = e->nts;
        off += e->nts;
        ps->has_span = e->has_span;
        memcpy(ps->trace_id, e->trace_id, SP_TRACE_ID_LEN);
        memcpy(ps->span_id, e->span_id, SP_SPAN_ID_LEN);
        ps->span_name = e->name >= 0 ? b->names[e->name] : NULL;
    }
    for (i = 0; i < b->nstamps; i++) {
        j = b->stamps[i].entry;
        k = b->samples[at[j]].ts_off + fill[j]++;
        b->timestamps[k] = b->stamps[i].ns;
        b->ts_cpu_ns[k] = b->stamps[i].cpu_ns;
        b->ts_off_cpu_ns[k] = b->stamps[i].off_cpu_ns;
    }
    free(fill);
    free(at);

    p->kind = SP_SAMPLE_CPU;
    p->samples = b->samples + b->kind_off[SP_SAMPLE_CPU];
    p->nsamples = b->kind_n[SP_SAMPLE_CPU];
    p->locs = b->locs;
    p->nlocs = nlocs;
    p->timestamps = b->timestamps;
    p->ts_cpu_ns = b->ts_cpu_ns;
    p->ts_off_cpu_ns = b->ts_off_cpu_ns;
    p->ntimestamps = b->nstamps;
    p->locations = b->locations;
    p->nlocations = b->nlocations;
    p->functions = b->functions;
    p->nfunctions = b->nfunctions;
    p->mappings = b->mappings;
    p->nmappings = b->nmappings;
    return 0;
}

void
sp_profile_builder_kind(const sp_profile_builder_t *b, int kind,
    const sp_profile_t *p, uint64_t period_ns, sp_profile_t *out)
{
    *out = *p;
    out->kind = kind;
    out->period_ns = period_ns;
    out->samples = b->samples + b->kind_off[kind];
    out->nsamples = b->kind_n[kind];
}

size_t
sp_profile_builder_kind_samples(const sp_profile_builder_t *b, int kind)
{
    return b->kind_stamps[kind];
}

void
sp_profile_builder_reset(sp_profile_builder_t *b)
{
    size_t  i;

    memset(b->kind_stamps, 0, sizeof(b->kind_stamps));
    b->nentries = 0;
    b->nframes = 0;
    b->nstamps = 0;
    b->dropped = 0;
    for (i = 0; i < b->nnames; i++) {
        free(b->names[i]);
    }
    b->nnames = 0;
    if (b->by_hash.cap) {
        map_clear(&b->by_hash);
    }
}
