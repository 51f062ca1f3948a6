/* The `endpoint` directive's value (nginx otel_exporter { endpoint },
 * Apache SpanProfEndpoint): both servers check it with
 * sp_exporter_endpoint_error before anything uses it. nginx's own slot
 * parsers (msec, num, enum) read the other directive values; Apache's
 * seconds/integer/ratio parsers are static and need APR (see README).
 * Property: accepted means http:// or https:// with something after it, or
 * file:// with an absolute path; refused comes with a reason. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/exporter.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char        *s = fuzz_cstr(data, size);
    const char  *why = sp_exporter_endpoint_error(s);

    if (why == NULL) {
        FUZZ_CHECK((strncmp(s, "http://", 7) == 0 && s[7] != '\0')
                   || (strncmp(s, "https://", 8) == 0 && s[8] != '\0')
                   || strncmp(s, "file:///", 8) == 0);
    } else {
        FUZZ_CHECK(why[0] != '\0');
    }
    free(s);
    return 0;
}
