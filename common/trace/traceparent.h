#ifndef SP_TRACEPARENT_H
#define SP_TRACEPARENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"

/* W3C Trace Context `traceparent` (Level 1 and 2).
 * version "00": exactly 55 chars "00-<32 hex>-<16 hex>-<2 hex>".
 * Higher versions (01..fe): the first four fields are parsed as for 00; more
 * data is allowed only after a '-' following the flags.
 * Invalid: version ff, uppercase or non-hex characters, wrong field lengths,
 * all-zero trace-id or parent-id, bad separators, any other length.
 * Spaces and tabs before and after the value (HTTP's OWS) are ignored. */

#define SP_TRACEPARENT_LEN     55
#define SP_TRACE_FLAG_SAMPLED  0x01
#define SP_TRACE_FLAG_RANDOM   0x02

typedef struct {
    uint8_t  version;
    uint8_t  flags;
    uint8_t  trace_id[SP_TRACE_ID_LEN];
    uint8_t  parent_id[SP_SPAN_ID_LEN];
} sp_traceparent_t;

/* 0 and *out filled when valid, -1 when invalid (out untouched). */
int sp_traceparent_parse(const char *s, size_t len, sp_traceparent_t *out);

/* Writes a version-00 header value (SP_TRACEPARENT_LEN chars, no terminator);
 * returns SP_TRACEPARENT_LEN. */
size_t sp_traceparent_format(char *out, const uint8_t trace_id[SP_TRACE_ID_LEN],
    const uint8_t span_id[SP_SPAN_ID_LEN], uint8_t flags);

#endif
