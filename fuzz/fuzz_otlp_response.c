/* The body of a collector's 2xx answer to POST /v1/traces: an
 * ExportTraceServiceResponse whose partial_success says how many spans
 * were rejected and why. (The profile exporters read only the status
 * code, so there is no profiles counterpart to fuzz.) The first byte
 * picks the size of the message buffer, 0 included.
 * Properties: the message is NUL-terminated inside its buffer; on a body
 * that does not decode, rejected is 0 and the message empty. */

#include <stdint.h>
#include <string.h>

#include "common/export/otlp_traces.h"
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
    rc = sp_otlp_traces_parse_response(data + 1, size - 1, &rejected, buf,
                                       msglen);
    if (msglen > 0) {
        FUZZ_CHECK(memchr(buf, '\0', msglen) != NULL);
    }
    FUZZ_CHECK(buf[msglen] == 'x');   /* nothing written past msglen */
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && rejected == 0);
        FUZZ_CHECK(msglen == 0 || buf[0] == '\0');
    }
    return 0;
}
