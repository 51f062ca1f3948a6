/* The body of a collector's 2xx answer over OTLP/HTTP JSON (protocol
 * http/json): an ExportTraceServiceResponse or ExportProfilesService-
 * Response in JSON whose partialSuccess says how many were rejected and
 * why (sp_otlp_http_json_parse_response, jansson underneath). The first
 * byte picks the size of the message buffer, 0 included, and its low bit
 * the counter read (rejectedSpans or rejectedProfiles).
 * Properties: the message is NUL-terminated inside its buffer and nothing
 * is written past it; the count is never negative; on a body that is not
 * a response, rejected is 0 and the message empty. */

#include <stdint.h>
#include <string.h>

#include "common/export/otlp_http_json.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char      buf[300];
    size_t    msglen;
    int64_t   rejected = -12345;
    int       rc;

    if (size == 0) {
        return 0;
    }
    msglen = data[0] % 5 == 0 ? 0 : data[0];    /* 0, 1..255 */
    memset(buf, 'x', sizeof(buf));
    rc = sp_otlp_http_json_parse_response(data + 1, size - 1,
             data[0] & 1 ? "rejectedProfiles" : "rejectedSpans", &rejected,
             buf, msglen);
    if (msglen > 0) {
        FUZZ_CHECK(memchr(buf, '\0', msglen) != NULL);
    }
    FUZZ_CHECK(buf[msglen] == 'x');   /* nothing written past msglen */
    FUZZ_CHECK(rejected >= 0);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && rejected == 0);
        FUZZ_CHECK(msglen == 0 || buf[0] == '\0');
    }
    return 0;
}
