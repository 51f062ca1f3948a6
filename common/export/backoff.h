#ifndef SP_BACKOFF_H
#define SP_BACKOFF_H

#include <stdint.h>

/* The exporter's retry delays, as the OTLP exporter specification asks:
 * exponential backoff with jitter, and a server's Retry-After honoured.
 *
 * Retry n (1: the first) waits base = initial_ms << (n - 1), at most
 * max_ms, drawn at random between base / 2 and base ("equal jitter"): a
 * fleet of workers that failed together does not retry together, and
 * the delays never shrink from one retry to the next. A Retry-After
 * longer than that is waited out in full. */

/* A pseudo-random state (xorshift64*), seeded per exporter. */
typedef struct {
    uint64_t  s;
} sp_backoff_rng_t;

/* Seeds from seed (never leaves the state 0). */
void sp_backoff_seed(sp_backoff_rng_t *r, uint64_t seed);

/* The delay in ms before retry number `retry` (>= 1), given the server's
 * Retry-After in ms (0: none). */
uint64_t sp_backoff_delay_ms(sp_backoff_rng_t *r, unsigned retry,
    uint64_t initial_ms, uint64_t max_ms, uint64_t retry_after_ms);

#endif
