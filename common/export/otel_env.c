#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/endpoint.h"
#include "common/export/otel_env.h"

const char *
sp_otel_env_getenv(void *ud, const char *name)
{
    (void) ud;
    return getenv(name);
}

/* The variable's value, NULL when unset or empty (the same thing). */
static const char *
get_var(sp_otel_getenv_fn get, void *ud, const char *name)
{
    const char  *v = get(ud, name);

    return v != NULL && *v != '\0' ? v : NULL;
}

/* The signal-specific variable if set, else the generic one; *name says
 * which (for errors). */
static const char *
get_traces(sp_otel_getenv_fn get, void *ud, const char *suffix,
    char *name, size_t namelen)
{
    const char  *v;

    snprintf(name, namelen, "OTEL_EXPORTER_OTLP_TRACES_%s", suffix);
    if ((v = get_var(get, ud, name)) != NULL) {
        return v;
    }
    snprintf(name, namelen, "OTEL_EXPORTER_OTLP_%s", suffix);
    return get_var(get, ud, name);
}

static int
hexval(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* [p, end) trimmed of blanks and percent-decoded into a new string; NULL
 * on a bad escape or no memory (*bad says which). */
static char *
decode(const char *p, const char *end, int *bad)
{
    char  *out, *o;
    int    hi, lo;

    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    out = o = malloc((size_t) (end - p) + 1);
    if (out == NULL) {
        *bad = 0;
        return NULL;
    }
    for (; p < end; p++) {
        if (*p != '%') {
            *o++ = *p;
            continue;
        }
        if (end - p < 3 || (hi = hexval(p[1])) < 0 || (lo = hexval(p[2])) < 0)
        {
            free(out);
            *bad = 1;
            return NULL;
        }
        *o++ = (char) (hi << 4 | lo);
        p += 2;
    }
    *o = '\0';
    return out;
}

/* A "k=v,k=v" list (W3C Baggage without properties) into kv; 0, or -1
 * with err naming var. Empty members are skipped. */
static int
parse_list(const char *var, const char *s, sp_otel_env_kv_t *kv,
    size_t *n, int headers, char *err, size_t errlen)
{
    const char  *p, *end, *eq;
    char        *k, *v;
    int          bad;

    for (p = s; *p != '\0'; p = *end != '\0' ? end + 1 : end) {
        end = p + strcspn(p, ",");
        if (strspn(p, " \t") >= (size_t) (end - p)) {
            continue;                                    /* empty member */
        }
        eq = memchr(p, '=', (size_t) (end - p));
        if (eq == NULL) {
            snprintf(err, errlen, "%s: member %zu is not key=value", var,
                     *n + 1);
            return -1;
        }
        if (*n == SP_OTEL_ENV_MAX_ITEMS) {
            snprintf(err, errlen, "%s: more than %d members", var,
                     SP_OTEL_ENV_MAX_ITEMS);
            return -1;
        }
        bad = 0;
        k = decode(p, eq, &bad);
        v = k != NULL ? decode(eq + 1, end, &bad) : NULL;
        if (v == NULL) {
            free(k);
            snprintf(err, errlen, "%s: %s in member %zu", var,
                     bad ? "invalid percent-encoding" : "out of memory",
                     *n + 1);
            return -1;
        }
        kv[*n].key = k;
        kv[*n].value = v;
        (*n)++;
        if (*k == '\0') {
            snprintf(err, errlen, "%s: member %zu has an empty key", var, *n);
            return -1;
        }
        if (headers) {
            for (const char *c = k; *c; c++) {
                if ((unsigned char) *c <= ' ' || *c == ':'
                    || (unsigned char) *c >= 0x7f)
                {
                    snprintf(err, errlen, "%s: invalid header name in "
                             "member %zu", var, *n);
                    return -1;
                }
            }
            if (strpbrk(v, "\r\n") != NULL) {
                /* Named by its key only: the value may be a secret. */
                snprintf(err, errlen, "%s: the value of header \"%s\" has "
                         "a CR or LF", var, k);
                return -1;
            }
        }
    }
    return 0;
}

static int
read_endpoint(const char *var, const char *v, char **out, char *err,
    size_t errlen)
{
    const char  *why;
    size_t       len = strlen(v) + SP_ENDPOINT_EXTRA;

    *out = malloc(len);
    if (*out == NULL) {
        snprintf(err, errlen, "%s: out of memory", var);
        return -1;
    }
    if (sp_endpoint_normalize(v, 0, *out, len, &why) != 0) {
        /* Not shown: a URL may carry a password. */
        snprintf(err, errlen, "%s: invalid endpoint: %s", var, why);
        return -1;
    }
    return 0;
}

int
sp_otel_env_read(sp_otel_env_t *env, sp_otel_getenv_fn get, void *ud,
    char *err, size_t errlen)
{
    const char  *v;
    char         name[64], *end;
    long long    ms;

    memset(env, 0, sizeof(*env));
    env->compression = -1;
    env->timeout_ms = -1;

    if ((v = get_var(get, ud, "OTEL_SERVICE_NAME")) != NULL) {
        env->service_name = strdup(v);
        if (env->service_name == NULL) {
            snprintf(err, errlen, "OTEL_SERVICE_NAME: out of memory");
            return -1;
        }
    }
    if ((v = get_var(get, ud, "OTEL_RESOURCE_ATTRIBUTES")) != NULL
        && parse_list("OTEL_RESOURCE_ATTRIBUTES", v, env->resource,
                      &env->nresource, 0, err, errlen) != 0)
    {
        return -1;
    }
    if ((v = get_var(get, ud, "OTEL_EXPORTER_OTLP_ENDPOINT")) != NULL
        && read_endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", v, &env->endpoint,
                         err, errlen) != 0)
    {
        return -1;
    }
    if ((v = get_var(get, ud, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != NULL
        && read_endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v,
                         &env->traces_endpoint, err, errlen) != 0)
    {
        return -1;
    }
    if ((v = get_traces(get, ud, "HEADERS", name, sizeof(name))) != NULL
        && parse_list(name, v, env->headers, &env->nheaders, 1, err,
                      errlen) != 0)
    {
        return -1;
    }
    if ((v = get_traces(get, ud, "PROTOCOL", name, sizeof(name))) != NULL) {
        if (sp_export_protocol_parse(v, &env->protocol) != 0) {
            snprintf(err, errlen, "%s: invalid value \"%.64s\" (expected "
                     SP_EXPORT_PROTOCOL_NAMES ")", name, v);
            return -1;
        }
        env->protocol_set = 1;
    }
    if ((v = get_traces(get, ud, "COMPRESSION", name, sizeof(name)))
        != NULL)
    {
        if (strcmp(v, "gzip") == 0) {
            env->compression = 1;
        } else if (strcmp(v, "none") == 0) {
            env->compression = 0;
        } else {
            snprintf(err, errlen, "%s: invalid value \"%.64s\" (expected "
                     "gzip or none)", name, v);
            return -1;
        }
    }
    if ((v = get_traces(get, ud, "TIMEOUT", name, sizeof(name))) != NULL) {
        errno = 0;
        ms = strtoll(v, &end, 10);
        if (!isdigit((unsigned char) *v) || *end != '\0' || errno != 0
            || ms < 1 || ms > 3600000)
        {
            snprintf(err, errlen, "%s: invalid value \"%.64s\" (expected "
                     "milliseconds, 1 to 3600000)", name, v);
            return -1;
        }
        env->timeout_ms = ms;
    }
    return 0;
}

void
sp_otel_env_free(sp_otel_env_t *env)
{
    size_t  i;

    free(env->service_name);
    free(env->endpoint);
    free(env->traces_endpoint);
    for (i = 0; i < env->nresource; i++) {
        free(env->resource[i].key);
        free(env->resource[i].value);
    }
    for (i = 0; i < env->nheaders; i++) {
        free(env->headers[i].key);
        free(env->headers[i].value);
    }
    memset(env, 0, sizeof(*env));
}
