/* tracestate: the request header kept and forwarded when valid.
 * Properties of a valid value: at most 512 chars; only printable ASCII and
 * tabs; an empty member added at the end keeps it valid (empty members are
 * allowed and not counted). */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace/tracestate.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char  *s = (const char *) data;
    char        *more;
    size_t       i;

    if (sp_tracestate_validate(s, size) != 0) {
        return 0;
    }
    FUZZ_CHECK(size <= SP_TRACESTATE_MAX_LEN);
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
