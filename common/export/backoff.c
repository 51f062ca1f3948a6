#include "common/export/backoff.h"

void
sp_backoff_seed(sp_backoff_rng_t *r, uint64_t seed)
{
    /* splitmix64 of the seed: close seeds (pids) give unrelated states. */
    seed += 0x9e3779b97f4a7c15ull;
    seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
    seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
    seed ^= seed >> 31;
    r->s = seed != 0 ? seed : 0x2545f4914f6cdd1dull;
}

static uint64_t
next(sp_backoff_rng_t *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

uint64_t
sp_backoff_delay_ms(sp_backoff_rng_t *r, unsigned retry, uint64_t initial_ms,
    uint64_t max_ms, uint64_t retry_after_ms)
{
    uint64_t  base = initial_ms, d;

    while (retry > 1 && base < max_ms) {
        base <<= 1;
        retry--;
    }
    if (base > max_ms) {
        base = max_ms;
    }
    d = base - base / 2;                    /* the random half */
    d = base / 2 + (d > 0 ? next(r) % (d + 1) : 0);
    return retry_after_ms > d ? retry_after_ms : d;
}
