/* HTTP semantic conventions shared by both servers: known methods, span
 * names, the method attributes. */

#define _GNU_SOURCE
#include <string.h>

#include "tap.h"
#include "common/trace/http_span.h"


static void
test_known_method(void)
{
    static const char *const  known[] = {
        "GET", "PUT", "HEAD", "POST", "PATCH", "TRACE", "DELETE",
        "CONNECT", "OPTIONS",
    };
    static const char *const  other[] = {
        "get", "Get", "GETX", "GE", "", "POS", "PROPFIND", "OPTION",
        "DELETe", "CONNECTS", "PURGE", "MKCOL",
    };
    const char  *k;
    char         buf[16];
    size_t       i;

    for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        /* Not NUL-terminated where it ends: the length decides. */
        memset(buf, 'X', sizeof(buf));
        memcpy(buf, known[i], strlen(known[i]));
        k = sp_http_known_method(buf, strlen(known[i]));
        ok(k != NULL && strcmp(k, known[i]) == 0, "%s is known", known[i]);
    }
    for (i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        ok(sp_http_known_method(other[i], strlen(other[i])) == NULL,
           "\"%s\" is not a standard method", other[i]);
    }
    ok(sp_http_known_method(NULL, 3) == NULL, "no method");
    ok(sp_http_known_method("GET", 2) == NULL, "a prefix of GET is not GET");
}


static void
test_span_name(void)
{
    char    buf[64];
    size_t  n;

    n = sp_http_span_name(buf, sizeof(buf), "GET", 3, "/api/", 5);
    is_int((int) n, 9, "GET with a route: length");
    ok(memcmp(buf, "GET /api/", 9) == 0, "GET with a route: \"GET /api/\"");

    n = sp_http_span_name(buf, sizeof(buf), "DELETE", 6, NULL, 0);
    ok(n == 6 && memcmp(buf, "DELETE", 6) == 0, "no route: the method alone");

    n = sp_http_span_name(buf, sizeof(buf), "PROPFIND", 8, "/dav/", 5);
    ok(n == 10 && memcmp(buf, "HTTP /dav/", 10) == 0,
       "a non-standard method is named HTTP");

    n = sp_http_span_name(buf, 4, "OPTIONS", 7, "/x", 2);
    ok(n == 4 && memcmp(buf, "OPTI", 4) == 0,
       "a method longer than the buffer is cut, the route left out");

    n = sp_http_span_name(buf, 8, "GET", 3, "/long/route", 11);
    ok(n == 3 && memcmp(buf, "GET", 3) == 0,
       "a route that does not fit is left out");
}


static int
has_bytes(const sp_span_t *s, const char *str)
{
    return memmem(s->wire, s->wire_used, str, strlen(str)) != NULL;
}


static void
test_span_method(void)
{
    static sp_span_t  s;
    uint8_t           tid[16] = { 1 }, sid[8] = { 2 };

    sp_span_init(&s, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    sp_http_span_method(&s, "PATCH", 5);
    is_int(s.nattrs, 1, "a standard method: one attribute");
    ok(has_bytes(&s, "http.request.method") && has_bytes(&s, "PATCH"),
       "http.request.method = PATCH");

    sp_span_init(&s, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    sp_http_span_method(&s, "purge", 5);
    is_int(s.nattrs, 2, "another method: two attributes");
    ok(has_bytes(&s, "_OTHER") && has_bytes(&s, "method_original")
       && has_bytes(&s, "purge"),
       "_OTHER and http.request.method_original = purge");
}


int
main(void)
{
    test_known_method();
    test_span_name();
    test_span_method();

    return done_testing();
}
