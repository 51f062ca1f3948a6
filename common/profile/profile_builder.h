#ifndef SP_PROFILE_BUILDER_H
#define SP_PROFILE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/profile/profile.h"
#include "common/profile/sampler.h"
#include "common/profile/symbols.h"
#include "common/profile/verdict_channel.h"

/* Aggregates raw samples of one interval by (stack, trace, span, span name)
 * and, at the end of the interval, symbolizes them into an sp_profile_t.
 * Exporter thread only. Memory is bounded: past SP_PROFILE_MAX_STACKS
 * distinct entries or SP_PROFILE_MAX_TIMESTAMPS samples, further samples
 * are counted as dropped. */

#define SP_PROFILE_MAX_STACKS      65536
#define SP_PROFILE_MAX_TIMESTAMPS  (1 << 20)

typedef struct sp_profile_builder sp_profile_builder_t;

sp_profile_builder_t *sp_profile_builder_new(void);
void sp_profile_builder_free(sp_profile_builder_t *b);

/* Adds a sample (copied); the interval starts with the first one. A
 * labelled sample marked keep_pending waits, outside the interval's
 * aggregate, for its span's verdict (keep_rules.h) unless the span was
 * decided lately. Waiting samples are bounded (SP_PROFILE_MAX_PENDING
 * samples, SP_PROFILE_MAX_PENDING_BYTES, SP_PROFILE_MAX_SPANS spans): past
 * that, a sample goes in unlabelled at once, counted as forced. */
#define SP_PROFILE_MAX_PENDING        16384
#define SP_PROFILE_MAX_PENDING_BYTES  (16u << 20)
#define SP_PROFILE_MAX_SPANS          (1u << 18)
void sp_profile_builder_add(sp_profile_builder_t *b, const sp_raw_sample_t *s);

/* Applies verdicts: the span's waiting samples go into the current
 * interval, with their labels if kept, without them if not; samples of the
 * span that come later (until the next-but-one expire) follow the verdict.
 * Take the verdicts from the channel BEFORE draining the sample ring, so
 * that every sample taken before a verdict was sent has been added. */
void sp_profile_builder_decide(sp_profile_builder_t *b, const sp_verdict_t *v,
    size_t n);

/* At the end of an interval, before the build: waiting samples taken
 * before older_than_ns (wall clock; UINT64_MAX: all) go into the interval
 * unlabelled, counted as forced; the others wait on into the next one. */
void sp_profile_builder_expire(sp_profile_builder_t *b,
    uint64_t older_than_ns);

/* Samples waiting for a verdict now. */
size_t sp_profile_builder_pending(const sp_profile_builder_t *b);

size_t sp_profile_builder_samples(const sp_profile_builder_t *b);
uint64_t sp_profile_builder_dropped(const sp_profile_builder_t *b);

/* Symbolizes what was added into p (valid until the next reset); the
 * interval is [start_ns, end_ns). 0, or -1 on allocation failure. */
int sp_profile_builder_build(sp_profile_builder_t *b, sp_symbolizer_t *sym,
    const sp_resource_t *res, uint64_t start_ns, uint64_t end_ns,
    uint64_t period_ns, sp_profile_t *p);

/* After a build: the profile of samples of another kind (sampler.h's
 * sp_sample_kind_t; the build's p is the CPU one), sharing p's tables;
 * period_ns that kind's period. */
void sp_profile_builder_kind(const sp_profile_builder_t *b, int kind,
    const sp_profile_t *p, uint64_t period_ns, sp_profile_t *out);

/* Samples of one kind added (since the last reset). */
size_t sp_profile_builder_kind_samples(const sp_profile_builder_t *b,
    int kind);

/* Forgets the samples; keeps the memory. */
void sp_profile_builder_reset(sp_profile_builder_t *b);

#endif
