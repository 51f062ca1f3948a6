/* sp_otlp_profiles_encode: a hand-built profile is encoded and decoded by
 * the real protobuf decoder (protoc --decode with our profiles_service.proto,
 * and with the upstream opentelemetry-proto v1.11.0 copy from
 * ../shared/proto-upstream when it is there, which must give identical
 * text: same field numbers and types); the text is checked entry by entry,
 * the dictionary as a whole. */

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/export/otlp_profiles.h"

#define UPSTREAM  "../shared/proto-upstream"
#define SERVICE   "opentelemetry/proto/collector/profiles/v1development/" \
                  "profiles_service.proto"
#define REQUEST   "opentelemetry.proto.collector.profiles.v1development." \
                  "ExportProfilesServiceRequest"
#define RESPONSE  "opentelemetry.proto.collector.profiles.v1development." \
                  "ExportProfilesServiceResponse"

#define FIXTURE_TMPDIR  "/tmp/spanprof-test-otlp-profiles-XXXXXX"
#define FIXTURE_STRTAB  "  "
#include "profile_fixture.h"

/* ---- tests ---------------------------------------------------------------- */

/* Bytes the way protoc's text format prints them (CEscape). */
static const char *
esc(const uint8_t *b, size_t n)
{
    static char  bufs[8][256];
    static int   k;
    char        *o = bufs[k++ % 8], *p = o;
    size_t       i;

    for (i = 0; i < n; i++) {
        switch (b[i]) {
        case '\n': p += sprintf(p, "\\n"); break;
        case '\r': p += sprintf(p, "\\r"); break;
        case '\t': p += sprintf(p, "\\t"); break;
        case '"':  p += sprintf(p, "\\\""); break;
        case '\'': p += sprintf(p, "\\'"); break;
        case '\\': p += sprintf(p, "\\\\"); break;
        default:
            p += b[i] >= 0x20 && b[i] < 0x7f ? sprintf(p, "%c", b[i])
                                             : sprintf(p, "\\%03o", b[i]);
        }
    }
    *p = '\0';
    return o;
}

/* Encodes prof, writes it to tmpdir/name and decodes it with -I include
 * (the proto path relative to it); NULL on any failure. */
static char *
encode_decode(sp_arena_t *a, const char *name, const char *include)
{
    sp_buf_t  out;
    char      path[256], cmd[1024];
    int       rc;

    sp_buf_init(&out);
    rc = sp_otlp_profiles_encode(a, &prof, &out);
    sp_arena_reset(a);
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    if (rc != 0 || write_file(path, out.data, out.len) != 0) {
        sp_buf_free(&out);
        return NULL;
    }
    sp_buf_free(&out);
    snprintf(cmd, sizeof(cmd), "protoc --decode=" REQUEST " -I %s %s/" SERVICE
             " < %s", include, include, path);
    return run(cmd);
}

static void
test_bad_profile(sp_arena_t *a)
{
    sp_buf_t  out;

    sp_buf_init(&out);
    sp_buf_append_str(&out, "keep");
    locations[2].function = 4;
    is_int(sp_otlp_profiles_encode(a, &prof, &out), -1,
           "a function index out of range is refused");
    locations[2].function = 2;
    samples[1].ts_off = 5;
    is_int(sp_otlp_profiles_encode(a, &prof, &out), -1,
           "timestamps out of range are refused");
    samples[1].ts_off = 3;
    locs[0] = -2;
    is_int(sp_otlp_profiles_encode(a, &prof, &out), -1,
           "a negative location index is refused");
    locs[0] = 4;
    is_int(out.len, 4, "out is left as it was");
    is_int(sp_otlp_profiles_encode(a, &prof, &out), 0,
           "the repaired profile encodes again");
    sp_buf_free(&out);
    sp_arena_reset(a);
}

/* An ExportProfilesServiceResponse in protoc's text format, encoded by
 * protoc --encode, read by sp_otlp_profiles_parse_response with a message
 * buffer of msglen bytes. */
static void
response(const char *textfmt, size_t msglen, int want_rc,
    int64_t want_rejected, const char *want_msg)
{
    char      in[256], out[256], cmd[1024], msg[80], body[4096];
    int64_t   rejected = -7;
    size_t    len = 0;
    FILE     *f;
    char     *r;
    int       rc;

    snprintf(in, sizeof(in), "%s/resp.txt", tmpdir);
    snprintf(out, sizeof(out), "%s/resp.pb", tmpdir);
    snprintf(cmd, sizeof(cmd), "protoc --encode=" RESPONSE " -I proto "
             "proto/" SERVICE " < %s > %s", in, out);
    if (write_file(in, textfmt, strlen(textfmt)) != 0
        || (r = run(cmd)) == NULL)
    {
        ok(0, "protoc --encode %s", textfmt);
        return;
    }
    free(r);
    if ((f = fopen(out, "rb")) != NULL) {
        len = fread(body, 1, sizeof(body), f);
        fclose(f);
    }
    memset(msg, 'x', sizeof(msg));
    rc = sp_otlp_profiles_parse_response((const uint8_t *) body, len,
                                         &rejected, msg, msglen);
    ok(rc == want_rc && rejected == want_rejected
       && (msglen == 0 || strcmp(msg, want_msg) == 0)
       && msg[msglen] == 'x',
       "response {%s} (%zu bytes), msglen %zu -> rc %d, rejected %lld, "
       "\"%s\"", textfmt, len, msglen, want_rc, (long long) want_rejected,
       want_msg);
    if (!(rc == want_rc && rejected == want_rejected)) {
        printf("#   got rc %d, rejected %lld\n", rc, (long long) rejected);
    }
}

/* Memory parts (objects and bytes of an ALLOC and an INUSE profile) in one
 * request: their sample and period types, one value per sample, no
 * timestamps. */
static void
test_memory_parts(sp_arena_t *a)
{
    static const struct {
        int          type;
        const char  *name, *unit;
    } k[] = {
        { SP_OTLP_PROFILE_ALLOC_OBJECTS, "alloc_objects", "count" },
        { SP_OTLP_PROFILE_ALLOC_SPACE, "alloc_space", "bytes" },
        { SP_OTLP_PROFILE_INUSE_OBJECTS, "inuse_objects", "count" },
        { SP_OTLP_PROFILE_INUSE_SPACE, "inuse_space", "bytes" },
    };
    sp_otlp_profile_part_t  parts[4];
    sp_profile_sample_t     ms[3];
    sp_profile_t            m = prof;
    sp_buf_t                out;
    char                    path[256], cmd[1024], *t, *p;
    size_t                  i, nprof = 0;

    memcpy(ms, samples, sizeof(ms));
    for (i = 0; i < 3; i++) {
        ms[i].cpu_ns = 40000 + (int64_t) i;     /* bytes */
    }
    m.samples = ms;
    m.period_ns = 524288;
    for (i = 0; i < 4; i++) {
        parts[i] = (sp_otlp_profile_part_t) { &m, k[i].type };
    }
    sp_buf_init(&out);
    is_int(sp_otlp_profiles_encode_n(a, parts, 4, &out), 0,
           "four memory parts encode");
    sp_arena_reset(a);
    snprintf(path, sizeof(path), "%s/memory.pb", tmpdir);
    ok(write_file(path, out.data, out.len) == 0, "written");
    sp_buf_free(&out);
    snprintf(cmd, sizeof(cmd), "protoc --decode=" REQUEST " -I proto proto/"
             SERVICE " < %s", path);
    t = run(cmd);
    ok(t != NULL, "protoc decodes it");
    if (t == NULL) {
        return;
    }
    for (p = t; (p = strstr(p, "    profiles {\n")) != NULL; p++) {
        nprof++;
    }
    is_int(nprof, 4, "four Profiles");
    for (i = 0; i < 4; i++) {
        ok(strstr(t, fmt("string_table: \"%s\"", k[i].name)) != NULL
           && strstr(t, fmt("string_table: \"%s\"", k[i].unit)) != NULL,
           "%s/%s in the string table", k[i].name, k[i].unit);
    }
    ok(strstr(t, "string_table: \"space\"") != NULL
       && strstr(t, "string_table: \"nanoseconds\"") == NULL,
       "period type space (no nanoseconds)");
    ok(strstr(t, "period: 524288\n") != NULL, "period: the interval");
    ok(strstr(t, fmt("values: %lld\n", (long long) ms[0].count)) != NULL
       && strstr(t, "values: 40000\n") != NULL
       && strstr(t, "values: 40002\n") != NULL, "values: objects, bytes");
    ok(strstr(t, "timestamps_unix_nano") == NULL, "no timestamps");
    free(t);
}

static void
test_parse_response(void)
{
    const char  *garbage = "\xff\xff\xff garbage";
    char         msg[16];
    int64_t      rejected = -7;

    response("partial_success { rejected_profiles: 1 "
             "error_message: \"bad sample\" }", 64, 0, 1, "bad sample");
    response("partial_success { rejected_profiles: 3 }", 64, 0, 3, "");
    /* The OTLP specification's warning: nothing rejected, a message. */
    response("partial_success { error_message: \"deprecated field\" }", 64,
             0, 0, "deprecated field");
    response("", 64, 0, 0, "");
    response("partial_success { rejected_profiles: 2 "
             "error_message: \"a long message\" }", 7, 0, 2, "a long");
    response("partial_success { rejected_profiles: 2 "
             "error_message: \"no room\" }", 0, 0, 2, "");
    response("partial_success { rejected_profiles: -4 }", 64, 0, -4, "");

    memset(msg, 'x', sizeof(msg));
    is_int(sp_otlp_profiles_parse_response((const uint8_t *) garbage,
               strlen(garbage), &rejected, msg, sizeof(msg)), -1,
           "a body that is no ExportProfilesServiceResponse: -1");
    ok(rejected == 0 && msg[0] == '\0', "with rejected 0 and no message");
}

/* The dictionary of the main profile, whole: every table starts with its
 * zero entry; strings once each; libc's location has no line. */
static const char *
want_dictionary(void)
{
    return fmt(
"dictionary {\n"
"  mapping_table {\n"
"  }\n"
"  mapping_table {\n"
"    memory_start: %llu\n"
"    memory_limit: %llu\n"
"    file_offset: 8192\n"
"    filename_strindex: 1\n"
"    attribute_indices: 1\n"
"  }\n"
"  mapping_table {\n"
"    memory_start: %llu\n"
"    memory_limit: %llu\n"
"    file_offset: 163840\n"
"    filename_strindex: 3\n"
"  }\n"
"  location_table {\n"
"  }\n"
"  location_table {\n"
"    mapping_index: 1\n"
"    address: %llu\n"
"    lines {\n"
"      function_index: 1\n"
"    }\n"
"  }\n"
"  location_table {\n"
"    mapping_index: 1\n"
"    address: %llu\n"
"    lines {\n"
"      function_index: 2\n"
"    }\n"
"  }\n"
"  location_table {\n"
"    mapping_index: 1\n"
"    address: %llu\n"
"    lines {\n"
"      function_index: 3\n"
"    }\n"
"  }\n"
"  location_table {\n"
"    mapping_index: 1\n"
"    address: %llu\n"
"    lines {\n"
"      function_index: 4\n"
"    }\n"
"  }\n"
"  location_table {\n"
"    mapping_index: 2\n"
"    address: %llu\n"
"  }\n"
"  function_table {\n"
"  }\n"
"  function_table {\n"
"    name_strindex: 4\n"
"    system_name_strindex: 4\n"
"    filename_strindex: 1\n"
"  }\n"
"  function_table {\n"
"    name_strindex: 5\n"
"    system_name_strindex: 5\n"
"    filename_strindex: 1\n"
"  }\n"
"  function_table {\n"
"    name_strindex: 6\n"
"    system_name_strindex: 6\n"
"    filename_strindex: 1\n"
"  }\n"
"  function_table {\n"
"    name_strindex: 7\n"
"    system_name_strindex: 7\n"
"    filename_strindex: 1\n"
"  }\n"
"  link_table {\n"
"    trace_id: \"%s\"\n"
"    span_id: \"%s\"\n"
"  }\n"
"  link_table {\n"
"    trace_id: \"%s\"\n"
"    span_id: \"%s\"\n"
"  }\n"
"  link_table {\n"
"    trace_id: \"%s\"\n"
"    span_id: \"%s\"\n"
"  }\n"
"  string_table: \"\"\n"
"  string_table: \"/usr/sbin/nginx\"\n"
"  string_table: \"process.executable.build_id.gnu\"\n"
"  string_table: \"/lib/x86_64-linux-gnu/libc.so.6\"\n"
"  string_table: \"main\"\n"
"  string_table: \"ngx_worker_process_cycle\"\n"
"  string_table: \"ngx_http_core_run_phases\"\n"
"  string_table: \"ngx_http_spanprof_handler\"\n"
"  string_table: \"cpu\"\n"
"  string_table: \"nanoseconds\"\n"
"  string_table: \"span.name\"\n"
"  attribute_table {\n"
"  }\n"
"  attribute_table {\n"
"    key_strindex: 2\n"
"    value {\n"
"      string_value: \"4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c\"\n"
"    }\n"
"  }\n"
"  attribute_table {\n"
"    key_strindex: 10\n"
"    value {\n"
"      string_value: \"GET /api/users\"\n"
"    }\n"
"  }\n"
"  stack_table {\n"
"  }\n"
"  stack_table {\n"
"    location_indices: 5\n"
"    location_indices: 4\n"
"    location_indices: 3\n"
"    location_indices: 2\n"
"    location_indices: 1\n"
"  }\n"
"  stack_table {\n"
"    location_indices: 3\n"
"    location_indices: 2\n"
"    location_indices: 1\n"
"  }\n"
"}\n",
        0x55d000000000ULL, 0x55d000100000ULL,
        0x7f1000000000ULL, 0x7f1000180000ULL,
        0x55d000001000ULL, 0x55d000002000ULL, 0x55d000003000ULL,
        0x55d000004000ULL, 0x7f1000012345ULL,
        esc((const uint8_t *) "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16),
        esc((const uint8_t *) "\0\0\0\0\0\0\0\0", 8),
        esc(trace1, 16), esc(span1, 8), esc(trace2, 16), esc(span2, 8));
}

int
main(void)
{
    sp_arena_t   a;
    char        *ours, *up, *again, *p;
    const char  *want;

    make_profile();
    sp_arena_init(&a, 4096);
    if (mkdtemp(tmpdir) == NULL) {
        ok(0, "mkdtemp");
        return done_testing();
    }

    ours = encode_decode(&a, "profiles.pb", "proto");
    ok(ours != NULL, "encoded, and protoc decodes it with our "
       "profiles_service.proto");
    if (ours == NULL) {
        ours = strdup("");
    }
    if (getenv("SP_TEST_VERBOSE") != NULL) {
        printf("%s", ours);
    }
    text = ours;
    parse_strings(ours);

    /* Resource and scope. */
    contains("resource_profiles {\n  resource {\n    attributes {\n"
             "      key: \"service.name\"\n      value {\n"
             "        string_value: \"checkout\"\n      }\n    }\n"
             "    attributes {\n      key: \"process.pid\"\n      value {\n"
             "        int_value: 4242\n      }\n    }\n  }\n",
             "one ResourceProfiles with the resource");
    contains("  scope_profiles {\n    scope {\n      name: \"spanprof\"\n",
             "one ScopeProfiles, scope spanprof");
    ok((p = strstr(ours, "resource_profiles {\n")) != NULL
       && strstr(p + 1, "resource_profiles {\n") == NULL,
       "only one ResourceProfiles");
    ok((p = strstr(ours, "    profiles {\n")) != NULL
       && strstr(p + 1, "    profiles {\n") == NULL, "only one Profile");

    /* Profile header. */
    contains(fmt("      sample_type {\n        type_strindex: %d\n"
                 "        unit_strindex: %d\n      }\n",
                 str_index("cpu"), str_index("nanoseconds")),
             "sample_type cpu/nanoseconds");
    contains(fmt("      period_type {\n        type_strindex: %d\n"
                 "        unit_strindex: %d\n      }\n",
                 str_index("cpu"), str_index("nanoseconds")),
             "period_type cpu/nanoseconds");
    contains("      time_unix_nano: 1700000000000000000\n"
             "      duration_nano: 10000000000\n",
             "time_unix_nano = start, duration_nano = 10 s");
    contains("      period: 10000000\n", "period: 10000000");
    {
        const char  *id = strstr(ours, "      profile_id: \"");
        const char  *zero = "\\000\\000\\000\\000\\000\\000\\000\\000"
                            "\\000\\000\\000\\000\\000\\000\\000\\000\"";

        ok(id != NULL && strncmp(id + 19, zero, strlen(zero)) != 0,
           "profile_id set, not all zero");
    }

    /* Samples: stack, link, attributes, values per timestamp (no per-signal
     * CPU times in the fixture: one period each, the overruns on the last). */
    contains("      samples {\n        stack_index: 1\n"
             "        attribute_indices: 2\n        link_index: 1\n"
             "        values: 10000000\n        values: 10000000\n"
             "        values: 10000000\n"
             "        timestamps_unix_nano: 1700000000100000000\n"
             "        timestamps_unix_nano: 1700000000110000000\n"
             "        timestamps_unix_nano: 1700000000120000000\n"
             "      }\n",
             "sample 0: stack A, link 1, span.name, 3 values for 3 "
             "timestamps");
    contains("      samples {\n        stack_index: 2\n"
             "        link_index: 2\n        values: 20000000\n"
             "        timestamps_unix_nano: 1700000000200000000\n"
             "      }\n",
             "sample 1: stack B, link 2, no attributes, the overrun on its "
             "only timestamp");
    contains("      samples {\n        stack_index: 1\n"
             "        values: 10000000\n"
             "        timestamps_unix_nano: 1700000000300000000\n"
             "      }\n",
             "sample 2: stack A again (deduplicated), no link");

    /* The dictionary, whole. */
    want = want_dictionary();
    p = strstr(ours, "\ndictionary {\n");
    ok(p != NULL && strcmp(p + 1, want) == 0,
       "dictionary: zero entries first, every table as expected");
    if (p == NULL || strcmp(p + 1, want) != 0) {
        printf("# want:\n%s# got:\n%s", want, p ? p + 1 : "(none)\n");
    }
    contains("  link_table {\n    trace_id: \"" "\\000\\000\\000\\000\\000"
             "\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\"\n"
             "    span_id: \"\\000\\000\\000\\000\\000\\000\\000\\000\"\n  }\n",
             "link_table[0] has zero ids of 16 and 8 bytes");
    is_int(str_index(""), 0, "string_table[0] is \"\"");

    /* The upstream v1.11.0 schema reads the same bytes the same way. */
    if (access(UPSTREAM "/" SERVICE, R_OK) == 0) {
        char  cmd[1024];

        snprintf(cmd, sizeof(cmd), "protoc --decode=" REQUEST " -I "
                 UPSTREAM " " UPSTREAM "/" SERVICE " < %s/profiles.pb",
                 tmpdir);
        up = run(cmd);
        ok(up != NULL && strcmp(up, ours) == 0,
           "upstream v1.11.0 profiles_service.proto decodes to identical "
           "text");
        free(up);
    } else {
        ok(1, "# skip no " UPSTREAM);
    }

    /* A second span sample of span 1 reuses link 1 and attribute 2. */
    samples[2].has_span = 1;
    memcpy(samples[2].trace_id, trace1, 16);
    memcpy(samples[2].span_id, span1, 8);
    samples[2].span_name = "GET /api/users";
    samples[2].count = 4;           /* more samples than timestamps */
    again = encode_decode(&a, "again.pb", "proto");
    text = again;
    ok(again != NULL, "encoded again with sample 2 in span 1");
    contains("      samples {\n        stack_index: 1\n"
             "        attribute_indices: 2\n        link_index: 1\n"
             "        values: 40000000\n"
             "        timestamps_unix_nano: 1700000000300000000\n"
             "      }\n", "sample 2: same link and attribute, 1 + 3 overruns");
    ok(again != NULL && strstr(again, "  link_table {") != NULL
       && strstr(again, "  attribute_table {") != NULL, "tables present");
    {
        int          nl = 0, na = 0;
        const char  *q;

        for (q = again; q && (q = strstr(q, "\n  link_table {")); q++) {
            nl++;
        }
        for (q = again; q && (q = strstr(q, "\n  attribute_table {")); q++) {
            na++;
        }
        is_int(nl, 3, "link_table: zero entry + 2 distinct links");
        is_int(na, 3, "attribute_table: zero entry + build id + span.name");
    }
    /* More timestamps than samples cannot be paired: values [count] only. */
    samples[0].count = 2;
    free(again);
    again = encode_decode(&a, "again2.pb", "proto");
    text = again;
    contains("      samples {\n        stack_index: 1\n"
             "        attribute_indices: 2\n        link_index: 1\n"
             "        values: 20000000\n      }\n",
             "3 timestamps for a count of 2: values [its CPU], no timestamps");
    samples[0].count = 3;
    samples[2].has_span = 0;
    samples[2].span_name = NULL;
    samples[2].count = 1;

    /* The rate changed within the interval: each value is its signal's
     * weight times the period it was taken at (ts_cpu_ns), not one period
     * for all; a sample without timestamps gets its cpu_ns. */
    {
        static int64_t  ts_cpu[] = { 10000000, 20000000, 40000000,
                                     30000000, 1000000 };

        samples[0].cpu_ns = 70000000;
        samples[2].ts_len = 0;
        samples[2].cpu_ns = 5000000;
        prof.ts_cpu_ns = ts_cpu;
        free(again);
        again = encode_decode(&a, "rates.pb", "proto");
        text = again;
        contains("      samples {\n        stack_index: 1\n"
                 "        attribute_indices: 2\n        link_index: 1\n"
                 "        values: 10000000\n        values: 20000000\n"
                 "        values: 40000000\n"
                 "        timestamps_unix_nano: 1700000000100000000\n"
                 "        timestamps_unix_nano: 1700000000110000000\n"
                 "        timestamps_unix_nano: 1700000000120000000\n"
                 "      }\n",
                 "per-signal CPU times: 10 ms, 20 ms (50 Hz), 40 ms "
                 "(25 Hz, or overruns)");
        contains("        link_index: 2\n        values: 30000000\n"
                 "        timestamps_unix_nano: 1700000000200000000\n",
                 "sample 1: its one signal's 30 ms");
        contains("      samples {\n        stack_index: 1\n"
                 "        values: 5000000\n      }\n",
                 "a sample without timestamps: values [cpu_ns]");
        prof.ts_cpu_ns = NULL;
        samples[0].cpu_ns = 0;
        samples[2].ts_len = 1;
        samples[2].cpu_ns = 0;
    }

    test_bad_profile(&a);
    test_parse_response();
    test_memory_parts(&a);

    {
        char  cmd[256];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
        if (system(cmd) != 0) {
            printf("# could not remove %s\n", tmpdir);
        }
    }
    free(ours);
    free(again);
    for (int i = 0; i < nstrs; i++) {
        free(strs[i]);
    }
    sp_arena_free(&a);
    return done_testing();
}
