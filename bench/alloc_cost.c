/* The cost of the allocation hooks (common/profile/alloc_hooks.h), in
 * nanoseconds per malloc+free pair through a full-RELRO shared object's
 * GOT (bench/alloc_cost_loop.c):
 *   unhooked          the allocator alone
 *   hooked            hooks installed, 512 KiB mean interval: almost every
 *                     call is the unsampled fast path (one counter update,
 *                     and a filter load for free)
 *   sampled           every allocation sampled (unwind, stack interning,
 *                     live table, ring) and its free removed from the table
 * Each is the best of ROUNDS runs (the machine is shared). Usage:
 *   alloc_cost [pairs] [rounds]       (defaults 5000000, 7) */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/profile/alloc_hooks.h"

static void  (*loop)(size_t, size_t);

static double
best_ns(size_t pairs, size_t size, int rounds)
{
    struct timespec  a, b;
    double           best = 1e30, ns;
    int              r;

    loop(pairs / 10, size);         /* warm up */
    for (r = 0; r < rounds; r++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        loop(pairs, size);
        clock_gettime(CLOCK_MONOTONIC, &b);
        ns = ((double) (b.tv_sec - a.tv_sec) * 1e9
              + (double) (b.tv_nsec - a.tv_nsec)) / (double) pairs;
        if (ns < best) {
            best = ns;
        }
    }
    return best;
}

static void
drain(void)
{
    sp_alloc_sample_t  *s[1024];
    size_t              n;

    while ((n = sp_alloc_sampler_peek(s, 1024)) > 0) {
        sp_alloc_sampler_release(n);
    }
}

int
main(int argc, char **argv)
{
    size_t                    pairs = argc > 1 ? strtoul(argv[1], NULL, 10)
                                               : 5000000;
    int                       rounds = argc > 2 ? atoi(argv[2]) : 7;
    char                      path[PATH_MAX], err[256], *slash;
    void                     *h;
    sp_alloc_hooks_conf_t     conf;
    sp_alloc_sampler_stats_t  st;
    double                    off, on, off2, on2, sampled;
    ssize_t                   n;
    size_t                    sampled_pairs = pairs / 50;

    n = readlink("/proc/self/exe", path, sizeof(path) - 64);
    path[n > 0 ? n : 0] = '\0';
    slash = strrchr(path, '/');
    strcpy(slash ? slash + 1 : path, "liballoc_cost_loop.so");
    h = dlopen(path, RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "alloc_cost: %s\n", dlerror());
        return 1;
    }
    *(void **) &loop = dlsym(h, "alloc_cost_loop");

    off = best_ns(pairs, 64, rounds);

    memset(&conf, 0, sizeof(conf));
    conf.sampler.ring_capacity = 65536;
    if (sp_alloc_hooks_install(&conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "alloc_cost: %s\n", err);
        return 1;
    }
    on = best_ns(pairs, 64, rounds);
    drain();

    /* A 1 KiB interval and 64 KiB blocks: every allocation sampled. */
    sp_alloc_sampler_set_mean(1024);
    loop(1000, 65536);
    drain();
    sampled = best_ns(sampled_pairs, 65536, 1);
    sp_alloc_sampler_get_stats(&st);
    drain();
    /* unhooked again: the best of both runs (the machine is shared) */
    sp_alloc_hooks_uninstall(0);
    off2 = best_ns(pairs, 64, rounds);
    off = off < off2 ? off : off2;
    sp_alloc_hooks_install(&conf, err, sizeof(err));
    sp_alloc_sampler_set_mean(SP_ALLOC_MEAN_DEFAULT);
    loop(pairs, 64);
    on2 = best_ns(pairs, 64, rounds);
    on = on < on2 ? on : on2;
    sp_alloc_hooks_uninstall(0);

    printf("malloc(64)+free, ns per pair, best of %d x %zu pairs\n",
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
