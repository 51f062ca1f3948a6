#ifndef SP_LOAD_SHEDDER_H
#define SP_LOAD_SHEDDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/log.h"

/* Resource-aware sampling: once a second, on the exporter side, the
 * process's CPU use over the last second (CLOCK_PROCESS_CPUTIME_ID delta /
 * wall delta, in percent of one CPU: a threaded child may pass 100) is
 * compared with a threshold. Above it, the sampler's shed level goes up by
 * one (its rate halves), down to 1 Hz; with `pause`, the sampler pauses
 * instead. At or below it, one step back per second (a pause is resumed at
 * once) until the configured rate is in force again. Every change is
 * counted and logged in one info line. One shedder per process (like the
 * sampler); sp_sampler_* does the re-arming. */

typedef struct {
    unsigned  cpu_pct;      /* 0: off */
    int       pause;        /* pause instead of lowering the rate */
} sp_load_shedder_conf_t;

#define SP_LOAD_SHEDDER_MAX_PCT  6400   /* 64 CPUs busy */

typedef struct {
    uint64_t  rate_decreases;   /* spanprof_shed_rate_decreases_total */
    uint64_t  rate_increases;   /* spanprof_shed_rate_increases_total */
    uint64_t  pauses;           /* spanprof_shed_pauses_total */
    uint64_t  resumes;          /* spanprof_shed_resumes_total */
    unsigned  last_cpu_pct;     /* the last second's measure */
} sp_load_shedder_stats_t;

/* The directive's value: "off", "cpu=PERCENT" or "cpu=PERCENT,pause"
 * (PERCENT 1..SP_LOAD_SHEDDER_MAX_PCT, a trailing '%' allowed). 0, or -1
 * with the reason in err. */
int sp_load_shedder_parse(const char *value, size_t len,
    sp_load_shedder_conf_t *c, char *err, size_t errlen);

/* In the process that samples, any thread: sets the threshold; the next
 * tick starts over (shed level 0, a pause of its own undone, counters
 * kept). */
void sp_load_shedder_configure(const sp_load_shedder_conf_t *c);

/* Exporter side, as often as it likes: measures and acts once a second. */
void sp_load_shedder_tick(const sp_logger_t *log);

/* The decision on one measure: wall and process CPU ns since a fixed
 * origin (tick passes CLOCK_MONOTONIC and CLOCK_PROCESS_CPUTIME_ID). */
void sp_load_shedder_step(const sp_logger_t *log, uint64_t wall_ns,
    uint64_t cpu_ns);

void sp_load_shedder_get_stats(sp_load_shedder_stats_t *st);

#endif
