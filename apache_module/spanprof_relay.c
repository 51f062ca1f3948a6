/*
 * prefork: one exporter process for all the children. A prefork child
 * serves one request at a time; an exporter thread and a libcurl
 * connection of its own in each child cost it the kernel's and glibc's
 * single-thread fast paths, and post a child's few spans at a time
 * (bench/request_path.md, "prefork: one clock scale for the server, and
 * the children without their exporter thread"). Instead each child writes
 * its spans into a queue of memory the parent mapped before forking (a
 * slot of common/trace/span_slots.h), and one exporter process, forked by
 * the parent as mod_cgid forks its daemon, takes them from every slot and
 * sends them. The parent starts it again if it dies. When httpd stops it
 * stops it (its spans flushed, within OtelExporterShutdownTimeout) and
 * waits. At a restart it does not wait: no child accepts a connection
 * until the parent has read the configuration again and forked the next
 * generation, so a flush waited for there (the whole shutdown timeout with
 * a collector that hangs) would be that long an outage. The old process
 * lets the slots go to the next one at once (span_slots.h lets one
 * consumer read at a time) and flushes what it took alone; the next
 * generation reaps it.
 *
 * The slots live as long as the parent: the children of an old generation
 * finishing their requests after a graceful restart write into the same
 * queues the new exporter process reads.
 */

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_core.h"
#include "http_main.h"
#include "ap_listen.h"
#include "ap_mpm.h"
#include "mpm_common.h"
#include "apr_thread_proc.h"

#include "mod_spanprof.h"
#include "common/control/control_tick.h"

APLOG_USE_MODULE(spanprof);

#define SPANPROF_RELAY_KEY    "spanprof_relay_slots"
/* Slots beyond ServerLimit: a child of an old generation may still hold
 * its slot while the process in its scoreboard slot has been replaced. */
#define SPANPROF_RELAY_SPARE  16
/* A child's queue holds its spans only until the exporter process's next
 * take, 10 ms on (about 500 spans: a child serving 50,000 requests a
 * second); the batches wait in the exporter process's own queue. Sized as
 * a child's own queue (batch_size x batch_count KiB, 8 MiB with make
 * bench's batches) each child's went round its buffer, and the exporter
 * process with it: page faults in both for the first 20,000 spans of each
 * child, and 40 times the memory (bench/request_path.md). */
#define SPANPROF_RELAY_SLOT_BYTES  (256 * 1024)
/* An exporter process that dies sooner than this after its start is not
 * started again at once (one that dies at once must not make the parent
 * fork without pause). prefork looks for dead processes once a second: one
 * dead at its start is reaped about a second after it (first written as
 * one second, the rule never held: the test saw one fork a second). */
#define SPANPROF_RELAY_RESPAWN_USEC  apr_time_from_sec(3)
/* Old generations' exporter processes still flushing, at most; one more
 * restart within their shutdown timeout waits for its own. */
#define SPANPROF_RELAY_OLD_MAX  8
#define SPANPROF_RELAY_OLD_KEY  "spanprof_relay_old"


typedef struct {
    sp_span_slots_t          *slots;
    sp_exporter_conf_t        ec;
    sp_resource_t             res;
    server_rec               *s;
    apr_pool_t               *pconf;
    spanprof_attach_fn        attach;
    apr_proc_t                proc;        /* .pid 0: not running */
    pid_t                     parent;      /* the process that forks it */
    /* In apr's list of other children (apr_proc_other_child_unregister
     * must not be called otherwise: it dereferences what it finds). */
    int                       registered;
    apr_time_t                started;
    apr_time_t                respawn_at;  /* 0: none due */
    int                       stopping;
} spanprof_relay_t;

/* This generation's; NULL: the children export on their own. Inherited by
 * the children (and the exporter process). */
static spanprof_relay_t  *spanprof_relay;

/* An old generation's exporter process flushing after a restart. Kept in
 * the parent's process pool (the module's statics are gone with its
 * reload) and reaped as one of apr's other children by whichever
 * generation runs when it exits; killed if it outlives its deadline. */
typedef struct {
    apr_proc_t                proc;        /* .pid 0: a free entry */
    apr_time_t                deadline;
    int                       registered;  /* with this generation */
    int                       killed;
} spanprof_relay_old_t;

typedef struct {
    spanprof_relay_old_t      old[SPANPROF_RELAY_OLD_MAX];
    pid_t                     parent;
} spanprof_relay_olds_t;


/* The slots: made once per parent (kept in its process pool across
 * restarts, whose module reload forgets statics), again only when a new
 * configuration needs more or larger ones. */
static sp_span_slots_t *
spanprof_relay_slots(server_rec *s, size_t nslots, size_t bytes)
{
    void             *data = NULL;
    sp_span_slots_t  *slots;
    apr_pool_t       *pp = s->process->pool;

    apr_pool_userdata_get(&data, SPANPROF_RELAY_KEY, pp);
    slots = data;
    if (slots != NULL && sp_span_slots_count(slots) >= nslots
        && sp_span_slots_queue_bytes(slots) >= bytes)
    {
        return slots;
    }
    /* A smaller one stays mapped: old children may still write into it
     * (and lose what they write after their exporter process stopped). */
    slots = sp_span_slots_create(nslots, bytes);
    if (slots != NULL) {
        apr_pool_userdata_set(slots, SPANPROF_RELAY_KEY, NULL, pp);
    }
    return slots;
}

/* ---- the exporter process ------------------------------------------------- */

/* The first stop signal (or the parent gone: -1). */
static int
spanprof_relay_wait(const sigset_t *stop, pid_t parent)
{
    int              sig;
    struct timespec  second = { 1, 0 };

    for ( ;; ) {
        sig = sigtimedwait(stop, NULL, &second);
        if (sig > 0) {
            return sig;
        }
        if (getppid() != parent) {
            return -1;
        }
    }
}


static void
spanprof_relay_main(spanprof_relay_t *rl, pid_t parent)
{
    char            err[256];
    int             sig, restart;
    sigset_t        stop, all;
    sp_exporter_t  *e;
    apr_time_t      until;

    /* Gone with the parent, whatever becomes of it; named for ps and
     * top (its thread takes the name too). */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_NAME, "spanprof-export");
    if (getppid() != parent) {
        _exit(0);
    }
    /* Signals wait for sigtimedwait below; the exporter's thread inherits
     * the mask. httpd's handlers, inherited from the parent, never run. */
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    sigemptyset(&stop);
    /* Stop at httpd's: stop, restart, graceful restart and graceful stop
     * (the parent may signal its whole process group). */
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    sigaddset(&stop, SIGUSR1);
    sigaddset(&stop, SIGWINCH);
    sigaddset(&stop, SIGUSR2);          /* the parent's, at a restart */

    /* A process that cannot export stays, idle, until it is stopped: one
     * that exited would be started again, and fail again. The children's
     * queues fill, and their drops are counted. */
    ap_close_listeners();
    if (ap_run_drop_privileges(rl->pconf, rl->s) != 0) {
        ap_log_error(APLOG_MARK, APLOG_ALERT, 0, rl->s, "spanprof: the "
                     "exporter process could not drop its privileges: no "
                     "span of the children is sent");
        (void) spanprof_relay_wait(&stop, parent);
        _exit(0);
    }
    if (rl->attach != NULL) {
        rl->attach(rl->pconf, rl->s);
    }

    rl->ec.relay = rl->slots;
    rl->ec.profiling = 0;
    rl->ec.tick = sp_control_tick;
    e = sp_exporter_start(&rl->ec, err, sizeof(err));
    if (e == NULL) {
        ap_log_error(APLOG_MARK, APLOG_ALERT, 0, rl->s, "spanprof: the "
                     "exporter process cannot export (%s): no span of the "
                     "children is sent", err);
        (void) spanprof_relay_wait(&stop, parent);
        sp_control_worker_detach();
        _exit(0);
    }
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, rl->s, "spanprof: exporter "
                 "process %ld sends the spans of %lu slots",
                 (long) getpid(), (unsigned long)
                 sp_span_slots_count(rl->slots));
    sig = spanprof_relay_wait(&stop, parent);
    /* A restart: the parent's (SIGUSR2, at any restart) or httpd's own
     * signal to its process group at `-k restart` (SIGHUP), whichever comes
     * first. The next generation's exporter process takes the slots now,
     * the last spans of the children finishing included; this one sends
     * what it took. */
    restart = sig == SIGUSR2 || sig == SIGHUP;
    if (restart) {
        sp_exporter_relay_handover(e);
    }
    /* httpd stopping signals its children and this process at once: the
     * children finishing their requests still write spans. They are waited
     * for, up to half the shutdown timeout (the exporter's thread sends
     * meanwhile), then what they queued is taken and sent within the
     * shutdown timeout. */
    until = apr_time_now()
            + apr_time_from_msec(restart
                                 ? 0 : rl->ec.shutdown_timeout_ms / 2);
    while (sp_span_slots_live(rl->slots) > 0 && apr_time_now() < until) {
        apr_sleep(apr_time_from_msec(10));
    }
    sp_exporter_stop(e);
    sp_control_worker_detach();
    _exit(0);
}


/* ---- the parent ----------------------------------------------------------- */

static void spanprof_relay_maint(int reason, void *data, apr_wait_t status);

static int
spanprof_relay_spawn(spanprof_relay_t *rl)
{
    apr_status_t  rv;
    pid_t         parent = getpid();

    rl->started = apr_time_now();
    rl->respawn_at = 0;
    rv = apr_proc_fork(&rl->proc, rl->pconf);
    if (rv == APR_INCHILD) {
        spanprof_relay_main(rl, parent);
        _exit(0);       /* not reached */
    }
    if (rv != APR_INPARENT) {
        rl->proc.pid = 0;
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, rl->s, "spanprof: cannot "
                     "fork the exporter process: spans are dropped as the "
                     "children's queues fill");
        return -1;
    }
    apr_proc_other_child_register(&rl->proc, spanprof_relay_maint, rl, NULL,
                                  rl->pconf);
    rl->registered = 1;
    return 0;
}


/* The parent reaped it (or asks after it). */
static void
spanprof_relay_maint(int reason, void *data, apr_wait_t status)
{
    spanprof_relay_t  *rl = data;
    int                state;

    switch (reason) {
    case APR_OC_REASON_DEATH:
    case APR_OC_REASON_LOST:
        if (rl->registered) {
            rl->registered = 0;     /* first: unregister calls back */
            apr_proc_other_child_unregister(rl);
        }
        rl->proc.pid = 0;
        /* httpd stopping or restarting signals it with its children. */
        if (rl->stopping
            || (ap_mpm_query(AP_MPMQ_MPM_STATE, &state) == APR_SUCCESS
                && state == AP_MPMQ_STOPPING))
        {
            break;
        }
        /* One that died within seconds of its start is started again by
         * the monitor hook (httpd runs it every ten seconds or so), not
         * here: no fork loop. The children's queues hold their spans
         * meanwhile. */
        if (apr_time_now() - rl->started < SPANPROF_RELAY_RESPAWN_USEC) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, rl->s, "spanprof: the "
                         "exporter process exited (status %d) within %d s "
                         "of its start: starting it again at the next "
                         "monitor pass", (int) status,
                         (int) apr_time_sec(SPANPROF_RELAY_RESPAWN_USEC));
            rl->respawn_at = rl->started + SPANPROF_RELAY_RESPAWN_USEC;
            break;
        }
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, rl->s, "spanprof: the exporter "
                     "process exited (status %d): starting it again",
                     (int) status);
        (void) spanprof_relay_spawn(rl);
        break;
    case APR_OC_REASON_UNREGISTER:
        /* Also from apr's own cleanup of pconf, before ours. */
        rl->registered = 0;
        break;
    case APR_OC_REASON_RESTART:
    case APR_OC_REASON_RUNNING:
    case APR_OC_REASON_UNWRITABLE:
    default:
        break;
    }
}


/* Waits for an exporter process to exit, up to until; then kills it
 * (logged) and reaps it. */
static void
spanprof_relay_reap(pid_t pid, apr_time_t until, server_rec *s)
{
    int  st;

    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (apr_time_now() >= until) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, "spanprof: the "
                         "exporter process %ld did not stop in time: killed",
                         (long) pid);
            kill(pid, SIGKILL);
            (void) waitpid(pid, &st, 0);
            return;
        }
        apr_sleep(apr_time_from_msec(2));
    }
}


/* ---- old generations' exporter processes ---------------------------------- */

static spanprof_relay_olds_t *
spanprof_relay_olds(server_rec *s, int create)
{
    void        *data = NULL;
    apr_pool_t  *pp = s->process->pool;

    apr_pool_userdata_get(&data, SPANPROF_RELAY_OLD_KEY, pp);
    if (data == NULL && create) {
        data = apr_pcalloc(pp, sizeof(spanprof_relay_olds_t));
        apr_pool_userdata_set(data, SPANPROF_RELAY_OLD_KEY, NULL, pp);
    }
    return data;
}

static void
spanprof_relay_old_maint(int reason, void *data, apr_wait_t status)
{
    spanprof_relay_old_t  *o = data;

    switch (reason) {
    case APR_OC_REASON_DEATH:
    case APR_OC_REASON_LOST:
        if (o->registered) {
            o->registered = 0;      /* first: unregister calls back */
            apr_proc_other_child_unregister(o);
        }
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, ap_server_conf, "spanprof: "
                     "the previous configuration's exporter process %ld "
                     "has ended (status %d)", (long) o->proc.pid,
                     (int) status);
        o->proc.pid = 0;
        break;
    case APR_OC_REASON_UNREGISTER:
        o->registered = 0;
        break;
    default:
        break;
    }
}

/* httpd stops: the old ones still flushing are waited for, each up to its
 * deadline. At a restart the next generation adopts them instead. */
static apr_status_t
spanprof_relay_olds_stop(void *data)
{
    server_rec             *s = data;
    spanprof_relay_olds_t  *olds = spanprof_relay_olds(s, 0);
    spanprof_relay_old_t   *o;
    int                     i;

    /* Not in a child's copy of the pool, nor at a restart. */
    if (olds == NULL || getpid() != olds->parent
        || ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_EXITING)
    {
        return APR_SUCCESS;
    }
    for (i = 0; i < SPANPROF_RELAY_OLD_MAX; i++) {
        o = &olds->old[i];
        if (o->proc.pid <= 0) {
            continue;
        }
        if (o->registered) {
            o->registered = 0;
            apr_proc_other_child_unregister(o);
        }
        spanprof_relay_reap(o->proc.pid, o->deadline, s);
        o->proc.pid = 0;
    }
    return APR_SUCCESS;
}

/* Post-config of each generation: the old exporter processes still
 * flushing become its other children (reaped by its MPM, and waited for
 * if httpd stops). */
static void
spanprof_relay_adopt(apr_pool_t *pconf, server_rec *s)
{
    spanprof_relay_olds_t  *olds = spanprof_relay_olds(s, 0);
    spanprof_relay_old_t   *o;
    int                     i, any = 0;

    if (olds == NULL) {
        return;
    }
    olds->parent = getpid();
    for (i = 0; i < SPANPROF_RELAY_OLD_MAX; i++) {
        o = &olds->old[i];
        if (o->proc.pid > 0 && !o->registered) {
            apr_proc_other_child_register(&o->proc, spanprof_relay_old_maint,
                                          o, NULL, pconf);
            o->registered = 1;
            any = 1;
        }
    }
    if (any) {
        apr_pool_cleanup_register(pconf, s, spanprof_relay_olds_stop,
                                  apr_pool_cleanup_null);
    }
}

/* A restart: the exporter process hands the slots over and flushes alone,
 * not waited for. -1: no room to keep it (then it is waited for). */
static int
spanprof_relay_leave(spanprof_relay_t *rl)
{
    spanprof_relay_olds_t  *olds = spanprof_relay_olds(rl->s, 1);
    spanprof_relay_old_t   *o;
    int                     i;

    for (i = 0; i < SPANPROF_RELAY_OLD_MAX; i++) {
        o = &olds->old[i];
        if (o->proc.pid == 0) {
            memset(o, 0, sizeof(*o));
            o->proc = rl->proc;
            /* Its own stop keeps to the shutdown timeout; the join of its
             * thread allows a second more. */
            o->deadline = apr_time_now()
                          + apr_time_from_msec(rl->ec.shutdown_timeout_ms
                                               + 2000);
            kill(o->proc.pid, SIGUSR2);
            return 0;
        }
    }
    return -1;
}

/* The configuration ends. When httpd stops (SIGTERM) the exporter process
 * takes what the children finishing queue until they are gone, or for
 * half the shutdown timeout, flushes and exits, and is waited for
 * (bounded). At a restart (SIGUSR2) it hands the queues over and flushes
 * alone, not waited for: it is kept among the old ones, which the next
 * generation adopts (prefork reaps only its children and apr's "other
 * children": one unknown to it would be reaped as a "long lost child").
 * With no room among them it is waited for. */
static apr_status_t
spanprof_relay_stop(void *data)
{
    spanprof_relay_t  *rl = data;
    pid_t              pid = rl->proc.pid;
    int                exiting;
    uint64_t           ms;

    if (getpid() != rl->parent) {
        return APR_SUCCESS;     /* a child's copy of the pool */
    }
    rl->stopping = 1;
    spanprof_relay = NULL;
    if (pid > 0) {
        if (rl->registered) {
            rl->registered = 0;
            apr_proc_other_child_unregister(rl);
        }
        exiting = ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_EXITING;
        if (!exiting && spanprof_relay_leave(rl) == 0) {
            rl->proc.pid = 0;
            sp_resource_free(&rl->res);
            return APR_SUCCESS;
        }
        kill(pid, exiting ? SIGTERM : SIGUSR2);
        ms = rl->ec.shutdown_timeout_ms
             + (exiting ? rl->ec.shutdown_timeout_ms / 2 : 0) + 1000;
        spanprof_relay_reap(pid, apr_time_now() + apr_time_from_msec(ms),
                            rl->s);
        rl->proc.pid = 0;
    }
    sp_resource_free(&rl->res);
    return APR_SUCCESS;
}


void
spanprof_relay_start(apr_pool_t *pconf, server_rec *s,
    spanprof_srv_conf_t *sc, spanprof_attach_fn attach)
{
    int                threaded = 0, limit = 0;
    spanprof_relay_t  *rl;

    spanprof_relay = NULL;
    /* Not on the first read of the configuration: httpd then goes on to
     * detach, and reads it again before the MPM runs. */
    if (ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return;
    }
    spanprof_relay_adopt(pconf, s);
    if (!spanprof_globals.used
        || (sc->endpoint == NULL && sc->traces_url == NULL)
        || ap_mpm_query(AP_MPMQ_IS_THREADED, &threaded) != APR_SUCCESS
        || threaded != AP_MPMQ_NOT_SUPPORTED
        || ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &limit) != APR_SUCCESS
        || limit <= 0)
    {
        return;
    }

    rl = apr_pcalloc(pconf, sizeof(*rl));
    rl->s = s;
    rl->pconf = pconf;
    rl->parent = getpid();
    rl->attach = attach;
    if (spanprof_exporter_conf(pconf, s, sc, &rl->ec, &rl->res) != 0) {
        return;
    }
    rl->slots = spanprof_relay_slots(s, (size_t) limit + SPANPROF_RELAY_SPARE,
                                     SPANPROF_RELAY_SLOT_BYTES);
    if (rl->slots == NULL) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, errno, s, "spanprof: cannot "
                     "map the children's span queues: each child exports "
                     "its own");
        sp_resource_free(&rl->res);
        return;
    }
    apr_pool_cleanup_register(pconf, rl, spanprof_relay_stop,
                              apr_pool_cleanup_null);
    if (spanprof_relay_spawn(rl) == 0) {
        spanprof_relay = rl;
    }
}


/* The parent, every ten seconds or so: an exporter process that died
 * within seconds of its start is started again. */
static int
spanprof_relay_monitor(apr_pool_t *p, server_rec *s)
{
    spanprof_relay_t       *rl = spanprof_relay;
    spanprof_relay_olds_t  *olds = spanprof_relay_olds(s, 0);
    spanprof_relay_old_t   *o;
    apr_time_t              now = apr_time_now();
    int                     i;

    if (rl != NULL && !rl->stopping && rl->proc.pid == 0
        && rl->respawn_at != 0 && now >= rl->respawn_at)
    {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s, "spanprof: starting the "
                     "exporter process again");
        (void) spanprof_relay_spawn(rl);
    }
    /* An old one past its flush's bound (hung): killed, then reaped. */
    for (i = 0; olds != NULL && i < SPANPROF_RELAY_OLD_MAX; i++) {
        o = &olds->old[i];
        if (o->proc.pid > 0 && !o->killed && now >= o->deadline) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, "spanprof: the "
                         "previous configuration's exporter process %ld did "
                         "not stop in time: killed", (long) o->proc.pid);
            kill(o->proc.pid, SIGKILL);
            o->killed = 1;
        }
    }
    return DECLINED;
}


void
spanprof_register_relay_hooks(void)
{
    ap_hook_monitor(spanprof_relay_monitor, NULL, NULL, APR_HOOK_MIDDLE);
}


static apr_status_t
spanprof_relay_child_exit(void *data)
{
    spanprof_relay_t  *rl = spanprof_relay;

    if (rl != NULL) {
        sp_span_slots_release(rl->slots, (int) (intptr_t) data);
    }
    return APR_SUCCESS;
}


sp_span_queue_t *
spanprof_relay_child_queue(apr_pool_t *p, server_rec *s)
{
    int               slot;
    sp_span_queue_t  *q;

    if (spanprof_relay == NULL) {
        return NULL;
    }
    q = sp_span_slots_claim(spanprof_relay->slots, (int32_t) getpid(), &slot);
    if (q == NULL) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, "spanprof: every span "
                     "queue of the exporter process is held: this child "
                     "exports its own spans");
        return NULL;
    }
    apr_pool_cleanup_register(p, (void *) (intptr_t) slot,
                              spanprof_relay_child_exit,
                              apr_pool_cleanup_null);
    return q;
}
