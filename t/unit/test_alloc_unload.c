/* httpd's graceful restart dlclose()s every module and loads it again. The
 * hooks live in such a module: here the hook object (libspanprof_alloc.so)
 * is loaded, installed, uninstalled and unloaded 20 times while threads
 * keep allocating, reallocating and freeing, through the victim object's
 * GOT and this program's, blocks from earlier rounds included (sampled by
 * a hook object that is gone). Nothing may jump into the unloaded object:
 * a slot left pointing there, or a thread still inside a hook, crashes
 * this program. The last rounds unload without uninstalling: the ELF
 * destructor must do it. The hook object also redirects libunwind's
 * dl_iterate_phdr to its loader snapshot, as the modules do: libunwind
 * stays loaded (the profiler pins it), so once the object is gone an unwind
 * must not call into it. Built without ASan (t/unit/alloc.mk). */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/profile/alloc_hooks.h"

#define THREADS  3
#define ROUNDS   20
#define KEEP     256

static void        (*churn)(size_t, size_t);
static _Atomic int   stop;
static _Atomic long  ops;

static void *
allocating(void *arg)
{
    void      *keep[KEEP] = { NULL };
    uint32_t   x = 2463534242u + (uint32_t) (uintptr_t) arg;
    unsigned   i;
    size_t     size;

    while (!atomic_load(&stop)) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        i = x % KEEP;
        size = 16 + (x >> 8) % 20000;
        /* This program's own GOT (patched: it is not the hook object)... */
        if (x & 1) {
            free(keep[i]);
            keep[i] = malloc(size);
        } else {
            keep[i] = realloc(keep[i], size);
        }
        /* ... and the victim's. */
        churn(64 * 1024, 4096);
        atomic_fetch_add(&ops, 1);
    }
    for (i = 0; i < KEEP; i++) {
        free(keep[i]);
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    char                       dir[PATH_MAX], path[PATH_MAX + 32], err[256],
                              *slash;
    void                      *victim, *h;
    int                      (*install)(const sp_alloc_hooks_conf_t *, char *,
                                        size_t);
    int                      (*uninstall)(unsigned);
    void                     (*stats)(sp_alloc_sampler_stats_t *);
    void                     (*hstats)(sp_alloc_hooks_stats_t *);
    int                      (*snapshot_init)(char *, size_t);
    int                      (*backtrace)(void **, int);
    void                      *unwind, *frames[16];
    sp_alloc_hooks_conf_t      conf;
    sp_alloc_sampler_stats_t   ss;
    sp_alloc_hooks_stats_t     hs;
    pthread_t                  th[THREADS];
    struct timespec            ts = { 0, 30 * 1000000 };
    int                        r, n, installed = 0, uninstalled = 0,
                               unloaded = 0, sampled = 0, patched = 0,
                               redirected = 0, unwound = 0;
    long                       before;
    unsigned long long         waits = 0;

    n = (int) readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    dir[n > 0 ? n : 0] = '\0';
    slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
    snprintf(path, sizeof(path), "%s/liballoc_victim.so", dir);
    victim = dlopen(path, RTLD_NOW);
    if (victim == NULL) {
        printf("Bail out! %s\n", dlerror());
        return 1;
    }
    *(void **) &churn = dlsym(victim, "victim_churn");
    snprintf(path, sizeof(path), "%s/libspanprof_alloc.so", dir);

    for (n = 0; n < THREADS; n++) {
        pthread_create(&th[n], NULL, allocating, (void *) (uintptr_t) n);
    }

    memset(&conf, 0, sizeof(conf));
    conf.sampler.mean_bytes = 4096;       /* many slow paths */
    for (r = 0; r < ROUNDS; r++) {
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            printf("# %s\n", dlerror());
            break;
        }
        *(void **) &install = dlsym(h, "sp_alloc_hooks_install");
        *(void **) &uninstall = dlsym(h, "sp_alloc_hooks_uninstall");
        *(void **) &stats = dlsym(h, "sp_alloc_sampler_get_stats");
        *(void **) &hstats = dlsym(h, "sp_alloc_hooks_get_stats");
        *(void **) &snapshot_init = dlsym(h, "sp_loader_snapshot_init");
        redirected += snapshot_init(err, sizeof(err)) == 0;
        installed += install(&conf, err, sizeof(err)) == 0;
        hstats(&hs);
        patched += hs.slots >= 4;
        before = atomic_load(&ops);
        while (atomic_load(&ops) < before + 20) {
            nanosleep(&ts, NULL);
        }
        stats(&ss);
        sampled += ss.sampled > 0;
        /* The last rounds leave it to the destructor. */
        if (r < ROUNDS - 3) {
            uninstalled += uninstall(0) == 0;
        }
        hstats(&hs);
        waits += hs.uninstall_waits;
        dlclose(h);
        unloaded += dlopen(path, RTLD_NOW | RTLD_NOLOAD) == NULL;
        /* libunwind, kept loaded by the profiler, unwinds without us. */
        unwind = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
        if (unwind != NULL) {
            *(void **) &backtrace = dlsym(unwind, "unw_backtrace");
            unwound += backtrace(frames, 16) > 0;
            dlclose(unwind);
        }
        before = atomic_load(&ops);
        while (atomic_load(&ops) < before + 5) {
            nanosleep(&ts, NULL);
        }
    }

    atomic_store(&stop, 1);
    for (n = 0; n < THREADS; n++) {
        pthread_join(th[n], NULL);
    }
    is_int(installed, ROUNDS, "installed %d times", ROUNDS);
    is_int(patched, ROUNDS, "each time this program's and the victim's "
           "GOT slots were patched");
    is_int(sampled, ROUNDS, "and allocations sampled");
    is_int(redirected, ROUNDS, "libunwind's dl_iterate_phdr redirected "
           "to the hook object's loader snapshot each time");
    is_int(unwound, ROUNDS, "libunwind stays loaded and unwinds after each "
           "unload");
    is_int(uninstalled, ROUNDS - 3, "uninstalled (bounded wait) before "
           "dlclose");
    is_int(unloaded, ROUNDS, "the hook object really unloaded each time");
    ok(atomic_load(&ops) > 0, "%d threads allocated through it all "
       "(%ld rounds of work), nothing jumped into an unloaded object",
       THREADS, atomic_load(&ops));
    printf("# uninstall waited %llu times 1 ms for a thread inside a hook\n",
           waits);
    return done_testing();
}
