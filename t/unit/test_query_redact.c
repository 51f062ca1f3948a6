/* url.query redaction: the semantic conventions' default names, the
 * configured ones, and the edge cases query_redact.h decides. */

#define _GNU_SOURCE
#include <string.h>

#include "tap.h"
#include "common/trace/query_redact.h"


/* The query as recorded, NUL-terminated (from a copy that is not). */
static const char *
redact(const sp_query_redact_t *r, const char *q, int *copied)
{
    static char   out[1024];
    char          in[1024], buf[1024];
    size_t        len = strlen(q);
    const char   *p;

    memcpy(in, q, len);
    memset(in + len, 'Z', sizeof(in) - len);    /* no NUL after it */
    p = sp_query_redact(r, in, &len, buf, sizeof(buf));
    *copied = p != in;
    memcpy(out, p, len);
    out[len] = '\0';
    return out;
}


static void
check(const sp_query_redact_t *r, const char *q, const char *want)
{
    int          copied;
    const char  *got = redact(r, q, &copied);

    is_str(got, want, "\"%s\" -> \"%s\"", q, want);
    if (strcmp(q, want) == 0) {
        ok(!copied, "  nothing redacted: the query itself, no copy");
    }
}


static void
test_defaults(void)
{
    check(NULL, "q=OpenTelemetry&sig=abc", "q=OpenTelemetry&sig=REDACTED");
    check(NULL, "AWSAccessKeyId=AKIA&Signature=xyz%2B&Expires=1",
          "AWSAccessKeyId=REDACTED&Signature=REDACTED&Expires=1");
    check(NULL, "X-Goog-Signature=0123&X-Goog-Date=20240101",
          "X-Goog-Signature=REDACTED&X-Goog-Date=20240101");
    check(NULL, "color=blue", "color=blue");
    check(NULL, "", "");
    /* Exact names only, case-sensitive as the convention lists them. */
    check(NULL, "signature=x&SIG=y&sigx=z&xsig=w&X-Amz-Signature=v",
          "signature=x&SIG=y&sigx=z&xsig=w&X-Amz-Signature=v");
}


static void
test_edges(void)
{
    check(NULL, "sig=", "sig=REDACTED");
    check(NULL, "sig", "sig");
    check(NULL, "sig&a=1", "sig&a=1");
    check(NULL, "a=1&&sig=2&&", "a=1&&sig=REDACTED&&");
    check(NULL, "&sig=1", "&sig=REDACTED");
    check(NULL, "sig=1&sig=2&a=3&sig=4", "sig=REDACTED&sig=REDACTED&a=3&"
          "sig=REDACTED");
    check(NULL, "sig=a=b=c&d=e", "sig=REDACTED&d=e");
    check(NULL, "=x&sig==", "=x&sig=REDACTED");
    /* Percent-encoded keys are compared decoded; a bad escape is bytes. */
    check(NULL, "%73ig=1&%73%69%67=2", "%73ig=REDACTED&%73%69%67=REDACTED");
    check(NULL, "X-Goog%2DSignature=1", "X-Goog%2DSignature=REDACTED");
    check(NULL, "%7sig=1&si%g=2&sig%=3&sig%2=4", "%7sig=1&si%g=2&sig%=3&"
          "sig%2=4");
    check(NULL, "s%69g", "s%69g");
    /* A value with '=' or '%' is all redacted; '#' is no separator. */
    check(NULL, "sig=%26&b=1", "sig=REDACTED&b=1");
}


static void
test_configured(void)
{
    static const sp_query_name_t  names[] = {
        { "token", 5 }, { "api.key", 7 },
    };
    sp_query_redact_t             r = { names, 2 };

    check(&r, "token=s3cr3t&user=bob&sig=1",
          "token=REDACTED&user=bob&sig=REDACTED");
    check(&r, "api.key=k&api%2ekey=k2&apikey=k3&api+key=k4",
          "api.key=REDACTED&api%2ekey=REDACTED&apikey=k3&api+key=k4");
    check(&r, "tokens=1&Token=2", "tokens=1&Token=2");
}


static void
test_cut(void)
{
    char         buf[16], q[64];
    size_t       len;
    const char  *p;

    /* Cut at the buffer: never a byte of a redacted value. */
    strcpy(q, "abcdefgh=1&sig=SECRETSECRET&z=2");
    len = strlen(q);
    p = sp_query_redact(NULL, q, &len, buf, sizeof(buf));
    ok(p == buf && len == sizeof(buf), "cut to the buffer (%zu)", len);
    ok(memcmp(buf, "abcdefgh=1&sig=R", 16) == 0, "the cut keeps the order");
    ok(p == buf && memmem(buf, len, "SEC", 3) == NULL, "no byte of the value");

    strcpy(q, "sig=SECRET");
    len = strlen(q);
    p = sp_query_redact(NULL, q, &len, buf, 2);
    ok(p == buf && len == 2 && memcmp(buf, "si", 2) == 0,
       "a buffer shorter than the key");

    len = 0;
    p = sp_query_redact(NULL, q, &len, buf, sizeof(buf));
    ok(p == q && len == 0, "an empty query");
}


static void
test_name_error(void)
{
    ok(sp_query_redact_name_error("token", 5) == NULL, "token is a name");
    ok(sp_query_redact_name_error("", 0) != NULL, "empty: refused");
    ok(sp_query_redact_name_error("a=b", 3) != NULL, "'=': refused");
    ok(sp_query_redact_name_error("a&b", 3) != NULL, "'&': refused");
    ok(sp_query_redact_name_error("a b", 3) != NULL, "space: refused");
}


int
main(void)
{
    test_defaults();
    test_edges();
    test_configured();
    test_cut();
    test_name_error();

    return done_testing();
}
