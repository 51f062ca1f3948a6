#ifndef SP_SYMBOL_REDACT_H
#define SP_SYMBOL_REDACT_H

#include <stddef.h>
#include <stdint.h>

#include "common/profile/profile.h"

/* otel_profiling_redact / OtelProfilingRedact: function names that contain
 * any of the configured patterns (case-insensitive substring, ASCII) are
 * exported as "[REDACTED]" in every profile format (OTLP profiles, pprof
 * files, Pyroscope), since all are encoded from one sp_profile_t. Exporter
 * side only, after symbolization and before encoding: the check runs once
 * per distinct function of a profile (the builder's function table is the
 * cache), never per sample or per location. Only function names are
 * touched: mapping file names, build ids and addresses stay. */

#define SP_SYMBOL_REDACTED  "[REDACTED]"

typedef struct sp_symbol_redact sp_symbol_redact_t;

typedef struct {
    uint64_t  functions_redacted;  /* function entries exported as
                                      [REDACTED], summed over profiles */
} sp_symbol_redact_stats_t;

/* patterns: NULL-ended list (copied); empty strings are ignored. NULL
 * (and *err set to NULL) when there is no pattern: redaction is off and
 * costs nothing. NULL with *err "out of memory" on failure. */
sp_symbol_redact_t *sp_symbol_redact_new(const char *const *patterns,
    const char **err);
void sp_symbol_redact_free(sp_symbol_redact_t *r);

/* name contains a pattern. r NULL or name NULL: 0. */
int sp_symbol_redact_match(const sp_symbol_redact_t *r, const char *name);

/* Renames p's matching functions to SP_SYMBOL_REDACTED (a static string);
 * returns how many, also counted in the stats. r NULL: nothing. */
size_t sp_symbol_redact_profile(sp_symbol_redact_t *r, sp_profile_t *p);

/* Zeros with r NULL. Exporter side. */
void sp_symbol_redact_get_stats(const sp_symbol_redact_t *r,
    sp_symbol_redact_stats_t *st);

#endif
