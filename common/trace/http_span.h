#ifndef SP_HTTP_SPAN_H
#define SP_HTTP_SPAN_H

#include <stddef.h>

#include "common/trace/span.h"

/* The OpenTelemetry HTTP semantic conventions that the nginx and Apache
 * glue share: method normalization, span names, status rules. */

/* The standard method m is ("GET", ...), or NULL for one OTel calls
 * "_OTHER". */
const char *sp_http_known_method(const char *m, size_t len);

/* "{method} {route}", or "{method}" without a route; "HTTP" stands for a
 * method that is not a standard one. Writes at most cap bytes (no NUL) and
 * returns the length. */
size_t sp_http_span_name(char *buf, size_t cap, const char *method,
    size_t mlen, const char *route, size_t rlen);

/* The same for a method looked up already: known is what
 * sp_http_known_method() returned for it (NULL: not a standard one) and
 * klen its length. */
size_t sp_http_span_name_known(char *buf, size_t cap, const char *known,
    size_t klen, const char *route, size_t rlen);

/* A buffer that holds every name sp_http_span_name() writes with a route
 * up to the longest attribute value; a longer route leaves the method
 * alone (both servers name spans alike). */
#define SP_HTTP_SPAN_NAME_LEN  (sizeof("OPTIONS ") + SP_SPAN_MAX_VALUE)

/* http.request.method, and http.request.method_original when the method is
 * not a standard one. */
void sp_http_span_method(sp_span_t *s, const char *m, size_t len);

/* http.response.status_code of the span's own kind: a SERVER span is an
 * error from 500 on, a CLIENT span from 400 on; an error gets status ERROR
 * and error.type = the code. */
void sp_http_span_status(sp_span_t *s, int status);

/* The two above on a row of attributes (span.h), the method looked up
 * already (known: as for sp_http_span_name_known). */
SP_SPAN_INLINE void
sp_http_attrs_method(sp_span_attrs_t *a, sp_span_t *s, const char *known,
    const char *m, size_t len)
{
    if (known != NULL) {
        sp_span_attrs_cstr(a, s, "http.request.method", known, len);
        return;
    }
    sp_span_attrs_cstr(a, s, "http.request.method", "_OTHER", 6);
    if (m != NULL && len > 0) {
        sp_span_attrs_cstr(a, s, "http.request.method_original", m, len);
    }
}

/* The error half of sp_http_span_status(), out of line (rare). */
sp_span_attrs_t sp_http_attrs_error(sp_span_t *s, sp_span_attrs_t a,
    int status);

SP_SPAN_INLINE void
sp_http_attrs_status(sp_span_attrs_t *a, sp_span_t *s, int kind, int status)
{
    if (status <= 0) {
        return;
    }
    sp_span_attrs_cint(a, s, "http.response.status_code", status);
    if (status >= (kind == SP_SPAN_KIND_CLIENT ? 400 : 500)) {
        *a = sp_http_attrs_error(s, *a, status);
    }
}

/* A CLIENT exchange (or one attempt of it, owner SP_OWNER_EVENT(i)) whose
 * peer never answered: error.type "timeout" when the server reported 504,
 * "connection_failed" otherwise; the span's status becomes ERROR. */
void sp_http_span_no_answer(sp_span_t *s, unsigned owner, int status);

#endif
