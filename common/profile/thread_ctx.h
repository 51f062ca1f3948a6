#ifndef SP_THREAD_CTX_H
#define SP_THREAD_CTX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/trace/ids.h"

/* The labels of the code a thread runs now, as an OTEP 4947 thread context
 * record: the TLS pointer otel_thread_ctx_v1 (exported, TLSDESC dialect) is
 * the record of the request being served, or NULL between requests. Our
 * SIGPROF handler reads it, and so can an external OTel eBPF profiler.
 *
 * The attribute keys are published in the process context (OTEP 4719,
 * see process_context.h): index 0 is "span.name".
 *
 * Binding a request to a thread is one pointer store: the server glue keeps
 * one record per request (valid for the request's lifetime) and attaches it
 * while the thread runs code for that request, detaching it before control
 * goes back to the event loop or the thread's listener. Only compiler
 * (signal) fences are needed: the reader is a signal handler on the same
 * thread, or a profiler that stops the thread. */

#define SP_THREAD_CTX_ATTRS_MAX   80

/* attrs_data holds [key index][length][UTF-8 value] entries; key indices
 * name the keys the process context publishes (0 = "span.name"). */
#define SP_THREAD_CTX_ATTR_SPAN_NAME  0
#define SP_THREAD_CTX_ATTR_KEYS       { "span.name" }
#define SP_THREAD_CTX_SCHEMA          "tlsdesc_v1_dev"

typedef struct {
    uint8_t   trace_id[SP_TRACE_ID_LEN];   /* big-endian W3C bytes */
    uint8_t   span_id[SP_SPAN_ID_LEN];
    uint8_t   valid;
    uint8_t   trace_flags;                 /* W3C trace-flags byte */
    uint16_t  attrs_data_size;
    uint8_t   attrs_data[SP_THREAD_CTX_ATTRS_MAX];

    /* spanprof's own, after the OTEP 4947 layout (whose readers stop at
     * attrs_data_size); sp_thread_ctx_record_init() leaves them alone,
     * the server glue zeroes them when it makes the record:
     * sp_cpu_ns   CPU time of the samples taken while the record was
     *             attached (added by the SIGPROF handler: the request's
     *             own CPU time, with no clock read on the request path);
     * sp_keep     the samples wait for the request's keep verdict
     *             (keep_rules.h), copied into each sample;
     * sp_wall_ns, sp_off_cpu_ns  the same for the wall samples: the
     *             request's sampled busy wall time and the part of it its
     *             thread did not run (blocked, or waiting for a CPU). */
    uint64_t  sp_cpu_ns;
    uint8_t   sp_keep;
    uint64_t  sp_wall_ns;
    uint64_t  sp_off_cpu_ns;
} sp_thread_ctx_record_t;

extern __thread sp_thread_ctx_record_t *otel_thread_ctx_v1;

/* Fills a record; the span name is truncated to fit. The record is
 * marked invalid while it is written (signal fences around): a record
 * attached to the calling thread may be refilled, its SIGPROF handler or
 * a profiler that stops the thread then reads it invalid or whole, never
 * half-written. One attached to another running thread must not be. */
void sp_thread_ctx_record_init(sp_thread_ctx_record_t *rec,
    const uint8_t trace_id[SP_TRACE_ID_LEN],
    const uint8_t span_id[SP_SPAN_ID_LEN], uint8_t trace_flags,
    const char *span_name, size_t name_len);

/* The span name stored in a record's attributes (not NUL-terminated). */
size_t sp_thread_ctx_record_span_name(const uint8_t *attrs, size_t attrs_len,
    const char **name);

/* Touches the TLS slot: call on each thread before its timer is armed, so
 * that the handler never makes the first access. */
void sp_thread_ctx_thread_init(void);

static inline void
sp_thread_ctx_attach(sp_thread_ctx_record_t *rec)
{
    atomic_signal_fence(memory_order_seq_cst);
    otel_thread_ctx_v1 = rec;
    atomic_signal_fence(memory_order_seq_cst);
}

static inline void
sp_thread_ctx_detach(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    otel_thread_ctx_v1 = NULL;
    atomic_signal_fence(memory_order_seq_cst);
}

/* The calling thread's otel_thread_ctx_v1, by address. From a dlopen()ed
 * module a TLS access is a call into the dynamic linker, a cheap one when
 * glibc found room for the module's TLS block in static TLS (so keep the
 * block small: t/06-module-tls.t); a server whose request code all runs
 * on one thread (nginx's worker) takes the address once and binds through
 * it with sp_thread_ctx_store(). */
sp_thread_ctx_record_t **sp_thread_ctx_slot(void);

static inline void
sp_thread_ctx_store(sp_thread_ctx_record_t **slot, sp_thread_ctx_record_t *rec)
{
    atomic_signal_fence(memory_order_seq_cst);
    *slot = rec;
    atomic_signal_fence(memory_order_seq_cst);
}

static inline sp_thread_ctx_record_t *
sp_thread_ctx_current(void)
{
    return otel_thread_ctx_v1;
}

#endif
