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
 * and, when known, "span_name" (Pyroscope's span-profile convention);
 * for Pyroscope only "span_id" and "span_name" (see sp_pprof_opts_t).
 * Per-sample timestamps are not representable in pprof and are dropped.
 *
 * With gzip set the bytes are gzip-compressed, as pprof files and Pyroscope
 * expect. Appends to out; 0, or -1 on allocation/zlib failure or a profile
 * whose indices are out of range (out is then left as it was). */
int sp_pprof_encode(sp_arena_t *a, const sp_profile_t *p, int gzip,
    sp_buf_t *out);

/* The span labels of the samples that ran in a span. */
typedef enum {
    /* trace_id, span_id, span_name: pprof files, the CLI */
    SP_PPROF_SPAN_LABELS_TRACE = 0,
    /* span_id and span_name only, as the Pyroscope OTel integrations send:
     * Pyroscope makes every sample label but span_id a series label, so a
     * trace_id would make one series per trace. */
    SP_PPROF_SPAN_LABELS_PYROSCOPE,
} sp_pprof_span_labels_t;

typedef struct {
    int                     gzip;
    sp_pprof_span_labels_t  span_labels;
    /* sp_sample_kind_t of p's samples. SP_SAMPLE_WALL: sample_type
     * [samples/count, wall/nanoseconds, off_cpu/nanoseconds], values
     * [count, wall ns, off-CPU ns], period_type wall/nanoseconds.
     * SP_SAMPLE_ALLOC / SP_SAMPLE_INUSE, as Go's heap profiles:
     * [alloc_objects/count, alloc_space/bytes] or [inuse_objects/count,
     * inuse_space/bytes], period_type space/bytes, period the sampling
     * interval (p's period_ns). */
    int                     kind;
} sp_pprof_opts_t;

/* sp_pprof_encode with options (sp_pprof_encode is gzip, LABELS_TRACE). */
int sp_pprof_encode_opts(sp_arena_t *a, const sp_profile_t *p,
    const sp_pprof_opts_t *o, sp_buf_t *out);

#endif
