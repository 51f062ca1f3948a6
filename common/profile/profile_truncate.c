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

/* Marks what the kept samples use; -1 when an index is out of range. */
static int
mark_used(const sp_profile_t *p, const uint8_t *kept, int32_t *loc_map,
    int32_t *fn_map, int32_t *map_map)
{
    const sp_profile_sample_t  *s;
    const sp_profile_location_t *l;
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

int
sp_profile_truncate(sp_arena_t *a, const sp_profile_t *p, size_t keep,
    sp_profile_t *out, size_t *merged_entries, int64_t *merged_samples)
{
    rank_t                 *rank;
    uint8_t                *kept;
    int32_t                *loc_map, *fn_map, *map_map, loc;
    const sp_profile_sample_t *s;
    sp_profile_sample_t    *d, *t;
    size_t                  i, j, nloc, nfn, nmap, nlocs = 0, nts = 0;
    int64_t                 merged_cpu_ns;

    *merged_entries = 0;
    *merged_samples = 0;
    if (keep >= p->nsamples) {
        *out = *p;
        return 0;
    }
    rank = malloc(p->nsamples * sizeof(*rank));
    kept = sp_arena_alloc(a, p->nsamples);
    loc_map = sp_arena_alloc(a, (p->nlocations + 1) * sizeof(int32_t));
    fn_map = sp_arena_alloc(a, (p->nfunctions + 1) * sizeof(int32_t));
    map_map = sp_arena_alloc(a, (p->nmappings + 1) * sizeof(int32_t));
    if (rank == NULL || kept == NULL || loc_map == NULL || fn_map == NULL
        || map_map == NULL)
    {
        free(rank);
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

    memset(loc_map, 0xff, p->nlocations * sizeof(int32_t));
    memset(fn_map, 0xff, p->nfunctions * sizeof(int32_t));
    memset(map_map, 0xff, p->nmappings * sizeof(int32_t));
    if (mark_used(p, kept, loc_map, fn_map, map_map) != 0) {
        return -1;
    }
    nloc = number(loc_map, p->nlocations);
    nfn = number(fn_map, p->nfunctions);
    nmap = number(map_map, p->nmappings);

    memset(out, 0, sizeof(*out));
    out->resource = p->resource;
    out->start_ns = p->start_ns;
    out->end_ns = p->end_ns;
    out->period_ns = p->period_ns;
    /* + the [truncated] frame's location and function, + its sample */
    out->mappings = sp_arena_alloc(a, (nmap + 1) * sizeof(*out->mappings));
    out->functions = sp_arena_alloc(a, (nfn + 1) * sizeof(*out->functions));
    out->locations = sp_arena_alloc(a, (nloc + 1) * sizeof(*out->locations));
    out->samples = sp_arena_alloc(a, (keep + 1) * sizeof(*out->samples));
    for (i = 0; i < p->nsamples; i++) {
        if (kept[i]) {
            nlocs += p->samples[i].stack_len;
            nts += p->samples[i].ts_len;
        }
    }
    out->locs = sp_arena_alloc(a, (nlocs + 1) * sizeof(*out->locs));
    out->timestamps = sp_arena_alloc(a, (nts + 1) * sizeof(*out->timestamps));
    out->ts_cpu_ns = p->ts_cpu_ns == NULL ? NULL
                     : sp_arena_alloc(a, (nts + 1) * sizeof(*out->ts_cpu_ns));
    if ((p->ts_cpu_ns != NULL && out->ts_cpu_ns == NULL) || out->mappings == NULL || out->functions == NULL
        || out->locations == NULL || out->samples == NULL
        || out->locs == NULL || out->timestamps == NULL)
    {
        return -1;
    }

    for (i = 0; i < p->nmappings; i++) {
        if (map_map[i] >= 0) {
            out->mappings[map_map[i]] = p->mappings[i];
        }
    }
    out->nmappings = nmap;
    for (i = 0; i < p->nfunctions; i++) {
        if (fn_map[i] >= 0) {
            out->functions[fn_map[i]] = p->functions[i];
        }
    }
    out->functions[nfn].name = SP_PROFILE_TRUNCATED_FUNCTION;
    out->functions[nfn].filename = "";
    out->nfunctions = nfn + 1;
    for (i = 0; i < p->nlocations; i++) {
        if (loc_map[i] >= 0) {
            sp_profile_location_t  l = p->locations[i];

            l.function = l.function >= 0 ? fn_map[l.function] : -1;
            l.mapping = l.mapping >= 0 ? map_map[l.mapping] : -1;
            out->locations[loc_map[i]] = l;
        }
    }
    out->locations[nloc] = (sp_profile_location_t) {
        .address = 0, .mapping = -1, .function = (int32_t) nfn };
    out->nlocations = nloc + 1;

    /* The kept samples in p's order, their stacks and timestamps copied. */
    merged_cpu_ns = 0;
    for (i = 0; i < p->nsamples; i++) {
        s = &p->samples[i];
        if (!kept[i]) {
            (*merged_entries)++;
            *merged_samples += s->count;
            merged_cpu_ns += s->cpu_ns;
            continue;
        }
        d = &out->samples[out->nsamples++];
        *d = *s;
        d->stack_off = (uint32_t) out->nlocs;
        for (j = 0; j < s->stack_len; j++) {
            loc = p->locs[s->stack_off + j];
            out->locs[out->nlocs++] = loc_map[loc];
        }
        d->ts_off = (uint32_t) out->ntimestamps;
        memcpy(out->timestamps + out->ntimestamps,
               p->timestamps + s->ts_off, s->ts_len * sizeof(uint64_t));
        if (p->ts_cpu_ns != NULL) {
            memcpy(out->ts_cpu_ns + out->ntimestamps,
                   p->ts_cpu_ns + s->ts_off, s->ts_len * sizeof(int64_t));
        }
        out->ntimestamps += s->ts_len;
    }
    t = &out->samples[out->nsamples++];
    memset(t, 0, sizeof(*t));
    t->stack_off = (uint32_t) out->nlocs;
    t->stack_len = 1;
    t->count = *merged_samples;
    t->cpu_ns = merged_cpu_ns;     /* CPU time stays true (load_shedder.h) */
    out->locs[out->nlocs++] = (int32_t) nloc;
    return 0;
}

static size_t
shrink(size_t keep, size_t size, size_t max)
{
    /* Size grows about linearly with the entries kept: aim 10% under. */
    double  k = (double) keep * ((double) max / (double) size) * 0.9;
    size_t  next = k < 0 ? 0 : (size_t) k;

    if (next >= keep) {
        next = keep - (keep / 4 > 0 ? keep / 4 : 1);
    }
    return next;
}

int
sp_profile_encode_bounded(sp_arena_t *a, sp_arena_t *ta,
    const sp_profile_t *p, size_t max_size, size_t max_samples,
    sp_profile_encoder_t enc, void *ud, sp_buf_t *out,
    sp_profile_truncation_t *r)
{
    sp_profile_t  q;
    size_t        keep;
    int           rc, tries;

    memset(r, 0, sizeof(*r));
    r->entries = p->nsamples;
    for (keep = 0; keep < p->nsamples; keep++) {
        r->samples += p->samples[keep].count;
    }
    sp_buf_reset(out);
    keep = p->nsamples;
    if (max_samples > 0 && p->nsamples > max_samples) {
        /* The kept ones and [truncated]: max_samples samples in all. */
        r->over_samples = 1;
        keep = max_samples - 1;
        if (sp_profile_truncate(ta, p, keep, &q, &r->merged_entries,
                                &r->merged_samples) != 0)
        {
            return -1;
        }
        rc = enc(ud, a, &q, out);
    } else {
        rc = enc(ud, a, p, out);
    }
    sp_arena_reset(a);
    r->size = out->len;
    if (rc != 0) {
        return -1;
    }
    /* Each try encodes again: a few, then everything merged. */
    for (tries = 0; max_size > 0 && out->len > max_size; tries++) {
        r->over_size = 1;
        if (keep == 0) {
            sp_buf_reset(out);
            stat_oversized++;
            return 1;
        }
        keep = tries < 8 ? shrink(keep, out->len, max_size) : 0;
        sp_arena_reset(ta);
        if (sp_profile_truncate(ta, p, keep, &q, &r->merged_entries,
                                &r->merged_samples) != 0)
        {
            return -1;
        }
        sp_buf_reset(out);
        rc = enc(ud, a, &q, out);
        sp_arena_reset(a);
        if (rc != 0) {
            return -1;
        }
    }
    stat_profiles += (uint64_t) r->over_size;
    stat_capped += (uint64_t) r->over_samples;
    stat_samples += (uint64_t) r->merged_samples;
    return 0;
}

void
sp_profile_truncate_stats(sp_profile_truncate_stats_t *st)
{
    st->profiles_truncated = stat_profiles;
    st->samples_truncated = stat_samples;
    st->profiles_oversized = stat_oversized;
    st->profiles_over_max_samples = stat_capped;
}
