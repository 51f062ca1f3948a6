#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/profile/alloc_sampler.h"
#include "common/profile/load_shedder.h"
#include "common/profile/sampler.h"

#define SECOND  1000000000ull

/* Set by configure (any thread, e.g. httpd's child init while the exporter
 * thread runs); the rest is the exporter side's own. */
static _Atomic unsigned        cfg_pct;
static _Atomic int             cfg_pause, cfg_reset;
static sp_load_shedder_conf_t  conf;
static uint64_t                last_wall, last_cpu;   /* 0: no baseline */
static int                     we_paused;
static _Atomic uint64_t        n_decreases, n_increases, n_pauses, n_resumes;
static _Atomic unsigned        last_pct;


/* Memory sampling follows the CPU sampler's shed level (its mean interval
 * doubles as the rate halves) and pause. Writes ", memory interval A -> B
 * KiB" into note when memory sampling is on and its interval changed. */
static void
shed_memory(char *note, size_t len)
{
    size_t  from, to;

    from = sp_alloc_sampler_effective_mean();
    sp_alloc_sampler_set_shed(sp_sampler_shed_level(), we_paused);
    to = sp_alloc_sampler_effective_mean();
    note[0] = '\0';
    if (from != to && sp_alloc_sampler_ready() && sp_alloc_sampler_enabled()) {
        snprintf(note, len, ", memory interval %zu -> %zu KiB",
                 from / 1024, to / 1024);
    }
}


int
sp_load_shedder_parse(const char *v, size_t len, sp_load_shedder_conf_t *c,
    char *err, size_t errlen)
{
    size_t    i;
    unsigned  pct = 0;

    memset(c, 0, sizeof(*c));
    if (len == 3 && strncmp(v, "off", 3) == 0) {
        return 0;
    }
    if (len < 4 || strncmp(v, "cpu=", 4) != 0) {
        snprintf(err, errlen, "\"%.*s\" is not off, cpu=PERCENT or "
                 "cpu=PERCENT,pause", (int) len, v);
        return -1;
    }
    for (i = 4; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
        if (pct <= SP_LOAD_SHEDDER_MAX_PCT) {
            pct = pct * 10 + (unsigned) (v[i] - '0');
        }
    }
    if (i == 4) {
        snprintf(err, errlen, "\"%.*s\": cpu= wants a number of percent",
                 (int) len, v);
        return -1;
    }
    if (i < len && v[i] == '%') {
        i++;
    }
    if (i < len) {
        if (len - i == 6 && strncmp(v + i, ",pause", 6) == 0) {
            c->pause = 1;
        } else {
            snprintf(err, errlen, "\"%.*s\": after cpu=PERCENT only "
                     "\",pause\" may follow", (int) len, v);
            return -1;
        }
    }
    if (pct < 1 || pct > SP_LOAD_SHEDDER_MAX_PCT) {
        snprintf(err, errlen, "\"%.*s\": the CPU threshold must be 1..%u "
                 "percent (of one CPU)", (int) len, v,
                 SP_LOAD_SHEDDER_MAX_PCT);
        return -1;
    }
    c->cpu_pct = pct;
    return 0;
}


void
sp_load_shedder_configure(const sp_load_shedder_conf_t *c)
{
    atomic_store(&cfg_pct, c->cpu_pct);
    atomic_store(&cfg_pause, c->pause);
    atomic_store(&cfg_reset, 1);
}


void
sp_load_shedder_step(const sp_logger_t *log, uint64_t wall, uint64_t cpu)
{
    unsigned  pct, level, from, to;
    uint64_t  dwall, dcpu;
    char      note[64];

    if (atomic_exchange(&cfg_reset, 0)) {
        conf.cpu_pct = atomic_load(&cfg_pct);
        conf.pause = atomic_load(&cfg_pause);
        last_wall = last_cpu = 0;
        if (we_paused) {
            sp_sampler_set_paused(0);
        }
        we_paused = 0;
        sp_sampler_set_shed_level(0);
        shed_memory(note, sizeof(note));
        atomic_store(&last_pct, 0);
    }
    if (conf.cpu_pct == 0) {
        return;
    }
    if (last_wall == 0) {
        last_wall = wall;
        last_cpu = cpu;
        return;
    }
    if (wall < last_wall + SECOND) {
        return;
    }
    dwall = wall - last_wall;
    dcpu = cpu > last_cpu ? cpu - last_cpu : 0;
    last_wall = wall;
    last_cpu = cpu;
    pct = (unsigned) (dcpu * 100 / dwall);
    atomic_store(&last_pct, pct);

    level = sp_sampler_shed_level();
    from = sp_sampler_effective_rate();

    if (pct > conf.cpu_pct) {
        if (conf.pause) {
            if (!we_paused && !sp_sampler_paused()) {
                sp_sampler_set_paused(1);
                we_paused = 1;
                shed_memory(note, sizeof(note));
                atomic_fetch_add(&n_pauses, 1);
                sp_logf(log, SP_LOG_INFO, "spanprof: CPU %u%% > %u%%: "
                        "profiling paused", pct, conf.cpu_pct);
            }
        } else if (from > 1) {
            sp_sampler_set_shed_level(level + 1);
            to = sp_sampler_effective_rate();
            shed_memory(note, sizeof(note));
            atomic_fetch_add(&n_decreases, 1);
            sp_logf(log, SP_LOG_INFO, "spanprof: CPU %u%% > %u%%: sampling "
                    "rate %u -> %u Hz%s", pct, conf.cpu_pct, from, to, note);
        }
        return;
    }

    if (we_paused) {
        we_paused = 0;
        sp_sampler_set_paused(0);
        shed_memory(note, sizeof(note));
        atomic_fetch_add(&n_resumes, 1);
        sp_logf(log, SP_LOG_INFO, "spanprof: CPU %u%% <= %u%%: profiling "
                "resumed at %u Hz", pct, conf.cpu_pct, from);
    } else if (level > 0) {
        sp_sampler_set_shed_level(level - 1);
        to = sp_sampler_effective_rate();
        shed_memory(note, sizeof(note));
        atomic_fetch_add(&n_increases, 1);
        sp_logf(log, SP_LOG_INFO, "spanprof: CPU %u%% <= %u%%: sampling "
                "rate %u -> %u Hz%s", pct, conf.cpu_pct, from, to, note);
    }
}


void
sp_load_shedder_tick(const sp_logger_t *log)
{
    struct timespec  ts;

    if (conf.cpu_pct == 0 && !atomic_load(&cfg_reset)) {
        return;     /* off: no clock read */
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    sp_load_shedder_step(log, sp_mono_ns(),
                         (uint64_t) ts.tv_sec * SECOND
                         + (uint64_t) ts.tv_nsec);
}


void
sp_load_shedder_get_stats(sp_load_shedder_stats_t *st)
{
    st->rate_decreases = atomic_load(&n_decreases);
    st->rate_increases = atomic_load(&n_increases);
    st->pauses = atomic_load(&n_pauses);
    st->resumes = atomic_load(&n_resumes);
    st->last_cpu_pct = atomic_load(&last_pct);
}
