#include <string.h>

#include "common/base/url_mask.h"

static int
authority_end(char c)
{
    return c == '\0' || c == '/' || c == '?' || c == '#' || c == ' '
           || c == '\t' || c == '\r' || c == '\n' || c == '"' || c == '\''
           || c == '<' || c == '>';
}

static int
scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

/* The '@' ending the userinfo of the authority at p (just after "://"),
 * or NULL. */
static const char *
userinfo_end(const char *p)
{
    const char  *at = NULL;

    for (; !authority_end(*p); p++) {
        if (*p == '@') {
            at = p;
        }
    }
    return at;
}

/* The next "://" preceded by a scheme character, or NULL. */
static const char *
next_authority(const char *p)
{
    const char  *s;

    for (s = strstr(p, "://"); s != NULL; s = strstr(s + 1, "://")) {
        if (s > p && scheme_char(s[-1])) {
            return s + 3;
        }
    }
    return NULL;
}

int
sp_url_has_userinfo(const char *text)
{
    const char  *a = text;

    while ((a = next_authority(a)) != NULL) {
        if (userinfo_end(a) != NULL) {
            return 1;
        }
    }
    return 0;
}

static void
put(char *out, size_t len, size_t *used, const char *s, size_t n)
{
    /* One byte stays for the NUL. */
    if (n > len - 1 - *used) {
        n = len - 1 - *used;
    }
    memcpy(out + *used, s, n);
    *used += n;
}

char *
sp_url_mask(const char *text, char *out, size_t len)
{
    const char  *p = text, *a, *at, *colon;
    size_t       used = 0;

    if (len == 0) {
        return out;
    }
    while ((a = next_authority(p)) != NULL) {
        put(out, len, &used, p, (size_t) (a - p));
        at = userinfo_end(a);
        if (at == NULL) {
            p = a;
            continue;
        }
        colon = memchr(a, ':', (size_t) (at - a));
        if (colon != NULL) {
            put(out, len, &used, a, (size_t) (colon + 1 - a));
        }
        put(out, len, &used, "***", 3);
        p = at;     /* from the '@' on */
    }
    put(out, len, &used, p, strlen(p));
    out[used] = '\0';
    return out;
}
