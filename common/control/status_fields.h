#ifndef SP_STATUS_FIELDS_H
#define SP_STATUS_FIELDS_H

#include <stdint.h>

/* Every value one worker/child publishes about itself, in the order the
 * API prints them. One row per value: its name (the JSON key; Prometheus
 * adds "spanprof_" and, for a counter, "_total"), its kind and its help
 * line. A new counter is one row here and one assignment in
 * control_tick.c. */
#define SP_STATUS_FIELDS(X)                                                   \
    X(profiling, GAUGE,                                                       \
      "1 while this worker samples its CPU, 0 while profiling is off")        \
    X(rate_hz, GAUGE, "The sampler's current rate in Hz")                      \
    X(base_rate_hz, GAUGE, "The sampler's base rate in Hz (before shedding)") \
    X(shed_level, GAUGE,                                                      \
      "Load shedding level: the rate is the base rate >> level")              \
    X(wall_profiling, GAUGE,                                                  \
      "1 while this worker samples its wall-clock time")                      \
    X(wall_rate_hz, GAUGE, "The wall-clock sampler's current rate in Hz")     \
    X(wall_base_rate_hz, GAUGE,                                               \
      "The wall-clock sampler's base rate in Hz (before shedding)")           \
    X(wall_samples_taken, COUNTER,                                            \
      "Wall-clock samples written to the sample ring (of samples_taken)")     \
    X(idle_ns, COUNTER,                                                       \
      "Nanoseconds the worker waited for events (wall-clock profiling on)")   \
    X(wall_ticks, COUNTER,                                                    \
      "Wake-ups of the wall-clock ticker thread")                             \
    X(wall_signals_sent, COUNTER,                                             \
      "Wall-clock signals the ticker sent to active threads")                 \
    X(wall_signals_coalesced, COUNTER,                                        \
      "Ticks not sent: the thread's previous wall signal was still pending")  \
    X(memory_profiling, GAUGE,                                                \
      "1 while this worker samples its heap allocations")                     \
    X(memory_interval_bytes, GAUGE,                                           \
      "Mean bytes between two memory samples in force (shed included)")       \
    X(memory_samples, COUNTER, "Heap allocations sampled")                    \
    X(memory_samples_dropped_ring_full, COUNTER,                              \
      "Allocation samples dropped because their ring was full")               \
    X(memory_table_full, COUNTER,                                             \
      "Sampled allocations not tracked as in use: the live table was full")   \
    X(memory_stacks_full, COUNTER,                                            \
      "Sampled allocations without a stack: the stack table was full")        \
    X(memory_live, GAUGE, "Sampled allocations not yet freed")                \
    X(memory_hooked_objects, GAUGE,                                           \
      "Loaded objects whose allocator calls are hooked")                      \
    X(memory_patch_failures, COUNTER,                                         \
      "Allocator GOT slots that could not be written")                        \
    X(memory_uninstall_timeouts, COUNTER,                                     \
      "Hook removals that timed out waiting for threads (module pinned)")     \
    X(memory_pinned, GAUGE,                                                   \
      "1 when the module pinned itself in memory (could not unhook safely)")  \
    X(label_records, GAUGE,                                                   \
      "Label records made (held for the process's life; Apache)")            \
    X(label_records_failed, COUNTER,                                          \
      "Requests left unlabelled: no memory for their label record")           \
    X(exporter_process, GAUGE,                                                \
      "1 in Apache prefork's exporter process, which sends the children's "   \
      "spans and serves no request")                                          \
    X(spans_started, COUNTER,                                                 \
      "Spans begun by requests (queued or dropped because the queue was full)") \
    X(spans_exported, COUNTER, "Spans accepted by the collector or written")  \
    X(spans_dropped_queue_full, COUNTER,                                      \
      "Spans dropped because the span queue was full")                        \
    X(spans_dropped_export_failed, COUNTER,                                   \
      "Spans dropped because their export failed or was given up")            \
    X(spans_dropped_process_killed, COUNTER,                                  \
      "Spans lost with a process killed while writing one (Apache prefork)")  \
    X(spans_rejected, COUNTER,                                                \
      "Spans the collector rejected in a partial success")                    \
    X(export_requests_ok, COUNTER, "Span export requests that succeeded")     \
    X(export_requests_failed, COUNTER,                                        \
      "Span export requests given up (their spans dropped)")                  \
    X(export_requests_retried, COUNTER, "Span export requests retried")       \
    X(export_h2c_reconnects, COUNTER,                                         \
      "gRPC calls re-sent on a new h2c connection, the old one dead (libcurl < 8)") \
    X(queue_depth, GAUGE, "Spans waiting in the span queue")                  \
    X(queue_rewinds, COUNTER,                                                 \
      "Times the span queue went back to the start of its buffer early")     \
    X(clock_tsc, GAUGE,                                                       \
      "1 when timestamps are read from the CPU's time-stamp counter")         \
    X(clock_shared, GAUGE,                                                    \
      "1 when the counter's scale is shared by the server's processes")      \
    X(clock_rebases, COUNTER,                                                 \
      "Times the counter's scale was measured again against CLOCK_REALTIME")  \
    X(clock_rate_resets, COUNTER,                                             \
      "Counter rates thrown away (the clock stepped or the rate jumped)")     \
    X(samples_taken, COUNTER, "CPU samples written to the sample ring")       \
    X(samples_dropped_ring_full, COUNTER,                                     \
      "CPU samples dropped because the sample ring was full")                 \
    X(samples_unwound_partially, COUNTER,                                     \
      "CPU samples taken while the loader was changing (pc only)")            \
    X(samples_reentered, COUNTER,                                             \
      "CPU samples skipped because the handler was re-entered")               \
    X(profile_samples, COUNTER, "Samples in the profiles built")              \
    X(profile_builder_dropped, COUNTER,                                       \
      "Samples the profile builder dropped (out of room)")                    \
    X(profiles_exported, COUNTER, "Profiles sent or written")                 \
    X(profiles_failed, COUNTER, "Profiles whose export failed")               \
    X(profiles_rejected, COUNTER,                                             \
      "Profiles the collector rejected in a partial success")                 \
    X(profile_bytes_exported, COUNTER, "Bytes of the profiles exported")      \
    X(profile_bytes_failed, COUNTER, "Bytes of the profiles whose export failed") \
    X(samples_kept, COUNTER,                                                  \
      "Samples whose span labels a keep rule verdict kept")                   \
    X(samples_unlabelled_by_keep_rules, COUNTER,                              \
      "Samples whose span labels a keep rule verdict removed")                \
    X(keep_verdicts_dropped, COUNTER,                                         \
      "Keep rule verdicts dropped (channel full; the request not kept)")      \
    X(samples_undecided_forced, COUNTER,                                      \
      "Samples sent unlabelled with no verdict (too many or too old)")        \
    X(samples_pending, GAUGE,                                                 \
      "Labelled samples waiting for their request's verdict")                 \
    X(profiles_truncated, COUNTER,                                            \
      "Profile encodings over otel_profiling_max_size, stacks merged")        \
    X(samples_truncated, COUNTER,                                             \
      "Samples merged into the [truncated] frame")                            \
    X(profiles_oversized, COUNTER,                                            \
      "Profiles over the size bound even fully merged (dropped)")             \
    X(profiles_over_max_samples, COUNTER,                                     \
      "Profiles over otel_profiling_max_samples, stacks merged")              \
    X(profiles_dropped_cpu, COUNTER,                                          \
      "CPU profiles not delivered (any output: too large, failed)")           \
    X(profiles_dropped_wall, COUNTER,                                         \
      "Wall-clock profiles not delivered (any output: too large, failed)")    \
    X(profiles_dropped_memory, COUNTER,                                       \
      "Memory profiles not delivered (any output: too large, failed)")        \
    X(functions_redacted, COUNTER,                                            \
      "Function names exported as [REDACTED]")                                \
    X(shed_rate_decreases, COUNTER, "Load shedding: rate halved")             \
    X(shed_rate_increases, COUNTER, "Load shedding: rate stepped back up")    \
    X(shed_pauses, COUNTER, "Load shedding: sampling paused")                 \
    X(shed_resumes, COUNTER, "Load shedding: sampling resumed")               \
    X(shed_cpu_percent, GAUGE,                                                \
      "The worker's CPU use over the last second, as the shedder measured")   \
    X(applied_generation, GAUGE,                                              \
      "The generation of the control state this worker applied last")

#define SP_STATUS_ENUM(name, kind, help)  SP_ST_##name,
enum {
    SP_STATUS_FIELDS(SP_STATUS_ENUM)
    SP_STATUS_NFIELDS
};
#undef SP_STATUS_ENUM

typedef enum {
    SP_STATUS_GAUGE,
    SP_STATUS_COUNTER
} sp_status_kind_t;

typedef struct {
    const char        *name;
    sp_status_kind_t   kind;
    const char        *help;
} sp_status_field_t;

/* SP_STATUS_NFIELDS rows, in enum order. */
extern const sp_status_field_t  sp_status_fields[];

/* One worker's values, as published. */
typedef struct {
    int32_t    pid;
    uint64_t   updated_ns;          /* wall clock of the last publish */
    uint64_t   v[SP_STATUS_NFIELDS];
} sp_status_t;

#endif
