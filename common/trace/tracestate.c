/* W3C Trace Context `tracestate` validation (Level 2 ABNF):
 *
 *   list        = list-member 0*31( OWS "," OWS list-member )
 *   list-member = (key "=" value) / OWS
 *
 * OWS is only allowed next to a ',' (or as a whole empty member), exactly as
 * the ABNF says, so a trailing space after the last value is part of that
 * value and makes it invalid. HTTP parsers strip the ends of field values
 * anyway, so this only matters for odd input. */

#include <stddef.h>
#include <string.h>

#include "common/trace/tracestate.h"

#define TS_SIMPLE_KEY_MAX  256
#define TS_TENANT_MAX      241
#define TS_SYSTEM_MAX      14
#define TS_VALUE_MAX       256

typedef struct {
    const char  *p;
    size_t       len;
} ts_key_t;


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


/* lcalpha / DIGIT / "_" / "-" / "*" / "/" */
static int
is_keychar(char c)
{
    return is_lcalpha(c) || is_digit(c)
           || c == '_' || c == '-' || c == '*' || c == '/';
}


static int
key_part_valid(const char *p, size_t len, size_t max, int digit_first)
{
    size_t  i;

    if (len == 0 || len > max) {
        return 0;
    }

    if (!is_lcalpha(p[0]) && !(digit_first && is_digit(p[0]))) {
        return 0;
    }

    for (i = 1; i < len; i++) {
        if (!is_keychar(p[i])) {
            return 0;
        }
    }

    return 1;
}


static int
key_valid(const char *p, size_t len)
{
    const char  *at;
    size_t       tenant_len;

    at = memchr(p, '@', len);

    if (at == NULL) {
        return key_part_valid(p, len, TS_SIMPLE_KEY_MAX, 0);
    }

    /* multi-tenant-key = tenant-id "@" system-id; a second '@' fails the
     * system-id check. */
    tenant_len = (size_t) (at - p);

    return key_part_valid(p, tenant_len, TS_TENANT_MAX, 1)
           && key_part_valid(at + 1, len - tenant_len - 1, TS_SYSTEM_MAX, 0);
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
sp_tracestate_validate(const char *s, size_t len)
{
    size_t       i, n, start, end, b, e;
    const char  *eq;
    ts_key_t     keys[SP_TRACESTATE_MAX_MEMBERS];

    if (len == 0) {
        return 0;
    }

    if (s == NULL || len > SP_TRACESTATE_MAX_LEN) {
        return -1;
    }

    n = 0;
    start = 0;

    for ( ;; ) {
        end = start;
        while (end < len && s[end] != ',') {
            end++;
        }

        /* OWS is allowed after a preceding ',' and before a following one. */
        b = start;
        e = end;

        if (start > 0) {
            while (b < e && is_ows(s[b])) {
                b++;
            }
        }

        if (end < len) {
            while (e > b && is_ows(s[e - 1])) {
                e--;
            }
        }

        /* An empty or whitespace-only member: the check also covers the
         * first and last member, where trimming above did not apply. */
        for (i = b; i < e && is_ows(s[i]); i++) {
            /* void */
        }

        if (i < e) {
            if (n == SP_TRACESTATE_MAX_MEMBERS) {
                return -1;
            }

            eq = memchr(s + b, '=', e - b);
            if (eq == NULL) {
                return -1;
            }

            keys[n].p = s + b;
            keys[n].len = (size_t) (eq - (s + b));

            if (!key_valid(keys[n].p, keys[n].len)
                || !value_valid(eq + 1, (size_t) ((s + e) - (eq + 1))))
            {
                return -1;
            }

            for (i = 0; i < n; i++) {
                if (keys[i].len == keys[n].len
                    && memcmp(keys[i].p, keys[n].p, keys[n].len) == 0)
                {
                    return -1;
                }
            }

            n++;
        }

        if (end == len) {
            break;
        }

        start = end + 1;
    }

    return 0;
}
