/* spanprof: traces, flame graphs, folded stacks and filtered pprof files
 * from a directory written by the file exporter. */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/version.h"
#include "cli/serve/serve.h"
#include "cli/spanprof.h"

/* --- help ---------------------------------------------------------------- */

static const char  help_intro[] =
"Usage: spanprof COMMAND DIR [OPTIONS]\n"
"\n"
"Reads DIR, a directory written by spanprof's file exporter (nginx or\n"
"Apache: otel_exporter { endpoint file:///DIR; } with profiling on):\n"
"DIR/traces.jsonl (OTLP/JSON spans, one export per line) and\n"
"DIR/cpu-<unix ms>-<pid>.pb.gz (gzip'd pprof CPU profiles, one per worker\n"
"and interval, samples labelled trace_id, span_id and span_name).\n"
"\n"
"Commands:\n"
"  traces      the slowest traces, their spans and CPU samples per span\n"
"  flamegraph  an interactive SVG flame graph of a trace, a span or all\n"
"  diff        a differential flame graph of two time ranges\n"
"  folded      folded stacks (\"a;b;c 42\") for flamegraph.pl, speedscope...\n"
"  pprof       a filtered, merged pprof file (go tool pprof, Pyroscope)\n"
"  serve       receive OTLP (HTTP, gRPC), show traces and flame graphs\n"
"  help        this text; \"spanprof help COMMAND\" for one command\n"
"\n"
"Options may come before or after DIR; \"--opt value\" and \"--opt=value\"\n"
"are the same. -h/--help after a command shows that command's help;\n"
"--version prints the version.\n";

static const char  help_traces[] =
"spanprof traces DIR [--slowest N] [--service S] [--since T] [--until T]\n"
"                    [--ids]\n"
"  A table of the N slowest traces (by wall time from the first span's\n"
"  start to the last span's end), each with its spans as a tree: span id,\n"
"  kind, start offset in the trace, duration, status (HTTP status code;\n"
"  ERROR when the span's status is error), CPU samples (the samples\n"
"  labelled with the span's id; one sample is one otel_profiling_rate\n"
"  period of CPU time), name (indented under its parent), route\n"
"  (http.route) and target (url.path, or the peer of a CLIENT span).\n"
"    --slowest N    how many traces (default 10)\n"
"    --service S    only traces with a span of service.name S\n"
"    --since T      only traces that start at or after T\n"
"    --until T      only traces that start before T\n"
"    --ids          print only the trace ids, slowest first, one a line\n";

static const char  help_flamegraph[] =
"spanprof flamegraph DIR [--trace ID] [--span ID] [--range A..B]\n"
"                        [--type NAME] [-o FILE] [--width PX] [--title TEXT]\n"
"  A self-contained SVG flame graph (no external scripts, fonts or\n"
"  links): one box per function and call path, as wide as its samples,\n"
"  callers below callees, colours by a hash of the name. Hover shows the\n"
"  function, its samples and its share; click zooms into a frame; click\n"
"  the bottom frame (or \"Reset zoom\") to reset.\n"
"    --trace ID     only the samples labelled with this trace id (a unique\n"
"                   prefix is enough); the title names the trace, its root\n"
"                   span, route and duration\n"
"    --span ID      only the samples labelled with this span id (the trace\n"
"                   is then optional)\n"
"    --range A..B   only profiles whose interval overlaps A..B\n"
"    --type NAME    the sample type whose values to draw, by its type\n"
"                   (\"cpu\", \"alloc_space\") or type/unit\n"
"                   (\"cpu/nanoseconds\"); default samples/count, or the\n"
"                   first type of a profile without it. A profile without\n"
"                   NAME is an error that lists the types it has\n"
"    -o, --output FILE\n"
"                   where to write the SVG (default: standard output,\n"
"                   refused when it is a terminal)\n"
"    --width PX     image width (default 1200)\n"
"    --title TEXT   replaces the first title line\n"
"  Without --trace and --span: every sample of every profile, the whole\n"
"  CPU profile of the workers, inside requests or not (event loop,\n"
"  accepts, timers).\n";

static const char  help_diff[] =
"spanprof diff DIR --base A..B --compare C..D [--type NAME] [-o FILE]\n"
"                  [--width PX] [--title TEXT]\n"
"  A differential flame graph: frames as wide as their samples in the\n"
"  compared range, red where the compared range spends a larger share of\n"
"  its CPU in a frame (with its callees) than the base range does, blue\n"
"  where a smaller one, grey where the same; deeper colour, larger\n"
"  change. Shares are percentages of each range's own total, so ranges\n"
"  of different lengths compare. Hover shows both ranges' samples and\n"
"  shares and the change in percentage points.\n"
"    --base A..B    the reference range\n"
"    --compare C..D the range to compare with it\n"
"    --type, -o, --width, --title as for flamegraph\n"
"  pprof has no per-sample times: a range selects the whole profile files\n"
"  whose interval (time_nanos .. time_nanos + duration_nanos, that is\n"
"  otel_profiling_interval) overlaps it.\n";

static const char  help_folded[] =
"spanprof folded DIR [--trace ID] [--span ID] [--range A..B] [--type NAME]\n"
"                    [-o FILE]\n"
"  Folded stacks, one line per distinct call path, root first, with its\n"
"  sample count: \"main;ngx_worker_process_cycle;...;f 42\", sorted. ';' in\n"
"  a function name is written as ':'. Input for flamegraph.pl,\n"
"  speedscope, inferno and other tools; the counts are the values of\n"
"  --type when given. --trace, --span, --range, --type and -o as for\n"
"  flamegraph (default output: standard output).\n";

static const char  help_pprof[] =
"spanprof pprof DIR [--trace ID] [--span ID] [--range A..B] [--type NAME]\n"
"                   -o FILE\n"
"  The selected samples of all profiles merged into one gzip'd pprof file\n"
"  (sample types samples/count and cpu/nanoseconds, labels trace_id,\n"
"  span_id and span_name), for go tool pprof, Pyroscope and the like.\n"
"  With --type NAME: one sample type, NAME's, with the values read, and\n"
"  the profiles' period type.\n"
"  --trace, --span, --range and --type as for flamegraph; -o FILE is required\n"
"  (\"-o -\" writes to standard output when it is not a terminal).\n";

static const char  help_times[] =
"Times (T, A, B...): unix seconds (1795318800 or 1795318800.25), RFC 3339\n"
"(2026-11-22T03:00:00Z, 2026-11-22T04:00:00.5+01:00), \"now\", or relative\n"
"to now (-5m, -90s, -1h30m, -2d, -500ms). A range A..B may leave B out\n"
"(until now).\n"
"\n"
"Exit status: 0 on success, 1 on an error (unreadable, truncated or\n"
"undecodable file, unknown trace or span id, empty directory, nothing\n"
"selected), 2 on a usage error. Malformed lines of traces.jsonl are\n"
"skipped with a warning naming the file and line.\n";

static void
print_help(FILE *f, const char *cmd)
{
    if (cmd == NULL) {
        fprintf(f, "%s\n%s\n%s\n%s\n%s\n%s\n%s", help_intro, help_traces,
                help_flamegraph, help_diff, help_folded, help_pprof,
                help_times);
    } else if (strcmp(cmd, "traces") == 0) {
        fprintf(f, "%s\n%s", help_traces, help_times);
    } else if (strcmp(cmd, "flamegraph") == 0) {
        fprintf(f, "%s\n%s", help_flamegraph, help_times);
    } else if (strcmp(cmd, "diff") == 0) {
        fprintf(f, "%s\n%s", help_diff, help_times);
    } else if (strcmp(cmd, "folded") == 0) {
        fprintf(f, "%s\n%s", help_folded, help_times);
    } else if (strcmp(cmd, "pprof") == 0) {
        fprintf(f, "%s\n%s", help_pprof, help_times);
    }
}

/* --- options ------------------------------------------------------------- */

enum {
    O_SLOWEST = 1 << 0, O_SERVICE = 1 << 1, O_SINCE = 1 << 2,
    O_UNTIL = 1 << 3, O_IDS = 1 << 4, O_TRACE = 1 << 5, O_SPAN = 1 << 6,
    O_RANGE = 1 << 7, O_OUT = 1 << 8, O_WIDTH = 1 << 9, O_TITLE = 1 << 10,
    O_BASE = 1 << 11, O_COMPARE = 1 << 12, O_TYPE = 1 << 13
};

static const struct {
    const char  *name;
    int          bit;
    int          arg;
} options[] = {
    { "--slowest", O_SLOWEST, 1 }, { "--service", O_SERVICE, 1 },
    { "--since", O_SINCE, 1 }, { "--until", O_UNTIL, 1 },
    { "--ids", O_IDS, 0 }, { "--trace", O_TRACE, 1 },
    { "--span", O_SPAN, 1 }, { "--range", O_RANGE, 1 },
    { "-o", O_OUT, 1 }, { "--output", O_OUT, 1 },
    { "--width", O_WIDTH, 1 }, { "--title", O_TITLE, 1 },
    { "--base", O_BASE, 1 }, { "--compare", O_COMPARE, 1 },
    { "--type", O_TYPE, 1 },
};

#define NOPTS  (sizeof(options) / sizeof(options[0]))

typedef struct {
    const char  *cmd;
    const char  *dir;
    int          set;
    const char  *val[NOPTS];
    int64_t      now;
} args_t;

static const char *
opt(const args_t *a, int bit)
{
    size_t  i;

    for (i = 0; i < NOPTS; i++) {
        if (options[i].bit == bit && a->val[i] != NULL) {
            return a->val[i];
        }
    }
    return NULL;
}

static void
parse_args(args_t *a, int argc, char **argv, int allowed)
{
    const char  *arg, *eq, *val;
    size_t       i, len;
    int          k;

    for (k = 2; k < argc; k++) {
        arg = argv[k];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            print_help(stdout, a->cmd);
            exit(0);
        }
        if (arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (a->dir != NULL) {
                cli_usage_die("%s: unexpected argument \"%s\" (one DIR "
                              "only; see spanprof %s --help)", a->cmd, arg,
                              a->cmd);
            }
            a->dir = arg;
            continue;
        }
        eq = strchr(arg, '=');
        len = eq && strncmp(arg, "--", 2) == 0 ? (size_t) (eq - arg)
                                                : strlen(arg);
        for (i = 0; i < NOPTS; i++) {
            if (strlen(options[i].name) == len
                && strncmp(options[i].name, arg, len) == 0)
            {
                break;
            }
        }
        if (i == NOPTS && strncmp(arg, "-o", 2) == 0 && arg[2] != '\0') {
            /* -oFILE */
            for (i = 0; strcmp(options[i].name, "-o") != 0; i++) { }
            a->val[i] = arg + 2;
            a->set |= O_OUT;
            continue;
        }
        if (i == NOPTS || !(options[i].bit & allowed)) {
            cli_usage_die("%s: unknown option \"%.*s\" (see spanprof %s "
                          "--help)", a->cmd, (int) len, arg, a->cmd);
        }
        if (!options[i].arg) {
            if (eq && len < strlen(arg)) {
                cli_usage_die("%s: %s takes no value", a->cmd,
                              options[i].name);
            }
            val = "1";
        } else if (eq && len < strlen(arg)) {
            val = eq + 1;
        } else if (k + 1 < argc) {
            val = argv[++k];
        } else {
            cli_usage_die("%s: %s needs a value (see spanprof %s --help)",
                          a->cmd, options[i].name, a->cmd);
        }
        a->val[i] = val;
        a->set |= options[i].bit;
    }
    if (a->dir == NULL) {
        cli_usage_die("%s: which directory? (spanprof %s DIR ...; see "
                      "spanprof %s --help)", a->cmd, a->cmd, a->cmd);
    }
}

static long
opt_long(const args_t *a, int bit, const char *name, long def, long min,
    long max)
{
    const char  *s = opt(a, bit);
    char        *end;
    long         v;

    if (s == NULL) {
        return def;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < min || v > max) {
        cli_usage_die("%s: %s takes a number from %ld to %ld, not \"%s\"",
                      a->cmd, name, min, max, s);
    }
    return v;
}

static int64_t
opt_time(const args_t *a, int bit, const char *name, int64_t def)
{
    const char  *s = opt(a, bit), *err;
    int64_t      t;

    if (s == NULL) {
        return def;
    }
    if (cli_parse_time(s, a->now, &t, &err) != 0) {
        cli_usage_die("%s: %s \"%s\": %s", a->cmd, name, s, err);
    }
    return t;
}

static int
opt_range(const args_t *a, int bit, const char *name, int64_t *from,
    int64_t *to)
{
    const char  *s = opt(a, bit), *err;

    *from = INT64_MIN;
    *to = INT64_MAX;
    if (s == NULL) {
        return 0;
    }
    if (cli_parse_range(s, a->now, from, to, &err) != 0) {
        cli_usage_die("%s: %s \"%s\": %s (A..B, see spanprof %s --help)",
                      a->cmd, name, s, err, a->cmd);
    }
    return 1;
}

/* --- data ---------------------------------------------------------------- */

typedef struct {
    const char    *dir;
    cli_spans_t    spans;
    cli_model_t    model;
    char          *unit;        /* type_label's */
} data_t;

/* Spans: LOAD_NO_SPANS only checks that traces.jsonl exists (for the
 * "empty directory" error), LOAD_SPANS reads it when it exists,
 * LOAD_NEED_SPANS fails without it. */
enum { LOAD_NO_SPANS, LOAD_SPANS, LOAD_NEED_SPANS };

static void
load(data_t *d, const args_t *a, int spans)
{
    const char  *dir = a->dir;
    struct stat  st;
    long         nprof;
    char        *path;
    size_t       len;

    memset(d, 0, sizeof(*d));
    d->dir = dir;
    if (stat(dir, &st) != 0) {
        cli_die("%s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        cli_die("%s: not a directory", dir);
    }
    nprof = cli_profiles_count(dir);
    if (nprof < 0) {
        cli_die("%s: %s", dir, strerror(errno));
    }
    if (spans != LOAD_NO_SPANS) {
        cli_spans_load(&d->spans, dir);
    } else {
        len = strlen(dir) + sizeof("/traces.jsonl");
        path = xmalloc(len);
        snprintf(path, len, "%s/traces.jsonl", dir);
        d->spans.found = access(path, F_OK) == 0;
        d->spans.path = path;
    }
    if (!d->spans.found && nprof == 0) {
        cli_die("%s: no traces.jsonl and no cpu-*.pb.gz files (not a "
                "directory written by the file exporter?)", dir);
    }
    if (spans == LOAD_NEED_SPANS && !d->spans.found) {
        cli_die("%s: not found (no spans were exported to %s)",
                d->spans.path, dir);
    }
    cli_model_init(&d->model);
    d->model.want_type = opt(a, O_TYPE);
    cli_profiles_load(&d->model, dir, INT64_MIN, INT64_MAX);
}

static void
unload(data_t *d)
{
    cli_spans_free(&d->spans);
    cli_model_free(&d->model);
    free(d->unit);
}

/* With --type: "TYPE/UNIT", what the loaded values count (for titles and
 * hover texts); NULL without. */
static const char *
type_label(data_t *d)
{
    size_t  n;

    if (d->model.want_type == NULL) {
        return NULL;
    }
    if (d->unit == NULL) {
        n = strlen(d->model.type ? d->model.type : d->model.want_type)
            + strlen(d->model.unit ? d->model.unit : "") + 2;
        d->unit = xmalloc(n);
        snprintf(d->unit, n, "%s/%s",
                 d->model.type ? d->model.type : d->model.want_type,
                 d->model.unit ? d->model.unit : "");
    }
    return d->unit;
}

/* The distinct full ids starting with prefix: trace ids (span == 0) or the
 * span ids of trace (NULL: of any trace). */
static size_t
matching_ids(const data_t *d, const char *prefix, int span,
    const char *trace, cli_strpool_t *out)
{
    const cli_model_t  *m = &d->model;
    const char         *id, *tr;
    size_t              i, plen = strlen(prefix);

    for (i = 0; i < d->spans.n; i++) {
        id = span ? d->spans.spans[i].span_id : d->spans.spans[i].trace_id;
        if (span && trace && strcmp(d->spans.spans[i].trace_id, trace) != 0) {
            continue;
        }
        if (strncmp(id, prefix, plen) == 0) {
            cli_strpool_intern(out, id, strlen(id));
        }
    }
    for (i = 0; i < m->nsamples; i++) {
        int32_t  s = span ? m->samples[i].span : m->samples[i].trace;

        if (s < 0) {
            continue;
        }
        if (span && trace) {
            tr = m->samples[i].trace >= 0
                 ? m->strs.strs[m->samples[i].trace] : "";
            if (strcmp(tr, trace) != 0) {
                continue;
            }
        }
        id = m->strs.strs[s];
        if (strncmp(id, prefix, plen) == 0) {
            cli_strpool_intern(out, id, strlen(id));
        }
    }
    return out->n;
}

/* The full id that the --trace or --span argument names. */
static char *
resolve_id(const args_t *a, const data_t *d, const char *arg, int span,
    const char *trace)
{
    cli_strpool_t  ids;
    size_t         n;
    char          *prefix, *res;
    const char    *what = span ? "span" : "trace";

    prefix = xstrdup(arg);
    cli_lowercase(prefix);
    cli_strpool_init(&ids);
    n = matching_ids(d, prefix, span, trace, &ids);
    if (n == 0) {
        if (span && trace) {
            cli_die("span %s not found in trace %s in %s (no such span in "
                    "traces.jsonl and no CPU sample labelled with it)",
                    prefix, trace, d->dir);
        }
        cli_die("%s %s not found in %s (no span in traces.jsonl and no CPU "
                "sample labelled with it)", what, prefix, d->dir);
    }
    if (n > 1) {
        cli_die("%s id prefix %s is ambiguous in %s: %s, %s%s", what, prefix,
                d->dir, ids.strs[0], ids.strs[1], n > 2 ? ", ..." : "");
    }
    res = xstrdup(ids.strs[0]);
    cli_strpool_free(&ids);
    free(prefix);
    return res;
}

static const cli_span_t *
find_span(const data_t *d, const char *trace, const char *span)
{
    size_t  i;

    for (i = 0; i < d->spans.n; i++) {
        if ((trace == NULL || strcmp(d->spans.spans[i].trace_id, trace) == 0)
            && strcmp(d->spans.spans[i].span_id, span) == 0)
        {
            return &d->spans.spans[i];
        }
    }
    return NULL;
}

/* The trace's root span (no parent among its spans; the earliest such),
 * and the trace's start and end. NULL when none of its spans is known.
 * Two passes over the spans, the trace's span ids in a hash table: a
 * trace may have any number of spans. */
static const cli_span_t *
trace_root(const data_t *d, const char *trace, int64_t *start, int64_t *end)
{
    const cli_span_t  *s, *root = NULL;
    cli_keymap_t       ids;
    size_t             i;

    *start = INT64_MAX;
    *end = INT64_MIN;
    cli_keymap_init(&ids, 16);
    for (i = 0; i < d->spans.n; i++) {
        s = &d->spans.spans[i];
        if (strcmp(s->trace_id, trace) == 0) {
            cli_keymap_put(&ids, s->span_id, 0);
        }
    }
    for (i = 0; i < d->spans.n; i++) {
        s = &d->spans.spans[i];
        if (strcmp(s->trace_id, trace) != 0) {
            continue;
        }
        if (s->start_ns < *start) {
            *start = s->start_ns;
        }
        if (s->end_ns > *end) {
            *end = s->end_ns;
        }
        if ((s->parent_id[0] == '\0' || cli_keymap_get(&ids, s->parent_id) < 0)
            && (root == NULL || s->start_ns < root->start_ns))
        {
            root = s;
        }
    }
    cli_keymap_free(&ids);
    return root;
}

/* Indices of the samples with the trace/span labels (NULL: any), in
 * profiles that overlap [from, to). */
static size_t
select_samples(const data_t *d, const char *trace, const char *span,
    int64_t from, int64_t to, size_t **out)
{
    const cli_model_t  *m = &d->model;
    const cli_pfile_t  *f;
    int32_t             t = -1, s = -1;
    size_t              n, i, k = 0;

    if (trace != NULL && (t = cli_strpool_find(&m->strs, trace)) < 0) {
        *out = xmalloc(sizeof(size_t));
        return 0;
    }
    if (span != NULL && (s = cli_strpool_find(&m->strs, span)) < 0) {
        *out = xmalloc(sizeof(size_t));
        return 0;
    }
    n = cli_model_select(m, t, s, out);
    for (i = 0; i < n; i++) {
        f = &m->files[m->samples[(*out)[i]].file];
        if (f->start_ns < to
            && (f->end_ns > from
                || (f->end_ns == f->start_ns && f->start_ns >= from)))
        {
            (*out)[k++] = (*out)[i];
        }
    }
    return k;
}

static int64_t
sum_samples(const data_t *d, const size_t *sel, size_t n, size_t *nfiles)
{
    int64_t   sum = 0;
    char     *seen = xcalloc(d->model.nfiles + 1, 1);
    size_t    i;

    *nfiles = 0;
    for (i = 0; i < n; i++) {
        sum += d->model.samples[sel[i]].count;
        if (!seen[d->model.samples[sel[i]].file]) {
            seen[d->model.samples[sel[i]].file] = 1;
            (*nfiles)++;
        }
    }
    free(seen);
    return sum;
}

static void
status_text(const cli_span_t *s, char *buf, size_t len)
{
    if (s->http_status > 0) {
        snprintf(buf, len, "%d%s", s->http_status, s->error ? " ERROR" : "");
    } else {
        snprintf(buf, len, "%s", s->error ? "ERROR" : "-");
    }
}

/* --- traces -------------------------------------------------------------- */

typedef struct {
    size_t       first, n;          /* into the sorted span order */
    int64_t      start, end;
    int64_t      samples;
} trace_t;

static const cli_span_t  *sort_spans;

static int
cmp_span_order(const void *a, const void *b)
{
    const cli_span_t  *x = &sort_spans[*(const size_t *) a],
                      *y = &sort_spans[*(const size_t *) b];
    int                c = strcmp(x->trace_id, y->trace_id);

    if (c != 0) {
        return c;
    }
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int
cmp_trace_slowest(const void *a, const void *b)
{
    const trace_t  *x = a, *y = b;
    int64_t         dx = x->end - x->start, dy = y->end - y->start;

    if (dx != dy) {
        return dx > dy ? -1 : 1;
    }
    return x->start < y->start ? -1 : x->start > y->start;
}

typedef struct {
    const data_t   *d;
    const size_t   *order;
    const trace_t  *tr;
    cli_keymap_t   *span_samples;   /* (trace, span) string ids -> count */
    int64_t        *counts;
    size_t         *rows;           /* spans in tree order */
    int            *depth;
    size_t          nrows;
} tree_ctx_t;

static int64_t
span_samples(const tree_ctx_t *c, const cli_span_t *s)
{
    int32_t  key[2], idx;

    key[0] = cli_strpool_find(&c->d->model.strs, s->trace_id);
    key[1] = cli_strpool_find(&c->d->model.strs, s->span_id);
    if (key[0] < 0 || key[1] < 0) {
        return 0;
    }
    idx = cli_keymap_get(c->span_samples, key);
    return idx >= 0 ? c->counts[idx] : 0;
}

/* The trace's spans as a tree, indexed by span id (a trace may have any
 * number of spans, and be as deep): children lists in start order, and a
 * walk with an explicit stack. */
typedef struct {
    cli_keymap_t   ids;             /* span id -> k (its first span) */
    cli_keymap_t   kids;            /* parent id -> list */
    int32_t       *head, *tail;     /* per list: first and last k */
    int32_t       *next;            /* per k: next sibling in its list */
    int32_t       *stack;           /* per level: its next child, or -1 */
    char          *done;
} span_tree_t;

static const cli_span_t *
tree_span(const tree_ctx_t *c, size_t k)
{
    return &c->d->spans.spans[c->order[c->tr->first + k]];
}

static int32_t
first_child(const span_tree_t *st, const cli_span_t *s)
{
    int32_t  l = cli_keymap_get(&st->kids, s->span_id);

    return l >= 0 ? st->head[l] : -1;
}

static void
add_row(tree_ctx_t *c, span_tree_t *st, size_t k, int depth)
{
    st->done[k] = 1;
    c->rows[c->nrows] = c->order[c->tr->first + k];
    c->depth[c->nrows++] = depth;
}

/* Appends span k (an index into the trace's slice of order[]) and its
 * descendants, depth first, children by start time; a span already listed
 * (a cycle, a repeated span id) is not listed again. */
static void
add_rows(tree_ctx_t *c, span_tree_t *st, size_t k)
{
    size_t   sp = 0;
    int32_t  ch;

    if (st->done[k]) {
        return;
    }
    add_row(c, st, k, 0);
    st->stack[sp++] = first_child(st, tree_span(c, k));
    while (sp > 0) {
        ch = st->stack[sp - 1];
        while (ch >= 0 && st->done[ch]) {
            ch = st->next[ch];
        }
        if (ch < 0) {
            sp--;
            continue;
        }
        st->stack[sp - 1] = st->next[ch];
        add_row(c, st, (size_t) ch, (int) sp);
        st->stack[sp++] = first_child(st, tree_span(c, (size_t) ch));
    }
}

static void
print_trace(tree_ctx_t *c)
{
    const data_t      *d = c->d;
    const trace_t     *tr = c->tr;
    const cli_span_t  *s, *first = &d->spans.spans[c->order[tr->first]];
    char               when[40], dur[40], st[40], name[600];
    size_t             j, k, nlists = 0;
    int                wname = 4, wroute = 5, wst = 6, indent;
    int64_t            listed = 0, n;
    const char        *service = NULL;
    span_tree_t        t;
    int32_t            l;

    memset(&t, 0, sizeof(t));
    cli_keymap_init(&t.ids, 16);
    cli_keymap_init(&t.kids, 16);
    t.head = xmalloc((tr->n + 1) * sizeof(int32_t));
    t.tail = xmalloc((tr->n + 1) * sizeof(int32_t));
    t.next = xmalloc((tr->n + 1) * sizeof(int32_t));
    t.stack = xmalloc((tr->n + 1) * sizeof(int32_t));
    t.done = xcalloc(tr->n + 1, 1);
    for (j = 0; j < tr->n; j++) {
        s = tree_span(c, j);
        cli_keymap_put(&t.ids, s->span_id, (int32_t) j);
        t.next[j] = -1;
        if (s->parent_id[0] == '\0') {
            continue;
        }
        l = cli_keymap_put(&t.kids, s->parent_id, (int32_t) nlists);
        if (l == (int32_t) nlists) {
            t.head[nlists++] = (int32_t) j;
        } else {
            t.next[t.tail[l]] = (int32_t) j;
        }
        t.tail[l] = (int32_t) j;
    }

    c->nrows = 0;
    /* Roots first (no parent in the trace), then whatever a cycle left. */
    for (j = 0; j < tr->n; j++) {
        s = tree_span(c, j);
        if (service == NULL && s->service != NULL) {
            service = s->service;
        }
        if (s->parent_id[0] == '\0' || cli_keymap_get(&t.ids, s->parent_id) < 0) {
            add_rows(c, &t, j);
        }
    }
    for (j = 0; j < tr->n; j++) {
        add_rows(c, &t, j);
    }
    cli_keymap_free(&t.ids);
    cli_keymap_free(&t.kids);
    free(t.head);
    free(t.tail);
    free(t.next);
    free(t.stack);
    free(t.done);

    for (j = 0; j < c->nrows; j++) {
        s = &d->spans.spans[c->rows[j]];
        k = (size_t) (2 * c->depth[j]) + strlen(s->name);
        wname = k > (size_t) wname ? (int) k : wname;
        k = s->route ? strlen(s->route) : 1;
        wroute = k > (size_t) wroute ? (int) k : wroute;
        status_text(s, st, sizeof(st));
        wst = strlen(st) > (size_t) wst ? (int) strlen(st) : wst;
    }
    if (wname > 60) {
        wname = 60;
    }
    if (wroute > 40) {
        wroute = 40;
    }

    cli_format_time(tr->start, when, sizeof(when));
    cli_format_ms(tr->end - tr->start, dur, sizeof(dur));
    printf("\nTRACE %s  %s  %s  %zu span%s  %lld CPU sample%s",
           first->trace_id, dur, when, tr->n, tr->n == 1 ? "" : "s",
           (long long) tr->samples, tr->samples == 1 ? "" : "s");
    if (service != NULL) {
        printf("  service %s", service);
    }
    printf("\n  %-16s  %-6s  %10s  %10s  %-*s  %7s  %-*s  %-*s  %s\n",
           "SPAN", "KIND", "START", "DURATION", wst, "STATUS", "SAMPLES",
           wname, "NAME", wroute, "ROUTE", "TARGET");
    for (j = 0; j < c->nrows; j++) {
        s = &d->spans.spans[c->rows[j]];
        n = span_samples(c, s);
        listed += n;
        snprintf(when, sizeof(when), "+%.2f ms",
                 (double) (s->start_ns - tr->start) / 1e6);
        cli_format_ms(s->end_ns - s->start_ns, dur, sizeof(dur));
        status_text(s, st, sizeof(st));
        /* The name is cut to the buffer anyway: no wider indent. */
        indent = c->depth[j] < (int) sizeof(name) / 2
                 ? 2 * c->depth[j] : (int) sizeof(name) - 1;
        snprintf(name, sizeof(name), "%*s%s", indent, "", s->name);
        printf("  %-16s  %-6s  %10s  %10s  %-*s  %7lld  %-*s  %-*s  %s\n",
               s->span_id, cli_span_kind_name(s->kind), when, dur, wst, st,
               (long long) n, wname, name, wroute, s->route ? s->route : "-",
               s->kind == 3 ? (s->peer ? s->peer : "-")
                            : (s->path ? s->path : "-"));
    }
    if (tr->samples > listed) {
        printf("  %-16s  %-6s  %10s  %10s  %-*s  %7lld  %s\n", "(other)", "",
               "", "", wst, "", (long long) (tr->samples - listed),
               "samples of spans not in traces.jsonl");
    }
}

static int
cmd_traces(args_t *a)
{
    data_t         d;
    size_t        *order, i, j, ntr = 0, ctr = 0, shown, nfiles;
    trace_t       *trs = NULL, *tr;
    cli_keymap_t   span_idx;
    int64_t       *counts = NULL, *trace_counts, since, until, total = 0;
    int64_t        pfrom = INT64_MAX, pto = INT64_MIN;
    size_t         ncounts = 0, ccounts = 0;
    long           slowest;
    const char    *service = opt(a, O_SERVICE);
    tree_ctx_t     c;
    char           t1[40], t2[40];
    int            filtered;

    slowest = opt_long(a, O_SLOWEST, "--slowest", 10, 1, 1000000);
    since = opt_time(a, O_SINCE, "--since", INT64_MIN);
    until = opt_time(a, O_UNTIL, "--until", INT64_MAX);
    load(&d, a, LOAD_NEED_SPANS);
    if (d.spans.n == 0) {
        cli_die("%s: no spans (%zu line%s, %zu skipped)", d.spans.path,
                d.spans.lines, d.spans.lines == 1 ? "" : "s",
                d.spans.bad_lines);
    }

    /* CPU samples per trace and per (trace, span). */
    trace_counts = xcalloc(d.model.strs.n + 1, sizeof(int64_t));
    cli_keymap_init(&span_idx, 8);
    for (i = 0; i < d.model.nsamples; i++) {
        const cli_sample_t  *s = &d.model.samples[i];
        int32_t              key[2] = { s->trace, s->span }, k;

        total += s->count;
        if (s->trace < 0) {
            continue;
        }
        trace_counts[s->trace] += s->count;
        if (s->span >= 0) {
            k = cli_keymap_put(&span_idx, key, (int32_t) ncounts);
            if (k == (int32_t) ncounts) {
                *CLI_PUSH(counts, ncounts, ccounts) = 0;
            }
            counts[k] += s->count;
        }
    }
    for (i = 0; i < d.model.nfiles; i++) {
        if (d.model.files[i].start_ns < pfrom) {
            pfrom = d.model.files[i].start_ns;
        }
        if (d.model.files[i].end_ns > pto) {
            pto = d.model.files[i].end_ns;
        }
    }

    /* Spans grouped by trace, by start time within a trace. */
    order = xmalloc(d.spans.n * sizeof(size_t));
    for (i = 0; i < d.spans.n; i++) {
        order[i] = i;
    }
    sort_spans = d.spans.spans;
    qsort(order, d.spans.n, sizeof(size_t), cmp_span_order);
    for (i = 0; i < d.spans.n; i = j) {
        const cli_span_t  *s0 = &d.spans.spans[order[i]];
        int                match = service == NULL;
        int32_t            tid;

        tr = CLI_PUSH(trs, ntr, ctr);
        memset(tr, 0, sizeof(*tr));
        tr->first = i;
        tr->start = INT64_MAX;
        tr->end = INT64_MIN;
        for (j = i; j < d.spans.n
             && strcmp(d.spans.spans[order[j]].trace_id, s0->trace_id) == 0;
             j++)
        {
            const cli_span_t  *s = &d.spans.spans[order[j]];

            tr->start = s->start_ns < tr->start ? s->start_ns : tr->start;
            tr->end = s->end_ns > tr->end ? s->end_ns : tr->end;
            if (!match && s->service && strcmp(s->service, service) == 0) {
                match = 1;
            }
        }
        tr->n = j - i;
        tid = cli_strpool_find(&d.model.strs, s0->trace_id);
        tr->samples = tid >= 0 ? trace_counts[tid] : 0;
        if (!match || tr->start < since || tr->start >= until) {
            ntr--;
        }
    }
    if (ntr == 0) {
        cli_die("no trace in %s matches%s%s%s%s%s%s", d.spans.path,
                service ? " --service " : "", service ? service : "",
                opt(a, O_SINCE) ? " --since " : "",
                opt(a, O_SINCE) ? opt(a, O_SINCE) : "",
                opt(a, O_UNTIL) ? " --until " : "",
                opt(a, O_UNTIL) ? opt(a, O_UNTIL) : "");
    }
    qsort(trs, ntr, sizeof(trace_t), cmp_trace_slowest);
    shown = (size_t) slowest < ntr ? (size_t) slowest : ntr;

    if (a->set & O_IDS) {
        for (i = 0; i < shown; i++) {
            printf("%s\n", d.spans.spans[order[trs[i].first]].trace_id);
        }
    } else {
        {
            size_t  ntraces = 1;

            for (i = 1; i < d.spans.n; i++) {
                ntraces += strcmp(d.spans.spans[order[i]].trace_id,
                                  d.spans.spans[order[i - 1]].trace_id) != 0;
            }
            printf("%s: %zu spans in %zu traces", a->dir, d.spans.n, ntraces);
        }
        nfiles = d.model.nfiles;
        if (nfiles > 0) {
            cli_format_clock(pfrom, t1, sizeof(t1));
            cli_format_clock(pto, t2, sizeof(t2));
            printf("; %lld CPU samples in %zu profile%s (%s to %s UTC)",
                   (long long) total, nfiles, nfiles == 1 ? "" : "s", t1, t2);
        } else {
            printf("; no CPU profiles");
        }
        filtered = service || opt(a, O_SINCE) || opt(a, O_UNTIL);
        if (shown == ntr) {
            printf("\n%s %zu trace%s%s, slowest first:\n",
                   ntr == 1 ? "The" : "All", ntr, ntr == 1 ? "" : "s",
                   filtered ? (ntr == 1 ? " that matches" : " that match")
                            : "");
        } else {
            printf("\nThe %zu slowest of %zu trace%s%s:\n", shown, ntr,
                   ntr == 1 ? "" : "s", filtered ? " that match" : "");
        }
        memset(&c, 0, sizeof(c));
        c.d = &d;
        c.order = order;
        c.span_samples = &span_idx;
        c.counts = counts;
        c.rows = xmalloc(d.spans.n * sizeof(size_t));
        c.depth = xmalloc(d.spans.n * sizeof(int));
        for (i = 0; i < shown; i++) {
            c.tr = &trs[i];
            print_trace(&c);
        }
        free(c.rows);
        free(c.depth);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_die("cannot write to standard output: %s", strerror(errno));
    }
    free(order);
    free(trs);
    free(counts);
    free(trace_counts);
    cli_keymap_free(&span_idx);
    unload(&d);
    return 0;
}

/* --- flame graphs, folded, pprof ----------------------------------------- */

typedef struct {
    char          *trace, *span;    /* resolved full ids, or NULL */
    int64_t        from, to;
    int            ranged;
    size_t        *sel;
    size_t         nsel;
    int64_t        samples;
    size_t         nfiles;
} selection_t;

/* The checks of --trace, --span and --range that need no data; the load
 * mode the selection needs. */
static int
check_selection(args_t *a, selection_t *s)
{
    static const struct { int bit; const char *name; size_t max; } ids[] = {
        { O_TRACE, "trace", 32 }, { O_SPAN, "span", 16 },
    };
    const char  *v;
    size_t       i;

    memset(s, 0, sizeof(*s));
    s->ranged = opt_range(a, O_RANGE, "--range", &s->from, &s->to);
    for (i = 0; i < 2; i++) {
        v = opt(a, ids[i].bit);
        if (v != NULL && !cli_is_hex(v, ids[i].max)) {
            cli_usage_die("%s: --%s \"%s\" is not a %s id (1 to %zu hex "
                          "digits)", a->cmd, ids[i].name, v, ids[i].name,
                          ids[i].max);
        }
    }
    return (a->set & (O_TRACE | O_SPAN)) ? LOAD_SPANS : LOAD_NO_SPANS;
}

static void
select_from_args(args_t *a, data_t *d, selection_t *s)
{
    const cli_span_t  *sp;
    char               what[200];

    if (opt(a, O_TRACE) != NULL) {
        s->trace = resolve_id(a, d, opt(a, O_TRACE), 0, NULL);
    }
    if (opt(a, O_SPAN) != NULL) {
        s->span = resolve_id(a, d, opt(a, O_SPAN), 1, s->trace);
        if (s->trace == NULL) {
            sp = find_span(d, NULL, s->span);
            if (sp != NULL) {
                s->trace = xstrdup(sp->trace_id);
            } else {
                /* Known from the samples only: take their trace. */
                int32_t  id = cli_strpool_find(&d->model.strs, s->span);
                size_t   i;

                for (i = 0; i < d->model.nsamples; i++) {
                    if (d->model.samples[i].span == id
                        && d->model.samples[i].trace >= 0)
                    {
                        s->trace = xstrdup(d->model.strs.strs[
                                               d->model.samples[i].trace]);
                        break;
                    }
                }
            }
        }
    }
    s->nsel = select_samples(d, s->trace, s->span, s->from, s->to, &s->sel);
    s->samples = sum_samples(d, s->sel, s->nsel, &s->nfiles);
    if (s->nsel > 0) {
        return;
    }
    if (s->span != NULL) {
        snprintf(what, sizeof(what), "span %s", s->span);
    } else if (s->trace != NULL) {
        snprintf(what, sizeof(what), "trace %s", s->trace);
    } else {
        what[0] = '\0';
    }
    if (d->model.files_seen == 0) {
        cli_die("%s: no CPU profiles (cpu-*.pb.gz)%s%s", d->dir,
                what[0] ? ", so no samples of " : "", what);
    }
    if (what[0] != '\0') {
        cli_die("no CPU sample in %s is labelled with %s%s (was "
                "otel_profiling on for its location?)", d->dir, what,
                s->ranged ? " in --range" : "");
    }
    cli_die("no CPU samples in %s%s", d->dir,
            s->ranged ? " in profiles that overlap --range" : "");
}

static void
free_selection(selection_t *s)
{
    free(s->trace);
    free(s->span);
    free(s->sel);
}

static void
refuse_tty(const args_t *a, const char *out, const char *what)
{
    if ((out == NULL || strcmp(out, "-") == 0) && isatty(STDOUT_FILENO)) {
        cli_usage_die("%s: not writing %s to a terminal; use -o FILE or "
                      "redirect standard output", a->cmd, what);
    }
}

static void
append_span_facts(sp_buf_t *b, const cli_span_t *s)
{
    char  st[40];

    if (s->route != NULL) {
        sp_buf_appendf(b, "route %s", s->route);
    } else {
        sp_buf_append_str(b, "no route");
    }
    if (s->kind == 3 && s->peer != NULL) {
        sp_buf_appendf(b, " \xc2\xb7 peer %s", s->peer);
    } else if (s->path != NULL) {
        sp_buf_appendf(b, " \xc2\xb7 path %s", s->path);
    }
    status_text(s, st, sizeof(st));
    sp_buf_appendf(b, " \xc2\xb7 status %s", st);
}

/* Title lines naming the trace, span, route and duration. */
static void
titles(const data_t *d, const selection_t *s, sp_buf_t *title,
    sp_buf_t *sub)
{
    const cli_span_t  *sp = NULL, *root;
    int64_t            start, end;
    char               dur[40], when[40], t1[40], t2[40];

    if (s->trace == NULL) {
        sp_buf_appendf(title, "CPU profile of %s", d->dir);
        cli_format_time(s->ranged ? s->from : INT64_MIN, t1, sizeof(t1));
        sp_buf_appendf(sub, "%lld samples in %zu profile%s, every worker, "
                       "inside requests or not",
                       (long long) s->samples, s->nfiles,
                       s->nfiles == 1 ? "" : "s");
        if (s->ranged) {
            cli_format_time(s->from, t1, sizeof(t1));
            cli_format_time(s->to, t2, sizeof(t2));
            sp_buf_appendf(sub, ", profiles overlapping %s to %s", t1, t2);
        }
        return;
    }
    root = trace_root(d, s->trace, &start, &end);
    if (s->span != NULL) {
        sp = find_span(d, s->trace, s->span);
    }
    if (s->span != NULL && sp != NULL) {
        cli_format_ms(sp->end_ns - sp->start_ns, dur, sizeof(dur));
        cli_format_time(sp->start_ns, when, sizeof(when));
        sp_buf_append_str(title, sp->name);
        if (sp->path != NULL && sp->route != NULL
            && strcmp(sp->path, sp->route) != 0)
        {
            sp_buf_appendf(title, " (%s)", sp->path);
        }
        sp_buf_appendf(title, "  %s  \xc2\xb7  span %s  \xc2\xb7  trace %s",
                       dur, sp->span_id, s->trace);
        sp_buf_appendf(sub, "%s span \xc2\xb7 ", cli_span_kind_name(sp->kind));
        append_span_facts(sub, sp);
        sp_buf_appendf(sub, " \xc2\xb7 %lld CPU sample%s \xc2\xb7 %s",
                       (long long) s->samples, s->samples == 1 ? "" : "s",
                       when);
        if (sp->service != NULL) {
            sp_buf_appendf(sub, " \xc2\xb7 service %s", sp->service);
        }
    } else if (s->span != NULL) {
        sp_buf_appendf(title, "span %s  \xc2\xb7  trace %s", s->span,
                       s->trace);
        sp_buf_appendf(sub, "span not in traces.jsonl \xc2\xb7 %lld CPU "
                       "sample%s", (long long) s->samples,
                       s->samples == 1 ? "" : "s");
    } else if (root != NULL) {
        cli_format_ms(end - start, dur, sizeof(dur));
        cli_format_time(start, when, sizeof(when));
        sp_buf_append_str(title, root->name);
        if (root->path != NULL && root->route != NULL
            && strcmp(root->path, root->route) != 0)
        {
            sp_buf_appendf(title, " (%s)", root->path);
        }
        sp_buf_appendf(title, "  %s  \xc2\xb7  trace %s", dur, s->trace);
        sp_buf_appendf(sub, "root span %s (%s) \xc2\xb7 ", root->span_id,
                       cli_span_kind_name(root->kind));
        append_span_facts(sub, root);
        sp_buf_appendf(sub, " \xc2\xb7 %lld CPU sample%s \xc2\xb7 %s",
                       (long long) s->samples, s->samples == 1 ? "" : "s",
                       when);
        if (root->service != NULL) {
            sp_buf_appendf(sub, " \xc2\xb7 service %s", root->service);
        }
    } else {
        sp_buf_appendf(title, "trace %s", s->trace);
        sp_buf_appendf(sub, "trace not in traces.jsonl \xc2\xb7 %lld CPU "
                       "sample%s", (long long) s->samples,
                       s->samples == 1 ? "" : "s");
    }
}

static void
write_output(const args_t *a, const sp_buf_t *b, const char *what)
{
    const char  *out = opt(a, O_OUT);

    if (sp_buf_failed(b)) {
        cli_die("out of memory");
    }
    refuse_tty(a, out, what);
    cli_write_file(out ? out : "-", b->data, b->len);
}

static int
cmd_flamegraph(args_t *a)
{
    data_t          d;
    selection_t     s;
    cli_tree_t      t;
    cli_svg_opts_t  o;
    sp_buf_t        title, sub, svg;
    const char     *out = opt(a, O_OUT);

    memset(&o, 0, sizeof(o));
    o.width = (int) opt_long(a, O_WIDTH, "--width", 1200, 300, 100000);
    refuse_tty(a, out, "an SVG");
    load(&d, a, check_selection(a, &s));
    select_from_args(a, &d, &s);

    sp_buf_init(&title);
    sp_buf_init(&sub);
    sp_buf_init(&svg);
    titles(&d, &s, &title, &sub);
    if (type_label(&d) != NULL) {
        sp_buf_appendf(&sub, " \xc2\xb7 values: %s", type_label(&d));
    }
    o.unit = type_label(&d);
    sp_buf_append_char(&title, '\0');
    sp_buf_append_char(&sub, '\0');
    o.title = opt(a, O_TITLE) ? opt(a, O_TITLE) : (char *) title.data;
    o.subtitle = (char *) sub.data;
    if (sp_buf_failed(&title) || sp_buf_failed(&sub)) {
        cli_die("out of memory");
    }
    cli_tree_init(&t, &d.model.strs);
    cli_tree_add_samples(&t, &d.model, s.sel, s.nsel, 0);
    cli_tree_finish(&t);
    cli_tree_warn_truncated(&t);
    cli_tree_svg(&t, &o, &svg);
    write_output(a, &svg, "an SVG");
    if (out != NULL && strcmp(out, "-") != 0) {
        fprintf(stderr, "spanprof: wrote %s: %lld CPU samples from %zu "
                "profile%s, %zu frames\n", out, (long long) s.samples,
                s.nfiles, s.nfiles == 1 ? "" : "s", t.n - 1);
    }
    sp_buf_free(&title);
    sp_buf_free(&sub);
    sp_buf_free(&svg);
    cli_tree_free(&t);
    free_selection(&s);
    unload(&d);
    return 0;
}

static int
cmd_folded(args_t *a)
{
    data_t       d;
    selection_t  s;
    cli_tree_t   t;
    sp_buf_t     b;

    load(&d, a, check_selection(a, &s));
    select_from_args(a, &d, &s);
    cli_tree_init(&t, &d.model.strs);
    cli_tree_add_samples(&t, &d.model, s.sel, s.nsel, 0);
    cli_tree_finish(&t);
    cli_tree_warn_truncated(&t);
    sp_buf_init(&b);
    cli_tree_folded(&t, &b);
    if (sp_buf_failed(&b)) {
        cli_die("out of memory");
    }
    cli_write_file(opt(a, O_OUT) ? opt(a, O_OUT) : "-", b.data, b.len);
    sp_buf_free(&b);
    cli_tree_free(&t);
    free_selection(&s);
    unload(&d);
    return 0;
}

static int
cmd_pprof(args_t *a)
{
    data_t       d;
    selection_t  s;
    sp_buf_t     b;
    const char  *out = opt(a, O_OUT);

    if (out == NULL) {
        cli_usage_die("pprof: -o FILE is required (\"-o -\" for standard "
                      "output)");
    }
    refuse_tty(a, out, "a gzip'd pprof profile");
    load(&d, a, check_selection(a, &s));
    select_from_args(a, &d, &s);
    sp_buf_init(&b);
    cli_model_write_pprof(&d.model, s.sel, s.nsel, &b);
    write_output(a, &b, "a gzip'd pprof profile");
    if (strcmp(out, "-") != 0) {
        fprintf(stderr, "spanprof: wrote %s: %zu samples (%lld CPU samples) "
                "from %zu profile%s\n", out, s.nsel, (long long) s.samples,
                s.nfiles, s.nfiles == 1 ? "" : "s");
    }
    sp_buf_free(&b);
    free_selection(&s);
    unload(&d);
    return 0;
}

static size_t
select_range(const args_t *a, const data_t *d, int64_t from, int64_t to,
    const char *name, size_t **sel, int64_t *samples, size_t *nfiles)
{
    const char  *spec = opt(a, name[2] == 'b' ? O_BASE : O_COMPARE);
    char         t1[40], t2[40];
    int64_t      lo = INT64_MAX, hi = INT64_MIN;
    size_t       n, i;

    n = select_samples(d, NULL, NULL, from, to, sel);
    *samples = sum_samples(d, *sel, n, nfiles);
    if (n > 0) {
        return n;
    }
    if (d->model.nfiles == 0) {
        cli_die("%s: no CPU profiles (cpu-*.pb.gz)", d->dir);
    }
    for (i = 0; i < d->model.nfiles; i++) {
        lo = d->model.files[i].start_ns < lo ? d->model.files[i].start_ns : lo;
        hi = d->model.files[i].end_ns > hi ? d->model.files[i].end_ns : hi;
    }
    cli_format_time(lo, t1, sizeof(t1));
    cli_format_time(hi, t2, sizeof(t2));
    cli_die("no CPU samples in the %s range %s: the profiles in %s cover "
            "%s to %s", name + 2, spec, d->dir, t1, t2);
}

static int
cmd_diff(args_t *a)
{
    data_t          d;
    cli_tree_t      t;
    cli_svg_opts_t  o;
    sp_buf_t        title, sub, svg;
    size_t         *bsel, *csel, nb, nc, bfiles, cfiles;
    int64_t         bfrom, bto, cfrom, cto, bsamples, csamples;
    const char     *out = opt(a, O_OUT);

    if (!(a->set & O_BASE) || !(a->set & O_COMPARE)) {
        cli_usage_die("diff: needs --base A..B and --compare C..D (see "
                      "spanprof diff --help)");
    }
    opt_range(a, O_BASE, "--base", &bfrom, &bto);
    opt_range(a, O_COMPARE, "--compare", &cfrom, &cto);
    memset(&o, 0, sizeof(o));
    o.width = (int) opt_long(a, O_WIDTH, "--width", 1200, 300, 100000);
    o.diff = 1;
    refuse_tty(a, out, "an SVG");
    load(&d, a, LOAD_NO_SPANS);
    nb = select_range(a, &d, bfrom, bto, "--base", &bsel, &bsamples, &bfiles);
    nc = select_range(a, &d, cfrom, cto, "--compare", &csel, &csamples,
                      &cfiles);

    sp_buf_init(&title);
    sp_buf_init(&sub);
    sp_buf_init(&svg);
    sp_buf_appendf(&title, "CPU of %s: %s compared with %s", a->dir,
                   opt(a, O_COMPARE), opt(a, O_BASE));
    sp_buf_appendf(&sub, "compare: %lld samples in %zu profile%s \xc2\xb7 "
                   "base: %lld samples in %zu profile%s \xc2\xb7 width: "
                   "compare \xc2\xb7 red: larger share, blue: smaller",
                   (long long) csamples, cfiles, cfiles == 1 ? "" : "s",
                   (long long) bsamples, bfiles, bfiles == 1 ? "" : "s");
    if (type_label(&d) != NULL) {
        sp_buf_appendf(&sub, " \xc2\xb7 values: %s", type_label(&d));
    }
    o.unit = type_label(&d);
    sp_buf_append_char(&title, '\0');
    sp_buf_append_char(&sub, '\0');
    if (sp_buf_failed(&title) || sp_buf_failed(&sub)) {
        cli_die("out of memory");
    }
    o.title = opt(a, O_TITLE) ? opt(a, O_TITLE) : (char *) title.data;
    o.subtitle = (char *) sub.data;

    cli_tree_init(&t, &d.model.strs);
    cli_tree_add_samples(&t, &d.model, csel, nc, 0);
    cli_tree_add_samples(&t, &d.model, bsel, nb, 1);
    cli_tree_finish(&t);
    cli_tree_warn_truncated(&t);
    cli_tree_svg(&t, &o, &svg);
    write_output(a, &svg, "an SVG");
    if (out != NULL && strcmp(out, "-") != 0) {
        fprintf(stderr, "spanprof: wrote %s: compare %lld CPU samples from "
                "%zu profile%s, base %lld from %zu\n", out,
                (long long) csamples, cfiles, cfiles == 1 ? "" : "s",
                (long long) bsamples, bfiles);
    }
    sp_buf_free(&title);
    sp_buf_free(&sub);
    sp_buf_free(&svg);
    cli_tree_free(&t);
    free(bsel);
    free(csel);
    unload(&d);
    return 0;
}

/* --- main ---------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    static const struct {
        const char  *name;
        int        (*run)(args_t *);
        int          allowed;
    } cmds[] = {
        { "traces", cmd_traces,
          O_SLOWEST | O_SERVICE | O_SINCE | O_UNTIL | O_IDS },
        { "flamegraph", cmd_flamegraph,
          O_TRACE | O_SPAN | O_RANGE | O_OUT | O_WIDTH | O_TITLE | O_TYPE },
        { "diff", cmd_diff,
          O_BASE | O_COMPARE | O_OUT | O_WIDTH | O_TITLE | O_TYPE },
        { "folded", cmd_folded,
          O_TRACE | O_SPAN | O_RANGE | O_OUT | O_TYPE },
        { "pprof", cmd_pprof, O_TRACE | O_SPAN | O_RANGE | O_OUT | O_TYPE },
    };
    args_t  a;
    size_t  i;

    if (argc < 2) {
        print_help(stderr, NULL);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "serve") == 0) {
        return cli_serve_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_help(stdout, NULL);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) {
        if (argc > 2) {
            for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                if (strcmp(argv[2], cmds[i].name) == 0) {
                    print_help(stdout, argv[2]);
                    return 0;
                }
            }
            cli_usage_die("help: unknown command \"%s\"", argv[2]);
        }
        print_help(stdout, NULL);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("spanprof %s\n", SP_VERSION);
        return 0;
    }
    for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        if (strcmp(argv[1], cmds[i].name) == 0) {
            memset(&a, 0, sizeof(a));
            a.cmd = cmds[i].name;
            a.now = cli_now_ns();
            parse_args(&a, argc, argv, cmds[i].allowed);
            return cmds[i].run(&a);
        }
    }
    cli_usage_die("unknown command \"%s\" (commands: traces, flamegraph, "
                  "diff, folded, pprof; see spanprof --help)", argv[1]);
}
