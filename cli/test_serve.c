/* Unit tests (TAP, under ASan and UBSan) of spanprof serve's parts: JSON
 * escaping, the in-place wire reader on malformed input, stored attributes
 * back to JSON, the OTLP/JSON decoder, flame graph trees, and the store
 * (ingest, queries, batching, retention) in a temporary directory. The
 * listeners and the UI are tested by t/84-t/87. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "tap.h"

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "cli/serve/attr_keys.h"
#include "cli/serve/attrs_json.h"
#include "cli/serve/flame_json.h"
#include "cli/serve/json_out.h"
#include "cli/serve/otlp_ingest.h"
#include "cli/serve/otlp_json_decode.h"
#include "cli/serve/store.h"
#include "cli/serve/wire_read.h"

static const char *
str(sp_buf_t *b)
{
    sp_buf_append_char(b, '\0');
    b->len--;
    return (const char *) b->data;
}

static void
test_json_out(void)
{
    sp_buf_t  b;
    uint8_t   id[8];

    sp_buf_init(&b);
    serve_json_str(&b, "a\"b\\c\n<script>&");
    is_str(str(&b), "\"a\\\"b\\\\c\\u000a\\u003cscript\\u003e\\u0026\"",
           "quotes, backslashes, controls and < > & escaped");
    sp_buf_reset(&b);
    serve_json_strn(&b, "\xc3\xa9\xff\xe2\x82", 5);
    is_str(str(&b), "\"\xc3\xa9\\ufffd\\ufffd\\ufffd\"",
           "valid UTF-8 kept, invalid bytes become U+FFFD");
    sp_buf_reset(&b);
    serve_json_str(&b, NULL);
    is_str(str(&b), "null", "NULL is null");
    ok(serve_hex_parse("0102030405060708", id, 8) == 0 && id[7] == 8,
       "hex parsed");
    ok(serve_hex_parse("010203040506070", id, 8) != 0, "short hex refused");
    ok(serve_hex_parse("01020304050607zz", id, 8) != 0, "non-hex refused");
    sp_buf_free(&b);
}

static void
test_wire(void)
{
    serve_wire_t   w;
    serve_field_t  f;
    /* field 1 varint 150; field 2 bytes "hi"; field 3 fixed64 */
    static const uint8_t  good[] = { 0x08, 0x96, 0x01, 0x12, 0x02, 'h', 'i',
                                     0x19, 1, 0, 0, 0, 0, 0, 0, 0 };
    static const uint8_t  long_len[] = { 0x12, 0x7f, 'x' };
    static const uint8_t  bad_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff };
    static const uint8_t  group[] = { 0x0b };
    int            n = 0;

    serve_wire_init(&w, good, sizeof(good));
    while (serve_wire_next(&w, &f)) {
        n++;
        if (f.num == 1) {
            is_int(f.v, 150, "varint");
        } else if (f.num == 2) {
            ok(f.len == 2 && memcmp(f.data, "hi", 2) == 0, "bytes");
        } else if (f.num == 3) {
            is_int(f.v, 1, "fixed64");
        }
    }
    ok(n == 3 && !w.bad, "three fields, no error");
    serve_wire_init(&w, long_len, sizeof(long_len));
    ok(!serve_wire_next(&w, &f) && w.bad, "a length past the end: bad");
    serve_wire_init(&w, bad_varint, sizeof(bad_varint));
    ok(!serve_wire_next(&w, &f) && w.bad, "an 11-byte varint: bad");
    serve_wire_init(&w, group, sizeof(group));
    ok(!serve_wire_next(&w, &f) && w.bad, "a group: bad");
    serve_wire_init(&w, good, 2);
    ok(!serve_wire_next(&w, &f) && w.bad, "a truncated varint: bad");
}

static void
test_attrs_json(void)
{
    /* Key 1 ("k") = string "v"; key 2 ("n") = int 7; inline key "<" =
     * bool true; key 1 with no value; then a truncated value. */
    static const uint8_t  a[] = {
        0x01, 0x03, 0x0a, 0x01, 'v',
        0x02, 0x02, 0x18, 0x07,
        0x00, 0x01, '<', 0x02, 0x10, 0x01,
        0x01, 0x00,
        0x02, 0x09, 0x0a };
    /* An unknown key number ends the object. */
    static const uint8_t  unknown[] = { 0x01, 0x02, 0x18, 0x01,
                                        0x09, 0x02, 0x18, 0x01 };
    serve_keys_t  *k = serve_keys_new();
    sp_buf_t       b;
    char           key[16];
    int            i, n;

    sp_buf_init(&b);
    ok(serve_keys_add(k, "k", 1) == 1 && serve_keys_add(k, "n", 1) == 2
       && serve_keys_find(k, "n", 1) == 2 && serve_keys_find(k, "x", 1) == 0,
       "keys numbered as added, found by their text");
    serve_attrs_json(&b, a, sizeof(a), k);
    is_str(str(&b), "{\"k\":\"v\",\"n\":7,\"\\u003c\":true,\"k\":null}",
           "attributes back to JSON; a truncated one ends the object");
    sp_buf_reset(&b);
    serve_attrs_json(&b, unknown, sizeof(unknown), k);
    is_str(str(&b), "{\"k\":1}", "an unknown key number ends the object");
    sp_buf_reset(&b);
    serve_attrs_json(&b, NULL, 0, k);
    is_str(str(&b), "{}", "none: {}");
    for (i = 3, n = 0; i <= SERVE_KEYS_MAX + 5; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        n += serve_keys_add(k, key, strlen(key)) != 0;
    }
    ok(n == SERVE_KEYS_MAX - 2 && serve_keys_find(k, "k1024", 5) == 1024
       && serve_keys_find(k, "k1025", 5) == 0, "at most SERVE_KEYS_MAX keys");
    serve_keys_truncate(k, 2);
    ok(serve_keys_count(k) == 2 && serve_keys_find(k, "k3", 2) == 0
       && serve_keys_find(k, "n", 1) == 2 && serve_keys_add(k, "k3", 2) == 3,
       "truncated to what a rollback keeps, then numbered on");
    serve_keys_free(k);
    sp_buf_free(&b);
}

static void
test_json_decode(void)
{
    const ProtobufCMessageDescriptor  *d =
        &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest  *r;
    char   err[256];
    char   deep[2048];
    int    i;
    const char  *neg, *two;
    const char  *ok_json =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{"
        "\"traceId\":\"5b8efff798038103d269b633813fc60c\","
        "\"span_id\":\"eee19b7ec3c1b174\",\"kind\":\"SPAN_KIND_SERVER\","
        "\"startTimeUnixNano\":\"18446744073709551615\","
        "\"attributes\":[{\"key\":\"a\",\"value\":{\"intValue\":-5}}]}]}]}]}";

    r = (void *) serve_otlp_json_decode(d, ok_json, strlen(ok_json), err,
                                        sizeof(err));
    ok(r != NULL, "decoded") ;
    if (r != NULL) {
        Opentelemetry__Proto__Trace__V1__Span  *s =
            r->resource_spans[0]->scope_spans[0]->spans[0];

        ok(s->trace_id.len == 16 && s->trace_id.data[0] == 0x5b,
           "traceId from hex");
        ok(s->span_id.len == 8, "snake_case name accepted too");
        is_int(s->kind, 2, "enum by name");
        ok(s->start_time_unix_nano == UINT64_MAX, "uint64 max as a string");
        ok(s->attributes[0]->value->int_value == -5, "negative int64");
        ok(protobuf_c_message_check(&r->base), "a valid message");
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    ok(serve_otlp_json_decode(d, "[]", 2, err, sizeof(err)) == NULL,
       "an array is refused");
    neg = "{\"resourceSpans\":[{\"scopeSpans\":[{"
          "\"spans\":[{\"startTimeUnixNano\":\"-1\"}]}]}]}";
    ok(serve_otlp_json_decode(d, neg, strlen(neg), err, sizeof(err)) == NULL
       && strstr(err, "start_time_unix_nano") != NULL,
       "a negative uint64 refused, naming the field");
    two = "{\"resourceSpans\":[{\"resource\":{"
          "\"attributes\":[{\"value\":{\"stringValue\":"
          "\"a\",\"intValue\":1}}]}}]}";
    ok(serve_otlp_json_decode(d, two, strlen(two), err, sizeof(err)) == NULL
       && strstr(err, "oneof") != NULL, "two members of a oneof refused");
    /* Nesting through kvlistValue, deeper than 64. */
    deep[0] = '\0';
    strcat(deep, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
    for (i = 0; i < 40; i++) {
        strcat(deep, "{\"value\":{\"kvlistValue\":{\"values\":[");
    }
    for (i = 0; i < 40; i++) {
        strcat(deep, "]}}}");
    }
    strcat(deep, "]}}]}");
    ok(serve_otlp_json_decode(d, deep, strlen(deep), err, sizeof(err))
       == NULL && strstr(err, "nested") != NULL, "nesting bounded");
}

static int
count_frames(void *ud, const char *stack, int64_t count, int64_t cpu_ns,
    int in_request)
{
    int64_t  *t = ud;

    t[0] += count;
    t[1] += cpu_ns;
    t[2] += in_request;
    return 0;
}

static void
test_flame(void)
{
    serve_flame_t  *f = serve_flame_new();
    sp_buf_t        b;

    sp_buf_init(&b);
    serve_flame_add(f, "main;b;leaf", 30, 3, 0);
    serve_flame_add(f, "main;a", 10, 1, 0);
    serve_flame_add(f, "main;b", 5, 1, 1);
    serve_flame_json(f, "all", 1, &b);
    is_str(str(&b), "{\"n\":\"all\",\"t\":[40,5],\"s\":[4,1],\"c\":["
           "{\"n\":\"main\",\"t\":[40,5],\"s\":[4,1],\"c\":["
           "{\"n\":\"a\",\"t\":[10,0],\"s\":[1,0]},"
           "{\"n\":\"b\",\"t\":[30,5],\"s\":[3,1],\"c\":["
           "{\"n\":\"leaf\",\"t\":[30,0],\"s\":[3,0]}]}]}]}",
           "stacks merged, children by name, both sides");
    serve_flame_free(f);
    sp_buf_free(&b);
}

static uint8_t *
one_span_request(const char *route, uint64_t start, size_t *len)
{
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest  req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans  rs =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
    Opentelemetry__Proto__Trace__V1__ScopeSpans  ss =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT, *ssp = &ss;
    Opentelemetry__Proto__Trace__V1__Span  sp =
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT, *spp = &sp;
    Opentelemetry__Proto__Common__V1__KeyValue  kv =
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT, *kvp = &kv;
    Opentelemetry__Proto__Common__V1__AnyValue  v =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    static uint8_t  tid[16], sid[8];
    uint8_t        *buf;

    memcpy(tid, &start, 8);
    tid[15] = 1;
    memcpy(sid, &start, 8);
    sid[7] |= 1;
    kv.key = "http.route";
    kv.value = &v;
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v.string_value = (char *) route;
    sp.trace_id.data = tid;
    sp.trace_id.len = 16;
    sp.span_id.data = sid;
    sp.span_id.len = 8;
    sp.name = "GET";
    sp.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    sp.start_time_unix_nano = start;
    sp.end_time_unix_nano = start + 1000;
    sp.n_attributes = 1;
    sp.attributes = &kvp;
    ss.n_spans = 1;
    ss.spans = &spp;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    *len = protobuf_c_message_get_packed_size(&req.base);
    buf = malloc(*len);
    protobuf_c_message_pack(&req.base, buf);
    return buf;
}

static void
test_store(void)
{
    char                    dir[] = "/tmp/spanprof-test-serve-XXXXXX";
    char                    err[256], path[300];
    serve_store_t          *s;
    serve_ingest_result_t   r;
    serve_store_stats_t     st;
    serve_trace_query_t     q;
    serve_sample_query_t    sq;
    serve_sample_t          sa;
    sp_buf_t                b;
    uint8_t                *req, tid[16], sid[8];
    size_t                  len, cut;
    int64_t                 now = 2000000000000000000LL, tot[3] = { 0 };
    int                     rc;

    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL, "store opened") ;
    if (s == NULL) {
        return;
    }
    sp_buf_init(&b);

    req = one_span_request("/old", (uint64_t) (now - 7200000000000LL), &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1,
       "a span ingested");
    /* Every truncation of a valid request: refused or stored, never a
     * crash (ASan watches), and nothing of a refused one stored. */
    for (cut = 1; cut < len; cut++) {
        rc = serve_ingest_traces(s, req, cut, 0, &r);
        if (rc != 0 && r.accepted != 0) {
            break;
        }
    }
    ok(cut == len, "every truncation answered, none half stored");
    free(req);
    req = one_span_request("/new", (uint64_t) now, &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1,
       "a second span");
    free(req);

    memset(&q, 0, sizeof(q));
    q.limit = 10;
    q.slowest = 1;
    q.to_ns = INT64_MAX;
    ok(serve_store_traces(s, &q, &b) == 0
       && strstr(str(&b), "\"route\":\"/new\"") != NULL
       && strstr(str(&b), "\"route\":\"/old\"") != NULL,
       "both found before their commit (the same connection)");

    /* A sample of the new span. */
    memset(tid, 0, sizeof(tid));
    memcpy(tid, &now, 8);
    tid[15] = 1;
    memcpy(sid, &now, 8);
    sid[7] |= 1;
    memset(&sa, 0, sizeof(sa));
    sa.time_ns = now;
    sa.trace_id = tid;
    sa.span_id = sid;
    sa.stack = "main;work";
    sa.count = 3;
    sa.value = 3000;
    ok(serve_store_begin(s) == 0 && serve_store_add_sample(s, &sa) == 0
       && serve_store_commit(s) == 0, "a sample stored");
    memset(&sq, 0, sizeof(sq));
    sq.trace_id = tid;
    sq.span_id = sid;
    ok(serve_store_stacks(s, &sq, count_frames, tot) == 0 && tot[0] == 3
       && tot[1] == 3000 && tot[2] == 1, "the span's samples");

    ok(serve_store_flush(s) == 0, "flushed");
    ok(serve_store_retain(s, now, 3600000000000LL, 0) == 0,
       "retention by age");
    serve_store_get_stats(s, &st);
    is_int(st.spans_deleted, 1, "the old span deleted");
    sp_buf_reset(&b);
    ok(serve_store_trace(s, tid, &b) == 0, "the new one stays");
    serve_store_close(s);

    /* Reopened: what was committed is there. */
    s = serve_store_open(dir, err, sizeof(err));
    sp_buf_reset(&b);
    ok(s != NULL && serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"cpu_samples\":3") != NULL,
       "reopened: the span and its samples");
    serve_store_close(s);

    sp_buf_free(&b);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    if (system(path) != 0) {
        printf("# cannot remove %s\n", dir);
    }
}

/* Profiles of every type in one request (OTLP/JSON): cpu, wall, off_cpu
 * of a span and two in-use memory snapshots of the worker: each stored
 * under its type, selected by it, listed, and a span's times from them. */
static const char  typed_profiles[] =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"typed\"}},"
    "{\"key\":\"process.pid\",\"value\":{\"intValue\":\"42\"}}]},"
    "\"scopeProfiles\":[{\"profiles\":["
    "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    " \"timeUnixNano\":\"1000\",\"durationNano\":\"100\","
    " \"period\":\"10000000\",\"samples\":[{\"stackIndex\":1,"
    " \"linkIndex\":1,\"values\":[\"30000000\"],"
    " \"timestampsUnixNano\":[\"1000\"]}]},"
    "{\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":2},"
    " \"timeUnixNano\":\"1000\",\"durationNano\":\"100\","
    " \"period\":\"10000000\",\"samples\":[{\"stackIndex\":2,"
    " \"linkIndex\":1,\"values\":[\"500000000\"],"
    " \"timestampsUnixNano\":[\"1000\"]}]},"
    "{\"sampleType\":{\"typeStrindex\":4,\"unitStrindex\":2},"
    " \"timeUnixNano\":\"1000\",\"durationNano\":\"100\","
    " \"period\":\"10000000\",\"samples\":[{\"stackIndex\":2,"
    " \"linkIndex\":1,\"values\":[\"400000000\"],"
    " \"timestampsUnixNano\":[\"1000\"]}]},"
    "{\"sampleType\":{\"typeStrindex\":5,\"unitStrindex\":6},"
    " \"timeUnixNano\":\"1000\",\"samples\":[{\"stackIndex\":1,"
    " \"values\":[\"1000\"]}]},"
    "{\"sampleType\":{\"typeStrindex\":5,\"unitStrindex\":6},"
    " \"timeUnixNano\":\"2000\",\"samples\":[{\"stackIndex\":1,"
    " \"values\":[\"3000\"]}]}"
    "]}]}],"
    "\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"wall\","
    "\"off_cpu\",\"inuse_space\",\"bytes\",\"main\",\"work\",\"sleep\"],"
    "\"functionTable\":[{},{\"nameStrindex\":7},{\"nameStrindex\":8},"
    "{\"nameStrindex\":9}],"
    "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]},"
    "{\"lines\":[{\"functionIndex\":2}]},{\"lines\":[{\"functionIndex\":3}]}],"
    "\"stackTable\":[{},{\"locationIndices\":[2,1]},"
    "{\"locationIndices\":[3,1]}],"
    "\"linkTable\":[{},{\"traceId\":\"08070605040302010000000000000001\","
    "\"spanId\":\"0807060504030201\"}]}}";

static void
test_store_types(void)
{
    char                    dir[] = "/tmp/spanprof-test-serve-XXXXXX";
    char                    err[256], path[300];
    serve_store_t          *s;
    serve_ingest_result_t   r;
    serve_sample_query_t    sq;
    sp_buf_t                b;
    sqlite3                *db;
    uint8_t                *req, tid[16], sid[8];
    uint64_t                start = 0x0102030405060708ULL;
    size_t                  len;
    int64_t                 tot[3];
    int                     off_cpu;

    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL, "types: store opened");
    if (s == NULL) {
        return;
    }
    sp_buf_init(&b);
    req = one_span_request("/typed", start, &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1,
       "types: the span");
    free(req);
    memcpy(tid, &start, 8);
    memset(tid + 8, 0, 8);
    tid[15] = 1;
    memcpy(sid, &start, 8);
    sid[7] |= 1;
    ok(serve_ingest_profiles(s, (const uint8_t *) typed_profiles,
                             sizeof(typed_profiles) - 1, 1, &r) == 0
       && r.accepted == 5 && r.rejected == 0,
       "cpu, wall, off_cpu and two inuse_space profiles accepted");
    if (r.rejected) {
        printf("# %s\n", r.error);
    }
    off_cpu = serve_store_type_find(s, "off_cpu");
    ok(serve_store_type_find(s, "cpu") == SERVE_TYPE_CPU && off_cpu > 1
       && serve_store_type_find(s, "wall") > 1
       && serve_store_type_find(s, "inuse_space") > 1
       && strcmp(serve_store_type_unit(s, serve_store_type_find(s,
                 "inuse_space")), "bytes") == 0,
       "each type numbered, with its unit");

    memset(&sq, 0, sizeof(sq));
    sq.trace_id = tid;
    sq.span_id = sid;
    sq.to_ns = INT64_MAX;
    ok(serve_store_types(s, &sq, &b) == 0
       && strstr(str(&b), "{\"type\":\"cpu\",\"unit\":\"nanoseconds\","
                 "\"gauge\":false,\"value\":30000000,\"samples\":3}") != NULL
       && strstr(str(&b), "\"type\":\"wall\"") != NULL
       && strstr(str(&b), "{\"type\":\"off_cpu\",\"unit\":\"nanoseconds\","
                 "\"gauge\":false,\"value\":400000000,\"samples\":40}")
          != NULL
       && strstr(str(&b), "inuse_space") == NULL,
       "the span's types listed (not the worker's memory)");
    printf("# %s\n", str(&b));
    memset(tot, 0, sizeof(tot));
    ok(serve_store_stacks(s, &sq, count_frames, tot) == 0
       && tot[1] == 30000000 && tot[0] == 3, "type 0: cpu only");
    memset(tot, 0, sizeof(tot));
    sq.type = off_cpu;
    ok(serve_store_stacks(s, &sq, count_frames, tot) == 0
       && tot[1] == 400000000, "type off_cpu: its samples only");
    sq.type = -1;
    memset(tot, 0, sizeof(tot));
    ok(serve_store_stacks(s, &sq, count_frames, tot) == 0 && tot[1] == 0,
       "an unknown type: nothing");

    sp_buf_reset(&b);
    ok(serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"cpu_ns\":30000000,\"wall_ns\":500000000,"
                 "\"off_cpu_ns\":400000000") != NULL,
       "the span's CPU, wall and off-CPU from its samples");

    /* The worker: in-use memory by snapshot, its flame graph the latest
     * snapshot (not their sum); its CPU the cpu samples only. */
    memset(&sq, 0, sizeof(sq));
    sq.to_ns = INT64_MAX;
    sq.whole = 1;
    sq.pid = 42;
    sq.type = serve_store_type_find(s, "inuse_space");
    memset(tot, 0, sizeof(tot));
    ok(serve_store_stacks(s, &sq, count_frames, tot) == 0 && tot[1] == 3000,
       "a worker's in-use flame graph: its latest snapshot");
    sp_buf_reset(&b);
    ok(serve_store_memory(s, 0, INT64_MAX, &b) == 0
       && strcmp(str(&b), "[{\"pid\":42,\"service\":\"typed\",\"points\":"
                 "[[1000,1000],[2000,3000]]}]") == 0,
       "in-use memory per worker over time");
    printf("# %s\n", str(&b));
    sp_buf_reset(&b);
    ok(serve_store_workers(s, 0, INT64_MAX, &b) == 0
       && strstr(str(&b), "\"cpu_ns\":30000000,") != NULL,
       "the workers' CPU: cpu samples only");
    serve_store_close(s);

    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL && serve_store_type_find(s, "off_cpu") == off_cpu,
       "reopened: the types as numbered");
    serve_store_close(s);

    /* A database of schema 3 (no types): refused, untouched. */
    snprintf(path, sizeof(path), "%s/spanprof.db", dir);
    unlink(path);
    ok(sqlite3_open(path, &db) == SQLITE_OK
       && sqlite3_exec(db, "CREATE TABLE samples(id INTEGER PRIMARY KEY,"
                       " cpu_ns INTEGER); PRAGMA user_version = 3",
                       NULL, NULL, NULL) == SQLITE_OK, "a schema 3 database");
    sqlite3_close(db);
    s = serve_store_open(dir, err, sizeof(err));
    ok(s == NULL
       && strstr(err, "an earlier spanprof serve (database schema 3;")
          != NULL, "schema 3 refused with the clear error");
    serve_store_close(s);

    sp_buf_free(&b);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    if (system(path) != 0) {
        printf("# cannot remove %s\n", dir);
    }
}

/* A request of one SERVER span: trace id 16 x t, span id 8 x sp, and an
 * attribute key = "v" when key is not NULL. */
static uint8_t *
span_request(uint8_t t, uint8_t sp_id, uint64_t start, uint64_t dur,
    const char *key, size_t *len)
{
    Opentelemetry__Proto__Common__V1__KeyValue  kv =
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT, *kvp = &kv;
    Opentelemetry__Proto__Common__V1__AnyValue  v =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest  req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans  rs =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
    Opentelemetry__Proto__Trace__V1__ScopeSpans  ss =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT, *ssp = &ss;
    Opentelemetry__Proto__Trace__V1__Span  sp =
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT, *spp = &sp;
    static uint8_t  tid[16], sid[8];
    uint8_t        *buf;

    memset(tid, t, sizeof(tid));
    memset(sid, sp_id, sizeof(sid));
    sp.trace_id.data = tid;
    sp.trace_id.len = 16;
    sp.span_id.data = sid;
    sp.span_id.len = 8;
    sp.name = "GET";
    sp.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    sp.start_time_unix_nano = start;
    sp.end_time_unix_nano = start + dur;
    if (key != NULL) {
        kv.key = (char *) key;
        kv.value = &v;
        v.value_case =
            OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        v.string_value = "v";
        sp.n_attributes = 1;
        sp.attributes = &kvp;
    }
    ss.n_spans = 1;
    ss.spans = &spp;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    *len = protobuf_c_message_get_packed_size(&req.base);
    buf = malloc(*len);
    protobuf_c_message_pack(&req.base, buf);
    return buf;
}

/* Parts of 2 spans: a trace in two parts, the slowest-first search
 * merging the parts, a trace opened across them; then a database of the
 * first schema refused with a clear error. */
static void
test_store_parts(void)
{
    static const struct { uint8_t t, sp; uint64_t dur; }  spans[] = {
        { 0xa1, 1, 10 }, { 0xb2, 2, 40 }, { 0xc3, 3, 30 }, { 0xa1, 4, 50 },
        { 0xd4, 5, 5 },
    };
    char                    dir[] = "/tmp/spanprof-test-parts-XXXXXX";
    char                    old[] = "/tmp/spanprof-test-old-XXXXXX";
    char                    err[256], path[300];
    serve_store_t          *s;
    serve_ingest_result_t   r;
    serve_trace_query_t     q;
    sp_buf_t                b;
    sqlite3                *db;
    uint8_t                *req, tid[16];
    size_t                  len, i;
    const char             *a, *bb;
    uint8_t                 hdr[100];
    FILE                   *f;

    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL, "store opened");
    if (s == NULL) {
        return;
    }
    serve_store_set_part_bits(s, 1);
    sp_buf_init(&b);
    for (i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
        req = span_request(spans[i].t, spans[i].sp, 1000 + i, spans[i].dur,
                           "k", &len);
        if (serve_ingest_traces(s, req, len, 0, &r) != 0 || r.accepted != 1) {
            break;
        }
        free(req);
    }
    ok(i == sizeof(spans) / sizeof(spans[0]), "5 spans in 3 parts");
    memset(&q, 0, sizeof(q));
    q.limit = 2;
    q.slowest = 1;
    q.to_ns = INT64_MAX;
    ok(serve_store_traces(s, &q, &b) == 0, "slowest first");
    a = strstr(str(&b), "\"trace_id\":\"a1a1");
    bb = strstr(str(&b), "\"trace_id\":\"b2b2");
    ok(a != NULL && bb != NULL && a < bb && strstr(str(&b), "c3c3") == NULL
       && strstr(str(&b), "\"duration_ns\":50,\"spans\":2}") != NULL,
       "the two slowest traces over all parts, each once, with its spans");
    sp_buf_reset(&b);
    q.slowest = 0;
    q.limit = 3;
    ok(serve_store_traces(s, &q, &b) == 0
       && strstr(str(&b), "d4d4") < strstr(str(&b), "a1a1")
       && strstr(str(&b), "a1a1") < strstr(str(&b), "c3c3")
       && strstr(str(&b), "b2b2") == NULL, "newest first");
    sp_buf_reset(&b);
    memset(tid, 0xa1, sizeof(tid));
    ok(serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"span_id\":\"0101") != NULL
       && strstr(str(&b), "\"span_id\":\"0404") != NULL,
       "a trace opened across parts");
    memset(tid, 0xa2, sizeof(tid));
    sp_buf_reset(&b);
    ok(serve_store_trace(s, tid, &b) == 1, "an unknown trace: 1");

    /* A span with a new key, then a malformed ResourceSpans: the request
     * is refused, the key forgotten with the span; the next new key takes
     * its number, and reads back after a reopen. */
    req = span_request(0xe5, 6, 2000, 1, "fresh.key", &len);
    req = realloc(req, len + 4);
    memcpy(req + len, "\x0a\x02\x12\x05", 4);
    ok(serve_ingest_traces(s, req, len + 4, 0, &r) == -1 && r.accepted == 0,
       "a request malformed after a span with a new key: refused");
    free(req);
    req = span_request(0xf6, 7, 3000, 1, "other.key", &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1,
       "a span with another new key");
    free(req);
    serve_store_close(s);
    s = serve_store_open(dir, err, sizeof(err));
    memset(tid, 0xf6, sizeof(tid));
    sp_buf_reset(&b);
    ok(s != NULL && serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"attributes\":{\"other.key\":\"v\"}") != NULL,
       "reopened: its attribute by its key");
    memset(tid, 0xa1, sizeof(tid));
    sp_buf_reset(&b);
    ok(s != NULL && serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"attributes\":{\"k\":\"v\"}") != NULL,
       "and the first key's");
    if (s == NULL) {
        printf("# %s\n", err);
    }
    serve_store_close(s);
    sp_buf_free(&b);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    if (system(path) != 0) {
        printf("# cannot remove %s\n", dir);
    }

    /* A database of the first schema (user_version 0, spans without
     * parts): refused, saying what to do, and left as it was. */
    if (mkdtemp(old) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    snprintf(path, sizeof(path), "%s/spanprof.db", old);
    ok(sqlite3_open(path, &db) == SQLITE_OK
       && sqlite3_exec(db, "CREATE TABLE spans(id INTEGER PRIMARY KEY,"
                       " trace_id BLOB NOT NULL);"
                       "INSERT INTO spans(trace_id) VALUES(x'01')",
                       NULL, NULL, NULL) == SQLITE_OK, "an old database");
    sqlite3_close(db);
    s = serve_store_open(old, err, sizeof(err));
    ok(s == NULL
       && strstr(err, "an earlier spanprof serve (database schema 0;") != NULL
       && strstr(err, "move the file away") != NULL,
       "refused with a clear error");
    if (s == NULL) {
        printf("# %s\n", err);
    }
    serve_store_close(s);
    /* Bytes 18 and 19 of the header: 1 for a rollback journal, 2 for
     * WAL (which opening it as ours would have set). */
    hdr[18] = 0;
    if ((f = fopen(path, "rb")) != NULL) {
        if (fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr)) {
            hdr[18] = 0;
        }
        fclose(f);
    }
    ok(sqlite3_open(path, &db) == SQLITE_OK
       && sqlite3_exec(db, "SELECT part FROM spans", NULL, NULL, NULL)
          != SQLITE_OK && hdr[18] == 1, "and left as it was (not made WAL)");
    sqlite3_close(db);
    snprintf(path, sizeof(path), "rm -rf %s", old);
    if (system(path) != 0) {
        printf("# cannot remove %s\n", dir);
    }
}

/* The parts' summaries (part_map.h) that queries go by, over parts of 4
 * spans: 80 traces of 3 spans each, 20 and 40 parts apart, of distinct
 * durations. Each trace is opened whole, the slowest-first search lists
 * what a search of every span would, in order (with and without a
 * minimum duration, or started from a time); so again after a reopen (summaries read back, one
 * deleted and made again) and after retention removed the oldest parts
 * (their summaries removed with them, in the database too). */
#define PM_SPANS   240
#define PM_TRACES  80

static uint64_t
pm_dur(int i)
{
    /* 103 is prime to 240: distinct durations, in no order. */
    return 1000 + (uint64_t) ((i * 103) % PM_SPANS);
}

static int
pm_count_spans(const char *json)
{
    int  n = 0;

    while ((json = strstr(json, "\"span_id\":")) != NULL) {
        n++;
        json++;
    }
    return n;
}

/* Does the search list, in order, the `limit` traces whose longest span
 * among spans [first, PM_SPANS) (those stored), started from span `from`
 * on, is the longest and at least min_dur, each with its number of spans
 * stored? */
static int
pm_search_from_ok(serve_store_t *s, int first, int from, int limit,
    uint64_t min_dur)
{
    serve_trace_query_t  q;
    sp_buf_t             b;
    uint64_t             best[PM_TRACES + 1] = { 0 };
    int                  nspans[PM_TRACES + 1] = { 0 };
    int                  i, t, k, ok_ = 1, listed = 0;
    const char          *at, *cur;
    char                 want[64];

    for (i = first; i < PM_SPANS; i++) {
        t = 1 + i % PM_TRACES;
        nspans[t]++;
        if (i >= from && pm_dur(i) > best[t]) {
            best[t] = pm_dur(i);
        }
    }
    memset(&q, 0, sizeof(q));
    q.limit = limit;
    q.slowest = 1;
    q.to_ns = INT64_MAX;
    q.min_duration_ns = (int64_t) min_dur;
    q.from_ns = 1000000 + (int64_t) from * 1000;
    sp_buf_init(&b);
    if (serve_store_traces(s, &q, &b) != 0) {
        sp_buf_free(&b);
        return 0;
    }
    cur = str(&b);
    for (k = 0; k < limit; k++) {
        uint64_t  top = 0;
        int       tt = 0;

        for (t = 1; t <= PM_TRACES; t++) {
            if (best[t] > top && best[t] >= min_dur) {
                top = best[t];
                tt = t;
            }
        }
        if (tt == 0) {
            break;
        }
        best[tt] = 0;
        snprintf(want, sizeof(want), "{\"trace_id\":\"%02x%02x", tt, tt);
        at = strstr(cur, want);
        snprintf(want, sizeof(want), ",\"spans\":%d}", nspans[tt]);
        if (at == NULL || strstr(at, ",\"spans\":") != strstr(at, want)) {
            printf("# trace %d (%d spans) not listed %dth: %s\n", tt,
                   nspans[tt], k + 1, str(&b));
            ok_ = 0;
            break;
        }
        cur = at + 1;
        listed++;
    }
    if (ok_ && pm_count_spans(str(&b)) != listed) {
        printf("# %d listed, not %d: %s\n", pm_count_spans(str(&b)), listed,
               str(&b));
        ok_ = 0;
    }
    sp_buf_free(&b);
    return ok_;
}

static int
pm_search_ok(serve_store_t *s, int first, int limit, uint64_t min_dur)
{
    return pm_search_from_ok(s, first, first, limit, min_dur);
}

/* Are traces [1, PM_TRACES] found whole: their spans from `first` on? */
static int
pm_traces_ok(serve_store_t *s, int first)
{
    sp_buf_t  b;
    uint8_t   tid[16];
    int       t, i, n, ok_ = 1;

    sp_buf_init(&b);
    for (t = 1; t <= PM_TRACES && ok_; t++) {
        for (n = 0, i = first; i < PM_SPANS; i++) {
            n += 1 + i % PM_TRACES == t;
        }
        memset(tid, t, sizeof(tid));
        sp_buf_reset(&b);
        if (serve_store_trace(s, tid, &b) != (n ? 0 : 1)
            || pm_count_spans(str(&b)) != n)
        {
            printf("# trace %d: %d spans, not %d\n", t,
                   pm_count_spans(str(&b)), n);
            ok_ = 0;
        }
    }
    sp_buf_free(&b);
    return ok_;
}

static int64_t
pm_sql(const char *dir, const char *sql)
{
    char           path[300];
    sqlite3       *db;
    sqlite3_stmt  *st;
    int64_t        v = -1;

    snprintf(path, sizeof(path), "%s/spanprof.db", dir);
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            v = sqlite3_column_int64(st, 0);
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static serve_store_t *
pm_reopen(serve_store_t *s, const char *dir)
{
    char  err[256];

    serve_store_close(s);
    s = serve_store_open(dir, err, sizeof(err));
    if (s == NULL) {
        printf("# %s\n", err);
        return NULL;
    }
    serve_store_set_part_bits(s, 2);
    return s;
}

static void
test_store_part_map(void)
{
    char                    dir[] = "/tmp/spanprof-test-pmap-XXXXXX";
    char                    err[256], path[300];
    serve_store_t          *s;
    serve_ingest_result_t   r;
    uint8_t                *req, tid[16];
    size_t                  len;
    sp_buf_t                b;
    int                     i;

    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL, "store opened");
    if (s == NULL) {
        return;
    }
    serve_store_set_part_bits(s, 2);
    for (i = 0; i < PM_SPANS; i++) {
        req = span_request((uint8_t) (1 + i % PM_TRACES), (uint8_t) (i + 1),
                           1000000 + (uint64_t) i * 1000, pm_dur(i), NULL,
                           &len);
        if (serve_ingest_traces(s, req, len, 0, &r) != 0 || r.accepted != 1) {
            break;
        }
        free(req);
    }
    ok(i == PM_SPANS, "240 spans of 80 traces in 60 parts");
    ok(pm_traces_ok(s, 0), "each trace opened whole, its spans 3 parts");
    ok(pm_search_ok(s, 0, 10, 0), "slowest first: 10 over all parts");
    ok(pm_search_ok(s, 0, PM_TRACES, 0), "slowest first: all 80 in order");
    ok(pm_search_ok(s, 0, 5, 1000 + PM_SPANS / 2),
       "slowest first with a minimum duration");
    ok(pm_search_from_ok(s, 0, 150, 10, 0)
       && pm_search_from_ok(s, 0, 150, PM_TRACES, 1000 + PM_SPANS / 3),
       "slowest first of those started from a time");

    /* A summary stored for each full part (59 of 60 parts: the last is
     * not full yet), read back when reopened; the newest part's made from
     * its spans. */
    ok(serve_store_flush(s) == 0
       && pm_sql(dir, "SELECT count(*) FROM parts") == 59,
       "a summary stored for each full part");
    s = pm_reopen(s, dir);
    ok(s != NULL && pm_traces_ok(s, 0) && pm_search_ok(s, 0, 10, 0)
       && pm_search_from_ok(s, 0, 150, 10, 0),
       "reopened: traces whole, search in order");
    /* A summary lost (as when its group was): made again on open, and
     * stored. */
    serve_store_close(s);
    s = NULL;
    ok(pm_sql(dir, "DELETE FROM parts WHERE part IN (10, 30) RETURNING 1")
       == 1, "two summaries deleted");
    s = pm_reopen(s, dir);
    ok(s != NULL && pm_traces_ok(s, 0) && pm_search_ok(s, 0, 10, 0)
       && pm_search_from_ok(s, 0, 150, 10, 0)
       && pm_sql(dir, "SELECT count(*) FROM parts") == 59,
       "made again from their parts and stored: traces whole, search in"
       " order");

    /* Retention by age: spans 0..99 go, parts 0..24 with them. */
    ok(s != NULL && serve_store_retain(s, 1000000 + 100 * 1000 + 50, 50, 0)
       == 0, "retention: the first 100 spans deleted");
    ok(pm_sql(dir, "SELECT min(part) FROM parts") == 25
       && pm_sql(dir, "SELECT count(*) FROM parts") == 59 - 25
       && pm_sql(dir, "SELECT min(part) FROM spans") == 25,
       "and the summaries of the parts left empty");
    ok(s != NULL && pm_traces_ok(s, 100) && pm_search_ok(s, 100, 10, 0),
       "traces whole and search in order after retention");
    s = pm_reopen(s, dir);
    ok(s != NULL && pm_traces_ok(s, 100) && pm_search_ok(s, 100, 20, 0),
       "so again reopened");
    /* Everything deleted: no summary left; a new span found. */
    ok(s != NULL && serve_store_retain(s, INT64_MAX, 1, 0) == 0
       && pm_sql(dir, "SELECT count(*) FROM parts") == 0
       && pm_traces_ok(s, PM_SPANS), "all deleted, summaries too");
    req = span_request(7, 1, 5000000, 3, NULL, &len);
    ok(s != NULL && serve_ingest_traces(s, req, len, 0, &r) == 0, "a span");
    free(req);
    memset(tid, 7, sizeof(tid));
    sp_buf_init(&b);
    ok(s != NULL && serve_store_trace(s, tid, &b) == 0
       && pm_count_spans(str(&b)) == 1, "found");
    sp_buf_free(&b);
    serve_store_close(s);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    if (system(path) != 0) {
        printf("# cannot remove %s\n", dir);
    }
}

/* A batch failing in the store (here: another writer took the number the
 * store gives its second new attribute key) undoes its uncommitted group,
 * counted, and the store forgets the keys the group added: the next span
 * with such a key adds it again, and the database reads back. */
static void
test_store_failure(void)
{
    char                    dir[] = "/tmp/spanprof-test-fail-XXXXXX";
    char                    err[256], path[300];
    serve_store_t          *s;
    serve_ingest_result_t   r;
    serve_store_stats_t     st;
    sp_buf_t                b;
    sqlite3                *db;
    uint8_t                *req, tid[16];
    size_t                  len;

    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL, "store opened");
    if (s == NULL) {
        return;
    }
    sp_buf_init(&b);
    req = span_request(0x11, 1, 1000, 5, "k", &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1
       && serve_store_flush(s) == 0, "a span with key 1 committed");
    free(req);
    snprintf(path, sizeof(path), "%s/spanprof.db", dir);
    ok(sqlite3_open(path, &db) == SQLITE_OK
       && sqlite3_exec(db, "INSERT INTO attr_keys(id, key)"
                       " VALUES(3, 'intruder')", NULL, NULL, NULL)
          == SQLITE_OK, "another writer takes key number 3");
    sqlite3_close(db);
    req = span_request(0x22, 2, 2000, 5, "fresh.a", &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1,
       "a span with a new key (2), not committed yet");
    free(req);
    req = span_request(0x33, 3, 3000, 5, "fresh.b", &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 0
       && r.rejected == 1 && strstr(r.error, "cannot store") != NULL,
       "a span whose new key (3) cannot be stored: refused");
    free(req);
    serve_store_get_stats(s, &st);
    ok(st.batches_failed == 1 && st.rows_lost == 1,
       "the failed batch and the uncommitted one before it counted");
    memset(tid, 0x22, sizeof(tid));
    ok(serve_store_trace(s, tid, &b) == 1, "that one is gone with it");
    req = span_request(0x44, 4, 4000, 5, "fresh.a", &len);
    ok(serve_ingest_traces(s, req, len, 0, &r) == 0 && r.accepted == 1,
       "a span with the first new key again");
    free(req);
    /* Reopened: the keys as the database numbers them. */
    serve_store_close(s);
    s = serve_store_open(dir, err, sizeof(err));
    ok(s != NULL, "reopened");
    if (s == NULL) {
        printf("# %s\n", err);
    }
    memset(tid, 0x44, sizeof(tid));
    sp_buf_reset(&b);
    ok(s != NULL && serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"attributes\":{\"fresh.a\":\"v\"}") != NULL,
       "its attribute under its key");
    memset(tid, 0x11, sizeof(tid));
    sp_buf_reset(&b);
    ok(s != NULL && serve_store_trace(s, tid, &b) == 0
       && strstr(str(&b), "\"attributes\":{\"k\":\"v\"}") != NULL,
       "the committed span stays");
    serve_store_close(s);
    sp_buf_free(&b);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    if (system(path) != 0) {
        printf("# cannot remove %s\n", dir);
    }
}

/* A profile's received values in checked arithmetic: a period or values
 * that would overflow (or exceed a sample's bound) refuse the profile,
 * counted and said, nothing of it stored; the others are stored. */
static void
test_profile_bounds(void)
{
    static const char  *fmt =
        "{\"dictionary\":{\"stringTable\":[\"\",\"%s\",\"%s\",\"f\"],"
        "\"stackTable\":[{}]},"
        "\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":"
        "\"process.pid\",\"value\":{\"intValue\":\"42\"}}]},"
        "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,"
        "\"unitStrindex\":2},\"period\":\"%s\",\"timeUnixNano\":"
        "\"1700000000000000000\",\"samples\":[{\"stackIndex\":0,"
        "\"values\":[%s]}]}]}]}]}";
    static const struct {
        const char  *type, *unit, *period, *values;
        int          stored;
    } c[] = {
        { "samples", "count", "10000000", "\"3\"", 1 },
        /* 3 * 2^62: the overflow the fuzzer found */
        { "samples", "count", "4611686018427387904", "\"3\"", 0 },
        { "samples", "count", "-10000000", "\"3\"", 0 },
        { "samples", "count", "10000000", "\"-3\"", 0 },
        /* within int64, past a sample's bound (2^46 ns) */
        { "samples", "count", "1000000000000", "\"100\"", 0 },
        { "cpu", "nanoseconds", "10000000",
          "\"9223372036854775807\",\"9223372036854775807\"", 0 },
        { "cpu", "nanoseconds", "9223372036854775807",
          "\"70368744177664\"", 1 },
    };
    char                    dir[] = "/tmp/spanprof-test-serve-XXXXXX";
    char                    err[256], body[1024];
    serve_store_t          *s;
    serve_ingest_result_t   r;
    serve_store_stats_t     st;
    uint64_t                before;
    size_t                  i;
    int                     rc;

    if (mkdtemp(dir) == NULL || (s = serve_store_open(dir, err,
                                                      sizeof(err))) == NULL)
    {
        ok(0, "a store for the profile bounds");
        return;
    }
    for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        snprintf(body, sizeof(body), fmt, c[i].type, c[i].unit, c[i].period,
                 c[i].values);
        serve_store_get_stats(s, &st);
        before = st.samples_stored;
        rc = serve_ingest_profiles(s, (const uint8_t *) body, strlen(body),
                                   1, &r);
        serve_store_get_stats(s, &st);
        ok(rc == 0 && r.accepted == (uint64_t) c[i].stored
           && r.rejected == (uint64_t) !c[i].stored
           && st.samples_stored - before == (uint64_t) c[i].stored
           && (c[i].stored || strstr(r.error, "out of range") != NULL),
           "profile %s/%s period %s values %s: %s", c[i].type, c[i].unit,
           c[i].period, c[i].values,
           c[i].stored ? "stored" : "refused, counted, said");
        if (rc != 0 || r.error[0] != '\0') {
            printf("# rc %d accepted %llu rejected %llu: %s\n", rc,
                   (unsigned long long) r.accepted,
                   (unsigned long long) r.rejected, r.error);
        }
    }
    serve_store_close(s);
    snprintf(body, sizeof(body), "rm -rf %s", dir);
    if (system(body) != 0) {
        printf("# cannot remove %s\n", dir);
    }
}

int
main(void)
{
    test_json_out();
    test_wire();
    test_attrs_json();
    test_json_decode();
    test_flame();
    test_store();
    test_store_types();
    test_store_parts();
    test_store_part_map();
    test_store_failure();
    test_profile_bounds();
    return done_testing();
}
