/* tracestate: the request header kept and forwarded when valid.
 * Properties of a valid value: at most 512 chars; only printable ASCII and
 * tabs; an empty member added at the end keeps it valid (empty members are
 * allowed and not counted); its normalized form (no OWS, no empty
 * members) is no longer, valid, and normalizes to itself. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace/tracestate.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char  *s = (const char *) data;
    char        *more, norm[SP_TRACESTATE_MAX_LEN], again[SP_TRACESTATE_MAX_LEN];
    size_t       i;
    int          n, m;

    if (sp_tracestate_validate(s, size) != 0) {
        return 0;
    }
    FUZZ_CHECK(size <= SP_TRACESTATE_MAX_LEN);
    n = sp_tracestate_normalize(s, size, norm);
    FUZZ_CHECK(n >= 0 && (size_t) n <= size);
    m = sp_tracestate_normalize(norm, (size_t) n, again);
    FUZZ_CHECK(m == n && memcmp(norm, again, (size_t) n) == 0);
    FUZZ_CHECK(n == 0 || (norm[0] != ' ' && norm[n - 1] != ' '
                          && norm[0] != ',' && norm[n - 1] != ','));
    for (i = 0; i < size; i++) {
        FUZZ_CHECK(s[i] == '\t' || (s[i] >= 0x20 && s[i] <= 0x7e));
    }
    if (size > 0 && size < SP_TRACESTATE_MAX_LEN) {
        more = malloc(size + 1);
        FUZZ_CHECK(more != NULL);
        memcpy(more, s, size);
        more[size] = ',';
        FUZZ_CHECK(sp_tracestate_validate(more, size + 1) == 0);
        free(more);
    }
    return 0;
}
