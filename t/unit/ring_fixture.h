#ifndef SP_TEST_RING_FIXTURE_H
#define SP_TEST_RING_FIXTURE_H

#include "common/trace/record_ring.h"

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
