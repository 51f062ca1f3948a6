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

/* OTLP/JSON on one line plus '\n', for the file exporter. */
int sp_otlp_traces_encode_json(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out);

/* Reads an ExportTraceServiceResponse (protobuf); rejected spans and the
 * message of a partial success. -1 when the body does not decode. */
int sp_otlp_traces_parse_response(const uint8_t *body, size_t len,
    int64_t *rejected, char *msg, size_t msglen);

#endif
