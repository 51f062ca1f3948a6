#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/export/endpoint.h"

#define SP_ENDPOINT_FORMS \
    "must be host:port, http://host[:port][/path], " \
    "https://host[:port][/path] or file:///dir"

/* host[:port] in [p, end): 0 or -1 with *why. */
static int
check_hostport(const char *p, const char *end, int need_port,
    const char **why)
{
    const char  *q, *colon;
    long         port;

    if (p == end) {
        *why = "has no host";
        return -1;
    }
    if (*p == '[') {
        q = memchr(p, ']', (size_t) (end - p));
        if (q == NULL || q == p + 1) {
            *why = "has an invalid [IPv6] host";
            return -1;
        }
        for (const char *c = p + 1; c < q; c++) {
            if (!isxdigit((unsigned char) *c) && *c != ':' && *c != '.') {
                *why = "has an invalid [IPv6] host";
                return -1;
            }
        }
        colon = q + 1 < end ? q + 1 : NULL;
        if (colon != NULL && *colon != ':') {
            *why = "has garbage after the [IPv6] host";
            return -1;
        }
    } else {
        colon = memchr(p, ':', (size_t) (end - p));
        for (q = p; q < (colon != NULL ? colon : end); q++) {
            if (!isalnum((unsigned char) *q) && *q != '-' && *q != '.'
                && *q != '_')
            {
                *why = "has an invalid character in its host";
                return -1;
            }
        }
        if (q == p) {
            *why = "has no host";
            return -1;
        }
    }
    if (colon == NULL) {
        if (need_port) {
            *why = "has no port (" SP_ENDPOINT_FORMS ")";
            return -1;
        }
        return 0;
    }
    port = 0;
    for (q = colon + 1; q < end; q++) {
        if (!isdigit((unsigned char) *q) || port > 65535) {
            *why = "has an invalid port";
            return -1;
        }
        port = port * 10 + (*q - '0');
    }
    if (q == colon + 1 || port < 1 || port > 65535) {
        *why = "has an invalid port";
        return -1;
    }
    return 0;
}

int
sp_endpoint_normalize(const char *in, int allow_file, char *out,
    size_t outlen, const char **why)
{
    const char  *auth, *end, *at, *scheme;
    size_t       skip;

    if (outlen < strlen(in) + SP_ENDPOINT_EXTRA) {
        *why = "is too long";
        return -1;
    }
    if (*in == '\0') {
        *why = "is empty";
        return -1;
    }
    if (strncasecmp(in, "file://", 7) == 0) {
        if (!allow_file) {
            *why = "must be an http:// or https:// URL";
            return -1;
        }
        if (strncmp(in, "file://", 7) != 0 || in[7] != '/') {
            *why = "must name an absolute directory (file:///dir)";
            return -1;
        }
        strcpy(out, in);
        return 0;
    }
    if (strncasecmp(in, "http://", 7) == 0) {
        scheme = "http://";
        skip = 7;
    } else if (strncasecmp(in, "https://", 8) == 0) {
        scheme = "https://";
        skip = 8;
    } else if (strstr(in, "://") != NULL) {
        *why = SP_ENDPOINT_FORMS;
        return -1;
    } else {
        /* nginx-otel's bare form: host:port and nothing else. */
        if (check_hostport(in, in + strlen(in), 1, why) != 0) {
            if (strcmp(*why, "has an invalid character in its host") == 0) {
                *why = SP_ENDPOINT_FORMS;
            }
            return -1;
        }
        strcpy(out, "http://");
        strcat(out, in);
        return 0;
    }

    auth = in + skip;
    end = auth + strcspn(auth, "/?#");
    at = NULL;
    for (const char *q = auth; q < end; q++) {
        if (*q == '@') {
            at = q;
        }
    }
    if (check_hostport(at != NULL ? at + 1 : auth, end, 0, why) != 0) {
        return -1;
    }
    for (const char *q = in; *q; q++) {
        if ((unsigned char) *q <= ' ' || (unsigned char) *q >= 0x7f) {
            *why = "has a space or control character";
            return -1;
        }
    }
    strcpy(out, scheme);
    strcat(out, auth);
    return 0;
}

const char *
sp_endpoint_path(const char *url)
{
    const char  *p = strstr(url, "://");

    if (p == NULL) {
        return url + strlen(url);
    }
    p += 3;
    return p + strcspn(p, "/?#");
}

int
sp_endpoint_has_path(const char *url)
{
    const char  *p = sp_endpoint_path(url);

    return *p != '\0' && strcmp(p, "/") != 0;
}
