/* Retry-After: a header value from the collector (delta-seconds or an
 * HTTP date, through curl_getdate). Property: whatever the collector
 * says, the wait is at most an hour. The first byte picks "now" among a
 * few instants so that dates both before and after it are reached. */

#include <stdint.h>
#include <time.h>

#include "common/export/http_client.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const time_t  nows[] = {
        0,                  /* the epoch */
        784111777,          /* Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110) */
        1445412480,         /* Wed, 21 Oct 2015 07:28:00 GMT (MDN) */
        1795316400,         /* 2026-11-22T03:00:00Z */
        (time_t) 1 << 40,
    };
    uint64_t  ms;

    if (size == 0) {
        return 0;
    }
    ms = sp_http_parse_retry_after((const char *) data + 1, size - 1,
                                   nows[data[0] % (sizeof(nows)
                                                   / sizeof(nows[0]))]);
    FUZZ_CHECK(ms <= 3600 * 1000);
    return 0;
}
