/* HTTP semantic conventions shared by both servers: known methods, span
 * names, the method attributes; attributes encoded ahead
 * (sp_span_kv_str_encode, sp_span_kv_int_encode, sp_span_attrs_raw). */

#define _GNU_SOURCE
#include <string.h>

#include "tap.h"
#include "common/trace/http_span.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"


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


/* The row writer (span.h) must write exactly what the single writers
 * write, take the general path for a long value, and drop (and count) what
 * does not fit as they do. */
static void
test_attrs_row(void)
{
    static sp_span_t  x, y;
    static char       longv[300];
    uint8_t           tid[16] = { 1 }, sid[8] = { 2 };
    sp_span_attrs_t   a;
    int               i;

    memset(longv, 'v', sizeof(longv));

    sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    sp_http_span_method(&x, "GET", 3);
    sp_http_span_method(&x, "purge", 5);
    sp_span_attr_cstr(&x, "url.path", "/a/b", 4);
    sp_span_attr_cstr(&x, "user_agent.original", longv, sizeof(longv));
    sp_span_attr_cint(&x, "client.port", 54321);
    sp_http_span_status(&x, 503);
    sp_span_attr_cint(&x, "http.response.body.size", 0);
    sp_span_attr_cstr(&x, "url.scheme", "http", 4);

    sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    a = sp_span_attrs_open(&y);
    sp_http_attrs_method(&a, &y, sp_http_known_method("GET", 3), "GET", 3);
    sp_http_attrs_method(&a, &y, sp_http_known_method("purge", 5), "purge",
                         5);
    sp_span_attrs_cstr(&a, &y, "url.path", "/a/b", 4);
    sp_span_attrs_cstr(&a, &y, "user_agent.original", longv, sizeof(longv));
    sp_span_attrs_cint(&a, &y, "client.port", 54321);
    sp_http_attrs_status(&a, &y, SP_SPAN_KIND_SERVER, 503);
    sp_span_attrs_cint(&a, &y, "http.response.body.size", 0);
    sp_span_attrs_cstr(&a, &y, "url.scheme", "http", 4);
    sp_span_attrs_close(&y, a);

    is_int(y.nattrs, x.nattrs, "a row: as many attributes (%d)", x.nattrs);
    ok(y.wire_used == x.wire_used
       && memcmp(y.wire, x.wire, x.wire_used) == 0,
       "a row: the same bytes as one attribute at a time (%d)", x.wire_used);
    ok(y.status_code == SP_STATUS_ERROR && has_bytes(&y, "error.type")
       && has_bytes(&y, "503"), "a row: a 503 is an error, error.type 503");

    /* Out of room, then out of attributes. */
    sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    a = sp_span_attrs_open(&y);
    for (i = 0; i < 45; i++) {
        sp_span_attr_cstr(&x, "k", longv, 100);
        sp_span_attrs_cstr(&a, &y, "k", longv, 100);
    }
    sp_span_attrs_close(&y, a);
    ok(x.dropped_attrs > 0 && y.dropped_attrs == x.dropped_attrs
       && y.nattrs == x.nattrs && y.wire_used == x.wire_used
       && y.wire_used <= SP_SPAN_WIRE
       && memcmp(y.wire, x.wire, x.wire_used) == 0,
       "a row out of room drops and counts as the single writers do "
       "(%d kept, %d dropped)", y.nattrs, y.dropped_attrs);

    sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    a = sp_span_attrs_open(&y);
    for (i = 0; i < SP_SPAN_MAX_ATTRS + 5; i++) {
        sp_span_attr_cint(&x, "n", i);
        sp_span_attrs_cint(&a, &y, "n", i);
    }
    sp_span_attrs_close(&y, a);
    ok(y.nattrs == SP_SPAN_MAX_ATTRS && y.dropped_attrs == 5
       && y.wire_used == x.wire_used
       && memcmp(y.wire, x.wire, x.wire_used) == 0,
       "a row keeps at most SP_SPAN_MAX_ATTRS and counts the rest");
}


/* Attributes encoded ahead and appended as one copy: the bytes the
 * single writers write, and what protobuf-c decodes from the span. */
static void
test_attrs_raw(void)
{
    static sp_span_t  x, y;
    static char       longv[200];
    static uint8_t    out[SP_SPAN_WIRE + 512];
    uint8_t           tid[16] = { 1 }, sid[8] = { 2 }, enc[160];
    size_t            len, more, n;
    sp_span_attrs_t   a;
    int               i, rc;
    Opentelemetry__Proto__Trace__V1__Span  *d;

    memset(longv, 'v', sizeof(longv));

    len = sp_span_kv_str_encode(enc, sizeof(enc), "url.scheme", 10,
                                "https", 5);
    more = sp_span_kv_str_encode(enc + len, sizeof(enc) - len, "http.route",
                                 10, "/a/b/", 5);
    ok(len == 23 && more == 23, "two attributes encoded ahead (%zu, %zu)",
       len, more);

    sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    sp_span_attr_cstr(&x, "url.path", "/a/b/c", 6);
    sp_span_attr_cstr(&x, "url.scheme", "https", 5);
    sp_span_attr_cstr(&x, "http.route", "/a/b/", 5);
    sp_span_attr_cint(&x, "client.port", 54321);

    sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    a = sp_span_attrs_open(&y);
    sp_span_attrs_cstr(&a, &y, "url.path", "/a/b/c", 6);
    rc = sp_span_attrs_raw(&a, enc, len + more, 2);
    sp_span_attrs_cint(&a, &y, "client.port", 54321);
    sp_span_attrs_close(&y, a);

    ok(rc == 0 && y.nattrs == 4 && y.nattrs == x.nattrs,
       "appended: four attributes (%d)", y.nattrs);
    ok(y.wire_used == x.wire_used
       && memcmp(y.wire, x.wire, x.wire_used) == 0,
       "appended: the bytes of the single writers (%d)", y.wire_used);

    n = (size_t) (sp_span_encode(&y, out) - out);
    ok(n == sp_span_encoded_size(&y), "encoded span: %zu bytes", n);
    d = opentelemetry__proto__trace__v1__span__unpack(NULL, n, out);
    ok(d != NULL && d->n_attributes == 4, "protobuf-c decodes 4 attributes");
    if (d != NULL && d->n_attributes == 4) {
        ok(strcmp(d->attributes[1]->key, "url.scheme") == 0
           && d->attributes[1]->value->value_case
              == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
           && strcmp(d->attributes[1]->value->string_value, "https") == 0,
           "decoded: url.scheme https");
        ok(strcmp(d->attributes[2]->key, "http.route") == 0
           && strcmp(d->attributes[2]->value->string_value, "/a/b/") == 0,
           "decoded: http.route /a/b/");
        ok(strcmp(d->attributes[3]->key, "client.port") == 0
           && d->attributes[3]->value->int_value == 54321,
           "decoded: client.port after them");
    }
    if (d != NULL) {
        opentelemetry__proto__trace__v1__span__free_unpacked(d, NULL);
    }

    /* Integers, as the single writers write them (-1: a 10-byte varint). */
    {
        static const int64_t  ints[] = { 0, 54321, -1 };

        for (i = 0; i < 3; i++) {
            sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
            sp_span_attr_cint(&x, "client.port", ints[i]);
            n = sp_span_kv_int_encode(enc, sizeof(enc), "client.port", 11,
                                      ints[i]);
            ok(n > 0 && n == x.wire_used && memcmp(enc, x.wire, n) == 0,
               "integer %lld encoded ahead: the writers' %zu bytes",
               (long long) ints[i], n);
        }
        ok(sp_span_kv_int_encode(enc, 20, "client.port", 11, 54321) == 0,
           "an integer: a buffer one byte short is refused");
    }

    /* What the fast path cannot take is refused, as is a short buffer. */
    ok(sp_span_kv_str_encode(enc, sizeof(enc), "k", 1, longv, 120) == 0,
       "a 120-byte value is not encoded ahead");
    ok(sp_span_kv_str_encode(enc, sizeof(enc), "k", 1, longv, 119) == 128,
       "a 119-byte value is (128 bytes)");
    ok(sp_span_kv_str_encode(enc, 22, "url.scheme", 10, "https", 5) == 0,
       "a buffer one byte short is refused");

    /* Without room for all: nothing written, the count kept. */
    sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    a = sp_span_attrs_open(&y);
    for (i = 0; i < SP_SPAN_MAX_ATTRS - 1; i++) {
        sp_span_attrs_cint(&a, &y, "n", i);
    }
    sp_span_attrs_close(&y, a);
    n = y.wire_used;
    a = sp_span_attrs_open(&y);
    rc = sp_span_attrs_raw(&a, enc, len + more, 2);
    sp_span_attrs_close(&y, a);
    ok(rc == -1 && y.wire_used == n && y.nattrs == SP_SPAN_MAX_ATTRS - 1,
       "one attribute left: two are not appended");
}


/* The name made in place is the name sp_span_set_name() keeps. */
static void
test_name_place(void)
{
    static sp_span_t  x, y;
    static char       route[SP_SPAN_MAX_VALUE], ts[SP_SPAN_MAX_VALUE + 9];
    char              buf[SP_HTTP_SPAN_NAME_LEN], *place;
    uint8_t           tid[16] = { 1 }, sid[8] = { 2 };
    size_t            n, rlen;

    memset(route, 'r', sizeof(route));
    memset(ts, 't', sizeof(ts));

    for (rlen = 2; rlen <= SP_SPAN_MAX_VALUE; rlen += SP_SPAN_MAX_VALUE - 2) {
        sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
        sp_span_set_tracestate(&x, ts, sizeof(ts));
        n = sp_http_span_name(buf, sizeof(buf), "OPTIONS", 7, route, rlen);
        sp_span_set_name(&x, buf, n);

        sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
        sp_span_set_tracestate(&y, ts, sizeof(ts));
        place = sp_span_name_place(&y, SP_HTTP_SPAN_NAME_LEN);
        ok(place != NULL, "room for a name after the longest tracestate");
        if (place == NULL) {
            continue;
        }
        sp_span_name_done(&y, sp_http_span_name_known(place,
                                  SP_HTTP_SPAN_NAME_LEN, "OPTIONS", 7,
                                  route, rlen));
        ok(y.name_len == x.name_len
           && memcmp(y.text + y.name_off, x.text + x.name_off, x.name_len)
              == 0
           && y.tracestate_len == x.tracestate_len
           && memcmp(y.text + y.tracestate_off, ts, y.tracestate_len) == 0,
           "a %zu-byte route: the name in place is the name copied (%d)",
           rlen, (int) y.name_len);
    }

    n = sp_http_span_name_known(buf, sizeof(buf), NULL, 5, "/x", 2);
    ok(n == 7 && memcmp(buf, "HTTP /x", 7) == 0,
       "an unknown method looked up already is named HTTP");
}


/* A name kept by reference encodes as the name copied, cut the same way;
 * a name set after it, or a span made again, no longer uses it. */
static void
test_name_ref(void)
{
    static sp_span_t  x, y;
    static uint8_t    ex[SP_SPAN_TEXT + 256], ey[SP_SPAN_TEXT + 256];
    static char       big[SP_SPAN_MAX_VALUE + 7];
    uint8_t           tid[16] = { 1 }, sid[8] = { 2 };
    size_t            nx, ny, i;
    const char       *name[2] = { "GET /r200", big };
    size_t            len[2] = { 9, sizeof(big) };

    memset(big, 'n', sizeof(big));
    for (i = 0; i < 2; i++) {
        sp_span_init(&x, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
        sp_span_set_tracestate(&x, "a=1", 3);
        sp_span_set_name(&x, name[i], len[i]);
        sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
        sp_span_set_tracestate(&y, "a=1", 3);
        sp_span_set_name_ref(&y, name[i], len[i]);
        nx = (size_t) (sp_span_encode(&x, ex) - ex);
        ny = (size_t) (sp_span_encode(&y, ey) - ey);
        ok(nx == ny && ny == sp_span_encoded_size(&y)
           && memcmp(ex, ey, nx) == 0,
           "a %zu-byte name by reference: the bytes of the name copied",
           len[i]);
    }

    /* Named again by copy: the reference is dropped. */
    sp_span_set_name(&y, "x", 1);
    sp_span_set_name(&x, "x", 1);
    ok(y.name_ref == NULL
       && (size_t) (sp_span_encode(&y, ey) - ey)
          == (size_t) (sp_span_encode(&x, ex) - ex)
       && memcmp(ex, ey, (size_t) (sp_span_encode(&x, ex) - ex)) == 0,
       "a name copied after one by reference is the one encoded");

    /* The same span made again (the exporter's scratch span): no name. */
    sp_span_set_name_ref(&y, "GET /r200", 9);
    sp_span_init(&y, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, 1);
    ok(y.name_ref == NULL && y.name_len == 0,
       "a span made again has no name by reference");
}


/* sp_wire_copy (wire.h), which every attribute value goes through: each
 * length copies exactly its bytes, none before or after (its short
 * copies overlap: 1 to 3 bytes by first, middle and last). */
static void
test_wire_copy(void)
{
    uint8_t  src[64], dst[80];
    size_t   n, i, bad = 0;

    for (i = 0; i < sizeof(src); i++) {
        src[i] = (uint8_t) (i * 7 + 1);
    }
    for (n = 0; n <= sizeof(src); n++) {
        memset(dst, 0xee, sizeof(dst));
        sp_wire_copy(dst + 8, src, n);
        for (i = 0; i < sizeof(dst); i++) {
            if (dst[i] != (i >= 8 && i < 8 + n ? src[i - 8] : 0xee)) {
                bad++;
                printf("# length %zu: byte %zu is %#x\n", n, i, dst[i]);
                break;
            }
        }
    }
    ok(bad == 0, "sp_wire_copy: lengths 0 to 64 copy their bytes only");
}


int
main(void)
{
    test_wire_copy();
    test_known_method();
    test_span_name();
    test_span_method();
    test_attrs_row();
    test_attrs_raw();
    test_name_place();
    test_name_ref();

    return done_testing();
}
