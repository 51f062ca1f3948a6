/* sp_profile_truncate and sp_profile_encode_bounded (otel_profiling_max_size,
 * otel_profiling_max_samples) on a synthetic profile of many distinct
 * stacks: the kept entries are the most-sampled, the rest is one
 * "[truncated]" sample, the totals do not change, the tables hold only what
 * is used; the (uncompressed) pprof and OTLP encodings fit the bounds and
 * are read back with protobuf-c's decoder. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pprof/profile.pb-c.h"

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/export/otlp_profiles.h"
#include "common/export/pprof.h"
#include "common/profile/profile_truncate.h"

#define NENT   400          /* entries (stack + span) */
#define NFUNC  (NENT + 8)

static sp_profile_mapping_t   mappings[3];
static sp_profile_function_t  functions[NFUNC];
static char                   names[NFUNC][40];
static sp_profile_location_t  locations[NFUNC];
static sp_profile_sample_t    samples[NENT];
static int32_t                locs[NENT * 8];
static uint64_t               timestamps[NENT * 2];
static int64_t                ts_cpu[NENT * 2];
static sp_profile_t           prof;
static sp_resource_t          res;
static int64_t                total;

/* Entry i: count 1 + (i * 7) % 23, a stack of 2..8 frames whose leaf is a
 * function of its own (so every entry adds table rows), in span i when i
 * is even. */
static void
make_profile(void)
{
    size_t  i, j, nl = 0, nt = 0;

    mappings[0] = (sp_profile_mapping_t) { "/usr/sbin/nginx", "abcd", 0x1000,
                                           0x900000, 0 };
    mappings[1] = (sp_profile_mapping_t) { "/lib/libc.so.6", NULL, 0xa00000,
                                           0xb00000, 0 };
    mappings[2] = (sp_profile_mapping_t) { "/lib/libz.so.1", NULL, 0xc00000,
                                           0xd00000, 0 };
    for (i = 0; i < NFUNC; i++) {
        snprintf(names[i], sizeof(names[i]), "burn_function_number_%zu", i);
        functions[i].name = names[i];
        functions[i].filename = mappings[i % 3].filename;
        locations[i].address = 0x1000 + 16 * i;
        locations[i].mapping = (int32_t) (i % 3);
        locations[i].function = (int32_t) i;
    }
    total = 0;
    for (i = 0; i < NENT; i++) {
        sp_profile_sample_t  *s = &samples[i];

        memset(s, 0, sizeof(*s));
        s->count = 1 + (int64_t) ((i * 7) % 23);
        s->cpu_ns = s->count * 10000000;    /* 100 Hz */
        total += s->count;
        s->stack_off = (uint32_t) nl;
        s->stack_len = 2 + (uint32_t) (i % 7);
        locs[nl++] = (int32_t) (8 + i);         /* its own leaf */
        for (j = 1; j < s->stack_len; j++) {
            locs[nl++] = (int32_t) (j - 1);     /* shared callers */
        }
        s->ts_off = (uint32_t) nt;
        s->ts_len = s->count >= 2 ? 2 : 1;
        for (j = 0; j < s->ts_len; j++) {
            /* one period each, the overruns on the last (CPU ns) */
            ts_cpu[nt] = (j + 1 < s->ts_len ? 1 : s->count - j) * 10000000;
            timestamps[nt++] = 1700000000000000000ULL + i * 1000 + j;
        }
        if (i % 2 == 0) {
            s->has_span = 1;
            memset(s->trace_id, (int) (i & 0xff) | 1, SP_TRACE_ID_LEN);
            memset(s->span_id, (int) (i & 0xff) | 2, SP_SPAN_ID_LEN);
            s->span_name = "GET /burn/";
        }
    }
    memset(&res, 0, sizeof(res));
    res.attrs[0].key = "service.name";
    res.attrs[0].str = "truncate-test";
    res.nattrs = 1;

    memset(&prof, 0, sizeof(prof));
    prof.resource = &res;
    prof.start_ns = 1700000000000000000ULL;
    prof.end_ns = prof.start_ns + 10000000000ULL;
    prof.period_ns = 10000000;
    prof.samples = samples;
    prof.nsamples = NENT;
    prof.locs = locs;
    prof.nlocs = nl;
    prof.timestamps = timestamps;
    prof.ts_cpu_ns = ts_cpu;
    prof.ntimestamps = nt;
    prof.locations = locations;
    prof.nlocations = NFUNC;
    prof.functions = functions;
    prof.nfunctions = NFUNC;
    prof.mappings = mappings;
    prof.nmappings = 3;
}

/* ---- sp_profile_truncate -------------------------------------------------- */

static void
test_truncate(sp_arena_t *a)
{
    sp_profile_t  q;
    size_t        merged_e, i, j, keep = 50, bad = 0, kept_total = 0;
    int64_t       merged_s, min_kept = INT64_MAX, max_merged = 0, sum = 0;
    uint8_t      *used;

    ok(sp_profile_truncate(a, &prof, keep, &q, &merged_e, &merged_s) == 0,
       "truncate to 50 entries");
    is_int(q.nsamples, keep + 1, "50 kept + the [truncated] one");
    is_int(merged_e, NENT - keep, "350 entries merged");
    for (i = 0; i < q.nsamples; i++) {
        sum += q.samples[i].count;
    }
    ok(sum == total, "total count unchanged: %lld == %lld", (long long) sum,
       (long long) total);

    /* The kept are the most-sampled: none merged has more than any kept. */
    for (i = 0; i + 1 < q.nsamples; i++) {
        if (q.samples[i].count < min_kept) {
            min_kept = q.samples[i].count;
        }
        kept_total += (size_t) q.samples[i].count;
    }
    for (i = 0, j = 0; i < NENT; i++) {
        /* kept entries are in p's order: walk both */
        if (j + 1 < q.nsamples && q.samples[j].stack_len
            == samples[i].stack_len && q.samples[j].count == samples[i].count
            && q.samples[j].has_span == samples[i].has_span
            && (!samples[i].has_span
                || memcmp(q.samples[j].span_id, samples[i].span_id,
                          SP_SPAN_ID_LEN) == 0)
            && strcmp(q.functions[q.locations[q.locs[q.samples[j].stack_off]]
                                  .function].name,
                      functions[locs[samples[i].stack_off]].name) == 0)
        {
            j++;
        } else if (samples[i].count > max_merged) {
            max_merged = samples[i].count;
        }
    }
    is_int(j, keep, "the kept entries are p's, in p's order");
    ok(max_merged <= min_kept, "none merged (max %lld) has more samples than "
       "a kept one (min %lld)", (long long) max_merged, (long long) min_kept);
    ok(merged_s == total - (int64_t) kept_total, "merged samples = %lld",
       (long long) merged_s);

    /* The [truncated] sample: one frame, no mapping, no span, the rest. */
    {
        const sp_profile_sample_t    *t = &q.samples[q.nsamples - 1];
        const sp_profile_location_t  *l = &q.locations[q.locs[t->stack_off]];

        is_int(t->stack_len, 1, "[truncated]: one frame");
        is_str(q.functions[l->function].name, SP_PROFILE_TRUNCATED_FUNCTION,
               "its function is \"[truncated]\"");
        is_int(l->mapping, -1, "no mapping");
        is_int(t->has_span, 0, "no span labels");
        ok(t->count == merged_s, "its count is the merged samples");
        is_int(t->ts_len, 0, "no timestamps");
    }

    /* Tables: in range, each row used, only what the kept use (+1). */
    used = calloc(q.nfunctions + q.nlocations + q.nmappings, 1);
    for (i = 0; i < q.nsamples; i++) {
        for (j = 0; j < q.samples[i].stack_len; j++) {
            int32_t  loc = q.locs[q.samples[i].stack_off + j];

            if (loc < 0 || (size_t) loc >= q.nlocations) {
                bad++;
                continue;
            }
            used[loc] = 1;
            if (q.locations[loc].function < 0
                || (size_t) q.locations[loc].function >= q.nfunctions
                || q.locations[loc].mapping >= (int32_t) q.nmappings)
            {
                bad++;
                continue;
            }
            used[q.nlocations + q.locations[loc].function] = 1;
            if (q.locations[loc].mapping >= 0) {
                used[q.nlocations + q.nfunctions + q.locations[loc].mapping]
                    = 1;
            }
        }
        if ((size_t) q.samples[i].ts_off + q.samples[i].ts_len
            > q.ntimestamps)
        {
            bad++;
        }
    }
    for (i = 0; i < q.nfunctions + q.nlocations + q.nmappings; i++) {
        bad += !used[i];
    }
    free(used);
    is_int(bad, 0, "every index in range, every table row used");
    /* 7 shared callers at most + 50 leaves + [truncated] */
    ok(q.nfunctions <= 7 + keep + 1 && q.nfunctions >= keep + 1,
       "functions: %zu (was %d)", q.nfunctions, NFUNC);
    is_int(q.nlocations, q.nfunctions, "one location per function");
    for (i = 0, bad = 0; i + 1 < q.nsamples; i++) {
        /* each kept sample's timestamps are its own (i * 1000 + j) */
        for (j = 0; j < q.samples[i].ts_len; j++) {
            uint64_t  ts = q.timestamps[q.samples[i].ts_off + j];
            size_t    e = (size_t) ((ts - 1700000000000000000ULL) / 1000);

            bad += q.ts_cpu_ns[q.samples[i].ts_off + j]
                   != ts_cpu[samples[e].ts_off + j];
            bad += strcmp(functions[locs[samples[e].stack_off]].name,
                          q.functions[q.locations[q.locs[q.samples[i].stack_off]]
                                      .function].name) != 0;
        }
    }
    is_int(bad, 0, "the kept samples keep their own timestamps and their "
           "CPU times");
    sp_arena_reset(a);

    /* Ties: equal counts keep the earlier entry (23 samples: i = 13, 36,
     * 59, ...). */
    ok(sp_profile_truncate(a, &prof, 1, &q, &merged_e, &merged_s) == 0
       && q.nsamples == 2 && q.samples[0].count == 23
       && strcmp(q.functions[q.locations[q.locs[q.samples[0].stack_off]]
                             .function].name, "burn_function_number_21") == 0,
       "keep 1: the first of the 23-sample entries (entry 13)");
    sp_arena_reset(a);

    ok(sp_profile_truncate(a, &prof, NENT, &q, &merged_e, &merged_s) == 0
       && q.samples == prof.samples && merged_e == 0 && merged_s == 0,
       "keep >= entries: the profile itself, nothing merged");
    ok(sp_profile_truncate(a, &prof, 0, &q, &merged_e, &merged_s) == 0
       && q.nsamples == 1 && q.samples[0].count == total
       && q.nfunctions == 1 && q.nmappings == 0,
       "keep 0: only [truncated], with every sample");
    sp_arena_reset(a);

    samples[0].stack_len = 2;
    locs[samples[0].stack_off + 1] = -7;
    ok(sp_profile_truncate(a, &prof, NENT - 1, &q, &merged_e, &merged_s) == -1,
       "an index out of range in a kept entry is refused");
    locs[samples[0].stack_off + 1] = 0;
    sp_arena_reset(a);
}

/* ---- encode_bounded ------------------------------------------------------- */

static int
enc_pprof(void *ud, sp_arena_t *a, const sp_profile_t *p, sp_buf_t *out)
{
    return sp_pprof_encode_opts(a, p, ud, out);
}

static int
enc_otlp(void *ud, sp_arena_t *a, const sp_profile_t *p, sp_buf_t *out)
{
    return sp_otlp_profiles_encode(a, p, out);
}

static void
test_bounded(sp_arena_t *a, sp_arena_t *ta)
{
    sp_pprof_opts_t              o = { .gzip = 0,
                                       .span_labels = SP_PPROF_SPAN_LABELS_PYROSCOPE };
    sp_profile_truncate_stats_t  st0, st1;
    sp_profile_truncation_t      r;
    sp_buf_t                     out, plain;
    size_t                       n = 0, i, j;
    uint8_t                     *raw;
    int64_t                      sum = 0, trunc = -1;
    int                          tid = 0, tlabels = -1;

    sp_buf_init(&out);
    sp_buf_init(&plain);
    sp_profile_truncate_stats(&st0);

    /* No bound, or a bound it fits: the plain encoding, nothing merged. */
    ok(enc_pprof(&o, a, &prof, &plain) == 0, "plain pprof encoding");
    sp_arena_reset(a);
    is_int(sp_profile_encode_bounded(a, ta, &prof, 0, 0, enc_pprof, &o, &out,
                                     &r), 0, "bound 0: encodes");
    ok(out.len == plain.len && memcmp(out.data, plain.data, out.len) == 0
       && r.merged_entries == 0, "bound 0: the same bytes, nothing merged "
       "(%zu bytes)", out.len);
    is_int(sp_profile_encode_bounded(a, ta, &prof, plain.len, 0, enc_pprof, &o,
                                     &out, &r), 0, "bound = its size");
    is_int(r.merged_entries, 0, "... nothing merged");
    ok(plain.len > 2048, "the whole profile is over 2k (%zu bytes)",
       plain.len);

    /* 2k: truncated, fits, decodes, totals kept. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 2048, 0, enc_pprof, &o, &out,
                                     &r), 0, "bound 2048: encodes");
    ok(out.len > 0 && out.len <= 2048, "pprof of %zu bytes <= 2048",
       out.len);
    ok(r.merged_entries > 0 && r.merged_entries < NENT && r.samples == total
       && r.size == plain.len, "%zu of %zu entries, %lld of %lld samples "
       "merged", r.merged_entries, r.entries, (long long) r.merged_samples,
       (long long) r.samples);
    raw = out.data;
    n = out.len;
    if (raw != NULL) {
        Perftools__Profiles__Profile  *pp =
            perftools__profiles__profile__unpack(NULL, n, raw);
        uint64_t                       tfn = 0;

        ok(pp != NULL, "protobuf-c decodes perftools.profiles.Profile");
        for (i = 0; pp != NULL && i < pp->n_function; i++) {
            if (strcmp(pp->string_table[pp->function[i]->name],
                       "[truncated]") == 0)
            {
                tfn = pp->function[i]->id;
            }
        }
        ok(tfn != 0, "a function named \"[truncated]\"");
        for (i = 0; pp != NULL && i < pp->n_sample; i++) {
            Perftools__Profiles__Sample  *s = pp->sample[i];

            sum += s->value[0];
            for (j = 0; j < pp->n_location; j++) {
                if (s->n_location_id == 1
                    && pp->location[j]->id == s->location_id[0]
                    && pp->location[j]->n_line == 1
                    && pp->location[j]->line[0]->function_id == tfn)
                {
                    trunc = s->value[0];
                    tlabels = (int) s->n_label;
                }
            }
            for (j = 0; j < s->n_label; j++) {
                tid += strcmp(pp->string_table[s->label[j]->key], "trace_id")
                       == 0;
            }
        }
        is_int(tlabels, 0, "the [truncated] sample has no labels");
        is_int(tid, 0, "no trace_id label (Pyroscope's span labels)");
        ok(sum == total, "sample total %lld == the untruncated %lld",
           (long long) sum, (long long) total);
        ok(trunc == r.merged_samples, "[truncated] counts %lld == merged",
           (long long) trunc);
        ok(pp != NULL && pp->n_function < NFUNC / 2,
           "the function table shrank to %zu", pp ? pp->n_function : 0);
        perftools__profiles__profile__free_unpacked(pp, NULL);
    }

    /* OTLP at 4k. */
    sp_buf_reset(&plain);
    ok(enc_otlp(NULL, a, &prof, &plain) == 0 && plain.len > 4096,
       "OTLP plain: %zu bytes", plain.len);
    sp_arena_reset(a);
    is_int(sp_profile_encode_bounded(a, ta, &prof, 4096, 0, enc_otlp, NULL,
                                     &out, &r), 0, "OTLP bound 4096");
    ok(out.len > 0 && out.len <= 4096 && r.merged_entries > 0,
       "OTLP request of %zu bytes <= 4096, %zu entries merged", out.len,
       r.merged_entries);
    {
        Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
            *req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
                NULL, out.len, out.data);
        int  has = 0;

        sum = 0;
        ok(req != NULL && req->dictionary != NULL && req->n_resource_profiles
           == 1, "protobuf-c decodes the ExportProfilesServiceRequest");
        for (i = 0; req != NULL && i < req->dictionary->n_string_table; i++) {
            has |= strcmp(req->dictionary->string_table[i], "[truncated]")
                   == 0;
        }
        ok(has, "\"[truncated]\" in its string table");
        if (req != NULL) {
            Opentelemetry__Proto__Profiles__V1development__Profile  *pr =
                req->resource_profiles[0]->scope_profiles[0]->profiles[0];

            for (i = 0; i < pr->n_samples; i++) {
                for (j = 0; j < pr->samples[i]->n_values; j++) {
                    sum += pr->samples[i]->values[j];
                }
            }
        }
        ok(sum == total * 10000000, "OTLP CPU total %lld ns == %lld "
           "samples of 10 ms", (long long) sum, (long long) total);
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
            req, NULL);
    }

    /* Counted: two truncated encodings, their merged samples. */
    sp_profile_truncate_stats(&st1);
    ok(st1.profiles_truncated == st0.profiles_truncated + 2,
       "profiles_truncated +2 (%llu)",
       (unsigned long long) st1.profiles_truncated);
    ok(st1.samples_truncated > st0.samples_truncated,
       "samples_truncated grew to %llu",
       (unsigned long long) st1.samples_truncated);

    /* Not even [truncated] alone fits: 1, nothing, counted. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 40, 0, enc_pprof, &o, &out,
                                     &r), 1, "bound 40 bytes: does not fit");
    is_int(out.len, 0, "... out empty");
    sp_profile_truncate_stats(&st0);
    ok(st0.profiles_oversized == st1.profiles_oversized + 1,
       "profiles_oversized +1");

    sp_buf_free(&out);
    sp_buf_free(&plain);
}

/* ---- the samples cap (otel_profiling_max_samples) ------------------------- */

/* The decoded pprof's samples, their value total and the [truncated]
 * sample's count (-1: none). */
static size_t
pprof_count(const sp_buf_t *b, int64_t *sum, int64_t *trunc)
{
    Perftools__Profiles__Profile  *pp =
        perftools__profiles__profile__unpack(NULL, b->len, b->data);
    size_t                         i, n;
    uint64_t                       loc;

    *sum = 0;
    *trunc = -1;
    if (pp == NULL) {
        return 0;
    }
    for (i = 0; i < pp->n_sample; i++) {
        *sum += pp->sample[i]->value[0];
        loc = pp->sample[i]->location_id[0];
        if (pp->sample[i]->n_location_id == 1 && loc >= 1
            && loc <= pp->n_location && pp->location[loc - 1]->n_line == 1
            && strcmp(pp->string_table[pp->function[
                   pp->location[loc - 1]->line[0]->function_id - 1]->name],
                      "[truncated]") == 0)
        {
            *trunc = pp->sample[i]->value[0];
        }
    }
    n = pp->n_sample;
    perftools__profiles__profile__free_unpacked(pp, NULL);
    return n;
}

static void
test_capped(sp_arena_t *a, sp_arena_t *ta)
{
    sp_pprof_opts_t              o = { .gzip = 0,
                                       .span_labels = SP_PPROF_SPAN_LABELS_TRACE };
    sp_profile_truncate_stats_t  st0, st1;
    sp_profile_truncation_t      r;
    sp_buf_t                     out;
    int64_t                      sum, trunc;
    size_t                       n;

    sp_buf_init(&out);
    sp_profile_truncate_stats(&st0);

    /* 400 entries, at most 100 samples: 99 kept + [truncated]. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 0, 100, enc_pprof, &o,
                                     &out, &r), 0, "max_samples 100: encodes");
    n = pprof_count(&out, &sum, &trunc);
    is_int(n, 100, "100 pprof samples (99 kept + [truncated])");
    ok(r.over_samples && !r.over_size && r.merged_entries == NENT - 99,
       "over_samples, not over_size, %zu entries merged", r.merged_entries);
    ok(sum == total && trunc == r.merged_samples && trunc > 0,
       "total %lld kept, [truncated] counts the %lld merged",
       (long long) sum, (long long) trunc);
    sp_profile_truncate_stats(&st1);
    ok(st1.profiles_over_max_samples == st0.profiles_over_max_samples + 1
       && st1.profiles_truncated == st0.profiles_truncated,
       "profiles_over_max_samples +1 (profiles_truncated unchanged)");
    ok(st1.samples_truncated == st0.samples_truncated
                                + (uint64_t) r.merged_samples,
       "samples_truncated + the merged samples");

    /* Exactly as many entries as allowed: nothing merged. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 0, NENT, enc_pprof, &o,
                                     &out, &r), 0, "max_samples = entries");
    ok(pprof_count(&out, &sum, &trunc) == NENT && trunc == -1
       && r.merged_entries == 0 && !r.over_samples,
       "max_samples = entries: all %d samples, no [truncated]", NENT);

    /* Both bounds: the cap first, then the size. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 2048, 100, enc_pprof, &o,
                                     &out, &r), 0, "max_samples 100 and 2k");
    n = pprof_count(&out, &sum, &trunc);
    ok(out.len <= 2048 && n < 100 && r.over_samples && r.over_size
       && sum == total, "%zu bytes <= 2048, %zu samples < 100, total kept",
       out.len, n);
    ok(r.size > 2048, "r.size: the capped copy's first encoding (%zu bytes)",
       r.size);

    /* 1: [truncated] alone. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 0, 1, enc_pprof, &o, &out,
                                     &r), 0, "max_samples 1");
    ok(pprof_count(&out, &sum, &trunc) == 1 && trunc == total,
       "max_samples 1: only [truncated], with all %lld samples",
       (long long) total);

    /* OTLP: its Sample messages are capped the same way. */
    is_int(sp_profile_encode_bounded(a, ta, &prof, 0, 50, enc_otlp, NULL,
                                     &out, &r), 0, "OTLP max_samples 50");
    {
        Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
            *req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
                NULL, out.len, out.data);

        ok(req != NULL && req->resource_profiles[0]->scope_profiles[0]
           ->profiles[0]->n_samples == 50, "OTLP: 50 samples");
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
            req, NULL);
    }
    sp_buf_free(&out);
}

/* ---- several profiles sharing their tables (an OTLP request's types) ----- */

static int
enc_otlp_n(void *ud, sp_arena_t *a, const sp_profile_t *ps, size_t n,
    sp_buf_t *out)
{
    sp_otlp_profile_part_t  parts[2];
    size_t                  i;

    (void) ud;
    for (i = 0; i < n; i++) {
        parts[i].p = &ps[i];
        parts[i].type = i == 0 ? SP_OTLP_PROFILE_CPU : SP_OTLP_PROFILE_WALL;
    }
    return sp_otlp_profiles_encode_n(a, parts, n, out);
}

static void
test_bounded_n(sp_arena_t *a, sp_arena_t *ta)
{
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
                             *req;
    Opentelemetry__Proto__Profiles__V1development__Profile  *pr;
    sp_profile_t             two[2], q[2];
    sp_profile_truncation_t  r;
    sp_buf_t                 out;
    size_t                   keep[2] = { 10, 1000 }, me[2], i, j, nfn;
    int64_t                  ms[2], sum, off;

    /* The first 100 entries as one profile, the other 300 (with off-CPU
     * time) as another of the same tables, as sp_profile_builder_kind
     * gives. */
    for (i = 100; i < NENT; i++) {
        samples[i].off_cpu_ns = samples[i].cpu_ns / 2;
    }
    two[0] = prof;
    two[0].nsamples = 100;
    two[1] = prof;
    two[1].samples = samples + 100;
    two[1].nsamples = NENT - 100;

    ok(sp_profile_truncate_n(a, two, 2, keep, q, me, ms) == 0,
       "truncate_n: 10 of the first, all of the second");
    ok(q[0].nsamples == 11 && q[1].nsamples == NENT - 100 && me[0] == 90
       && me[1] == 0, "11 and %zu samples; 90 and 0 merged", q[1].nsamples);
    ok(q[0].locations == q[1].locations && q[0].functions == q[1].functions
       && q[0].locs == q[1].locs && q[0].timestamps == q[1].timestamps,
       "the copies share one set of tables");
    nfn = 0;
    for (i = 0; i < q[0].nfunctions; i++) {
        nfn += strcmp(q[0].functions[i].name,
                      SP_PROFILE_TRUNCATED_FUNCTION) == 0;
    }
    ok(nfn == 1, "one [truncated] function in them");
    sp_arena_reset(a);

    keep[0] = 1000;
    keep[1] = 5;
    ok(sp_profile_truncate_n(a, two, 2, keep, q, me, ms) == 0
       && q[1].nsamples == 6, "truncate_n: 5 of the second");
    off = 0;
    sum = 0;
    for (i = 0; i < q[1].nsamples; i++) {
        off += q[1].samples[i].off_cpu_ns;
    }
    for (i = 100; i < NENT; i++) {
        sum += samples[i].off_cpu_ns;
    }
    ok(off == sum, "off-CPU time kept through [truncated]: %lld == %lld",
       (long long) off, (long long) sum);
    sp_arena_reset(a);

    two[1].functions = functions + 1;
    ok(sp_profile_truncate_n(a, two, 2, keep, q, me, ms) == -1,
       "tables not shared: refused");
    two[1].functions = functions;
    sp_arena_reset(a);

    /* max_samples caps EACH profile, max_size the whole request. */
    sp_buf_init(&out);
    is_int(sp_profile_encode_bounded_n(a, ta, two, 2, 0, 40, enc_otlp_n, NULL,
                                       &out, &r), 0, "n: max_samples 40");
    req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
        NULL, out.len, out.data);
    ok(req != NULL, "the request decodes");
    for (j = 0; req != NULL && j < 2; j++) {
        pr = req->resource_profiles[0]->scope_profiles[0]->profiles[j];
        ok(pr->n_samples == 40, "Profile %zu: 40 samples (%zu)", j,
           pr->n_samples);
    }
    ok(r.over_samples == 2, "both over max_samples");
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
        req, NULL);

    is_int(sp_profile_encode_bounded_n(a, ta, two, 2, 4096, 0, enc_otlp_n,
                                       NULL, &out, &r), 0, "n: max_size 4k");
    ok(out.len <= 4096 && r.over_size, "the whole request %zu <= 4096 bytes",
       out.len);
    req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
        NULL, out.len, out.data);
    ok(req != NULL && req->resource_profiles[0]->scope_profiles[0]->n_profiles
       == 2, "both Profiles in it");
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
        req, NULL);
    for (i = 100; i < NENT; i++) {
        samples[i].off_cpu_ns = 0;
    }
    sp_buf_free(&out);
}

int
main(void)
{
    sp_arena_t  a, ta;

    make_profile();
    sp_arena_init(&a, 64 * 1024);
    sp_arena_init(&ta, 64 * 1024);
    test_truncate(&a);
    test_bounded(&a, &ta);
    test_capped(&a, &ta);
    test_bounded_n(&a, &ta);
    sp_arena_free(&a);
    sp_arena_free(&ta);
    return done_testing();
}
