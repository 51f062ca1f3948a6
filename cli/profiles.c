/* cpu-*.pb.gz: gunzip (zlib), decode (protoc-c's generated code for
 * proto/pprof/profile.proto), validate and merge into one model whose
 * functions, mappings and locations are deduplicated across files. Writing
 * a filtered profile goes back through common/export/pprof.c. */

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "pprof/profile.pb-c.h"

#include "common/base/arena.h"
#include "common/trace/ids.h"
#include "common/export/gzip.h"
#include "common/export/pprof.h"
#include "common/profile/profile.h"
#include "cli/spanprof.h"

typedef Perftools__Profiles__Profile  pb_profile_t;

/* Decompressed profiles larger than this are refused (a gzip bomb, or not
 * something the exporter wrote). */
#define MAX_PROFILE_BYTES  ((size_t) 1 << 30)

void
cli_model_init(cli_model_t *m)
{
    memset(m, 0, sizeof(*m));
    cli_strpool_init(&m->strs);
    cli_keymap_init(&m->func_ids, 8);
    cli_keymap_init(&m->map_ids, 32);
    cli_keymap_init(&m->loc_ids, 16);
}

void
cli_model_free(cli_model_t *m)
{
    size_t  i;

    for (i = 0; i < m->nfiles; i++) {
        free(m->files[i].path);
    }
    free(m->files);
    free(m->funcs);
    free(m->maps);
    free(m->locs);
    free(m->stacks);
    free(m->samples);
    cli_strpool_free(&m->strs);
    cli_keymap_free(&m->func_ids);
    cli_keymap_free(&m->map_ids);
    cli_keymap_free(&m->loc_ids);
    free(m->type);
    free(m->unit);
    free(m->period_type);
    free(m->period_unit);
}

/* --- gzip ---------------------------------------------------------------- */

int
cli_gunzip(const uint8_t *in, size_t inlen, size_t max, sp_buf_t *out,
    const char **err)
{
    z_stream  zs;
    int       rc;

    if (inlen == 0) {
        *err = "empty file";
        return -1;
    }
    if (inlen < 2 || in[0] != 0x1f || in[1] != 0x8b) {
        *err = "not gzip data";
        return -1;
    }
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, 15 + 16) != Z_OK) {
        *err = "zlib initialisation failed";
        return -1;
    }
    zs.next_in = (Bytef *) in;
    zs.avail_in = (uInt) inlen;
    for (;;) {
        if (sp_buf_reserve(out, 64 * 1024) != 0) {
            *err = "out of memory";
            break;
        }
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt) (out->cap - out->len);
        rc = inflate(&zs, Z_NO_FLUSH);
        out->len = out->cap - zs.avail_out;
        if (out->len > max) {
            *err = max == MAX_PROFILE_BYTES ? "decompresses to more than 1 GiB"
                                            : "decompresses to more than "
                                              "the size limit";
            break;
        }
        if (rc == Z_STREAM_END) {
            if (zs.avail_in == 0) {
                inflateEnd(&zs);
                return 0;
            }
            /* Concatenated members are one gzip file. */
            if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f
                && zs.next_in[1] == 0x8b && inflateReset(&zs) == Z_OK)
            {
                continue;
            }
            *err = "trailing garbage after the gzip data";
            break;
        }
        if (rc == Z_OK) {
            continue;
        }
        if (rc == Z_BUF_ERROR) {
            /* We always give output room, so the input ran out. */
            *err = "truncated gzip data (the file ends early)";
            break;
        }
        *err = rc == Z_DATA_ERROR ? "corrupt gzip data" : "gunzip failed";
        break;
    }
    inflateEnd(&zs);
    return -1;
}

/* --- decoding ------------------------------------------------------------ */

typedef struct {
    cli_model_t        *m;
    const pb_profile_t *pb;
    char               *err;
    size_t              errlen;
    cli_keymap_t        funcs;      /* pprof function id -> model index */
    cli_keymap_t        maps;       /* pprof mapping id -> model index */
    cli_keymap_t        locs;       /* pprof location id -> frames[] start */
    int32_t            *frames;     /* model locations per pprof location */
    size_t              nframes, cframes;
    int64_t             total;      /* m->total with this file's samples */
} load_t;

__attribute__((format(printf, 2, 3)))
static int
invalid(load_t *l, const char *fmt, ...)
{
    va_list  ap;
    int      n;

    n = snprintf(l->err, l->errlen, "invalid pprof profile: ");
    if (n > 0 && (size_t) n < l->errlen) {
        va_start(ap, fmt);
        vsnprintf(l->err + n, l->errlen - (size_t) n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The string at a string-table index, or NULL when out of range. */
static const char *
pb_str(const load_t *l, int64_t i)
{
    if (i < 0 || (uint64_t) i >= l->pb->n_string_table) {
        return NULL;
    }
    return l->pb->string_table[i] != NULL ? l->pb->string_table[i] : "";
}

static int32_t
intern(cli_model_t *m, const char *s)
{
    return cli_strpool_intern(&m->strs, s, strlen(s));
}

static int
load_mappings(load_t *l)
{
    const Perftools__Profiles__Mapping  *pm;
    const char                          *file, *bid;
    cli_map_t                            mp, *slot;
    int32_t                              idx;
    size_t                               i;

    for (i = 0; i < l->pb->n_mapping; i++) {
        pm = l->pb->mapping[i];
        file = pb_str(l, pm->filename);
        bid = pb_str(l, pm->build_id);
        if (file == NULL || bid == NULL) {
            return invalid(l, "mapping %llu has a string index out of range",
                           (unsigned long long) pm->id);
        }
        memset(&mp, 0, sizeof(mp));
        mp.file = *file ? intern(l->m, file) : -1;
        mp.build_id = *bid ? intern(l->m, bid) : -1;
        mp.start = pm->memory_start;
        mp.limit = pm->memory_limit;
        mp.offset = pm->file_offset;
        idx = cli_keymap_put(&l->m->map_ids, &mp, (int32_t) l->m->nmaps);
        if (idx == (int32_t) l->m->nmaps) {
            slot = CLI_PUSH(l->m->maps, l->m->nmaps, l->m->cmaps);
            *slot = mp;
        }
        if (pm->id == 0 || cli_keymap_get(&l->maps, &pm->id) >= 0) {
            return invalid(l, "mapping id %llu is 0 or not unique",
                           (unsigned long long) pm->id);
        }
        cli_keymap_put(&l->maps, &pm->id, idx);
    }
    return 0;
}

static int
load_functions(load_t *l)
{
    const Perftools__Profiles__Function  *pf;
    const char                           *name, *sys, *file;
    cli_func_t                            fn;
    int32_t                               idx;
    size_t                                i;

    for (i = 0; i < l->pb->n_function; i++) {
        pf = l->pb->function[i];
        name = pb_str(l, pf->name);
        sys = pb_str(l, pf->system_name);
        file = pb_str(l, pf->filename);
        if (name == NULL || sys == NULL || file == NULL) {
            return invalid(l, "function %llu has a string index out of "
                           "range", (unsigned long long) pf->id);
        }
        if (*name == '\0') {
            name = *sys ? sys : "[unknown]";
        }
        fn.name = intern(l->m, name);
        fn.file = *file ? intern(l->m, file) : -1;
        idx = cli_keymap_put(&l->m->func_ids, &fn, (int32_t) l->m->nfuncs);
        if (idx == (int32_t) l->m->nfuncs) {
            *CLI_PUSH(l->m->funcs, l->m->nfuncs, l->m->cfuncs) = fn;
        }
        if (pf->id == 0 || cli_keymap_get(&l->funcs, &pf->id) >= 0) {
            return invalid(l, "function id %llu is 0 or not unique",
                           (unsigned long long) pf->id);
        }
        cli_keymap_put(&l->funcs, &pf->id, idx);
    }
    return 0;
}

static int32_t
model_loc(cli_model_t *m, uint64_t address, int32_t mapping, int32_t func)
{
    struct { uint64_t a; int32_t mp, fn; }  key;
    cli_loc_t                              *loc;
    const char                             *file, *base;
    char                                    name[512];
    int32_t                                 idx;

    memset(&key, 0, sizeof(key));
    key.a = address;
    key.mp = mapping;
    key.fn = func;
    idx = cli_keymap_put(&m->loc_ids, &key, (int32_t) m->nlocs);
    if (idx != (int32_t) m->nlocs) {
        return idx;
    }
    loc = CLI_PUSH(m->locs, m->nlocs, m->clocs);
    loc->address = address;
    loc->mapping = mapping;
    loc->func = func;
    if (func >= 0) {
        loc->frame = m->funcs[func].name;
        return idx;
    }
    /* No symbol: object+0xoffset, as the module's symbolizer names them. */
    if (mapping >= 0 && m->maps[mapping].file >= 0) {
        file = m->strs.strs[m->maps[mapping].file];
        base = strrchr(file, '/');
        snprintf(name, sizeof(name), "%s+0x%llx", base ? base + 1 : file,
                 (unsigned long long) (address - m->maps[mapping].start
                                       + m->maps[mapping].offset));
    } else {
        snprintf(name, sizeof(name), "0x%llx", (unsigned long long) address);
    }
    loc->frame = intern(m, name);
    return idx;
}

static int
load_locations(load_t *l)
{
    const Perftools__Profiles__Location  *pl;
    int32_t                               mapping, func, start;
    size_t                                i, j;

    for (i = 0; i < l->pb->n_location; i++) {
        pl = l->pb->location[i];
        mapping = -1;
        if (pl->mapping_id != 0) {
            mapping = cli_keymap_get(&l->maps, &pl->mapping_id);
            if (mapping < 0) {
                return invalid(l, "location %llu refers to mapping %llu, "
                               "which does not exist",
                               (unsigned long long) pl->id,
                               (unsigned long long) pl->mapping_id);
            }
        }
        if (pl->id == 0 || cli_keymap_get(&l->locs, &pl->id) >= 0) {
            return invalid(l, "location id %llu is 0 or not unique",
                           (unsigned long long) pl->id);
        }
        start = (int32_t) l->nframes;
        cli_keymap_put(&l->locs, &pl->id, start);
        /* Inlined functions first, their caller last: leaf-first order,
         * like the sample's locations. */
        for (j = 0; j < pl->n_line; j++) {
            func = cli_keymap_get(&l->funcs, &pl->line[j]->function_id);
            if (func < 0) {
                return invalid(l, "location %llu refers to function %llu, "
                               "which does not exist",
                               (unsigned long long) pl->id,
                               (unsigned long long) pl->line[j]->function_id);
            }
            *CLI_PUSH(l->frames, l->nframes, l->cframes) =
                model_loc(l->m, pl->address, mapping, func);
        }
        if (pl->n_line == 0) {
            *CLI_PUSH(l->frames, l->nframes, l->cframes) =
                model_loc(l->m, pl->address, mapping, -1);
        }
        /* A terminator, so the frames of a location end at a -1. */
        *CLI_PUSH(l->frames, l->nframes, l->cframes) = -1;
    }
    return 0;
}

/* 1 when sample_type i is what want ("TYPE" or "TYPE/UNIT") names. */
static int
type_is(const char *want, const char *type, const char *unit)
{
    size_t  n = strlen(type);

    if (strcmp(want, type) == 0) {
        return 1;
    }
    return strncmp(want, type, n) == 0 && want[n] == '/'
           && strcmp(want + n + 1, unit) == 0;
}

/* The index of the values to load: m->want_type's, or by default
 * samples/count when there is one, else the first. */
static int
count_index(load_t *l, size_t *idx)
{
    const char  *type, *unit;
    size_t       i, n;
    int          found = 0;

    *idx = 0;
    for (i = 0; i < l->pb->n_sample_type; i++) {
        type = pb_str(l, l->pb->sample_type[i]->type);
        unit = pb_str(l, l->pb->sample_type[i]->unit);
        if (type == NULL || unit == NULL) {
            return invalid(l, "sample_type %zu has a string index out of "
                           "range", i);
        }
        if (found) {
            continue;
        }
        if (l->m->want_type != NULL ? type_is(l->m->want_type, type, unit)
            : strcmp(type, "samples") == 0 && strcmp(unit, "count") == 0)
        {
            *idx = i;
            found = 1;
        }
    }
    if (!found && l->m->want_type != NULL) {
        n = (size_t) snprintf(l->err, l->errlen, "no sample type \"%s\" "
                              "(--type); its sample types:",
                              l->m->want_type);
        for (i = 0; i < l->pb->n_sample_type && n < l->errlen; i++) {
            n += (size_t) snprintf(l->err + n, l->errlen - n, "%s %s/%s",
                                   i ? "," : "",
                                   pb_str(l, l->pb->sample_type[i]->type),
                                   pb_str(l, l->pb->sample_type[i]->unit));
        }
        if (l->pb->n_sample_type == 0 && n < l->errlen) {
            snprintf(l->err + n, l->errlen - n, " none");
        }
        return -1;
    }
    /* What the values are, from the first file loaded. */
    if (l->m->type == NULL && i > 0 && *idx < l->pb->n_sample_type) {
        l->m->type = xstrdup(pb_str(l, l->pb->sample_type[*idx]->type));
        l->m->unit = xstrdup(pb_str(l, l->pb->sample_type[*idx]->unit));
        if (l->pb->period_type != NULL
            && pb_str(l, l->pb->period_type->type) != NULL
            && pb_str(l, l->pb->period_type->unit) != NULL)
        {
            l->m->period_type = xstrdup(pb_str(l, l->pb->period_type->type));
            l->m->period_unit = xstrdup(pb_str(l, l->pb->period_type->unit));
        }
    }
    return 0;
}

static int
load_samples(load_t *l, int32_t file)
{
    const Perftools__Profiles__Sample  *ps;
    const Perftools__Profiles__Label   *lb;
    cli_model_t                        *m = l->m;
    cli_sample_t                        s;
    const char                         *key, *str;
    size_t                              i, j, vi;
    int32_t                             start, k;

    if (count_index(l, &vi) != 0) {
        return -1;
    }
    for (i = 0; i < l->pb->n_sample; i++) {
        ps = l->pb->sample[i];
        if (ps->n_value <= vi) {
            return invalid(l, "sample %zu has %zu values, fewer than its "
                           "sample types", i, ps->n_value);
        }
        if (ps->value[vi] < 0) {
            return invalid(l, "sample %zu has a negative count", i);
        }
        /* Every sum of counts (per file, trace, span, frame) is at most
         * the total, so a total that fits int64 keeps them all exact. */
        if (ps->value[vi] > INT64_MAX - l->total) {
            return invalid(l, "sample %zu's count %lld takes the total of "
                           "the samples loaded past %lld", i,
                           (long long) ps->value[vi], (long long) INT64_MAX);
        }
        l->total += ps->value[vi];
        memset(&s, 0, sizeof(s));
        s.count = ps->value[vi];
        s.trace = s.span = s.span_name = -1;
        s.file = file;
        s.stack_off = (uint32_t) m->nstacks;
        for (j = 0; j < ps->n_location_id; j++) {
            start = cli_keymap_get(&l->locs, &ps->location_id[j]);
            if (start < 0) {
                return invalid(l, "sample %zu refers to location %llu, "
                               "which does not exist", i,
                               (unsigned long long) ps->location_id[j]);
            }
            for (k = start; l->frames[k] >= 0; k++) {
                *CLI_PUSH(m->stacks, m->nstacks, m->cstacks) = l->frames[k];
            }
        }
        s.stack_len = (uint32_t) (m->nstacks - s.stack_off);
        for (j = 0; j < ps->n_label; j++) {
            lb = ps->label[j];
            key = pb_str(l, lb->key);
            str = pb_str(l, lb->str);
            if (key == NULL || str == NULL) {
                return invalid(l, "sample %zu has a label string index out "
                               "of range", i);
            }
            if (*str == '\0') {
                continue;           /* a numeric label */
            }
            if (strcmp(key, "trace_id") == 0) {
                s.trace = intern(m, str);
            } else if (strcmp(key, "span_id") == 0) {
                s.span = intern(m, str);
            } else if (strcmp(key, "span_name") == 0) {
                s.span_name = intern(m, str);
            }
        }
        if (s.count == 0) {
            m->nstacks = s.stack_off;
            continue;
        }
        m->files[file].samples += s.count;
        *CLI_PUSH(m->samples, m->nsamples, m->csamples) = s;
    }
    return 0;
}

static int
read_all(const char *path, sp_buf_t *b, char *err, size_t errlen)
{
    FILE    *f = fopen(path, "rb");
    size_t   n;

    if (f == NULL) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        if (sp_buf_reserve(b, 256 * 1024) != 0) {
            fclose(f);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        n = fread(b->data + b->len, 1, b->cap - b->len, f);
        b->len += n;
        if (n == 0) {
            break;
        }
        if (b->len > MAX_PROFILE_BYTES) {
            fclose(f);
            snprintf(err, errlen, "larger than 1 GiB");
            return -1;
        }
    }
    if (ferror(f)) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* The start of the file's interval from its name (KIND-<unix ms>-<pid>),
 * for profiles without time_nanos. */
static int64_t
name_time(const char *path)
{
    const char  *base = strrchr(path, '/');
    long long    ms;

    base = base ? base + 1 : path;
    base = strchr(base, '-') != NULL ? strchr(base, '-') + 1 : base;
    ms = strtoll(base, NULL, 10);
    /* Saturated: a name is not a trusted number. */
    if (ms > INT64_MAX / 1000000) {
        return INT64_MAX;
    }
    if (ms < INT64_MIN / 1000000) {
        return INT64_MIN;
    }
    return ms * 1000000;
}

static int
decode(cli_model_t *m, const char *path, const uint8_t *data, size_t len,
    int64_t from, int64_t to, char *err, size_t errlen)
{
    load_t        l;
    pb_profile_t *pb;
    cli_pfile_t  *pf;
    size_t        n0s = m->nsamples, n0st = m->nstacks;
    int64_t       dur;
    int           rc = -1;

    pb = perftools__profiles__profile__unpack(NULL, len, data);
    if (pb == NULL) {
        snprintf(err, errlen, "not a pprof profile (protobuf decoding "
                 "failed)");
        return -1;
    }
    memset(&l, 0, sizeof(l));
    l.m = m;
    l.pb = pb;
    l.err = err;
    l.errlen = errlen;
    l.total = m->total;
    cli_keymap_init(&l.funcs, 8);
    cli_keymap_init(&l.maps, 8);
    cli_keymap_init(&l.locs, 8);

    pf = CLI_PUSH(m->files, m->nfiles, m->cfiles);
    memset(pf, 0, sizeof(*pf));
    pf->path = xstrdup(path);
    pf->start_ns = pb->time_nanos > 0 ? pb->time_nanos : name_time(path);
    /* Saturated at the end of time: both come from the file. */
    dur = pb->duration_nanos > 0 ? pb->duration_nanos : 0;
    pf->end_ns = pf->start_ns > INT64_MAX - dur ? INT64_MAX
                                                : pf->start_ns + dur;
    pf->period = pb->period;

    /* Outside the range: known to overlap nothing, skipped whole. */
    if (!(pf->start_ns < to && (pf->end_ns > from
                                || (pf->end_ns == pf->start_ns
                                    && pf->start_ns >= from))))
    {
        free(pf->path);
        m->nfiles--;
        rc = 0;
        goto done;
    }
    if (load_mappings(&l) == 0 && load_functions(&l) == 0
        && load_locations(&l) == 0
        && load_samples(&l, (int32_t) m->nfiles - 1) == 0)
    {
        m->total = l.total;
        rc = 0;
    } else {
        /* Interned tables may keep unused entries; samples are undone. */
        m->nsamples = n0s;
        m->nstacks = n0st;
        free(pf->path);
        m->nfiles--;
    }
done:
    cli_keymap_free(&l.funcs);
    cli_keymap_free(&l.maps);
    cli_keymap_free(&l.locs);
    free(l.frames);
    perftools__profiles__profile__free_unpacked(pb, NULL);
    return rc;
}

static int
load_file_range(cli_model_t *m, const char *path, int64_t from, int64_t to,
    char *err, size_t errlen)
{
    sp_buf_t     raw, pb;
    const char  *why = NULL;
    int          rc = -1;

    sp_buf_init(&raw);
    sp_buf_init(&pb);
    if (read_all(path, &raw, err, errlen) == 0) {
        if (cli_gunzip(raw.data, raw.len, MAX_PROFILE_BYTES, &pb, &why) != 0) {
            snprintf(err, errlen, "%s", why);
        } else {
            rc = decode(m, path, pb.data, pb.len, from, to, err, errlen);
        }
    }
    sp_buf_free(&raw);
    sp_buf_free(&pb);
    return rc;
}

int
cli_profile_load_file(cli_model_t *m, const char *path, char *err,
    size_t errlen)
{
    return load_file_range(m, path, INT64_MIN, INT64_MAX, err, errlen);
}

/* The file exporter writes one file per kind and interval: cpu-, wall-
 * (wall and off_cpu), alloc- (alloc_objects, alloc_space) and inuse-
 * (inuse_objects, inuse_space). */
static const char *const  profile_kinds[] = {
    "cpu-", "wall-", "alloc-", "inuse-", NULL
};

/* The files that hold want_type (--type): cpu- by default. */
static const char *
kind_of_type(const char *want_type)
{
    if (want_type == NULL) {
        return "cpu-";
    }
    if (strncmp(want_type, "wall", 4) == 0
        || strncmp(want_type, "off_cpu", 7) == 0)
    {
        return "wall-";
    }
    if (strncmp(want_type, "alloc_", 6) == 0) {
        return "alloc-";
    }
    if (strncmp(want_type, "inuse_", 6) == 0) {
        return "inuse-";
    }
    return "cpu-";
}

/* A profile file of kind (NULL: of any kind). */
static int
is_profile_name(const char *name, const char *kind)
{
    size_t  n = strlen(name), i;

    if (n <= 10 || strcmp(name + n - 6, ".pb.gz") != 0) {
        return 0;
    }
    for (i = 0; profile_kinds[i] != NULL; i++) {
        if ((kind == NULL || strcmp(kind, profile_kinds[i]) == 0)
            && strncmp(name, profile_kinds[i], strlen(profile_kinds[i])) == 0)
        {
            return 1;
        }
    }
    return 0;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The sorted names of the profile files of kind in dir. */
static char **
list_profiles(const char *dir, const char *kind, size_t *n)
{
    DIR            *d = opendir(dir);
    struct dirent  *e;
    char          **names = NULL;
    size_t          cap = 0;

    *n = 0;
    if (d == NULL) {
        return NULL;
    }
    while ((e = readdir(d)) != NULL) {
        if (is_profile_name(e->d_name, kind)) {
            *CLI_PUSH(names, *n, cap) = xstrdup(e->d_name);
        }
    }
    closedir(d);
    if (*n > 0) {
        qsort(names, *n, sizeof(char *), cmp_str);
    }
    return names;
}

long
cli_profiles_count(const char *dir)
{
    DIR            *d = opendir(dir);
    struct dirent  *e;
    long            n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += is_profile_name(e->d_name, NULL);
    }
    closedir(d);
    return n;
}

void
cli_profiles_load(cli_model_t *m, const char *dir, int64_t from, int64_t to)
{
    char   **names, *path, err[512];
    size_t   n, i, len;

    names = list_profiles(dir, kind_of_type(m->want_type), &n);
    if (n == 0) {
        /* No file of that kind: cpu- files may hold any sample type (a
         * profile written by another tool under the exporter's name). */
        free(names);
        names = list_profiles(dir, "cpu-", &n);
    }
    m->files_seen = n;
    for (i = 0; i < n; i++) {
        len = strlen(dir) + strlen(names[i]) + 2;
        path = xmalloc(len);
        snprintf(path, len, "%s/%s", dir, names[i]);
        if (load_file_range(m, path, from, to, err, sizeof(err)) != 0) {
            cli_die("%s: %s", path, err);
        }
        free(path);
        free(names[i]);
    }
    free(names);
}

size_t
cli_model_select(const cli_model_t *m, int32_t trace, int32_t span,
    size_t **out)
{
    size_t  i, n = 0;

    *out = xmalloc((m->nsamples + 1) * sizeof(size_t));
    for (i = 0; i < m->nsamples; i++) {
        if ((trace < 0 || m->samples[i].trace == trace)
            && (span < 0 || m->samples[i].span == span))
        {
            (*out)[n++] = i;
        }
    }
    return n;
}

/* --- writing ------------------------------------------------------------- */

static int
hex_id(const cli_model_t *m, int32_t s, uint8_t *dst, size_t n)
{
    const char  *str;

    if (s < 0) {
        return -1;
    }
    str = m->strs.strs[s];
    return strlen(str) == 2 * n && sp_hex_decode(dst, str, n) == 0 ? 0 : -1;
}

static const char *
str_or_null(const cli_model_t *m, int32_t s)
{
    return s >= 0 ? m->strs.strs[s] : NULL;
}

/* The string table index of s in pb, appended when absent (the new table
 * is malloc'd: *strs keeps it to free). */
static int64_t
pb_intern(pb_profile_t *pb, char ***strs, const char *s)
{
    size_t  i;

    for (i = 0; i < pb->n_string_table; i++) {
        if (strcmp(pb->string_table[i], s) == 0) {
            return (int64_t) i;
        }
    }
    if (*strs == NULL) {
        *strs = xmalloc((pb->n_string_table + 8) * sizeof(char *));
        memcpy(*strs, pb->string_table, pb->n_string_table * sizeof(char *));
        pb->string_table = *strs;
    }
    (*strs)[pb->n_string_table] = (char *) s;
    return (int64_t) pb->n_string_table++;
}

/* plain (pprof.c's encoding: values [count, count * period]) rewritten
 * with one sample type, m's type/unit, valued the count (the loaded
 * type's value), and m's period type; gzip'd onto out. */
static void
retype(const cli_model_t *m, const sp_buf_t *plain, sp_buf_t *out)
{
    static const Perftools__Profiles__ValueType  vt_init =
        PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    Perftools__Profiles__ValueType  st = vt_init, pt = vt_init, *stp = &st;
    Perftools__Profiles__ValueType **sample_type, *period_type;
    pb_profile_t                   *pb;
    char                          **strs = NULL, **strtab;
    uint8_t                        *packed;
    size_t                          i, n, n_sample_type, nstr;

    pb = perftools__profiles__profile__unpack(NULL, plain->len, plain->data);
    if (pb == NULL) {
        cli_die("cannot encode the pprof profile");
    }
    /* The message's own, put back before it is freed. */
    sample_type = pb->sample_type;
    n_sample_type = pb->n_sample_type;
    period_type = pb->period_type;
    strtab = pb->string_table;
    nstr = pb->n_string_table;
    /* At most 4 strings are added: room made by pb_intern. */
    st.type = pb_intern(pb, &strs, m->type ? m->type : m->want_type);
    st.unit = pb_intern(pb, &strs, m->unit ? m->unit : "");
    pb->sample_type = &stp;
    pb->n_sample_type = 1;
    if (m->period_type != NULL) {
        pt.type = pb_intern(pb, &strs, m->period_type);
        pt.unit = pb_intern(pb, &strs, m->period_unit);
        pb->period_type = &pt;
    } else {
        pb->period_type = NULL;
        pb->period = 0;
    }
    for (i = 0; i < pb->n_sample; i++) {
        pb->sample[i]->n_value = pb->sample[i]->n_value > 0 ? 1 : 0;
    }
    n = perftools__profiles__profile__get_packed_size(pb);
    packed = xmalloc(n + 1);
    n = perftools__profiles__profile__pack(pb, packed);
    if (sp_gzip_append(packed, n, out) != 0) {
        cli_die("cannot compress the pprof profile");
    }
    free(packed);
    pb->sample_type = sample_type;
    pb->n_sample_type = n_sample_type;
    pb->period_type = period_type;
    pb->string_table = strtab;
    pb->n_string_table = nstr;
    perftools__profiles__profile__free_unpacked(pb, NULL);
    free(strs);
}

void
cli_model_write_pprof(const cli_model_t *m, const size_t *sel, size_t nsel,
    sp_buf_t *out)
{
    sp_profile_t           p;
    sp_profile_sample_t   *ps;
    sp_arena_t             arena;
    const cli_sample_t    *s;
    const cli_loc_t       *ml;
    int32_t               *loc_map, *fn_map, *mp_map, li;
    size_t                 i, j;
    int64_t                start = INT64_MAX, end = 0;

    memset(&p, 0, sizeof(p));
    loc_map = xmalloc((m->nlocs + 1) * sizeof(int32_t));
    fn_map = xmalloc((m->nfuncs + 1) * sizeof(int32_t));
    mp_map = xmalloc((m->nmaps + 1) * sizeof(int32_t));
    memset(loc_map, 0xff, (m->nlocs + 1) * sizeof(int32_t));
    memset(fn_map, 0xff, (m->nfuncs + 1) * sizeof(int32_t));
    memset(mp_map, 0xff, (m->nmaps + 1) * sizeof(int32_t));

    p.samples = xcalloc(nsel + 1, sizeof(*p.samples));
    p.locs = xmalloc((m->nstacks + 1) * sizeof(int32_t));
    p.locations = xcalloc(m->nlocs + 1, sizeof(*p.locations));
    p.functions = xcalloc(m->nfuncs + 1, sizeof(*p.functions));
    p.mappings = xcalloc(m->nmaps + 1, sizeof(*p.mappings));

    /* Only the tables' entries that the selected samples use. */
    for (i = 0; i < nsel; i++) {
        s = &m->samples[sel[i]];
        ps = &p.samples[p.nsamples++];
        ps->stack_off = (uint32_t) p.nlocs;
        ps->stack_len = s->stack_len;
        ps->count = s->count;
        for (j = 0; j < s->stack_len; j++) {
            li = m->stacks[s->stack_off + j];
            if (loc_map[li] < 0) {
                ml = &m->locs[li];
                if (ml->func >= 0 && fn_map[ml->func] < 0) {
                    fn_map[ml->func] = (int32_t) p.nfunctions;
                    p.functions[p.nfunctions].name =
                        m->strs.strs[m->funcs[ml->func].name];
                    p.functions[p.nfunctions++].filename =
                        str_or_null(m, m->funcs[ml->func].file);
                }
                if (ml->mapping >= 0 && mp_map[ml->mapping] < 0) {
                    const cli_map_t  *mm = &m->maps[ml->mapping];

                    mp_map[ml->mapping] = (int32_t) p.nmappings;
                    p.mappings[p.nmappings].filename = str_or_null(m, mm->file);
                    p.mappings[p.nmappings].build_id =
                        str_or_null(m, mm->build_id);
                    p.mappings[p.nmappings].start = mm->start;
                    p.mappings[p.nmappings].limit = mm->limit;
                    p.mappings[p.nmappings++].offset = mm->offset;
                }
                loc_map[li] = (int32_t) p.nlocations;
                p.locations[p.nlocations].address = ml->address;
                p.locations[p.nlocations].function =
                    ml->func >= 0 ? fn_map[ml->func] : -1;
                p.locations[p.nlocations++].mapping =
                    ml->mapping >= 0 ? mp_map[ml->mapping] : -1;
            }
            p.locs[p.nlocs++] = loc_map[li];
        }
        if (hex_id(m, s->trace, ps->trace_id, SP_TRACE_ID_LEN) == 0
            && hex_id(m, s->span, ps->span_id, SP_SPAN_ID_LEN) == 0)
        {
            ps->has_span = 1;
            ps->span_name = str_or_null(m, s->span_name);
        }
        if (m->files[s->file].start_ns < start) {
            start = m->files[s->file].start_ns;
        }
        if (m->files[s->file].end_ns > end) {
            end = m->files[s->file].end_ns;
        }
        if (p.period_ns == 0 && m->files[s->file].period > 0) {
            p.period_ns = (uint64_t) m->files[s->file].period;
        }
    }
    p.start_ns = nsel > 0 ? (uint64_t) start : 0;
    p.end_ns = nsel > 0 ? (uint64_t) end : 0;

    sp_arena_init(&arena, 1024 * 1024);
    if (m->want_type == NULL) {
        if (sp_pprof_encode(&arena, &p, 1, out) != 0) {
            cli_die("cannot encode the pprof profile");
        }
    } else {
        sp_buf_t  plain;

        /* The values are the --type's: written as that one sample type. */
        sp_buf_init(&plain);
        if (sp_pprof_encode(&arena, &p, 0, &plain) != 0) {
            cli_die("cannot encode the pprof profile");
        }
        retype(m, &plain, out);
        sp_buf_free(&plain);
    }
    sp_arena_free(&arena);
    free(loc_map);
    free(fn_map);
    free(mp_map);
    free(p.samples);
    free(p.locs);
    free(p.locations);
    free(p.functions);
    free(p.mappings);
}
