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

/* A CLIENT exchange (or one attempt of it, owner SP_OWNER_EVENT(i)) whose
 * peer never answered: error.type "timeout" when the server reported 504,
 * "connection_failed" otherwise; the span's status becomes ERROR. */
void sp_http_span_no_answer(sp_span_t *s, unsigned owner, int status);

#endif
