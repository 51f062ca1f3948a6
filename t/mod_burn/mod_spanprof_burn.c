/*
 * Test-only Apache module: a content handler that uses CPU in functions
 * with known names, so that the profiling tests can tell from a stack which
 * request ran. Never installed.
 *
 *   <Location /burn>
 *       SetHandler spanprof-burn
 *   </Location>
 *
 *   GET /burn?fn=alpha&ms=300   burns 300 ms of thread CPU time in
 *                               spanprof_apache_burn_alpha() (fn=beta:
 *                               spanprof_apache_burn_beta()), then answers
 *                               "alpha 300 <pid> <tid>\n".
 *   GET /burn?fn=wait&ms=300    answers after 300 ms without using CPU.
 *   GET /burn?fn=offthread      clears the thread's profiling label (the
 *                               OTEP 4947 TLS pointer otel_thread_ctx_v1)
 *                               and then writes its answer: what a thread
 *                               that did not run the handler finds when it
 *                               writes a suspended request's output from
 *                               an MPM callback.
 *   ...&status=500              answers with that status (default 200).
 *   GET /burn?fn=alloc&kb=4096  allocates 4096 KB in 16 KB blocks in
 *                               spanprof_burn_alloc(), freeing each.
 *   GET /burn?fn=leak&kb=1024&max=6144
 *                               allocates 1024 KB in 16 KB blocks in
 *                               spanprof_burn_leak() and never frees them,
 *                               until the child holds max KB.
 *
 *   SetOutputFilter SPANPROF_BURN
 *                               a resource filter (as SSI's or
 *                               mod_substitute's) that burns, each time it
 *                               passes data, the ms given by the
 *                               request's filterms= argument (default 0)
 *                               in spanprof_apache_burn_filter().
 *
 *   SpanprofSpin <iterations>   (server config) runs a register-only loop
 *                               in log_transaction of every request, for
 *                               bench/amplification: the same fixed work
 *                               beside different requests. The child logs at
 *                               exit (notice) how long the loop took on
 *                               average.
 */

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "apr_strings.h"

#include "../spin_loop.h"


module AP_MODULE_DECLARE_DATA spanprof_burn_module;

static volatile uint64_t  spanprof_burn_sink;

/* SpanprofSpin: one setting for the whole server (the bench needs no
 * more); the totals are the child's, from all its threads. */
static long               spanprof_spin_iterations;
static _Atomic uint64_t   spanprof_spin_ns, spanprof_spin_count;


static uint64_t
spanprof_burn_cpu_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}


/* ms of the thread's CPU time in a multiply-add loop, inlined into each
 * burner: the burners differ in name only (noinline keeps them on the
 * stack), so that a stack tells which one ran. */
static inline __attribute__((always_inline)) void
spanprof_burn_loop(long ms, uint64_t x, uint64_t mul, uint64_t add)
{
    uint64_t  end = spanprof_burn_cpu_ns() + (uint64_t) ms * 1000000;
    int       i;

    while (spanprof_burn_cpu_ns() < end) {
        for (i = 0; i < 5000; i++) {
            x = x * mul + add;
        }
        spanprof_burn_sink = x;
    }
}


__attribute__((noinline, visibility("default"))) void
spanprof_apache_burn_alpha(long ms)
{
    spanprof_burn_loop(ms, 1, 6364136223846793005ULL, 1442695040888963407ULL);
}


__attribute__((noinline, visibility("default"))) void
spanprof_apache_burn_beta(long ms)
{
    spanprof_burn_loop(ms, 3, 2862933555777941757ULL, 3037000493ULL);
}


__attribute__((noinline, visibility("default"))) void
spanprof_apache_burn_filter(long ms)
{
    spanprof_burn_loop(ms, 5, 3935559000370003845ULL, 2691343689449507681ULL);
}


/* The calling thread's otel_thread_ctx_v1 set to NULL, as every OTEP 4947
 * writer detaches: dlsym() of a TLS symbol gives the caller's instance. */
static void
spanprof_burn_unlabel(void)
{
    void  **slot = dlsym(RTLD_DEFAULT, "otel_thread_ctx_v1");

    if (slot != NULL) {
        *slot = NULL;
    }
}


#define SPANPROF_BLOCK  (16 * 1024)

/* Escapes every block, so that each malloc/free pair stays (called
 * through this object's PLT: the hooks see it). */
static void *volatile     spanprof_alloc_last;
static _Atomic long       spanprof_leaked_kb;


__attribute__((noinline, visibility("default"))) void
spanprof_burn_alloc(long kb)
{
    long   i;
    char  *p;

    for (i = 0; i < kb * 1024 / SPANPROF_BLOCK; i++) {
        p = malloc(SPANPROF_BLOCK);
        if (p == NULL) {
            return;
        }
        p[0] = (char) i;
        spanprof_alloc_last = p;
        free(p);
    }
}


__attribute__((noinline, visibility("default"))) void
spanprof_burn_leak(long kb, long max_kb)
{
    long   i;
    char  *p;

    for (i = 0; i < kb * 1024 / SPANPROF_BLOCK; i++) {
        if (spanprof_leaked_kb + SPANPROF_BLOCK / 1024 > max_kb) {
            return;
        }
        p = malloc(SPANPROF_BLOCK);
        if (p == NULL) {
            return;
        }
        p[0] = (char) i;
        spanprof_alloc_last = p;               /* never freed */
        spanprof_leaked_kb += SPANPROF_BLOCK / 1024;
    }
}


static const char *
spanprof_burn_arg(request_rec *r, const char *name)
{
    const char  *p, *q;
    apr_size_t   n = strlen(name);

    for (p = r->args; p != NULL && *p; p = q ? q + 1 : NULL) {
        q = strchr(p, '&');
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            return apr_pstrndup(r->pool, p + n + 1,
                                q ? (apr_size_t) (q - p - n - 1)
                                  : strlen(p + n + 1));
        }
    }
    return NULL;
}


static int
spanprof_burn_handler(request_rec *r)
{
    const char  *fn, *ms_s, *st;
    long         ms;

    if (r->handler == NULL || strcmp(r->handler, "spanprof-burn") != 0) {
        return DECLINED;
    }

    fn = spanprof_burn_arg(r, "fn");
    ms_s = spanprof_burn_arg(r, "ms");
    ms = ms_s ? strtol(ms_s, NULL, 10) : 100;
    if (fn == NULL) {
        fn = "alpha";
    }

    if (strcmp(fn, "alpha") == 0) {
        spanprof_apache_burn_alpha(ms);
    } else if (strcmp(fn, "beta") == 0) {
        spanprof_apache_burn_beta(ms);
    } else if (strcmp(fn, "wait") == 0) {
        apr_sleep(apr_time_from_msec(ms));
    } else if (strcmp(fn, "offthread") == 0) {
        spanprof_burn_unlabel();
    } else if (strcmp(fn, "alloc") == 0 || strcmp(fn, "leak") == 0) {
        const char  *kb = spanprof_burn_arg(r, "kb");
        const char  *max = spanprof_burn_arg(r, "max");

        ms = kb ? strtol(kb, NULL, 10) : 1024;
        if (fn[0] == 'a') {
            spanprof_burn_alloc(ms);
        } else {
            spanprof_burn_leak(ms, max ? strtol(max, NULL, 10) : ms);
        }
    } else {
        return HTTP_BAD_REQUEST;
    }

    st = spanprof_burn_arg(r, "status");
    if (st != NULL && strtol(st, NULL, 10) >= 100) {
        r->status = (int) strtol(st, NULL, 10);
    }
    ap_set_content_type(r, "text/plain");
    ap_rprintf(r, "%s %ld %d %ld\n", fn, ms, (int) getpid(),
               (long) syscall(SYS_gettid));
    return OK;
}


static apr_status_t
spanprof_burn_output(ap_filter_t *f, apr_bucket_brigade *bb)
{
    const char  *ms = spanprof_burn_arg(f->r, "filterms");
    apr_off_t    len = 0;

    if (ms != NULL && apr_brigade_length(bb, 0, &len) == APR_SUCCESS
        && len > 0)
    {
        spanprof_apache_burn_filter(strtol(ms, NULL, 10));
    }
    return ap_pass_brigade(f->next, bb);
}


static uint64_t
spanprof_spin_mono_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}


/* The loop of t/spin_loop.h, timed. */
static int
spanprof_spin_log_transaction(request_rec *r)
{
    uint64_t  t0;

    if (spanprof_spin_iterations <= 0 || r->main != NULL) {
        return DECLINED;
    }
    t0 = spanprof_spin_mono_ns();
    spanprof_burn_sink = spanprof_spin_loop((uintptr_t) r,
                                            (unsigned long)
                                            spanprof_spin_iterations);
    spanprof_spin_ns += spanprof_spin_mono_ns() - t0;
    spanprof_spin_count++;
    return DECLINED;
}


static apr_status_t
spanprof_spin_report(void *data)
{
    server_rec  *s = data;
    uint64_t     n = spanprof_spin_count;

    if (n > 0) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     "SpanprofSpin: %" APR_UINT64_T_FMT " loops, %"
                     APR_UINT64_T_FMT " ns each", (apr_uint64_t) n,
                     (apr_uint64_t) (spanprof_spin_ns / n));
    }
    return APR_SUCCESS;
}


static void
spanprof_spin_child_init(apr_pool_t *p, server_rec *s)
{
    if (spanprof_spin_iterations > 0) {
        apr_pool_cleanup_register(p, s, spanprof_spin_report,
                                  apr_pool_cleanup_null);
    }
}


static const char *
spanprof_spin_cmd(cmd_parms *cmd, void *dc, const char *arg)
{
    char  *end;
    long   n;

    n = strtol(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || n < 0 || n > 100000000) {
        return "SpanprofSpin takes a number of iterations (0 to 100000000)";
    }
    spanprof_spin_iterations = n;
    return NULL;
}


static const command_rec  spanprof_burn_cmds[] = {
    AP_INIT_TAKE1("SpanprofSpin", spanprof_spin_cmd, NULL, RSRC_CONF,
                  "iterations of a register-only loop run after each "
                  "request (bench/amplification)"),
    { NULL }
};


static void
spanprof_burn_register_hooks(apr_pool_t *p)
{
    ap_hook_handler(spanprof_burn_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_log_transaction(spanprof_spin_log_transaction, NULL, NULL,
                            APR_HOOK_MIDDLE);
    ap_hook_child_init(spanprof_spin_child_init, NULL, NULL,
                       APR_HOOK_MIDDLE);
    ap_register_output_filter("SPANPROF_BURN", spanprof_burn_output, NULL,
                              AP_FTYPE_RESOURCE);
}


AP_DECLARE_MODULE(spanprof_burn) = {
    STANDARD20_MODULE_STUFF,
    NULL, NULL, NULL, NULL,
    spanprof_burn_cmds,
    spanprof_burn_register_hooks
};
