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

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/export/pprof.h"
#include "common/profile/sampler.h"

#define UPSTREAM  "../shared/proto-upstream"

#define FIXTURE_TMPDIR  "/tmp/spanprof-test-pprof-XXXXXX"
#define FIXTURE_STRTAB  ""
#include "profile_fixture.h"

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

/* Pyroscope's span labels: span_id and span_name, no trace_id. */
static void
test_pyroscope_labels(sp_arena_t *a)
{
    sp_buf_t  out;
    char      path[160], cmd[512], *t;

    sp_buf_init(&out);
    is_int(sp_pprof_encode_opts(a, &prof, &(sp_pprof_opts_t) {
               .gzip = 0, .span_labels = SP_PPROF_SPAN_LABELS_PYROSCOPE },
               &out), 0, "encode with Pyroscope's span labels");
    sp_arena_reset(a);
    snprintf(path, sizeof(path), "%s/pyroscope.pb", tmpdir);
    ok(write_file(path, out.data, out.len) == 0, "written");
    snprintf(cmd, sizeof(cmd),
             "protoc --decode=perftools.profiles.Profile -I proto "
             "proto/pprof/profile.proto < %s", path);
    t = run(cmd);
    ok(t != NULL, "protoc decodes it");
    if (t == NULL) {
        t = strdup("");
    }
    ok(strstr(t, "string_table: \"span_id\"\n") != NULL
       && strstr(t, "string_table: \"" SPAN1_HEX "\"\n") != NULL
       && strstr(t, "string_table: \"" SPAN2_HEX "\"\n") != NULL,
       "span_id labels of both spans");
    ok(strstr(t, "string_table: \"span_name\"\n") != NULL
       && strstr(t, "string_table: \"GET /api/users\"\n") != NULL,
       "span_name label");
    ok(strstr(t, "trace_id") == NULL && strstr(t, TRACE1_HEX) == NULL
       && strstr(t, TRACE2_HEX) == NULL, "no trace_id label, no trace id");
    free(t);
    sp_buf_free(&out);
}

/* Memory profiles, as Go's heap profiles: [alloc_objects/count,
 * alloc_space/bytes] or [inuse_objects/count, inuse_space/bytes], period
 * type space/bytes, the sample's count and cpu_ns (bytes) as values. */
static void
test_memory_kinds(sp_arena_t *a)
{
    static const struct {
        int          kind;
        const char  *objects, *space, *name;
    } k[] = {
        { SP_SAMPLE_ALLOC, "alloc_objects", "alloc_space", "alloc" },
        { SP_SAMPLE_INUSE, "inuse_objects", "inuse_space", "inuse" },
    };
    sp_profile_t  m = prof;
    sp_buf_t      out;
    char          path[160], cmd[512], want[160], *t;
    size_t        i;

    sp_profile_sample_t  ms[3];

    /* objects in count, bytes in cpu_ns (profile.h) */
    memcpy(ms, samples, sizeof(ms));
    ms[0].cpu_ns = 3 * 4096;
    ms[1].cpu_ns = 2 * 65536;
    ms[2].cpu_ns = 1000000;
    m.samples = ms;
    m.period_ns = 524288;
    for (i = 0; i < 2; i++) {
        sp_buf_init(&out);
        is_int(sp_pprof_encode_opts(a, &m, &(sp_pprof_opts_t) {
                   .gzip = 0, .span_labels = SP_PPROF_SPAN_LABELS_TRACE,
                   .kind = k[i].kind }, &out), 0,
               "encode a %s profile", k[i].name);
        sp_arena_reset(a);
        snprintf(path, sizeof(path), "%s/%s.pb", tmpdir, k[i].name);
        ok(write_file(path, out.data, out.len) == 0, "written");
        snprintf(cmd, sizeof(cmd),
                 "protoc --decode=perftools.profiles.Profile -I proto "
                 "proto/pprof/profile.proto < %s", path);
        t = run(cmd);
        ok(t != NULL, "protoc decodes it");
        if (t == NULL) {
            t = strdup("");
        }
        while (nstrs > 0) {
            free(strs[--nstrs]);
        }
        parse_strings(t);
        ok(str_index(k[i].objects) > 0 && str_index(k[i].space) > 0
           && str_index("count") > 0 && str_index("bytes") > 0
           && str_index("space") > 0, "%s: its type and unit names",
           k[i].name);
        ok(str_index("cpu") < 0 && str_index("nanoseconds") < 0
           && str_index("samples") < 0, "no CPU type names");
        snprintf(want, sizeof(want), "sample_type {\n  type: %d\n  unit: %d\n}",
                 str_index(k[i].objects), str_index("count"));
        ok(strstr(t, want) != NULL, "sample_type %s/count", k[i].objects);
        snprintf(want, sizeof(want), "period_type {\n  type: %d\n  unit: %d\n}",
                 str_index("space"), str_index("bytes"));
        ok(strstr(t, want) != NULL, "period_type space/bytes");
        ok(strstr(t, "period: 524288\n") != NULL, "period: the interval");
        snprintf(want, sizeof(want), "value: %lld\n  value: %lld\n",
                 (long long) ms[0].count, (long long) ms[0].cpu_ns);
        ok(strstr(t, want) != NULL, "values: count (objects), cpu_ns (bytes)");
        while (nstrs > 0) {
            free(strs[--nstrs]);
        }
        free(t);
        sp_buf_free(&out);
    }
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
    test_pyroscope_labels(&a);
    test_memory_kinds(&a);

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
