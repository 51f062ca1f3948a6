#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/control/control_body.h"
#include "common/control/control_shm.h"

int
sp_control_body_parse(const char *body, size_t len, sp_control_body_t *out,
    char *err, size_t errlen)
{
    json_t        *root, *v;
    json_error_t   je;
    const char    *key;
    json_int_t     rate;
    int            rc = -1;

    out->profiling = -1;
    out->rate_hz = 0;
    out->cpu = -1;
    out->wall = -1;
    out->wall_rate_hz = 0;
    out->memory = -1;
    if (len == 0) {
        snprintf(err, errlen, "empty body: expected {\"profiling\": "
                 "true|false, \"rate\": N}");
        return -1;
    }
    if (len > SP_CONTROL_BODY_MAX) {
        snprintf(err, errlen, "body larger than %d bytes",
                 SP_CONTROL_BODY_MAX);
        return -1;
    }
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        snprintf(err, errlen, "invalid JSON at line %d column %d: %s",
                 je.line, je.column, je.text);
        return -1;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "the body must be a JSON object");
        goto done;
    }
    json_object_foreach(root, key, v) {
        if (strcmp(key, "profiling") == 0 || strcmp(key, "cpu") == 0
            || strcmp(key, "wall") == 0 || strcmp(key, "memory") == 0)
        {
            if (!json_is_boolean(v)) {
                snprintf(err, errlen, "\"%s\" must be true or false", key);
                goto done;
            }
            *(key[0] == 'p' ? &out->profiling
              : key[0] == 'c' ? &out->cpu
              : key[0] == 'm' ? &out->memory : &out->wall) = json_is_true(v);

        } else if (strcmp(key, "wall_rate") == 0) {
            if (!json_is_integer(v)
                || json_integer_value(v) < 1
                || json_integer_value(v) > SP_CONTROL_MAX_RATE)
            {
                snprintf(err, errlen, "\"wall_rate\" must be an integer "
                         "1..%d (wall samples per second)",
                         SP_CONTROL_MAX_RATE);
                goto done;
            }
            out->wall_rate_hz = (unsigned) json_integer_value(v);

        } else if (strcmp(key, "rate") == 0) {
            if (!json_is_integer(v)) {
                snprintf(err, errlen, "\"rate\" must be an integer "
                         "(samples per second, 1..%d)", SP_CONTROL_MAX_RATE);
                goto done;
            }
            rate = json_integer_value(v);
            if (rate < 1 || rate > SP_CONTROL_MAX_RATE) {
                snprintf(err, errlen, "\"rate\" must be 1..%d, not %lld",
                         SP_CONTROL_MAX_RATE, (long long) rate);
                goto done;
            }
            out->rate_hz = (unsigned) rate;

        } else {
            snprintf(err, errlen, "unknown member \"%.64s\" (expected "
                     "\"profiling\", \"rate\", \"cpu\", \"wall\", "
                     "\"wall_rate\" or \"memory\")", key);
            goto done;
        }
    }
    if (out->profiling < 0 && out->rate_hz == 0 && out->cpu < 0
        && out->wall < 0 && out->wall_rate_hz == 0 && out->memory < 0)
    {
        snprintf(err, errlen, "nothing to change: give \"profiling\", "
                 "\"rate\", \"cpu\", \"wall\", \"wall_rate\" or "
                 "\"memory\"");
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}
