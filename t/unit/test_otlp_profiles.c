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

#include "common/arena.h"
#include "common/buf.h"
#include "common/otlp_profiles.h"

#define UPSTREAM  "../shared/proto-upstream"
#define SERVICE   "opentelemetry/proto/collector/profiles/v1development/" \
                  "profiles_service.proto"
#define REQUEST   "opentelemetry.proto.collector.profiles.v1development." \
                  "ExportProfilesServiceRequest"

/* ---- the profile ---------------------------------------------------------- */

static sp_profile_mapping_t mappings[] = {
    { "/usr/sbin/nginx", "4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c",
      0x55d000000000, 0x55d000100000, 0x2000 },
    { "/lib/x86_64-linux-gnu/libc.so.6", NULL,
      0x7f1000000000, 0x7f1000180000, 0x28000 },
};

static sp_profile_function_t functions[] = {
    { "main", "/usr/sbin/nginx" },
    { "ngx_worker_process_cycle", "/usr/sbin/nginx" },
    { "ngx_http_core_run_phases", "/usr/sbin/nginx" },
    { "ngx_http_spanprof_handler", "/usr/sbin/nginx" },
};

/* Location 4 is in libc with no symbol, so libc has no functions. */
static sp_profile_location_t locations[] = {
    { 0x55d000001000, 0, 0 },
    { 0x55d000002000, 0, 1 },
    { 0x55d000003000, 0, 2 },
    { 0x55d000004000, 0, 3 },
    { 0x7f1000012345, 1, -1 },
};

/* Leaf first: A = libc <- handler <- phases <- cycle <- main; B = phases
 * <- cycle <- main; then A again for the sample without a span. */
static int32_t locs[] = { 4, 3, 2, 1, 0,   2, 1, 0,   4, 3, 2, 1, 0 };

#define T0  1700000000000000000ULL

static uint64_t timestamps[] = {
    T0 + 100000000, T0 + 110000000, T0 + 120000000,     /* sample 0 */
    T0 + 200000000,                                     /* sample 1 */
    T0 + 300000000,                                     /* sample 2 */
};

static sp_profile_sample_t samples[3];
static sp_profile_t        prof;
static sp_resource_t       res;

static const uint8_t trace1[16] = {
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
    0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36 };
static const uint8_t span1[8] = {
    0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7 };
static const uint8_t trace2[16] = {
    0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
    0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c };
static const uint8_t span2[8] = {
    0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x10 };

#define TRACE1_HEX  "4bf92f3577b34da6a3ce929d0e0e4736"
#define SPAN1_HEX   "00f067aa0ba902b7"
#define TRACE2_HEX  "0af7651916cd43dd8448eb211c80319c"
#define SPAN2_HEX   "b7ad6b7169203310"

static void
make_profile(void)
{
    memset(samples, 0, sizeof(samples));
    /* A, 3 samples, in span 1 "GET /api/users". */
    samples[0].stack_off = 0;
    samples[0].stack_len = 5;
    samples[0].count = 3;
    samples[0].ts_off = 0;
    samples[0].ts_len = 3;
    samples[0].has_span = 1;
    memcpy(samples[0].trace_id, trace1, 16);
    memcpy(samples[0].span_id, span1, 8);
    samples[0].span_name = "GET /api/users";
    /* B, 2 samples (one timer overrun), in span 2, no name. */
    samples[1].stack_off = 5;
    samples[1].stack_len = 3;
    samples[1].count = 2;
    samples[1].ts_off = 3;
    samples[1].ts_len = 1;
    samples[1].has_span = 1;
    memcpy(samples[1].trace_id, trace2, 16);
    memcpy(samples[1].span_id, span2, 8);
    /* A, 1 sample, outside any request. */
    samples[2].stack_off = 8;
    samples[2].stack_len = 5;
    samples[2].count = 1;
    samples[2].ts_off = 4;
    samples[2].ts_len = 1;

    memset(&res, 0, sizeof(res));
    res.attrs[0].key = "service.name";
    res.attrs[0].str = "checkout";
    res.attrs[1].key = "process.pid";
    res.attrs[1].num = 4242;
    res.nattrs = 2;

    memset(&prof, 0, sizeof(prof));
    prof.resource = &res;
    prof.start_ns = T0;
    prof.end_ns = T0 + 10000000000ULL;
    prof.period_ns = 10000000;              /* 100 Hz */
    prof.samples = samples;
    prof.nsamples = 3;
    prof.locs = locs;
    prof.nlocs = sizeof(locs) / sizeof(locs[0]);
    prof.timestamps = timestamps;
    prof.ntimestamps = sizeof(timestamps) / sizeof(timestamps[0]);
    prof.locations = locations;
    prof.nlocations = 5;
    prof.functions = functions;
    prof.nfunctions = 4;
    prof.mappings = mappings;
    prof.nmappings = 2;
}

/* ---- helpers -------------------------------------------------------------- */

static char tmpdir[] = "/tmp/spanprof-test-otlp-profiles-XXXXXX";

static int
write_file(const char *path, const void *data, size_t len)
{
    FILE  *f = fopen(path, "wb");
    int    rc;

    if (f == NULL) {
        return -1;
    }
    rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* The whole stdout of a shell command (malloc'd), NULL unless it exits 0. */
static char *
run(const char *cmd)
{
    FILE    *f = popen(cmd, "r");
    char    *out = NULL;
    size_t   len = 0, cap = 0, n;

    if (f == NULL) {
        return NULL;
    }
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            out = realloc(out, cap);
            if (out == NULL) {
                pclose(f);
                return NULL;
            }
        }
        n = fread(out + len, 1, cap - len - 1, f);
        if (n == 0) {
            break;
        }
        len += n;
    }
    out[len] = '\0';
    if (pclose(f) != 0) {
        printf("# command failed: %s\n", cmd);
        free(out);
        return NULL;
    }
    return out;
}

/* The decoded string_table, in order. */
static char  *strs[64];
static int    nstrs;

static void
parse_strings(const char *text)
{
    const char  *p = text, *e;
    size_t       n;

    nstrs = 0;
    while ((p = strstr(p, "\n  string_table: \"")) != NULL && nstrs < 64) {
        p += strlen("\n  string_table: \"");
        e = strchr(p, '"');     /* our strings need no escapes */
        n = e ? (size_t) (e - p) : 0;
        strs[nstrs] = malloc(n + 1);
        memcpy(strs[nstrs], p, n);
        strs[nstrs++][n] = '\0';
    }
}

static int
str_index(const char *s)
{
    int  i;

    for (i = 0; i < nstrs; i++) {
        if (strcmp(strs[i], s) == 0) {
            return i;
        }
    }
    return -1;
}

static const char *text;

#define contains(needle, ...) do {                                           \
    const char *n_ = (needle);                                               \
    int f_ = text != NULL && strstr(text, n_) != NULL;                       \
    ok(f_, __VA_ARGS__);                                                     \
    if (!f_) printf("#   missing:\n%s\n", n_);                               \
} while (0)

/* snprintf into a rotating static buffer, for building expected text. */
static const char *
fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static const char *
fmt(const char *f, ...)
{
    static char  bufs[8][8192];
    static int   k;
    va_list      ap;
    char        *b = bufs[k++ % 8];

    va_start(ap, f);
    vsnprintf(b, sizeof(bufs[0]), f, ap);
    va_end(ap);
    return b;
}

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
"  string_table: \"samples\"\n"
"  string_table: \"count\"\n"
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
"    key_strindex: 12\n"
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
                 str_index("samples"), str_index("count")),
             "sample_type samples/count");
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

    /* Samples: stack, link, attributes, values per timestamp. */
    contains("      samples {\n        stack_index: 1\n"
             "        attribute_indices: 2\n        link_index: 1\n"
             "        values: 1\n        values: 1\n        values: 1\n"
             "        timestamps_unix_nano: 1700000000100000000\n"
             "        timestamps_unix_nano: 1700000000110000000\n"
             "        timestamps_unix_nano: 1700000000120000000\n"
             "      }\n",
             "sample 0: stack A, link 1, span.name, 3 values for 3 "
             "timestamps");
    contains("      samples {\n        stack_index: 2\n"
             "        link_index: 2\n        values: 2\n"
             "        timestamps_unix_nano: 1700000000200000000\n"
             "      }\n",
             "sample 1: stack B, link 2, no attributes, the overrun on its "
             "only timestamp");
    contains("      samples {\n        stack_index: 1\n        values: 1\n"
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
             "        values: 4\n"
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
             "        values: 2\n      }\n",
             "3 timestamps for a count of 2: values [2], no timestamps");
    samples[0].count = 3;
    samples[2].has_span = 0;
    samples[2].span_name = NULL;
    samples[2].count = 1;

    test_bad_profile(&a);

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
