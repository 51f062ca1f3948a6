/* The body of a control API write (POST/PUT to otel_api / spanprof-api),
 * sp_control_body_parse, and the public form of a URL the API shows
 * (sp_api_public_url, on the same bytes).
 * Properties: accepted means profiling -1/0/1 and rate 0..1000, not both
 * unset, and the same values written back as JSON parse to the same;
 * refused comes with a reason. The public URL is NUL-ended inside its
 * buffer and has no userinfo, query or fragment. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/control/api_info.h"
#include "common/control/control_body.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_control_body_t  b, again;
    char               err[256], json[64], url[64];
    char              *s;
    const char        *auth;
    size_t             n;
    int                len;

    memset(err, 0, sizeof(err));
    if (sp_control_body_parse((const char *) data, size, &b, err,
                              sizeof(err)) == 0)
    {
        FUZZ_CHECK(b.profiling >= -1 && b.profiling <= 1);
        FUZZ_CHECK(b.rate_hz <= 1000);
        FUZZ_CHECK(b.profiling >= 0 || b.rate_hz > 0);
        len = snprintf(json, sizeof(json), "{%s%s%s%.0u}",
                       b.profiling < 0 ? "" : b.profiling ? "\"profiling\":true"
                                                          : "\"profiling\":false",
                       b.profiling >= 0 && b.rate_hz ? "," : "",
                       b.rate_hz ? "\"rate\":" : "", b.rate_hz);
        FUZZ_CHECK(sp_control_body_parse(json, (size_t) len, &again, err,
                                         sizeof(err)) == 0);
        FUZZ_CHECK(again.profiling == b.profiling
                   && again.rate_hz == b.rate_hz);
    } else {
        FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof(err)) != NULL);
    }

    s = fuzz_cstr(data, size);
    sp_api_public_url(s, url, sizeof(url));
    n = strnlen(url, sizeof(url));
    FUZZ_CHECK(n < sizeof(url));
    FUZZ_CHECK(strpbrk(url, "?#") == NULL);
    auth = strstr(url, "://");
    auth = auth != NULL ? auth + 3 : url;
    FUZZ_CHECK(memchr(auth, '@', strcspn(auth, "/")) == NULL);
    free(s);
    return 0;
}
