#ifndef SP_PROPAGATION_H
#define SP_PROPAGATION_H

#include <stddef.h>
#include <stdint.h>

/* The trace context formats a location reads and writes
 * (otel_propagation / OtelPropagation: w3c, b3, b3multi), and the request
 * headers each one owns. A zeroed sp_propagation_t means "not set" and
 * reads as the default, w3c alone. */

typedef enum {
    SP_PROP_W3C = 0,     /* traceparent, tracestate */
    SP_PROP_B3,          /* b3 */
    SP_PROP_B3MULTI,     /* X-B3-TraceId, -SpanId, -ParentSpanId, -Sampled,
                            -Flags */
    SP_PROP_N
} sp_prop_format_t;

typedef struct {
    uint8_t  n;                   /* 0: not set (w3c) */
    uint8_t  order[SP_PROP_N];    /* as configured */
} sp_propagation_t;

#define SP_PROPAGATION_NAMES  "w3c, b3 or b3multi"

/* Adds a format by name (case-insensitive). 0, or -1 for an unknown name,
 * -2 for one given twice. */
int sp_propagation_add(sp_propagation_t *p, const char *name, size_t len);

/* Whether the format is configured (w3c alone when p is not set). */
int sp_propagation_has(const sp_propagation_t *p, sp_prop_format_t f);

/* The order to extract in: w3c first when configured, then the others as
 * configured. Returns how many were written to out (SP_PROP_N slots). */
size_t sp_propagation_extract_order(const sp_propagation_t *p,
    sp_prop_format_t out[SP_PROP_N]);

/* Whether a request header name (case-insensitive) carries a trace
 * context of any format spanprof knows (the three above, and Jaeger's
 * uber-trace-id): in inject and propagate modes each of them leaves the
 * upstream request before the configured formats are written, so an
 * upstream never sees two contexts. `baggage` is not one of them. */
int sp_propagation_is_trace_header(const char *name, size_t len);

#endif
