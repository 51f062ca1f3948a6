#ifndef SP_RESOURCE_H
#define SP_RESOURCE_H

#include <stddef.h>
#include <stdint.h>

/* The OTel resource of one worker process: service.name, service.version
 * (when set), host.name, process.pid, telemetry.sdk.* and the user's
 * resource attributes. Built once per process, read by the encoders. */

#define SP_RESOURCE_MAX_ATTRS  64

typedef struct {
    const char  *key;
    const char  *str;       /* NULL for an integer value */
    int64_t      num;
} sp_resource_attr_t;

typedef struct {
    size_t              nattrs;
    sp_resource_attr_t  attrs[SP_RESOURCE_MAX_ATTRS];
    char               *owned[SP_RESOURCE_MAX_ATTRS * 2];
    size_t              nowned;
} sp_resource_t;

/* Starts a resource with the standard attributes; service_version and
 * service_name may be NULL (service_name then "unknown_service:<server>"). */
int sp_resource_init(sp_resource_t *r, const char *server,
    const char *service_name, const char *service_version);
/* Adds or replaces a string attribute (copied). */
int sp_resource_set(sp_resource_t *r, const char *key, const char *value);
const char *sp_resource_get(const sp_resource_t *r, const char *key);
void sp_resource_free(sp_resource_t *r);

#endif
