/* Allocation profiling through GOT hooks (alloc_hooks.h), against a shared
 * object with full RELRO (liballoc_victim.so) that allocates in named
 * functions: the sampled bytes add up to what was allocated (within 25%),
 * stacks start in the allocating function, samples carry the thread's
 * request labels; a leaking function's in-use bytes grow round after
 * round while a freeing one's stay at zero; every allocation function is
 * hooked and its frees leave the live table; threads allocate at once,
 * each with its own labels; a forked child keeps sampling; uninstall puts
 * the GOT back (no more samples, frees of sampled blocks still work) and a
 * second install works again. Built without ASan (t/unit/alloc.mk). */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "common/profile/alloc_hooks.h"
#include "common/profile/thread_ctx.h"

#define MB  (1024 * 1024)

static void  (*churn)(size_t, size_t);
static void  (*leak)(void **, size_t, size_t);
static void  (*free_all)(void **, size_t);
static int   (*each_function)(void **, size_t);
static void  (*vfree)(void *);

/* The function a stack starts in, by name. */
static const char *
frame_fn(uint32_t stack_id)
{
    const uintptr_t  *f;
    Dl_info           dli;

    if (sp_alloc_sampler_stack(stack_id, &f) == 0
        || dladdr((void *) f[0], &dli) == 0 || dli.dli_sname == NULL)
    {
        return "";
    }
    return dli.dli_sname;
}

static int
stack_has(uint32_t stack_id, const char *name)
{
    const uintptr_t  *f;
    Dl_info           dli;
    unsigned          n, i;

    n = sp_alloc_sampler_stack(stack_id, &f);
    for (i = 0; i < n; i++) {
        if (dladdr((void *) f[i], &dli) != 0 && dli.dli_sname != NULL
            && strcmp(dli.dli_sname, name) == 0)
        {
            return 1;
        }
    }
    return 0;
}

typedef struct {
    double    bytes[256];       /* per first trace-id byte, has_ctx only */
    double    fn_bytes;         /* stacks starting in fn */
    size_t    fn_samples, fn_unlabelled, fn_caller_found;
    size_t    samples;
} drained_t;

/* Empties the ring; counts the samples whose stack starts in fn. */
static void
drain(drained_t *d, const char *fn, const char *caller)
{
    sp_alloc_sample_t  *s[512];
    size_t              n, i;
    double              objects, bytes;

    memset(d, 0, sizeof(*d));
    while ((n = sp_alloc_sampler_peek(s, 512)) > 0) {
        for (i = 0; i < n; i++) {
            d->samples++;
            if (strcmp(frame_fn(s[i]->stack_id), fn) != 0) {
                continue;
            }
            sp_alloc_weight(s[i]->size, s[i]->mean, &objects, &bytes);
            d->fn_samples++;
            d->fn_bytes += bytes;
            if (caller != NULL && stack_has(s[i]->stack_id, caller)) {
                d->fn_caller_found++;
            }
            if (s[i]->has_ctx) {
                d->bytes[s[i]->trace_id[0]] += bytes;
            } else {
                d->fn_unlabelled++;
            }
        }
        sp_alloc_sampler_release(n);
    }
}

/* In-use bytes of the stacks starting in fn. */
static double
inuse_of(const char *fn, uint64_t *samples)
{
    static sp_alloc_inuse_t  in[4096];
    size_t                   n, i;
    double                   b = 0;

    *samples = 0;
    n = sp_alloc_sampler_inuse(in, 4096);
    for (i = 0; i < n && i < 4096; i++) {
        if (strcmp(frame_fn(in[i].stack_id), fn) == 0) {
            b += in[i].bytes;
            *samples += in[i].samples;
        }
    }
    return b;
}

static void   **live_each;
static int      live_found;

static void
count_live(uintptr_t addr, const sp_alloc_live_t *v, void *arg)
{
    int  i;

    for (i = 0; i < 8; i++) {
        live_found += addr == (uintptr_t) live_each[i];
    }
}

static void
make_record(sp_thread_ctx_record_t *rec, uint8_t id, const char *name)
{
    uint8_t  tid[SP_TRACE_ID_LEN], sid[SP_SPAN_ID_LEN];

    memset(tid, id, sizeof(tid));
    memset(sid, id, sizeof(sid));
    memset(rec, 0, sizeof(*rec));
    sp_thread_ctx_record_init(rec, tid, sid, 1, name, strlen(name));
}

/* Threads: each churns 64 MB with its own labels. */
#define THREADS  4

static void *
thread_main(void *arg)
{
    sp_thread_ctx_record_t  rec;

    make_record(&rec, (uint8_t) (uintptr_t) arg, "thread");
    sp_thread_ctx_attach(&rec);
    churn(64 * MB, 4096);
    sp_thread_ctx_detach();
    return NULL;
}

/* Exported (-rdynamic) so that dladdr names it. */
__attribute__((noinline)) void test_caller(void);

__attribute__((noinline)) void
test_caller(void)
{
    churn(512 * MB, 8192);
    __asm__ volatile("" ::: "memory");
}

int
main(int argc, char **argv)
{
    char                     path[PATH_MAX], *slash, err[256];
    void                    *lib, *blocks[10000], *each[8];
    sp_alloc_hooks_conf_t    conf;
    sp_alloc_hooks_stats_t   hs;
    sp_alloc_sampler_stats_t ss;
    sp_thread_ctx_record_t   rec;
    drained_t                d;
    double                   in, prev = 0;
    uint64_t                 live_samples, before;
    int                      i, grew = 1, n, found, status;
    size_t                   k;
    pthread_t                th[THREADS];
    pid_t                    pid;

    /* The victim lives next to this program. */
    n = (int) readlink("/proc/self/exe", path, sizeof(path) - 64);
    path[n > 0 ? n : 0] = '\0';
    slash = strrchr(path, '/');
    strcpy(slash ? slash + 1 : path, "liballoc_victim.so");
    memset(&conf, 0, sizeof(conf));
    conf.sampler.ring_capacity = 16384;
    ok(sp_alloc_hooks_install(&conf, err, sizeof(err)) == 0,
       "install: %s", err);
    sp_alloc_hooks_get_stats(&hs);
    before = hs.slots;

    /* Loaded after install, as an nginx or Apache module is: a rescan
     * patches it; a rescan with nothing new patches nothing. */
    lib = dlopen(path, RTLD_NOW);
    if (lib == NULL) {
        printf("Bail out! %s\n", dlerror());
        return 1;
    }
    *(void **) &churn = dlsym(lib, "victim_churn");
    *(void **) &leak = dlsym(lib, "victim_leak");
    *(void **) &free_all = dlsym(lib, "victim_free_all");
    *(void **) &each_function = dlsym(lib, "victim_each_function");
    *(void **) &vfree = dlsym(lib, "victim_free");
    n = sp_alloc_hooks_rescan();
    ok(n >= 9, "a rescan patches the object loaded since (%d slots: its 9 "
       "allocation functions)", n);
    is_int(sp_alloc_hooks_rescan(), 0, "a rescan with nothing new: none");
    sp_alloc_hooks_get_stats(&hs);
    ok(hs.slots >= before + 9 && hs.failures == 0,
       "GOT slots patched (%llu in %llu objects), none failed (the "
       "victim's GOT is read-only: full RELRO)",
       (unsigned long long) hs.slots, (unsigned long long) hs.objects);
    is_int(sp_alloc_sampler_mean(), 512 * 1024, "default interval 512 KiB");

    /* (1) bytes, stack and labels */
    drain(&d, "", NULL);
    make_record(&rec, 7, "GET /churn");
    sp_thread_ctx_attach(&rec);
    test_caller();
    sp_thread_ctx_detach();
    drain(&d, "victim_churn", "test_caller");
    ok(d.fn_samples > 500, "512 MB in 8 KiB blocks: %zu samples start in "
       "victim_churn", d.fn_samples);
    ok(d.fn_bytes > 0.75 * 512 * MB && d.fn_bytes < 1.25 * 512 * MB,
       "alloc_space %.1f MB for 512 MB allocated", d.fn_bytes / MB);
    is_int(d.fn_caller_found, d.fn_samples,
           "every stack goes on through the caller (test_caller)");
    ok(d.fn_unlabelled == 0 && d.bytes[7] == d.fn_bytes,
       "every sample carries the thread's request (trace id 07...)");
    in = inuse_of("victim_churn", &live_samples);
    ok(in == 0 && live_samples == 0, "all freed: no in-use bytes");

    /* (2) a leak grows, a churn does not */
    for (i = 0; i < 5; i++) {
        leak(blocks + i * 2000, 2000, 8192);
        churn(16 * MB, 8192);
        in = inuse_of("victim_leak", &live_samples);
        if (in <= prev) {
            grew = 0;
        }
        prev = in;
        printf("# round %d: victim_leak in use %.1f MB (%llu samples), "
               "victim_churn %.1f MB\n", i + 1, in / MB,
               (unsigned long long) live_samples,
               inuse_of("victim_churn", &before) / MB);
    }
    ok(grew, "the leaking function's in-use bytes grow every round");
    ok(prev > 0.7 * 80 * MB && prev < 1.3 * 80 * MB,
       "inuse_space %.1f MB for 80 MB leaked", prev / MB);
    ok(inuse_of("victim_churn", &before) == 0,
       "the freeing function's in-use stays at zero");

    /* (3) every allocation function, each sampled at a 1 KiB interval */
    ok(sp_alloc_sampler_set_mean(1024) == 0, "interval set to 1 KiB");
    churn(2 * MB, 8192);        /* the interval drawn before runs out */
    sp_alloc_sampler_get_stats(&ss);
    before = ss.sampled;
    n = each_function(each, 256 * 1024);
    is_int(n, 8, "calloc realloc posix_memalign aligned_alloc memalign "
           "valloc reallocarray malloc: all succeeded");
    sp_alloc_sampler_get_stats(&ss);
    ok(ss.sampled - before >= 8, "all sampled (%llu samples)",
       (unsigned long long) (ss.sampled - before));
    live_each = each;
    live_found = 0;
    sp_alloc_sampler_each_live(count_live, NULL);
    is_int(live_found, 8, "the 8 blocks are in the live table");
    for (i = 0; i < 8; i++) {
        vfree(each[i]);
    }
    sp_alloc_sampler_get_stats(&ss);
    ok(ss.freed >= 8, "their frees left the live table (%llu freed)",
       (unsigned long long) ss.freed);
    sp_alloc_sampler_set_mean(512 * 1024);
    drain(&d, "", NULL);

    /* (4) threads */
    sp_alloc_sampler_set_mean(128 * 1024);
    for (i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, thread_main, (void *) (uintptr_t) (i + 1));
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    drain(&d, "victim_churn", NULL);
    for (i = 1, found = 0; i <= THREADS; i++) {
        found += d.bytes[i] > 0.75 * 64 * MB && d.bytes[i] < 1.25 * 64 * MB;
        printf("# thread %d: %.1f MB\n", i, d.bytes[i] / MB);
    }
    is_int(found, THREADS, "%d threads at once: each one's labelled bytes "
           "within 25%% of its 64 MB", THREADS);
    sp_alloc_sampler_set_mean(512 * 1024);

    /* (5) fork: the child samples, and frees the parent's sampled blocks */
    sp_alloc_sampler_get_stats(&ss);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        sp_alloc_sampler_stats_t  cs;
        uint64_t                  leak_before;

        inuse_of("victim_leak", &leak_before);
        free_all(blocks, 10000);
        inuse_of("victim_leak", &live_samples);
        churn(64 * MB, 8192);
        drain(&d, "victim_churn", NULL);
        sp_alloc_sampler_get_stats(&cs);
        _exit(leak_before > 0 && live_samples == 0 && d.fn_samples > 50
              && cs.sampled > ss.sampled ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a forked child samples its allocations and frees the parent's "
       "sampled blocks");
    in = inuse_of("victim_leak", &live_samples);
    ok(in == prev, "the parent's live table is its own");

    /* (6) uninstall: the GOT is back */
    ok(sp_alloc_hooks_uninstall(0) == 0, "uninstall");
    sp_alloc_hooks_get_stats(&hs);
    ok(hs.slots == 0 && !hs.installed, "no slot patched any more");
    sp_alloc_sampler_get_stats(&ss);
    before = ss.sampled;
    churn(256 * MB, 8192);
    free_all(blocks, 10000);
    sp_alloc_sampler_get_stats(&ss);
    is_int(ss.sampled, before, "no sample after uninstall; frees of sampled "
           "blocks go to the allocator");
    ok(sp_alloc_hooks_install(&conf, err, sizeof(err)) == 0,
       "install again");
    drain(&d, "", NULL);
    churn(64 * MB, 8192);
    drain(&d, "victim_churn", NULL);
    ok(d.fn_samples > 50, "sampling again (%zu samples)", d.fn_samples);
    ok(sp_alloc_hooks_uninstall(0) == 0, "uninstall again");

    for (k = 0; k < sizeof(blocks) / sizeof(blocks[0]); k++) {
        blocks[k] = NULL;
    }
    return done_testing();
}
