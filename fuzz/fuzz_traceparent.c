/* traceparent: the request header every traced request brings.
 * Properties: the parser agrees with a plain reading of the W3C rules
 * (below, written from the spec, not from the parser), and a parsed value
 * formats back to a version-00 header that parses to the same ids.
 * Spaces and tabs around the value (OWS) are not part of it. */

#include <stdint.h>
#include <string.h>

#include "common/trace/traceparent.h"
#include "fuzz/fuzz.h"

static int
lchex(const char *s, size_t n, int *nonzero)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
        if (s[i] != '0' && nonzero != NULL) {
            *nonzero = 1;
        }
    }
    return 1;
}

static int
reference_valid(const char *s, size_t len)
{
    int  tid = 0, pid = 0;

    if (len < 55 || !lchex(s, 2, NULL) || memcmp(s, "ff", 2) == 0
        || s[2] != '-' || s[35] != '-' || s[52] != '-'
        || !lchex(s + 3, 32, &tid) || !lchex(s + 36, 16, &pid)
        || !lchex(s + 53, 2, NULL) || !tid || !pid)
    {
        return 0;
    }
    if (len > 55 && (memcmp(s, "00", 2) == 0 || s[55] != '-')) {
        return 0;
    }
    /* A ',' after the fields: repeated header lines that HTTP joined. */
    if (len > 55 && memchr(s + 55, ',', len - 55) != NULL) {
        return 0;
    }
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char        *s = (const char *) data, *v;
    sp_traceparent_t   tp, again;
    char               out[SP_TRACEPARENT_LEN];
    int                rc;
    size_t             vlen;

    v = s;
    vlen = size;
    while (vlen > 0 && (v[0] == ' ' || v[0] == '\t')) {
        v++;
        vlen--;
    }
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) {
        vlen--;
    }

    rc = sp_traceparent_parse(s, size, &tp);
    FUZZ_CHECK((rc == 0) == reference_valid(v, vlen));
    if (rc != 0) {
        return 0;
    }
    FUZZ_CHECK(sp_traceparent_format(out, tp.trace_id, tp.parent_id, tp.flags)
               == SP_TRACEPARENT_LEN);
    FUZZ_CHECK(sp_traceparent_parse(out, sizeof(out), &again) == 0);
    FUZZ_CHECK(again.version == 0 && again.flags == tp.flags
               && memcmp(again.trace_id, tp.trace_id, sizeof(tp.trace_id)) == 0
               && memcmp(again.parent_id, tp.parent_id,
                         sizeof(tp.parent_id)) == 0);
    /* The fields are where the header has them. */
    FUZZ_CHECK(memcmp(out + 3, v + 3, 52) == 0);
    return 0;
}
