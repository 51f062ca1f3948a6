#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/trace/resource.h"
#include "common/base/version.h"

static char *
own(sp_resource_t *r, const char *s)
{
    char  *p;

    if (r->nowned == sizeof(r->owned) / sizeof(r->owned[0])) {
        return NULL;
    }
    p = strdup(s);
    if (p != NULL) {
        r->owned[r->nowned++] = p;
    }
    return p;
}

static sp_resource_attr_t *
slot(sp_resource_t *r, const char *key)
{
    size_t  i;

    for (i = 0; i < r->nattrs; i++) {
        if (strcmp(r->attrs[i].key, key) == 0) {
            return &r->attrs[i];
        }
    }
    if (r->nattrs == SP_RESOURCE_MAX_ATTRS) {
        return NULL;
    }
    r->attrs[r->nattrs].key = own(r, key);
    if (r->attrs[r->nattrs].key == NULL) {
        return NULL;
    }
    return &r->attrs[r->nattrs++];
}

int
sp_resource_set(sp_resource_t *r, const char *key, const char *value)
{
    sp_resource_attr_t  *a = slot(r, key);

    if (a == NULL) {
        return -1;
    }
    a->str = own(r, value);
    a->num = 0;
    return a->str != NULL ? 0 : -1;
}

static int
set_int(sp_resource_t *r, const char *key, int64_t v)
{
    sp_resource_attr_t  *a = slot(r, key);

    if (a == NULL) {
        return -1;
    }
    a->str = NULL;
    a->num = v;
    return 0;
}

int
sp_resource_init(sp_resource_t *r, const char *server,
    const char *service_name, const char *service_version)
{
    char  host[256], unknown[64];
    int   rc = 0;

    memset(r, 0, sizeof(*r));
    if (service_name == NULL || service_name[0] == '\0') {
        snprintf(unknown, sizeof(unknown), "unknown_service:%s", server);
        service_name = unknown;
    }
    rc |= sp_resource_set(r, "service.name", service_name);
    if (service_version != NULL && service_version[0] != '\0') {
        rc |= sp_resource_set(r, "service.version", service_version);
    }
    if (gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        rc |= sp_resource_set(r, "host.name", host);
    }
    rc |= set_int(r, "process.pid", (int64_t) getpid());
    rc |= sp_resource_set(r, "telemetry.sdk.name", SP_SCOPE_NAME);
    rc |= sp_resource_set(r, "telemetry.sdk.language", "c");
    rc |= sp_resource_set(r, "telemetry.sdk.version", SP_VERSION);
    return rc ? -1 : 0;
}

const char *
sp_resource_get(const sp_resource_t *r, const char *key)
{
    size_t  i;

    for (i = 0; i < r->nattrs; i++) {
        if (strcmp(r->attrs[i].key, key) == 0) {
            return r->attrs[i].str;
        }
    }
    return NULL;
}

void
sp_resource_free(sp_resource_t *r)
{
    size_t  i;

    for (i = 0; i < r->nowned; i++) {
        free(r->owned[i]);
    }
    memset(r, 0, sizeof(*r));
}
