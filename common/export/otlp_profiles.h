#ifndef SP_OTLP_PROFILES_H
#define SP_OTLP_PROFILES_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/profile/profile.h"

/* A profile to an OTLP ExportProfilesServiceRequest (opentelemetry-proto
 * v1.11.0, profiles/v1development), protobuf binary, for
 * POST /v1development/profiles. Runs on the exporter; the message
 * tree is built in `a` (the caller resets it after).
 *
 * The request holds the ProfilesDictionary (every table with its index-0
 * zero entry; mapping/location/function i of the profile is table entry
 * i + 1; each distinct stack once; links and attributes deduplicated), one
 * ResourceProfiles with p->resource, one ScopeProfiles with scope spanprof
 * and one Profile: sample_type cpu/nanoseconds, period_type
 * cpu/nanoseconds (period: the sampler's at the end of the interval), a
 * fresh random profile_id. A sample that ran in a span gets a Link
 * {trace_id, span_id} and, when known, the attribute "span.name"; a mapping
 * with a build id gets "process.executable.build_id.gnu".
 *
 * Sample values are CPU nanoseconds, one per timestamp (the spec requires
 * values and timestamps_unix_nano to have the same length when both are
 * set): each signal's weight (1 + timer overruns) times the period it was
 * taken at (p->ts_cpu_ns), so a sample's values add up to its true CPU time
 * even when the rate changed within the interval (load shedding, the
 * control API). Without ts_cpu_ns each timestamp gets one period_ns and the
 * last the rest of cpu_ns (or count * period_ns). A sample without
 * timestamps (or with more timestamps than its count, e.g. "[truncated]")
 * gets one value, its cpu_ns, and no timestamps.
 *
 * Appends to out; 0, or -1 on allocation failure or a profile whose indices
 * are out of range (out is then left as it was). */
int sp_otlp_profiles_encode(sp_arena_t *a, const sp_profile_t *p,
    sp_buf_t *out);

/* Several profiles in one request, one Profile each in the ScopeProfiles,
 * sharing the dictionary (parts built together share their tables): CPU
 * (sample_type cpu/nanoseconds), WALL (wall/nanoseconds, period_type
 * wall/nanoseconds: the values of a wall profile's samples) and OFF_CPU
 * (off_cpu/nanoseconds: the same wall profile's off-CPU values, per
 * timestamp from ts_off_cpu_ns, only its samples with off-CPU time). */
typedef enum {
    SP_OTLP_PROFILE_CPU = 0,
    SP_OTLP_PROFILE_WALL,
    SP_OTLP_PROFILE_OFF_CPU,
    /* Memory (sampler.h's SP_SAMPLE_ALLOC / SP_SAMPLE_INUSE profiles: a
     * sample's count is objects, its cpu_ns bytes), one value per sample,
     * no timestamps; period_type space/bytes, period the sampling
     * interval: alloc_objects/count, alloc_space/bytes of an ALLOC
     * profile, inuse_objects/count, inuse_space/bytes of an INUSE one. */
    SP_OTLP_PROFILE_ALLOC_OBJECTS,
    SP_OTLP_PROFILE_ALLOC_SPACE,
    SP_OTLP_PROFILE_INUSE_OBJECTS,
    SP_OTLP_PROFILE_INUSE_SPACE
} sp_otlp_profile_type_t;

typedef struct {
    const sp_profile_t  *p;
    int                  type;     /* sp_otlp_profile_type_t */
} sp_otlp_profile_part_t;

int sp_otlp_profiles_encode_n(sp_arena_t *a,
    const sp_otlp_profile_part_t *parts, size_t n, sp_buf_t *out);

/* Reads the collector's answer, an ExportProfilesServiceResponse
 * (protobuf, as http/protobuf and gRPC carry it): the rejected_profiles of
 * a partial success (0 without one; as sent, even negative) and its
 * error_message into msg (NUL-terminated, cut to msglen - 1 bytes). -1
 * (rejected 0, msg empty) when the body does not decode. */
int sp_otlp_profiles_parse_response(const uint8_t *body, size_t len,
    int64_t *rejected, char *msg, size_t msglen);

#endif
