#ifndef SP_RECORD_POOL_H
#define SP_RECORD_POOL_H

#include "common/profile/thread_ctx.h"

/* Thread context records whose memory is never given back: a server whose
 * request memory is freed on another thread than the one that ran the
 * request (httpd's mod_http2 frees a stream's pool on the connection's
 * thread, while the h2 worker that served it may still point its labels
 * at the record) takes its records from here. A thread left pointing at
 * a released record reads a record marked invalid, or a later request's
 * labels, but never freed memory: the SIGPROF handler cannot crash on it.
 *
 * Records come from slabs of the process's lifetime. A thread keeps the
 * last two it gave back for its own next requests (no lock: a request's
 * record is usually taken and given back on one thread), and hands them
 * to the shared list when it exits; other released ones are reused
 * oldest first, so a stale reader on another thread is likely to find
 * its record still invalid. Thread-safe (a mutex on the shared list);
 * not async-signal-safe: call from request code only, never from a
 * signal handler (which never reads the thread's cache either). */

/* A record, with valid == 0, or NULL when memory is exhausted. */
sp_thread_ctx_record_t *sp_record_pool_get(void);

/* Marks rec invalid and gives it back; rec may still be attached to some
 * thread. NULL is ignored. */
void sp_record_pool_put(sp_thread_ctx_record_t *rec);

/* Records made so far (memory held for the process's lifetime: the status
 * API's label_records), records free now on the shared list (not those in
 * live threads' caches, at most two a thread), and gets that found no
 * memory (label_records_failed: those requests go unlabelled). */
void sp_record_pool_stats(size_t *made, size_t *free_now, size_t *failed);

#endif
