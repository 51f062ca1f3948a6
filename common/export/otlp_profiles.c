#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include "common/export/otlp_common.h"
#include "common/export/otlp_profiles.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    pb_request_t;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary
    pb_dict_t;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles
    pb_resource_profiles_t;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles
    pb_scope_profiles_t;
typedef Opentelemetry__Proto__Profiles__V1development__Profile   pb_profile_t;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pb_value_type_t;
typedef Opentelemetry__Proto__Profiles__V1development__Sample    pb_sample_t;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping   pb_mapping_t;
typedef Opentelemetry__Proto__Profiles__V1development__Location  pb_location_t;
typedef Opentelemetry__Proto__Profiles__V1development__Line      pb_line_t;
typedef Opentelemetry__Proto__Profiles__V1development__Function  pb_function_t;
typedef Opentelemetry__Proto__Profiles__V1development__Link      pb_link_t;
typedef Opentelemetry__Proto__Profiles__V1development__Stack     pb_stack_t;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit
    pb_kvu_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue               pb_any_t;

#define ATTR_SPAN_NAME  "span.name"
#define ATTR_BUILD_ID   "process.executable.build_id.gnu"

/* Deduplication of table entries by their bytes: an open-addressing hash
 * sized once (load <= 1/2) for the most entries a table can get. Values are
 * table indices, never 0 (entry 0 is the zero value, never looked up). */
typedef struct {
    const void  *key;
    size_t       len;
    int32_t      val;
} dedup_slot_t;

typedef struct {
    dedup_slot_t  *slots;
    size_t         mask;
} dedup_t;

static int
dedup_init(sp_arena_t *a, dedup_t *d, size_t max)
{
    size_t  cap = 16;

    while (cap < max * 2) {
        cap *= 2;
    }
    d->slots = sp_arena_alloc(a, cap * sizeof(dedup_slot_t));
    d->mask = cap - 1;
    return d->slots != NULL ? 0 : -1;
}

/* The slot of key: holding it (val != 0), or the empty one where it goes
 * (the caller then sets key, len and val; key must outlive the encoding). */
static dedup_slot_t *
dedup_slot(dedup_t *d, const void *key, size_t len)
{
    const unsigned char  *k = key;
    uint64_t              h = 0xcbf29ce484222325ULL;   /* FNV-1a */
    size_t                i;
    dedup_slot_t         *s;

    for (i = 0; i < len; i++) {
        h = (h ^ k[i]) * 0x100000001b3ULL;
    }
    for (i = h & d->mask; ; i = (i + 1) & d->mask) {
        s = &d->slots[i];
        if (s->val == 0
            || (s->len == len && memcmp(s->key, key, len) == 0))
        {
            return s;
        }
    }
}

/* Sets an empty slot, unless its table already has max entries. */
static int
dedup_set(dedup_slot_t *s, const void *key, size_t len, size_t n, size_t max)
{
    if (n >= max) {
        return -1;
    }
    s->key = key;
    s->len = len;
    s->val = (int32_t) n;
    return 0;
}

/* The encoder's state: the dictionary being filled and its indexes. */
typedef struct {
    sp_arena_t          *a;
    const sp_profile_t  *p;         /* the part being encoded */
    int                  type;      /* its sp_otlp_profile_type_t */
    /* where p's mappings, functions and locations start in the
     * dictionary's tables, minus 1 (parts may share their tables) */
    int32_t              map_base, fn_base, loc_base;
    pb_dict_t           *dict;
    dedup_t              strs, attrs, links, stacks;
    size_t               max_strs, max_attrs, max_links, max_stacks;
} enc_t;

/* The string_table index of s; "" and NULL are 0; -1 when out of room. */
static int32_t
str_index(enc_t *e, const char *s)
{
    pb_dict_t     *d = e->dict;
    size_t         len;
    dedup_slot_t  *slot;

    if (s == NULL || *s == '\0') {
        return 0;
    }
    len = strlen(s);
    slot = dedup_slot(&e->strs, s, len);
    if (slot->val == 0) {
        if (dedup_set(slot, s, len, d->n_string_table, e->max_strs) != 0) {
            return -1;
        }
        d->string_table[d->n_string_table++] = (char *) s;
    }
    return slot->val;
}

/* The attribute_table index of a string attribute; -1 on failure. */
static int32_t
attr_index(enc_t *e, const char *key, const char *value)
{
    static const pb_kvu_t  kvu_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT;
    static const pb_any_t  any_init =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    pb_dict_t     *d = e->dict;
    size_t         klen = strlen(key), vlen = strlen(value);
    char          *id;
    pb_kvu_t      *kvu;
    dedup_slot_t  *slot;
    int32_t        i;

    /* Identity "key\0value" (the arena zeroes). */
    id = sp_arena_alloc(e->a, klen + 1 + vlen);
    if (id == NULL) {
        return -1;
    }
    memcpy(id, key, klen);
    memcpy(id + klen + 1, value, vlen);
    slot = dedup_slot(&e->attrs, id, klen + 1 + vlen);
    if (slot->val != 0) {
        return slot->val;
    }
    if (dedup_set(slot, id, klen + 1 + vlen, d->n_attribute_table,
                  e->max_attrs) != 0)
    {
        return -1;
    }
    i = slot->val;
    kvu = sp_arena_alloc(e->a, sizeof(*kvu));
    if (kvu == NULL) {
        return -1;
    }
    *kvu = kvu_init;
    kvu->key_strindex = str_index(e, key);
    kvu->value = sp_arena_alloc(e->a, sizeof(*kvu->value));
    if (kvu->key_strindex < 0 || kvu->value == NULL) {
        return -1;
    }
    *kvu->value = any_init;
    kvu->value->value_case =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    kvu->value->string_value = (char *) value;
    d->attribute_table[d->n_attribute_table++] = kvu;
    return i;
}

/* The link_table index of the sample's span; -1 on failure. */
static int32_t
link_index(enc_t *e, const sp_profile_sample_t *ps)
{
    static const pb_link_t  init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
    pb_dict_t     *d = e->dict;
    uint8_t       *id;
    pb_link_t     *l;
    dedup_slot_t  *slot;
    int32_t        i;

    id = sp_arena_alloc(e->a, SP_TRACE_ID_LEN + SP_SPAN_ID_LEN);
    if (id == NULL) {
        return -1;
    }
    memcpy(id, ps->trace_id, SP_TRACE_ID_LEN);
    memcpy(id + SP_TRACE_ID_LEN, ps->span_id, SP_SPAN_ID_LEN);
    slot = dedup_slot(&e->links, id, SP_TRACE_ID_LEN + SP_SPAN_ID_LEN);
    if (slot->val != 0) {
        return slot->val;
    }
    if (dedup_set(slot, id, SP_TRACE_ID_LEN + SP_SPAN_ID_LEN,
                  d->n_link_table, e->max_links) != 0)
    {
        return -1;
    }
    i = slot->val;
    l = sp_arena_alloc(e->a, sizeof(*l));
    if (l == NULL) {
        return -1;
    }
    *l = init;
    l->trace_id.data = id;
    l->trace_id.len = SP_TRACE_ID_LEN;
    l->span_id.data = id + SP_TRACE_ID_LEN;
    l->span_id.len = SP_SPAN_ID_LEN;
    d->link_table[d->n_link_table++] = l;
    return i;
}

/* The stack_table index of the sample's stack (0 for an empty one); -1 on
 * failure or a location index out of range. */
static int32_t
stack_index(enc_t *e, const sp_profile_sample_t *ps)
{
    static const pb_stack_t  init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
    const int32_t  *raw = e->p->locs + ps->stack_off;
    size_t          len = ps->stack_len * sizeof(int32_t);
    pb_dict_t      *d = e->dict;
    pb_stack_t     *st;
    dedup_slot_t   *slot;
    int32_t         i, *locs;
    size_t          j;

    if (ps->stack_len == 0) {
        return 0;
    }
    /* The dictionary's location indices (the key of the stack). */
    locs = sp_arena_alloc(e->a, len);
    if (locs == NULL) {
        return -1;
    }
    for (j = 0; j < ps->stack_len; j++) {
        if (raw[j] < 0 || (size_t) raw[j] >= e->p->nlocations) {
            return -1;
        }
        locs[j] = raw[j] + e->loc_base + 1;
    }
    slot = dedup_slot(&e->stacks, locs, len);
    if (slot->val != 0) {
        return slot->val;
    }
    if (dedup_set(slot, locs, len, d->n_stack_table, e->max_stacks) != 0) {
        return -1;
    }
    i = slot->val;
    st = sp_arena_alloc(e->a, sizeof(*st));
    if (st == NULL) {
        return -1;
    }
    *st = init;
    st->location_indices = sp_arena_alloc(e->a,
                                          ps->stack_len * sizeof(int32_t));
    if (st->location_indices == NULL) {
        return -1;
    }
    for (j = 0; j < ps->stack_len; j++) {
        st->location_indices[j] = locs[j];       /* leaf first, as given */
    }
    st->n_location_indices = ps->stack_len;
    d->stack_table[d->n_stack_table++] = st;
    return i;
}

/* Allocates a repeated field of n + 1 pointers (the zero entry first) and
 * fills entry 0 with a zero message of `size` bytes copied from init. */
static void **
table_new(sp_arena_t *a, size_t n, const void *init, size_t size)
{
    void  **t = sp_arena_alloc(a, (n + 1) * sizeof(void *));

    if (t == NULL) {
        return NULL;
    }
    t[0] = sp_arena_alloc(a, size);
    if (t[0] == NULL) {
        return NULL;
    }
    memcpy(t[0], init, size);
    return t;
}

#define TABLE_NEW(a, n, field, init)                                          \
    ((field) = (void *) table_new(a, n, &(init), sizeof(init)))

static pb_dict_t *
dict_new(enc_t *e, const sp_otlp_profile_part_t *parts, size_t n)
{
    static const pb_dict_t      dict_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    static const pb_mapping_t   mapping_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
    static const pb_location_t  location_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    static const pb_function_t  function_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
    static const pb_link_t      link_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
    static const pb_kvu_t       kvu_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT;
    static const pb_stack_t     stack_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
    /* link_table[0]: all-zero ids of the proper lengths, as the spec
     * recommends for codecs that insist on 16/8-byte ids. */
    static uint8_t              zero_ids[SP_TRACE_ID_LEN + SP_SPAN_ID_LEN];
    pb_dict_t                  *d;
    pb_link_t                  *l0;
    size_t                      i, nmap = 0, nfn = 0, nloc = 0, nsmp = 0;

    d = sp_arena_alloc(e->a, sizeof(*d));
    if (d == NULL) {
        return NULL;
    }
    *d = dict_init;
    e->dict = d;

    for (i = 0; i < n; i++) {
        nmap += parts[i].p->nmappings;
        nfn += parts[i].p->nfunctions;
        nloc += parts[i].p->nlocations;
        nsmp += parts[i].p->nsamples;
    }
    /* "", value type names (cpu, wall, off_cpu, nanoseconds; the memory
     * ones, count, bytes, space), 2 attribute keys; a file per mapping; a
     * name and a file per function. */
    e->max_strs = 1 + 16 + 2 + nmap + 2 * nfn;
    e->max_attrs = 1 + nmap + nsmp;
    e->max_links = 1 + nsmp;
    e->max_stacks = 1 + nsmp;

    d->string_table = sp_arena_alloc(e->a, e->max_strs * sizeof(char *));
    if (d->string_table == NULL
        || TABLE_NEW(e->a, nmap, d->mapping_table, mapping_init) == NULL
        || TABLE_NEW(e->a, nloc, d->location_table,
                     location_init) == NULL
        || TABLE_NEW(e->a, nfn, d->function_table,
                     function_init) == NULL
        || TABLE_NEW(e->a, e->max_links, d->link_table, link_init) == NULL
        || TABLE_NEW(e->a, e->max_attrs, d->attribute_table, kvu_init) == NULL
        || TABLE_NEW(e->a, e->max_stacks, d->stack_table, stack_init) == NULL
        || dedup_init(e->a, &e->strs, e->max_strs) != 0
        || dedup_init(e->a, &e->attrs, e->max_attrs) != 0
        || dedup_init(e->a, &e->links, e->max_links) != 0
        || dedup_init(e->a, &e->stacks, e->max_stacks) != 0)
    {
        return NULL;
    }
    d->string_table[0] = (char *) "";
    d->n_string_table = 1;
    d->n_mapping_table = 1;
    d->n_location_table = 1;
    d->n_function_table = 1;
    d->n_attribute_table = 1;
    d->n_stack_table = 1;
    l0 = d->link_table[0];
    l0->trace_id.data = zero_ids;
    l0->trace_id.len = SP_TRACE_ID_LEN;
    l0->span_id.data = zero_ids + SP_TRACE_ID_LEN;
    l0->span_id.len = SP_SPAN_ID_LEN;
    d->n_link_table = 1;
    return d;
}

static int
add_mappings(enc_t *e)
{
    static const pb_mapping_t    init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
    const sp_profile_mapping_t  *pm;
    pb_mapping_t                *m;
    size_t                       i;

    for (i = 0; i < e->p->nmappings; i++) {
        pm = &e->p->mappings[i];
        m = sp_arena_alloc(e->a, sizeof(*m));
        if (m == NULL) {
            return -1;
        }
        *m = init;
        m->memory_start = pm->start;
        m->memory_limit = pm->limit;
        m->file_offset = pm->offset;
        m->filename_strindex = str_index(e, pm->filename);
        if (m->filename_strindex < 0) {
            return -1;
        }
        if (pm->build_id != NULL && pm->build_id[0] != '\0') {
            m->attribute_indices = sp_arena_alloc(e->a, sizeof(int32_t));
            if (m->attribute_indices == NULL) {
                return -1;
            }
            m->attribute_indices[0] = attr_index(e, ATTR_BUILD_ID,
                                                 pm->build_id);
            if (m->attribute_indices[0] < 0) {
                return -1;
            }
            m->n_attribute_indices = 1;
        }
        e->dict->mapping_table[e->dict->n_mapping_table++] = m;
    }
    return 0;
}

static int
add_functions(enc_t *e)
{
    static const pb_function_t  init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
    pb_function_t              *f;
    size_t                      i;

    for (i = 0; i < e->p->nfunctions; i++) {
        f = sp_arena_alloc(e->a, sizeof(*f));
        if (f == NULL) {
            return -1;
        }
        *f = init;
        f->name_strindex = str_index(e, e->p->functions[i].name);
        f->system_name_strindex = f->name_strindex;
        f->filename_strindex = str_index(e, e->p->functions[i].filename);
        if (f->name_strindex < 0 || f->filename_strindex < 0) {
            return -1;
        }
        e->dict->function_table[e->dict->n_function_table++] = f;
    }
    return 0;
}

static int
add_locations(enc_t *e)
{
    static const pb_location_t    loc_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    static const pb_line_t        line_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
    const sp_profile_t           *p = e->p;
    const sp_profile_location_t  *pl;
    pb_location_t                *l;
    size_t                        i;

    for (i = 0; i < p->nlocations; i++) {
        pl = &p->locations[i];
        if (pl->mapping >= (int64_t) p->nmappings
            || pl->function >= (int64_t) p->nfunctions)
        {
            return -1;
        }
        l = sp_arena_alloc(e->a, sizeof(*l));
        if (l == NULL) {
            return -1;
        }
        *l = loc_init;
        l->mapping_index = pl->mapping >= 0 ? pl->mapping + e->map_base + 1
                                            : 0;
        l->address = pl->address;
        if (pl->function >= 0) {
            l->lines = sp_arena_alloc(e->a, sizeof(*l->lines));
            if (l->lines == NULL) {
                return -1;
            }
            l->lines[0] = sp_arena_alloc(e->a, sizeof(**l->lines));
            if (l->lines[0] == NULL) {
                return -1;
            }
            *l->lines[0] = line_init;
            l->lines[0]->function_index = pl->function + e->fn_base + 1;
            l->n_lines = 1;
        }
        e->dict->location_table[e->dict->n_location_table++] = l;
    }
    return 0;
}

static pb_sample_t *
sample_to_pb(enc_t *e, const sp_profile_sample_t *ps)
{
    static const pb_sample_t  init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT;
    const sp_profile_t       *p = e->p;
    pb_sample_t              *s;
    size_t                    i, nts = ps->ts_len;
    int64_t                   total;

    if ((size_t) ps->stack_off + ps->stack_len > p->nlocs
        || (size_t) ps->ts_off + ps->ts_len > p->ntimestamps)
    {
        return NULL;
    }
    s = sp_arena_alloc(e->a, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    *s = init;
    s->stack_index = stack_index(e, ps);
    if (s->stack_index < 0) {
        return NULL;
    }

    if (ps->has_span) {
        s->link_index = link_index(e, ps);
        if (s->link_index < 0) {
            return NULL;
        }
        if (ps->span_name != NULL) {
            s->attribute_indices = sp_arena_alloc(e->a, sizeof(int32_t));
            if (s->attribute_indices == NULL) {
                return NULL;
            }
            s->attribute_indices[0] = attr_index(e, ATTR_SPAN_NAME,
                                                 ps->span_name);
            if (s->attribute_indices[0] < 0) {
                return NULL;
            }
            s->n_attribute_indices = 1;
        }
    }

    /* Values are CPU nanoseconds (sample_type cpu/nanoseconds), one per
     * timestamp: each signal's weight times the period it was taken at, so
     * the sums stay true CPU time when the rate changes within the
     * interval (load shedding, the API). values and timestamps_unix_nano
     * must be of one length when both are set. */
    total = ps->cpu_ns != 0 ? ps->cpu_ns
                            : ps->count * (int64_t) p->period_ns;
    if (e->type >= SP_OTLP_PROFILE_ALLOC_OBJECTS) {
        /* memory: objects or bytes, one value (a snapshot for in-use) */
        total = e->type == SP_OTLP_PROFILE_ALLOC_OBJECTS
                || e->type == SP_OTLP_PROFILE_INUSE_OBJECTS
                ? ps->count : ps->cpu_ns;
        nts = 0;
    }
    if (e->type == SP_OTLP_PROFILE_OFF_CPU) {
        /* off-CPU ns per signal when known, else the sample's sum */
        total = ps->off_cpu_ns;
        if (p->ts_off_cpu_ns == NULL) {
            nts = 0;
        }
    }
    if (nts == 0 || (int64_t) nts > ps->count) {
        nts = 0;
    }
    s->values = sp_arena_alloc(e->a, (nts ? nts : 1) * sizeof(int64_t));
    if (s->values == NULL) {
        return NULL;
    }
    if (nts == 0) {
        s->values[0] = total;
        s->n_values = 1;
        return s;
    }
    if (e->type == SP_OTLP_PROFILE_OFF_CPU) {
        for (i = 0; i < nts; i++) {
            s->values[i] = p->ts_off_cpu_ns[ps->ts_off + i];
        }
    } else if (p->ts_cpu_ns != NULL) {
        for (i = 0; i < nts; i++) {
            s->values[i] = p->ts_cpu_ns[ps->ts_off + i];
        }
    } else {
        /* Periods unknown per signal: one period each, the rest (timer
         * overruns) on the last. */
        for (i = 0; i < nts; i++) {
            s->values[i] = (int64_t) p->period_ns;
        }
        s->values[nts - 1] += total - (int64_t) (nts * p->period_ns);
    }
    s->n_values = nts;
    /* The timestamps array outlives the encoding. */
    s->timestamps_unix_nano = p->timestamps + ps->ts_off;
    s->n_timestamps_unix_nano = nts;
    return s;
}

static pb_value_type_t *
value_type(enc_t *e, const char *type, const char *unit)
{
    static const pb_value_type_t  init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__VALUE_TYPE__INIT;
    pb_value_type_t              *vt = sp_arena_alloc(e->a, sizeof(*vt));

    if (vt == NULL) {
        return NULL;
    }
    *vt = init;
    vt->type_strindex = str_index(e, type);
    vt->unit_strindex = str_index(e, unit);
    return vt->type_strindex >= 0 && vt->unit_strindex >= 0 ? vt : NULL;
}

static pb_profile_t *
profile_new(enc_t *e)
{
    static const pb_profile_t  init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILE__INIT;
    const sp_profile_t        *p = e->p;
    pb_profile_t              *pr;
    uint8_t                   *id;
    size_t                     i;

    pr = sp_arena_alloc(e->a, sizeof(*pr));
    id = sp_arena_alloc(e->a, SP_TRACE_ID_LEN);
    if (pr == NULL || id == NULL) {
        return NULL;
    }
    *pr = init;
    switch (e->type) {
    case SP_OTLP_PROFILE_ALLOC_OBJECTS:
    case SP_OTLP_PROFILE_ALLOC_SPACE:
    case SP_OTLP_PROFILE_INUSE_OBJECTS:
    case SP_OTLP_PROFILE_INUSE_SPACE:
        pr->sample_type = value_type(e,
            e->type == SP_OTLP_PROFILE_ALLOC_OBJECTS ? "alloc_objects"
            : e->type == SP_OTLP_PROFILE_ALLOC_SPACE ? "alloc_space"
            : e->type == SP_OTLP_PROFILE_INUSE_OBJECTS ? "inuse_objects"
            : "inuse_space",
            e->type == SP_OTLP_PROFILE_ALLOC_OBJECTS
            || e->type == SP_OTLP_PROFILE_INUSE_OBJECTS ? "count" : "bytes");
        pr->period_type = value_type(e, "space", "bytes");
        break;
    default:
        pr->sample_type = value_type(e, e->type == SP_OTLP_PROFILE_CPU
                                        ? "cpu"
                                        : e->type == SP_OTLP_PROFILE_WALL
                                        ? "wall" : "off_cpu", "nanoseconds");
        pr->period_type = value_type(e, e->type == SP_OTLP_PROFILE_CPU
                                        ? "cpu" : "wall", "nanoseconds");
    }
    if (pr->sample_type == NULL || pr->period_type == NULL) {
        return NULL;
    }
    pr->period = (int64_t) p->period_ns;
    pr->time_unix_nano = p->start_ns;
    pr->duration_nano = p->end_ns > p->start_ns ? p->end_ns - p->start_ns : 0;
    sp_trace_id_generate(id);       /* 16 random bytes, never all zero */
    pr->profile_id.data = id;
    pr->profile_id.len = SP_TRACE_ID_LEN;

    pr->samples = sp_arena_alloc(e->a,
                                 (p->nsamples + 1) * sizeof(pb_sample_t *));
    if (pr->samples == NULL) {
        return NULL;
    }
    pr->n_samples = 0;
    for (i = 0; i < p->nsamples; i++) {
        /* an off-CPU profile holds the stacks that were off CPU */
        if (e->type == SP_OTLP_PROFILE_OFF_CPU
            && p->samples[i].off_cpu_ns == 0)
        {
            continue;
        }
        pr->samples[pr->n_samples] = sample_to_pb(e, &p->samples[i]);
        if (pr->samples[pr->n_samples] == NULL) {
            return NULL;
        }
        pr->n_samples++;
    }
    return pr;
}

static pb_request_t *
build_request(sp_arena_t *a, const sp_otlp_profile_part_t *parts, size_t n)
{
    static const pb_request_t            req_init =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
    static const pb_resource_profiles_t  rp_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT;
    static const pb_scope_profiles_t     sp_init =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT;
    pb_request_t            *req;
    pb_resource_profiles_t  *rp;
    pb_scope_profiles_t     *sp;
    const sp_profile_t      *p;
    enc_t                    e;
    size_t                   i, j;
    int32_t                 *bases;

    if (n == 0) {
        return NULL;
    }
    memset(&e, 0, sizeof(e));
    e.a = a;
    p = parts[0].p;
    bases = sp_arena_alloc(a, 3 * n * sizeof(int32_t));
    if (bases == NULL) {
        return NULL;
    }

    req = sp_arena_alloc(a, sizeof(*req));
    rp = sp_arena_alloc(a, sizeof(*rp));
    sp = sp_arena_alloc(a, sizeof(*sp));
    if (req == NULL || rp == NULL || sp == NULL) {
        return NULL;
    }
    *req = req_init;
    *rp = rp_init;
    *sp = sp_init;

    req->dictionary = dict_new(&e, parts, n);
    if (req->dictionary == NULL) {
        return NULL;
    }
    /* Each part's tables once: parts of one build share them. */
    for (i = 0; i < n; i++) {
        for (j = 0; j < i; j++) {
            if (parts[j].p->locations == parts[i].p->locations
                && parts[j].p->functions == parts[i].p->functions
                && parts[j].p->mappings == parts[i].p->mappings)
            {
                break;
            }
        }
        if (j < i) {
            memcpy(bases + 3 * i, bases + 3 * j, 3 * sizeof(int32_t));
            continue;
        }
        e.p = parts[i].p;
        e.map_base = bases[3 * i] = (int32_t) req->dictionary->n_mapping_table - 1;
        e.fn_base = bases[3 * i + 1] = (int32_t) req->dictionary->n_function_table - 1;
        e.loc_base = bases[3 * i + 2] = (int32_t) req->dictionary->n_location_table - 1;
        if (add_mappings(&e) != 0 || add_functions(&e) != 0
            || add_locations(&e) != 0)
        {
            return NULL;
        }
    }

    req->resource_profiles = sp_arena_alloc(a, sizeof(*req->resource_profiles));
    rp->scope_profiles = sp_arena_alloc(a, sizeof(*rp->scope_profiles));
    sp->profiles = sp_arena_alloc(a, n * sizeof(*sp->profiles));
    if (req->resource_profiles == NULL || rp->scope_profiles == NULL
        || sp->profiles == NULL)
    {
        return NULL;
    }
    if (p->resource != NULL) {
        rp->resource = sp_otlp_resource(a, p->resource);
        if (rp->resource == NULL) {
            return NULL;
        }
    }
    sp->scope = sp_otlp_scope(a);
    if (sp->scope == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        e.p = parts[i].p;
        e.type = parts[i].type;
        e.map_base = bases[3 * i];
        e.fn_base = bases[3 * i + 1];
        e.loc_base = bases[3 * i + 2];
        sp->profiles[i] = profile_new(&e);
        if (sp->profiles[i] == NULL) {
            return NULL;
        }
    }
    sp->n_profiles = n;
    rp->scope_profiles[0] = sp;
    rp->n_scope_profiles = 1;
    req->resource_profiles[0] = rp;
    req->n_resource_profiles = 1;
    return req;
}

int
sp_otlp_profiles_encode(sp_arena_t *a, const sp_profile_t *p, sp_buf_t *out)
{
    sp_otlp_profile_part_t  part = { p, SP_OTLP_PROFILE_CPU };

    return sp_otlp_profiles_encode_n(a, &part, 1, out);
}

int
sp_otlp_profiles_encode_n(sp_arena_t *a, const sp_otlp_profile_part_t *parts,
    size_t n, sp_buf_t *out)
{
    pb_request_t  *req = build_request(a, parts, n);
    size_t         size;

    if (req == NULL) {
        return -1;
    }
    size = protobuf_c_message_get_packed_size(&req->base);
    if (sp_buf_reserve(out, size) != 0) {
        return -1;
    }
    out->len += protobuf_c_message_pack(&req->base, out->data + out->len);
    return 0;
}

int
sp_otlp_profiles_parse_response(const uint8_t *body, size_t len,
    int64_t *rejected, char *msg, size_t msglen)
{
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
        *r;

    *rejected = 0;
    if (msglen > 0) {
        msg[0] = '\0';
    }
    r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
            NULL, len, body);
    if (r == NULL) {
        return -1;
    }
    if (r->partial_success != NULL) {
        *rejected = r->partial_success->rejected_profiles;
        if (msglen > 0 && r->partial_success->error_message != NULL) {
            strncpy(msg, r->partial_success->error_message, msglen - 1);
            msg[msglen - 1] = '\0';
        }
    }
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
        r, NULL);
    return 0;
}
