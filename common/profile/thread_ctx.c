#include <string.h>

#include "common/profile/thread_ctx.h"

/* Exported for external readers (OTEP 4947); the module is built with
 * -mtls-dialect=gnu2 so that this is a TLSDESC variable. */
__attribute__((visibility("default")))
__thread sp_thread_ctx_record_t *otel_thread_ctx_v1;

/* A route's name is mostly 8 to 32 bytes ("GET /api/{id}"): two
 * overlapping 8- or 16-byte moves, where memcpy's inline expansion takes
 * a `rep movsq` and its setup. */
static inline void
sp_thread_ctx_copy_name(uint8_t *dst, const char *src, size_t n)
{
    uint64_t  a, b;

    if (n >= 8 && n <= 16) {
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n > 16 && n <= 32) {
        uint64_t  c, d;

        memcpy(&a, src, 8);
        memcpy(&b, src + 8, 8);
        memcpy(&c, src + n - 16, 8);
        memcpy(&d, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + 8, &b, 8);
        memcpy(dst + n - 16, &c, 8);
        memcpy(dst + n - 8, &d, 8);
    } else {
        memcpy(dst, src, n);
    }
}


void
sp_thread_ctx_record_init(sp_thread_ctx_record_t *rec,
    const uint8_t trace_id[SP_TRACE_ID_LEN],
    const uint8_t span_id[SP_SPAN_ID_LEN], uint8_t trace_flags,
    const char *span_name, size_t name_len)
{
    rec->valid = 0;
    atomic_signal_fence(memory_order_seq_cst);
    memcpy(rec->trace_id, trace_id, SP_TRACE_ID_LEN);
    memcpy(rec->span_id, span_id, SP_SPAN_ID_LEN);
    rec->trace_flags = trace_flags;
    rec->attrs_data_size = 0;
    if (span_name != NULL && name_len > 0) {
        if (name_len > SP_THREAD_CTX_ATTRS_MAX - 2) {
            name_len = SP_THREAD_CTX_ATTRS_MAX - 2;
        }
        rec->attrs_data[0] = SP_THREAD_CTX_ATTR_SPAN_NAME;
        rec->attrs_data[1] = (uint8_t) name_len;
        sp_thread_ctx_copy_name(rec->attrs_data + 2, span_name, name_len);
        rec->attrs_data_size = (uint16_t) (name_len + 2);
    }
    atomic_signal_fence(memory_order_seq_cst);
    rec->valid = 1;
}

size_t
sp_thread_ctx_record_span_name(const uint8_t *attrs, size_t attrs_len,
    const char **name)
{
    size_t  i = 0, len;

    while (i + 2 <= attrs_len) {
        len = attrs[i + 1];
        if (i + 2 + len > attrs_len) {
            break;
        }
        if (attrs[i] == SP_THREAD_CTX_ATTR_SPAN_NAME) {
            *name = (const char *) attrs + i + 2;
            return len;
        }
        i += 2 + len;
    }
    *name = NULL;
    return 0;
}

sp_thread_ctx_record_t **
sp_thread_ctx_slot(void)
{
    return &otel_thread_ctx_v1;
}

void
sp_thread_ctx_thread_init(void)
{
    /* A read and a write: both resolve the TLS descriptor (and allocate a
     * dynamic TLS block if the loader put us there). */
    sp_thread_ctx_record_t *volatile  *slot = &otel_thread_ctx_v1;

    *slot = *slot;
}
