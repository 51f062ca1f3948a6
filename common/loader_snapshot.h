#ifndef SP_LOADER_SNAPSHOT_H
#define SP_LOADER_SNAPSHOT_H

#include <stddef.h>

/* libunwind finds unwind tables through dl_iterate_phdr, which takes the
 * dynamic loader's lock: called from a SIGPROF handler it can block behind
 * (or, on the same thread, re-enter) a dlopen/dlclose in progress. We make
 * the signal path lock-free instead:
 *  - a snapshot of every loaded object's program headers is built off the
 *    signal path and published with an atomic pointer (old ones are kept a
 *    while, since a handler may still be reading them);
 *  - libunwind's GOT slot for dl_iterate_phdr is redirected to a function
 *    that walks the snapshot while the calling thread is inside our handler,
 *    and calls the real dl_iterate_phdr otherwise;
 *  - the handler does not unwind at all while the loader is changing the
 *    link map (_r_debug.r_state != RT_CONSISTENT).
 * A library loaded after the last snapshot is simply not unwound through
 * until the next refresh. */

/* Redirects libunwind's dl_iterate_phdr and takes a first snapshot.
 * 0, or -1 with err filled (then the sampler must not unwind). */
int sp_loader_snapshot_init(char *err, size_t errlen);

/* Rebuilds the snapshot when objects were added or removed since the last
 * one (cheap otherwise). Not async-signal-safe; one thread at a time. */
void sp_loader_snapshot_refresh(void);

/* Async-signal-safe: the handler brackets its unwinding with these. enter
 * returns 0 when unwinding is unsafe now (loader mid-update). */
int sp_loader_signal_enter(void);
void sp_loader_signal_leave(void);

/* Touches this module's TLS on the calling thread (before its timer). */
void sp_loader_thread_init(void);

#endif
