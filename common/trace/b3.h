#ifndef SP_B3_H
#define SP_B3_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"

/* Zipkin B3 propagation (openzipkin/b3-propagation).
 * Single header:  b3: {TraceId}-{SpanId}[-{SamplingState}[-{ParentSpanId}]]
 *                 or b3: {SamplingState} alone (0: deny, 1, d)
 * Multi header:   X-B3-TraceId, X-B3-SpanId, X-B3-ParentSpanId,
 *                 X-B3-Sampled (1/0, also true/false), X-B3-Flags (1: debug)
 * TraceId: 16 or 32 lower-hex chars (a 64-bit one is left-padded with zeros
 * to the 128 bits OpenTelemetry uses); SpanId and ParentSpanId: 16. All-zero
 * ids are invalid. Debug implies sampled. */

#define SP_B3_SINGLE_LEN  51   /* 32 + 1 + 16 + 1 + 1 */

typedef enum {
    SP_B3_DEFER = 0,   /* no sampling state: the receiver decides */
    SP_B3_DENY,
    SP_B3_ACCEPT,
    SP_B3_DEBUG
} sp_b3_sampling_t;

typedef struct {
    uint8_t           trace_id[SP_TRACE_ID_LEN];
    uint8_t           span_id[SP_SPAN_ID_LEN];
    uint8_t           parent_id[SP_SPAN_ID_LEN];
    unsigned          has_ids:1;      /* trace and span ids are set */
    unsigned          has_parent:1;   /* parent_id is set */
    sp_b3_sampling_t  sampling;
} sp_b3_t;

/* A `b3` header value. 0 and *out filled when valid (ids, or only a
 * sampling state: has_ids 0), -1 when invalid (out untouched). */
int sp_b3_parse_single(const char *s, size_t len, sp_b3_t *out);

/* The X-B3-* header values; NULL for a header that is absent. TraceId and
 * SpanId are required; an invalid ParentSpanId, Sampled or Flags makes the
 * whole invalid. 0 and *out filled when valid, -1 otherwise. */
int sp_b3_parse_multi(const char *trace_id, size_t trace_id_len,
    const char *span_id, size_t span_id_len,
    const char *parent_id, size_t parent_id_len,
    const char *sampled, size_t sampled_len,
    const char *flags, size_t flags_len, sp_b3_t *out);

/* Whether a parsed context is sampled (accept or debug). */
#define sp_b3_sampled(b3)                                                     \
    ((b3)->sampling == SP_B3_ACCEPT || (b3)->sampling == SP_B3_DEBUG)

/* Writes "{32 hex trace id}-{16 hex span id}-{1|0}" (SP_B3_SINGLE_LEN chars,
 * no terminator); returns SP_B3_SINGLE_LEN. */
size_t sp_b3_format_single(char *out, const uint8_t trace_id[SP_TRACE_ID_LEN],
    const uint8_t span_id[SP_SPAN_ID_LEN], int sampled);

#endif
