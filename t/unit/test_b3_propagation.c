/* sp_propagation_*: the otel_propagation format set, its extract order and
 * the trace headers removed before injection. */

#include <string.h>

#include "tap.h"
#include "common/trace/propagation.h"

#define ADD(p, s)  sp_propagation_add((p), (s), strlen(s))


static void
test_set(void)
{
    sp_propagation_t  p;
    sp_prop_format_t  o[SP_PROP_N];
    size_t            n;

    memset(&p, 0, sizeof(p));
    ok(sp_propagation_has(&p, SP_PROP_W3C), "unset: w3c");
    ok(!sp_propagation_has(&p, SP_PROP_B3), "unset: no b3");
    ok(!sp_propagation_has(&p, SP_PROP_B3MULTI), "unset: no b3multi");
    n = sp_propagation_extract_order(&p, o);
    ok(n == 1 && o[0] == SP_PROP_W3C, "unset: extract w3c only");

    is_int(ADD(&p, "b3multi"), 0, "add b3multi");
    is_int(ADD(&p, "B3"), 0, "add B3 (case-insensitive)");
    is_int(ADD(&p, "W3C"), 0, "add w3c last");
    is_int(ADD(&p, "b3"), -2, "b3 twice");
    is_int(ADD(&p, "jaeger"), -1, "unknown name");
    is_int(ADD(&p, "b3multix"), -1, "prefix of a name is not it");
    is_int(sp_propagation_add(&p, "b3multi", 2), -2, "len honoured: b3");
    n = sp_propagation_extract_order(&p, o);
    ok(n == 3 && o[0] == SP_PROP_W3C && o[1] == SP_PROP_B3MULTI
       && o[2] == SP_PROP_B3,
       "extract: w3c first, then the configured order");

    memset(&p, 0, sizeof(p));
    ADD(&p, "b3");
    ok(!sp_propagation_has(&p, SP_PROP_W3C), "b3 alone: no w3c");
    n = sp_propagation_extract_order(&p, o);
    ok(n == 1 && o[0] == SP_PROP_B3, "b3 alone: extract b3 only");
}


static void
test_headers(void)
{
    static const char *yes[] = {
        "traceparent", "TraceParent", "tracestate", "b3", "B3",
        "X-B3-TraceId", "x-b3-spanid", "X-B3-ParentSpanId", "X-B3-Sampled",
        "X-B3-Flags", "uber-trace-id", "Uber-Trace-Id",
    };
    static const char *no[] = {
        "baggage", "b", "b33", "x-b3", "X-B3-TraceIdx", "traceparen",
        "uber-trace", "host", "x-request-id", "x\rb3-flags", "",
    };
    size_t  i;

    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        ok(sp_propagation_is_trace_header(yes[i], strlen(yes[i])),
           "trace header: %s", yes[i]);
    }
    for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        ok(!sp_propagation_is_trace_header(no[i], strlen(no[i])),
           "not a trace header: '%s'", no[i]);
    }
}


int
main(void)
{
    test_set();
    test_headers();

    return done_testing();
}
