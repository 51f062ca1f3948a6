/*
 * Profiling in httpd: one sampler per child process, and the binding of
 * each thread's CPU samples to the request whose code it runs.
 *
 * Every thread that serves a request gets its own CPU-time timer the first
 * time it does (post_read_request); prefork's single thread is no
 * different. A thread's labels (the OTEP 4947 record pointer) name a
 * request while the thread runs code for it, and nothing otherwise:
 *
 *   attach  post_read_request (when the ids cannot change later: no
 *           incoming traceparent, or no OtelTraceContext inside a section;
 *           otherwise translate_name, right after the first <Location>
 *           walk), translate_name and fixups (the record is refilled with
 *           the final per-directory settings and route), handler entry,
 *           the request's output filter (only when a module not known to
 *           pass a request's output on its handler's thread alone is
 *           loaded), and log_transaction (which may run later, when the
 *           last bytes are written);
 *   detach  post_read_request (a new request starts on this thread), the
 *           end of log_transaction (the labels it found are restored), the
 *           request pool's cleanup, and the connection boundaries:
 *           pre_connection, process_connection (each time a thread takes a
 *           connection up), pre_close_connection and suspend_connection
 *           (event: the connection goes back to the listener or is handed
 *           on), and on an h2 worker once its stream passed the request's
 *           EOR bucket (SPANPROF_C2_END).
 *
 * A record is never freed memory (common/profile/record_pool.h): the pool
 * cleanup gives it back marked invalid, so a thread whose labels were not
 * cleared in time (the request pool destroyed on another thread, as
 * mod_http2 does) reads an invalid or reused record, never freed memory.
 *
 * With the event MPM a connection in write completion may be resumed by
 * another thread (resume_connection): that thread is labelled with the
 * connection's unfinished request, since what it runs then (the core output
 * filter, the request's log_transaction) is that request's code.
 */

#include <signal.h>
#include <pthread.h>

#include "httpd.h"
#include "http_config.h"
#include "http_connection.h"
#include "http_log.h"
#include "http_request.h"
#include "mpm_common.h"
#include "util_filter.h"

#include "mod_spanprof.h"
#include "common/base/clock.h"
#include "common/profile/alloc_hooks.h"
#include "common/profile/record_pool.h"
#include "common/profile/sampler.h"

APLOG_USE_MODULE(spanprof);


static int                    spanprof_sampling_on;
static int                    spanprof_alloc_hooked;
/* A thread's profiling: 0 not set up yet, SPANPROF_THREAD_FAILED, or
 * SPANPROF_THREAD_OK with SPANPROF_THREAD_WALL while its wall time counts
 * (marked active for the sampler's ticker; spanprof_wall_serving). */
#define SPANPROF_THREAD_OK      1
#define SPANPROF_THREAD_WALL    2
#define SPANPROF_THREAD_FAILED  (-1)
static __thread int           spanprof_thread_state;
static ap_filter_rec_t       *spanprof_bind_filter;
static ap_filter_rec_t       *spanprof_c2_end_filter;

static void spanprof_thread_arm(void);


int
spanprof_sampling(void)
{
    return spanprof_sampling_on;
}


/* The calling thread serves requests: arm its CPU timer once. */
void
spanprof_thread_serves(void)
{
    if (spanprof_sampling_on && spanprof_thread_state == 0) {
        spanprof_thread_arm();
    }
}


/* A new request starts on this thread (post_read_request): nothing else
 * runs here now; its timer is armed on its first request. One call and
 * one access to the thread's state for both. */
void
spanprof_request_starts(void)
{
    if (spanprof_sampling_on) {
        sp_thread_ctx_detach();
        if (spanprof_thread_state == 0) {
            spanprof_thread_arm();
        }
    }
}


static void
spanprof_thread_arm(void)
{
    sigset_t  set;

    /* httpd's threaded MPMs block every asynchronous signal in their
     * threads; the timer's SIGPROF is directed at this thread. */
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    sigaddset(&set, SP_SAMPLER_WALL_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);

    /* Its wall time counts only while it serves a request. */
    if (sp_sampler_thread_register_on_demand() != 0) {
        spanprof_thread_state = SPANPROF_THREAD_FAILED;
        ap_log_error(APLOG_MARK, APLOG_ERR, errno, spanprof_main_server,
                     "spanprof: the CPU timer of a thread could not be set; "
                     "its requests are not profiled");
        return;
    }
    spanprof_thread_state = SPANPROF_THREAD_OK;
}


/* Labels the thread with a profiled request's record and marks its
 * wall time as counting for the ticker (spanprof_wall_serving(1), with the
 * thread's state at hand). */
static void
spanprof_profile_attach(sp_thread_ctx_record_t *rec)
{
    int  *st = &spanprof_thread_state;

    sp_thread_ctx_attach(rec);
    if (*st == SPANPROF_THREAD_OK
        && (sp_sampler_types() & SP_SAMPLER_TYPE_WALL))
    {
        sp_sampler_wall_active(1);
        *st = SPANPROF_THREAD_OK | SPANPROF_THREAD_WALL;
    }
}


/* OtelProfiling On, or its expression true for r. */
static int
spanprof_profiles(request_rec *r, const spanprof_dir_conf_t *dc)
{
    int          rv;
    const char  *err = NULL, *v;

    if (dc->profiling != SPANPROF_PROFILING_EXPR) {
        return dc->profiling == 1;
    }
    if (dc->profiling_string) {
        v = ap_expr_str_exec(r, dc->profiling_expr, &err);
        rv = err == NULL && v != NULL && v[0] != '\0' && strcmp(v, "0") != 0
             && strcasecmp(v, "off") != 0;
    } else {
        rv = ap_expr_exec(r, dc->profiling_expr, &err) > 0;
    }
    if (err != NULL) {
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r,
                      "spanprof: OtelProfiling expression %s:%u failed, "
                      "request not profiled: %s",
                      dc->profiling_expr->filename,
                      dc->profiling_expr->line_number, err);
        return 0;
    }
    return rv;
}


/* At log_transaction of a request whose samples wait for a verdict: its
 * final settings' keep rules decide; the verdict goes to the profile
 * builder if the request has samples. A traced request reads the clock
 * once for the rule and its span's end; an untraced one the tick's time
 * (keep_rules.h). */
void
spanprof_keep_verdict(request_rec *r, spanprof_ctx_t *ctx, int traced)
{
    int                         keep, failed;
    uint64_t                    end_ns = 0;
    request_rec                *last = spanprof_last(r);
    const spanprof_dir_conf_t  *dc = spanprof_dir_conf(last);

    failed = ctx->nattempts > 0 && ctx->proxy_done && !ctx->peer_answered;
    if (dc->keep.flags & SP_KEEP_SLOW) {
        end_ns = sp_keep_end_ns(traced);
        if (traced) {
            ctx->end_ns = end_ns;
        }
    }
    keep = sp_keep_rules_match(&dc->keep,
                               end_ns > ctx->start_ns
                               ? end_ns - ctx->start_ns : 0,
                               last->status, failed, ctx->record->sp_cpu_ns);
    /* Samples were taken (its CPU or wall time counts them): they wait for
     * this. Its allocations are not counted in the record: with memory
     * profiling on, any request may have allocation samples waiting. */
    if ((ctx->record->sp_cpu_ns > 0 || ctx->record->sp_wall_ns > 0
         || (spanprof_alloc_hooked && sp_alloc_sampler_enabled()))
        && sp_keep_send(ctx->span_id, keep) != 0)
    {
        keep = 0;
    }
    ctx->unkept = !keep;
}


/* Decides whether the request is profiled with the settings in effect for
 * r now, and (re)fills its record; called again after the final
 * per-directory merge and after internal redirects. */
void
spanprof_profile_request(request_rec *r, spanprof_ctx_t *ctx)
{
    int                         mi;
    uint8_t                     flags;
    const spanprof_names_t     *names;
    int                        *st;
    const spanprof_dir_conf_t  *dc;
    sp_thread_ctx_record_t     *rec;

    if (!spanprof_sampling_on) {
        return;
    }

    dc = spanprof_dir_conf(r);
    rec = ctx->record;
    st = &spanprof_thread_state;
    if (!spanprof_profiles(r, dc) || *st <= 0) {
        if (ctx->profiled) {
            ctx->profiled = 0;
            if (sp_thread_ctx_current() == ctx->record) {
                sp_thread_ctx_detach();
            }
        }
        return;
    }

    /* The name is a lookup (spanprof_names); the method's index is kept
     * from the request's first call while r->method stays. */
    mi = spanprof_ctx_method_index(r, ctx);
    names = spanprof_names(dc);
    flags = spanprof_flags(ctx);

    if (rec == NULL) {
        /* Never freed memory: mod_http2 frees a stream's pool on another
         * thread than the h2 worker that ran it, which may still point its
         * labels here (spanprof_ctx_cleanup gives the record back). */
        rec = sp_record_pool_get();
        if (rec == NULL) {
            ctx->profiled = 0;
            return;
        }
        ctx->record = rec;
        /* Its own trailing fields add up over the request (keep rules). */
        rec->sp_cpu_ns = 0;
        rec->sp_keep = 0;
        rec->sp_wall_ns = 0;
        rec->sp_off_cpu_ns = 0;
        ctx->record_name = NULL;
    }
    ctx->record_dc = dc;

    /* Called up to three times per request (post_read_request,
     * translate_name, fixups): the ids stay, the name may change with the
     * route (translate_name) and the flags with the sampling decision.
     * Refilled in place, attached or not: the record is invalid while it
     * is written (sp_thread_ctx_record_init), so a sample taken meanwhile
     * on this thread, or by a profiler that stops it, has no labels and
     * never half a name. Its trailing fields (the CPU time so far) stay. */
    if (!ctx->profiled || ctx->record_name != names->name[mi]
        || ctx->record_flags != flags)
    {
        sp_thread_ctx_record_init(rec, ctx->trace_id, ctx->span_id, flags,
                                  names->name[mi], names->len[mi]);
        ctx->record_name = names->name[mi];
        ctx->record_method = r->method;
        ctx->record_mi = (uint8_t) mi;
        ctx->record_flags = flags;
        ctx->profiled = 1;
    }

    /* Once some section's keep rules applied, the samples wait for the
     * verdict, which the final settings give. */
    if (!sp_keep_rules_all(&dc->keep) && sp_keep_started()) {
        rec->sp_keep = 1;
    }
    if (sp_thread_ctx_current() != rec) {
        spanprof_profile_attach(rec);
    }
}


/* spanprof_profile_request at fixups: nearly always the settings
 * translate_name filled the record with (the <Location> merge gives the
 * same pointer when no <Directory> sets ours), no expression, the same
 * method and flags, and no keep rules to start: the record holds what a
 * refill would write, and only the labels are checked. */
void
spanprof_profile_final(request_rec *r, spanprof_ctx_t *ctx)
{
    const spanprof_dir_conf_t  *dc;

    if (!spanprof_sampling_on) {
        return;
    }
    dc = spanprof_dir_conf(r);
    if (ctx->profiled && ctx->record_dc == dc && dc->profiling == 1
        && ctx->record_method == r->method
        && ctx->record_flags == spanprof_flags(ctx)
        && sp_keep_rules_all(&dc->keep))
    {
        if (sp_thread_ctx_current() != ctx->record) {
            spanprof_profile_attach(ctx->record);
        }
        return;
    }
    spanprof_profile_request(r, ctx);
}


/* Labels cleared, wall time off: the thread waits (the end of a
 * request, a keep-alive wait, a closed connection). */
static inline void
spanprof_unlabel(void)
{
    int  *st = &spanprof_thread_state;

    sp_thread_ctx_detach();
    if (*st == (SPANPROF_THREAD_OK | SPANPROF_THREAD_WALL)) {
        sp_sampler_wall_active(0);
        *st = SPANPROF_THREAD_OK;
    }
}


/* The request is done (the end of its log_transaction): the thread's
 * labels are cleared and its wall time, if on, switched off; the thread
 * waits for the next one. */
void
spanprof_request_ends(void)
{
    if (spanprof_sampling_on) {
        spanprof_unlabel();
    }
}


/* The thread serves a profiled request (1) or no longer (0): its wall
 * time counts only meanwhile (the sampler's ticker signals it only then,
 * sampler.h), so that a thread waiting for a connection or a keep-alive
 * request is never woken. Called at each request's start and end and
 * around each keep-alive wait: with wall sampling off (the types the
 * sampler has now, which the control API may change) nothing is switched
 * on, and a thread not switched on has nothing to switch off; no call
 * into the sampler. */
void
spanprof_wall_serving(int on)
{
    int  *st = &spanprof_thread_state;

    if (on) {
        if (*st == SPANPROF_THREAD_OK && spanprof_sampling_on
            && (sp_sampler_types() & SP_SAMPLER_TYPE_WALL))
        {
            sp_sampler_wall_active(1);
            *st = SPANPROF_THREAD_OK | SPANPROF_THREAD_WALL;
        }
    } else if (*st == (SPANPROF_THREAD_OK | SPANPROF_THREAD_WALL)) {
        sp_sampler_wall_active(0);
        *st = SPANPROF_THREAD_OK;
    }
}


/* ---- connection boundaries ------------------------------------------------ */

/* A secondary connection (mod_http2's stream, c->master set) ends its
 * request on the h2 worker thread by passing the EOR bucket; the bucket's
 * destruction (log_transaction, the request pool's cleanup) happens later
 * on the primary connection's thread, which cannot clear this thread's
 * labels. So the worker lets go of them here, once the EOR is passed on. */
static apr_status_t
spanprof_c2_end_output(ap_filter_t *f, apr_bucket_brigade *bb)
{
    apr_bucket    *b;
    apr_status_t   rv;
    int            eor = 0;

    for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb);
         b = APR_BUCKET_NEXT(b))
    {
        if (AP_BUCKET_IS_EOR(b)) {
            eor = 1;
            break;
        }
    }
    rv = ap_pass_brigade(f->next, bb);
    if (eor) {
        sp_thread_ctx_detach();
    }
    return rv;
}


static int
spanprof_pre_connection(conn_rec *c, void *csd)
{
    /* A backend connection (mod_proxy's, c->outgoing) is made by the
     * request this thread serves: its labels stay. */
    if (spanprof_sampling_on && !c->outgoing) {
        sp_thread_ctx_detach();
        if (c->master != NULL) {
            ap_add_output_filter_handle(spanprof_c2_end_filter, NULL, NULL,
                                        c);
        }
    }
    return OK;
}


static int
spanprof_process_connection(conn_rec *c)
{
    if (spanprof_sampling_on) {
        sp_thread_ctx_detach();
    }
    return DECLINED;
}


static int
spanprof_pre_close_connection(conn_rec *c)
{
    if (spanprof_sampling_on) {
        spanprof_unlabel();
    }
    return OK;
}


static void
spanprof_suspend_connection(conn_rec *c, request_rec *r)
{
    if (spanprof_sampling_on) {
        spanprof_unlabel();
    }
}


static void
spanprof_resume_connection(conn_rec *c, request_rec *r)
{
    spanprof_conn_t  *cc;

    if (!spanprof_sampling_on) {
        return;
    }
    sp_thread_ctx_detach();

    cc = ap_get_module_config(c->conn_config, &spanprof_module);
    if (cc != NULL && cc->active != NULL && cc->active->profiled
        && !cc->active->logged)
    {
        spanprof_thread_serves();
        if (spanprof_thread_state > 0) {
            sp_thread_ctx_attach(cc->active->record);
            spanprof_wall_serving(1);
        }
    }
}


/* ---- the request's output ------------------------------------------------- */

static apr_status_t
spanprof_bind_output(ap_filter_t *f, apr_bucket_brigade *bb)
{
    spanprof_ctx_t  *ctx = f->ctx;

    if (ctx != NULL && ctx->profiled && !ctx->logged
        && spanprof_thread_state > 0)
    {
        sp_thread_ctx_attach(ctx->record);
    }
    return ap_pass_brigade(f->next, bb);
}


/* The request's output passed through its filters on another thread than
 * its handler's (on which the handler hook labelled it) is labelled here.
 * httpd's modules known to spanprof never do that (mod_spanprof.c's
 * spanprof_known): with them alone the filter would only label a thread
 * labelled already, and adding it costs httpd ≈ 150 instructions a
 * request, and ≈ 60 more for its passes. */
static void
spanprof_insert_filter(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    if (!spanprof_sampling_on || spanprof_globals.foreign_module == NULL
        || r->main != NULL)
    {
        return;
    }
    ctx = spanprof_get_ctx(r, 0);
    if (ctx != NULL && ctx->profiled) {
        ap_add_output_filter_handle(spanprof_bind_filter, ctx, r,
                                    r->connection);
    }
}


void
spanprof_register_profiling_hooks(void)
{
    ap_hook_pre_connection(spanprof_pre_connection, NULL, NULL,
                           APR_HOOK_REALLY_FIRST);
    ap_hook_process_connection(spanprof_process_connection, NULL, NULL,
                               APR_HOOK_REALLY_FIRST);
    ap_hook_pre_close_connection(spanprof_pre_close_connection, NULL, NULL,
                                 APR_HOOK_REALLY_FIRST);
    ap_hook_suspend_connection(spanprof_suspend_connection, NULL, NULL,
                               APR_HOOK_REALLY_LAST);
    ap_hook_resume_connection(spanprof_resume_connection, NULL, NULL,
                              APR_HOOK_REALLY_FIRST);
    ap_hook_insert_filter(spanprof_insert_filter, NULL, NULL,
                          APR_HOOK_MIDDLE);

    /* Below every content filter's type, the resource filters' (SSI's,
     * mod_substitute's) included: the first to run on a thread that
     * writes the output of a request whose handler ran elsewhere. */
    spanprof_bind_filter = ap_register_output_filter("SPANPROF_BIND",
                                                     spanprof_bind_output,
                                                     NULL,
                                                     (ap_filter_type)
                                                     (AP_FTYPE_RESOURCE - 1));
    spanprof_c2_end_filter = ap_register_output_filter("SPANPROF_C2_END",
                                 spanprof_c2_end_output, NULL,
                                 AP_FTYPE_CONNECTION);
}


/* Our entry taken out of a hook's registered functions (the array httpd
 * runs them from, public through ap_hook_get_NAME). */
#define SPANPROF_UNHOOK(name, fn)                                           \
    do {                                                                    \
        apr_array_header_t   *a_ = ap_hook_get_##name();                    \
        ap_LINK_##name##_t   *l_;                                           \
        int                   i_, j_;                                       \
                                                                            \
        if (a_ != NULL) {                                                   \
            l_ = (ap_LINK_##name##_t *) (void *) a_->elts;                  \
            for (i_ = j_ = 0; i_ < a_->nelts; i_++) {                       \
                if (l_[i_].pFunc != (fn)) {                                 \
                    l_[j_++] = l_[i_];                                      \
                }                                                           \
            }                                                               \
            a_->nelts = j_;                                                 \
        }                                                                   \
    } while (0)

/* Without any OtelProfiling directive nothing samples in this
 * configuration's children, and the connection hooks above would only
 * find spanprof_sampling_on clear: each costs its call through httpd's
 * runner anyway (resume and suspend, ≈ 26 each, run for every request of
 * a keep-alive connection under the event MPM). They are taken out of
 * httpd's lists once the configuration is read. A graceful restart
 * clears every module's hooks and registers them again before the new
 * configuration is read, so one that profiles has them all. */
void
spanprof_unhook_profiling(void)
{
    SPANPROF_UNHOOK(pre_connection, spanprof_pre_connection);
    SPANPROF_UNHOOK(process_connection, spanprof_process_connection);
    SPANPROF_UNHOOK(pre_close_connection, spanprof_pre_close_connection);
    SPANPROF_UNHOOK(suspend_connection, spanprof_suspend_connection);
    SPANPROF_UNHOOK(resume_connection, spanprof_resume_connection);
    SPANPROF_UNHOOK(insert_filter, spanprof_insert_filter);
}


/* ---- child process -------------------------------------------------------- */

int
spanprof_profiling_start(server_rec *s, spanprof_srv_conf_t *sc)
{
    char               err[256];
    sp_sampler_conf_t  conf;

    memset(&conf, 0, sizeof(conf));
    conf.rate_hz = (unsigned) sc->profiling_rate;
    conf.wall_rate_hz = (unsigned) sc->profiling_wall_rate;
    conf.types = (unsigned) sc->profiling_types;
    conf.max_depth = (unsigned) sc->profiling_max_depth;
    /* A few seconds of samples at the full rate for every thread: the
     * exporter thread drains the ring every 200 ms. */
    conf.ring_capacity = 8 * (size_t) sc->profiling_rate < 2048
                         ? 2048 : 8 * (size_t) sc->profiling_rate;

    if (sp_sampler_start(&conf, err, sizeof(err)) != 0) {
        ap_log_error(APLOG_MARK, APLOG_ALERT, 0, s,
                     "spanprof: profiling disabled: %s", err);
        return -1;
    }
    /* Acted on by the exporter thread's tick, once a second. */
    sp_load_shedder_configure(&sc->profiling_shed);
    if (spanprof_globals.keep_used
        && sp_keep_start(SP_KEEP_CHANNEL_CAPACITY) != 0)
    {
        ap_log_error(APLOG_MARK, APLOG_ALERT, 0, s, "spanprof: keep rules "
                     "off: out of memory; every request keeps its labels");
    }
    spanprof_sampling_on = 1;

    /* Memory: the allocator calls of every object of this child, hooked
     * here, on the child's main thread before its worker threads start,
     * as the sampler was started (both may write libunwind's read-only
     * GOT page). Never in the parent: it forks the children (prefork: a
     * hooked parent would hand hooks to children) and a graceful restart
     * unloads the module there; a child keeps its own copy mapped until
     * it exits, and unhooks first (spanprof_profiling_stop, from the
     * child pool's cleanup). New objects are hooked by the exporter. */
    if (sc->profiling_types & SP_SAMPLER_TYPE_MEMORY) {
        sp_alloc_hooks_conf_t  hc;

        memset(&hc, 0, sizeof(hc));
        hc.sampler.mean_bytes = (size_t) sc->profiling_memory_interval;
        /* Allocation stacks are kept to SP_ALLOC_DEPTH_MAX frames. */
        hc.sampler.max_depth = sc->profiling_max_depth > SP_ALLOC_DEPTH_MAX
                               ? SP_ALLOC_DEPTH_MAX
                               : (unsigned) sc->profiling_max_depth;
        if (sp_alloc_hooks_install(&hc, err, sizeof(err)) != 0) {
            ap_log_error(APLOG_MARK, APLOG_ALERT, 0, s, "spanprof: memory "
                         "profiling disabled: %s", err);
        } else {
            spanprof_alloc_hooked = 1;
        }
    }
    return 0;
}


void
spanprof_profiling_stop(void)
{
    if (!spanprof_sampling_on) {
        return;
    }
    spanprof_sampling_on = 0;
    sp_sampler_stop();
    if (spanprof_alloc_hooked) {
        /* Before the module is unmapped: nothing may jump into it. */
        spanprof_alloc_hooked = 0;
        if (sp_alloc_hooks_uninstall(0) != 0) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, NULL, "spanprof: a "
                         "thread stayed in the allocation hooks: the "
                         "module stays mapped");
        }
    }
    sp_thread_ctx_detach();
}
