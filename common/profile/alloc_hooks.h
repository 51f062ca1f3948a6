#ifndef SP_ALLOC_HOOKS_H
#define SP_ALLOC_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/profile/alloc_sampler.h"

/* Heap allocation profiling of the whole server process, from a module
 * loaded with load_module / LoadModule (no LD_PRELOAD, no restart), by
 * rewriting the GOT entries of every loaded object for malloc, calloc,
 * realloc, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc
 * and reallocarray, as async-profiler's native memory profiling does.
 *
 * Why the GOT: every object calls the allocator through its own PLT/GOT
 * slot (Debian's nginx, apache2, APR, OpenSSL, zlib, PCRE all use
 * R_X86_64_JUMP_SLOT for malloc/free), so one 8-byte store per object and
 * function redirects the calls of that object and nothing else: no code is
 * rewritten, an allocation is never changed (no header), and putting the
 * original pointers back undoes it completely. Interposing malloc needs
 * LD_PRELOAD; malloc hooks are gone from glibc; uprobes need privileges.
 * Calls inside libc (strdup, fopen, ...) do not go through a GOT and are
 * not seen; the loader and libc themselves, sanitizer and allocator
 * libraries (libasan, jemalloc, tcmalloc, mimalloc) and our own object
 * are never patched.
 *
 * Only PLT slots (JUMP_SLOT) are patched by default: a GLOB_DAT slot is
 * read when code takes malloc's address, and a pointer to our hook kept in
 * some structure would outlive uninstall and jump into an unloaded module
 * (hook_data_refs = 1 patches them too, for -fno-plt builds, at that risk).
 *
 * Write protection: with full RELRO (-z relro -z now, Debian's default for
 * both servers) the GOT is read-only after relocation; the page is made
 * writable for the store and put back as it was (read from
 * /proc/self/maps, once per pass over the objects). A slot whose value is not yet relocated (an object a
 * concurrent dlopen() is still relocating) is left for the next rescan.
 *
 * The hot path (an allocation that is not sampled) is one thread-local
 * subtraction and compare, then a tail call to the real function: the
 * thread is out of our code while the allocator runs. Sampled allocations,
 * and frees of addresses the live table's filter flags, run a slow path
 * that counts itself in flight.
 *
 * Unload: before our object is unmapped (httpd's graceful restart
 * dlclose()s every module), sp_alloc_hooks_uninstall() puts every patched
 * slot back (each object's slots are restored from inside dl_iterate_phdr,
 * under the loader's lock, so an object being unloaded is never written).
 * Then no new call enters a hook, but a thread may still be inside one: in
 * a slow path (counted in flight), or anywhere between reading the old
 * slot and the tail call, preempted there or waiting in the loader's
 * TLSDESC resolver (which takes locks and allocates when our TLS block is
 * dynamic). Uninstall waits until nothing is in flight and two looks 1 ms
 * apart find no thread inside: all hooks are in one section, a blocked
 * thread's pc and sp are read from /proc/self/task/N/syscall, a runnable
 * one is asked with a real-time signal (the handler reads the interrupted
 * context), and in each case the pc and the top 2 KiB of the stack must
 * not point into that section. Bounded: if the wait times out (a runnable
 * thread that blocks signals, say), the object pins itself (RTLD_NODELETE)
 * and stays mapped, so nothing can jump into unmapped code. An ELF
 * destructor uninstalls as a last resort when the glue did not.
 * libunwind is pinned too: its per-thread cache has a pthread key whose
 * destructor would otherwise run unmapped code at every thread's exit.
 *
 * fork: the tables are lock-free (nothing to reset); pthread_atfork holds
 * the install lock across fork, resets the in-flight count and the sample
 * ring in the child. The child keeps the parent's hooks and live table
 * (its heap is a copy of the parent's).
 *
 * Objects loaded later (nginx modules, Apache modules, dlopen()ed OpenSSL
 * providers) are patched by sp_alloc_hooks_rescan(), which costs one
 * dl_iterate_phdr step when nothing was loaded or unloaded since the last
 * scan: call it from the exporter tick and after configuration loading. */

typedef struct {
    sp_alloc_conf_t  sampler;
    int              hook_data_refs;     /* also GLOB_DAT slots */
} sp_alloc_hooks_conf_t;

typedef struct {
    uint64_t   objects;          /* objects with patched slots now */
    uint64_t   slots;            /* GOT slots pointing at our hooks now */
    uint64_t   failures;         /* slots that could not be written */
    uint64_t   deferred;         /* slots not yet relocated when scanned */
    uint64_t   scans;            /* full scans (install, rescans) */
    uint64_t   uninstall_timeouts;
    uint64_t   uninstall_waits;  /* 1 ms waits for threads in a hook */
    int        installed;
    int        pinned;           /* our object can no longer be unloaded */
} sp_alloc_hooks_stats_t;

/* Initializes the sampler with conf->sampler and patches every loaded
 * object. Idempotent (a second call rescans). 0, or -1 with err. */
int  sp_alloc_hooks_install(const sp_alloc_hooks_conf_t *conf, char *err,
    size_t errlen);

/* Patches objects loaded since the last scan; cheap when none were.
 * Returns the number of slots newly patched. */
int  sp_alloc_hooks_rescan(void);

/* Restores every patched slot, then waits up to wait_ms (0: 2000) for
 * threads to leave the hooks (see above; it sends a real-time signal, the
 * first of SIGRTMIN+6..SIGRTMAX-2 without a handler, to runnable threads,
 * and removes its handler before returning). 0, or -1 when threads were still inside at
 * the deadline (the object is then pinned in memory). The sampler's tables
 * stay (frees of sampled blocks go straight to the allocator). */
int  sp_alloc_hooks_uninstall(unsigned wait_ms);

int  sp_alloc_hooks_installed(void);
void sp_alloc_hooks_get_stats(sp_alloc_hooks_stats_t *st);

#endif
