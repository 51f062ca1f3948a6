/* What installing and uninstalling the allocation hooks (alloc_hooks.h)
 * costs in reads of /proc/self/maps: once per pass, not once per GOT slot.
 * Reading the maps for every slot took a server child ~100 reads at its
 * start and ~100 again at its exit (0.1-0.3 s under load), which delayed
 * prefork's graceful restart by a maintenance cycle with memory profiling
 * on. Everything here is linked with full RELRO (-z now), as Debian's
 * servers and libraries are, so every slot is on a read-only page the
 * pass's one snapshot knows. The hooks still work: the victim library's
 * allocations are sampled while installed, and its GOT is back to the
 * allocator after uninstall. fopen() is interposed to count the reads.
 * Built without ASan (t/unit/alloc.mk). */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "common/profile/alloc_hooks.h"

static int  maps_reads;

FILE *
fopen(const char *path, const char *mode)
{
    static FILE  *(*real_fopen)(const char *, const char *);

    if (real_fopen == NULL) {
        real_fopen = (FILE *(*)(const char *, const char *))
                     dlsym(RTLD_NEXT, "fopen");
    }
    if (strcmp(path, "/proc/self/maps") == 0) {
        maps_reads++;
    }
    return real_fopen(path, mode);
}

int
main(int argc, char **argv)
{
    sp_alloc_hooks_conf_t   conf;
    sp_alloc_hooks_stats_t  st;
    sp_alloc_sampler_stats_t ss;
    char                    err[256], path[PATH_MAX], *slash;
    void                   *lib;
    void                  (*churn)(size_t, size_t);
    uint64_t                before;
    int                     n;

    (void) argc;
    snprintf(path, sizeof(path), "%s", argv[0]);
    slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path,
             sizeof(path) - (size_t) (slash ? slash + 1 - path : 0),
             "liballoc_victim.so");
    lib = dlopen(path, RTLD_NOW);
    ok(lib != NULL, "liballoc_victim.so loaded (%s)", lib ? "" : dlerror());
    if (lib == NULL) {
        return done_testing();
    }
    churn = (void (*)(size_t, size_t)) dlsym(lib, "victim_churn");

    memset(&conf, 0, sizeof(conf));
    conf.sampler.mean_bytes = 4096;
    maps_reads = 0;
    ok(sp_alloc_hooks_install(&conf, err, sizeof(err)) == 0, "install: %s",
       err);
    n = maps_reads;
    sp_alloc_hooks_get_stats(&st);
    ok(st.slots >= 4, "%llu GOT slots in %llu objects patched",
       (unsigned long long) st.slots, (unsigned long long) st.objects);
    is_int(st.failures, 0, "no slot failed");
    ok(n <= 1, "install read /proc/self/maps %d time(s) for %llu slots "
       "(once a pass)", n, (unsigned long long) st.slots);

    sp_alloc_sampler_get_stats(&ss);
    before = ss.sampled;
    churn(8 * 1024 * 1024, 4096);
    sp_alloc_sampler_get_stats(&ss);
    ok(ss.sampled > before + 100, "the victim's allocations are sampled "
       "(%llu)", (unsigned long long) (ss.sampled - before));

    maps_reads = 0;
    ok(sp_alloc_hooks_uninstall(0) == 0, "uninstall");
    n = maps_reads;
    ok(n <= 1, "uninstall read /proc/self/maps %d time(s) (once a pass)", n);
    sp_alloc_hooks_get_stats(&st);
    is_int(st.slots, 0, "no slot points at a hook");
    is_int(st.failures, 0, "every slot was restored");

    sp_alloc_sampler_get_stats(&ss);
    before = ss.sampled;
    churn(8 * 1024 * 1024, 4096);
    sp_alloc_sampler_get_stats(&ss);
    is_int(ss.sampled - before, 0, "after uninstall, nothing is sampled: "
           "the victim's GOT calls the allocator again");

    /* A second pass: install again (rescan), the same cost. */
    maps_reads = 0;
    ok(sp_alloc_hooks_install(&conf, err, sizeof(err)) == 0
       && maps_reads <= 1, "install again: %d read(s)", maps_reads);
    ok(sp_alloc_hooks_uninstall(0) == 0, "uninstall again");
    return done_testing();
}
