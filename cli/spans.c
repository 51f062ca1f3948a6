/* traces.jsonl: one OTLP/JSON ExportTraceServiceRequest per line, parsed
 * with jansson. Only the fields the tables and titles need are kept. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/spanprof.h"

/* Warnings about bad lines are capped; the rest are counted. */
#define MAX_LINE_WARNINGS  10

typedef struct {
    cli_spans_t  *s;
    size_t        line;
    size_t        warned;
} ctx_t;

static void
bad_line(ctx_t *c, const char *fmt, const char *detail)
{
    char  msg[512];

    c->s->bad_lines++;
    if (++c->warned > MAX_LINE_WARNINGS) {
        return;
    }
    snprintf(msg, sizeof(msg), fmt, detail);
    cli_warn("%s:%zu: %s; line skipped", c->s->path, c->line, msg);
}

/* A 64-bit integer that OTLP/JSON writes as a decimal string (or, from
 * other writers, as a number). */
static int
json_int64(const json_t *v, int64_t *out)
{
    const char  *s;
    char        *end;
    long long    n;

    if (json_is_integer(v)) {
        *out = (int64_t) json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        /* Only a value that int64 holds converts (NaN fails both). */
        if (!(json_real_value(v) >= -9223372036854775808.0
              && json_real_value(v) < 9223372036854775808.0))
        {
            return -1;
        }
        *out = (int64_t) json_real_value(v);
        return 0;
    }
    if (!json_is_string(v)) {
        return -1;
    }
    s = json_string_value(v);
    errno = 0;
    n = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0) {
        return -1;
    }
    *out = (int64_t) n;
    return 0;
}

/* The id at key of o, lowercase, exactly len hex digits; "" when absent
 * and allowed. 0 or -1. */
static int
json_hex_id(const json_t *o, const char *key, char *dst, size_t len,
    int optional)
{
    const json_t  *v = json_object_get(o, key);
    const char    *s;

    dst[0] = '\0';
    if (v == NULL || (json_is_string(v) && json_string_length(v) == 0)) {
        return optional ? 0 : -1;
    }
    if (!json_is_string(v)) {
        return -1;
    }
    s = json_string_value(v);
    if (strlen(s) != len || !cli_is_hex(s, len)) {
        return -1;
    }
    memcpy(dst, s, len + 1);
    cli_lowercase(dst);
    return 0;
}

/* An attribute's value as text (strings as they are, others printed). */
static char *
attr_text(const json_t *value)
{
    const json_t  *v;
    char           buf[64];
    int64_t        n;

    if ((v = json_object_get(value, "stringValue")) != NULL
        && json_is_string(v))
    {
        return xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(value, "intValue")) != NULL
        && json_int64(v, &n) == 0)
    {
        snprintf(buf, sizeof(buf), "%lld", (long long) n);
        return xstrdup(buf);
    }
    if ((v = json_object_get(value, "boolValue")) != NULL
        && json_is_boolean(v))
    {
        return xstrdup(json_is_true(v) ? "true" : "false");
    }
    if ((v = json_object_get(value, "doubleValue")) != NULL
        && json_is_number(v))
    {
        snprintf(buf, sizeof(buf), "%g", json_number_value(v));
        return xstrdup(buf);
    }
    return NULL;
}

/* The text of attribute key in an OTLP attributes array, or NULL. */
static char *
attr_get(const json_t *attrs, const char *key)
{
    size_t         i;
    const json_t  *a, *k;

    if (!json_is_array(attrs)) {
        return NULL;
    }
    json_array_foreach(attrs, i, a) {
        k = json_object_get(a, "key");
        if (json_is_string(k) && strcmp(json_string_value(k), key) == 0) {
            return attr_text(json_object_get(a, "value"));
        }
    }
    return NULL;
}

static int
span_kind(const json_t *v)
{
    static const char  *names[] = {
        "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
        "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"
    };
    size_t  i;

    if (json_is_integer(v)) {
        return (int) json_integer_value(v);
    }
    if (json_is_string(v)) {
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strcmp(json_string_value(v), names[i]) == 0) {
                return (int) i;
            }
        }
    }
    return 0;
}

const char *
cli_span_kind_name(int kind)
{
    switch (kind) {
    case 1: return "INTERNAL";
    case 2: return "SERVER";
    case 3: return "CLIENT";
    case 4: return "PRODUCER";
    case 5: return "CONSUMER";
    default: return "-";
    }
}

static int
span_is_error(const json_t *status)
{
    const json_t  *c = json_object_get(status, "code");

    if (json_is_integer(c)) {
        return json_integer_value(c) == 2;
    }
    return json_is_string(c)
           && strcmp(json_string_value(c), "STATUS_CODE_ERROR") == 0;
}

/* NULL, or why the span (and its line) is skipped. */
static const char *
add_span(ctx_t *c, const json_t *j, const char *service)
{
    cli_span_t     sp;
    const json_t  *attrs = json_object_get(j, "attributes"), *v;
    char          *addr, *port, *st;
    int64_t        n;
    size_t         len;

    memset(&sp, 0, sizeof(sp));
    if (!json_is_object(j)) {
        return "a span is not an object";
    }
    if (json_hex_id(j, "traceId", sp.trace_id, 32, 0) != 0) {
        return "span without a valid traceId (32 hex digits)";
    }
    if (json_hex_id(j, "spanId", sp.span_id, 16, 0) != 0) {
        return "span without a valid spanId (16 hex digits)";
    }
    if (json_hex_id(j, "parentSpanId", sp.parent_id, 16, 1) != 0) {
        return "span with an invalid parentSpanId";
    }
    if (json_int64(json_object_get(j, "startTimeUnixNano"), &sp.start_ns) != 0
        || json_int64(json_object_get(j, "endTimeUnixNano"), &sp.end_ns) != 0)
    {
        return "span without a startTimeUnixNano/endTimeUnixNano that int64 holds";
    }
    /* OTLP times are unsigned; non-negative ones keep every difference
     * of two of them (durations, offsets) within int64. */
    if (sp.start_ns < 0 || sp.end_ns < 0) {
        return "span with a negative startTimeUnixNano or endTimeUnixNano";
    }
    if (sp.end_ns < sp.start_ns) {
        sp.end_ns = sp.start_ns;
    }
    v = json_object_get(j, "name");
    sp.name = xstrdup(json_is_string(v) ? json_string_value(v) : "");
    sp.kind = span_kind(json_object_get(j, "kind"));
    sp.error = span_is_error(json_object_get(j, "status"));
    sp.service = service ? xstrdup(service) : NULL;
    sp.route = attr_get(attrs, "http.route");
    sp.path = attr_get(attrs, "url.path");
    sp.http_status = -1;
    st = attr_get(attrs, "http.response.status_code");
    if (st != NULL) {
        n = strtoll(st, NULL, 10);
        sp.http_status = n > 0 && n < 1000 ? (int) n : -1;
        free(st);
    }
    addr = attr_get(attrs, "server.address");
    port = attr_get(attrs, "server.port");
    if (addr != NULL && sp.kind == 3) {
        len = strlen(addr) + (port ? strlen(port) : 0) + 2;
        sp.peer = xmalloc(len);
        snprintf(sp.peer, len, "%s%s%s", addr, port ? ":" : "",
                 port ? port : "");
    }
    free(addr);
    free(port);
    *CLI_PUSH(c->s->spans, c->s->n, c->s->cap) = sp;
    return NULL;
}

static void
parse_line(ctx_t *c, const char *line, size_t len)
{
    json_t        *root, *rss, *rs, *sss, *ss, *spans, *sp;
    json_error_t   err;
    size_t         i, j, k, n0 = c->s->n;
    char          *service, detail[300];
    const char    *why = NULL;

    root = json_loadb(line, len, 0, &err);
    if (root == NULL) {
        snprintf(detail, sizeof(detail), "column %d: %s", err.column,
                 err.text);
        bad_line(c, "malformed JSON (%s)", detail);
        return;
    }
    rss = json_object_get(root, "resourceSpans");
    if (!json_is_array(rss)) {
        json_decref(root);
        bad_line(c, "%s", "not an OTLP/JSON trace export (no resourceSpans "
                 "array)");
        return;
    }
    json_array_foreach(rss, i, rs) {
        service = attr_get(json_object_get(json_object_get(rs, "resource"),
                                           "attributes"), "service.name");
        sss = json_object_get(rs, "scopeSpans");
        json_array_foreach(sss, j, ss) {
            spans = json_object_get(ss, "spans");
            if (spans != NULL && !json_is_array(spans)) {
                why = "\"spans\" is not an array";
                break;
            }
            json_array_foreach(spans, k, sp) {
                why = add_span(c, sp, service);
                if (why != NULL) {
                    break;
                }
            }
            if (why != NULL) {
                break;
            }
        }
        free(service);
        if (why != NULL) {
            break;
        }
    }
    json_decref(root);
    if (why != NULL) {
        /* All or nothing per line: drop what this line added. */
        while (c->s->n > n0) {
            cli_span_t  *x = &c->s->spans[--c->s->n];

            free(x->name);
            free(x->service);
            free(x->route);
            free(x->path);
            free(x->peer);
        }
        bad_line(c, "%s", why);
    }
}

void
cli_spans_load(cli_spans_t *s, const char *dir)
{
    FILE     *f;
    char     *line = NULL;
    size_t    cap = 0, len;
    ssize_t   n;
    ctx_t     c;

    memset(s, 0, sizeof(*s));
    len = strlen(dir) + sizeof("/traces.jsonl");
    s->path = xmalloc(len);
    snprintf(s->path, len, "%s/traces.jsonl", dir);
    f = fopen(s->path, "r");
    if (f == NULL) {
        if (errno == ENOENT) {
            return;
        }
        cli_die("cannot read %s: %s", s->path, strerror(errno));
    }
    s->found = 1;
    memset(&c, 0, sizeof(c));
    c.s = s;
    while ((n = getline(&line, &cap, f)) >= 0) {
        c.line++;
        len = (size_t) n;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            len--;
        }
        if (len == 0) {
            continue;
        }
        s->lines++;
        if (memchr(line, '\0', len) != NULL) {
            bad_line(&c, "%s", "a NUL byte in the line");
            continue;
        }
        parse_line(&c, line, len);
    }
    if (ferror(f)) {
        cli_die("cannot read %s: %s", s->path, strerror(errno));
    }
    free(line);
    fclose(f);
    if (c.warned > MAX_LINE_WARNINGS) {
        cli_warn("%s: %zu more bad lines skipped", s->path,
                 c.warned - MAX_LINE_WARNINGS);
    }
}

void
cli_spans_free(cli_spans_t *s)
{
    size_t  i;

    for (i = 0; i < s->n; i++) {
        free(s->spans[i].name);
        free(s->spans[i].service);
        free(s->spans[i].route);
        free(s->spans[i].path);
        free(s->spans[i].peer);
    }
    free(s->spans);
    free(s->path);
    memset(s, 0, sizeof(*s));
}
