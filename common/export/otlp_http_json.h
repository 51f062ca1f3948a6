#ifndef SP_OTLP_HTTP_JSON_H
#define SP_OTLP_HTTP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/profile/profile.h"
#include "common/trace/resource.h"
#include "common/trace/span_queue.h"

/* OTLP/HTTP with the JSON encoding (protocol http/json): the request
 * bodies POSTed to {base}/v1/traces and {base}/v1development/profiles,
 * and the collector's answers. The encoding is otlp_json.h's (hex trace,
 * span and profile ids, enums as integers, lowerCamelCase names, 64-bit
 * integers as strings); the messages are those of http/protobuf, built by
 * the same encoders, decoded by protobuf-c into the arena and written as
 * JSON, so the two protocols carry the same data. Runs on the exporter. */

#define SP_OTLP_HTTP_JSON_CONTENT_TYPE  "application/json"

/* Queued spans (as sp_otlp_traces_encode takes them) to an
 * ExportTraceServiceRequest in JSON: one object, no newline, appended to
 * out. The message tree lives in `a` (the caller resets it after the
 * batch); memory is bounded by the batch. 0, or -1 on allocation failure
 * (out may then hold part of the object). */
int sp_otlp_http_json_traces(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out);

/* A profile to an ExportProfilesServiceRequest in JSON, appended to out
 * (the request otlp_profiles.h describes). 0, or -1 on allocation failure
 * or a profile sp_otlp_profiles_encode refuses (out is then left as it
 * was). */
#include "common/export/otlp_profiles.h"
/* The same for several profiles (sp_otlp_profiles_encode_n). */
int sp_otlp_http_json_profiles_n(sp_arena_t *a,
    const sp_otlp_profile_part_t *parts, size_t n, sp_buf_t *out);
int sp_otlp_http_json_profiles(sp_arena_t *a, const sp_profile_t *p,
    sp_buf_t *out);

/* Reads a JSON Export{Trace,Profiles}ServiceResponse: the count of its
 * partialSuccess member `rejected_field` ("rejectedSpans" or
 * "rejectedProfiles"; the proto names "partial_success", "rejected_spans"
 * ... are read too, as the protobuf JSON mapping asks) as a JSON number or
 * a decimal string, and errorMessage into msg (NUL-terminated, cut to
 * msglen - 1 bytes). Unknown members are ignored; null is the default.
 * A negative count reads as 0. -1 (rejected 0, msg empty) when the body is
 * not JSON, not an object, or a known member has the wrong type. */
int sp_otlp_http_json_parse_response(const uint8_t *body, size_t len,
    const char *rejected_field, int64_t *rejected, char *msg, size_t msglen);

#endif
