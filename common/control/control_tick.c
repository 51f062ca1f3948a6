#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/control/control_tick.h"
#include "common/export/exporter.h"
#include "common/profile/alloc_hooks.h"
#include "common/profile/alloc_sampler.h"
#include "common/profile/keep_rules.h"
#include "common/profile/load_shedder.h"
#include "common/profile/profile_export.h"
#include "common/profile/profile_truncate.h"
#include "common/profile/record_pool.h"
#include "common/profile/sampler.h"

#define MS  1000000ull

/* Set by attach (any thread), read by the exporter's side. */
static _Atomic(sp_control_shm_t *)  control;
static _Atomic int                  slot = -1;
/* Exporter side, and sp_control_worker_apply (any thread) */
static _Atomic uint64_t             applied_generation;
static uint64_t                     next_tick;

int
sp_control_worker_attach(sp_control_shm_t *c)
{
    int  s = sp_control_slot_claim(c, (int32_t) getpid());

    applied_generation = 0;
    next_tick = 0;
    atomic_store(&slot, s);
    atomic_store(&control, c);
    return s >= 0 ? 0 : -1;
}

void
sp_control_worker_detach(void)
{
    sp_control_shm_t  *c = atomic_exchange(&control, NULL);
    int                s = atomic_exchange(&slot, -1);

    if (c != NULL && s >= 0) {
        sp_control_slot_release(c, s);
    }
}

/* A change not yet applied: the sampler follows it (only where it runs:
 * profiling not configured here has no sampler to resume, and nothing is
 * marked applied). */
static void
apply(sp_control_shm_t *c)
{
    sp_control_state_t  st;

    sp_control_get(c, &st);
    /* A sampler not started yet (the first ticks run before it) gets the
     * state once it runs. */
    if (st.generation == applied_generation || !sp_sampler_running()) {
        return;
    }
    if (sp_sampler_rate() != st.rate_hz) {
        (void) sp_sampler_set_rate(st.rate_hz);
    }
    if (sp_sampler_paused() != !st.profiling) {
        sp_sampler_set_paused(!st.profiling);
    }
    if (sp_sampler_types() != (st.types & ~SP_SAMPLER_TYPE_MEMORY)) {
        sp_sampler_set_types(st.types & ~SP_SAMPLER_TYPE_MEMORY);
    }
    /* Memory profiling: only where the hooks were installed (configured
     * with otel_profiling_types memory); paused with every other type. */
    if (sp_alloc_hooks_installed()) {
        sp_alloc_sampler_set_enabled(st.profiling
                                     && (st.types & SP_SAMPLER_TYPE_MEMORY));
    }
    if (sp_sampler_wall_rate() != st.wall_rate_hz) {
        (void) sp_sampler_set_wall_rate(st.wall_rate_hz);
    }
    applied_generation = st.generation;
}

static void
collect(sp_exporter_t *e, sp_status_t *st)
{
    sp_exporter_stats_t  es;
    sp_clock_stats_t     cs;
    sp_sampler_stats_t   ss;
    sp_keep_stats_t      ks;
    sp_load_shedder_stats_t      ls;
    sp_profile_truncate_stats_t  ts;
    sp_profile_export_drop_stats_t  ds;
    sp_alloc_sampler_stats_t     as;
    sp_alloc_hooks_stats_t       hs;
    size_t                       made, free_now, failed;
    int                  running = sp_sampler_running();

    memset(st, 0, sizeof(*st));
    st->pid = (int32_t) getpid();
    st->updated_ns = sp_now_ns();

    sp_exporter_get_stats(e, &es);
    st->v[SP_ST_spans_started] = es.spans_queued + es.spans_dropped_queue_full;
    st->v[SP_ST_spans_exported] = es.spans_exported;
    st->v[SP_ST_spans_dropped_queue_full] = es.spans_dropped_queue_full;
    st->v[SP_ST_spans_dropped_export_failed] = es.spans_dropped_export;
    st->v[SP_ST_spans_dropped_process_killed] =
        es.spans_dropped_process_killed;
    st->v[SP_ST_exporter_process] = es.relay;
    st->v[SP_ST_spans_rejected] = es.spans_rejected;
    st->v[SP_ST_export_requests_ok] = es.batches_sent;
    st->v[SP_ST_export_requests_failed] = es.batches_failed;
    st->v[SP_ST_export_requests_retried] = es.retries;
    st->v[SP_ST_export_h2c_reconnects] = es.h2c_reconnects;
    st->v[SP_ST_queue_depth] = es.queue_depth;
    st->v[SP_ST_queue_rewinds] = es.queue_rewinds;

    sp_clock_get_stats(&cs);
    st->v[SP_ST_clock_tsc] = (uint64_t) cs.tsc;
    st->v[SP_ST_clock_shared] = (uint64_t) cs.shared;
    st->v[SP_ST_clock_rebases] = cs.rebases;
    st->v[SP_ST_clock_rate_resets] = cs.rate_resets;

    st->v[SP_ST_profile_samples] = es.profile_samples;
    st->v[SP_ST_profile_builder_dropped] = es.profile_builder_dropped;
    st->v[SP_ST_profiles_exported] = es.profiles_exported;
    st->v[SP_ST_profiles_failed] = es.profiles_failed;
    st->v[SP_ST_profiles_rejected] = es.profiles_rejected;
    st->v[SP_ST_profile_bytes_exported] = es.profile_bytes_exported;
    st->v[SP_ST_profile_bytes_failed] = es.profile_bytes_failed;
    st->v[SP_ST_functions_redacted] = es.functions_redacted;

    sp_keep_get_stats(&ks);
    st->v[SP_ST_samples_kept] = ks.samples_kept;
    st->v[SP_ST_samples_unlabelled_by_keep_rules] = ks.samples_unlabelled;
    st->v[SP_ST_keep_verdicts_dropped] = ks.verdicts_dropped;
    st->v[SP_ST_samples_undecided_forced] = ks.undecided_forced;
    st->v[SP_ST_samples_pending] = ks.samples_pending;

    sp_profile_truncate_stats(&ts);
    st->v[SP_ST_profiles_truncated] = ts.profiles_truncated;
    st->v[SP_ST_samples_truncated] = ts.samples_truncated;
    st->v[SP_ST_profiles_oversized] = ts.profiles_oversized;
    st->v[SP_ST_profiles_over_max_samples] = ts.profiles_over_max_samples;
    sp_profile_export_drop_stats(&ds);
    st->v[SP_ST_profiles_dropped_cpu] = ds.cpu;
    st->v[SP_ST_profiles_dropped_wall] = ds.wall;
    st->v[SP_ST_profiles_dropped_memory] = ds.memory;

    sp_load_shedder_get_stats(&ls);
    st->v[SP_ST_shed_rate_decreases] = ls.rate_decreases;
    st->v[SP_ST_shed_rate_increases] = ls.rate_increases;
    st->v[SP_ST_shed_pauses] = ls.pauses;
    st->v[SP_ST_shed_resumes] = ls.resumes;
    st->v[SP_ST_shed_cpu_percent] = ls.last_cpu_pct;

    if (running) {
        sp_sampler_get_stats(&ss);
        st->v[SP_ST_samples_taken] = ss.samples;
        st->v[SP_ST_samples_dropped_ring_full] = ss.dropped;
        st->v[SP_ST_samples_unwound_partially] = ss.skipped_loader;
        st->v[SP_ST_samples_reentered] = ss.reentered;
        st->v[SP_ST_profiling] = !sp_sampler_paused();
        st->v[SP_ST_rate_hz] = sp_sampler_effective_rate();
        st->v[SP_ST_base_rate_hz] = sp_sampler_rate();
        st->v[SP_ST_shed_level] = sp_sampler_shed_level();
        st->v[SP_ST_wall_profiling] = !sp_sampler_paused()
                                      && (sp_sampler_types()
                                          & SP_SAMPLER_TYPE_WALL);
        st->v[SP_ST_wall_rate_hz] = sp_sampler_wall_effective_rate();
        st->v[SP_ST_wall_base_rate_hz] = sp_sampler_wall_rate();
        st->v[SP_ST_wall_samples_taken] = ss.wall_samples;
        st->v[SP_ST_idle_ns] = ss.idle_ns;
        st->v[SP_ST_wall_ticks] = ss.wall_ticks;
        st->v[SP_ST_wall_signals_sent] = ss.wall_signals;
        st->v[SP_ST_wall_signals_coalesced] = ss.wall_coalesced;
    }
    if (sp_alloc_sampler_ready()) {
        sp_alloc_sampler_get_stats(&as);
        sp_alloc_hooks_get_stats(&hs);
        st->v[SP_ST_memory_profiling] = hs.installed
                                        && sp_alloc_sampler_enabled();
        st->v[SP_ST_memory_interval_bytes] = as.mean_bytes;
        st->v[SP_ST_memory_samples] = as.sampled;
        st->v[SP_ST_memory_samples_dropped_ring_full] = as.dropped_ring;
        st->v[SP_ST_memory_table_full] = as.table_full;
        st->v[SP_ST_memory_stacks_full] = as.stacks_full;
        st->v[SP_ST_memory_live] = as.live;
        st->v[SP_ST_memory_hooked_objects] = hs.objects;
        st->v[SP_ST_memory_patch_failures] = hs.failures;
        st->v[SP_ST_memory_uninstall_timeouts] = hs.uninstall_timeouts;
        st->v[SP_ST_memory_pinned] = hs.pinned;
    }
    sp_record_pool_stats(&made, &free_now, &failed);
    st->v[SP_ST_label_records] = made;
    st->v[SP_ST_label_records_failed] = failed;
    st->v[SP_ST_applied_generation] = applied_generation;
}

void
sp_control_worker_apply(void)
{
    sp_control_shm_t  *c = atomic_load_explicit(&control,
                                                memory_order_acquire);

    if (c != NULL) {
        apply(c);
    }
}

uint64_t
sp_control_tick(void *data, sp_exporter_t *e, uint64_t now, uint64_t next)
{
    sp_control_shm_t  *c = atomic_load_explicit(&control,
                                                memory_order_acquire);
    sp_status_t        st;
    int                s;

    if (c == NULL) {
        return next;
    }
    if (now >= next_tick) {
        apply(c);
        s = atomic_load(&slot);
        if (s >= 0) {
            collect(e, &st);
            sp_control_slot_publish(c, s, &st);
        }
        next_tick = now + SP_CONTROL_TICK_MS * MS;
    }
    return next_tick < next ? next_tick : next;
}
