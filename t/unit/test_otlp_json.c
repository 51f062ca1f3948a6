/* sp_otlp_json_encode: exact OTLP/JSON fragments for real protobuf-c
 * messages, string escaping, and a cross-check with a real JSON parser
 * (perl's JSON::PP) so the test does not only trust our own encoder. */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#include "common/export/otlp_json.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue    any_t;
typedef Opentelemetry__Proto__Common__V1__KeyValue    kv_t;
typedef Opentelemetry__Proto__Common__V1__ArrayValue  arr_t;
typedef Opentelemetry__Proto__Trace__V1__Span         span_t;

#define CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

static sp_buf_t buf;
static char     json[16384];

/* Encodes into a fresh buffer and keeps a NUL-terminated copy in json. */
static const char *
enc(const void *msg)
{
    int rc;

    sp_buf_reset(&buf);
    rc = sp_otlp_json_encode(msg, &buf);
    if (rc != 0 || buf.len >= sizeof(json))
        return "(encode failed)";
    memcpy(json, buf.data, buf.len);
    json[buf.len] = '\0';
    return json;
}

static int
starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int
has(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

#define contains(needle, name) do {                                         \
    ok(has(json, needle), "%s: contains %s", name, needle);                \
    if (!has(json, needle)) printf("#   in: %s\n", json);                  \
} while (0)

#define lacks(needle, name) do {                                            \
    ok(!has(json, needle), "%s: no %s", name, needle);                     \
    if (has(json, needle)) printf("#   in: %s\n", json);                   \
} while (0)

/* A KeyValue whose key is s; its JSON is {"key":...}. */
static const char *
enc_key(const char *s)
{
    kv_t kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;

    kv.key = (char *) s;
    return enc(&kv);
}

static const char *
enc_any(any_t *v)
{
    return enc(v);
}

static void
test_strings(void)
{
    is_str(enc_key("plain"), "{\"key\":\"plain\"}", "plain string");
    is_str(enc_key("a\"b"), "{\"key\":\"a\\\"b\"}", "quote escaped");
    is_str(enc_key("a\\b"), "{\"key\":\"a\\\\b\"}", "backslash escaped");
    is_str(enc_key("a\nb\rc\td"), "{\"key\":\"a\\nb\\rc\\td\"}",
           "newline, CR, tab escaped");
    is_str(enc_key("\b\f"), "{\"key\":\"\\b\\f\"}", "backspace, formfeed");
    is_str(enc_key("x\001y"), "{\"key\":\"x\\u0001y\"}",
           "control 0x01 as \\u0001");
    is_str(enc_key("\037\177"), "{\"key\":\"\\u001f\177\"}",
           "0x1f escaped, DEL passed through");
    is_str(enc_key("/<>"), "{\"key\":\"/<>\"}", "slash not escaped");
    is_str(enc_key("caf\xc3\xa9"), "{\"key\":\"caf\xc3\xa9\"}",
           "valid 2-byte UTF-8 kept");
    is_str(enc_key("\xe2\x82\xac \xf0\x9f\x98\x80"),
           "{\"key\":\"\xe2\x82\xac \xf0\x9f\x98\x80\"}",
           "valid 3- and 4-byte UTF-8 kept");
    is_str(enc_key("\xef\xbf\xbf\xf4\x8f\xbf\xbf"),
           "{\"key\":\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}",
           "U+FFFF and U+10FFFF kept");
    is_str(enc_key("a\xff" "b"), "{\"key\":\"a\\ufffdb\"}",
           "invalid byte 0xff replaced");
    is_str(enc_key("a\x80" "b"), "{\"key\":\"a\\ufffdb\"}",
           "lone continuation byte replaced");
    is_str(enc_key("a\xe2\x82"), "{\"key\":\"a\\ufffd\"}",
           "truncated 3-byte sequence at end: one U+FFFD");
    is_str(enc_key("\xe2\x82" "b"), "{\"key\":\"\\ufffdb\"}",
           "truncated sequence before ASCII: one U+FFFD, ASCII kept");
    is_str(enc_key("\xc3"), "{\"key\":\"\\ufffd\"}",
           "lone lead byte at end");
    is_str(enc_key("\xc0\xaf"), "{\"key\":\"\\ufffd\\ufffd\"}",
           "overlong 2-byte '/' rejected");
    is_str(enc_key("\xe0\x80\xaf"), "{\"key\":\"\\ufffd\\ufffd\\ufffd\"}",
           "overlong 3-byte rejected");
    is_str(enc_key("\xf0\x80\x80\xaf"),
           "{\"key\":\"\\ufffd\\ufffd\\ufffd\\ufffd\"}",
           "overlong 4-byte rejected");
    is_str(enc_key("\xed\xa0\x80"), "{\"key\":\"\\ufffd\\ufffd\\ufffd\"}",
           "surrogate U+D800 rejected");
    is_str(enc_key("\xf4\x90\x80\x80"),
           "{\"key\":\"\\ufffd\\ufffd\\ufffd\\ufffd\"}",
           "above U+10FFFF rejected");
    is_str(enc_key("\xf5\x80"), "{\"key\":\"\\ufffd\\ufffd\"}",
           "lead byte 0xf5 rejected");
    is_str(enc_key("\"\xff\n"), "{\"key\":\"\\\"\\ufffd\\n\"}",
           "escapes and replacement mixed");
}

static void
test_values(void)
{
    any_t    v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    any_t    e0 = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    any_t    e1 = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    any_t   *elems[2] = { &e0, &e1 };
    arr_t    arr = OPENTELEMETRY__PROTO__COMMON__V1__ARRAY_VALUE__INIT;
    uint8_t  raw[] = { 'a', 'b', 'c', 0xfb, 0xff };

    is_str(enc_any(&v), "{}", "AnyValue with no case set is {}");

    v.value_case = CASE(INT_VALUE);
    v.int_value = 0;
    is_str(enc_any(&v), "{\"intValue\":\"0\"}", "oneof int 0 written");
    v.int_value = -5;
    is_str(enc_any(&v), "{\"intValue\":\"-5\"}", "negative int64");
    v.int_value = INT64_MIN;
    is_str(enc_any(&v), "{\"intValue\":\"-9223372036854775808\"}",
           "INT64_MIN");

    v.value_case = CASE(BOOL_VALUE);
    v.int_value = 0;
    v.bool_value = 0;
    is_str(enc_any(&v), "{\"boolValue\":false}", "oneof bool false written");

    v.value_case = CASE(STRING_VALUE);
    v.string_value = "";
    is_str(enc_any(&v), "{\"stringValue\":\"\"}", "oneof empty string");

    v.value_case = CASE(DOUBLE_VALUE);
    v.double_value = 0;
    is_str(enc_any(&v), "{\"doubleValue\":0}", "oneof double 0 written");
    v.double_value = 0.1;
    is_str(enc_any(&v), "{\"doubleValue\":0.1}", "0.1 shortest form");
    v.double_value = 1.0 / 3;
    is_str(enc_any(&v), "{\"doubleValue\":0.3333333333333333}",
           "1/3 with 16 digits");
    v.double_value = 0.1;
    v.double_value += 0.2;
    is_str(enc_any(&v), "{\"doubleValue\":0.30000000000000004}",
           "0.1+0.2 needs 17 digits");
    v.double_value = 100;
    is_str(enc_any(&v), "{\"doubleValue\":100}", "integral double");
    v.double_value = -2.5e-300;
    is_str(enc_any(&v), "{\"doubleValue\":-2.5e-300}", "tiny double");
    v.double_value = 1e21;
    is_str(enc_any(&v), "{\"doubleValue\":1e+21}", "large double");
    v.double_value = NAN;
    is_str(enc_any(&v), "{\"doubleValue\":\"NaN\"}", "NaN as string");
    v.double_value = INFINITY;
    is_str(enc_any(&v), "{\"doubleValue\":\"Infinity\"}", "Infinity");
    v.double_value = -INFINITY;
    is_str(enc_any(&v), "{\"doubleValue\":\"-Infinity\"}", "-Infinity");

    v.value_case = CASE(BYTES_VALUE);
    v.bytes_value.data = raw;
    v.bytes_value.len = 0;
    is_str(enc_any(&v), "{\"bytesValue\":\"\"}", "empty bytes in oneof");
    v.bytes_value.len = 1;
    is_str(enc_any(&v), "{\"bytesValue\":\"YQ==\"}", "base64 1 byte");
    v.bytes_value.len = 2;
    is_str(enc_any(&v), "{\"bytesValue\":\"YWI=\"}", "base64 2 bytes");
    v.bytes_value.len = 3;
    is_str(enc_any(&v), "{\"bytesValue\":\"YWJj\"}", "base64 3 bytes");
    v.bytes_value.len = 5;
    is_str(enc_any(&v), "{\"bytesValue\":\"YWJj+/8=\"}",
           "base64 uses + and /");

    v.value_case = CASE(ARRAY_VALUE);
    v.array_value = NULL;
    is_str(enc_any(&v), "{}", "oneof set to a NULL message is skipped");
    v.array_value = &arr;
    is_str(enc_any(&v), "{\"arrayValue\":{}}", "empty array message");
    e0.value_case = CASE(STRING_VALUE);
    e0.string_value = "x";
    e1.value_case = CASE(INT_VALUE);
    e1.int_value = 7;
    arr.n_values = 2;
    arr.values = elems;
    is_str(enc_any(&v),
           "{\"arrayValue\":{\"values\":[{\"stringValue\":\"x\"},"
           "{\"intValue\":\"7\"}]}}", "repeated messages as array");
}

static void
test_misc(void)
{
    Opentelemetry__Proto__Trace__V1__Status st =
        OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
    span_t sp = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    Opentelemetry__Proto__Common__V1__EntityRef er =
        OPENTELEMETRY__PROTO__COMMON__V1__ENTITY_REF__INIT;
    char    *keys[2] = { "a", "b\"" };
    sp_buf_t fb;

    is_str(enc(&st), "{}", "default Status is {}");
    st.code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_OK;
    is_str(enc(&st), "{\"code\":1}", "enum as integer");
    st.message = NULL;
    is_str(enc(&st), "{\"code\":1}", "NULL string treated as empty");

    sp.end_time_unix_nano = UINT64_MAX;
    sp.flags = 0x301;
    sp.dropped_links_count = 4000000000u;
    is_str(enc(&sp),
           "{\"endTimeUnixNano\":\"18446744073709551615\","
           "\"droppedLinksCount\":4000000000,\"flags\":769}",
           "uint64 max as string, uint32 as numbers, defaults skipped");

    er.n_id_keys = 2;
    er.id_keys = keys;
    is_str(enc(&er), "{\"idKeys\":[\"a\",\"b\\\"\"]}",
           "repeated strings, key camelCased");

    /* The buffer's failure must be reported, whenever it happened. */
    sp_buf_init(&fb);
    fb.failed = 1;
    is_int(sp_otlp_json_encode(&st.base, &fb), -1,
           "failed buffer gives -1");
    sp_buf_free(&fb);
}

/* The request: one resource, one scope, a SERVER root span and a child. */

static uint8_t trace_id[16] = {
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10 };
static uint8_t span_id1[8] = { 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18 };
static uint8_t span_id2[8] = { 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x00 };

#define CHILD_NAME "child \"q\" \\ \n caf\xc3\xa9 \x01 bad\xff"

static const char perl_check[] =
    "use strict; use warnings; use JSON::PP;\n"
    "open my $fh, '<:raw', $ARGV[0] or die $!; local $/; my $t = <$fh>;\n"
    "die \"newline in output\\n\" if $t =~ /\\n/;\n"
    "my $j = decode_json($t);\n"
    "my $rs = $j->{resourceSpans}[0];\n"
    "my $ss = $rs->{scopeSpans}[0];\n"
    "my ($a, $b) = @{$ss->{spans}};\n"
    "my %at = map { $_->{key} => $_->{value} } @{$a->{attributes}};\n"
    "my @c = (\n"
    " [$rs->{resource}{attributes}[0]{key}, 'service.name'],\n"
    " [$rs->{resource}{attributes}[0]{value}{stringValue}, 'svc'],\n"
    " [$ss->{scope}{name}, 'spanprof'],\n"
    " [$ss->{scope}{version}, '0.1.0'],\n"
    " [scalar @{$ss->{spans}}, 2],\n"
    " [$a->{traceId}, '0102030405060708090a0b0c0d0e0f10'],\n"
    " [$a->{spanId}, 'a1b2c3d4e5f60718'],\n"
    " [exists $a->{parentSpanId} ? 1 : 0, 0],\n"
    " [$a->{name}, 'GET /items'],\n"
    " [$a->{kind}, 2],\n"
    " [$a->{startTimeUnixNano}, '1700000000000000000'],\n"
    " [$a->{endTimeUnixNano}, '1700000000123456789'],\n"
    " [$at{'http.request.method'}{stringValue}, 'GET'],\n"
    " [$at{'http.response.status_code'}{intValue}, '500'],\n"
    " [$at{'zero'}{intValue}, '0'],\n"
    " [JSON::PP::is_bool($at{'sampled'}{boolValue})\n"
    "    && $at{'sampled'}{boolValue} ? 1 : 0, 1],\n"
    " [$at{'ratio'}{doubleValue}, 0.25],\n"
    " [$a->{events}[0]{name}, 'exception'],\n"
    " [$a->{events}[0]{timeUnixNano}, '1700000000100000000'],\n"
    " [$a->{events}[0]{attributes}[0]{value}{stringValue}, 'oops'],\n"
    " [$a->{status}{code}, 2],\n"
    " [$a->{status}{message}, 'boom'],\n"
    " [exists $a->{droppedAttributesCount} ? 1 : 0, 0],\n"
    " [$b->{parentSpanId}, 'a1b2c3d4e5f60718'],\n"
    " [$b->{spanId}, 'ffeeddccbbaa9900'],\n"
    " [$b->{name}, \"child \\\"q\\\" \\\\ \\n caf\\x{e9} \\x{1} bad\\x{fffd}\"],\n"
    " [$b->{kind}, 1],\n"
    " [$b->{droppedAttributesCount}, 3],\n"
    ");\n"
    "my $bad = 0;\n"
    "for my $i (0 .. $#c) {\n"
    "  my ($g, $w) = @{$c[$i]};\n"
    "  next if defined $g && $g eq $w;\n"
    "  my $q = JSON::PP->new->ascii->allow_nonref;\n"
    "  print '# perl check ', $i, ': got ', $q->encode($g),\n"
    "    ', want ', $q->encode($w), \"\\n\"; $bad++;\n"
    "}\n"
    "exit($bad ? 1 : 0);\n";

static int
write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int   rc;

    if (f == NULL)
        return -1;
    rc = fwrite(p, 1, n, f) == n ? 0 : -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

static void
test_request(void)
{
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans *rsp[1] = { &rs };
    Opentelemetry__Proto__Resource__V1__Resource res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    Opentelemetry__Proto__Trace__V1__ScopeSpans *ssp[1] = { &ss };
    Opentelemetry__Proto__Common__V1__InstrumentationScope scope =
        OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    span_t  s1 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    span_t  s2 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    span_t *spans[2] = { &s1, &s2 };
    Opentelemetry__Proto__Trace__V1__Span__Event ev =
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT;
    Opentelemetry__Proto__Trace__V1__Span__Event *evp[1] = { &ev };
    Opentelemetry__Proto__Trace__V1__Status st =
        OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
    kv_t    kv[7] = {
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT };
    any_t   av[7] = {
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT };
    kv_t   *res_attrs[1] = { &kv[0] };
    kv_t   *span_attrs[5] = { &kv[1], &kv[2], &kv[3], &kv[4], &kv[5] };
    kv_t   *ev_attrs[1] = { &kv[6] };
    char    dir[] = "/tmp/test_otlp_json.XXXXXX";
    char    jpath[64], ppath[64], cmd[256];
    int     rc, i;

    for (i = 0; i < 7; i++)
        kv[i].value = &av[i];
    kv[0].key = "service.name";
    av[0].value_case = CASE(STRING_VALUE);
    av[0].string_value = "svc";
    kv[1].key = "http.request.method";
    av[1].value_case = CASE(STRING_VALUE);
    av[1].string_value = "GET";
    kv[2].key = "http.response.status_code";
    av[2].value_case = CASE(INT_VALUE);
    av[2].int_value = 500;
    kv[3].key = "zero";
    av[3].value_case = CASE(INT_VALUE);
    av[3].int_value = 0;
    kv[4].key = "sampled";
    av[4].value_case = CASE(BOOL_VALUE);
    av[4].bool_value = 1;
    kv[5].key = "ratio";
    av[5].value_case = CASE(DOUBLE_VALUE);
    av[5].double_value = 0.25;
    kv[6].key = "exception.message";
    av[6].value_case = CASE(STRING_VALUE);
    av[6].string_value = "oops";

    res.n_attributes = 1;
    res.attributes = res_attrs;
    scope.name = "spanprof";
    scope.version = "0.1.0";

    s1.trace_id.data = trace_id;
    s1.trace_id.len = sizeof(trace_id);
    s1.span_id.data = span_id1;
    s1.span_id.len = sizeof(span_id1);
    s1.name = "GET /items";
    s1.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    s1.start_time_unix_nano = 1700000000000000000ull;
    s1.end_time_unix_nano = 1700000000123456789ull;
    s1.n_attributes = 5;
    s1.attributes = span_attrs;
    ev.time_unix_nano = 1700000000100000000ull;
    ev.name = "exception";
    ev.n_attributes = 1;
    ev.attributes = ev_attrs;
    s1.n_events = 1;
    s1.events = evp;
    st.code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    st.message = "boom";
    s1.status = &st;

    s2.trace_id = s1.trace_id;
    s2.span_id.data = span_id2;
    s2.span_id.len = sizeof(span_id2);
    s2.parent_span_id = s1.span_id;
    s2.name = CHILD_NAME;
    s2.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
    s2.start_time_unix_nano = 1700000000010000000ull;
    s2.end_time_unix_nano = 1700000000020000000ull;
    s2.dropped_attributes_count = 3;

    ss.scope = &scope;
    ss.n_spans = 2;
    ss.spans = spans;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = ssp;
    req.n_resource_spans = 1;
    req.resource_spans = rsp;

    /* The root span alone first: no parentSpanId, no zero counters. */
    enc(&s1);
    ok(starts_with(json, "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
                     "\"spanId\":\"a1b2c3d4e5f60718\",\"name\":\"GET /items\","
                     "\"kind\":2,"), "root span starts as expected");
    lacks("parentSpanId", "root span");
    lacks("traceState", "root span");
    lacks("flags", "root span");
    lacks("dropped", "root span");
    lacks("links", "root span");

    enc(&req);
    ok(json[0] == '{' && json[strlen(json) - 1] == '}',
       "request is one object, no trailing newline");
    lacks("\n", "request");
    lacks(" :", "request");
    lacks(": ", "request");
    lacks(", ", "request");
    ok(starts_with(json, "{\"resourceSpans\":[{\"resource\":{\"attributes\":"
                     "[{\"key\":\"service.name\",\"value\":{\"stringValue\":"
                     "\"svc\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":"
                     "\"spanprof\",\"version\":\"0.1.0\"},\"spans\":[{"),
       "request prefix");
    contains("\"traceId\":\"0102030405060708090a0b0c0d0e0f10\"", "request");
    contains("\"spanId\":\"a1b2c3d4e5f60718\"", "request");
    contains("\"parentSpanId\":\"a1b2c3d4e5f60718\"", "request");
    contains("\"spanId\":\"ffeeddccbbaa9900\"", "request");
    contains("\"kind\":2", "request");
    contains("\"kind\":1", "request");
    contains("\"startTimeUnixNano\":\"1700000000000000000\"", "request");
    contains("\"endTimeUnixNano\":\"1700000000123456789\"", "request");
    contains("{\"key\":\"http.request.method\",\"value\":"
             "{\"stringValue\":\"GET\"}}", "request");
    contains("{\"key\":\"http.response.status_code\",\"value\":"
             "{\"intValue\":\"500\"}}", "request");
    contains("{\"key\":\"zero\",\"value\":{\"intValue\":\"0\"}}", "request");
    contains("{\"key\":\"sampled\",\"value\":{\"boolValue\":true}}",
             "request");
    contains("{\"key\":\"ratio\",\"value\":{\"doubleValue\":0.25}}",
             "request");
    contains("\"events\":[{\"timeUnixNano\":\"1700000000100000000\","
             "\"name\":\"exception\",\"attributes\":[{\"key\":"
             "\"exception.message\",\"value\":{\"stringValue\":\"oops\"}}]}]",
             "request");
    contains("\"status\":{\"message\":\"boom\",\"code\":2}", "request");
    contains("\"name\":\"child \\\"q\\\" \\\\ \\n caf\xc3\xa9 \\u0001 "
             "bad\\ufffd\"", "request");
    contains("\"droppedAttributesCount\":3", "request");
    lacks("\"droppedAttributesCount\":0", "request");
    lacks("schemaUrl", "request");

    /* Cross-check with a real JSON parser. */
    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    snprintf(jpath, sizeof(jpath), "%s/req.json", dir);
    snprintf(ppath, sizeof(ppath), "%s/check.pl", dir);
    ok(write_file(jpath, json, strlen(json)) == 0
       && write_file(ppath, perl_check, sizeof(perl_check) - 1) == 0,
       "wrote JSON and checker to %s", dir);
    fflush(stdout);
    snprintf(cmd, sizeof(cmd), "perl %s %s", ppath, jpath);
    rc = system(cmd);
    ok(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
       "JSON::PP decodes the request and finds the values we set");
    unlink(jpath);
    unlink(ppath);
    rmdir(dir);
}

int
main(void)
{
    sp_buf_init(&buf);
    test_strings();
    test_values();
    test_misc();
    test_request();
    sp_buf_free(&buf);
    return done_testing();
}
