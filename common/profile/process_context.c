#define _GNU_SOURCE

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <linux/prctl.h>

#include "opentelemetry/proto/processcontext/v1development/process_context.pb-c.h"

#include "common/base/arena.h"
#include "common/base/clock.h"
#include "common/export/otlp_common.h"
#include "common/profile/process_context.h"
#include "common/profile/thread_ctx.h"

/* The header OTEP 4719 defines, at the start of the mapping. */
typedef struct {
    char      signature[8];      /* "OTEL_CTX", written last */
    uint32_t  version;           /* 2 */
    uint32_t  payload_size;
    uint64_t  published_at_ns;
    void     *payload;
} header_t;

static void    *mapping;
static size_t   mapping_size;

typedef Opentelemetry__Proto__Processcontext__V1development__ProcessContext
    pb_process_context_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue    pb_any_t;
typedef Opentelemetry__Proto__Common__V1__ArrayValue  pb_array_t;

static int
encode(sp_arena_t *a, const sp_resource_t *res, uint8_t **out, size_t *len)
{
    static const pb_process_context_t  init =
        OPENTELEMETRY__PROTO__PROCESSCONTEXT__V1DEVELOPMENT__PROCESS_CONTEXT__INIT;
    static const pb_array_t            array_init =
        OPENTELEMETRY__PROTO__COMMON__V1__ARRAY_VALUE__INIT;
    static const pb_any_t              any_init =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    static const char                 *keys[] = SP_THREAD_CTX_ATTR_KEYS;
    pb_process_context_t              *pc;
    sp_pb_kv_t                        *map;
    pb_array_t                        *arr;
    size_t                             i, n = sizeof(keys) / sizeof(keys[0]);

    pc = sp_arena_alloc(a, sizeof(*pc));
    arr = sp_arena_alloc(a, sizeof(*arr));
    if (pc == NULL || arr == NULL) {
        return -1;
    }
    *pc = init;
    *arr = array_init;
    pc->resource = sp_otlp_resource(a, res);
    pc->attributes = sp_arena_alloc(a, 2 * sizeof(sp_pb_kv_t *));
    arr->values = sp_arena_alloc(a, n * sizeof(pb_any_t *));
    if (pc->resource == NULL || pc->attributes == NULL || arr->values == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        arr->values[i] = sp_arena_alloc(a, sizeof(pb_any_t));
        if (arr->values[i] == NULL) {
            return -1;
        }
        *arr->values[i] = any_init;
        arr->values[i]->value_case =
            OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        arr->values[i]->string_value = (char *) keys[i];
    }
    arr->n_values = n;

    pc->attributes[0] = sp_otlp_kv_str(a, "threadlocal.schema_version", 26,
                                       SP_THREAD_CTX_SCHEMA,
                                       sizeof(SP_THREAD_CTX_SCHEMA) - 1);
    /* The key map is an array value: reuse a string kv and retype it. */
    map = sp_otlp_kv_str(a, "threadlocal.attribute_key_map", 29, "", 0);
    if (pc->attributes[0] == NULL || map == NULL) {
        return -1;
    }
    map->value->value_case =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
    map->value->array_value = arr;
    pc->attributes[1] = map;
    pc->n_attributes = 2;

    *len = protobuf_c_message_get_packed_size(&pc->base);
    *out = sp_arena_alloc(a, *len ? *len : 1);
    if (*out == NULL) {
        return -1;
    }
    protobuf_c_message_pack(&pc->base, *out);
    return 0;
}

int
sp_process_context_publish(const sp_resource_t *res, char *err, size_t errlen)
{
    sp_arena_t   a;
    uint8_t     *payload;
    size_t       len, size;
    long         page = sysconf(_SC_PAGESIZE);
    int          fd;
    void        *m;
    header_t    *h;

    sp_process_context_drop();

    sp_arena_init(&a, 16 * 1024);
    if (encode(&a, res, &payload, &len) != 0) {
        sp_arena_free(&a);
        snprintf(err, errlen, "out of memory");
        return -1;
    }

    size = (sizeof(header_t) + len + (size_t) page - 1) & ~((size_t) page - 1);

    /* A memfd shows in /proc/<pid>/maps by its name even on kernels that
     * cannot name anonymous mappings. */
    m = MAP_FAILED;
    fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
    if (fd >= 0) {
        if (ftruncate(fd, (off_t) size) == 0) {
            m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        }
        close(fd);
    }
    if (m == MAP_FAILED) {
        m = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (m == MAP_FAILED) {
        sp_arena_free(&a);
        snprintf(err, errlen, "mmap failed: %s", strerror(errno));
        return -1;
    }
    (void) madvise(m, size, MADV_DONTFORK);

    h = m;
    memcpy((char *) m + sizeof(header_t), payload, len);
    sp_arena_free(&a);
    h->version = 2;
    h->payload_size = (uint32_t) len;
    h->payload = (char *) m + sizeof(header_t);
    h->published_at_ns = sp_now_ns();
    atomic_thread_fence(memory_order_seq_cst);
    memcpy(h->signature, "OTEL_CTX", 8);
    atomic_thread_fence(memory_order_seq_cst);

    /* Fails on kernels without CONFIG_ANON_VMA_NAME: then readers find the
     * memfd by name, as OTEP 4719 allows. */
    (void) prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long) m, size,
                 (unsigned long) "OTEL_CTX");

    mapping = m;
    mapping_size = size;
    return 0;
}

void
sp_process_context_drop(void)
{
    if (mapping != NULL) {
        munmap(mapping, mapping_size);
        mapping = NULL;
    }
}
