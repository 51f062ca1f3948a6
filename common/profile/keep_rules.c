#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/keep_rules.h"

static sp_verdict_channel_t  channel;
static _Atomic int           started;
static _Atomic uint64_t      n_kept, n_unlabelled, n_dropped, n_forced,
                             n_pending;


/* "100ms", "2s", "1m", "500us", "250" (ms) into ns. */
static int
parse_time(const char *s, uint64_t *ns)
{
    uint64_t     v = 0, unit;
    const char  *p = s;

    if (*p < '0' || *p > '9') {
        return -1;
    }
    while (*p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) {
            return -1;
        }
        v = v * 10 + (uint64_t) (*p++ - '0');
    }
    if (*p == '\0' || strcmp(p, "ms") == 0) {
        unit = 1000000ull;
    } else if (strcmp(p, "us") == 0) {
        unit = 1000ull;
    } else if (strcmp(p, "s") == 0) {
        unit = 1000000000ull;
    } else if (strcmp(p, "m") == 0) {
        unit = 60000000000ull;
    } else {
        return -1;
    }
    /* A day at most: beyond, nothing would ever be kept by it. */
    if (v > 86400000000000ull / unit) {
        return -1;
    }
    *ns = v * unit;
    return 0;
}

int
sp_keep_rules_parse(sp_keep_rules_t *r, const char *const *argv,
    size_t argc, char *err, size_t errlen)
{
    size_t       i;
    unsigned     flag;
    uint64_t    *ns;
    const char  *a, *v;

    memset(r, 0, sizeof(*r));
    if (argc == 0) {
        snprintf(err, errlen, "needs \"all\" or conditions");
        return -1;
    }
    for (i = 0; i < argc; i++) {
        a = argv[i];
        ns = NULL;
        v = NULL;
        if (strcmp(a, "all") == 0) {
            flag = SP_KEEP_ALL;
        } else if (strcmp(a, "errors") == 0) {
            flag = SP_KEEP_ERRORS;
        } else if (strncmp(a, "slow=", 5) == 0) {
            flag = SP_KEEP_SLOW;
            ns = &r->slow_ns;
            v = a + 5;
        } else if (strncmp(a, "cpu=", 4) == 0) {
            flag = SP_KEEP_CPU;
            ns = &r->cpu_ns;
            v = a + 4;
        } else {
            snprintf(err, errlen, "unknown condition \"%s\" (all, "
                     "slow=TIME, errors, cpu=TIME)", a);
            return -1;
        }
        if (r->flags & flag) {
            snprintf(err, errlen, "\"%s\" is given twice", a);
            return -1;
        }
        if (ns != NULL && parse_time(v, ns) != 0) {
            snprintf(err, errlen, "invalid time in \"%s\" (e.g. 100ms, 2s; "
                     "at most a day)", a);
            return -1;
        }
        r->flags |= flag;
    }
    if ((r->flags & SP_KEEP_ALL) && r->flags != SP_KEEP_ALL) {
        snprintf(err, errlen, "\"all\" cannot be combined with conditions");
        return -1;
    }
    return 0;
}

void
sp_keep_rules_format(const sp_keep_rules_t *r, char *buf, size_t len)
{
    size_t  n = 0;

    buf[0] = '\0';
    if (r->flags & SP_KEEP_ALL) {
        snprintf(buf, len, "all");
        return;
    }
    if ((r->flags & SP_KEEP_SLOW) && n < len) {
        n += (size_t) snprintf(buf + n, len - n, "slow=%lluus ",
                               (unsigned long long) (r->slow_ns / 1000));
    }
    if ((r->flags & SP_KEEP_ERRORS) && n < len) {
        n += (size_t) snprintf(buf + n, len - n, "errors ");
    }
    if ((r->flags & SP_KEEP_CPU) && n < len) {
        n += (size_t) snprintf(buf + n, len - n, "cpu=%lluus ",
                               (unsigned long long) (r->cpu_ns / 1000));
    }
    if (n > 0 && n <= len) {
        buf[n - 1] = '\0';
    }
}


int
sp_keep_start(size_t capacity)
{
    if (atomic_load(&started)) {
        return 0;
    }
    if (sp_verdict_channel_init(&channel, capacity) != 0) {
        return -1;
    }
    atomic_store(&started, 1);
    return 0;
}

int
sp_keep_started(void)
{
    return atomic_load_explicit(&started, memory_order_relaxed);
}

int
sp_keep_send(const uint8_t span_id[SP_SPAN_ID_LEN], int keep)
{
    sp_verdict_t  v;

    if (atomic_load_explicit(&started, memory_order_acquire)) {
        memcpy(v.span_id, span_id, SP_SPAN_ID_LEN);
        v.keep = keep ? 1 : 0;
        if (sp_verdict_channel_push(&channel, &v) == 0) {
            return 0;
        }
    }
    atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
    return -1;
}

size_t
sp_keep_take(sp_verdict_t *out, size_t max)
{
    if (!atomic_load_explicit(&started, memory_order_acquire)) {
        return 0;
    }
    return sp_verdict_channel_take(&channel, out, max);
}

void
sp_keep_get_stats(sp_keep_stats_t *st)
{
    st->samples_kept = atomic_load(&n_kept);
    st->samples_unlabelled = atomic_load(&n_unlabelled);
    st->verdicts_dropped = atomic_load(&n_dropped);
    st->undecided_forced = atomic_load(&n_forced);
    st->samples_pending = atomic_load(&n_pending);
}

void
sp_keep_count(uint64_t kept, uint64_t unlabelled, uint64_t forced)
{
    if (kept) {
        atomic_fetch_add_explicit(&n_kept, kept, memory_order_relaxed);
    }
    if (unlabelled) {
        atomic_fetch_add_explicit(&n_unlabelled, unlabelled,
                                  memory_order_relaxed);
    }
    if (forced) {
        atomic_fetch_add_explicit(&n_forced, forced, memory_order_relaxed);
    }
}

void
sp_keep_set_pending(uint64_t samples)
{
    atomic_store_explicit(&n_pending, samples, memory_order_relaxed);
}
