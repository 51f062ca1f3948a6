#ifndef SP_PPROF_H
#define SP_PPROF_H

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/profile/profile.h"

/* A profile to a pprof perftools.profiles.Profile (the format of
 * `go tool pprof` and of Pyroscope's /ingest?format=pprof). Runs on the
 * exporter; the message tree is built in `a` (the caller resets it
 * after).
 *
 * sample_type [samples/count, cpu/nanoseconds], values [count, cpu_ns]
 * (cpu_ns is the sum of each sample's own period, true when the sampler's
 * rate changed within the interval; when 0, count * period_ns, saturated);
 * period_type cpu/nanoseconds, period = period_ns;
 * time_nanos/duration_nanos from the profile's interval. Mapping, location
 * and function ids are the profile's table indices + 1. Samples that ran in
 * a span carry the string labels "trace_id" (32 hex), "span_id" (16 hex)
 * and, when known, "span_name" (Pyroscope's span-profile convention).
 * Per-sample timestamps are not representable in pprof and are dropped.
 *
 * With gzip set the bytes are gzip-compressed, as pprof files and Pyroscope
 * expect. Appends to out; 0, or -1 on allocation/zlib failure or a profile
 * whose indices are out of range (out is then left as it was). */
int sp_pprof_encode(sp_arena_t *a, const sp_profile_t *p, int gzip,
    sp_buf_t *out);

#endif
