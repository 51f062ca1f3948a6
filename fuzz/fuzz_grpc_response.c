/* A collector's answer to an OTLP/gRPC Export call, as libcurl hands it
 * over: header and trailer lines (grpc-status, grpc-message percent-
 * encoded, grpc-status-details-bin base64 of a google.rpc.Status with
 * RetryInfo, grpc-encoding, content-type), then the HTTP status and the
 * body (a length-prefixed, maybe gzip'd, message). The input: byte 0
 * picks the HTTP status (200 mostly), then '\n'-separated lines up to an
 * empty line, the rest is the body.
 * Properties: the outcome is a code 0..16; the message is NUL-terminated
 * in its buffer; OK gives at most max bytes of message and nothing else
 * does; a RetryInfo delay is at most an hour. */

#include <stdint.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/export/grpc_response.h"
#include "fuzz/fuzz.h"

#define MAX_MSG  4096

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long   statuses[] = { 200, 200, 200, 200, 503, 404, 400,
                                       500 };
    sp_grpc_response_t  r;
    sp_buf_t            msg;
    const char         *p, *end, *nl;
    int                 code;

    if (size == 0) {
        return 0;
    }
    sp_grpc_response_reset(&r);
    sp_buf_init(&msg);
    p = (const char *) data + 1;
    end = (const char *) data + size;
    while (p < end) {
        nl = memchr(p, '\n', (size_t) (end - p));
        if (nl == NULL) {
            nl = end;
        }
        if (nl == p) {              /* the empty line: the body follows */
            p++;
            break;
        }
        sp_grpc_response_header(&r, p, (size_t) (nl - p));
        p = nl < end ? nl + 1 : end;
    }
    FUZZ_CHECK(r.retry_delay_ms <= 3600000);
    FUZZ_CHECK(memchr(r.message, '\0', sizeof(r.message)) != NULL);

    code = sp_grpc_response_finish(&r, statuses[data[0] % 8], p,
                                   (size_t) (end - p), MAX_MSG, &msg);
    FUZZ_CHECK(code >= 0 && code <= 16 && code == r.status);
    FUZZ_CHECK(memchr(r.message, '\0', sizeof(r.message)) != NULL);
    FUZZ_CHECK(msg.len <= MAX_MSG);
    FUZZ_CHECK(code == 0 || msg.len == 0);
    FUZZ_CHECK(statuses[data[0] % 8] == 200 || code != 0);
    sp_buf_free(&msg);
    return 0;
}
