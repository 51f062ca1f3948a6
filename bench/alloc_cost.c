/* The cost of the allocation hooks (common/profile/alloc_hooks.h), in
 * nanoseconds per malloc+free pair through a full-RELRO shared object's
 * GOT (bench/alloc_cost_loop.c). The hooks are in a dlopen()ed object
 * (liballoc_cost_hooks.so, the alloc_*.c files built as the module builds
 * them), so that their thread-local counter is reached through TLSDESC as
 * in the nginx and Apache modules:
 *   unhooked   the allocator alone
 *   hooked     hooks installed, 512 KiB mean interval: almost every call is
 *              the unsampled fast path (one TLS counter update; free: one
 *              filter load)
 *   sampled    every allocation sampled (unwind, stack interning, live
 *              table, ring) and its free removed from the table
 * Unhooked and hooked runs alternate (install / uninstall between them)
 * and each figure is the best of ROUNDS runs: the machine is shared.
 * Usage: alloc_cost [pairs] [rounds]        (defaults 5000000, 9) */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/profile/alloc_hooks.h"

static void    (*loop)(size_t, size_t);
static int     (*install)(const sp_alloc_hooks_conf_t *, char *, size_t);
static int     (*uninstall)(unsigned);
static int     (*set_mean)(size_t);
static size_t  (*peek)(sp_alloc_sample_t **, size_t);
static void    (*release)(size_t);
static void    (*stats)(sp_alloc_sampler_stats_t *);

static double
run_ns(size_t pairs, size_t size)
{
    struct timespec  a, b;

    clock_gettime(CLOCK_MONOTONIC, &a);
    loop(pairs, size);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double) (b.tv_sec - a.tv_sec) * 1e9
            + (double) (b.tv_nsec - a.tv_nsec)) / (double) pairs;
}

static void
drain(void)
{
    sp_alloc_sample_t  *s[1024];
    size_t              n;

    while ((n = peek(s, 1024)) > 0) {
        release(n);
    }
}

static void *
open_here(const char *name)
{
    char     path[PATH_MAX], *slash;
    ssize_t  n;
    void    *h;

    n = readlink("/proc/self/exe", path, sizeof(path) - 64);
    path[n > 0 ? n : 0] = '\0';
    slash = strrchr(path, '/');
    strcpy(slash ? slash + 1 : path, name);
    h = dlopen(path, RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "alloc_cost: %s\n", dlerror());
        exit(1);
    }
    return h;
}

int
main(int argc, char **argv)
{
    size_t                    pairs = argc > 1 ? strtoul(argv[1], NULL, 10)
                                               : 5000000;
    int                       rounds = argc > 2 ? atoi(argv[2]) : 9, r;
    char                      err[256];
    void                     *lh, *hh;
    sp_alloc_hooks_conf_t     conf;
    sp_alloc_sampler_stats_t  st;
    double                    off = 1e30, on = 1e30, sampled, ns;
    size_t                    sampled_pairs = pairs / 50;

    lh = open_here("liballoc_cost_loop.so");
    hh = open_here("liballoc_cost_hooks.so");
    *(void **) &loop = dlsym(lh, "alloc_cost_loop");
    *(void **) &install = dlsym(hh, "sp_alloc_hooks_install");
    *(void **) &uninstall = dlsym(hh, "sp_alloc_hooks_uninstall");
    *(void **) &set_mean = dlsym(hh, "sp_alloc_sampler_set_mean");
    *(void **) &peek = dlsym(hh, "sp_alloc_sampler_peek");
    *(void **) &release = dlsym(hh, "sp_alloc_sampler_release");
    *(void **) &stats = dlsym(hh, "sp_alloc_sampler_get_stats");

    memset(&conf, 0, sizeof(conf));
    conf.sampler.ring_capacity = 65536;
    loop(pairs / 10, 64);               /* warm up */
    for (r = 0; r < rounds; r++) {
        ns = run_ns(pairs, 64);
        off = ns < off ? ns : off;
        if (install(&conf, err, sizeof(err)) != 0) {
            fprintf(stderr, "alloc_cost: %s\n", err);
            return 1;
        }
        ns = run_ns(pairs, 64);
        on = ns < on ? ns : on;
        drain();
        uninstall(0);
    }

    /* A 1 KiB interval and 64 KiB blocks: every allocation sampled. */
    install(&conf, err, sizeof(err));
    set_mean(1024);
    loop(1000, 65536);
    drain();
    sampled = run_ns(sampled_pairs, 65536);
    stats(&st);
    drain();
    uninstall(0);

    printf("malloc(64)+free through a GOT, ns per pair, best of %d x %zu\n",
           rounds, pairs);
    printf("  unhooked                 %7.2f\n", off);
    printf("  hooked, 512 KiB interval %7.2f   (+%.2f ns per call)\n", on,
           (on - off) / 2);
    printf("malloc(64 KiB)+free, every allocation sampled, %zu pairs\n",
           sampled_pairs);
    printf("  sampled                  %7.0f   (%llu sampled in all)\n",
           sampled, (unsigned long long) st.sampled);
    return 0;
}
