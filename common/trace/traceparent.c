/* W3C Trace Context `traceparent` parsing and formatting. */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/trace/ids.h"
#include "common/trace/traceparent.h"

/* Offsets in "vv-<32 hex trace-id>-<16 hex parent-id>-ff". */
#define TP_VERSION_OFF  0
#define TP_TRACE_OFF    3
#define TP_PARENT_OFF   36
#define TP_FLAGS_OFF    53


int
sp_traceparent_parse(const char *s, size_t len, sp_traceparent_t *out)
{
    sp_traceparent_t  tp;

    if (s == NULL) {
        return -1;
    }

    /* OWS (spaces and tabs) around the value is not part of it. */
    while (len > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) {
        len--;
    }

    if (len < SP_TRACEPARENT_LEN) {
        return -1;
    }

    if (sp_hex_decode(&tp.version, s + TP_VERSION_OFF, 1) != 0
        || tp.version == 0xff)
    {
        return -1;
    }

    if (len > SP_TRACEPARENT_LEN) {
        /* Version 00 is exactly 55 chars; a higher version may only carry
         * more fields after another '-'. */
        if (tp.version == 0x00 || s[SP_TRACEPARENT_LEN] != '-') {
            return -1;
        }
        /* ',' is how HTTP joins repeated field lines (RFC 9110 5.3; httpd
         * and proxies do): a value that may be two traceparent headers is
         * invalid, as two headers are. */
        if (memchr(s + SP_TRACEPARENT_LEN, ',', len - SP_TRACEPARENT_LEN)
            != NULL)
        {
            return -1;
        }
    }

    if (s[TP_TRACE_OFF - 1] != '-'
        || s[TP_PARENT_OFF - 1] != '-'
        || s[TP_FLAGS_OFF - 1] != '-')
    {
        return -1;
    }

    if (sp_hex_decode(tp.trace_id, s + TP_TRACE_OFF, SP_TRACE_ID_LEN) != 0
        || sp_hex_decode(tp.parent_id, s + TP_PARENT_OFF, SP_SPAN_ID_LEN) != 0
        || sp_hex_decode(&tp.flags, s + TP_FLAGS_OFF, 1) != 0)
    {
        return -1;
    }

    if (sp_id_is_zero(tp.trace_id, SP_TRACE_ID_LEN)
        || sp_id_is_zero(tp.parent_id, SP_SPAN_ID_LEN))
    {
        return -1;
    }

    *out = tp;

    return 0;
}


size_t
sp_traceparent_format(char *out, const uint8_t trace_id[SP_TRACE_ID_LEN],
    const uint8_t span_id[SP_SPAN_ID_LEN], uint8_t flags)
{
    out[0] = '0';
    out[1] = '0';
    out[2] = '-';
    sp_hex_encode(out + TP_TRACE_OFF, trace_id, SP_TRACE_ID_LEN);
    out[TP_PARENT_OFF - 1] = '-';
    sp_hex_encode(out + TP_PARENT_OFF, span_id, SP_SPAN_ID_LEN);
    out[TP_FLAGS_OFF - 1] = '-';
    /* one byte: two digits, not a call of the 8-byte encoder */
    out[TP_FLAGS_OFF] = "0123456789abcdef"[flags >> 4];
    out[TP_FLAGS_OFF + 1] = "0123456789abcdef"[flags & 0x0f];

    return SP_TRACEPARENT_LEN;
}
