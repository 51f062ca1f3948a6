#include <string.h>
#include <zlib.h>

#include "pprof/profile.pb-c.h"

#include "common/export/gzip.h"
#include "common/export/pprof.h"
#include "common/profile/sampler.h"

typedef Perftools__Profiles__Profile    pb_profile_t;
typedef Perftools__Profiles__ValueType  pb_value_type_t;
typedef Perftools__Profiles__Sample     pb_sample_t;
typedef Perftools__Profiles__Label      pb_label_t;
typedef Perftools__Profiles__Mapping    pb_mapping_t;
typedef Perftools__Profiles__Location   pb_location_t;
typedef Perftools__Profiles__Line       pb_line_t;
typedef Perftools__Profiles__Function   pb_function_t;

/* The string table: strings by index, and an open-addressing hash (sized
 * once for the most strings the profile can need) for deduplication. */
typedef struct {
    char       **strs;
    size_t       n, max;
    int32_t     *slots;     /* string index + 1, 0 = empty */
    size_t       mask;
} strtab_t;

static uint64_t
str_hash(const char *s)
{
    uint64_t  h = 0xcbf29ce484222325ULL;    /* FNV-1a */

    while (*s != '\0') {
        h = (h ^ (unsigned char) *s++) * 0x100000001b3ULL;
    }
    return h;
}

static int
strtab_init(sp_arena_t *a, strtab_t *t, size_t max)
{
    size_t  cap = 16;

    while (cap < max * 2) {
        cap *= 2;
    }
    t->strs = sp_arena_alloc(a, max * sizeof(char *));
    t->slots = sp_arena_alloc(a, cap * sizeof(int32_t));
    t->n = 0;
    t->max = max;
    t->mask = cap - 1;
    return t->strs != NULL && t->slots != NULL ? 0 : -1;
}

/* The index of s (a string that outlives the encoding), added when new;
 * -1 when the table is full (a bug in the bound). NULL is "". */
static int64_t
strtab_intern(strtab_t *t, const char *s)
{
    size_t   i;
    int32_t  v;

    if (s == NULL) {
        s = "";
    }
    for (i = str_hash(s) & t->mask; (v = t->slots[i]) != 0;
         i = (i + 1) & t->mask)
    {
        if (strcmp(t->strs[v - 1], s) == 0) {
            return v - 1;
        }
    }
    if (t->n == t->max) {
        return -1;
    }
    t->strs[t->n] = (char *) s;
    t->slots[i] = (int32_t) ++t->n;
    return (int64_t) t->n - 1;
}

static pb_value_type_t *
value_type(sp_arena_t *a, strtab_t *t, const char *type, const char *unit)
{
    static const pb_value_type_t  init = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    pb_value_type_t              *vt = sp_arena_alloc(a, sizeof(*vt));

    if (vt == NULL) {
        return NULL;
    }
    *vt = init;
    vt->type = strtab_intern(t, type);
    vt->unit = strtab_intern(t, unit);
    return vt->type >= 0 && vt->unit >= 0 ? vt : NULL;
}

static pb_label_t *
str_label(sp_arena_t *a, strtab_t *t, const char *key, const char *str)
{
    static const pb_label_t  init = PERFTOOLS__PROFILES__LABEL__INIT;
    pb_label_t              *l = sp_arena_alloc(a, sizeof(*l));

    if (l == NULL || str == NULL) {
        return NULL;
    }
    *l = init;
    l->key = strtab_intern(t, key);
    l->str = strtab_intern(t, str);
    return l->key >= 0 && l->str >= 0 ? l : NULL;
}

static char *
hex(sp_arena_t *a, const uint8_t *id, size_t n)
{
    char  *s = sp_arena_alloc(a, 2 * n + 1);

    if (s != NULL) {
        sp_hex_encode(s, id, n);
        s[2 * n] = '\0';
    }
    return s;
}

static int
add_mappings(sp_arena_t *a, const sp_profile_t *p, strtab_t *t,
    pb_profile_t *pr)
{
    static const pb_mapping_t  init = PERFTOOLS__PROFILES__MAPPING__INIT;
    const sp_profile_mapping_t *pm;
    pb_mapping_t               *m;
    size_t                      i;

    pr->mapping = sp_arena_alloc(a, (p->nmappings + 1) * sizeof(*pr->mapping));
    if (pr->mapping == NULL) {
        return -1;
    }
    for (i = 0; i < p->nmappings; i++) {
        pm = &p->mappings[i];
        m = sp_arena_alloc(a, sizeof(*m));
        if (m == NULL) {
            return -1;
        }
        *m = init;
        m->id = i + 1;
        m->memory_start = pm->start;
        m->memory_limit = pm->limit;
        m->file_offset = pm->offset;
        m->filename = strtab_intern(t, pm->filename);
        m->build_id = pm->build_id != NULL ? strtab_intern(t, pm->build_id) : 0;
        if (m->filename < 0 || m->build_id < 0) {
            return -1;
        }
        pr->mapping[i] = m;
    }
    pr->n_mapping = p->nmappings;
    return 0;
}

static int
add_functions(sp_arena_t *a, const sp_profile_t *p, strtab_t *t,
    pb_profile_t *pr)
{
    static const pb_function_t  init = PERFTOOLS__PROFILES__FUNCTION__INIT;
    pb_function_t              *f;
    size_t                      i;

    pr->function = sp_arena_alloc(a,
                                  (p->nfunctions + 1) * sizeof(*pr->function));
    if (pr->function == NULL) {
        return -1;
    }
    for (i = 0; i < p->nfunctions; i++) {
        f = sp_arena_alloc(a, sizeof(*f));
        if (f == NULL) {
            return -1;
        }
        *f = init;
        f->id = i + 1;
        f->name = strtab_intern(t, p->functions[i].name);
        f->system_name = f->name;
        f->filename = strtab_intern(t, p->functions[i].filename);
        if (f->name < 0 || f->filename < 0) {
            return -1;
        }
        pr->function[i] = f;
    }
    pr->n_function = p->nfunctions;
    return 0;
}

static int
add_locations(sp_arena_t *a, const sp_profile_t *p, pb_profile_t *pr)
{
    static const pb_location_t  loc_init = PERFTOOLS__PROFILES__LOCATION__INIT;
    static const pb_line_t      line_init = PERFTOOLS__PROFILES__LINE__INIT;
    const sp_profile_location_t *pl;
    pb_location_t               *l;
    size_t                       i;

    pr->location = sp_arena_alloc(a,
                                  (p->nlocations + 1) * sizeof(*pr->location));
    if (pr->location == NULL) {
        return -1;
    }
    for (i = 0; i < p->nlocations; i++) {
        pl = &p->locations[i];
        if (pl->mapping >= (int64_t) p->nmappings
            || pl->function >= (int64_t) p->nfunctions)
        {
            return -1;
        }
        l = sp_arena_alloc(a, sizeof(*l));
        if (l == NULL) {
            return -1;
        }
        *l = loc_init;
        l->id = i + 1;
        l->mapping_id = pl->mapping >= 0 ? (uint64_t) pl->mapping + 1 : 0;
        l->address = pl->address;
        if (pl->function >= 0) {
            l->line = sp_arena_alloc(a, sizeof(*l->line));
            if (l->line == NULL) {
                return -1;
            }
            l->line[0] = sp_arena_alloc(a, sizeof(**l->line));
            if (l->line[0] == NULL) {
                return -1;
            }
            *l->line[0] = line_init;
            l->line[0]->function_id = (uint64_t) pl->function + 1;
            l->n_line = 1;
            if (pl->mapping >= 0) {
                pr->mapping[pl->mapping]->has_functions = 1;
            }
        }
        pr->location[i] = l;
    }
    pr->n_location = p->nlocations;
    return 0;
}

/* count * period in ns, saturated: the CLI re-encodes counts read from
 * files it does not trust. */
static int64_t
sample_ns(int64_t count, uint64_t period)
{
    int64_t  per = period > INT64_MAX ? INT64_MAX : (int64_t) period, v;

    if (__builtin_mul_overflow(count, per, &v)) {
        return count < 0 ? INT64_MIN : INT64_MAX;
    }
    return v;
}

static pb_sample_t *
sample_to_pb(sp_arena_t *a, const sp_profile_t *p, strtab_t *t,
    const sp_profile_sample_t *ps, sp_pprof_span_labels_t span_labels,
    int wall)
{
    static const pb_sample_t  init = PERFTOOLS__PROFILES__SAMPLE__INIT;
    pb_sample_t              *s;
    size_t                    i;
    int32_t                   loc;

    if ((size_t) ps->stack_off + ps->stack_len > p->nlocs) {
        return NULL;
    }
    s = sp_arena_alloc(a, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    *s = init;
    s->location_id = sp_arena_alloc(a,
                                    (ps->stack_len + 1) * sizeof(uint64_t));
    s->value = sp_arena_alloc(a, 3 * sizeof(int64_t));
    if (s->location_id == NULL || s->value == NULL) {
        return NULL;
    }
    for (i = 0; i < ps->stack_len; i++) {
        loc = p->locs[ps->stack_off + i];
        if (loc < 0 || (size_t) loc >= p->nlocations) {
            return NULL;
        }
        s->location_id[i] = (uint64_t) loc + 1;
    }
    s->n_location_id = ps->stack_len;
    s->value[0] = ps->count;
    /* Each sample's own period: true CPU time while the rate changes. */
    s->value[1] = ps->cpu_ns != 0 ? ps->cpu_ns
                                  : sample_ns(ps->count, p->period_ns);
    s->n_value = 2;
    if (wall) {
        s->value[2] = ps->off_cpu_ns;
        s->n_value = 3;
    }

    if (ps->has_span) {
        s->label = sp_arena_alloc(a, 3 * sizeof(pb_label_t *));
        if (s->label == NULL) {
            return NULL;
        }
        if (span_labels == SP_PPROF_SPAN_LABELS_TRACE) {
            s->label[s->n_label++] = str_label(a, t, "trace_id",
                hex(a, ps->trace_id, SP_TRACE_ID_LEN));
        }
        s->label[s->n_label++] = str_label(a, t, "span_id",
            hex(a, ps->span_id, SP_SPAN_ID_LEN));
        if (ps->span_name != NULL) {
            s->label[s->n_label++] = str_label(a, t, "span_name",
                                               ps->span_name);
        }
        for (i = 0; i < s->n_label; i++) {
            if (s->label[i] == NULL) {
                return NULL;
            }
        }
    }
    return s;
}

static pb_profile_t *
build_profile(sp_arena_t *a, const sp_profile_t *p,
    sp_pprof_span_labels_t span_labels, int kind)
{
    int                        wall = kind == SP_SAMPLE_WALL;
    static const pb_profile_t  init = PERFTOOLS__PROFILES__PROFILE__INIT;
    pb_profile_t              *pr;
    strtab_t                   t;
    size_t                     i;

    /* "", up to 6 type/unit names, 3 label keys; two per mapping and function;
     * three per sample. */
    if (strtab_init(a, &t, 10 + 2 * p->nmappings + 2 * p->nfunctions
                           + 3 * p->nsamples) != 0)
    {
        return NULL;
    }
    pr = sp_arena_alloc(a, sizeof(*pr));
    if (pr == NULL) {
        return NULL;
    }
    *pr = init;
    strtab_intern(&t, "");

    pr->sample_type = sp_arena_alloc(a, 3 * sizeof(pb_value_type_t *));
    if (pr->sample_type == NULL) {
        return NULL;
    }
    if (kind == SP_SAMPLE_ALLOC || kind == SP_SAMPLE_INUSE) {
        /* As Go's heap profiles: values [objects, bytes]. */
        pr->sample_type[0] = value_type(a, &t, kind == SP_SAMPLE_ALLOC
                                        ? "alloc_objects" : "inuse_objects",
                                        "count");
        pr->sample_type[1] = value_type(a, &t, kind == SP_SAMPLE_ALLOC
                                        ? "alloc_space" : "inuse_space",
                                        "bytes");
        pr->period_type = value_type(a, &t, "space", "bytes");
    } else {
        pr->sample_type[0] = value_type(a, &t, "samples", "count");
        pr->sample_type[1] = value_type(a, &t, wall ? "wall" : "cpu",
                                        "nanoseconds");
        pr->period_type = value_type(a, &t, wall ? "wall" : "cpu",
                                     "nanoseconds");
    }
    pr->n_sample_type = 2;
    if (wall) {
        pr->sample_type[2] = value_type(a, &t, "off_cpu", "nanoseconds");
        pr->n_sample_type = 3;
        if (pr->sample_type[2] == NULL) {
            return NULL;
        }
    }
    if (pr->sample_type[0] == NULL || pr->sample_type[1] == NULL
        || pr->period_type == NULL)
    {
        return NULL;
    }
    pr->period = (int64_t) p->period_ns;
    pr->time_nanos = (int64_t) p->start_ns;
    pr->duration_nanos = p->end_ns > p->start_ns
                         ? (int64_t) (p->end_ns - p->start_ns) : 0;

    if (add_mappings(a, p, &t, pr) != 0 || add_functions(a, p, &t, pr) != 0
        || add_locations(a, p, pr) != 0)
    {
        return NULL;
    }

    pr->sample = sp_arena_alloc(a, (p->nsamples + 1) * sizeof(pb_sample_t *));
    if (pr->sample == NULL) {
        return NULL;
    }
    for (i = 0; i < p->nsamples; i++) {
        pr->sample[i] = sample_to_pb(a, p, &t, &p->samples[i],
                                     span_labels, wall);
        if (pr->sample[i] == NULL) {
            return NULL;
        }
    }
    pr->n_sample = p->nsamples;

    pr->string_table = t.strs;
    pr->n_string_table = t.n;
    return pr;
}

int
sp_pprof_encode(sp_arena_t *a, const sp_profile_t *p, int gzip,
    sp_buf_t *out)
{
    return sp_pprof_encode_opts(a, p, &(sp_pprof_opts_t) {
        .gzip = gzip, .span_labels = SP_PPROF_SPAN_LABELS_TRACE }, out);
}

int
sp_pprof_encode_opts(sp_arena_t *a, const sp_profile_t *p,
    const sp_pprof_opts_t *o, sp_buf_t *out)
{
    pb_profile_t  *pr = build_profile(a, p, o->span_labels, o->kind);
    size_t         size, len0 = out->len;
    uint8_t       *tmp;
    int            gzip = o->gzip;

    if (pr == NULL) {
        return -1;
    }
    size = protobuf_c_message_get_packed_size(&pr->base);
    if (!gzip) {
        if (sp_buf_reserve(out, size) != 0) {
            return -1;
        }
        out->len += protobuf_c_message_pack(&pr->base, out->data + out->len);
        return 0;
    }
    tmp = sp_arena_alloc(a, size + 1);
    if (tmp == NULL) {
        return -1;
    }
    size = protobuf_c_message_pack(&pr->base, tmp);
    if (size > UINT32_MAX || sp_gzip_append(tmp, size, out) != 0) {
        out->len = len0;
        return -1;
    }
    return 0;
}
