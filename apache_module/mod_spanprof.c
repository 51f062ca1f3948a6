/*
 * mod_spanprof: every request a traced OpenTelemetry span, and the child
 * processes' CPU profiles labelled with the requests' trace and span, for
 * Apache httpd 2.4 (prefork, worker and event MPMs).
 *
 *   LoadModule spanprof_module modules/mod_spanprof.so
 *
 * The directives mirror the nginx module's (otel_* -> Otel*), see
 * spanprof_cmds below. The exporter and the sampler are one per child
 * process, so their directives belong to the main server configuration.
 */

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "ap_expr.h"
#include "apr_optional_hooks.h"
#include "apr_strings.h"
#include "util_cfgtree.h"

#include "mod_spanprof.h"
#include "common/base/clock.h"
#include "common/base/url_mask.h"
#include "common/control/control_tick.h"
#include "common/export/endpoint.h"
#include "common/export/http_client.h"
#include "common/profile/process_context.h"
#include "common/profile/profile_truncate.h"
#include "common/trace/resource.h"
#include "common/profile/sampler.h"



/* ---- configuration -------------------------------------------------------- */

static void *
spanprof_create_srv_conf(apr_pool_t *p, server_rec *s)
{
    spanprof_srv_conf_t  *sc;

    sc = apr_pcalloc(p, sizeof(spanprof_srv_conf_t));
    sc->interval_ms = SPANPROF_UNSET;
    sc->batch_size = SPANPROF_UNSET;
    sc->batch_count = SPANPROF_UNSET;
    sc->compression = SPANPROF_UNSET;
    sc->protocol = SPANPROF_UNSET;
    sc->timeout_ms = SPANPROF_UNSET;
    sc->connect_timeout_ms = SPANPROF_UNSET;
    sc->shutdown_timeout_ms = SPANPROF_UNSET;
    sc->profiling_rate = SPANPROF_UNSET;
    sc->profiling_wall_rate = SPANPROF_UNSET;
    sc->profiling_memory_interval = SPANPROF_UNSET;
    sc->profiling_interval_ms = SPANPROF_UNSET;
    sc->profiling_max_depth = SPANPROF_UNSET;
    sc->profiling_max_size = SPANPROF_UNSET;
    sc->profiling_max_samples = SPANPROF_UNSET;
    return sc;
}


static void *
spanprof_create_dir_conf(apr_pool_t *p, char *dir)
{
    spanprof_dir_conf_t  *dc;

    dc = apr_pcalloc(p, sizeof(spanprof_dir_conf_t));
    dc->trace = SPANPROF_UNSET;
    dc->context = SPANPROF_UNSET;
    dc->profiling = SPANPROF_UNSET;
    dc->api_write = SPANPROF_UNSET;
    return dc;
}


static void *spanprof_merge_new(apr_pool_t *p, spanprof_dir_conf_t *base,
    spanprof_dir_conf_t *add);

static void *
spanprof_merge_dir_conf(apr_pool_t *p, void *basev, void *addv)
{
    int                   i;
    spanprof_dir_conf_t  *base = basev, *add = addv;

    /* httpd merges every request's <Location> sections: those that only
     * carry a route are a copy (what spanprof_merge_new gives when add
     * sets nothing), made once per host it applies to (spanprof_premerge),
     * found here without the new one's saved registers. base may be such
     * a copy already: httpd's second <Location> walk (after the
     * <Directory> one) merges the section again onto what its first walk
     * gave, and the copy of a copy is the same. */
    if (add->route_only) {
        for (i = 0; i < add->nmerged; i++) {
            if (add->merged[i].base == base
                || add->merged[i].merged == base)
            {
                return add->merged[i].merged;       /* read only */
            }
        }
    }
    return spanprof_merge_new(p, base, add);
}


static void *
spanprof_merge_new(apr_pool_t *p, spanprof_dir_conf_t *base,
    spanprof_dir_conf_t *add)
{
    spanprof_dir_conf_t  *dc;

    if (add->route_only) {
        dc = apr_palloc(p, sizeof(spanprof_dir_conf_t));
        *dc = *base;
        dc->nmerged = 0;
        if (!base->keep_set) {
            dc->keep = SP_KEEP_RULES_DEFAULT;
        }
        dc->route_set = 1;
        dc->route = add->route;
        dc->names = add->names;
        dc->route_only = 0;
        return dc;
    }
    dc = apr_palloc(p, sizeof(spanprof_dir_conf_t));
    dc->nmerged = 0;
    if (add->trace != SPANPROF_UNSET) {
        dc->trace = add->trace;
        dc->trace_expr = add->trace_expr;
    } else {
        dc->trace = base->trace;
        dc->trace_expr = base->trace_expr;
    }
    dc->context = add->context != SPANPROF_UNSET ? add->context
                                                 : base->context;
    dc->propagation = add->propagation.n ? add->propagation
                                         : base->propagation;
    dc->span_name = add->span_name ? add->span_name : base->span_name;
    /* A section with its own OtelSpanAttr lines replaces the inherited
     * ones (as nginx's otel_span_attr and add_header). */
    dc->span_attrs = add->span_attrs ? add->span_attrs : base->span_attrs;
    if (add->profiling != SPANPROF_UNSET) {
        dc->profiling = add->profiling;
        dc->profiling_expr = add->profiling_expr;
        dc->profiling_string = add->profiling_string;
    } else {
        dc->profiling = base->profiling;
        dc->profiling_expr = base->profiling_expr;
        dc->profiling_string = base->profiling_string;
    }
    if (add->keep_set) {
        dc->keep = add->keep;
        dc->keep_set = 1;
    } else {
        dc->keep = base->keep_set ? base->keep : SP_KEEP_RULES_DEFAULT;
        dc->keep_set = base->keep_set;
    }
    /* OtelSpanRedactQuery adds to the inherited names: a section cannot
     * let through what its server redacts. */
    if (add->redact_query != NULL && base->redact_query != NULL) {
        dc->redact_query = apr_array_append(p, base->redact_query,
                                            add->redact_query);
    } else {
        dc->redact_query = add->redact_query ? add->redact_query
                                             : base->redact_query;
    }
    dc->api_write = add->api_write != SPANPROF_UNSET ? add->api_write
                                                     : base->api_write;
    /* <Directory>, <Files> and <If> keep the <Location> route. */
    if (add->route_set) {
        dc->route_set = 1;
        dc->route = add->route;
        dc->names = add->names;
    } else {
        dc->route_set = base->route_set;
        dc->route = base->route;
        dc->names = base->names;
    }
    dc->route_only = 0;
    return dc;
}


/* Unset values read as the defaults (spanprof_dir_conf(), in the header). */

/* ---- directive handlers --------------------------------------------------- */

static const char *
spanprof_global_only(cmd_parms *cmd)
{
    return ap_check_cmd_context(cmd, GLOBAL_ONLY);
}


#define spanprof_srv(cmd)                                                     \
    ((spanprof_srv_conf_t *) ap_get_module_config(                            \
        (cmd)->server->module_config, &spanprof_module))


/* Seconds, fractions allowed ("5", "0.25"), into milliseconds; at least
 * 1 ms, at most a day. */
static const char *
spanprof_parse_seconds(cmd_parms *cmd, const char *arg, apr_int64_t *ms)
{
    char    *end;
    double   v;

    errno = 0;
    v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno != 0 || !isfinite(v)
        || v * 1000.0 < 1.0 - 1e-9 || v > 86400.0)
    {
        return apr_psprintf(cmd->pool, "%s: invalid time \"%s\": expected "
                            "seconds between 0.001 and 86400, for example "
                            "5 or 0.5", cmd->cmd->name, arg);
    }
    *ms = (apr_int64_t) llround(v * 1000.0);
    return NULL;
}


static const char *
spanprof_parse_int(cmd_parms *cmd, const char *arg, int min, int max,
    int *out)
{
    char    *end;
    long     v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || errno != 0 || v < min || v > max) {
        return apr_psprintf(cmd->pool, "%s: invalid value \"%s\": expected "
                            "an integer from %d to %d", cmd->cmd->name, arg,
                            min, max);
    }
    *out = (int) v;
    return NULL;
}


/* A size as nginx writes one: bytes, with an optional k, m or g
 * (1024-based), from min to 1g; range names that range in the error. */
static const char *
spanprof_parse_size(cmd_parms *cmd, const char *arg, unsigned long long min,
    const char *range, apr_int64_t *out)
{
    char                *end;
    unsigned long long   v, unit = 1;

    errno = 0;
    v = strtoull(arg, &end, 10);
    if (end != arg && end[0] != '\0' && end[1] == '\0') {
        switch (end[0]) {
        case 'k': case 'K': unit = 1024; end++; break;
        case 'm': case 'M': unit = 1024 * 1024; end++; break;
        case 'g': case 'G': unit = 1024 * 1024 * 1024; end++; break;
        }
    }
    if (end == arg || *end != '\0' || errno != 0 || arg[0] == '-'
        || v > (1ull << 30) / unit || v * unit < min)
    {
        return apr_psprintf(cmd->pool, "%s: invalid size \"%s\": expected "
                            "bytes (k, m or g after the number) from %s to "
                            "1g", cmd->cmd->name, arg, range);
    }
    *out = (apr_int64_t) (v * unit);
    return NULL;
}


static const char *
spanprof_set_endpoint(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char           *why;
    char                  masked[512], *url;
    size_t                len = strlen(arg) + SP_ENDPOINT_EXTRA;
    spanprof_srv_conf_t  *sc;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    /* nginx-otel's forms: a bare host:port becomes http://host:port. */
    url = apr_palloc(cmd->pool, len);
    if (sp_endpoint_normalize(arg, 1, url, len, &why) != 0) {
        return apr_psprintf(cmd->pool, "%s: invalid endpoint \"%s\": %s",
                            cmd->cmd->name,
                            sp_url_mask(arg, masked, sizeof(masked)), why);
    }
    sc = spanprof_srv(cmd);
    sc->endpoint = url;
    sc->endpoint_file = cmd->directive->filename;
    sc->endpoint_line = cmd->directive->line_num;
    return NULL;
}


static const char *
spanprof_set_header(cmd_parms *cmd, void *dummy, const char *name,
    const char *value)
{
    const char           *p, *why;
    spanprof_srv_conf_t  *sc;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    for (p = name; *p; p++) {
        if ((unsigned char) *p <= ' ' || *p == ':'
            || (unsigned char) *p >= 0x7f)
        {
            return apr_psprintf(cmd->pool, "%s: invalid header name \"%s\"",
                                cmd->cmd->name, name);
        }
    }
    if (*name == '\0') {
        return apr_psprintf(cmd->pool, "%s: empty header name",
                            cmd->cmd->name);
    }
    for (p = value; *p; p++) {
        if (*p == '\r' || *p == '\n') {
            /* Named, never shown: the value may be a secret. */
            return apr_psprintf(cmd->pool, "%s: invalid value of header "
                                "\"%s\": it has a CR or LF",
                                cmd->cmd->name, name);
        }
    }

    sc = spanprof_srv(cmd);
    if (sc->headers == NULL) {
        sc->headers = apr_array_make(cmd->pool, 4, sizeof(char *));
    }
    *(const char **) apr_array_push(sc->headers) =
        apr_pstrcat(cmd->pool, name, ": ", value, NULL);
    return NULL;
}


/* Read here, in the parent as root, and handed to children as bytes: a
 * child (User, unprivileged) may not reach the file. */
static const char *
spanprof_set_trusted_cert(cmd_parms *cmd, void *dummy, const char *arg)
{
    spanprof_srv_conf_t  *sc;
    const char           *why, *path;
    char                 *pem;
    size_t                len;
    char                  err[128];

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    path = ap_server_root_relative(cmd->pool, arg);
    if (path == NULL) {
        return apr_psprintf(cmd->pool, "%s: invalid path \"%s\"",
                            cmd->cmd->name, arg);
    }
    if (sp_http_ca_load(path, &pem, &len, err, sizeof(err)) != 0) {
        return apr_psprintf(cmd->pool, "%s: cannot read \"%s\": %s",
                            cmd->cmd->name, path, err);
    }
    sc = spanprof_srv(cmd);
    sc->trusted_certificate = path;
    sc->trusted_certificate_pem = apr_pmemdup(cmd->pool, pem, len + 1);
    sc->trusted_certificate_len = len;
    free(pem);
    return NULL;
}


/* OtelExporterInterval, ...Timeout, ...ConnectTimeout, ...ShutdownTimeout,
 * OtelProfilingInterval: the field's offset in cmd->info. */
static const char *
spanprof_set_seconds(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char   *why;
    apr_int64_t   ms = 0;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if ((why = spanprof_parse_seconds(cmd, arg, &ms)) != NULL) {
        return why;
    }
    *(apr_int64_t *) ((char *) spanprof_srv(cmd) + (apr_size_t) cmd->info) =
        ms;
    return NULL;
}


static const char *
spanprof_set_batch_size(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_int(cmd, arg, 1, 65536,
                              &spanprof_srv(cmd)->batch_size);
}


static const char *
spanprof_set_batch_count(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_int(cmd, arg, 1, 1024,
                              &spanprof_srv(cmd)->batch_count);
}


static const char *
spanprof_set_protocol(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char            *why;
    sp_export_protocol_t   p;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (sp_export_protocol_parse(arg, &p) != 0) {
        return apr_psprintf(cmd->pool, "%s: invalid value \"%s\": expected "
                            SP_EXPORT_PROTOCOL_NAMES, cmd->cmd->name, arg);
    }
    spanprof_srv(cmd)->protocol = (int) p;
    return NULL;
}


static const char *
spanprof_set_compression(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (strcasecmp(arg, "none") == 0) {
        spanprof_srv(cmd)->compression = 0;
    } else if (strcasecmp(arg, "gzip") == 0) {
        spanprof_srv(cmd)->compression = 1;
    } else {
        return apr_psprintf(cmd->pool, "%s: invalid value \"%s\": expected "
                            "none or gzip", cmd->cmd->name, arg);
    }
    return NULL;
}


static const char *
spanprof_set_service_name(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (*arg == '\0') {
        return apr_psprintf(cmd->pool, "%s: empty name", cmd->cmd->name);
    }
    spanprof_srv(cmd)->service_name = arg;
    return NULL;
}


static const char *
spanprof_set_resource_attr(cmd_parms *cmd, void *dummy, const char *key,
    const char *value)
{
    const char           *why;
    spanprof_kv_t        *kv;
    spanprof_srv_conf_t  *sc;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (*key == '\0') {
        return apr_psprintf(cmd->pool, "%s: empty attribute name",
                            cmd->cmd->name);
    }
    sc = spanprof_srv(cmd);
    if (sc->resource_attrs == NULL) {
        sc->resource_attrs = apr_array_make(cmd->pool, 4,
                                            sizeof(spanprof_kv_t));
    }
    /* Room is left for the attributes the module sets itself. */
    if (sc->resource_attrs->nelts >= SP_RESOURCE_MAX_ATTRS - 16) {
        return apr_psprintf(cmd->pool, "%s: too many attributes (at most "
                            "%d)", cmd->cmd->name, SP_RESOURCE_MAX_ATTRS - 16);
    }
    kv = apr_array_push(sc->resource_attrs);
    kv->key = key;
    kv->value = value;
    return NULL;
}


static const char *
spanprof_set_profiling_rate(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_int(cmd, arg, 1, 1000,
                              &spanprof_srv(cmd)->profiling_rate);
}


/* OtelProfilingTypes cpu [wall] [memory] */
static const char *
spanprof_set_profiling_types(cmd_parms *cmd, void *dummy, int argc,
    char *const argv[])
{
    const char  *why;
    int          i, t, types = 0;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (argc == 0) {
        return apr_psprintf(cmd->pool, "%s: expected cpu, wall and/or "
                            "memory", cmd->cmd->name);
    }
    for (i = 0; i < argc; i++) {
        if (strcasecmp(argv[i], "cpu") == 0) {
            t = SP_SAMPLER_TYPE_CPU;
        } else if (strcasecmp(argv[i], "wall") == 0) {
            t = SP_SAMPLER_TYPE_WALL;
        } else if (strcasecmp(argv[i], "memory") == 0) {
            t = SP_SAMPLER_TYPE_MEMORY;
        } else {
            return apr_psprintf(cmd->pool, "%s: invalid profiling type "
                                "\"%s\" (cpu, wall, memory)", cmd->cmd->name,
                                argv[i]);
        }
        if (types & t) {
            return apr_psprintf(cmd->pool, "%s: profiling type \"%s\" "
                                "given twice", cmd->cmd->name, argv[i]);
        }
        types |= t;
    }
    spanprof_srv(cmd)->profiling_types = types;
    return NULL;
}


static const char *
spanprof_set_profiling_wall_rate(cmd_parms *cmd, void *dummy,
    const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_int(cmd, arg, 1, 1000,
                              &spanprof_srv(cmd)->profiling_wall_rate);
}


/* OtelProfilingMemoryInterval SIZE: the mean bytes allocated between two
 * memory samples (1k .. 1g). */
static const char *
spanprof_set_profiling_memory_interval(cmd_parms *cmd, void *dummy,
    const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    /* 1k: the allocation sampler's smallest mean interval. */
    return spanprof_parse_size(cmd, arg, 1024, "1k",
                               &spanprof_srv(cmd)->profiling_memory_interval);
}


/* OtelProfilingShed off | cpu=PERCENT[,pause] */
static const char *
spanprof_set_profiling_shed(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;
    char         err[256];

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (sp_load_shedder_parse(arg, strlen(arg),
                              &spanprof_srv(cmd)->profiling_shed, err,
                              sizeof(err)) != 0)
    {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    return NULL;
}


static const char *
spanprof_set_profiling_depth(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_int(cmd, arg, 1, SP_SAMPLER_MAX_DEPTH,
                              &spanprof_srv(cmd)->profiling_max_depth);
}


/* OtelProfilingMaxSize: bytes, with an optional k, m or g (1024-based), as
 * nginx's sizes. */
static const char *
spanprof_set_profiling_max_size(cmd_parms *cmd, void *dummy, const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_size(cmd, arg, SP_PROFILE_MAX_SIZE_MIN, "1k",
                               &spanprof_srv(cmd)->profiling_max_size);
}


static const char *
spanprof_set_profiling_max_samples(cmd_parms *cmd, void *dummy,
    const char *arg)
{
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    return spanprof_parse_int(cmd, arg, 1, SP_PROFILE_MAX_SAMPLES_MAX,
                              &spanprof_srv(cmd)->profiling_max_samples);
}


static const char *
spanprof_set_pyroscope(cmd_parms *cmd, void *dummy, const char *arg)
{
    char         masked[512];
    char        *url;
    apr_size_t   len;
    const char  *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0) {
        return apr_psprintf(cmd->pool, "%s: invalid Pyroscope URL \"%s\": "
                            "must start with http:// or https://",
                            cmd->cmd->name,
                            sp_url_mask(arg, masked, sizeof(masked)));
    }
    /* Without a trailing slash: "/ingest" is appended. */
    url = apr_pstrdup(cmd->pool, arg);
    len = strlen(url);
    while (len > 0 && url[len - 1] == '/') {
        url[--len] = '\0';
    }
    spanprof_srv(cmd)->pyroscope = url;
    return NULL;
}


/* On, Off, or a boolean ap_expr (as <If>) decided per request. Vary is
 * left alone: the choice to trace does not change the response. */
static const char *
spanprof_set_trace(cmd_parms *cmd, void *conf, const char *arg)
{
    const char           *err = NULL;
    spanprof_dir_conf_t  *dc = conf;

    if (strcasecmp(arg, "on") == 0) {
        dc->trace = 1;
    } else if (strcasecmp(arg, "off") == 0) {
        dc->trace = 0;
    } else {
        dc->trace_expr = ap_expr_parse_cmd(cmd, arg, AP_EXPR_FLAG_DONT_VARY,
                                           &err, NULL);
        if (err != NULL) {
            return apr_psprintf(cmd->pool, "%s: not On, Off or a valid "
                                "expression: %s", cmd->cmd->name, err);
        }
        dc->trace = SPANPROF_TRACE_EXPR;
    }
    if (dc->trace != 0) {
        spanprof_globals.used = 1;
        if (spanprof_globals.trace_line == 0 && cmd->directive != NULL) {
            spanprof_globals.trace_arg = arg;
            spanprof_globals.trace_file = cmd->directive->filename;
            spanprof_globals.trace_line = cmd->directive->line_num;
        }
    }
    return NULL;
}


static const char *
spanprof_set_trace_context(cmd_parms *cmd, void *conf, const char *arg)
{
    spanprof_dir_conf_t  *dc = conf;

    if (strcasecmp(arg, "ignore") == 0) {
        dc->context = SPANPROF_CTX_IGNORE;
    } else if (strcasecmp(arg, "extract") == 0) {
        dc->context = SPANPROF_CTX_EXTRACT;
    } else if (strcasecmp(arg, "inject") == 0) {
        dc->context = SPANPROF_CTX_INJECT;
    } else if (strcasecmp(arg, "propagate") == 0) {
        dc->context = SPANPROF_CTX_PROPAGATE;
    } else {
        return apr_psprintf(cmd->pool, "%s: invalid mode \"%s\": expected "
                            "extract, inject, propagate or ignore",
                            cmd->cmd->name, arg);
    }
    if (dc->context != SPANPROF_CTX_IGNORE) {
        spanprof_globals.used = 1;
    }
    /* In <Location>, <Directory>, <Files> or <If>: known per request only
     * after httpd's walks. */
    if (cmd->path != NULL) {
        spanprof_globals.section_context = 1;
    }
    return NULL;
}


static ap_expr_info_t *
spanprof_parse_expr(cmd_parms *cmd, const char *arg, const char **err)
{
    *err = NULL;
    return ap_expr_parse_cmd(cmd, arg, AP_EXPR_FLAG_STRING_RESULT, err, NULL);
}


static const char *
spanprof_set_span_name(cmd_parms *cmd, void *conf, const char *arg)
{
    const char           *err;
    spanprof_dir_conf_t  *dc = conf;

    dc->span_name = spanprof_parse_expr(cmd, arg, &err);
    if (err != NULL) {
        return apr_psprintf(cmd->pool, "%s: cannot parse \"%s\": %s",
                            cmd->cmd->name, arg, err);
    }
    return NULL;
}


static const char *
spanprof_set_span_attr(cmd_parms *cmd, void *conf, const char *key,
    const char *value)
{
    const char           *err;
    spanprof_attr_t      *attr;
    spanprof_dir_conf_t  *dc = conf;

    if (*key == '\0') {
        return apr_psprintf(cmd->pool, "%s: empty attribute name",
                            cmd->cmd->name);
    }
    if (dc->span_attrs == NULL) {
        dc->span_attrs = apr_array_make(cmd->pool, 4, sizeof(spanprof_attr_t));
    }
    attr = apr_array_push(dc->span_attrs);
    attr->key = key;
    attr->value = spanprof_parse_expr(cmd, value, &err);
    if (err != NULL) {
        return apr_psprintf(cmd->pool, "%s: cannot parse \"%s\": %s",
                            cmd->cmd->name, value, err);
    }
    return NULL;
}


/* On, Off, or expr=EXPR decided per request: a boolean expression (as
 * OtelTrace), or a string one (%{HTTP:X-Profile}) false when empty, "0" or
 * "off", as nginx's otel_profiling $variable. */
static const char *
spanprof_set_profiling(cmd_parms *cmd, void *conf, const char *arg)
{
    const char           *err = NULL, *serr = NULL;
    spanprof_dir_conf_t  *dc = conf;

    if (strcasecmp(arg, "on") == 0) {
        dc->profiling = 1;
    } else if (strcasecmp(arg, "off") == 0) {
        dc->profiling = 0;
        return NULL;
    } else if (strncasecmp(arg, "expr=", 5) == 0) {
        dc->profiling_string = 0;
        dc->profiling_expr = ap_expr_parse_cmd(cmd, arg + 5,
                                               AP_EXPR_FLAG_DONT_VARY, &err,
                                               NULL);
        if (err != NULL) {
            dc->profiling_string = 1;
            dc->profiling_expr = ap_expr_parse_cmd(cmd, arg + 5,
                                                   AP_EXPR_FLAG_DONT_VARY
                                                   | AP_EXPR_FLAG_STRING_RESULT,
                                                   &serr, NULL);
        }
        if (err != NULL && serr != NULL) {
            return apr_psprintf(cmd->pool, "%s: not a valid expression: %s",
                                cmd->cmd->name, err);
        }
        dc->profiling = SPANPROF_PROFILING_EXPR;
    } else {
        return apr_psprintf(cmd->pool, "%s: takes On, Off or expr=EXPRESSION, "
                            "not \"%s\"", cmd->cmd->name, arg);
    }
    spanprof_globals.used = 1;
    spanprof_globals.profiling_used = 1;
    return NULL;
}


static const char *
spanprof_set_profiling_keep(cmd_parms *cmd, void *conf, int argc,
    char *const argv[])
{
    char                  err[160];
    spanprof_dir_conf_t  *dc = conf;

    if (sp_keep_rules_parse(&dc->keep, (const char *const *) argv,
                            (size_t) argc, err, sizeof(err)) != 0)
    {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    dc->keep_set = 1;
    if (!sp_keep_rules_all(&dc->keep)) {
        spanprof_globals.keep_used = 1;
    }
    return NULL;
}


static const char *
spanprof_set_redact_query(cmd_parms *cmd, void *conf, const char *arg)
{
    spanprof_dir_conf_t  *dc = conf;
    sp_query_name_t      *n;
    const char           *why;

    why = sp_query_redact_name_error(arg, strlen(arg));
    if (why != NULL) {
        return apr_psprintf(cmd->pool, "%s: invalid query parameter name "
                            "\"%s\": %s", cmd->cmd->name, arg, why);
    }
    if (dc->redact_query == NULL) {
        dc->redact_query = apr_array_make(cmd->pool, 4,
                                          sizeof(sp_query_name_t));
    }
    n = apr_array_push(dc->redact_query);
    n->name = arg;
    n->len = strlen(arg);
    return NULL;
}


static const char *
spanprof_set_profiling_redact(cmd_parms *cmd, void *dummy, const char *arg)
{
    spanprof_srv_conf_t  *sc;
    const char           *why;

    if ((why = spanprof_global_only(cmd)) != NULL) {
        return why;
    }
    if (*arg == '\0') {
        return apr_psprintf(cmd->pool, "%s: takes non-empty patterns",
                            cmd->cmd->name);
    }
    sc = spanprof_srv(cmd);
    if (sc->profiling_redact == NULL) {
        sc->profiling_redact = apr_array_make(cmd->pool, 4,
                                              sizeof(const char *));
    }
    *(const char **) apr_array_push(sc->profiling_redact) = arg;
    return NULL;
}


#define SPANPROF_OFF(f)  ((void *) APR_OFFSETOF(spanprof_srv_conf_t, f))
#define SPANPROF_DIR     (RSRC_CONF | ACCESS_CONF)

static const command_rec  spanprof_cmds[] = {

    /* the exporter: main server configuration only */
    AP_INIT_TAKE1("OtelExporterEndpoint", spanprof_set_endpoint, NULL,
        RSRC_CONF, "collector: host:port or http(s)://host[:port] (gRPC), "
        "http(s)://host[:port][/base] (OTLP/HTTP) or file:///dir"),
    AP_INIT_TAKE2("OtelExporterHeader", spanprof_set_header, NULL, RSRC_CONF,
        "a header sent with every export request: name value"),
    AP_INIT_TAKE1("OtelExporterTrustedCertificate", spanprof_set_trusted_cert,
        NULL, RSRC_CONF, "CA bundle (PEM) for an https endpoint"),
    AP_INIT_TAKE1("OtelExporterInterval", spanprof_set_seconds,
        SPANPROF_OFF(interval_ms), RSRC_CONF,
        "seconds between exports at most (default 5)"),
    AP_INIT_TAKE1("OtelExporterBatchSize", spanprof_set_batch_size, NULL,
        RSRC_CONF, "spans per export request (default 512)"),
    AP_INIT_TAKE1("OtelExporterBatchCount", spanprof_set_batch_count, NULL,
        RSRC_CONF, "batches waiting per child before spans are dropped "
        "(default 4)"),
    AP_INIT_TAKE1("OtelExporterProtocol", spanprof_set_protocol, NULL,
        RSRC_CONF, "grpc, http/protobuf or http/json (default "
        "grpc)"),
    AP_INIT_TAKE1("OtelExporterCompression", spanprof_set_compression, NULL,
        RSRC_CONF, "none or gzip (default none)"),
    AP_INIT_TAKE1("OtelExporterTimeout", spanprof_set_seconds,
        SPANPROF_OFF(timeout_ms), RSRC_CONF,
        "seconds for one export request (default 10)"),
    AP_INIT_TAKE1("OtelExporterConnectTimeout", spanprof_set_seconds,
        SPANPROF_OFF(connect_timeout_ms), RSRC_CONF,
        "seconds to connect to the collector (default 2)"),
    AP_INIT_TAKE1("OtelExporterShutdownTimeout", spanprof_set_seconds,
        SPANPROF_OFF(shutdown_timeout_ms), RSRC_CONF,
        "seconds a stopping child spends flushing (default 2)"),
    AP_INIT_TAKE1("OtelServiceName", spanprof_set_service_name, NULL,
        RSRC_CONF, "the service.name resource attribute"),
    AP_INIT_TAKE2("OtelResourceAttr", spanprof_set_resource_attr, NULL,
        RSRC_CONF, "a resource attribute: name value"),

    /* tracing: anywhere but .htaccess */
    AP_INIT_TAKE1("OtelTrace", spanprof_set_trace, NULL, SPANPROF_DIR,
        "On, Off (default) or an expression: export a span for the request"),
    AP_INIT_TAKE1("OtelTraceContext", spanprof_set_trace_context, NULL,
        SPANPROF_DIR, "extract, inject, propagate or ignore (default)"),
    AP_INIT_RAW_ARGS("OtelPropagation", spanprof_set_propagation, NULL,
        SPANPROF_DIR, "trace context formats: w3c (default), b3, b3multi"),
    AP_INIT_TAKE1("OtelSpanName", spanprof_set_span_name, NULL, SPANPROF_DIR,
        "the SERVER span's name, an ap_expr string"),
    AP_INIT_TAKE2("OtelSpanAttr", spanprof_set_span_attr, NULL, SPANPROF_DIR,
        "a SERVER span attribute: name and ap_expr string value"),

    /* profiling */
    AP_INIT_TAKE1("OtelProfiling", spanprof_set_profiling, NULL, SPANPROF_DIR,
        "On, Off (default) or expr=EXPRESSION: label CPU samples with the "
        "request"),
    AP_INIT_TAKE_ARGV("OtelProfilingKeep", spanprof_set_profiling_keep, NULL,
        SPANPROF_DIR, "all (default) or any of slow=TIME errors cpu=TIME: "
        "requests whose samples keep their labels"),
    AP_INIT_TAKE1("OtelProfilingRate", spanprof_set_profiling_rate, NULL,
        RSRC_CONF, "samples per second of a thread's CPU time (default 100)"),
    AP_INIT_TAKE_ARGV("OtelProfilingTypes", spanprof_set_profiling_types,
        NULL, RSRC_CONF, "cpu (default), wall, memory: what is sampled"),
    AP_INIT_TAKE1("OtelProfilingWallRate", spanprof_set_profiling_wall_rate,
        NULL, RSRC_CONF, "wall-clock samples per second of a thread serving "
        "a request (default 100)"),
    AP_INIT_TAKE1("OtelProfilingMemoryInterval",
        spanprof_set_profiling_memory_interval, NULL, RSRC_CONF,
        "bytes allocated between two memory samples (default 512k)"),
    AP_INIT_TAKE1("OtelProfilingInterval", spanprof_set_seconds,
        SPANPROF_OFF(profiling_interval_ms), RSRC_CONF,
        "seconds between profile exports (default 10)"),
    AP_INIT_TAKE1("OtelProfilingMaxDepth", spanprof_set_profiling_depth, NULL,
        RSRC_CONF, "frames kept per stack, 1 to 256 (default 64)"),
    AP_INIT_TAKE1("OtelProfilingShed", spanprof_set_profiling_shed, NULL,
        RSRC_CONF, "off (default), cpu=PERCENT or cpu=PERCENT,pause: lower "
        "the sampling rate while a child's CPU use is above PERCENT"),
    AP_INIT_TAKE1("OtelProfilingMaxSize", spanprof_set_profiling_max_size,
        NULL, RSRC_CONF, "bytes of one encoded profile before compression, "
        "past which the least-sampled stacks are merged into [truncated] "
        "(default 4000k)"),
    AP_INIT_TAKE1("OtelProfilingMaxSamples",
        spanprof_set_profiling_max_samples, NULL, RSRC_CONF, "samples of one "
        "profile, past which the least-sampled stacks are merged into "
        "[truncated] (default 16000)"),
    AP_INIT_ITERATE("OtelSpanRedactQuery", spanprof_set_redact_query, NULL,
        SPANPROF_DIR, "query parameters whose values url.query records as "
        "REDACTED, besides AWSAccessKeyId, Signature, sig, X-Goog-Signature"),
    AP_INIT_ITERATE("OtelProfilingRedact", spanprof_set_profiling_redact,
        NULL, RSRC_CONF, "function names containing any of these "
        "(case-insensitive) are exported as [REDACTED]"),
    AP_INIT_FLAG("OtelApiWrite", spanprof_set_api_write, NULL,
                 SPANPROF_DIR, "On: the control API in this location "
                 "takes POST, PUT and DELETE (default Off: read-only)"),
    AP_INIT_TAKE1("OtelProfilingPyroscope", spanprof_set_pyroscope, NULL,
        RSRC_CONF, "also send profiles to this Grafana Pyroscope URL"),

    { NULL }
};


/* ---- configuration checks ------------------------------------------------- */

static int
spanprof_pre_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp)
{
    memset(&spanprof_globals, 0, sizeof(spanprof_globals));
    return OK;
}


/* Marks the configurations of <Location> sections with their route (the
 * section's path; none for regex ones): after the per-directory merge it
 * tells which <Location> a request ended in. */
static void
spanprof_mark_routes(apr_pool_t *pconf, server_rec *s)
{
    int                    i;
    core_dir_config       *cd;
    core_server_config    *sconf;
    ap_conf_vector_t     **sec;
    spanprof_dir_conf_t   *dc;

    for (; s != NULL; s = s->next) {
        sconf = ap_get_core_module_config(s->module_config);
        if (sconf == NULL || sconf->sec_url == NULL) {
            continue;
        }
        sec = (ap_conf_vector_t **) sconf->sec_url->elts;
        for (i = 0; i < sconf->sec_url->nelts; i++) {
            cd = ap_get_core_module_config(sec[i]);
            if (cd == NULL) {
                continue;
            }
            /* Sections hold configurations only for the modules that have
             * directives in them: give this one ours. */
            dc = ap_get_module_config(sec[i], &spanprof_module);
            if (dc == NULL) {
                dc = spanprof_create_dir_conf(pconf, cd->d);
                dc->route_only = 1;
                ap_set_module_config(sec[i], &spanprof_module, dc);
            }
            dc->route_set = 1;
            dc->route = (cd->r == NULL && !cd->d_is_fnmatch) ? cd->d : NULL;
            dc->names = spanprof_names_make(pconf, dc->route);
        }
    }
}


/* The route-only <Location> sections merged ahead onto the settings of
 * each host they apply to (its lookup_defaults: what httpd merges them onto
 * unless a <Directory> or <Files> of the request set something of ours), once the
 * settings are final: the per-request merge is then a lookup. */
static void
spanprof_premerge(apr_pool_t *pconf, server_rec *s)
{
    int                    i, j;
    void                  *base;
    core_server_config    *sconf;
    ap_conf_vector_t     **sec;
    spanprof_dir_conf_t   *dc;

    for (; s != NULL; s = s->next) {
        sconf = ap_get_core_module_config(s->module_config);
        base = ap_get_module_config(s->lookup_defaults, &spanprof_module);
        if (sconf == NULL || sconf->sec_url == NULL || base == NULL) {
            continue;
        }
        sec = (ap_conf_vector_t **) sconf->sec_url->elts;
        for (i = 0; i < sconf->sec_url->nelts; i++) {
            dc = ap_get_module_config(sec[i], &spanprof_module);
            if (dc == NULL || !dc->route_only
                || dc->nmerged == SPANPROF_PREMERGED)
            {
                continue;
            }
            for (j = 0; j < dc->nmerged && dc->merged[j].base != base; j++) {
                /* void */
            }
            if (j < dc->nmerged) {
                continue;           /* a main-server section seen before */
            }
            dc->merged[j].merged = spanprof_merge_new(pconf, base, dc);
            dc->merged[j].base = base;
            dc->nmerged++;
        }
    }
}


/* Whether a section (with the sections nested in it: <Files>, <If>)
 * traces, propagates or profiles. */
static int
spanprof_section_active(ap_conf_vector_t *sec)
{
    int                   i;
    core_dir_config      *cd;
    ap_conf_vector_t    **sub;
    spanprof_dir_conf_t  *dc;

    dc = ap_get_module_config(sec, &spanprof_module);
    if (dc != NULL && spanprof_dir_active(dc)) {
        return 1;
    }
    cd = ap_get_core_module_config(sec);
    if (cd == NULL) {
        return 0;
    }
    if (cd->sec_file != NULL) {
        sub = (ap_conf_vector_t **) cd->sec_file->elts;
        for (i = 0; i < cd->sec_file->nelts; i++) {
            if (spanprof_section_active(sub[i])) {
                return 1;
            }
        }
    }
    if (cd->sec_if != NULL) {
        sub = (ap_conf_vector_t **) cd->sec_if->elts;
        for (i = 0; i < cd->sec_if->nelts; i++) {
            if (spanprof_section_active(sub[i])) {
                return 1;
            }
        }
    }
    return 0;
}


static int
spanprof_sections_active(apr_array_header_t *secs)
{
    int                  i;
    ap_conf_vector_t   **sec;

    if (secs == NULL) {
        return 0;
    }
    sec = (ap_conf_vector_t **) secs->elts;
    for (i = 0; i < secs->nelts; i++) {
        if (spanprof_section_active(sec[i])) {
            return 1;
        }
    }
    return 0;
}


/* Marks the virtual hosts whose requests may need the module. A host's
 * lookup_defaults and section lists already include the main server's
 * (ap_fixup_virtual_hosts ran before check_config). */
static void
spanprof_mark_active(server_rec *s)
{
    core_server_config   *sconf;
    spanprof_srv_conf_t  *sc;

    for (; s != NULL; s = s->next) {
        sc = ap_get_module_config(s->module_config, &spanprof_module);
        sconf = ap_get_core_module_config(s->module_config);
        sc->active = spanprof_section_active(s->lookup_defaults)
                     || (sconf != NULL
                         && (spanprof_sections_active(sconf->sec_dir)
                             || spanprof_sections_active(sconf->sec_url)));
    }
}


/* Whether a directive of the configuration (or a section's argument)
 * names an OTEL_* variable: apr's tables ignore case, so does this. An
 * AllowOverride or AllowOverrideList other than None counts as naming
 * them: the .htaccess files it lets in are read per request, after this
 * check, and may. */
static int
spanprof_names_env(const ap_directive_t *d)
{
    for (; d != NULL; d = d->next) {
        if ((d->args != NULL && strcasestr(d->args, "OTEL_") != NULL)
            || ((strcasecmp(d->directive, "AllowOverride") == 0
                 || strcasecmp(d->directive, "AllowOverrideList") == 0)
                && d->args != NULL && strcasecmp(d->args, "None") != 0)
            || spanprof_names_env(d->first_child))
        {
            return 1;
        }
    }
    return 0;
}


/* httpd's modules known to spanprof: they read no OTEL_* variable of the
 * request's environment but as a directive of theirs says (which
 * spanprof_names_env finds): no handler or filter of theirs spawns a
 * program or passes the environment on (CGI, SSI, FastCGI, SCGI, AJP,
 * mod_lua, mod_php... do, and are not here); and they pass a request's
 * output through its filters only on the thread that runs its handler (a
 * handler that returns SUSPENDED and writes from an MPM callback on
 * another thread, as mod_dialup's, is not here; mod_http2 runs a stream's
 * request on one worker but is left out too). */
static const char *const spanprof_known[] = {
    "core.c", "http_core.c", "mod_so.c", "mod_watchdog.c",
    "mod_log_config.c", "mod_logio.c", "mod_version.c", "mod_unixd.c",
    "event.c", "worker.c", "prefork.c", "mod_spanprof.c",
    "mod_access_compat.c", "mod_alias.c", "mod_auth_basic.c",
    "mod_authn_core.c", "mod_authn_file.c", "mod_authz_core.c",
    "mod_authz_groupfile.c", "mod_authz_host.c", "mod_authz_user.c",
    "mod_autoindex.c", "mod_deflate.c", "mod_dir.c", "mod_env.c",
    "mod_expires.c", "mod_filter.c", "mod_headers.c", "mod_mime.c",
    "mod_negotiation.c", "mod_proxy.c", "mod_proxy_http.c",
    "mod_remoteip.c", "mod_reqtimeout.c", "mod_rewrite.c",
    "mod_setenvif.c", "mod_socache_shmcb.c", "mod_ssl.c", "mod_status.c",
    "mod_unique_id.c",
};


/* The first loaded module that is not one of spanprof_known (a
 * third-party one included), or NULL: it may read the OTEL_* variables at
 * or after the handler without a directive naming them, or write a
 * request's output from another thread than its handler's. */
static const char *
spanprof_foreign_module(void)
{
    module  *m;
    size_t   i;

    for (m = ap_top_module; m != NULL; m = m->next) {
        for (i = 0; i < sizeof(spanprof_known) / sizeof(char *); i++) {
            if (strcmp(m->name, spanprof_known[i]) == 0) {
                break;
            }
        }
        if (i == sizeof(spanprof_known) / sizeof(char *)) {
            return m->name;
        }
    }
    return NULL;
}


/* httpd unloads the module at a restart: the parent lets the clock's
 * shared scales go first (its children keep theirs). */
static apr_status_t
spanprof_clock_release(void *data)
{
    sp_clock_release();
    return APR_SUCCESS;
}


static int
spanprof_check_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp,
    server_rec *s)
{
    spanprof_srv_conf_t  *sc;
    int                   size, count;

    sc = ap_get_module_config(s->module_config, &spanprof_module);

    /* A route marks every <Location> with our configuration, which httpd
     * then merges per request: only worth it when something reads it. */
    if (spanprof_globals.used) {
        spanprof_mark_routes(pconf, s);
    }
    spanprof_mark_active(s);
    /* In the parent, before the children fork: they inherit the choice,
     * and share the scales. */
    sp_clock_init();
    apr_pool_cleanup_register(pconf, NULL, spanprof_clock_release,
                              apr_pool_cleanup_null);
    spanprof_globals.env_named = spanprof_names_env(ap_conftree);
    spanprof_globals.foreign_module = spanprof_foreign_module();
    spanprof_globals.env_handler = spanprof_globals.env_named
                                   || spanprof_globals.foreign_module != NULL;
    spanprof_globals.scheme_hooked = ap_hook_get_http_scheme() != NULL
                                     && ap_hook_get_http_scheme()->nelts > 1;
    if (!spanprof_globals.profiling_used) {
        spanprof_unhook_profiling();
    }
    spanprof_span_headers_learn(ptemp);

    /* OTEL_* variables fill what the directives left unset. */
    if ((spanprof_globals.used || sc->endpoint != NULL)
        && spanprof_env_conf(pconf, sc) != OK)
    {
        return !OK;
    }

    if (spanprof_globals.trace_line && sc->endpoint == NULL
        && sc->traces_url == NULL)
    {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     "spanprof: OtelTrace %s in %s:%d but no "
                     "OtelExporterEndpoint is configured and neither "
                     "OTEL_EXPORTER_OTLP_ENDPOINT nor "
                     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set",
                     spanprof_globals.trace_arg, spanprof_globals.trace_file,
                     spanprof_globals.trace_line);
        return !OK;
    }

    if (spanprof_globals.profiling_used && sc->endpoint == NULL
        && sc->traces_url == NULL && sc->pyroscope == NULL)
    {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     "spanprof: OtelProfiling is On but neither "
                     "OtelExporterEndpoint nor OtelProfilingPyroscope is "
                     "configured");
        return !OK;
    }

    size = sc->batch_size != SPANPROF_UNSET ? sc->batch_size : 512;
    count = sc->batch_count != SPANPROF_UNSET ? sc->batch_count : 4;
    /* The queue is preallocated, about 3 KiB a span. */
    if ((apr_int64_t) size * count > 65536) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     "spanprof: OtelExporterBatchSize (%d) times "
                     "OtelExporterBatchCount (%d) is more than 65536 spans",
                     size, count);
        return !OK;
    }
    if (spanprof_globals.used) {
        spanprof_premerge(pconf, s);
    }
    return OK;
}


/* ---- request hooks -------------------------------------------------------- */

static int
spanprof_post_read_request(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    if (!spanprof_globals.used || r->main != NULL || r->prev != NULL
        || !((spanprof_srv_conf_t *) ap_get_module_config(
                 r->server->module_config, &spanprof_module))->active)
    {
        return DECLINED;
    }

    /* A new request on this thread: nothing else runs here now. (The
     * profiling calls are skipped inline where nothing profiles: a
     * child samples only if some OtelProfiling is configured.) */
    if (spanprof_globals.profiling_used) {
        spanprof_request_starts();
    }

    /* The span's start is when httpd began reading the request (its
     * context is made here: no need to look for one first). */
    ctx = spanprof_ctx_find(r, 1);
    /* for the profiling of a resumed connection (read only then) */
    if (spanprof_globals.profiling_used) {
        spanprof_conn(r->connection, 1)->active = ctx;
    }

    /* When no <Location> can change them, the ids are known now (without
     * an incoming trace header they are new whatever the mode), and the
     * thread is labelled from here on if the virtual host profiles;
     * sampling, the route and per-location profiling follow at
     * translate_name. */
    if (!spanprof_globals.section_context
        || !spanprof_has_incoming_context(r))
    {
        spanprof_resolve_ids(r, ctx);
        ctx->sampled = spanprof_traced(r, spanprof_dir_conf(r));
        if (spanprof_globals.profiling_used) {
            spanprof_profile_request(r, ctx);
        }
        /* httpd's threads take turns: this one's span and the queue's
         * next bytes are cold by now, and log_transaction is a few
         * microseconds away. */
        if (ctx->sampled && spanprof_exporter != NULL) {
            sp_exporter_span_prefetch(spanprof_exporter);
        }
    }
    return DECLINED;
}


/* Settings that neither trace, propagate nor profile leave alone a
 * request whose context nothing has decided yet (and that is not
 * labelled): no ids, no environment, no headers, no span. A subrequest
 * (mod_include, mod_cgi's PATH_TRANSLATED lookup) never decides its main
 * request's context: it only follows one already decided. */
static int
spanprof_leaves_alone(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    if (r->main == NULL && spanprof_dir_active(spanprof_dir_conf(r))) {
        return 0;
    }
    ctx = spanprof_get_ctx(r, 0);
    if (r->main != NULL) {
        return ctx == NULL || !ctx->resolved;
    }
    return ctx == NULL || (!ctx->resolved && !ctx->profiled);
}


/* The context of a request past translate_name, or NULL when the request
 * is left alone: spanprof_leaves_alone() then spanprof_resolve(), whose
 * answers for a main request already resolved (nearly every one at fixups
 * and log_transaction) are known without either. */
static APR_INLINE spanprof_ctx_t *
spanprof_decided(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    if (r->main == NULL) {
        ctx = ap_get_module_config(r->request_config, &spanprof_module);
        if (ctx != NULL && ctx->resolved) {
            return ctx;
        }
    }
    return spanprof_leaves_alone(r) ? NULL : spanprof_resolve(r);
}


/* Right after httpd's first <Location> walk: the trace context is decided
 * with the settings of the location the request is in. */
static int
spanprof_translate_name(request_rec *r)
{
    spanprof_ctx_t             *ctx;
    const spanprof_dir_conf_t  *dc;

    if (!spanprof_globals.used) {
        return DECLINED;
    }
    /* Nearly every request: a main request whose ids post_read_request
     * decided, in a location that traces, propagates or profiles; what
     * spanprof_leaves_alone() and spanprof_resolve() would do, inline. */
    ctx = NULL;
    if (r->main == NULL) {
        ctx = ap_get_module_config(r->request_config, &spanprof_module);
        dc = spanprof_dir_conf(r);
        if (ctx != NULL && ctx->ids && !ctx->resolved
            && spanprof_dir_active(dc))
        {
            ctx->resolved = 1;
            ctx->sampled = spanprof_traced(r, dc);
        } else {
            ctx = NULL;
        }
    }
    if (ctx == NULL) {
        if (spanprof_leaves_alone(r)) {
            return DECLINED;
        }
        ctx = spanprof_resolve(r);
    }
    spanprof_set_env_early(r, ctx);
    if (r->main == NULL && spanprof_globals.profiling_used) {
        spanprof_profile_request(r, ctx);
    }
    return DECLINED;
}


/* The final per-directory settings (and again after internal redirects):
 * the headers sent to backends follow them. */
static int
spanprof_fixups(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    if (!spanprof_globals.used || (ctx = spanprof_decided(r)) == NULL) {
        return DECLINED;
    }
    if (spanprof_globals.env_handler) {
        spanprof_set_env(r, ctx);
    }
    if (r->main != NULL) {
        return DECLINED;
    }
    if (spanprof_injects(spanprof_dir_conf(r)->context)) {
        spanprof_inject(r, ctx);
    }
    if (spanprof_globals.profiling_used) {
        spanprof_profile_final(r, ctx);
    }
    return DECLINED;
}


static int
spanprof_handler(request_rec *r)
{
    spanprof_ctx_t  *ctx;

    if (!spanprof_globals.used || r->main != NULL) {
        return DECLINED;
    }
    ctx = spanprof_get_ctx(r, 0);
    if (ctx == NULL) {
        return DECLINED;
    }
    spanprof_bind(ctx);
    if (ctx->proxy_handler_ns == 0 && r->handler != NULL
        && r->handler[0] == 'p' && strcmp(r->handler, "proxy-server") == 0)
    {
        ctx->proxy_handler_ns = sp_now_ns();
    }
    return DECLINED;
}


static int
spanprof_log_transaction(request_rec *r)
{
    int                      traced;
    spanprof_ctx_t          *ctx;
    spanprof_conn_t         *cc;
    sp_thread_ctx_record_t  *saved;

    /* Requests rejected before translate_name (400s) get their context
     * only now. */
    if (!spanprof_globals.used || r->main != NULL
        || (ctx = spanprof_decided(r)) == NULL)
    {
        return DECLINED;
    }
    if (ctx->logged) {
        return DECLINED;
    }
    spanprof_set_env_early(r, ctx);

    /* This may run when the response's last bytes are written: on another
     * thread (event), or while this thread serves the next request of the
     * connection; the work done here is this request's. */
    saved = spanprof_globals.profiling_used && spanprof_sampling()
            ? sp_thread_ctx_current() : NULL;
    spanprof_bind(ctx);

    /* Before the span: only a kept request's span names its profile. */
    traced = ctx->sampled && spanprof_exporter != NULL
             && spanprof_export_spans;
    if (ctx->profiled && ctx->record != NULL && ctx->record->sp_keep) {
        spanprof_keep_verdict(r, ctx, traced);
    }

    if (traced) {
        spanprof_export(r, ctx);
    }

    ctx->logged = 1;
    cc = spanprof_globals.profiling_used ? spanprof_conn(r->connection, 0)
                                         : NULL;
    if (cc != NULL && cc->active == ctx) {
        cc->active = NULL;
    }

    if (saved != NULL && saved != ctx->record) {
        sp_thread_ctx_attach(saved);
    } else if (spanprof_globals.profiling_used) {
        spanprof_request_ends();
    }
    return DECLINED;
}


/* ---- mod_proxy ------------------------------------------------------------ */

typedef int (*spanprof_scheme_fn_t)(request_rec *r, void *worker, void *conf,
    char *url, const char *proxyhost, apr_port_t proxyport);
typedef void (*spanprof_hook_scheme_t)(spanprof_scheme_fn_t fn,
    const char *const *pre, const char *const *succ, int order);


/* Each attempt of mod_proxy (a balancer may try several workers). */
static int
spanprof_proxy_scheme_handler(request_rec *r, void *worker, void *conf,
    char *url, const char *proxyhost, apr_port_t proxyport)
{
    if (spanprof_globals.used) {
        spanprof_proxy_attempt(r, url);
    }
    return DECLINED;
}


static int
spanprof_proxy_request_status(int *status, request_rec *r)
{
    if (spanprof_globals.used) {
        spanprof_proxy_done(r, *status);
    }
    return DECLINED;
}


static int  spanprof_proxy_hooked;


/* ---- child process -------------------------------------------------------- */

/* After the control API's shared memory is made (its post_config): prefork's
 * exporter process, which takes a status slot in it. */
static int
spanprof_post_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp,
    server_rec *s)
{
    spanprof_main_server = s;
    spanprof_relay_start(pconf, s,
                         ap_get_module_config(s->module_config,
                                              &spanprof_module),
                         spanprof_api_attach);
    return OK;
}


static apr_status_t
spanprof_child_exit(void *data)
{
    sp_exporter_t  *e = spanprof_exporter;

    /* The sampler first, so the last profile is complete when the
     * exporter flushes it; the flush is bounded by the shutdown timeout. */
    spanprof_profiling_stop();

    spanprof_exporter = NULL;
    spanprof_export_spans = 0;
    sp_exporter_stop(e);
    sp_process_context_drop();
    return APR_SUCCESS;
}


static void
spanprof_child_init(apr_pool_t *p, server_rec *s)
{
    char                  err[256];
    sigset_t              all, old;
    sp_resource_t         res;
    sp_exporter_conf_t    ec;
    spanprof_srv_conf_t  *sc;

    spanprof_main_server = s;
    spanprof_exporter = NULL;
    spanprof_export_spans = 0;

    sc = ap_get_module_config(s->module_config, &spanprof_module);
    if (!spanprof_globals.used
        || (sc->endpoint == NULL && sc->traces_url == NULL
            && !(spanprof_globals.profiling_used && sc->pyroscope != NULL)))
    {
        return;
    }

    sp_ids_thread_init();

    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 "spanprof: mod_proxy attempts %s", spanprof_proxy_hooked
                 ? "hooked (scheme_handler)"
                 : "not hooked (mod_proxy absent or loaded after "
                   "mod_spanprof): one attempt per request");
    if (spanprof_globals.foreign_module != NULL) {
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                     "spanprof: %s is not one of the modules known to "
                     "spanprof: OTEL_* variables set at fixups, profiled "
                     "requests' output labelled by a filter",
                     spanprof_globals.foreign_module);
    } else {
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                     "spanprof: all loaded modules known to spanprof: "
                     "OTEL_* variables set at fixups only if a directive "
                     "names one, no output filter");
    }

    if (spanprof_exporter_conf(p, s, sc, &ec, &res) != 0) {
        return;
    }
    ec.tick = sp_control_tick;          /* the control API, if attached */
    /* prefork: into a queue the exporter process sends (NULL: this
     * child's own). */
    ec.span_queue = spanprof_relay_child_queue(p, s);

    /* The exporter thread (and what it starts) takes no signal: the
     * child's signals are for httpd's own threads (prefork's handlers must
     * not run on it). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    spanprof_exporter = sp_exporter_start(&ec, err, sizeof(err));
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    /* External profilers read the same resource and request labels. */
    if (spanprof_exporter != NULL && spanprof_globals.profiling_used
        && sp_process_context_publish(&res, err, sizeof(err)) != 0)
    {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     "spanprof: process context not published: %s", err);
    }
    sp_resource_free(&res);

    if (spanprof_exporter == NULL) {
        /* Requests are still served, just not traced or profiled. */
        ap_log_error(APLOG_MARK, APLOG_ALERT, 0, s,
                     "spanprof: exporter not started: %s", err);
        return;
    }
    spanprof_export_spans = sc->endpoint != NULL || sc->traces_url != NULL;

    apr_pool_cleanup_register(p, NULL, spanprof_child_exit,
                              apr_pool_cleanup_null);

    if (spanprof_globals.profiling_used) {
        if (sc->profiling_rate == SPANPROF_UNSET) {
            sc->profiling_rate = 100;
        }
        if (sc->profiling_max_depth == SPANPROF_UNSET) {
            sc->profiling_max_depth = 64;
        }
        if (sc->profiling_wall_rate == SPANPROF_UNSET) {
            sc->profiling_wall_rate = 100;
        }
        if (sc->profiling_types == 0) {
            sc->profiling_types = SP_SAMPLER_TYPE_CPU;
        }
        if (sc->profiling_memory_interval == SPANPROF_UNSET) {
            sc->profiling_memory_interval = 512 * 1024;
        }
        if (spanprof_profiling_start(s, sc) == 0) {
            /* A child started while the API paused profiling (or set
             * another rate) follows it from its first sample. */
            sp_control_worker_apply();
        }
    }
}


/* ---- registration --------------------------------------------------------- */

static void
spanprof_register_hooks(apr_pool_t *p)
{
    spanprof_hook_scheme_t  hook_scheme;

    ap_hook_pre_config(spanprof_pre_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_check_config(spanprof_check_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_open_logs(spanprof_files_open_logs, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_post_config(spanprof_post_config, NULL, NULL,
                        APR_HOOK_REALLY_LAST);
    ap_hook_child_init(spanprof_child_init, NULL, NULL, APR_HOOK_MIDDLE);

    ap_hook_post_read_request(spanprof_post_read_request, NULL, NULL,
                              APR_HOOK_REALLY_FIRST);
    ap_hook_translate_name(spanprof_translate_name, NULL, NULL,
                           APR_HOOK_REALLY_FIRST);
    ap_hook_fixups(spanprof_fixups, NULL, NULL, APR_HOOK_REALLY_FIRST);
    ap_hook_handler(spanprof_handler, NULL, NULL, APR_HOOK_REALLY_FIRST);
    ap_hook_log_transaction(spanprof_log_transaction, NULL, NULL,
                            APR_HOOK_REALLY_FIRST);

    spanprof_register_profiling_hooks();
    spanprof_register_expr_hooks();
    spanprof_register_api_hooks();
    spanprof_register_relay_hooks();

    /* mod_proxy: the end of the exchange through an optional hook (works
     * whatever the load order); each attempt through its scheme_handler
     * hook when mod_proxy is already loaded (its symbols are global). */
    apr_optional_hook_add("request_status",
                          (void (*)(void)) spanprof_proxy_request_status,
                          NULL, NULL, APR_HOOK_REALLY_FIRST);
    hook_scheme = (spanprof_hook_scheme_t) dlsym(RTLD_DEFAULT,
                                                 "proxy_hook_scheme_handler");
    if (hook_scheme != NULL) {
        hook_scheme(spanprof_proxy_scheme_handler, NULL, NULL,
                    APR_HOOK_REALLY_FIRST);
        spanprof_proxy_hooked = 1;
    }
}


AP_DECLARE_MODULE(spanprof) = {
    STANDARD20_MODULE_STUFF,
    spanprof_create_dir_conf,       /* create per-directory config */
    spanprof_merge_dir_conf,        /* merge per-directory config */
    spanprof_create_srv_conf,       /* create per-server config */
    NULL,                           /* merge per-server config */
    spanprof_cmds,                  /* command table */
    spanprof_register_hooks         /* register hooks */
};
