/* W3C Trace Context `tracestate` validation (Level 2 ABNF):
 *
 *   list        = list-member 0*31( OWS "," OWS list-member )
 *   list-member = (key "=" value) / OWS
 *   key         = ( lcalpha / DIGIT ) 0*255 ( keychar )
 *   keychar     = lcalpha / DIGIT / "_" / "-" / "*" / "/" / "@"
 *
 * "Spaces and horizontal tabs surrounding list-members are ignored", and a
 * value's trailing spaces are optional whitespace, not part of it: each
 * member is trimmed at both ends. */

#include <stddef.h>
#include <string.h>

#include "common/trace/tracestate.h"

#define TS_KEY_MAX    256
#define TS_VALUE_MAX  256


static int
is_ows(char c)
{
    return c == ' ' || c == '\t';
}


static int
is_lcalpha(char c)
{
    return c >= 'a' && c <= 'z';
}


static int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}


static int
is_keychar(char c)
{
    return is_lcalpha(c) || is_digit(c)
           || c == '_' || c == '-' || c == '*' || c == '/' || c == '@';
}


static int
key_valid(const char *p, size_t len)
{
    size_t  i;

    if (len == 0 || len > TS_KEY_MAX
        || !(is_lcalpha(p[0]) || is_digit(p[0])))
    {
        return 0;
    }

    for (i = 1; i < len; i++) {
        if (!is_keychar(p[i])) {
            return 0;
        }
    }

    return 1;
}


/* value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr;
 * nblk-chr = %x21-2B / %x2D-3C / %x3E-7E */
static int
value_valid(const char *p, size_t len)
{
    size_t         i;
    unsigned char  c;

    if (len == 0 || len > TS_VALUE_MAX || p[len - 1] == ' ') {
        return 0;
    }

    for (i = 0; i < len; i++) {
        c = (unsigned char) p[i];

        if (c < 0x20 || c > 0x7e || c == ',' || c == '=') {
            return 0;
        }
    }

    return 1;
}


int
sp_tracestate_normalize(const char *s, size_t len, char *out)
{
    size_t       n, start, end, b, e, o;
    const char  *eq;

    if (len == 0) {
        return 0;
    }

    if (s == NULL || len > SP_TRACESTATE_MAX_LEN) {
        return -1;
    }

    n = 0;
    o = 0;
    start = 0;

    for ( ;; ) {
        end = start;
        while (end < len && s[end] != ',') {
            end++;
        }

        b = start;
        e = end;
        while (b < e && is_ows(s[b])) {
            b++;
        }
        while (e > b && is_ows(s[e - 1])) {
            e--;
        }

        if (b < e) {
            if (n == SP_TRACESTATE_MAX_MEMBERS) {
                return -1;
            }

            eq = memchr(s + b, '=', e - b);
            if (eq == NULL
                || !key_valid(s + b, (size_t) (eq - (s + b)))
                || !value_valid(eq + 1, (size_t) ((s + e) - (eq + 1))))
            {
                return -1;
            }

            /* o <= b: writing forward never overtakes the reading. */
            if (o > 0) {
                out[o++] = ',';
            }
            memmove(out + o, s + b, e - b);
            o += e - b;
            n++;
        }

        if (end == len) {
            break;
        }

        start = end + 1;
    }

    return (int) o;
}


int
sp_tracestate_validate(const char *s, size_t len)
{
    char  buf[SP_TRACESTATE_MAX_LEN];

    if (len > SP_TRACESTATE_MAX_LEN) {
        return -1;
    }

    return sp_tracestate_normalize(s, len, buf) < 0 ? -1 : 0;
}
