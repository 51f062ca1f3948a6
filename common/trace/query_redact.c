#include <stdint.h>
#include <string.h>

#include "common/trace/query_redact.h"

#define N(s)  { s, sizeof(s) - 1 }

/* The OpenTelemetry semantic conventions' list (url.query, url.full). */
static const sp_query_name_t  sp_query_defaults[] = {
    N("AWSAccessKeyId"), N("Signature"), N("sig"), N("X-Goog-Signature"),
};

static int
hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* The key k[0..klen), percent-decoded, is exactly name. */
static int
key_is(const char *k, size_t klen, const sp_query_name_t *name)
{
    size_t         i = 0, j = 0;
    int            hi, lo;
    unsigned char  c;

    /* Decoding only shortens a key. */
    if (klen < name->len) {
        return 0;
    }
    while (i < klen) {
        c = (unsigned char) k[i++];
        if (c == '%' && i + 1 < klen && (hi = hexval(k[i])) >= 0
            && (lo = hexval(k[i + 1])) >= 0)
        {
            c = (unsigned char) (hi << 4 | lo);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (j == name->len || (unsigned char) name->name[j] != c) {
            return 0;
        }
        j++;
    }
    return j == name->len;
}

static int
in_list(const sp_query_name_t *names, size_t n, const char *k, size_t klen,
    int decode)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (decode ? key_is(k, klen, &names[i])
                   : klen == names[i].len
                     && memcmp(k, names[i].name, klen) == 0)
        {
            return 1;
        }
    }
    return 0;
}

static int
redacted_key(const sp_query_redact_t *r, const char *k, size_t klen,
    int decode)
{
    return in_list(sp_query_defaults, sizeof(sp_query_defaults)
                                      / sizeof(sp_query_defaults[0]),
                   k, klen, decode)
           || (r != NULL && in_list(r->names, r->n, k, klen, decode));
}

/* Bit n: some name is n bytes long (bit 63: 63 or more). */
static uint64_t
len_bit(size_t n)
{
    return (uint64_t) 1 << (n < 63 ? n : 63);
}

/* Appends what fits of s[0..n) at buf[*used]. */
static void
put(char *buf, size_t cap, size_t *used, const char *s, size_t n)
{
    if (n > cap - *used) {
        n = cap - *used;
    }
    memcpy(buf + *used, s, n);
    *used += n;
}

const char *
sp_query_redact(const sp_query_redact_t *r, const char *q, size_t *len,
    char *buf, size_t cap)
{
    const char  *p = q, *end = q + *len, *amp, *eq, *from = NULL;
    size_t       used = 0, i, klen;
    uint64_t     lens = 0;
    int          escaped;

    /* Most keys are rejected by their length alone; a query without any
     * '%' (nearly all) never needs a key decoded. */
    for (i = 0; i < sizeof(sp_query_defaults) / sizeof(sp_query_defaults[0]);
         i++)
    {
        lens |= len_bit(sp_query_defaults[i].len);
    }
    for (i = 0; r != NULL && i < r->n; i++) {
        lens |= len_bit(r->names[i].len);
    }
    escaped = memchr(q, '%', *len) != NULL;

    while (p < end) {
        amp = memchr(p, '&', (size_t) (end - p));
        if (amp == NULL) {
            amp = end;
        }
        eq = memchr(p, '=', (size_t) (amp - p));
        klen = eq != NULL ? (size_t) (eq - p) : 0;
        if (eq != NULL
            && (((lens & len_bit(klen))
                 && redacted_key(r, p, klen, 0))
                || (escaped && memchr(p, '%', klen) != NULL
                    && redacted_key(r, p, klen, 1))))
        {
            /* The first one starts the copy; the part before is as sent. */
            if (from == NULL) {
                from = q;
            }
            put(buf, cap, &used, from, (size_t) (eq + 1 - from));
            put(buf, cap, &used, SP_QUERY_REDACTED,
                sizeof(SP_QUERY_REDACTED) - 1);
            from = amp;
        }
        p = amp + 1;
    }
    if (from == NULL) {
        return q;
    }
    put(buf, cap, &used, from, (size_t) (end - from));
    *len = used;
    return buf;
}

const char *
sp_query_redact_name_error(const char *name, size_t len)
{
    size_t  i;

    if (len == 0) {
        return "is empty";
    }
    if (len > 255) {
        return "is longer than 255 bytes";
    }
    for (i = 0; i < len; i++) {
        if ((unsigned char) name[i] <= ' ' || name[i] == 0x7f
            || name[i] == '&' || name[i] == '=' || name[i] == '#')
        {
            return "has a space, a control character, '&', '=' or '#'";
        }
    }
    return NULL;
}
