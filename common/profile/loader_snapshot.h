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
 *    that walks the snapshot, on every thread: a thread outside the handler
 *    that reached the real one while holding a libunwind lock could
 *    deadlock with a handler interrupting the loader on another thread;
 *  - the handler does not unwind at all while the loader is changing the
 *    link map (_r_debug.r_state != RT_CONSISTENT).
 * A library loaded after the last snapshot is simply not unwound through
 * until the next refresh. */

/* Redirects libunwind's dl_iterate_phdr and takes a first snapshot.
 * 0, or -1 with err filled (then the sampler must not unwind). */
int sp_loader_snapshot_init(char *err, size_t errlen);

/* Rebuilds the snapshot when objects were added or removed since the last
 * one (cheap otherwise). Not async-signal-safe; thread-safe. */
void sp_loader_snapshot_refresh(void);

/* Async-signal-safe: 0 while the loader is changing its list of objects
 * (then the handler records the pc only). */
int sp_loader_unwind_safe(void);

#endif
