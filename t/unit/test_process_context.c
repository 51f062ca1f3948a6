/* The OTEP 4719 process context: found in /proc/self/maps by its name,
 * header as specified, payload decoded by protoc (a real decoder) with the
 * resource and the OTEP 4947 thread-context keys. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "common/profile/process_context.h"

typedef struct {
    char      signature[8];
    uint32_t  version;
    uint32_t  payload_size;
    uint64_t  published_at_ns;
    void     *payload;
} header_t;

static header_t *
find_mapping(char *name, size_t namelen)
{
    FILE           *f = fopen("/proc/self/maps", "r");
    char            line[1024];
    unsigned long   lo, hi;
    header_t       *h = NULL;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "OTEL_CTX") != NULL
            && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
        {
            h = (header_t *) lo;
            snprintf(name, namelen, "%s", strchr(line, '/') ? strchr(line, '/')
                     : strchr(line, '['));
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return h;
}

int
main(void)
{
    sp_resource_t  res;
    char           err[256], name[512] = "", cmd[512], out[8192];
    header_t      *h;
    FILE          *p;
    size_t         n;
    char           tmp[] = "/tmp/sp_pc_XXXXXX";
    int            fd;

    sp_resource_init(&res, "test", "pc-service", "1.2.3");
    sp_resource_set(&res, "deployment.environment.name", "ci");

    ok(find_mapping(name, sizeof(name)) == NULL, "no mapping before");
    ok(sp_process_context_publish(&res, err, sizeof(err)) == 0,
       "published (%s)", err);

    h = find_mapping(name, sizeof(name));
    ok(h != NULL, "an OTEL_CTX mapping is in /proc/self/maps: %s", name);
    if (h == NULL) {
        return done_testing();
    }
    ok(memcmp(h->signature, "OTEL_CTX", 8) == 0, "signature");
    is_int(h->version, 2, "version 2");
    ok(h->published_at_ns > 0, "published_at_ns set");
    ok(h->payload_size > 0 && (char *) h->payload == (char *) (h + 1),
       "payload right after the header");

    fd = mkstemp(tmp);
    n = (size_t) write(fd, h->payload, h->payload_size);
    close(fd);
    ok(n == h->payload_size, "payload saved");
    snprintf(cmd, sizeof(cmd),
             "protoc --decode=opentelemetry.proto.processcontext.v1development"
             ".ProcessContext -I proto opentelemetry/proto/processcontext/"
             "v1development/process_context.proto < %s", tmp);
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
    out[n] = '\0';
    ok(p != NULL && pclose(p) == 0, "protoc decodes the payload");
    unlink(tmp);
    ok(strstr(out, "string_value: \"pc-service\"") != NULL, "service.name");
    ok(strstr(out, "string_value: \"ci\"") != NULL, "custom resource attribute");
    ok(strstr(out, "key: \"threadlocal.schema_version\"") != NULL
       && strstr(out, "string_value: \"tlsdesc_v1_dev\"") != NULL,
       "threadlocal.schema_version");
    ok(strstr(out, "key: \"threadlocal.attribute_key_map\"") != NULL
       && strstr(out, "array_value") != NULL
       && strstr(out, "string_value: \"span.name\"") != NULL,
       "threadlocal.attribute_key_map [span.name]");
    if (tap_failed) {
        printf("# %s\n", out);
    }

    sp_process_context_drop();
    ok(find_mapping(name, sizeof(name)) == NULL, "dropped");
    sp_resource_free(&res);
    return done_testing();
}
