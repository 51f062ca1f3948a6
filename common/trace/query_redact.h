#ifndef SP_QUERY_REDACT_H
#define SP_QUERY_REDACT_H

#include <stddef.h>

/* url.query as the OpenTelemetry HTTP semantic conventions want it: the
 * values of the query parameters AWSAccessKeyId, Signature, sig and
 * X-Goog-Signature (always), and of the names the configuration adds
 * (otel_span_redact_query / OtelSpanRedactQuery), are replaced by
 * "REDACTED"; keys, order and every other parameter are kept as sent.
 * Request path: no allocation, one pass over the query, no copy at all when
 * nothing is redacted.
 *
 * Rules (decided here, pinned by t/unit/test_query_redact.c):
 * - parameters are separated by '&' only; empty ones ("a=1&&b=2") are kept;
 * - the key is what comes before the first '='; it matches a name exactly
 *   and case-sensitively (as the convention lists them), after
 *   percent-decoding ("%73ig" is "sig", as the application reads it) and
 *   '+' as a space; an invalid escape is compared as the bytes it is;
 * - the value of a matching key is everything after that '=' up to the
 *   next '&' ("sig=a=b" -> "sig=REDACTED"); an empty value becomes
 *   REDACTED too; a key without '=' has no value and is kept;
 * - every occurrence of a repeated key is redacted. */

#define SP_QUERY_REDACTED  "REDACTED"

typedef struct {
    const char  *name;
    size_t       len;
} sp_query_name_t;

/* The configured names on top of the defaults: an array the caller owns
 * (configuration memory), or NULL/0 for the defaults alone. */
typedef struct {
    const sp_query_name_t  *names;
    size_t                  n;
} sp_query_redact_t;

/* The query q[0..*len) to record: q itself (and *len unchanged) when no
 * value is redacted, else buf holding the redacted query, *len its length.
 * What does not fit cap bytes is cut (as a long attribute value is):
 * the cut never lets a redacted value through. r may be NULL (defaults). */
const char *sp_query_redact(const sp_query_redact_t *r, const char *q,
    size_t *len, char *buf, size_t cap);

/* A name a configuration may add: 1..255 bytes, none of '&', '=', '#',
 * controls or spaces. NULL when fine, else a static reason. */
const char *sp_query_redact_name_error(const char *name, size_t len);

#endif
