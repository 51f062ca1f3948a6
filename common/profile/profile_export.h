#ifndef SP_PROFILE_EXPORT_H
#define SP_PROFILE_EXPORT_H

#include <stdint.h>

#include "common/export/file_output.h"
#include "common/export/http_client.h"
#include "common/base/log.h"
#include "common/trace/resource.h"
#include "common/profile/symbol_files.h"

/* The profile half of the exporter: drains the sampler's ring into a
 * profile builder, and at each interval symbolizes, encodes and sends the
 * profiles of each type that has samples (CPU, wall with off-CPU, memory
 * allocations, memory in use): OTLP profiles over HTTP (one request, a
 * Profile per type), pprof files (a file per type), pprof to Pyroscope (an
 * ingest per type, one after the other on one connection: Pyroscope names
 * them from their sample types, process_cpu, wall and memory). The sends
 * run on the exporter's HTTP loop; nothing here blocks on the network.
 * Each output's encoding is bounded by max_size bytes before any
 * compression (an OTLP request as a whole) and each profile in it by
 * max_samples samples (the least-sampled stacks merged into "[truncated]",
 * logged at info, counted in profile_truncate.h's stats); pprof files
 * carry trace_id, span_id and span_name, Pyroscope's pprof span_id and
 * span_name only, its series labels named in the ingest URL
 * (pyroscope_ingest.h). Exporter side only (its thread or the server's
 * event loop). */

typedef struct sp_profile_export sp_profile_export_t;

typedef struct {
    sp_http_loop_t       *loop;
    const char           *otlp_url;     /* {base}/v1development/profiles */
    const sp_http_client_conf_t *otlp_http; /* the collector's settings */
    int                   otlp_json;    /* http/json (otlp_http_json.h) */
    const sp_file_output_t *file;       /* file endpoint: cpu-*.pb.gz */
    const sp_symbol_files_t *symbol_files; /* NULL: by path */
    const char           *pyroscope_url;
    const sp_resource_t  *resource;
    uint64_t              interval_ms;
    /* Bytes of one encoded profile, each output's, uncompressed
     * (profile_truncate.h); 0: SP_PROFILE_MAX_SIZE_DEFAULT. */
    size_t                max_size;
    /* Samples of one profile; 0: SP_PROFILE_MAX_SAMPLES_DEFAULT. */
    size_t                max_samples;
    const sp_logger_t    *log;
    /* otel_profiling_redact patterns (symbol_redact.h), NULL-ended and
     * copied; NULL: off */
    const char *const    *redact;
} sp_profile_export_conf_t;

sp_profile_export_t *sp_profile_export_new(const sp_profile_export_conf_t *c);
void sp_profile_export_free(sp_profile_export_t *pe);

/* Moves what the signal handler recorded into the current profile. */
void sp_profile_export_drain(sp_profile_export_t *pe);

/* Monotonic ns at which the current profile is due. */
uint64_t sp_profile_export_due(const sp_profile_export_t *pe);

/* Exports the current profile (if it has samples) and starts the next:
 * writes the file, starts the posts (each bounded by timeout_ms). Returns
 * 0; or 1 when a post of the last profile is still under way: then this
 * one keeps its samples, goes on growing, and is due again in
 * SP_PROFILE_EXPORT_RETRY_MS (nothing is dropped for a slow collector). */
#define SP_PROFILE_EXPORT_RETRY_MS  50
/* Samples waiting this long for their request's keep verdict go out
 * unlabelled (keep_rules.h). */
#define SP_PROFILE_EXPORT_PENDING_MAX_MS  60000
int sp_profile_export_flush(sp_profile_export_t *pe, uint64_t timeout_ms);

/* A post is still under way. */
int sp_profile_export_busy(const sp_profile_export_t *pe);

void sp_profile_export_stats(const sp_profile_export_t *pe,
    uint64_t *exported, uint64_t *failed, uint64_t *samples);
/* Samples the builder dropped (every profile so far), and the encoded
 * bytes of the profiles exported and of those that failed. */
void sp_profile_export_more_stats(const sp_profile_export_t *pe,
    uint64_t *builder_dropped, uint64_t *bytes_exported,
    uint64_t *bytes_failed);

/* OTLP profiles the collector rejected in a partial success (its
 * rejected_profiles, rejectedProfiles in JSON; each logged with the
 * collector's message). They are not in `exported`; their bytes are in
 * bytes_exported (delivered). */
uint64_t sp_profile_export_rejected(const sp_profile_export_t *pe);

/* This process's profiles not delivered, by type (memory: allocations and
 * in use), whatever the output: over max_size even fully merged, not
 * encodable, their file not written, their post failed or not started (a
 * failed OTLP request counts for each type in it). Any thread; relaxed. */
typedef struct {
    uint64_t  cpu, wall, memory;
} sp_profile_export_drop_stats_t;

void sp_profile_export_drop_stats(sp_profile_export_drop_stats_t *st);

/* Function entries exported as [REDACTED] so far (symbol_redact.h). */
uint64_t sp_profile_export_functions_redacted(const sp_profile_export_t *pe);

#endif
