/* sp_pprof_encode: a hand-built profile is encoded, gunzipped with zlib and
 * decoded by the real protobuf decoder (protoc --decode with our
 * proto/pprof/profile.proto, and with google's upstream copy from
 * ../shared/proto-upstream when it is there); the text is checked line by
 * line. When Go is installed, `go tool pprof` must read the .pb.gz too. */

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "tap.h"

#include "common/arena.h"
#include "common/buf.h"
#include "common/pprof.h"

#define UPSTREAM  "../shared/proto-upstream"

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

    memset(&prof, 0, sizeof(prof));
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

static char tmpdir[] = "/tmp/spanprof-test-pprof-XXXXXX";

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
    while ((p = strstr(p, "\nstring_table: \"")) != NULL && nstrs < 64) {
        p += strlen("\nstring_table: \"");
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
    static char  bufs[8][2048];
    static int   k;
    va_list      ap;
    char        *b = bufs[k++ % 8];

    va_start(ap, f);
    vsnprintf(b, sizeof(bufs[0]), f, ap);
    va_end(ap);
    return b;
}

/* ---- tests ---------------------------------------------------------------- */

static void
test_bad_profile(sp_arena_t *a)
{
    sp_buf_t  out;

    sp_buf_init(&out);
    sp_buf_append_str(&out, "keep");
    locations[1].mapping = 7;
    is_int(sp_pprof_encode(a, &prof, 1, &out), -1,
           "a mapping index out of range is refused");
    locations[1].mapping = 0;
    locs[6] = 5;
    is_int(sp_pprof_encode(a, &prof, 0, &out), -1,
           "a location index out of range is refused");
    locs[6] = 1;
    is_int(out.len, 4, "out is left as it was");
    sp_buf_free(&out);
    sp_arena_reset(a);
}

static void
test_empty(sp_arena_t *a)
{
    sp_profile_t  empty;
    sp_buf_t      out;

    memset(&empty, 0, sizeof(empty));
    empty.period_ns = 1000000;
    sp_buf_init(&out);
    is_int(sp_pprof_encode(a, &empty, 1, &out), 0, "an empty profile encodes");
    ok(out.len > 18 && out.data[0] == 0x1f && out.data[1] == 0x8b,
       "as gzip");
    sp_buf_free(&out);
    sp_arena_reset(a);
}

int
main(void)
{
    sp_arena_t   a;
    sp_buf_t     raw, gz;
    char         path_raw[128], path_gz[128], path_dec[128], cmd[1024];
    char        *ours = NULL, *up = NULL, *gotext = NULL;
    uint8_t      unz[65536];
    gzFile       g;
    int          n, iK, iV, iSamples, iCount, iCpu, iNs;

    make_profile();
    sp_arena_init(&a, 4096);
    sp_buf_init(&raw);
    sp_buf_init(&gz);

    if (mkdtemp(tmpdir) == NULL) {
        ok(0, "mkdtemp");
        return done_testing();
    }
    snprintf(path_raw, sizeof(path_raw), "%s/cpu.pb", tmpdir);
    snprintf(path_gz, sizeof(path_gz), "%s/cpu.pb.gz", tmpdir);
    snprintf(path_dec, sizeof(path_dec), "%s/cpu.gunzipped.pb", tmpdir);

    is_int(sp_pprof_encode(&a, &prof, 0, &raw), 0, "encode, plain");
    sp_arena_reset(&a);
    is_int(sp_pprof_encode(&a, &prof, 1, &gz), 0, "encode, gzip");
    sp_arena_reset(&a);
    ok(gz.len > 18 && gz.data[0] == 0x1f && gz.data[1] == 0x8b
       && gz.data[2] == 8, "gzip magic and deflate method");
    ok(write_file(path_raw, raw.data, raw.len) == 0
       && write_file(path_gz, gz.data, gz.len) == 0, "files written");

    /* gunzip with zlib's gzread: the same bytes as the plain encoding. */
    g = gzopen(path_gz, "rb");
    n = g != NULL ? gzread(g, unz, sizeof(unz)) : -1;
    ok(g != NULL && gzeof(g), "gzread reads the whole file");
    if (g != NULL) {
        gzclose(g);
    }
    ok(n > 0 && (size_t) n == raw.len && memcmp(unz, raw.data, n) == 0,
       "gunzipped == plain encoding (%d bytes)", n);
    ok(n > 0 && write_file(path_dec, unz, n) == 0, "gunzipped file written");

    /* The real decoder, our schema. */
    snprintf(cmd, sizeof(cmd),
             "protoc --decode=perftools.profiles.Profile -I proto "
             "proto/pprof/profile.proto < %s", path_dec);
    ours = run(cmd);
    ok(ours != NULL, "protoc decodes it with proto/pprof/profile.proto");
    text = ours;
    if (ours != NULL && getenv("SP_TEST_VERBOSE") != NULL) {
        printf("%s", ours);
    }
    if (ours == NULL) {
        ours = strdup("");
    }

    /* The string table, index 0 "", every name once. */
    parse_strings(ours);
    ok(strncmp(ours, "sample_type {", 13) == 0
       || strstr(ours, "\nstring_table: \"\"\n") != NULL,
       "decoded text looks like a Profile");
    ok(nstrs > 0 && strcmp(strs[0], "") == 0, "string_table[0] is \"\"");
    contains("string_table: \"\"\nstring_table: \"samples\"\n"
             "string_table: \"count\"\nstring_table: \"cpu\"\n"
             "string_table: \"nanoseconds\"\n",
             "string_table starts \"\", samples, count, cpu, nanoseconds");
    contains("string_table: \"trace_id\"\n", "string_table: \"trace_id\"");
    contains("string_table: \"span_id\"\n", "string_table: \"span_id\"");
    contains("string_table: \"span_name\"\n", "string_table: \"span_name\"");
    contains("string_table: \"" TRACE1_HEX "\"\n", "trace 1 hex in the table");
    contains("string_table: \"" SPAN1_HEX "\"\n", "span 1 hex in the table");
    contains("string_table: \"" TRACE2_HEX "\"\n", "trace 2 hex in the table");
    contains("string_table: \"" SPAN2_HEX "\"\n", "span 2 hex in the table");
    contains("string_table: \"GET /api/users\"\n", "span name in the table");
    contains("string_table: \"ngx_http_spanprof_handler\"\n",
             "function name in the table");
    {
        int  i, j, dup = 0;

        for (i = 0; i < nstrs; i++) {
            for (j = i + 1; j < nstrs; j++) {
                dup |= strcmp(strs[i], strs[j]) == 0;
            }
        }
        ok(!dup, "no string twice in string_table (%d strings)", nstrs);
        is_int(nstrs, 20, "20 strings");
    }

    /* Types, period, times. */
    iSamples = str_index("samples");
    iCount = str_index("count");
    iCpu = str_index("cpu");
    iNs = str_index("nanoseconds");
    contains(fmt("sample_type {\n  type: %d\n  unit: %d\n}\n"
                 "sample_type {\n  type: %d\n  unit: %d\n}\n",
                 iSamples, iCount, iCpu, iNs),
             "sample_type [samples/count, cpu/nanoseconds]");
    contains(fmt("period_type {\n  type: %d\n  unit: %d\n}\n", iCpu, iNs),
             "period_type cpu/nanoseconds");
    contains("\nperiod: 10000000\n", "period: 10000000");
    contains("\ntime_nanos: 1700000000000000000\n", "time_nanos = start");
    contains("\nduration_nanos: 10000000000\n", "duration_nanos = 10 s");

    /* Mappings, ids from 1; has_functions only where a location has one. */
    contains(fmt("mapping {\n  id: 1\n  memory_start: %llu\n"
                 "  memory_limit: %llu\n  file_offset: 8192\n"
                 "  filename: %d\n  build_id: %d\n  has_functions: true\n}\n",
                 0x55d000000000ULL, 0x55d000100000ULL,
                 str_index("/usr/sbin/nginx"),
                 str_index("4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c")),
             "mapping 1: nginx, build id, has_functions");
    contains(fmt("mapping {\n  id: 2\n  memory_start: %llu\n"
                 "  memory_limit: %llu\n  file_offset: 163840\n"
                 "  filename: %d\n}\n",
                 0x7f1000000000ULL, 0x7f1000180000ULL,
                 str_index("/lib/x86_64-linux-gnu/libc.so.6")),
             "mapping 2: libc, no build id, no functions");

    /* Locations, ids from 1, one Line when the function is known. */
    contains(fmt("location {\n  id: 1\n  mapping_id: 1\n  address: %llu\n"
                 "  line {\n    function_id: 1\n  }\n}\n",
                 0x55d000001000ULL), "location 1 -> function 1");
    contains(fmt("location {\n  id: 4\n  mapping_id: 1\n  address: %llu\n"
                 "  line {\n    function_id: 4\n  }\n}\n",
                 0x55d000004000ULL), "location 4 -> function 4");
    contains(fmt("location {\n  id: 5\n  mapping_id: 2\n  address: %llu\n}\n",
                 0x7f1000012345ULL), "location 5: libc, no line");

    /* Functions, ids from 1, name = system_name, filename = object. */
    iK = str_index("/usr/sbin/nginx");
    contains(fmt("function {\n  id: 1\n  name: %d\n  system_name: %d\n"
                 "  filename: %d\n}\n", str_index("main"), str_index("main"),
                 iK), "function 1: main");
    contains(fmt("function {\n  id: 4\n  name: %d\n  system_name: %d\n"
                 "  filename: %d\n}\n",
                 str_index("ngx_http_spanprof_handler"),
                 str_index("ngx_http_spanprof_handler"), iK),
             "function 4: ngx_http_spanprof_handler");
    ok(strstr(ours, "function {\n  id: 5\n") == NULL, "4 functions");

    /* Samples: stack leaf first, [count, count * period], span labels. */
    iK = str_index("trace_id");
    iV = str_index("span_id");
    contains(fmt("sample {\n  location_id: 5\n  location_id: 4\n"
                 "  location_id: 3\n  location_id: 2\n  location_id: 1\n"
                 "  value: 3\n  value: 30000000\n"
                 "  label {\n    key: %d\n    str: %d\n  }\n"
                 "  label {\n    key: %d\n    str: %d\n  }\n"
                 "  label {\n    key: %d\n    str: %d\n  }\n}\n",
                 iK, str_index(TRACE1_HEX), iV, str_index(SPAN1_HEX),
                 str_index("span_name"), str_index("GET /api/users")),
             "sample 0: stack A leaf first, 3 / 30 ms, trace_id, span_id, "
             "span_name");
    contains(fmt("sample {\n  location_id: 3\n  location_id: 2\n"
                 "  location_id: 1\n  value: 2\n  value: 20000000\n"
                 "  label {\n    key: %d\n    str: %d\n  }\n"
                 "  label {\n    key: %d\n    str: %d\n  }\n}\n",
                 iK, str_index(TRACE2_HEX), iV, str_index(SPAN2_HEX)),
             "sample 1: stack B, 2 / 20 ms, trace_id and span_id only");
    contains("sample {\n  location_id: 5\n  location_id: 4\n"
             "  location_id: 3\n  location_id: 2\n  location_id: 1\n"
             "  value: 1\n  value: 10000000\n}\n",
             "sample 2: stack A, 1 / 10 ms, no labels");

    /* The same bytes through google's own profile.proto. */
    if (access(UPSTREAM "/pprof/profile.proto", R_OK) == 0) {
        snprintf(cmd, sizeof(cmd),
                 "protoc --decode=perftools.profiles.Profile -I " UPSTREAM
                 " " UPSTREAM "/pprof/profile.proto < %s", path_dec);
        up = run(cmd);
        ok(up != NULL && strcmp(up, ours) == 0,
           "upstream pprof/profile.proto decodes to identical text");
    } else {
        ok(1, "# skip no " UPSTREAM);
    }

    /* go tool pprof reads the .pb.gz (only when Go is installed). */
    if (system("command -v go >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof(cmd),
                 "cd %s && TZ=UTC HOME=%s GOTOOLCHAIN=local GOFLAGS= "
                 "go tool pprof -raw %s 2>&1", tmpdir, tmpdir, path_gz);
        gotext = run(cmd);
        text = gotext;
        if (gotext != NULL && getenv("SP_TEST_VERBOSE") != NULL) {
            printf("%s", gotext);
        }
        ok(gotext != NULL, "go tool pprof -raw reads the .pb.gz");
        contains("ngx_http_spanprof_handler", "pprof: handler function");
        contains("ngx_http_core_run_phases", "pprof: phases function");
        contains("main", "pprof: main");
        contains("samples/count cpu/nanoseconds", "pprof: sample types");
        contains(TRACE1_HEX, "pprof: trace_id label");
        contains("span_name:[GET /api/users]", "pprof: span_name label");
        contains("span_id:[" SPAN2_HEX "] trace_id:[" TRACE2_HEX "]\n",
                 "pprof: sample 1 labels, no span_name");
        /* -raw renumbers the locations: 1 is the libc leaf, 5 main. */
        contains("3   30000000: 1 2 3 4 5 \n", "pprof: sample 0 leaf first");
        contains("     1: 0x7f1000012345 M=2 \n", "pprof: leaf in libc");
        contains("     5: 0x55d000001000 M=1 main /usr/sbin/nginx",
                 "pprof: root is main");
        contains("Period: 10000000\nTime: 2023-11-14 22:13:20 +0000 UTC\n"
                 "Duration: 10s\n", "pprof: period, time, duration");
        contains(" /usr/sbin/nginx 4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c "
                 "[FN]\n", "pprof: nginx mapping has functions");
    } else {
        ok(1, "# skip go is not installed");
    }

    test_bad_profile(&a);
    test_empty(&a);

    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) {
        printf("# could not remove %s\n", tmpdir);
    }
    free(ours);
    free(up);
    free(gotext);
    for (n = 0; n < nstrs; n++) {
        free(strs[n]);
    }
    sp_buf_free(&raw);
    sp_buf_free(&gz);
    sp_arena_free(&a);
    return done_testing();
}
