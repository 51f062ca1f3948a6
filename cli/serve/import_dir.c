#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/serve/json_out.h"
#include "cli/serve/otlp_ingest.h"
#include "cli/serve/serve.h"
#include "cli/spanprof.h"

/* The service of each worker, from the resources of its spans
 * (process.pid, service.name): a pprof file has no resource, and the
 * workers page names a worker's service as OTLP profiles give it. */
typedef struct {
    int64_t   pid;
    char     *service;
} pid_service_t;

typedef struct {
    pid_service_t  *v;
    size_t          n, cap;
} pid_services_t;

static const char *
service_of(const pid_services_t *ps, int64_t pid)
{
    size_t  i;

    for (i = 0; pid != 0 && i < ps->n; i++) {
        if (ps->v[i].pid == pid) {
            return ps->v[i].service;
        }
    }
    return NULL;
}

/* An OTLP/JSON attribute's value: a string, or an int (a number or a
 * string of digits, as OTLP/JSON writes 64-bit integers). */
static json_t *
attr_value(json_t *attrs, const char *key, const char *member)
{
    size_t   i;
    json_t  *a;

    json_array_foreach(attrs, i, a) {
        const char  *k = json_string_value(json_object_get(a, "key"));

        if (k != NULL && strcmp(k, key) == 0) {
            return json_object_get(json_object_get(a, "value"), member);
        }
    }
    return NULL;
}

/* Notes the (pid, service) pairs of one traces.jsonl line's resources;
 * a line that does not have them adds nothing. */
static void
note_services(pid_services_t *ps, const char *line, size_t len)
{
    json_t  *root = json_loadb(line, len, 0, NULL), *rs, *attrs, *pv;
    size_t   i;

    json_array_foreach(json_object_get(root, "resourceSpans"), i, rs) {
        const char  *svc;
        int64_t      pid = 0;

        attrs = json_object_get(json_object_get(rs, "resource"),
                                "attributes");
        svc = json_string_value(attr_value(attrs, "service.name",
                                           "stringValue"));
        pv = attr_value(attrs, "process.pid", "intValue");
        if (json_is_integer(pv)) {
            pid = (int64_t) json_integer_value(pv);
        } else if (json_is_string(pv)) {
            pid = strtoll(json_string_value(pv), NULL, 10);
        }
        if (svc == NULL || pid <= 0 || service_of(ps, pid) != NULL) {
            continue;
        }
        if (ps->n == ps->cap) {
            ps->cap = ps->cap ? 2 * ps->cap : 8;
            ps->v = xrealloc(ps->v, ps->cap * sizeof(*ps->v));
        }
        ps->v[ps->n].pid = pid;
        ps->v[ps->n++].service = xstrdup(svc);
    }
    json_decref(root);
}

static void
pid_services_free(pid_services_t *ps)
{
    size_t  i;

    for (i = 0; i < ps->n; i++) {
        free(ps->v[i].service);
    }
    free(ps->v);
}

/* DIR/traces.jsonl: each line an OTLP/JSON ExportTraceServiceRequest. */
static int
import_traces(serve_t *sv, const char *dir, serve_import_stats_t *st,
    pid_services_t *ps, char *err, size_t errlen)
{
    char                   *path;
    FILE                   *f;
    char                   *line = NULL;
    size_t                  cap = 0;
    ssize_t                 n;
    serve_ingest_result_t   r;
    size_t                  plen = strlen(dir) + sizeof("/traces.jsonl");

    path = xmalloc(plen);
    snprintf(path, plen, "%s/traces.jsonl", dir);
    f = fopen(path, "r");
    if (f == NULL) {
        if (errno == ENOENT) {
            free(path);
            return 0;
        }
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    while ((n = getline(&line, &cap, f)) > 0) {
        if (n == 1 && line[0] == '\n') {
            continue;
        }
        st->lines++;
        if (serve_ingest_traces(sv->store, (const uint8_t *) line,
                                (size_t) n, 1, &r) != 0)
        {
            st->bad_lines++;
            cli_warn("serve: %s:%zu: %s", path, st->lines, r.error);
            continue;
        }
        st->spans += r.accepted;
        st->spans_rejected += r.rejected;
        note_services(ps, line, (size_t) n);
    }
    free(line);
    fclose(f);
    free(path);
    return 0;
}

/* What the file exporter writes per worker and interval
 * (docs/profiling.md): a file per kind, and the sample types of each that
 * serve stores, each as its own type, as OTLP brings them (otlp_ingest.c).
 * inuse_* are snapshots (store.h's gauges): each file is stored at its
 * own time, and the queries take a worker's latest one, never a sum. */
typedef struct {
    const char  *prefix;            /* "wall-": wall-<unix ms>-<pid>.pb.gz */
    const char  *types[2];          /* "TYPE/UNIT", NULL: none */
} import_kind_t;

static const import_kind_t  import_kinds[SERVE_IMPORT_KINDS] = {
    { "cpu-",   { "cpu/nanoseconds", NULL } },
    { "wall-",  { "wall/nanoseconds", "off_cpu/nanoseconds" } },
    { "alloc-", { "alloc_objects/count", "alloc_space/bytes" } },
    { "inuse-", { "inuse_objects/count", "inuse_space/bytes" } },
};

/* The kind of a profile file's name, or -1. */
static int
file_kind(const char *name)
{
    size_t  n = strlen(name);
    int     k;

    if (n < 7 || strcmp(name + n - 6, ".pb.gz") != 0) {
        return -1;
    }
    for (k = 0; k < SERVE_IMPORT_KINDS; k++) {
        size_t  pl = strlen(import_kinds[k].prefix);

        if (n > pl + 6 && strncmp(name, import_kinds[k].prefix, pl) == 0) {
            return k;
        }
    }
    return -1;
}

/* The pid of a file named <kind>-<unix ms>-<pid>.pb.gz; 0 if not so
 * named. */
static int64_t
file_pid(const char *path)
{
    const char  *b = strrchr(path, '/'), *dash;

    b = b ? b + 1 : path;
    dash = strrchr(b, '-');
    return dash != NULL ? strtoll(dash + 1, NULL, 10) : 0;
}

static int
cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The sorted names of DIR's profile files (oldest first within a kind, as
 * the exporter names them); NULL with err set when DIR cannot be read. */
static char **
list_files(const char *dir, size_t *n, char *err, size_t errlen)
{
    DIR            *d = opendir(dir);
    struct dirent  *e;
    char          **names = NULL;
    size_t          cap = 0;

    *n = 0;
    if (d == NULL) {
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return NULL;
    }
    while ((e = readdir(d)) != NULL) {
        if (file_kind(e->d_name) < 0) {
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            names = xrealloc(names, cap * sizeof(char *));
        }
        names[(*n)++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (*n > 0) {
        qsort(names, *n, sizeof(char *), cmp_name);
    } else {
        names = xrealloc(names, sizeof(char *));
    }
    return names;
}

/* s's stack, root first, frames joined by ';' (a ';' in a name becomes
 * ':'), NUL-terminated in out. */
static void
stack_text(const cli_model_t *m, const cli_sample_t *s, sp_buf_t *out)
{
    size_t  j;

    sp_buf_reset(out);
    for (j = s->stack_len; j > 0; j--) {
        const char  *name =
            m->strs.strs[m->locs[m->stacks[s->stack_off + j - 1]].frame];
        char        *p;
        size_t       at = out->len;

        if (j != s->stack_len) {
            sp_buf_append_char(out, ';');
            at++;
        }
        sp_buf_append_str(out, name);
        for (p = (char *) out->data + at;
             !sp_buf_failed(out) && p < (char *) out->data + out->len; p++)
        {
            if (*p == ';') {
                *p = ':';
            }
        }
    }
    sp_buf_append_char(out, '\0');
}

/* A loaded sample's count and value in its type's unit, as OTLP ingest
 * reads the same profile: time (ns) counts periods, rounded; an amount
 * (bytes, objects) is one sample. legacy: CPU valued samples/count (a
 * cpu- file without cpu/nanoseconds), times the period. 0, or -1 when
 * out of the bounds OTLP ingest also refuses. */
static int
sample_amounts(const cli_model_t *m, const cli_sample_t *s, int ns,
    int legacy, int64_t *count, int64_t *value)
{
    int64_t  period = m->files[s->file].period;

    if (s->count < 0 || period < 0) {
        return -1;
    }
    if (legacy) {
        *count = s->count;
        if (__builtin_mul_overflow(s->count, period, value)) {
            return -1;
        }
    } else if (ns) {
        *value = s->count;
        *count = period > 0 ? s->count / period
                              + (s->count % period
                                 >= period / 2 + period % 2)
                            : 1;
    } else {
        *value = s->count;
        *count = 1;
    }
    return *count > SERVE_SAMPLE_MAX_COUNT || *value > SERVE_SAMPLE_MAX_VALUE
           ? -1 : 0;
}

/* Stores the samples of m (one file, loaded as sample type `type`) in the
 * open batch: 0; 1 when a value is out of range (nothing of it stored, a
 * warning says which); -1 on a store failure. */
static int
store_model(serve_t *sv, const cli_model_t *m, const char *path,
    const char *type, int legacy, const char *service, sp_buf_t *stack,
    size_t *stored)
{
    serve_sample_t  sa;
    uint8_t         tid[16], sid[8];
    char            name[64];
    const char     *unit;
    size_t          i;
    int64_t         count, value;
    int             t, ns;

    unit = strchr(type, '/') + 1;
    snprintf(name, sizeof(name), "%.*s", (int) (unit - 1 - type), type);
    ns = strcmp(unit, "nanoseconds") == 0;
    for (i = 0; i < m->nsamples; i++) {
        if (sample_amounts(m, &m->samples[i], ns, legacy, &count, &value)
            != 0)
        {
            cli_warn("serve: %s: %s: sample %zu's value or the profile's "
                     "period is out of range (negative, or over 2^46 in "
                     "its unit): not imported", path, name, i);
            return 1;
        }
    }
    t = strcmp(name, "cpu") == 0 ? SERVE_TYPE_CPU
        : serve_store_type(sv->store, name, unit);
    if (t < 0) {
        return -1;
    }
    if (t == 0) {
        cli_warn("serve: %s: %s: too many sample types in the database: "
                 "not imported", path, name);
        return 1;
    }
    for (i = 0; i < m->nsamples; i++) {
        const cli_sample_t  *s = &m->samples[i];
        const cli_pfile_t   *pf = &m->files[s->file];

        stack_text(m, s, stack);
        (void) sample_amounts(m, s, ns, legacy, &count, &value);
        memset(&sa, 0, sizeof(sa));
        sa.type = t;
        sa.time_ns = pf->start_ns;
        /* From a file's own values: out of range is clamped (to 0 or
         * INT64_MAX), never overflowed. */
        if (__builtin_sub_overflow(pf->end_ns, pf->start_ns, &sa.duration_ns)
            || sa.duration_ns < 0)
        {
            sa.duration_ns = 0;
        }
        sa.pid = file_pid(pf->path);
        sa.service = service;
        if (s->trace >= 0 && s->span >= 0
            && serve_hex_parse(m->strs.strs[s->trace], tid, 16) == 0
            && serve_hex_parse(m->strs.strs[s->span], sid, 8) == 0)
        {
            sa.trace_id = tid;
            sa.span_id = sid;
        }
        sa.span_name = s->span_name >= 0 ? m->strs.strs[s->span_name] : NULL;
        sa.stack = (const char *) stack->data;
        sa.count = count;
        sa.value = value;
        if (sp_buf_failed(stack)
            || serve_store_add_sample(sv->store, &sa) != 0)
        {
            return -1;
        }
        (*stored)++;
    }
    return 0;
}

/* Loads path as sample type `type` into a fresh m; 0, or -1 with err set.
 * A cpu- file without cpu/nanoseconds (written by another tool under the
 * exporter's name) is read as the CLI reads it, by samples/count:
 * *legacy. */
static int
load_type(cli_model_t *m, const char *path, const char *type, int *legacy,
    char *err, size_t errlen)
{
    *legacy = 0;
    cli_model_init(m);
    m->want_type = type;
    if (cli_profile_load_file(m, path, err, errlen) == 0) {
        return 0;
    }
    if (strcmp(type, "cpu/nanoseconds") != 0) {
        return -1;
    }
    cli_model_free(m);
    cli_model_init(m);
    *legacy = 1;
    return cli_profile_load_file(m, path, err, errlen);
}

/* One profile file, each of its kind's types, in one batch. */
static int
import_file(serve_t *sv, const char *path, int kind, const char *service,
    sp_buf_t *stack, serve_import_stats_t *st, char *err, size_t errlen)
{
    cli_model_t  m;
    char         why[512];
    size_t       t, stored = 0;
    int          legacy, one, rc = 0;

    if (serve_store_begin(sv->store) != 0) {
        snprintf(err, errlen, "cannot store %s: %s", path,
                 serve_store_error(sv->store));
        return -1;
    }
    for (t = 0; t < 2 && import_kinds[kind].types[t] != NULL; t++) {
        if (load_type(&m, path, import_kinds[kind].types[t], &legacy, why,
                      sizeof(why)) != 0)
        {
            snprintf(err, errlen, "%s: %s", path, why);
            cli_model_free(&m);
            rc = -1;
            break;
        }
        one = store_model(sv, &m, path, import_kinds[kind].types[t], legacy,
                          service, stack, &stored);
        cli_model_free(&m);
        if (one < 0) {
            snprintf(err, errlen, "cannot store the profiles of %s: %s",
                     path, serve_store_error(sv->store));
            rc = -1;
            break;
        }
        st->profiles_rejected += (size_t) one;
    }
    if (rc == 0 && serve_store_commit(sv->store) != 0) {
        snprintf(err, errlen, "cannot store the profiles of %s: %s", path,
                 serve_store_error(sv->store));
        rc = -1;
    }
    if (rc != 0) {
        serve_store_rollback(sv->store);
        return -1;
    }
    st->samples += stored;
    st->profiles++;
    st->files[kind]++;
    return 0;
}

int
serve_import_dir(serve_t *sv, const char *dir, serve_import_stats_t *st,
    char *err, size_t errlen)
{
    char          **names, *path;
    sp_buf_t        stack;
    pid_services_t  ps = { NULL, 0, 0 };
    size_t          n, i, len;
    int             rc = 0;

    memset(st, 0, sizeof(*st));
    if (import_traces(sv, dir, st, &ps, err, errlen) != 0) {
        pid_services_free(&ps);
        return -1;
    }
    names = list_files(dir, &n, err, errlen);
    if (names == NULL) {
        pid_services_free(&ps);
        return -1;
    }
    sp_buf_init(&stack);
    for (i = 0; i < n; i++) {
        if (rc == 0) {
            len = strlen(dir) + strlen(names[i]) + 2;
            path = xmalloc(len);
            snprintf(path, len, "%s/%s", dir, names[i]);
            rc = import_file(sv, path, file_kind(names[i]),
                             service_of(&ps, file_pid(names[i])), &stack, st,
                             err, errlen);
            free(path);
        }
        free(names[i]);
    }
    free(names);
    sp_buf_free(&stack);
    pid_services_free(&ps);
    return rc;
}
