/* The set and order of trace context formats, and the headers they own. */

#include <stddef.h>
#include <stdint.h>
#include <strings.h>

#include "common/trace/propagation.h"

static const char *const  prop_names[SP_PROP_N] = { "w3c", "b3", "b3multi" };

/* Every header of every known format (and uber-trace-id). */
static const char *const  prop_trace_headers[] = {
    "traceparent", "tracestate",
    "b3",
    "x-b3-traceid", "x-b3-spanid", "x-b3-parentspanid", "x-b3-sampled",
    "x-b3-flags",
    "uber-trace-id",
};


static int
name_is(const char *name, size_t len, const char *lit)
{
    char    c;
    size_t  i;

    for (i = 0; i < len; i++) {
        c = name[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char) (c + ('a' - 'A'));
        }
        if (lit[i] == '\0' || c != lit[i]) {
            return 0;
        }
    }
    return lit[len] == '\0';
}


int
sp_propagation_add(sp_propagation_t *p, const char *name, size_t len)
{
    int  f;

    for (f = 0; f < SP_PROP_N; f++) {
        if (name_is(name, len, prop_names[f])) {
            break;
        }
    }
    if (f == SP_PROP_N) {
        return -1;
    }
    if (p->n > 0 && sp_propagation_has(p, (sp_prop_format_t) f)) {
        return -2;
    }
    p->order[p->n++] = (uint8_t) f;
    return 0;
}


int
sp_propagation_has(const sp_propagation_t *p, sp_prop_format_t f)
{
    size_t  i;

    if (p == NULL || p->n == 0) {
        return f == SP_PROP_W3C;
    }
    for (i = 0; i < p->n; i++) {
        if (p->order[i] == f) {
            return 1;
        }
    }
    return 0;
}


size_t
sp_propagation_extract_order(const sp_propagation_t *p,
    sp_prop_format_t out[SP_PROP_N])
{
    size_t  i, n;

    n = 0;
    if (sp_propagation_has(p, SP_PROP_W3C)) {
        out[n++] = SP_PROP_W3C;
    }
    if (p == NULL) {
        return n;
    }
    for (i = 0; i < p->n; i++) {
        if (p->order[i] != SP_PROP_W3C) {
            out[n++] = (sp_prop_format_t) p->order[i];
        }
    }
    return n;
}


int
sp_propagation_is_trace_header(const char *name, size_t len)
{
    size_t  i;

    /* Cheap rejection: every one begins with t, b, x or u. */
    if (len == 0) {
        return 0;
    }
    switch (name[0] | 0x20) {
    case 't': case 'b': case 'x': case 'u':
        break;
    default:
        return 0;
    }

    for (i = 0; i < sizeof(prop_trace_headers) / sizeof(prop_trace_headers[0]);
         i++)
    {
        if (name_is(name, len, prop_trace_headers[i])) {
            return 1;
        }
    }
    return 0;
}
