/* The sampler in-process: samples carry the attached record and the burning
 * function; a thread looping over dlopen/dlclose and dl_iterate_phdr while
 * every thread is sampled at 1000 Hz neither deadlocks nor crashes. */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/base/clock.h"
#include "common/profile/sampler.h"
#include "common/profile/thread_ctx.h"

static volatile uint64_t  sink;
static atomic_int         stop_threads;

/* Thread CPU time, not wall time: the test must hold on a loaded machine. */
static uint64_t
cpu_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

__attribute__((noinline)) void
sp_test_burn(uint64_t ms)
{
    uint64_t  end = cpu_ns() + ms * 1000000;
    uint64_t  x = 1;

    while (cpu_ns() < end) {
        for (int i = 0; i < 10000; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
        sink = x;
    }
}

static int
count_objects(struct dl_phdr_info *info, size_t size, void *data)
{
    (*(int *) data)++;
    return 0;
}

static void *
loader_churn(void *arg)
{
    long  *loops = arg;
    void  *h;
    int    n;

    sp_sampler_thread_register();
    while (!atomic_load(&stop_threads)) {
        h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            (void) dlsym(h, "cos");
            dlclose(h);
        }
        n = 0;
        dl_iterate_phdr(count_objects, &n);
        (*loops)++;
    }
    sp_sampler_thread_unregister();
    return NULL;
}

static void *
iterate_churn(void *arg)
{
    long  *loops = arg;
    int    n;

    sp_sampler_thread_register();
    while (!atomic_load(&stop_threads)) {
        n = 0;
        dl_iterate_phdr(count_objects, &n);
        (*loops)++;
    }
    sp_sampler_thread_unregister();
    return NULL;
}

/* A registered thread that keeps running through sp_sampler_stop, as a
 * thread left behind when httpd unloads the module could. */
static void *
late_burner(void *arg)
{
    atomic_int  *ready = arg;

    sp_sampler_thread_register();
    atomic_store(ready, 1);
    while (!atomic_load(&stop_threads)) {
        sp_test_burn(5);
    }
    return NULL;
}

static int
ignored(int sig)
{
    struct sigaction  sa;

    return sigaction(sig, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO)
           && sa.sa_handler == SIG_IGN;
}

static int
in_function(uintptr_t pc, const char *name)
{
    Dl_info  info;

    return dladdr((void *) pc, &info) && info.dli_sname != NULL
           && strcmp(info.dli_sname, name) == 0;
}

int
main(int argc, char **argv)
{
    static sp_thread_ctx_record_t  rec;
    sp_sampler_conf_t   conf = { .rate_hz = 1000, .max_depth = 64,
                                 .ring_capacity = 65536 };
    sp_sampler_stats_t  st;
    sp_raw_sample_t    *s[256];
    uint8_t             tid[16], sid[8];
    char                err[256];
    size_t              n, i, total = 0, labelled = 0, burning = 0, both = 0;
    size_t              j, depth_ok = 0, weight = 0;
    long                loops1 = 0, loops2 = 0;
    pthread_t           t1, t2;

    /* Lazy binding would resolve PLT entries from inside the handler. */
    if (getenv("LD_BIND_NOW") == NULL) {
        setenv("LD_BIND_NOW", "1", 1);
        execv("/proc/self/exe", argv);
    }
    alarm(60);      /* a deadlock fails the test instead of hanging it */

    ok(sp_sampler_start(&conf, err, sizeof(err)) == 0, "sampler starts (%s)",
       err);
    ok(sp_sampler_thread_register() == 0, "main thread registered");

    memset(tid, 0xab, sizeof(tid));
    memset(sid, 0xcd, sizeof(sid));
    sp_thread_ctx_record_init(&rec, tid, sid, 1, "GET /burn", 9);
    sp_thread_ctx_attach(&rec);
    sp_test_burn(400);
    sp_thread_ctx_detach();

    while ((n = sp_sampler_peek(s, 256)) > 0) {
        for (i = 0; i < n; i++) {
            int lab = s[i]->has_ctx && s[i]->span_id[0] == 0xcd
                      && s[i]->trace_id[15] == 0xab;
            int burn = 0;
            const char *name;
            size_t len = sp_thread_ctx_record_span_name(s[i]->attrs,
                                                        s[i]->attrs_len, &name);

            for (j = 0; j < s[i]->nframes; j++) {
                burn |= in_function(s[i]->frames[j], "sp_test_burn");
            }
            /* The caller of the burn function is on the stack too. */
            for (j = 0; j + 1 < s[i]->nframes; j++) {
                if (in_function(s[i]->frames[j], "sp_test_burn")
                    && in_function(s[i]->frames[j + 1] - 1, "main"))
                {
                    depth_ok++;
                    break;
                }
            }
            weight += s[i]->weight;
            total++;
            labelled += lab && len == 9 && memcmp(name, "GET /burn", 9) == 0;
            burning += burn;
            both += lab && burn;
        }
        sp_sampler_release(n);
    }
    printf("# %zu samples (weight %zu), %zu labelled, %zu in sp_test_burn\n",
           total, weight, labelled, burning);
    /* The kernel checks CPU timers at its tick, so one sample may stand for
     * several periods (weight = 1 + overruns). */
    ok(weight >= 300 && weight <= 500,
       "sample weights add up to the 400 ms of CPU at 1000 Hz");
    ok(both * 10 >= total * 9, "90%% carry the record and the burn function");
    ok(depth_ok * 10 >= total * 9, "stacks reach main() through the burner");

    /* Loader churn under sampling. */
    atomic_store(&stop_threads, 0);
    pthread_create(&t1, NULL, loader_churn, &loops1);
    pthread_create(&t2, NULL, iterate_churn, &loops2);
    {
        uint64_t end = sp_mono_ns() + 2000000000ull;
        while (sp_mono_ns() < end) {
            sp_test_burn(50);
            n = sp_sampler_peek(s, 256);
            sp_sampler_release(n);
            total += n;
        }
    }
    atomic_store(&stop_threads, 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    sp_sampler_get_stats(&st);
    printf("# dlopen/dlclose loops %ld, dl_iterate_phdr loops %ld, samples %llu,"
           " loader-busy skips %llu, dropped %llu\n", loops1, loops2,
           (unsigned long long) st.samples,
           (unsigned long long) st.skipped_loader,
           (unsigned long long) st.dropped);
    ok(loops1 > 100 && loops2 > 100, "both churn threads made progress");
    ok(st.samples > 200, "sampling went on during the churn");
    ok(st.skipped_loader < st.samples / 2,
       "most samples were unwound (loader consistent)");

    /* Stop while another registered thread burns CPU: its timer disarmed
     * and both signals ignored, so that no signal reaches the handler once
     * the module holding it may be unloaded. */
    {
        atomic_int  ready = 0;
        uint64_t    before;

        atomic_store(&stop_threads, 0);
        pthread_create(&t1, NULL, late_burner, &ready);
        while (!atomic_load(&ready)) {
            sp_test_burn(1);
        }
        sp_sampler_stop();
        ok(!sp_sampler_running(), "stopped");
        ok(ignored(SIGPROF) && ignored(SP_SAMPLER_WALL_SIGNAL),
           "after stop SIGPROF and the wall signal are ignored");
        sp_sampler_get_stats(&st);
        before = st.samples;
        sp_test_burn(200);
        sp_sampler_get_stats(&st);
        ok(st.samples == before, "no sample after stop (%llu more)",
           (unsigned long long) (st.samples - before));

        /* A start after a stop installs the handler again. */
        ok(sp_sampler_start(&conf, err, sizeof(err)) == 0,
           "starts again (%s)", err);
        ok(!ignored(SIGPROF), "SIGPROF handled again after the restart");
        atomic_store(&stop_threads, 1);
        pthread_join(t1, NULL);
        sp_sampler_stop();
    }
    return done_testing();
}
