#ifndef SP_PROFILE_TRUNCATE_H
#define SP_PROFILE_TRUNCATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/profile/profile.h"

/* The bounds of one encoded profile: its size (otel_profiling_max_size) and
 * its number of samples, i.e. entries (otel_profiling_max_samples). When an
 * output's encoding of a profile has more entries or more bytes than
 * allowed, the profile's least-sampled entries (a stack with its span
 * labels) are merged into one sample whose stack is the single frame
 * "[truncated]" (no mapping, no span labels: all together, since the label
 * sets are what makes a profile big), and the copy is encoded again; the
 * sample counts stay what they were. Exporter side only.
 *
 * The size is that of the UNCOMPRESSED encoding: receivers check that one
 * (Grafana Pyroscope's validation.max-profile-size-bytes, 4 MiB by default,
 * is the decompressed size; over it the profile is refused with 422), so
 * an encoder given to sp_profile_encode_bounded must not compress; the
 * caller compresses what fits. */

#define SP_PROFILE_TRUNCATED_FUNCTION  "[truncated]"
/* A default Pyroscope takes 4 MiB (4194304 bytes) decompressed; 96 KiB
 * less leaves room for what a receiver adds converting an OTLP profile. */
#define SP_PROFILE_MAX_SIZE_DEFAULT    (4000 * 1024)
/* Below this no useful profile fits (an empty pprof is ~60 bytes, an OTLP
 * request with its resource some hundreds). */
#define SP_PROFILE_MAX_SIZE_MIN        1024
/* Samples (pprof Sample / OTLP Sample messages, [truncated] included) of
 * one profile: Pyroscope's validation.max-profile-stacktrace-samples
 * default, over which it refuses the profile. */
#define SP_PROFILE_MAX_SAMPLES_DEFAULT 16000
#define SP_PROFILE_MAX_SAMPLES_MAX     100000000

/* A copy of p in out (allocated in a; p's strings are shared) with the
 * `keep` most-sampled entries of p (ties: the earlier first), in p's order,
 * then, when any is left, one "[truncated]" sample counting all the others
 * (their count, cpu_ns and off_cpu_ns summed); the tables hold only what
 * the copy uses. *merged: the entries and samples merged (both 0 when
 * keep >= p->nsamples: out is then p itself). 0, or -1 on allocation
 * failure or indices out of range. */
int sp_profile_truncate(sp_arena_t *a, const sp_profile_t *p, size_t keep,
    sp_profile_t *out, size_t *merged_entries, int64_t *merged_samples);

/* The same for n profiles that share their tables (the kinds of one build,
 * profile_builder.h's sp_profile_builder_kind): out[i] keeps keep[i]
 * entries of ps[i] (keep[i] >= ps[i].nsamples: all of them and no
 * [truncated]), and the copies share one set of tables again (only what
 * their kept entries use, one [truncated] frame), so that an encoder given
 * them together writes each table entry once. When no profile loses an
 * entry, out[i] = ps[i]. merged_entries[i] / merged_samples[i]: ps[i]'s.
 * -1 also when the tables are not shared. */
int sp_profile_truncate_n(sp_arena_t *a, const sp_profile_t *ps, size_t n,
    const size_t *keep, sp_profile_t *out, size_t *merged_entries,
    int64_t *merged_samples);

/* An encoder: appends p's encoding to out (building in a); 0 or -1. */
typedef int (*sp_profile_encoder_t)(void *ud, sp_arena_t *a,
    const sp_profile_t *p, sp_buf_t *out);

/* An encoder of n profiles in one message (an OTLP request holds a
 * Profile per type). */
typedef int (*sp_profile_encoder_n_t)(void *ud, sp_arena_t *a,
    const sp_profile_t *ps, size_t n, sp_buf_t *out);

typedef struct {
    size_t   entries, merged_entries;   /* of the profile(s); merged */
    int64_t  samples, merged_samples;
    size_t   size;                      /* bytes of the first encoding (of
                                         * the capped copies when
                                         * over_samples) */
    int      over_samples;              /* profiles with more entries than
                                         * max_samples */
    int      over_size;                 /* an encoding > max_size */
} sp_profile_truncation_t;

/* Encodes p with enc into out (which it resets). When p has more than
 * max_samples entries (0: no bound), the encoding is of a copy keeping the
 * max_samples - 1 most-sampled entries plus [truncated]; when the encoding
 * is larger than max_size bytes (0: no bound), truncated copies (made in
 * ta, reset first) keeping fewer entries are encoded until one fits; a
 * resets after each encoding. 0: out holds an encoding of at most
 * max_size bytes and max_samples samples, r says what was merged
 * (merged_entries 0: p as it was); 1: even everything merged is larger
 * (out empty); -1: the encoder or an allocation failed. Counts into the
 * process's stats. */
int sp_profile_encode_bounded(sp_arena_t *a, sp_arena_t *ta,
    const sp_profile_t *p, size_t max_size, size_t max_samples,
    sp_profile_encoder_t enc, void *ud, sp_buf_t *out,
    sp_profile_truncation_t *r);

/* The same for n (at most SP_PROFILE_BOUNDED_MAX) profiles sharing their
 * tables, encoded together: EACH profile is capped to max_samples
 * samples, and the whole encoding to max_size bytes, every profile's
 * entries cut in the same proportion (sp_profile_truncate_n) until it
 * fits; r sums over the profiles. */
#define SP_PROFILE_BOUNDED_MAX  8
int sp_profile_encode_bounded_n(sp_arena_t *a, sp_arena_t *ta,
    const sp_profile_t *ps, size_t n, size_t max_size, size_t max_samples,
    sp_profile_encoder_n_t enc, void *ud, sp_buf_t *out,
    sp_profile_truncation_t *r);

/* This process's counts (any thread; relaxed). */
typedef struct {
    uint64_t  profiles_truncated;   /* encodings over max_size, merged */
    uint64_t  samples_truncated;    /* samples merged into [truncated] */
    uint64_t  profiles_oversized;   /* not even all merged fitted: dropped */
    uint64_t  profiles_over_max_samples; /* profiles over max_samples */
} sp_profile_truncate_stats_t;

void sp_profile_truncate_stats(sp_profile_truncate_stats_t *st);

#endif
