#ifndef SPANPROF_CLI_H
#define SPANPROF_CLI_H

/* The spanprof command-line tool: reads a directory written by the file
 * exporter (traces.jsonl + cpu-*.pb.gz) and prints traces, flame graphs,
 * folded stacks and filtered pprof files. Single-threaded; errors end the
 * process with a one-line message (cli_die), so most functions return
 * only on success. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/base/buf.h"

#define CLI_EXIT_ERROR  1
#define CLI_EXIT_USAGE  2

/* --- util.c ------------------------------------------------------------ */

__attribute__((noreturn, format(printf, 1, 2)))
void cli_die(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2)))
void cli_usage_die(const char *fmt, ...);
__attribute__((format(printf, 1, 2)))
void cli_warn(const char *fmt, ...);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Grows *pp (of *cap elements of size sz) to hold at least n elements. */
void cli_grow(void *pp, size_t *cap, size_t n, size_t sz);
#define CLI_PUSH(arr, n, cap) \
    (cli_grow(&(arr), &(cap), (n) + 1, sizeof(*(arr))), &(arr)[(n)++])

/* Interned strings with dense ids (0, 1, ...). */
typedef struct {
    char      **strs;
    size_t      n, cap;
    uint32_t   *slots;      /* id + 1, 0 = empty */
    size_t      nslots;
} cli_strpool_t;

void    cli_strpool_init(cli_strpool_t *p);
void    cli_strpool_free(cli_strpool_t *p);
int32_t cli_strpool_intern(cli_strpool_t *p, const char *s, size_t len);
/* -1 when s was never interned. */
int32_t cli_strpool_find(const cli_strpool_t *p, const char *s);

/* Fixed-size byte keys to int32 values (open addressing). */
typedef struct {
    uint8_t    *keys;
    int32_t    *vals;
    uint8_t    *used;
    size_t      keysz, cap, n;
} cli_keymap_t;

void    cli_keymap_init(cli_keymap_t *m, size_t keysz);
void    cli_keymap_free(cli_keymap_t *m);
/* The value of key, or -1. */
int32_t cli_keymap_get(const cli_keymap_t *m, const void *key);
/* The value of key; when absent, stores val and returns it. */
int32_t cli_keymap_put(cli_keymap_t *m, const void *key, int32_t val);

/* Times are nanoseconds since the epoch. A time is unix seconds
 * ("1795318812", "1795318812.5"), RFC 3339 ("2026-11-22T03:00:00Z",
 * "2026-11-22T03:00:00.250+01:00", also with a space for the T), "now", or
 * relative to now: "-5m", "-90s", "-1h30m", "-2d", "-500ms". 0 or -1 with
 * *err set. */
int  cli_parse_time(const char *s, int64_t now_ns, int64_t *out,
    const char **err);
/* "A..B"; B may be empty (now). Needs A < B. */
int  cli_parse_range(const char *s, int64_t now_ns, int64_t *from,
    int64_t *to, const char **err);
int64_t cli_now_ns(void);
/* 2026-11-22T03:00:00.123Z */
void cli_format_time(int64_t ns, char *buf, size_t len);
/* 03:00:00.123 */
void cli_format_clock(int64_t ns, char *buf, size_t len);
/* "231.52 ms" */
void cli_format_ms(int64_t ns, char *buf, size_t len);

/* 1 when s is 1..max lowercase-or-uppercase hex digits. */
int  cli_is_hex(const char *s, size_t max);
void cli_lowercase(char *s);

/* Appends the gunzip of in (one or more gzip members) to out, at most max
 * bytes; 0, or -1 with *err set (empty, not gzip, corrupt, truncated,
 * trailing garbage, over max). */
int  cli_gunzip(const uint8_t *in, size_t inlen, size_t max, sp_buf_t *out,
    const char **err);

/* Writes len bytes to path ("-" is standard output) or dies. */
void cli_write_file(const char *path, const void *data, size_t len);

/* --- spans.c: traces.jsonl ------------------------------------------- */

typedef struct {
    char        trace_id[33];
    char        span_id[17];
    char        parent_id[17];      /* "" when none */
    char       *name;
    char       *service;            /* resource service.name, or NULL */
    char       *route;              /* http.route */
    char       *path;               /* url.path */
    char       *peer;               /* server.address[:server.port] */
    int         kind;               /* OTLP SpanKind: 2 SERVER, 3 CLIENT */
    int         error;              /* status code ERROR */
    int         http_status;        /* http.response.status_code, or -1 */
    int64_t     start_ns, end_ns;
} cli_span_t;

typedef struct {
    char        *path;              /* DIR/traces.jsonl */
    int          found;
    cli_span_t  *spans;
    size_t       n, cap;
    size_t       lines, bad_lines;
} cli_spans_t;

/* Reads DIR/traces.jsonl when it exists (found = 0 otherwise). Malformed
 * lines and spans are skipped with a warning naming the file and line. */
void cli_spans_load(cli_spans_t *s, const char *dir);
void cli_spans_free(cli_spans_t *s);
const char *cli_span_kind_name(int kind);

/* --- profiles.c: cpu-*.pb.gz ----------------------------------------- */

typedef struct {
    int32_t     name, file;         /* string ids; file -1 when none */
} cli_func_t;

typedef struct {
    int32_t     file, build_id;     /* string ids, -1 when none */
    uint64_t    start, limit, offset;
} cli_map_t;

typedef struct {
    uint64_t    address;
    int32_t     mapping;            /* index or -1 */
    int32_t     func;               /* index or -1 */
    int32_t     frame;              /* string id of the frame's name */
} cli_loc_t;

typedef struct {
    uint32_t    stack_off, stack_len;   /* into stacks[], leaf first */
    int64_t     count;                  /* samples/count */
    int32_t     trace, span, span_name; /* label string ids, or -1 */
    int32_t     file;                   /* index into files[] */
} cli_sample_t;

typedef struct {
    char       *path;
    int64_t     start_ns, end_ns;       /* time_nanos .. + duration_nanos */
    int64_t     period;                 /* ns */
    int64_t     samples;                /* sum of counts */
} cli_pfile_t;

typedef struct {
    cli_strpool_t   strs;
    cli_func_t     *funcs;
    size_t          nfuncs, cfuncs;
    cli_map_t      *maps;
    size_t          nmaps, cmaps;
    cli_loc_t      *locs;
    size_t          nlocs, clocs;
    int32_t        *stacks;
    size_t          nstacks, cstacks;
    cli_sample_t   *samples;
    size_t          nsamples, csamples;
    cli_pfile_t    *files;
    size_t          nfiles, cfiles;
    size_t          files_seen;         /* cpu-*.pb.gz in the directory */
    int64_t         total;              /* sum of all counts: a file that
                                         * would take it past INT64_MAX is
                                         * refused */
    cli_keymap_t    func_ids, map_ids, loc_ids;
    /* The sample type whose values are loaded: "TYPE" or "TYPE/UNIT" of a
     * sample_type (--type; set before loading), NULL: samples/count when
     * a file has it, else its first. type and unit: what the first file
     * loaded had (NULL before); with want_type, a file without it is an
     * error listing the types it has. */
    const char     *want_type;
    char           *type, *unit;
    char           *period_type, *period_unit;
} cli_model_t;

void cli_model_init(cli_model_t *m);
void cli_model_free(cli_model_t *m);
/* Number of cpu-*.pb.gz files in dir (-1 when dir cannot be read). */
long cli_profiles_count(const char *dir);
/* Loads every DIR/cpu-*.pb.gz whose interval overlaps [from, to) (all with
 * INT64_MIN, INT64_MAX), merging them. Dies on unreadable, truncated or
 * undecodable files. */
void cli_profiles_load(cli_model_t *m, const char *dir, int64_t from,
    int64_t to);
/* Decodes one (gzip'd) pprof file into m; 0, or -1 with err set. */
int  cli_profile_load_file(cli_model_t *m, const char *path, char *err,
    size_t errlen);
/* The samples with the trace (and span) label ids; -1 = any. Returns the
 * number of indices written to a new array *out. */
size_t cli_model_select(const cli_model_t *m, int32_t trace, int32_t span,
    size_t **out);
/* A gzip'd pprof of the given samples, through common/export/pprof.c
 * (sample types samples/count and cpu/nanoseconds); with want_type, one
 * sample type, the one loaded (its values as read), and the period type
 * of the files. */
void cli_model_write_pprof(const cli_model_t *m, const size_t *sel,
    size_t nsel, sp_buf_t *out);

/* --- flame.c: stacks, folded, SVG ----------------------------------- */

/* Frames drawn per stack at most: a deeper stack keeps its innermost
 * CLI_MAX_STACK_DEPTH - 1 frames under one "[truncated]" frame. */
#define CLI_MAX_STACK_DEPTH  4096

typedef struct {
    int32_t     name;               /* string id; -1 for the root */
    int32_t     parent;
    int32_t     first_child, next_sibling;
    int32_t     depth;
    int64_t     total[2], self[2];  /* [0] the profile, [1] diff's base */
} cli_node_t;

typedef struct {
    cli_strpool_t  *names;          /* the model's: frame names */
    cli_node_t     *nodes;
    size_t          n, cap;
    cli_keymap_t    children;       /* (parent, name) -> node */
    int32_t         max_depth;
    size_t          truncated;      /* samples whose stack was cut */
} cli_tree_t;

void cli_tree_init(cli_tree_t *t, cli_strpool_t *names);
void cli_tree_free(cli_tree_t *t);
/* Adds the selected samples of m to side 0 (or 1: diff's base). */
void cli_tree_add_samples(cli_tree_t *t, const cli_model_t *m,
    const size_t *sel, size_t nsel, int side);
/* One warning line when a stack was cut (nothing otherwise). */
void cli_tree_warn_truncated(const cli_tree_t *t);
/* Children sorted by name. Call once, after the last add. */
void cli_tree_finish(cli_tree_t *t);
/* "root;...;leaf count" lines, sorted; ';' in names becomes ':'. */
void cli_tree_folded(const cli_tree_t *t, sp_buf_t *out);

typedef struct {
    const char *title;              /* first line */
    const char *subtitle;           /* second line, or NULL */
    const char *doc_title;          /* the SVG's <title>, or NULL */
    int         width;              /* px */
    int         diff;               /* colour by side 0 vs side 1 */
    const char *unit;               /* what the values count ("alloc_space/
                                     * bytes"); NULL: samples */
} cli_svg_opts_t;

void cli_tree_svg(const cli_tree_t *t, const cli_svg_opts_t *o, sp_buf_t *out);
/* Appends s with & < > " ' escaped. */
void cli_xml_escape(sp_buf_t *out, const char *s);

#endif
