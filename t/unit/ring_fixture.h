#ifndef SP_TEST_RING_FIXTURE_H
#define SP_TEST_RING_FIXTURE_H

#include "common/trace/record_ring.h"
#include "common/trace/span_queue.h"
#include "common/export/wire.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"

/* The Span message of a span queue's record, decoded by protobuf-c (NULL
 * if it does not decode: not a ScopeSpans.spans field of its length). */
static inline Opentelemetry__Proto__Trace__V1__Span *
span_rec_decode(const sp_span_rec_t *r)
{
    const uint8_t  *p = r->data + 1;
    uint64_t        n = 0;
    unsigned        shift = 0;

    if (r->len < 2 || r->data[0] != SP_TAG(2, SP_WT_LEN)) {
        return NULL;
    }
    do {
        n |= (uint64_t) (*p & 0x7f) << shift;
        shift += 7;
    } while (*p++ & 0x80);
    if ((size_t) (p - r->data) + n != r->len) {
        return NULL;
    }
    return opentelemetry__proto__trace__v1__span__unpack(NULL, n, p);
}

/* Whether every byte of the ring's buffer is zero (released bytes are
 * zeroed for the concurrent producers' length words). */
static inline int
ring_zero(const sp_record_ring_t *r)
{
    size_t  k;

    for (k = 0; k < sp_record_ring_capacity(r); k++) {
        if (r->buf[k] != 0) {
            return 0;
        }
    }
    return 1;
}

#endif
