#ifndef SP_KEEP_RULES_H
#define SP_KEEP_RULES_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/profile/verdict_channel.h"

/* Conditional retention (otel_profiling_keep / OtelProfilingKeep): every
 * request's CPU samples are taken as always, but a request subject to keep
 * rules has its samples' span labels kept only if, when it ends, it met
 * one of the conditions; otherwise its samples stay in the profile without
 * labels. The request's end sends the verdict (span id, kept) through a
 * process-wide bounded channel to the profile builder, which holds the
 * labelled samples of undecided spans meanwhile (profile_builder.h).
 *
 * "all" (the default) keeps every request and costs nothing: no record
 * flag, no verdict, no pending sample. */

#define SP_KEEP_ALL     0x01
#define SP_KEEP_SLOW    0x02
#define SP_KEEP_ERRORS  0x04
#define SP_KEEP_CPU     0x08

typedef struct {
    unsigned   flags;           /* SP_KEEP_* */
    uint64_t   slow_ns;         /* wall duration >= this */
    uint64_t   cpu_ns;          /* the request's sampled CPU time >= this */
} sp_keep_rules_t;

#define SP_KEEP_RULES_DEFAULT  ((sp_keep_rules_t) { .flags = SP_KEEP_ALL })

/* Parses "all" or any of "slow=TIME", "errors", "cpu=TIME" (each at most
 * once; TIME is digits with a unit us, ms, s or m, none meaning ms).
 * 0, or -1 with a message in err. */
int sp_keep_rules_parse(sp_keep_rules_t *r, const char *const *argv,
    size_t argc, char *err, size_t errlen);

/* "all" or the conditions, as configured (for logs and the API). */
void sp_keep_rules_format(const sp_keep_rules_t *r, char *buf, size_t len);

static inline int
sp_keep_rules_all(const sp_keep_rules_t *r)
{
    return (r->flags & SP_KEEP_ALL) != 0;
}

/* The verdict of an ended request: its wall duration, final status, a
 * failed upstream attempt, and its CPU time sampled while it was bound. */
static inline int
sp_keep_rules_match(const sp_keep_rules_t *r, uint64_t wall_ns, int status,
    int upstream_failed, uint64_t cpu_ns)
{
    return (r->flags & SP_KEEP_ALL)
           || ((r->flags & SP_KEEP_SLOW) && wall_ns >= r->slow_ns)
           || ((r->flags & SP_KEEP_ERRORS)
               && (status >= 500 || upstream_failed))
           || ((r->flags & SP_KEEP_CPU) && cpu_ns >= r->cpu_ns);
}

/* The end of a request for slow= (wall clock, ns). A request whose span
 * is exported reads the precise clock: the span then takes this value as
 * its end, so no read is added. Any other reads CLOCK_REALTIME_COARSE, the
 * time of the kernel's last tick, from the vDSO's data alone: it skips the
 * clocksource (a precise read costs ~250 ns on kvm-clock) and never makes
 * a system call; the duration is then short by about one tick (1 to 4 ms,
 * more when a tick comes late on a loaded VM), which a slow= threshold of
 * tens of milliseconds tolerates. */
static inline uint64_t
sp_keep_end_ns(int span_exported)
{
    struct timespec  ts;

    clock_gettime(span_exported ? CLOCK_REALTIME : CLOCK_REALTIME_COARSE,
                  &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* ---- the process's verdict channel ---------------------------------- */

#define SP_KEEP_CHANNEL_CAPACITY  16384

/* Once per process (worker, child) where some request has keep rules,
 * before requests are served. 0, or -1 (out of memory). */
int sp_keep_start(size_t capacity);
int sp_keep_started(void);

/* Request path: the verdict of a span that has pending samples. 0, or -1
 * when the channel is full or not started (counted as verdicts dropped;
 * the caller treats the request as not kept). */
int sp_keep_send(const uint8_t span_id[SP_SPAN_ID_LEN], int keep);

/* Profile builder side: up to max verdicts. */
size_t sp_keep_take(sp_verdict_t *out, size_t max);

/* ---- counters ------------------------------------------------------- */

typedef struct {
    uint64_t   samples_kept;         /* labels kept by a verdict */
    uint64_t   samples_unlabelled;   /* labels removed by a verdict */
    uint64_t   verdicts_dropped;     /* channel full */
    uint64_t   undecided_forced;     /* samples unlabelled with no verdict:
                                        too many pending, or too old */
    uint64_t   samples_pending;      /* now (a gauge) */
} sp_keep_stats_t;

void sp_keep_get_stats(sp_keep_stats_t *st);

/* For the profile builder. */
void sp_keep_count(uint64_t kept, uint64_t unlabelled, uint64_t forced);
void sp_keep_set_pending(uint64_t samples);

#endif
