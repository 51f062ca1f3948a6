#include <stdio.h>
#include <string.h>

#include "common/trace/http_span.h"

/* The standard methods, found by length first: this runs for every span.
 * memcmp() with a constant length compiles to one or two compares; with the
 * length in a variable it was a library call per candidate. */
#define SP_IS(m, lit)  (memcmp(m, lit, sizeof(lit) - 1) == 0 ? lit : NULL)

const char *
sp_http_known_method(const char *m, size_t len)
{
    const char  *k;

    if (m == NULL) {
        return NULL;
    }
    switch (len) {
    case 3:
        return (k = SP_IS(m, "GET")) ? k : SP_IS(m, "PUT");
    case 4:
        return (k = SP_IS(m, "POST")) ? k : SP_IS(m, "HEAD");
    case 5:
        return (k = SP_IS(m, "PATCH")) ? k : SP_IS(m, "TRACE");
    case 6:
        return SP_IS(m, "DELETE");
    case 7:
        return (k = SP_IS(m, "OPTIONS")) ? k : SP_IS(m, "CONNECT");
    default:
        return NULL;
    }
}

#undef SP_IS

size_t
sp_http_span_name(char *buf, size_t cap, const char *method, size_t mlen,
    const char *route, size_t rlen)
{
    /* A known method is exactly the method's own mlen bytes. */
    return sp_http_span_name_known(buf, cap,
                                   sp_http_known_method(method, mlen), mlen,
                                   route, rlen);
}

size_t
sp_http_span_name_known(char *buf, size_t cap, const char *known,
    size_t klen, const char *route, size_t rlen)
{
    size_t  n;

    if (known == NULL) {
        known = "HTTP";
        klen = 4;
    }
    n = klen;
    if (n > cap) {
        n = cap;
    }
    /* At most 7 bytes: two moves, not a call to memcpy. */
    sp_wire_copy((uint8_t *) buf, known, n);
    if (route != NULL && rlen > 0 && n + 1 + rlen <= cap) {
        buf[n++] = ' ';
        sp_wire_copy((uint8_t *) buf + n, route, rlen);
        n += rlen;
    }
    return n;
}

void
sp_http_span_method(sp_span_t *s, const char *m, size_t len)
{
    const char  *known = sp_http_known_method(m, len);

    if (known != NULL) {
        sp_span_attr_cstr(s, "http.request.method", known, len);
        return;
    }
    sp_span_attr_cstr(s, "http.request.method", "_OTHER", 6);
    if (m != NULL && len > 0) {
        sp_span_attr_cstr(s, "http.request.method_original", m, len);
    }
}

void
sp_http_span_status(sp_span_t *s, int status)
{
    char  buf[32];      /* 32: no branch of the inlined copy reads past it */
    int   n;

    if (status <= 0) {
        return;
    }
    sp_span_attr_cint(s, "http.response.status_code", status);
    if (status >= (s->kind == SP_SPAN_KIND_CLIENT ? 400 : 500)) {
        n = snprintf(buf, sizeof(buf), "%d", status);
        sp_span_set_status(s, SP_STATUS_ERROR, NULL, 0);
        sp_span_attr_cstr(s, "error.type", buf, (size_t) n);
    }
}

sp_span_attrs_t
sp_http_attrs_error(sp_span_t *s, sp_span_attrs_t a, int status)
{
    char  buf[32];
    int   n;

    sp_span_attrs_close(s, a);
    n = snprintf(buf, sizeof(buf), "%d", status);
    sp_span_set_status(s, SP_STATUS_ERROR, NULL, 0);
    sp_span_attr_cstr(s, "error.type", buf, (size_t) n);
    return sp_span_attrs_open(s);
}

void
sp_http_span_no_answer(sp_span_t *s, unsigned owner, int status)
{
    static const char  timeout[] = "timeout";
    static const char  failed[] = "connection_failed";

    if (owner == SP_OWNER_SPAN) {
        sp_span_set_status(s, SP_STATUS_ERROR, NULL, 0);
    }
    if (status == 504) {
        sp_span_attr_ostr(s, owner, "error.type", timeout,
                         sizeof(timeout) - 1);
    } else {
        sp_span_attr_ostr(s, owner, "error.type", failed,
                         sizeof(failed) - 1);
    }
}
