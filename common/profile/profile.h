#ifndef SP_PROFILE_H
#define SP_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"
#include "common/trace/resource.h"

/* One profile of one type (CPU, wall) of one process over one interval, aggregated and
 * symbolized, ready for the encoders (pprof, OTLP profiles). Built on the
 * exporter. Tables are indexed from 0; the encoders add whatever
 * index-0 sentinels their format wants. Strings are owned by the profile
 * (or by the symbolizer, which outlives it). */

typedef struct {
    const char  *filename;      /* object path */
    const char  *build_id;      /* hex, or NULL */
    uint64_t     start, limit, offset;
} sp_profile_mapping_t;

typedef struct {
    const char  *name;
    const char  *filename;      /* object path (no source files known) */
} sp_profile_function_t;

typedef struct {
    uint64_t     address;       /* runtime pc (minus 1 for return addresses) */
    int32_t      mapping;       /* index, -1 when none */
    int32_t      function;      /* index, -1 when unknown */
} sp_profile_location_t;

typedef struct {
    uint32_t     stack_off;     /* into locs[]: leaf first */
    uint32_t     stack_len;
    int64_t      count;         /* samples (timer overruns included) */
    int64_t      cpu_ns;        /* sum of each sample's weight * period: true
                                 * CPU time across rate changes; 0 when
                                 * unknown (encoders use count * period_ns) */
    int64_t      off_cpu_ns;    /* wall profiles: of cpu_ns (then the wall
                                 * ns), the time the thread did not run */
    uint32_t     ts_off;        /* into timestamps[] */
    uint32_t     ts_len;
    uint8_t      has_span;
    uint8_t      trace_id[SP_TRACE_ID_LEN];
    uint8_t      span_id[SP_SPAN_ID_LEN];
    const char  *span_name;     /* NULL when none */
} sp_profile_sample_t;

typedef struct {
    const sp_resource_t    *resource;
    uint64_t                start_ns;   /* wall clock, interval start */
    uint64_t                end_ns;
    uint64_t                period_ns;  /* sampler's period at the end */
    /* ALLOC and INUSE (memory) profiles: count is objects, cpu_ns bytes,
     * period_ns the sampling interval in bytes.
     * sp_sample_kind_t (sampler.h): CPU, or WALL whose cpu_ns fields hold
     * wall ns; copies (profile_truncate.h) may not keep it: encoders are
     * told the type apart. */
    int                     kind;

    sp_profile_sample_t    *samples;
    size_t                  nsamples;
    int32_t                *locs;       /* location indices of all stacks */
    size_t                  nlocs;
    uint64_t               *timestamps; /* ns of each sample, by sample */
    int64_t                *ts_cpu_ns;  /* parallel to timestamps: that
                                         * signal's weight * its own period
                                         * (true CPU ns); NULL when unknown
                                         * (encoders use period_ns) */
    int64_t                *ts_off_cpu_ns; /* wall: each signal's off-CPU
                                         * ns; NULL when unknown */
    size_t                  ntimestamps;
    sp_profile_location_t  *locations;
    size_t                  nlocations;
    sp_profile_function_t  *functions;
    size_t                  nfunctions;
    sp_profile_mapping_t   *mappings;
    size_t                  nmappings;
} sp_profile_t;

#endif
