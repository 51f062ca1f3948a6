/* The `endpoint` directive's value (nginx otel_exporter { endpoint },
 * Apache OtelExporterEndpoint, OTEL_EXPORTER_OTLP_*ENDPOINT): both servers
 * normalize it with sp_endpoint_normalize (nginx-otel's host:port becomes
 * http://host:port), and the exporter checks the result again with
 * sp_exporter_endpoint_error. nginx's own slot parsers (msec, num, enum)
 * read the other directive values; Apache's seconds/integer/ratio parsers
 * are static and need APR (see docs/contributing.md, "Fuzzing").
 * Properties: the exporter's check accepts http:// or https:// with
 * something after it, or file:// with an absolute path; a normalized
 * endpoint is one the exporter accepts, lowercase-schemed, and normalizing
 * it again changes nothing; a refusal always comes with a reason. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/endpoint.h"
#include "common/export/exporter.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char        *s = fuzz_cstr(data, size), *out, *again;
    const char  *why = sp_exporter_endpoint_error(s);
    size_t       len = strlen(s) + SP_ENDPOINT_EXTRA;

    if (why == NULL) {
        FUZZ_CHECK((strncmp(s, "http://", 7) == 0 && s[7] != '\0')
                   || (strncmp(s, "https://", 8) == 0 && s[8] != '\0')
                   || strncmp(s, "file:///", 8) == 0);
    } else {
        FUZZ_CHECK(why[0] != '\0');
    }

    out = malloc(len);
    again = malloc(len + SP_ENDPOINT_EXTRA);
    FUZZ_CHECK(out != NULL && again != NULL);
    why = NULL;
    if (sp_endpoint_normalize(s, 1, out, len, &why) == 0) {
        FUZZ_CHECK(sp_exporter_endpoint_error(out) == NULL);
        FUZZ_CHECK(strncmp(out, "http://", 7) == 0
                   || strncmp(out, "https://", 8) == 0
                   || strncmp(out, "file:///", 8) == 0);
        FUZZ_CHECK(sp_endpoint_normalize(out, 1, again, len + SP_ENDPOINT_EXTRA,
                                         &why) == 0
                   && strcmp(again, out) == 0);
    } else {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
    }
    free(again);
    free(out);
    free(s);
    return 0;
}
