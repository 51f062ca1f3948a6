/* The body of a collector's 2xx answer (http/protobuf or gRPC): an
 * ExportTraceServiceResponse whose partial_success says how many spans
 * were rejected and why, and the same bytes as an
 * ExportProfilesServiceResponse (rejected profiles). The first byte
 * picks the size of the message buffer, 0 included.
 * Properties: the message is NUL-terminated inside its buffer; on a body
 * that does not decode, rejected is 0 and the message empty. */

#include <stdint.h>
#include <string.h>

#include "common/export/otlp_profiles.h"
#include "common/export/otlp_traces.h"
#include "fuzz/fuzz.h"

typedef int (*parse_fn)(const uint8_t *body, size_t len, int64_t *rejected,
    char *msg, size_t msglen);

static void
check(parse_fn parse, const uint8_t *data, size_t size)
{
    char      buf[300];
    size_t    msglen;
    int64_t   rejected = -12345;
    int       rc;

    msglen = data[0] % 5 == 0 ? 0 : data[0];    /* 0, 1..255 */
    memset(buf, 'x', sizeof(buf));
    rc = parse(data + 1, size - 1, &rejected, buf, msglen);
    if (msglen > 0) {
        FUZZ_CHECK(memchr(buf, '\0', msglen) != NULL);
    }
    FUZZ_CHECK(buf[msglen] == 'x');   /* nothing written past msglen */
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && rejected == 0);
        FUZZ_CHECK(msglen == 0 || buf[0] == '\0');
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    check(sp_otlp_traces_parse_response, data, size);
    check(sp_otlp_profiles_parse_response, data, size);
    return 0;
}
