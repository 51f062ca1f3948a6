/* Zipkin B3 parsing and formatting (single and multiple headers). */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/trace/b3.h"
#include "common/trace/ids.h"


/* A 16- or 32-char lower-hex trace id into 16 bytes (a 64-bit one in the
 * low half). */
static int
b3_trace_id(uint8_t out[SP_TRACE_ID_LEN], const char *s, size_t len)
{
    uint8_t  id[SP_TRACE_ID_LEN];

    memset(id, 0, sizeof(id));

    if (len == 2 * SP_TRACE_ID_LEN) {
        if (sp_hex_decode(id, s, SP_TRACE_ID_LEN) != 0) {
            return -1;
        }
    } else if (len == SP_TRACE_ID_LEN) {
        if (sp_hex_decode(id + SP_TRACE_ID_LEN / 2, s, SP_TRACE_ID_LEN / 2)
            != 0)
        {
            return -1;
        }
    } else {
        return -1;
    }

    if (sp_id_is_zero(id, SP_TRACE_ID_LEN)) {
        return -1;
    }
    memcpy(out, id, SP_TRACE_ID_LEN);
    return 0;
}


static int
b3_span_id(uint8_t out[SP_SPAN_ID_LEN], const char *s, size_t len)
{
    uint8_t  id[SP_SPAN_ID_LEN];

    if (len != 2 * SP_SPAN_ID_LEN || sp_hex_decode(id, s, SP_SPAN_ID_LEN) != 0
        || sp_id_is_zero(id, SP_SPAN_ID_LEN))
    {
        return -1;
    }
    memcpy(out, id, SP_SPAN_ID_LEN);
    return 0;
}


/* The single header's SamplingState: 0, 1 or d. */
static int
b3_single_sampling(const char *s, size_t len, sp_b3_sampling_t *out)
{
    if (len != 1) {
        return -1;
    }
    switch (s[0]) {
    case '0':
        *out = SP_B3_DENY;
        return 0;
    case '1':
        *out = SP_B3_ACCEPT;
        return 0;
    case 'd':
        *out = SP_B3_DEBUG;
        return 0;
    default:
        return -1;
    }
}


int
sp_b3_parse_single(const char *s, size_t len, sp_b3_t *out)
{
    size_t       i, n, plen[4];
    const char  *part[4], *end;
    sp_b3_t      b3;

    if (s == NULL || len == 0) {
        return -1;
    }

    /* Split on '-' into at most four fields. */
    end = s + len;
    n = 0;
    part[0] = s;
    for (i = 0; i < len; i++) {
        if (s[i] == '-') {
            if (n == 3) {
                return -1;
            }
            plen[n] = (size_t) (s + i - part[n]);
            part[++n] = s + i + 1;
        }
    }
    plen[n] = (size_t) (end - part[n]);
    n++;

    memset(&b3, 0, sizeof(b3));

    if (n == 1) {
        /* Only a sampling decision ("b3: 0" is a deny). */
        if (b3_single_sampling(part[0], plen[0], &b3.sampling) != 0) {
            return -1;
        }
        *out = b3;
        return 0;
    }

    if (b3_trace_id(b3.trace_id, part[0], plen[0]) != 0
        || b3_span_id(b3.span_id, part[1], plen[1]) != 0)
    {
        return -1;
    }
    b3.has_ids = 1;

    if (n >= 3 && b3_single_sampling(part[2], plen[2], &b3.sampling) != 0) {
        return -1;
    }

    if (n == 4) {
        if (b3_span_id(b3.parent_id, part[3], plen[3]) != 0) {
            return -1;
        }
        b3.has_parent = 1;
    }

    *out = b3;
    return 0;
}


static int
b3_is(const char *s, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(s, lit, len) == 0;
}


int
sp_b3_parse_multi(const char *trace_id, size_t trace_id_len,
    const char *span_id, size_t span_id_len,
    const char *parent_id, size_t parent_id_len,
    const char *sampled, size_t sampled_len,
    const char *flags, size_t flags_len, sp_b3_t *out)
{
    sp_b3_t  b3;

    if (trace_id == NULL || span_id == NULL) {
        return -1;
    }

    memset(&b3, 0, sizeof(b3));

    if (b3_trace_id(b3.trace_id, trace_id, trace_id_len) != 0
        || b3_span_id(b3.span_id, span_id, span_id_len) != 0)
    {
        return -1;
    }
    b3.has_ids = 1;

    if (parent_id != NULL) {
        if (b3_span_id(b3.parent_id, parent_id, parent_id_len) != 0) {
            return -1;
        }
        b3.has_parent = 1;
    }

    /* The specification asks to accept true/false too (older tracers). */
    if (sampled != NULL) {
        if (b3_is(sampled, sampled_len, "1")
            || b3_is(sampled, sampled_len, "true"))
        {
            b3.sampling = SP_B3_ACCEPT;
        } else if (b3_is(sampled, sampled_len, "0")
                   || b3_is(sampled, sampled_len, "false"))
        {
            b3.sampling = SP_B3_DENY;
        } else {
            return -1;
        }
    }

    /* Debug is "1"; "absent or any other value can be ignored". */
    if (flags != NULL && b3_is(flags, flags_len, "1")) {
        b3.sampling = SP_B3_DEBUG;
    }

    *out = b3;
    return 0;
}


size_t
sp_b3_format_single(char *out, const uint8_t trace_id[SP_TRACE_ID_LEN],
    const uint8_t span_id[SP_SPAN_ID_LEN], int sampled)
{
    sp_hex_encode(out, trace_id, SP_TRACE_ID_LEN);
    out[2 * SP_TRACE_ID_LEN] = '-';
    sp_hex_encode(out + 2 * SP_TRACE_ID_LEN + 1, span_id, SP_SPAN_ID_LEN);
    out[SP_B3_SINGLE_LEN - 2] = '-';
    out[SP_B3_SINGLE_LEN - 1] = sampled ? '1' : '0';

    return SP_B3_SINGLE_LEN;
}
