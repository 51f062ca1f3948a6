/* OTLP/gRPC without a gRPC library: the message framing, status codes
 * (names, the HTTP mapping, the OTLP retryable set), grpc-message's
 * percent-decoding, RetryInfo in grpc-status-details-bin, the answer
 * settled from headers, trailers and body, and the method URLs. */

#define _GNU_SOURCE
#include <string.h>
#include <stdlib.h>

#include "tap.h"
#include "common/base/buf.h"
#include "common/export/grpc_call.h"
#include "common/export/grpc_frame.h"
#include "common/export/grpc_response.h"
#include "common/export/grpc_retry_info.h"
#include "common/export/grpc_status.h"
#include "common/export/gzip.h"

/* Made with protoc from t/proto/google/rpc/ (a real encoder):
 *   code: 14 message: "busy"
 *   details { [type.googleapis.com/google.rpc.DebugInfo] { detail: "x" } }
 *   details { [type.googleapis.com/google.rpc.RetryInfo]
 *             { retry_delay { seconds: 2 nanos: 250000001 } } }  */
#define DETAILS_DEBUG_THEN_RETRY \
    "CA4SBGJ1c3kaLwoodHlwZS5nb29nbGVhcGlzLmNvbS9nb29nbGUucnBjLkRlYnVnSW5m" \
    "bxIDEgF4GjUKKHR5cGUuZ29vZ2xlYXBpcy5jb20vZ29vZ2xlLnJwYy5SZXRyeUluZm8S" \
    "CQoHCAIQgeWadw=="
/* code: 8 message: "quota", no details. */
#define DETAILS_NONE  "CAgSBXF1b3Rh"
/* As python3-grpcio sent it for t/grpc_receiver.py's UNAVAILABLE:retry:1500
 * (padding stripped, as gRPC allows). */
#define DETAILS_GRPCIO \
    "CA4SEHRlc3QgVU5BVkFJTEFCTEUaNgoodHlwZS5nb29nbGVhcGlzLmNvbS9nb29nbGUu" \
    "cnBjLlJldHJ5SW5mbxIKCggIARCAyrXuAQ"

static void
test_frame(void)
{
    sp_buf_t        b, out;
    const uint8_t  *m;
    size_t          n;
    int             z;
    char            err[96];
    uint8_t         big[300];

    sp_buf_init(&b);
    sp_grpc_frame("abc", 3, 0, &b);
    is_int(b.len, 8, "frame: 5-byte prefix + message");
    ok(memcmp(b.data, "\0\0\0\0\3abc", 8) == 0, "frame: flag 0, length BE");
    ok(sp_grpc_unframe(b.data, b.len, &m, &n, &z, err, sizeof(err)) == 0
       && n == 3 && z == 0 && memcmp(m, "abc", 3) == 0, "unframe: round trip");

    sp_buf_reset(&b);
    memset(big, 'q', sizeof(big));
    sp_grpc_frame(big, sizeof(big), 1, &b);
    ok(memcmp(b.data, "\1\0\0\1\x2c", 5) == 0, "frame: flag 1, 300 as 00 00 01 2c");
    ok(sp_grpc_unframe(b.data, b.len, &m, &n, &z, err, sizeof(err)) == 0
       && n == 300 && z == 1, "unframe: compressed flag read");

    ok(sp_grpc_unframe("", 0, &m, &n, &z, err, sizeof(err)) == 0 && n == 0,
       "unframe: empty body is an empty message");
    ok(sp_grpc_unframe("\0\0\0", 3, &m, &n, &z, err, sizeof(err)) == -1
       && strstr(err, "truncated") != NULL, "unframe: short header refused");
    ok(sp_grpc_unframe("\0\0\0\0\5ab", 7, &m, &n, &z, err, sizeof(err)) == -1,
       "unframe: length past the data refused");
    ok(sp_grpc_unframe("\0\0\0\0\1ab", 7, &m, &n, &z, err, sizeof(err)) == -1,
       "unframe: trailing bytes (a second message) refused");
    ok(sp_grpc_unframe("\2\0\0\0\1a", 6, &m, &n, &z, err, sizeof(err)) == -1
       && strstr(err, "flag") != NULL, "unframe: flag 2 refused");
    ok(sp_grpc_unframe("\0\xff\xff\xff\xff", 5, &m, &n, &z, err,
                       sizeof(err)) == -1, "unframe: 4 GiB length refused");

    /* gunzip, bounded */
    sp_buf_init(&out);
    sp_buf_reset(&b);
    sp_gzip_append(big, sizeof(big), &b);
    ok(sp_grpc_gunzip(b.data, b.len, 1000, &out) == 0 && out.len == 300
       && memcmp(out.data, big, 300) == 0, "gunzip: round trip");
    sp_buf_reset(&out);
    ok(sp_grpc_gunzip(b.data, b.len, 299, &out) == -1,
       "gunzip: more than max refused");
    sp_buf_reset(&out);
    ok(sp_grpc_gunzip(b.data, b.len - 4, 1000, &out) == -1,
       "gunzip: truncated refused");
    sp_buf_reset(&out);
    ok(sp_grpc_gunzip("abcdefgh", 8, 1000, &out) == -1, "gunzip: not gzip");
    sp_buf_free(&out);
    sp_buf_free(&b);
}

static void
test_status(void)
{
    int  c, retry[17] = { 0 };

    is_str(sp_grpc_status_name(14), "UNAVAILABLE", "name 14");
    is_str(sp_grpc_status_name(0), "OK", "name 0");
    is_str(sp_grpc_status_name(16), "UNAUTHENTICATED", "name 16");
    is_str(sp_grpc_status_name(17), "UNKNOWN", "name out of range");
    is_str(sp_grpc_status_name(-1), "UNKNOWN", "name negative");

    /* grpc/doc/http-grpc-status-mapping.md */
    is_int(sp_grpc_status_from_http(400), SP_GRPC_INTERNAL, "HTTP 400");
    is_int(sp_grpc_status_from_http(401), SP_GRPC_UNAUTHENTICATED, "HTTP 401");
    is_int(sp_grpc_status_from_http(403), SP_GRPC_PERMISSION_DENIED, "HTTP 403");
    is_int(sp_grpc_status_from_http(404), SP_GRPC_UNIMPLEMENTED, "HTTP 404");
    is_int(sp_grpc_status_from_http(429), SP_GRPC_UNAVAILABLE, "HTTP 429");
    is_int(sp_grpc_status_from_http(502), SP_GRPC_UNAVAILABLE, "HTTP 502");
    is_int(sp_grpc_status_from_http(503), SP_GRPC_UNAVAILABLE, "HTTP 503");
    is_int(sp_grpc_status_from_http(504), SP_GRPC_UNAVAILABLE, "HTTP 504");
    is_int(sp_grpc_status_from_http(500), SP_GRPC_UNKNOWN, "HTTP 500");
    is_int(sp_grpc_status_from_http(301), SP_GRPC_UNKNOWN, "HTTP 301");

    /* The OTLP specification's table, without RetryInfo. */
    retry[1] = retry[4] = retry[10] = retry[11] = retry[14] = retry[15] = 1;
    for (c = 0; c <= 16; c++) {
        is_int(sp_grpc_retryable(c, 0), retry[c], "retryable(%s)",
               sp_grpc_status_name(c));
    }
    is_int(sp_grpc_retryable(SP_GRPC_RESOURCE_EXHAUSTED, 1), 1,
           "RESOURCE_EXHAUSTED with RetryInfo is retried");
    is_int(sp_grpc_retryable(SP_GRPC_INVALID_ARGUMENT, 1), 0,
           "INVALID_ARGUMENT with RetryInfo is not");

    is_int(sp_grpc_status_parse("14", 2), 14, "parse 14");
    is_int(sp_grpc_status_parse("0", 1), 0, "parse 0");
    is_int(sp_grpc_status_parse("", 0), -1, "parse empty");
    is_int(sp_grpc_status_parse("-1", 2), -1, "parse sign");
    is_int(sp_grpc_status_parse("1x", 2), -1, "parse junk");
    is_int(sp_grpc_status_parse("99999999999", 11), -1, "parse overlong");
}

static void
test_percent(void)
{
    char  out[64];
    const char *v;

    v = "bad %E2%9C%93 value 100%25";
    sp_grpc_percent_decode(v, strlen(v), out, sizeof(out));
    is_str(out, "bad \xe2\x9c\x93 value 100%", "percent: UTF-8 and %%25");
    v = "50% off %zz %4";
    sp_grpc_percent_decode(v, strlen(v), out, sizeof(out));
    is_str(out, "50% off %zz %4", "percent: invalid escapes kept");
    v = "line%0Anext%00x";
    sp_grpc_percent_decode(v, strlen(v), out, sizeof(out));
    is_str(out, "line?next?x", "percent: control characters neutralised");
    v = "abcdefghij";
    is_int(sp_grpc_percent_decode(v, strlen(v), out, 5), 4, "percent: cut");
    is_str(out, "abcd", "percent: NUL-terminated when cut");
}

static void
test_retry_info(void)
{
    uint64_t  ms = 77;
    uint8_t   out[16];

    is_int(sp_grpc_retry_info(DETAILS_DEBUG_THEN_RETRY,
                              strlen(DETAILS_DEBUG_THEN_RETRY), &ms), 1,
           "RetryInfo found after another detail");
    is_int(ms, 2251, "2 s 250000001 ns rounds up to 2251 ms");
    is_int(sp_grpc_retry_info(DETAILS_GRPCIO, strlen(DETAILS_GRPCIO), &ms), 1,
           "grpcio's Status, unpadded base64");
    is_int(ms, 1500, "1.5 s");
    ms = 77;
    is_int(sp_grpc_retry_info(DETAILS_NONE, strlen(DETAILS_NONE), &ms), 0,
           "a Status without details: no RetryInfo");
    is_int(ms, 0, "no delay");
    is_int(sp_grpc_retry_info("!!!!", 4, &ms), -1, "not base64");
    is_int(sp_grpc_retry_info("CA", 2, &ms), -1, "truncated varint");
    /* details (3) of length 5 with 1 byte: */
    is_int(sp_grpc_retry_info("GgVh", 4, &ms), -1, "length past the end");
    is_int(sp_grpc_retry_info("", 0, &ms), 0, "empty: an empty Status");

    is_int(sp_grpc_base64_decode("aGk=", 4, out), 2, "base64 padded");
    is_int(sp_grpc_base64_decode("aGk", 3, out), 2, "base64 unpadded");
    ok(memcmp(out, "hi", 2) == 0, "base64 bytes");
    is_int(sp_grpc_base64_decode("a", 1, out), -1, "base64 one char");
}

/* Feeds header lines as libcurl hands them over. */
static int
answer(sp_grpc_response_t *r, const char *const *lines, long http,
    const void *body, size_t len, sp_buf_t *msg)
{
    sp_grpc_response_reset(r);
    for (; *lines != NULL; lines++) {
        sp_grpc_response_header(r, *lines, strlen(*lines));
    }
    sp_buf_reset(msg);
    return sp_grpc_response_finish(r, http, body, len, 1000, msg);
}

static void
test_response(void)
{
    sp_grpc_response_t  r;
    sp_buf_t            msg, gz, framed;
    const char *const   ok_lines[] = {
        "HTTP/2 200\r\n", "content-type: application/grpc\r\n", "\r\n",
        "grpc-status: 0\r\n", NULL };
    const char *const   trailers_only[] = {
        "HTTP/2 200\r\n", "content-type: application/grpc+proto\r\n",
        "grpc-status: 14\r\n", "grpc-message: down%20for%20a%20bit\r\n",
        "grpc-status-details-bin: " DETAILS_GRPCIO "\r\n", "\r\n", NULL };
    const char *const   no_status[] = {
        "HTTP/2 200\r\n", "content-type: application/grpc\r\n", NULL };
    const char *const   html[] = {
        "HTTP/2 200\r\n", "content-type: text/html\r\n",
        "grpc-status: 0\r\n", NULL };
    const char *const   gzip_lines[] = {
        "HTTP/2 200\r\n", "content-type: application/grpc\r\n",
        "grpc-encoding: gzip\r\n", "grpc-status: 0\r\n", NULL };
    const char *const   bad_status[] = {
        "HTTP/2 200\r\n", "content-type: application/grpc\r\n",
        "grpc-status: abc\r\n", NULL };

    sp_buf_init(&msg);
    sp_buf_init(&gz);
    sp_buf_init(&framed);

    sp_grpc_frame("\x0a\x02\x08\x03", 4, 0, &framed);
    is_int(answer(&r, ok_lines, 200, framed.data, framed.len, &msg), 0,
           "OK from the trailers");
    ok(msg.len == 4 && memcmp(msg.data, "\x0a\x02\x08\x03", 4) == 0,
       "the response message, unframed");

    is_int(answer(&r, trailers_only, 200, "", 0, &msg), 14,
           "Trailers-Only UNAVAILABLE");
    is_str(r.message, "down for a bit", "grpc-message percent-decoded");
    ok(r.retry_info && r.retry_delay_ms == 1500, "RetryInfo from details-bin");

    is_int(answer(&r, no_status, 200, framed.data, framed.len, &msg),
           SP_GRPC_INTERNAL, "no grpc-status: INTERNAL");
    ok(strstr(r.message, "no grpc-status") != NULL, "... saying so");

    is_int(answer(&r, html, 200, "<html>", 6, &msg), SP_GRPC_INTERNAL,
           "text/html 200: INTERNAL");
    ok(strstr(r.message, "not a gRPC answer") != NULL
       && strstr(r.message, "text/html") != NULL, "... naming the type");

    is_int(answer(&r, html, 503, "", 0, &msg), SP_GRPC_UNAVAILABLE,
           "HTTP 503: UNAVAILABLE");
    is_str(r.message, "HTTP status 503", "... saying the HTTP status");

    is_int(answer(&r, ok_lines, 200, "\0\0\0\0\x09xx", 7, &msg),
           SP_GRPC_INTERNAL, "OK but a broken frame: INTERNAL");
    ok(strstr(r.message, "malformed answer") != NULL, "... saying so");

    is_int(answer(&r, bad_status, 200, "", 0, &msg), SP_GRPC_UNKNOWN,
           "grpc-status abc: UNKNOWN");
    ok(strstr(r.message, "invalid grpc-status") != NULL, "... saying so");

    {
        const char *const  big_code[] = {
            "content-type: application/grpc", "grpc-status: 28", NULL };

        is_int(answer(&r, big_code, 200, "", 0, &msg), SP_GRPC_UNKNOWN,
               "grpc-status 28 (no such code): UNKNOWN");
    }

    /* A compressed answer. */
    sp_gzip_append("\x0a\x02\x08\x03", 4, &gz);
    sp_buf_reset(&framed);
    sp_grpc_frame(gz.data, gz.len, 1, &framed);
    is_int(answer(&r, gzip_lines, 200, framed.data, framed.len, &msg), 0,
           "gzip'd answer: OK");
    ok(msg.len == 4 && memcmp(msg.data, "\x0a\x02\x08\x03", 4) == 0,
       "gzip'd answer gunzipped");
    is_int(answer(&r, ok_lines, 200, framed.data, framed.len, &msg),
           SP_GRPC_INTERNAL, "compressed flag without grpc-encoding: INTERNAL");

    sp_buf_free(&msg);
    sp_buf_free(&gz);
    sp_buf_free(&framed);
}

static void
test_url(void)
{
    char  *u;

    u = sp_grpc_method_url("http://h:4317", SP_GRPC_TRACES_METHOD);
    is_str(u, "http://h:4317/opentelemetry.proto.collector.trace.v1."
              "TraceService/Export", "traces URL");
    free(u);
    u = sp_grpc_method_url("https://h:4317/base/x", SP_GRPC_PROFILES_METHOD);
    is_str(u, "https://h:4317/opentelemetry.proto.collector.profiles."
              "v1development.ProfilesService/Export",
           "profiles URL, the base path dropped");
    free(u);
    u = sp_grpc_method_url("http://h:4317/", SP_GRPC_TRACES_METHOD);
    ok(strstr(u, "4317/opentelemetry") != NULL, "a trailing slash dropped");
    free(u);
}

int
main(void)
{
    test_frame();
    test_status();
    test_percent();
    test_retry_info();
    test_response();
    test_url();
    return done_testing();
}
