#include <string.h>

#include "common/control/api_info.h"

char *
sp_api_public_url(const char *url, char *out, size_t outlen)
{
    const char  *p, *auth, *end, *at;
    size_t       n = 0, len;

    if (outlen == 0) {
        return out;
    }
    out[0] = '\0';
    if (url == NULL) {
        return out;
    }
    /* A scheme is letters, digits, '+', '-', '.' before "://"; without
     * one it is not a URL, and nothing of it is shown. */
    p = url + strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789+-.");
    if (p == url || strncmp(p, "://", 3) != 0) {
        return out;
    }
    auth = p + 3;
    /* The authority ends at the first '/', '?' or '#'. */
    end = auth + strcspn(auth, "/?#");
    at = NULL;
    for (const char *q = auth; q < end; q++) {
        if (*q == '@') {
            at = q;                      /* the last one: user may hold '@' */
        }
    }

#define PUT(s, l)                                                             \
    do {                                                                      \
        len = (l);                                                            \
        if (n + len >= outlen) {                                              \
            len = outlen - 1 - n;                                             \
        }                                                                     \
        memcpy(out + n, (s), len);                                            \
        n += len;                                                             \
    } while (0)

    PUT(url, (size_t) (auth - url));                       /* scheme:// */
    PUT(at != NULL ? at + 1 : auth,
        (size_t) (end - (at != NULL ? at + 1 : auth)));    /* host:port */
    PUT(end, strcspn(end, "?#"));                           /* path */
#undef PUT
    out[n] = '\0';
    return out;
}
