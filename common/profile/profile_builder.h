#ifndef SP_PROFILE_BUILDER_H
#define SP_PROFILE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/profile/profile.h"
#include "common/profile/sampler.h"
#include "common/profile/symbols.h"

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

/* Adds a sample (copied); the interval starts with the first one. */
void sp_profile_builder_add(sp_profile_builder_t *b, const sp_raw_sample_t *s);

size_t sp_profile_builder_samples(const sp_profile_builder_t *b);
uint64_t sp_profile_builder_dropped(const sp_profile_builder_t *b);

/* Symbolizes what was added into p (valid until the next reset); the
 * interval is [start_ns, end_ns). 0, or -1 on allocation failure. */
int sp_profile_builder_build(sp_profile_builder_t *b, sp_symbolizer_t *sym,
    const sp_resource_t *res, uint64_t start_ns, uint64_t end_ns,
    uint64_t period_ns, sp_profile_t *p);

/* Forgets the samples; keeps the memory. */
void sp_profile_builder_reset(sp_profile_builder_t *b);

#endif
