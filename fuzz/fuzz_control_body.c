/* The body of a control API write (POST/PUT to otel_api / spanprof-api),
 * sp_control_body_parse, and the public form of a URL the API shows
 * (sp_api_public_url, on the same bytes).
 * Properties: accepted means each switch (profiling, cpu, wall, memory)
 * -1/0/1 and each rate (rate, wall_rate) 0..1000, not all unset, and the
 * same values written back as JSON parse to the same;
 * refused comes with a reason. The public URL is NUL-ended inside its
 * buffer and has no userinfo, query or fragment. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/control/api_info.h"
#include "common/control/control_body.h"
#include "fuzz/fuzz.h"

/* A switch member back as JSON ("" when not given). */
static int
put_flag(char *p, size_t room, const char *name, int v)
{
    return v < 0 ? 0 : snprintf(p, room, ",\"%s\":%s", name,
                                v ? "true" : "false");
}

static int
put_rate(char *p, size_t room, const char *name, unsigned v)
{
    return v == 0 ? 0 : snprintf(p, room, ",\"%s\":%u", name, v);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_control_body_t  b, again;
    char               err[256], json[256], url[64];
    char              *s;
    const char        *auth;
    size_t             n;
    int                len;

    memset(err, 0, sizeof(err));
    if (sp_control_body_parse((const char *) data, size, &b, err,
                              sizeof(err)) == 0)
    {
        FUZZ_CHECK(b.profiling >= -1 && b.profiling <= 1);
        FUZZ_CHECK(b.cpu >= -1 && b.cpu <= 1);
        FUZZ_CHECK(b.wall >= -1 && b.wall <= 1);
        FUZZ_CHECK(b.memory >= -1 && b.memory <= 1);
        FUZZ_CHECK(b.rate_hz <= 1000 && b.wall_rate_hz <= 1000);
        FUZZ_CHECK(b.profiling >= 0 || b.rate_hz > 0 || b.cpu >= 0
                   || b.wall >= 0 || b.wall_rate_hz > 0 || b.memory >= 0);
        /* Written back as JSON (the leading comma replaced by "{"), the
         * same values parse again. */
        len = 0;
        len += put_flag(json + len, sizeof(json) - len, "profiling",
                        b.profiling);
        len += put_rate(json + len, sizeof(json) - len, "rate", b.rate_hz);
        len += put_flag(json + len, sizeof(json) - len, "cpu", b.cpu);
        len += put_flag(json + len, sizeof(json) - len, "wall", b.wall);
        len += put_rate(json + len, sizeof(json) - len, "wall_rate",
                        b.wall_rate_hz);
        len += put_flag(json + len, sizeof(json) - len, "memory", b.memory);
        FUZZ_CHECK(len > 0 && (size_t) len + 1 < sizeof(json));
        json[0] = '{';
        json[len++] = '}';
        json[len] = '\0';
        FUZZ_CHECK(sp_control_body_parse(json, (size_t) len, &again, err,
                                         sizeof(err)) == 0);
        FUZZ_CHECK(again.profiling == b.profiling
                   && again.rate_hz == b.rate_hz && again.cpu == b.cpu
                   && again.wall == b.wall
                   && again.wall_rate_hz == b.wall_rate_hz
                   && again.memory == b.memory);
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
