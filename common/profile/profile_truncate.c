#include <stdlib.h>
#include <string.h>

#include "common/profile/profile_truncate.h"

static _Atomic uint64_t  stat_profiles, stat_samples, stat_oversized, stat_capped;

typedef struct {
    int64_t   count;
    uint32_t  idx;
} rank_t;

/* Most-sampled first; ties: the earlier entry first. */
static int
rank_cmp(const void *x, const void *y)
{
    const rank_t  *a = x, *b = y;

    if (a->count != b->count) {
        return a->count > b->count ? -1 : 1;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Marks what the kept samples of p use in the (shared) tables; -1 when an
 * index is out of range. */
static int
mark_samples(const sp_profile_t *p, const uint8_t *kept, int32_t *loc_map)
{
    const sp_profile_sample_t  *s;
    size_t                      i, j;
    int32_t                     loc;

    for (i = 0; i < p->nsamples; i++) {
        s = &p->samples[i];
        if (!kept[i]) {
            continue;
        }
        if ((size_t) s->stack_off + s->stack_len > p->nlocs
            || (size_t) s->ts_off + s->ts_len > p->ntimestamps)
        {
            return -1;
        }
        for (j = 0; j < s->stack_len; j++) {
            loc = p->locs[s->stack_off + j];
            if (loc < 0 || (size_t) loc >= p->nlocations) {
                return -1;
            }
            loc_map[loc] = 0;
        }
    }
    return 0;
}

/* Marks the functions and mappings of the marked locations. */
static int
mark_tables(const sp_profile_t *p, const int32_t *loc_map, int32_t *fn_map,
    int32_t *map_map)
{
    const sp_profile_location_t  *l;
    size_t                        i;

    for (i = 0; i < p->nlocations; i++) {
        l = &p->locations[i];
        if (loc_map[i] < 0) {
            continue;
        }
        if (l->function >= (int64_t) p->nfunctions
            || l->mapping >= (int64_t) p->nmappings)
        {
            return -1;
        }
        if (l->function >= 0) {
            fn_map[l->function] = 0;
        }
        if (l->mapping >= 0) {
            map_map[l->mapping] = 0;
        }
    }
    return 0;
}

/* Numbers the marked entries (0) in order; returns how many. */
static size_t
number(int32_t *map, size_t n)
{
    size_t  i, k = 0;

    for (i = 0; i < n; i++) {
        if (map[i] == 0) {
            map[i] = (int32_t) k++ + 1;
        }
    }
    for (i = 0; i < n; i++) {
        map[i] = map[i] > 0 ? map[i] - 1 : -1;
    }
    return k;
}

/* The kinds of one build share every table but their samples. */
static int
same_tables(const sp_profile_t *a, const sp_profile_t *b)
{
    return a->locs == b->locs && a->nlocs == b->nlocs
           && a->timestamps == b->timestamps
           && a->ntimestamps == b->ntimestamps
           && a->ts_cpu_ns == b->ts_cpu_ns
           && a->ts_off_cpu_ns == b->ts_off_cpu_ns
           && a->locations == b->locations && a->nlocations == b->nlocations
           && a->functions == b->functions && a->nfunctions == b->nfunctions
           && a->mappings == b->mappings && a->nmappings == b->nmappings;
}

/* kept[i] = 1 for the keep most-sampled entries of p. */
static int
choose(const sp_profile_t *p, size_t keep, uint8_t *kept)
{
    rank_t  *rank;
    size_t   i;

    if (keep >= p->nsamples) {
        memset(kept, 1, p->nsamples);
        return 0;
    }
    memset(kept, 0, p->nsamples);
    rank = malloc((p->nsamples + 1) * sizeof(*rank));
    if (rank == NULL) {
        return -1;
    }
    for (i = 0; i < p->nsamples; i++) {
        rank[i].count = p->samples[i].count;
        rank[i].idx = (uint32_t) i;
    }
    qsort(rank, p->nsamples, sizeof(*rank), rank_cmp);
    for (i = 0; i < keep; i++) {
        kept[rank[i].idx] = 1;
    }
    free(rank);
    return 0;
}

int
sp_profile_truncate_n(sp_arena_t *a, const sp_profile_t *ps, size_t n,
    const size_t *keep, sp_profile_t *out, size_t *merged_entries,
    int64_t *merged_samples)
{
    const sp_profile_t         *p0 = &ps[0];
    uint8_t                   **kept;
    int32_t                    *loc_map, *fn_map, *map_map, loc;
    const sp_profile_sample_t  *s;
    sp_profile_sample_t        *d, *t;
    sp_profile_location_t      *locations;
    sp_profile_function_t      *functions;
    sp_profile_mapping_t       *mappings;
    int32_t                    *locs;
    uint64_t                   *timestamps;
    int64_t                    *ts_cpu_ns, *ts_off_cpu_ns, merged_cpu_ns,
                                merged_off_cpu_ns;
    size_t                      i, k, j, nloc, nfn, nmap, nlocs = 0,
                                nts = 0, nl = 0, nt = 0, cut = 0;

    for (k = 0; k < n; k++) {
        merged_entries[k] = 0;
        merged_samples[k] = 0;
        cut += keep[k] < ps[k].nsamples;
        if (!same_tables(&ps[k], p0)) {
            return -1;
        }
    }
    if (cut == 0) {
        for (k = 0; k < n; k++) {
            out[k] = ps[k];
        }
        return 0;
    }
    kept = sp_arena_alloc(a, n * sizeof(*kept));
    loc_map = sp_arena_alloc(a, (p0->nlocations + 1) * sizeof(int32_t));
    fn_map = sp_arena_alloc(a, (p0->nfunctions + 1) * sizeof(int32_t));
    map_map = sp_arena_alloc(a, (p0->nmappings + 1) * sizeof(int32_t));
    if (kept == NULL || loc_map == NULL || fn_map == NULL || map_map == NULL) {
        return -1;
    }
    memset(loc_map, 0xff, p0->nlocations * sizeof(int32_t));
    memset(fn_map, 0xff, p0->nfunctions * sizeof(int32_t));
    memset(map_map, 0xff, p0->nmappings * sizeof(int32_t));
    for (k = 0; k < n; k++) {
        kept[k] = sp_arena_alloc(a, ps[k].nsamples + 1);
        if (kept[k] == NULL || choose(&ps[k], keep[k], kept[k]) != 0
            || mark_samples(&ps[k], kept[k], loc_map) != 0)
        {
            return -1;
        }
        for (i = 0; i < ps[k].nsamples; i++) {
            if (kept[k][i]) {
                nlocs += ps[k].samples[i].stack_len;
                nts += ps[k].samples[i].ts_len;
            }
        }
    }
    if (mark_tables(p0, loc_map, fn_map, map_map) != 0) {
        return -1;
    }
    nloc = number(loc_map, p0->nlocations);
    nfn = number(fn_map, p0->nfunctions);
    nmap = number(map_map, p0->nmappings);

    /* One set of tables for all the copies (so that an encoder given them
     * together writes each entry once), + the [truncated] frame's location
     * and function and a stack entry per copy for it. */
    mappings = sp_arena_alloc(a, (nmap + 1) * sizeof(*mappings));
    functions = sp_arena_alloc(a, (nfn + 1) * sizeof(*functions));
    locations = sp_arena_alloc(a, (nloc + 1) * sizeof(*locations));
    locs = sp_arena_alloc(a, (nlocs + n) * sizeof(*locs));
    timestamps = sp_arena_alloc(a, (nts + 1) * sizeof(*timestamps));
    ts_cpu_ns = p0->ts_cpu_ns == NULL ? NULL
                : sp_arena_alloc(a, (nts + 1) * sizeof(*ts_cpu_ns));
    ts_off_cpu_ns = p0->ts_off_cpu_ns == NULL ? NULL
                    : sp_arena_alloc(a, (nts + 1) * sizeof(*ts_off_cpu_ns));
    if (mappings == NULL || functions == NULL || locations == NULL
        || locs == NULL || timestamps == NULL
        || (p0->ts_cpu_ns != NULL && ts_cpu_ns == NULL)
        || (p0->ts_off_cpu_ns != NULL && ts_off_cpu_ns == NULL))
    {
        return -1;
    }
    for (i = 0; i < p0->nmappings; i++) {
        if (map_map[i] >= 0) {
            mappings[map_map[i]] = p0->mappings[i];
        }
    }
    for (i = 0; i < p0->nfunctions; i++) {
        if (fn_map[i] >= 0) {
            functions[fn_map[i]] = p0->functions[i];
        }
    }
    functions[nfn].name = SP_PROFILE_TRUNCATED_FUNCTION;
    functions[nfn].filename = "";
    for (i = 0; i < p0->nlocations; i++) {
        if (loc_map[i] >= 0) {
            sp_profile_location_t  l = p0->locations[i];

            l.function = l.function >= 0 ? fn_map[l.function] : -1;
            l.mapping = l.mapping >= 0 ? map_map[l.mapping] : -1;
            locations[loc_map[i]] = l;
        }
    }
    locations[nloc] = (sp_profile_location_t) {
        .address = 0, .mapping = -1, .function = (int32_t) nfn };

    for (k = 0; k < n; k++) {
        const sp_profile_t  *p = &ps[k];
        sp_profile_t        *o = &out[k];

        memset(o, 0, sizeof(*o));
        o->resource = p->resource;
        o->start_ns = p->start_ns;
        o->end_ns = p->end_ns;
        o->period_ns = p->period_ns;
        o->kind = p->kind;
        o->mappings = mappings;
        o->nmappings = nmap;
        o->functions = functions;
        o->nfunctions = nfn + 1;
        o->locations = locations;
        o->nlocations = nloc + 1;
        o->locs = locs;
        o->timestamps = timestamps;
        o->ts_cpu_ns = ts_cpu_ns;
        o->ts_off_cpu_ns = ts_off_cpu_ns;
        o->samples = sp_arena_alloc(a, (p->nsamples + 1) * sizeof(*o->samples));
        if (o->samples == NULL) {
            return -1;
        }

        /* The kept samples in p's order, their stacks and timestamps
         * copied. */
        merged_cpu_ns = 0;
        merged_off_cpu_ns = 0;
        for (i = 0; i < p->nsamples; i++) {
            s = &p->samples[i];
            if (!kept[k][i]) {
                merged_entries[k]++;
                merged_samples[k] += s->count;
                merged_cpu_ns += s->cpu_ns;
                merged_off_cpu_ns += s->off_cpu_ns;
                continue;
            }
            d = &o->samples[o->nsamples++];
            *d = *s;
            d->stack_off = (uint32_t) nl;
            for (j = 0; j < s->stack_len; j++) {
                loc = p->locs[s->stack_off + j];
                locs[nl++] = loc_map[loc];
            }
            d->ts_off = (uint32_t) nt;
            memcpy(timestamps + nt, p->timestamps + s->ts_off,
                   s->ts_len * sizeof(uint64_t));
            if (ts_cpu_ns != NULL) {
                memcpy(ts_cpu_ns + nt, p->ts_cpu_ns + s->ts_off,
                       s->ts_len * sizeof(int64_t));
            }
            if (ts_off_cpu_ns != NULL) {
                memcpy(ts_off_cpu_ns + nt, p->ts_off_cpu_ns + s->ts_off,
                       s->ts_len * sizeof(int64_t));
            }
            nt += s->ts_len;
        }
        if (keep[k] < p->nsamples) {
            t = &o->samples[o->nsamples++];
            memset(t, 0, sizeof(*t));
            t->stack_off = (uint32_t) nl;
            t->stack_len = 1;
            t->count = merged_samples[k];
            /* CPU (wall, bytes) and off-CPU time stay true
             * (load_shedder.h) */
            t->cpu_ns = merged_cpu_ns;
            t->off_cpu_ns = merged_off_cpu_ns;
            locs[nl++] = (int32_t) nloc;
        }
    }
    for (k = 0; k < n; k++) {
        out[k].nlocs = nl;
        out[k].ntimestamps = nt;
    }
    return 0;
}

int
sp_profile_truncate(sp_arena_t *a, const sp_profile_t *p, size_t keep,
    sp_profile_t *out, size_t *merged_entries, int64_t *merged_samples)
{
    return sp_profile_truncate_n(a, p, 1, &keep, out, merged_entries,
                                 merged_samples);
}

static size_t
shrink(size_t keep, size_t size, size_t max)
{
    /* Size grows about linearly with the entries kept: aim 10% under. */
    double  k = (double) keep * ((double) max / (double) size) * 0.9;
    size_t  next = k < 0 ? 0 : (size_t) k;

    if (keep == 0) {
        return 0;
    }
    if (next >= keep) {
        next = keep - (keep / 4 > 0 ? keep / 4 : 1);
    }
    return next;
}

int
sp_profile_encode_bounded_n(sp_arena_t *a, sp_arena_t *ta,
    const sp_profile_t *ps, size_t n, size_t max_size, size_t max_samples,
    sp_profile_encoder_n_t enc, void *ud, sp_buf_t *out,
    sp_profile_truncation_t *r)
{
    sp_profile_t  q[SP_PROFILE_BOUNDED_MAX];
    size_t        keep[SP_PROFILE_BOUNDED_MAX], me[SP_PROFILE_BOUNDED_MAX];
    int64_t       ms[SP_PROFILE_BOUNDED_MAX];
    size_t        i, k, left;
    int           rc, tries;

    memset(r, 0, sizeof(*r));
    sp_buf_reset(out);
    if (n == 0 || n > SP_PROFILE_BOUNDED_MAX) {
        return -1;
    }
    for (k = 0; k < n; k++) {
        r->entries += ps[k].nsamples;
        for (i = 0; i < ps[k].nsamples; i++) {
            r->samples += ps[k].samples[i].count;
        }
        keep[k] = ps[k].nsamples;
        if (max_samples > 0 && ps[k].nsamples > max_samples) {
            /* The kept ones and [truncated]: max_samples samples in all. */
            r->over_samples++;
            keep[k] = max_samples - 1;
        }
    }
    if (r->over_samples) {
        if (sp_profile_truncate_n(ta, ps, n, keep, q, me, ms) != 0) {
            return -1;
        }
        rc = enc(ud, a, q, n, out);
    } else {
        rc = enc(ud, a, ps, n, out);
    }
    sp_arena_reset(a);
    r->size = out->len;
    if (rc != 0) {
        return -1;
    }
    /* Each try encodes again, every profile's entries cut in proportion:
     * a few tries, then everything merged. */
    for (tries = 0; max_size > 0 && out->len > max_size; tries++) {
        r->over_size = 1;
        for (k = 0, left = 0; k < n; k++) {
            left += keep[k];
        }
        if (left == 0) {
            sp_buf_reset(out);
            stat_oversized++;
            return 1;
        }
        for (k = 0; k < n; k++) {
            keep[k] = tries < 8 ? shrink(keep[k], out->len, max_size) : 0;
        }
        sp_arena_reset(ta);
        if (sp_profile_truncate_n(ta, ps, n, keep, q, me, ms) != 0) {
            return -1;
        }
        sp_buf_reset(out);
        rc = enc(ud, a, q, n, out);
        sp_arena_reset(a);
        if (rc != 0) {
            return -1;
        }
    }
    if (r->over_samples || r->over_size) {
        for (k = 0; k < n; k++) {
            r->merged_entries += me[k];
            r->merged_samples += ms[k];
        }
    }
    stat_profiles += (uint64_t) r->over_size;
    stat_capped += (uint64_t) r->over_samples;
    stat_samples += (uint64_t) r->merged_samples;
    return 0;
}

typedef struct {
    sp_profile_encoder_t  enc;
    void                 *ud;
} one_t;

static int
encode_one(void *ud, sp_arena_t *a, const sp_profile_t *ps, size_t n,
    sp_buf_t *out)
{
    one_t  *o = ud;

    (void) n;
    return o->enc(o->ud, a, &ps[0], out);
}

int
sp_profile_encode_bounded(sp_arena_t *a, sp_arena_t *ta,
    const sp_profile_t *p, size_t max_size, size_t max_samples,
    sp_profile_encoder_t enc, void *ud, sp_buf_t *out,
    sp_profile_truncation_t *r)
{
    one_t  o = { enc, ud };

    return sp_profile_encode_bounded_n(a, ta, p, 1, max_size, max_samples,
                                       encode_one, &o, out, r);
}

void
sp_profile_truncate_stats(sp_profile_truncate_stats_t *st)
{
    st->profiles_truncated = stat_profiles;
    st->samples_truncated = stat_samples;
    st->profiles_oversized = stat_oversized;
    st->profiles_over_max_samples = stat_capped;
}
