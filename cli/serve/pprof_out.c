#include <stdlib.h>
#include <string.h>

#include "pprof/profile.pb-c.h"

#include "cli/serve/pprof_out.h"
#include "cli/spanprof.h"
#include "common/export/gzip.h"

typedef struct {
    uint64_t  *locs;                /* leaf first: location ids */
    size_t     nlocs;
    int64_t    values[2];
} sample_t;

struct serve_pprof {
    cli_strpool_t   strs;           /* string table; frame names are
                                     * functions too */
    sample_t       *samples;
    size_t          n, cap;
    /* function/location id of string id s: fn_of[s] (0: not a frame) */
    uint64_t       *fn_of;
    size_t          nfn, cfn;
    int32_t        *fn_name;        /* function id - 1 -> string id */
};

serve_pprof_t *
serve_pprof_new(void)
{
    serve_pprof_t  *p = xcalloc(1, sizeof(*p));

    cli_strpool_init(&p->strs);
    cli_strpool_intern(&p->strs, "", 0);        /* string_table[0] */
    return p;
}

void
serve_pprof_free(serve_pprof_t *p)
{
    size_t  i;

    if (p == NULL) {
        return;
    }
    for (i = 0; i < p->n; i++) {
        free(p->samples[i].locs);
    }
    free(p->samples);
    free(p->fn_of);
    free(p->fn_name);
    cli_strpool_free(&p->strs);
    free(p);
}

static uint64_t
frame_id(serve_pprof_t *p, const char *name, size_t len)
{
    int32_t  s = cli_strpool_intern(&p->strs, name, len);
    size_t   old;

    if ((size_t) s >= p->cfn) {
        old = p->cfn;
        cli_grow(&p->fn_of, &p->cfn, (size_t) s + 1, sizeof(uint64_t));
        memset(p->fn_of + old, 0, (p->cfn - old) * sizeof(uint64_t));
    }
    if (p->fn_of[s] == 0) {
        size_t  cap = p->nfn;

        p->fn_name = xrealloc(p->fn_name, (p->nfn + 1) * sizeof(int32_t));
        p->fn_name[p->nfn++] = s;
        p->fn_of[s] = p->nfn;
        (void) cap;
    }
    return p->fn_of[s];
}

void
serve_pprof_add(serve_pprof_t *p, const char *stack, int64_t samples,
    int64_t cpu_ns)
{
    sample_t    *s = CLI_PUSH(p->samples, p->n, p->cap);
    const char  *a = stack, *e;
    size_t       cap = 0, i;
    uint64_t     t;

    memset(s, 0, sizeof(*s));
    s->values[0] = samples;
    s->values[1] = cpu_ns;
    while (*a != '\0') {
        e = strchr(a, ';');
        if (e == NULL) {
            e = a + strlen(a);
        }
        *CLI_PUSH(s->locs, s->nlocs, cap) = frame_id(p, a, (size_t) (e - a));
        a = *e == ';' ? e + 1 : e;
    }
    /* Stored root first; pprof wants the leaf first. */
    for (i = 0; i < s->nlocs / 2; i++) {
        t = s->locs[i];
        s->locs[i] = s->locs[s->nlocs - 1 - i];
        s->locs[s->nlocs - 1 - i] = t;
    }
}

int
serve_pprof_encode(serve_pprof_t *p, const char *type, const char *unit,
    int64_t period_ns, sp_buf_t *out)
{
    Perftools__Profiles__Profile     prof = PERFTOOLS__PROFILES__PROFILE__INIT;
    Perftools__Profiles__ValueType   vt[3], *vtp[2];
    Perftools__Profiles__Sample     *smp, **smpp;
    Perftools__Profiles__Location   *loc, **locp;
    Perftools__Profiles__Function   *fn, **fnp;
    Perftools__Profiles__Line       *line, **linep;
    int32_t                          ids[5];
    const char                      *names[5] = { "samples", "count", type,
                                                  unit, "" };
    uint8_t                         *raw;
    size_t                           len, i;
    int                              rc;

    for (i = 0; i < 4; i++) {
        ids[i] = cli_strpool_intern(&p->strs, names[i], strlen(names[i]));
    }
    for (i = 0; i < 3; i++) {
        perftools__profiles__value_type__init(&vt[i]);
    }
    vt[0].type = ids[0]; vt[0].unit = ids[1];
    vt[1].type = ids[2]; vt[1].unit = ids[3];
    vt[2].type = ids[2]; vt[2].unit = ids[3];
    vtp[0] = &vt[0];
    vtp[1] = &vt[1];
    prof.n_sample_type = 2;
    prof.sample_type = vtp;
    prof.period_type = &vt[2];
    prof.period = period_ns;

    smp = xcalloc(p->n + 1, sizeof(*smp));
    smpp = xcalloc(p->n + 1, sizeof(*smpp));
    for (i = 0; i < p->n; i++) {
        perftools__profiles__sample__init(&smp[i]);
        smp[i].n_location_id = p->samples[i].nlocs;
        smp[i].location_id = p->samples[i].locs;
        smp[i].n_value = 2;
        smp[i].value = p->samples[i].values;
        smpp[i] = &smp[i];
    }
    prof.n_sample = p->n;
    prof.sample = smpp;

    loc = xcalloc(p->nfn + 1, sizeof(*loc));
    locp = xcalloc(p->nfn + 1, sizeof(*locp));
    fn = xcalloc(p->nfn + 1, sizeof(*fn));
    fnp = xcalloc(p->nfn + 1, sizeof(*fnp));
    line = xcalloc(p->nfn + 1, sizeof(*line));
    linep = xcalloc(p->nfn + 1, sizeof(*linep));
    for (i = 0; i < p->nfn; i++) {
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = i + 1;
        fn[i].name = fn[i].system_name = p->fn_name[i];
        fnp[i] = &fn[i];
        perftools__profiles__line__init(&line[i]);
        line[i].function_id = i + 1;
        linep[i] = &line[i];
        perftools__profiles__location__init(&loc[i]);
        loc[i].id = i + 1;
        loc[i].n_line = 1;
        loc[i].line = &linep[i];
        locp[i] = &loc[i];
    }
    prof.n_location = prof.n_function = p->nfn;
    prof.location = locp;
    prof.function = fnp;
    prof.n_string_table = p->strs.n;
    prof.string_table = p->strs.strs;

    len = perftools__profiles__profile__get_packed_size(&prof);
    raw = xmalloc(len + 1);
    perftools__profiles__profile__pack(&prof, raw);
    rc = sp_gzip_append(raw, len, out);

    free(raw);
    free(smp); free(smpp); free(loc); free(locp);
    free(fn); free(fnp); free(line); free(linep);
    return rc;
}
