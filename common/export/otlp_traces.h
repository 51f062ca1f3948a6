#ifndef SP_OTLP_TRACES_H
#define SP_OTLP_TRACES_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/trace/resource.h"
#include "common/trace/span_queue.h"

/* Encoded spans (queue records) to an OTLP ExportTraceServiceRequest: one
 * ResourceSpans with our resource, one ScopeSpans with scope
 * spanprof/<version>. Runs on the exporter; the resource and scope
 * are built in `a` (the caller resets it after). Both return 0, or -1 on
 * allocation failure. */

/* Protobuf binary, for POST /v1/traces (otlp_traces_wire.c). */
int sp_otlp_traces_encode(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out);

/* The same request sent without copying the spans: the resource and the
 * scope packed once (sp_otlp_traces_fixed_init, freed with _free), and
 * per batch the two short heads around them (sp_otlp_traces_heads): the
 * request is head1, res, head2, scope, then the spans' records as they
 * are. */
typedef struct {
    uint8_t  *res;
    size_t    res_len;
    uint8_t  *scope;
    size_t    scope_len;
} sp_otlp_traces_fixed_t;

#define SP_OTLP_TRACES_HEAD_MAX  12

int sp_otlp_traces_fixed_init(sp_otlp_traces_fixed_t *f, sp_arena_t *a,
    const sp_resource_t *res);
void sp_otlp_traces_fixed_free(sp_otlp_traces_fixed_t *f);
/* Writes the heads for spans_len bytes of span records; returns the
 * request's whole length. */
size_t sp_otlp_traces_heads(const sp_otlp_traces_fixed_t *f, size_t spans_len,
    uint8_t head1[SP_OTLP_TRACES_HEAD_MAX], size_t *head1_len,
    uint8_t head2[SP_OTLP_TRACES_HEAD_MAX], size_t *head2_len);

/* OTLP/JSON on one line plus '\n', for the file exporter. */
int sp_otlp_traces_encode_json(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out);

/* Reads an ExportTraceServiceResponse (protobuf); rejected spans and the
 * message of a partial success. -1 when the body does not decode. */
int sp_otlp_traces_parse_response(const uint8_t *body, size_t len,
    int64_t *rejected, char *msg, size_t msglen);

#endif
