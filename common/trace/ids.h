#ifndef SP_IDS_H
#define SP_IDS_H

#include <stddef.h>
#include <stdint.h>

/* Trace and span ids from a per-thread xoshiro256** generator seeded from
 * getrandom(). A thread reseeds itself after fork() (pthread_atfork bumps a
 * generation counter), so worker processes never share id sequences.
 * Not for use inside a signal handler. */

#define SP_TRACE_ID_LEN  16
#define SP_SPAN_ID_LEN   8

/* Seeds the calling thread's generator now (otherwise on first use). */
void sp_ids_thread_init(void);

/* 16 random bytes, never all zero; the right-most 7 bytes are random as W3C
 * Trace Context Level 2 requires for the "random" trace-id flag. */
void sp_trace_id_generate(uint8_t id[SP_TRACE_ID_LEN]);

/* 8 random bytes, never all zero. */
void sp_span_id_generate(uint8_t id[SP_SPAN_ID_LEN]);

/* A new span id, and a new trace id too when trace_id is not NULL (a
 * request without a parent): one look at the thread's generator for both.
 * The same values as sp_trace_id_generate() then sp_span_id_generate(). */
void sp_ids_generate(uint8_t *trace_id, uint8_t span_id[SP_SPAN_ID_LEN]);

/* Lowercase hex of n bytes into dst (2n chars, no terminator). */
void sp_hex_encode(char *dst, const uint8_t *src, size_t n);

/* Decodes 2n lowercase hex chars into n bytes; -1 on any other character. */
int sp_hex_decode(uint8_t *dst, const char *src, size_t n);

/* 1 when all n bytes are zero. */
int sp_id_is_zero(const uint8_t *id, size_t n);

#endif
