/* otlp_http_json: the http/json request bodies (a batch of queued spans, a
 * profile) read back by a real JSON parser (jansson) against what the
 * protobuf encoders write for the same input (protobuf-c unpacks those),
 * and the JSON ExportTraceServiceResponse / ExportProfilesServiceResponse
 * reader on good, odd and bad bodies. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tap.h"

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/export/otlp_http_json.h"
#include "common/export/otlp_profiles.h"
#include "common/export/otlp_traces.h"
#include "common/trace/span_queue.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#define FIXTURE_TMPDIR  "/tmp/spanprof-test-otlp-http-json-XXXXXX"
#define FIXTURE_STRTAB  "  "
/* Only the profile of the fixture is used here, not its protoc helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "profile_fixture.h"

/* root.path, with path like "resourceSpans/0/scopeSpans/0/spans/1/kind". */
static json_t *
at(json_t *root, const char *path)
{
    char     buf[256], *tok, *save = NULL;
    json_t  *v = root;

    snprintf(buf, sizeof(buf), "%s", path);
    for (tok = strtok_r(buf, "/", &save); tok != NULL && v != NULL;
         tok = strtok_r(NULL, "/", &save))
    {
        if (json_is_array(v)) {
            v = json_array_get(v, (size_t) atoi(tok));
        } else {
            v = json_object_get(v, tok);
        }
    }
    return v;
}

static const char *
str_at(json_t *root, const char *path)
{
    json_t  *v = at(root, path);

    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int
is_hex(const char *s, size_t n)
{
    size_t  i;

    if (s == NULL || strlen(s) != n) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

static void
span_fill(sp_span_t *s, int i)
{
    uint8_t  tid[16], sid[8], pid[8];

    memset(tid, 0xa0 + i, sizeof(tid));
    memset(sid, 0xb0 + i, sizeof(sid));
    memset(pid, 0xc0 + i, sizeof(pid));
    sp_span_init(s, i ? SP_SPAN_KIND_CLIENT : SP_SPAN_KIND_SERVER, tid, sid,
                 i ? pid : NULL, 0, 0x01,
                 1700000000123456789ull + (uint64_t) i);
    s->end_ns = s->start_ns + 1000;
    sp_span_set_name(s, "GET /json", 9);
    sp_span_attr_cstr(s, "http.request.method", "GET", 3);
    sp_span_attr_cint(s, "http.response.status_code", 200 + i);
    if (i == 1) {
        sp_span_set_status(s, SP_STATUS_ERROR, "bad \"gateway\"", 13);
    }
}

static void
test_traces(void)
{
    sp_span_t            *s = calloc(1, sizeof(sp_span_t));
    sp_span_queue_t      *q = sp_span_queue_create(16, 0);
    const sp_span_rec_t  *recs[2];
    sp_resource_t         r;
    sp_arena_t            a;
    sp_buf_t              wire, json;
    json_t               *root;
    json_error_t          je;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest
                         *req;
    int                   i;

    sp_resource_init(&r, "json-svc", "json-host", "1.0");
    for (i = 0; i < 2; i++) {
        span_fill(s, i);
        sp_span_queue_push(q, s);
    }
    is_int(sp_span_queue_peek(q, recs, 2), 2, "two queued spans");
    sp_arena_init(&a, 0);
    sp_buf_init(&wire);
    sp_buf_init(&json);
    ok(sp_otlp_traces_encode(&a, &r, recs, 2, &wire) == 0, "protobuf batch");
    sp_arena_reset(&a);
    sp_buf_append(&json, "prefix", 6);
    ok(sp_otlp_http_json_traces(&a, &r, recs, 2, &json) == 0, "JSON batch");
    sp_arena_reset(&a);
    ok(json.len > 6 && json.data[json.len - 1] == '}',
       "one object, no newline after it");
    ok(memcmp(json.data, "prefix", 6) == 0, "appended to what was there");

    root = json_loadb((char *) json.data + 6, json.len - 6, 0, &je);
    ok(root != NULL, "jansson parses the body (%s)", root ? "" : je.text);
    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
              NULL, wire.len, wire.data);
    ok(req != NULL && req->n_resource_spans == 1
       && req->resource_spans[0]->n_scope_spans == 1
       && req->resource_spans[0]->scope_spans[0]->n_spans == 2,
       "protobuf: one resource, one scope, two spans");
    is_int(json_array_size(at(root, "resourceSpans/0/scopeSpans/0/spans")), 2,
           "JSON: the same two spans");
    is_str(str_at(root, "resourceSpans/0/scopeSpans/0/spans/0/traceId"),
           "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0", "traceId in hex");
    is_str(str_at(root, "resourceSpans/0/scopeSpans/0/spans/0/spanId"),
           "b0b0b0b0b0b0b0b0", "spanId in hex");
    is_str(str_at(root, "resourceSpans/0/scopeSpans/0/spans/1/parentSpanId"),
           "c1c1c1c1c1c1c1c1", "parentSpanId in hex");
    ok(at(root, "resourceSpans/0/scopeSpans/0/spans/0/parentSpanId") == NULL,
       "no parent: no parentSpanId");
    ok(json_is_integer(at(root, "resourceSpans/0/scopeSpans/0/spans/0/kind"))
       && json_integer_value(at(root,
              "resourceSpans/0/scopeSpans/0/spans/0/kind")) == 2,
       "kind SERVER as the integer 2");
    ok(json_integer_value(at(root,
           "resourceSpans/0/scopeSpans/0/spans/1/kind")) == 3,
       "kind CLIENT as the integer 3");
    is_str(str_at(root,
               "resourceSpans/0/scopeSpans/0/spans/0/startTimeUnixNano"),
           "1700000000123456789", "64-bit start time as a decimal string");
    is_str(str_at(root, "resourceSpans/0/scopeSpans/0/spans/1/endTimeUnixNano"),
           "1700000000123457790", "64-bit end time as a decimal string");
    ok(json_integer_value(at(root,
           "resourceSpans/0/scopeSpans/0/spans/1/status/code")) == 2,
       "status code ERROR as the integer 2");
    is_str(str_at(root, "resourceSpans/0/scopeSpans/0/spans/1/status/message"),
           "bad \"gateway\"", "status message escaped and read back");
    is_str(str_at(root,
               "resourceSpans/0/scopeSpans/0/spans/1/attributes/1/value/intValue"),
           "201", "int attribute as a decimal string");
    is_str(str_at(root, "resourceSpans/0/scopeSpans/0/scope/name"), "spanprof",
           "scope name");
    ok(at(root, "resource_spans") == NULL
       && at(root, "resourceSpans/0/scopeSpans/0/spans/0/start_time_unix_nano")
          == NULL, "no proto (snake_case) names");
    if (req != NULL) {
        is_str(str_at(root, "resourceSpans/0/scopeSpans/0/spans/1/name"),
               req->resource_spans[0]->scope_spans[0]->spans[1]->name,
               "names as in the protobuf batch");
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            req, NULL);
    }
    json_decref(root);
    sp_buf_free(&wire);
    sp_buf_free(&json);
    sp_arena_free(&a);
    sp_span_queue_destroy(q);
    sp_resource_free(&r);
    free(s);
}

static void
test_profiles(void)
{
    sp_arena_t    a;
    sp_buf_t      wire, json;
    json_t       *root, *p, *links, *sm;
    json_error_t  je;
    size_t        i, found = 0;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
                 *req;

    make_profile();
    sp_arena_init(&a, 0);
    sp_buf_init(&wire);
    sp_buf_init(&json);
    ok(sp_otlp_profiles_encode(&a, &prof, &wire) == 0, "protobuf profile");
    sp_arena_reset(&a);
    ok(sp_otlp_http_json_profiles(&a, &prof, &json) == 0, "JSON profile");
    sp_arena_reset(&a);
    root = json_loadb((char *) json.data, json.len, 0, &je);
    ok(root != NULL, "jansson parses the profile (%s)", root ? "" : je.text);
    req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
              NULL, wire.len, wire.data);
    ok(req != NULL, "protobuf-c unpacks the protobuf one");

    p = at(root, "resourceProfiles/0/scopeProfiles/0/profiles/0");
    ok(json_is_object(p), "one profile");
    ok(is_hex(str_at(p, "profileId"), 32), "profileId: 32 hex digits (%s)",
       str_at(p, "profileId") ? str_at(p, "profileId") : "none");
    is_str(str_at(p, "timeUnixNano"), "1700000000000000000",
           "fixed64 time as a decimal string");
    is_str(str_at(p, "durationNano"), "10000000000",
           "uint64 duration as a decimal string");
    is_str(str_at(p, "period"), "10000000", "int64 period as a string");
    is_int(json_array_size(at(p, "samples")),
           req ? req->resource_profiles[0]->scope_profiles[0]->profiles[0]
                     ->n_samples : 0, "as many samples as in protobuf");
    is_str(str_at(p, "samples/0/timestampsUnixNano/0"), "1700000000100000000",
           "sample timestamps as strings");
    sm = at(p, "samples/1/values/0");
    {
        /* Whatever the protobuf encoder put there (CPU nanoseconds), as a
         * decimal string. */
        char  want[32];

        snprintf(want, sizeof(want), "%lld", req
                 ? (long long) req->resource_profiles[0]->scope_profiles[0]
                       ->profiles[0]->samples[1]->values[0] : -1LL);
        ok(json_is_string(sm) && strcmp(json_string_value(sm), want) == 0
           && strcmp(want, "0") != 0,
           "int64 sample value as a decimal string (%s)", want);
    }

    links = at(root, "dictionary/linkTable");
    for (i = 0; i < json_array_size(links); i++) {
        const char *t = str_at(json_array_get(links, i), "traceId");
        const char *s = str_at(json_array_get(links, i), "spanId");

        if (t != NULL && strcmp(t, TRACE1_HEX) == 0 && s != NULL
            && strcmp(s, SPAN1_HEX) == 0)
        {
            found |= 1;
        }
        if (t != NULL && strcmp(t, TRACE2_HEX) == 0 && s != NULL
            && strcmp(s, SPAN2_HEX) == 0)
        {
            found |= 2;
        }
    }
    is_int(found, 3, "both links with hex trace and span ids");
    if (req != NULL) {
        is_int(json_array_size(links), req->dictionary->n_link_table,
               "as many links as in protobuf");
        is_int(json_array_size(at(root, "dictionary/stringTable")),
               req->dictionary->n_string_table,
               "as many strings as in protobuf");
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
            req, NULL);
    }
    json_decref(root);

    /* A profile the encoder refuses leaves out as it was. */
    sp_buf_reset(&json);
    sp_buf_append(&json, "keep", 4);
    prof.samples[0].stack_off = 1000;
    ok(sp_otlp_http_json_profiles(&a, &prof, &json) == -1,
       "out-of-range profile refused");
    ok(json.len == 4 && memcmp(json.data, "keep", 4) == 0, "out unchanged");
    sp_arena_free(&a);
    sp_buf_free(&wire);
    sp_buf_free(&json);
}

static void
resp(const char *body, const char *field, size_t msglen, int want_rc,
    int64_t want_rejected, const char *want_msg)
{
    char     msg[65];       /* one guard byte past msglen <= 64 */
    int64_t  rejected = -7;
    int      rc;

    memset(msg, 'x', sizeof(msg));
    rc = sp_otlp_http_json_parse_response((const uint8_t *) body, strlen(body),
                                          field, &rejected, msg, msglen);
    ok(rc == want_rc && rejected == want_rejected
       && (msglen == 0 || strcmp(msg, want_msg) == 0)
       && msg[msglen] == 'x',
       "%s %s -> rc %d rejected %lld \"%s\"", field, body, want_rc,
       (long long) want_rejected, want_msg);
    if (!(rc == want_rc && rejected == want_rejected)) {
        printf("#   got rc %d rejected %lld msg \"%.*s\"\n", rc,
               (long long) rejected, (int) (msglen ? msglen - 1 : 0), msg);
    }
}

static void
test_responses(void)
{
    const char  *S = "rejectedSpans", *P = "rejectedProfiles";

    resp("{}", S, 64, 0, 0, "");
    resp(" { } \t", S, 64, 0, 0, "");
    resp("{\"partialSuccess\":{}}", S, 64, 0, 0, "");
    resp("{\"partialSuccess\":null}", S, 64, 0, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"3\","
         "\"errorMessage\":\"too old\"}}", S, 64, 0, 3, "too old");
    resp("{\"partialSuccess\":{\"rejectedSpans\":4}}", S, 64, 0, 4, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":5.0}}", S, 64, 0, 5, "");
    resp("{\"partial_success\":{\"rejected_spans\":\"6\","
         "\"error_message\":\"proto names\"}}", S, 64, 0, 6, "proto names");
    resp("{\"partialSuccess\":{\"rejectedProfiles\":\"2\","
         "\"errorMessage\":\"p\"}}", P, 64, 0, 2, "p");
    resp("{\"partialSuccess\":{\"rejectedProfiles\":\"2\"}}", S, 64, 0, 0, "");
    resp("{\"partialSuccess\":{\"errorMessage\":\"warning only\"}}", S, 64, 0,
         0, "warning only");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"-3\"}}", S, 64, 0, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"9223372036854775807\"}}",
         S, 64, 0, INT64_MAX, "");
    resp("{\"unknown\":[1,2],\"partialSuccess\":{\"rejectedSpans\":\"1\","
         "\"future\":{}}}", S, 64, 0, 1, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"1\",\"errorMessage\":"
         "\"0123456789abcdef\"}}", S, 8, 0, 1, "0123456");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"1\",\"errorMessage\":"
         "\"abc\"}}", S, 0, 0, 1, "");
    /* Not a response. */
    resp("", S, 64, -1, 0, "");
    resp("not json", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"3\"", S, 64, -1, 0, "");
    resp("[]", S, 64, -1, 0, "");
    resp("\"str\"", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":7}", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"3x\"}}", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"\"}}", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"99999999999999999999\"}}",
         S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":1.5}}", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":1e300}}", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":true}}", S, 64, -1, 0, "");
    resp("{\"partialSuccess\":{\"rejectedSpans\":\"2\",\"errorMessage\":5}}",
         S, 64, -1, 0, "");
}

int
main(void)
{
    test_traces();
    test_profiles();
    test_responses();
    return done_testing();
}
