#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/base/version.h"
#include "common/profile/sampler.h"
#include "common/control/status_json.h"

static json_t *
str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static json_t *
config_json(const sp_api_info_t *info)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:b, s:I, s:I, s:I, s:I, "
                     "s:I, s:I, s:I, s:b, s:b}",
                     "endpoint", str_or_null(info->endpoint),
                     "traces_url", str_or_null(info->traces_url),
                     "protocol", str_or_null(info->protocol),
                     "pyroscope", str_or_null(info->pyroscope),
                     "service_name", str_or_null(info->service_name),
                     "profiling", info->profiling,
                     "profiling_rate", (json_int_t) info->profiling_rate,
                     "profiling_interval_ms",
                     (json_int_t) info->profiling_interval_ms,
                     "profiling_max_depth",
                     (json_int_t) info->profiling_max_depth,
                     "export_interval_ms",
                     (json_int_t) info->export_interval_ms,
                     "batch_size", (json_int_t) info->batch_size,
                     "batch_count", (json_int_t) info->batch_count,
                     "headers", (json_int_t) info->headers,
                     "gzip", info->gzip,
                     "api_write", info->write);
}

static json_t *
worker_json(const sp_status_t *st)
{
    json_t    *w, *counters;
    unsigned   k;

    counters = json_object();
    if (counters == NULL) {
        return NULL;
    }
    for (k = 0; k < SP_STATUS_NFIELDS; k++) {
        json_object_set_new(counters, sp_status_fields[k].name,
                            json_integer((json_int_t) st->v[k]));
    }
    w = json_pack("{s:I, s:f, s:b, s:I, s:o}",
                  "pid", (json_int_t) st->pid,
                  "updated", (double) st->updated_ns / 1e9,
                  "profiling", (int) st->v[SP_ST_profiling],
                  "rate", (json_int_t) st->v[SP_ST_rate_hz],
                  "counters", counters);
    return w;
}

static char *
dump(json_t *root, size_t *len)
{
    char  *s;

    if (root == NULL) {
        return NULL;
    }
    s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (s != NULL) {
        *len = strlen(s);
    }
    return s;
}

char *
sp_status_json(const sp_api_info_t *info, const sp_control_shm_t *c,
    size_t *len)
{
    json_t              *root, *workers, *w;
    sp_control_state_t   want, conf;
    sp_status_t          st;
    int                  i;

    sp_control_get(c, &want);
    sp_control_configured(c, &conf);
    workers = json_array();
    if (workers == NULL) {
        return NULL;
    }
    for (i = 0; i < SP_CONTROL_SLOTS; i++) {
        if (sp_control_slot_read(c, i, &st)) {
            w = worker_json(&st);
            if (w == NULL || json_array_append_new(workers, w) != 0) {
                json_decref(workers);
                return NULL;
            }
        }
    }
    root = json_pack("{s:s, s:s, s:s, s:o, s:{s:b, s:I, s:b, s:b, s:I, s:b, "
                     "s:I, s:{s:b, s:I, s:b, s:b, s:I, s:b}}, s:o}",
                     "module", SP_SCOPE_NAME,
                     "version", SP_VERSION,
                     "server", info->server != NULL ? info->server : "",
                     "config", config_json(info),
                     "control",
                       "profiling", want.profiling,
                       "rate", (json_int_t) want.rate_hz,
                       "cpu", (int) (want.types & 1),
                       "wall", (int) !!(want.types & 2),
                       "wall_rate", (json_int_t) want.wall_rate_hz,
                       "memory", (int) !!(want.types & SP_SAMPLER_TYPE_MEMORY),
                       "generation", (json_int_t) want.generation,
                       "configured",
                         "profiling", conf.profiling,
                         "rate", (json_int_t) conf.rate_hz,
                         "cpu", (int) (conf.types & 1),
                         "wall", (int) !!(conf.types & 2),
                         "wall_rate", (json_int_t) conf.wall_rate_hz,
                         "memory",
                         (int) !!(conf.types & SP_SAMPLER_TYPE_MEMORY),
                     "workers", workers);
    return dump(root, len);
}

char *
sp_status_json_error(const char *msg, size_t *len)
{
    return dump(json_pack("{s:s}", "error", msg), len);
}
