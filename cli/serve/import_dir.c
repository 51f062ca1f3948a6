#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve/json_out.h"
#include "cli/serve/otlp_ingest.h"
#include "cli/serve/serve.h"
#include "cli/spanprof.h"

/* DIR/traces.jsonl: each line an OTLP/JSON ExportTraceServiceRequest. */
static int
import_traces(serve_t *sv, const char *dir, serve_import_stats_t *st,
    char *err, size_t errlen)
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
    }
    free(line);
    fclose(f);
    free(path);
    return 0;
}

/* The pid of a file named cpu-<unix ms>-<pid>.pb.gz; 0 if not so named. */
static int64_t
file_pid(const char *path)
{
    const char  *b = strrchr(path, '/'), *dash;

    b = b ? b + 1 : path;
    dash = strrchr(b, '-');
    return dash != NULL ? strtoll(dash + 1, NULL, 10) : 0;
}

int
serve_import_dir(serve_t *sv, const char *dir, serve_import_stats_t *st,
    char *err, size_t errlen)
{
    cli_model_t      m;
    serve_sample_t   sa;
    sp_buf_t         stack;
    uint8_t          tid[16], sid[8];
    size_t           i, j;
    int              rc = 0;

    memset(st, 0, sizeof(*st));
    if (import_traces(sv, dir, st, err, errlen) != 0) {
        return -1;
    }
    if (cli_profiles_count(dir) <= 0) {
        return 0;
    }
    /* Dies on an undecodable file, as the other commands do. */
    cli_model_init(&m);
    cli_profiles_load(&m, dir, INT64_MIN, INT64_MAX);
    sp_buf_init(&stack);
    if (serve_store_begin(sv->store) != 0) {
        rc = -1;
    }
    for (i = 0; rc == 0 && i < m.nsamples; i++) {
        const cli_sample_t  *s = &m.samples[i];
        const cli_pfile_t   *pf = &m.files[s->file];

        sp_buf_reset(&stack);
        for (j = s->stack_len; j > 0; j--) {
            const char  *name =
                m.strs.strs[m.locs[m.stacks[s->stack_off + j - 1]].frame];
            char        *p;
            size_t       at = stack.len;

            if (j != s->stack_len) {
                sp_buf_append_char(&stack, ';');
                at++;
            }
            sp_buf_append_str(&stack, name);
            for (p = (char *) stack.data + at;
                 !sp_buf_failed(&stack) && p < (char *) stack.data + stack.len;
                 p++)
            {
                if (*p == ';') {
                    *p = ':';
                }
            }
        }
        sp_buf_append_char(&stack, '\0');
        memset(&sa, 0, sizeof(sa));
        sa.time_ns = pf->start_ns;
        /* From a file's own values: out of range is clamped (to 0 or
         * INT64_MAX), never overflowed. */
        if (__builtin_sub_overflow(pf->end_ns, pf->start_ns, &sa.duration_ns)
            || sa.duration_ns < 0)
        {
            sa.duration_ns = 0;
        }
        sa.pid = file_pid(pf->path);
        if (s->trace >= 0 && s->span >= 0
            && serve_hex_parse(m.strs.strs[s->trace], tid, 16) == 0
            && serve_hex_parse(m.strs.strs[s->span], sid, 8) == 0)
        {
            sa.trace_id = tid;
            sa.span_id = sid;
        }
        sa.span_name = s->span_name >= 0 ? m.strs.strs[s->span_name] : NULL;
        sa.stack = (const char *) stack.data;
        sa.count = s->count > 0 ? s->count : 0;
        if (pf->period < 0
            || __builtin_mul_overflow(sa.count, pf->period, &sa.value))
        {
            sa.value = pf->period < 0 ? 0 : INT64_MAX;
        }
        if (sp_buf_failed(&stack)
            || serve_store_add_sample(sv->store, &sa) != 0)
        {
            rc = -1;
            break;
        }
        st->samples++;
    }
    if (rc == 0 && serve_store_commit(sv->store) != 0) {
        rc = -1;
    }
    if (rc != 0) {
        serve_store_rollback(sv->store);
        snprintf(err, errlen, "cannot store the profiles of %s: %s", dir,
                 serve_store_error(sv->store));
    }
    st->profiles = m.nfiles;
    sp_buf_free(&stack);
    cli_model_free(&m);
    return rc;
}
