/* Unit tests (TAP) of the CLI's parts: times, hash tables, the pprof
 * round trip through common/export/pprof.c, bad gzip input, folded stacks and the
 * SVG writer. The command-line behaviour is tested by t/80-cli.t. */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#include "common/base/arena.h"
#include "common/export/gzip.h"
#include "common/export/pprof.h"
#include "common/profile/profile.h"
#include "cli/spanprof.h"
#include "pprof/profile.pb-c.h"

#define S  1000000000LL

static void
test_times(void)
{
    int64_t      t, from, to, now = 1795318812 * S;
    const char  *err = NULL;
    char         buf[64];

    ok(cli_parse_time("1795318812", now, &t, &err) == 0 && t == 1795318812 * S,
       "unix seconds");
    ok(cli_parse_time("1795318812.25", now, &t, &err) == 0
       && t == 1795318812 * S + 250000000, "unix seconds with a fraction");
    ok(cli_parse_time("2026-11-22T03:00:00Z", now, &t, &err) == 0
       && t == 1795316400 * S, "RFC 3339, Z");
    ok(cli_parse_time("2026-11-22T04:00:00.5+01:00", now, &t, &err) == 0
       && t == 1795316400 * S + 500000000, "RFC 3339, offset and fraction");
    ok(cli_parse_time("2026-11-21 22:00:00-05:00", now, &t, &err) == 0
       && t == 1795316400 * S, "RFC 3339 with a space, negative offset");
    ok(cli_parse_time("now", now, &t, &err) == 0 && t == now, "now");
    ok(cli_parse_time("-5m", now, &t, &err) == 0 && t == now - 300 * S,
       "-5m");
    ok(cli_parse_time("-1h30m", now, &t, &err) == 0 && t == now - 5400 * S,
       "-1h30m");
    ok(cli_parse_time("-500ms", now, &t, &err) == 0 && t == now - S / 2,
       "-500ms");
    ok(cli_parse_time("-2d", now, &t, &err) == 0 && t == now - 172800 * S,
       "-2d");
    ok(cli_parse_time("+10s", now, &t, &err) == 0 && t == now + 10 * S,
       "+10s");
    ok(cli_parse_time("", now, &t, &err) != 0, "empty time refused");
    ok(cli_parse_time("yesterday", now, &t, &err) != 0 && err != NULL
       && strstr(err, "RFC 3339") != NULL, "a word refused, with the forms");
    ok(cli_parse_time("2026-13-01T00:00:00Z", now, &t, &err) != 0,
       "month 13 refused");
    ok(cli_parse_time("2026-02-30T00:00:00Z", now, &t, &err) != 0,
       "February 30 refused");
    ok(cli_parse_time("2026-11-22T03:00:00", now, &t, &err) != 0,
       "RFC 3339 without a zone refused");
    ok(cli_parse_time("-5x", now, &t, &err) != 0, "unknown unit refused");
    ok(cli_parse_time("-", now, &t, &err) != 0, "lone sign refused");
    ok(cli_parse_time("12.", now, &t, &err) != 0, "empty fraction refused");
    /* Past 2262 a time does not fit int64 nanoseconds (found by make fuzz:
     * signed overflow, a wrapped time accepted). */
    ok(cli_parse_time("17995318812.5", now, &t, &err) != 0,
       "unix seconds past 2262 refused");
    ok(cli_parse_time("9223372035.999999999", now, &t, &err) == 0
       && t == INT64_C(9223372035999999999), "the last unix second taken");
    ok(cli_parse_time("9999-12-31T23:59:59Z", now, &t, &err) != 0,
       "RFC 3339 past 2262 refused");
    ok(cli_parse_time("+106751d", now, &t, &err) != 0,
       "relative time past 2262 refused");
    ok(cli_parse_time("-106751d", -now, &t, &err) != 0,
       "relative time before 1678 refused");

    ok(cli_parse_range("1795316400..1795316460", now, &from, &to, &err) == 0
       && from == 1795316400 * S && to == 1795316460 * S, "range of seconds");
    ok(cli_parse_range("1795316400.5..1795316401", now, &from, &to, &err)
       == 0 && from == 1795316400 * S + S / 2, "range with a fraction");
    ok(cli_parse_range("-10m..", now, &from, &to, &err) == 0
       && from == now - 600 * S && to == now, "open range ends now");
    ok(cli_parse_range("-10m..-5m", now, &from, &to, &err) == 0
       && to == now - 300 * S, "relative range");
    ok(cli_parse_range("2026-11-22T03:00:00Z..2026-11-22T03:00:01.5Z", now,
                       &from, &to, &err) == 0
       && to - from == 3 * S / 2, "RFC 3339 range");
    ok(cli_parse_range("5..4", now, &from, &to, &err) != 0
       && strstr(err, "before") != NULL, "backwards range refused");
    ok(cli_parse_range("5", now, &from, &to, &err) != 0, "not a range");

    cli_format_time(1795318812 * S + 123456789, buf, sizeof(buf));
    is_str(buf, "2026-11-22T03:40:12.123Z", "format_time");
    cli_format_clock(1795318812 * S + 5000000, buf, sizeof(buf));
    is_str(buf, "03:40:12.005", "format_clock");
    cli_format_ms(231520000, buf, sizeof(buf));
    is_str(buf, "231.52 ms", "format_ms");
}

static void
test_tables(void)
{
    cli_strpool_t  p;
    cli_keymap_t   m;
    char           s[32];
    int            i, bad = 0;
    int32_t        key[2];

    cli_strpool_init(&p);
    for (i = 0; i < 5000; i++) {
        snprintf(s, sizeof(s), "name-%d", i);
        bad += cli_strpool_intern(&p, s, strlen(s)) != i;
    }
    for (i = 0; i < 5000; i++) {
        snprintf(s, sizeof(s), "name-%d", i);
        bad += cli_strpool_find(&p, s) != i;
        bad += cli_strpool_intern(&p, s, strlen(s)) != i;
    }
    is_int(bad, 0, "strpool: 5000 strings, dense ids, found again");
    is_int(cli_strpool_find(&p, "nope"), -1, "strpool: unknown string");
    is_int(cli_strpool_intern(&p, "name-12345", 6), 1,
           "strpool: intern by length finds the prefix");
    is_int(cli_strpool_intern(&p, "zzz-new", 3), 5000,
           "strpool: intern a new prefix by length");
    is_str(p.strs[5000], "zzz", "strpool: the prefix is its own string");
    cli_strpool_free(&p);

    cli_keymap_init(&m, sizeof(key));
    bad = 0;
    for (i = 0; i < 3000; i++) {
        key[0] = i;
        key[1] = -i;
        bad += cli_keymap_put(&m, key, i * 2) != i * 2;
    }
    for (i = 0; i < 3000; i++) {
        key[0] = i;
        key[1] = -i;
        bad += cli_keymap_get(&m, key) != i * 2;
        bad += cli_keymap_put(&m, key, 7) != i * 2;
    }
    key[0] = 1;
    key[1] = 1;
    is_int(bad, 0, "keymap: 3000 keys survive growth");
    is_int(cli_keymap_get(&m, key), -1, "keymap: unknown key");
    cli_keymap_free(&m);

    ok(cli_is_hex("00f067aa0ba902b7", 16), "hex id");
    ok(cli_is_hex("4BF9", 32), "hex prefix, upper case");
    ok(!cli_is_hex("", 32), "empty is not an id");
    ok(!cli_is_hex("00f067aa0ba902b7a", 16), "too long");
    ok(!cli_is_hex("xyz", 32), "not hex");
}

/* A profile in common/profile/profile.h's model: main -> handler -> {hot, cold},
 * one sample without a span, and a name with a ';'. */
static void
make_profile(sp_profile_t *p)
{
    static sp_profile_mapping_t   maps[] = {
        { "/usr/sbin/nginx", "abcd", 0x1000, 0x9000, 0 },
    };
    static sp_profile_function_t  fns[] = {
        { "main", "/usr/sbin/nginx" },
        { "handler", "/usr/sbin/nginx" },
        { "hot", "/usr/sbin/nginx" },
        { "cold", "/usr/sbin/nginx" },
        { "odd;name", "/usr/sbin/nginx" },
    };
    static sp_profile_location_t  locs[] = {
        { 0x1100, 0, 0 }, { 0x1200, 0, 1 }, { 0x1300, 0, 2 },
        { 0x1400, 0, 3 }, { 0x1500, 0, 4 }, { 0x1600, 0, -1 },
    };
    /* Leaf first. */
    static int32_t                stacks[] = {
        2, 1, 0,        /* hot <- handler <- main */
        3, 1, 0,        /* cold <- handler <- main */
        4, 0,           /* odd;name <- main */
        5, 0,           /* unsymbolized <- main */
    };
    static sp_profile_sample_t    samples[5];

    memset(samples, 0, sizeof(samples));
    samples[0].stack_off = 0;
    samples[0].stack_len = 3;
    samples[0].count = 40;
    samples[0].has_span = 1;
    memset(samples[0].trace_id, 0x11, SP_TRACE_ID_LEN);
    memset(samples[0].span_id, 0x22, SP_SPAN_ID_LEN);
    samples[0].span_name = "GET /r";
    samples[1] = samples[0];
    samples[1].stack_off = 3;
    samples[1].count = 2;
    samples[2] = samples[0];
    samples[2].stack_off = 0;
    samples[2].count = 3;
    memset(samples[2].span_id, 0x33, SP_SPAN_ID_LEN);
    samples[3].stack_off = 6;
    samples[3].stack_len = 2;
    samples[3].count = 5;
    samples[4].stack_off = 8;
    samples[4].stack_len = 2;
    samples[4].count = 1;

    memset(p, 0, sizeof(*p));
    p->start_ns = 1795318812 * S;
    p->end_ns = p->start_ns + 10 * S;
    p->period_ns = 10000000;
    p->samples = samples;
    p->nsamples = 5;
    p->locs = stacks;
    p->nlocs = sizeof(stacks) / sizeof(stacks[0]);
    p->locations = locs;
    p->nlocations = 6;
    p->functions = fns;
    p->nfunctions = 5;
    p->mappings = maps;
    p->nmappings = 1;
}

static char *
write_temp(const void *data, size_t len)
{
    static char  path[64];
    int          fd;

    strcpy(path, "/tmp/spanprof-test-XXXXXX");
    fd = mkstemp(path);
    if (fd < 0 || write(fd, data, len) != (ssize_t) len) {
        return NULL;
    }
    close(fd);
    return path;
}

static const char *
buf_str(sp_buf_t *b)
{
    sp_buf_append_char(b, '\0');
    b->len--;
    return (const char *) b->data;
}

static void
test_roundtrip(void)
{
    sp_profile_t   p;
    sp_arena_t     a;
    sp_buf_t       gz, out, raw;
    cli_model_t    m, m2;
    cli_tree_t     t;
    cli_svg_opts_t o;
    char          *path, err[256];
    size_t        *sel, n;
    int32_t        trace, span;
    const char    *svg;

    make_profile(&p);
    sp_arena_init(&a, 0);
    sp_buf_init(&gz);
    ok(sp_pprof_encode(&a, &p, 1, &gz) == 0, "encode with common/export/pprof.c");
    path = write_temp(gz.data, gz.len);

    cli_model_init(&m);
    ok(cli_profile_load_file(&m, path, err, sizeof(err)) == 0,
       "decode the gzip'd pprof");
    unlink(path);
    is_int(m.nsamples, 5, "5 samples");
    is_int(m.nfiles, 1, "one file");
    is_int(m.files[0].samples, 51, "file sample total");
    is_int(m.files[0].start_ns, 1795318812 * S, "file start from time_nanos");
    is_int(m.files[0].end_ns - m.files[0].start_ns, 10 * S,
           "file end from duration_nanos");
    is_int(m.files[0].period, 10000000, "period");
    trace = cli_strpool_find(&m.strs, "11111111111111111111111111111111");
    span = cli_strpool_find(&m.strs, "2222222222222222");
    ok(trace >= 0 && span >= 0, "label strings interned");

    n = cli_model_select(&m, trace, -1, &sel);
    is_int(n, 3, "3 samples of the trace");
    free(sel);
    n = cli_model_select(&m, trace, span, &sel);
    is_int(n, 2, "2 samples of the span");

    /* Folded stacks of the span, then of everything. */
    cli_tree_init(&t, &m.strs);
    cli_tree_add_samples(&t, &m, sel, n, 0);
    cli_tree_finish(&t);
    sp_buf_init(&out);
    cli_tree_folded(&t, &out);
    is_str(buf_str(&out), "main;handler;cold 2\nmain;handler;hot 40\n",
           "folded stacks of the span");
    cli_tree_free(&t);
    free(sel);

    n = cli_model_select(&m, -1, -1, &sel);
    cli_tree_init(&t, &m.strs);
    cli_tree_add_samples(&t, &m, sel, n, 0);
    cli_tree_finish(&t);
    sp_buf_reset(&out);
    cli_tree_folded(&t, &out);
    is_str(buf_str(&out),
           "main;handler;cold 2\nmain;handler;hot 43\nmain;nginx+0x600 1\n"
           "main;odd:name 5\n",
           "folded stacks of all samples (';' in a name becomes ':', "
           "unsymbolized frames are object+offset)");
    is_int(t.nodes[0].total[0], 51, "root total");

    /* SVG: well-formed enough to hold the names and the script. */
    memset(&o, 0, sizeof(o));
    o.title = "a <title> & more";
    o.subtitle = "sub";
    o.width = 1200;
    sp_buf_reset(&out);
    cli_tree_svg(&t, &o, &out);
    svg = buf_str(&out);
    ok(strncmp(svg, "<?xml", 5) == 0, "svg: XML declaration");
    ok(strstr(svg, "a &lt;title&gt; &amp; more") != NULL,
       "svg: title escaped");
    ok(strstr(svg, "<title>hot (43 samples, 84.31%)</title>") != NULL,
       "svg: frame tooltip with samples and share");
    ok(strstr(svg, "<title>all (51 samples, 100.00%)</title>") != NULL,
       "svg: root frame");
    ok(strstr(svg, "<![CDATA[") != NULL && strstr(svg, "function zoom")
       != NULL, "svg: inline script");
    ok(strstr(svg, "href") == NULL && strstr(svg, "url(") == NULL,
       "svg: no external references");
    cli_tree_free(&t);

    /* Diff of the same samples against themselves: no change anywhere. */
    cli_tree_init(&t, &m.strs);
    cli_tree_add_samples(&t, &m, sel, n, 0);
    cli_tree_add_samples(&t, &m, sel, n, 1);
    cli_tree_finish(&t);
    o.diff = 1;
    sp_buf_reset(&out);
    cli_tree_svg(&t, &o, &out);
    svg = buf_str(&out);
    ok(strstr(svg, "+0.00 points") != NULL && strstr(svg, "rgb(224,224,224)")
       != NULL, "diff of a profile with itself is grey");
    cli_tree_free(&t);

    /* Filtered pprof back through the encoder and the decoder. */
    sp_buf_init(&raw);
    cli_model_write_pprof(&m, sel, 1, &raw);
    cli_model_init(&m2);
    path = write_temp(raw.data, raw.len);
    ok(cli_profile_load_file(&m2, path, err, sizeof(err)) == 0,
       "filtered pprof decodes");
    is_int(m2.nsamples, 1, "filtered pprof: one sample");
    is_int(m2.samples[0].count, 40, "filtered pprof: its count");
    is_int(m2.nlocs, 3, "filtered pprof: only the locations it uses");
    is_str(m2.strs.strs[m2.samples[0].span_name], "GET /r",
           "filtered pprof: span_name label kept");
    unlink(path);
    free(sel);
    cli_model_free(&m2);
    sp_buf_free(&raw);

    /* Bad input: each a clear error, never a crash. */
    path = write_temp(gz.data, gz.len / 2);
    ok(cli_profile_load_file(&m, path, err, sizeof(err)) != 0
       && strstr(err, "truncated") != NULL, "truncated gzip: %s", err);
    unlink(path);
    path = write_temp("hello", 5);
    ok(cli_profile_load_file(&m, path, err, sizeof(err)) != 0
       && strstr(err, "not gzip") != NULL, "not gzip: %s", err);
    unlink(path);
    path = write_temp("", 0);
    ok(cli_profile_load_file(&m, path, err, sizeof(err)) != 0
       && strstr(err, "empty") != NULL, "empty file: %s", err);
    unlink(path);
    sp_buf_reset(&out);
    sp_gzip_append("\x0a\x05garbage", 9, &out);
    path = write_temp(out.data, out.len);
    ok(cli_profile_load_file(&m, path, err, sizeof(err)) != 0
       && strstr(err, "pprof") != NULL, "gzip of garbage: %s", err);
    unlink(path);
    /* A sample pointing at a location that does not exist. */
    sp_buf_reset(&out);
    /* sample { location_id: 7 value: 1 } */
    sp_gzip_append("\x12\x04\x08\x07\x10\x01", 6, &out);
    path = write_temp(out.data, out.len);
    ok(cli_profile_load_file(&m, path, err, sizeof(err)) != 0
       && strstr(err, "location 7") != NULL, "dangling location: %s", err);
    unlink(path);
    is_int(m.nsamples, 5, "failed loads leave the model's samples alone");

    cli_model_free(&m);
    sp_buf_free(&out);
    sp_buf_free(&gz);
    sp_arena_free(&a);
}

/* Loads the gzip of len bytes of pprof wire format, written to path (a
 * temporary file when NULL); 0 or -1 with err set. */
static int
load_wire(cli_model_t *m, const char *path, const void *pb, size_t len,
    char *err, size_t errlen)
{
    sp_buf_t  gz;
    int       rc;
    FILE     *f;

    sp_buf_init(&gz);
    sp_gzip_append(pb, len, &gz);
    if (path == NULL) {
        path = write_temp(gz.data, gz.len);
    } else if ((f = fopen(path, "wb")) != NULL) {
        fwrite(gz.data, 1, gz.len, f);
        fclose(f);
    }
    rc = cli_profile_load_file(m, path, err, errlen);
    unlink(path);
    sp_buf_free(&gz);
    return rc;
}

/* Hostile numbers in pprof and OTLP/JSON input: sums and products that
 * would overflow int64 are refused or saturated (UBSan is fatal here). */
static void
test_overflow(void)
{
    /* sample { value: INT64_MAX }, twice. */
    static const char  two_max[] =
        "\x12\x0a\x10\xff\xff\xff\xff\xff\xff\xff\xff\x7f"
        "\x12\x0a\x10\xff\xff\xff\xff\xff\xff\xff\xff\x7f";
    /* sample { value: 1 }; time_nanos INT64_MAX - 5, duration_nanos
     * 1000. */
    static const char  late[] =
        "\x12\x02\x10\x01"
        "\x48\xfa\xff\xff\xff\xff\xff\xff\xff\x7f"
        "\x50\xe8\x07";
    cli_model_t    m;
    sp_profile_t   p;
    sp_arena_t     a;
    sp_buf_t       raw;
    cli_spans_t    spans;
    Perftools__Profiles__Profile  *pb;
    char           err[256], dir[64], path[160];
    FILE          *f;

    cli_model_init(&m);
    ok(load_wire(&m, NULL, two_max, sizeof(two_max) - 1, err, sizeof(err))
       != 0 && strstr(err, "past 9223372036854775807") != NULL,
       "counts that sum past INT64_MAX in one file: %s", err);
    is_int(m.nsamples, 0, "nothing of that file is kept");
    ok(load_wire(&m, NULL, two_max, 12, err, sizeof(err)) == 0
       && m.total == INT64_MAX, "one sample of INT64_MAX loads");
    ok(load_wire(&m, NULL, late, 4, err, sizeof(err)) != 0
       && strstr(err, "sample 0's count 1 takes the total") != NULL,
       "a second file that takes the total past INT64_MAX: %s", err);
    is_int(m.nsamples, 1, "the first file's sample stays");
    cli_model_free(&m);

    cli_model_init(&m);
    ok(load_wire(&m, NULL, late, sizeof(late) - 1, err, sizeof(err)) == 0,
       "time_nanos + duration_nanos past INT64_MAX loads");
    ok(m.nfiles == 1 && m.files[0].start_ns == INT64_MAX - 5
       && m.files[0].end_ns == INT64_MAX, "its end saturates at INT64_MAX");
    /* No time_nanos: the start comes from the name, milliseconds. */
    strcpy(dir, "/tmp/spanprof-test-XXXXXX");
    ok(mkdtemp(dir) != NULL, "temporary directory");
    snprintf(path, sizeof(path), "%s/cpu-99999999999999999999-1.pb.gz", dir);
    ok(load_wire(&m, path, late, 4, err, sizeof(err)) == 0
       && m.files[1].start_ns == INT64_MAX && m.files[1].end_ns == INT64_MAX,
       "a start from a file name past INT64_MAX ns saturates");
    cli_model_free(&m);

    /* count * period: a count read from a hostile file, re-encoded. */
    make_profile(&p);
    p.samples[0].count = INT64_MAX / 2;
    sp_arena_init(&a, 0);
    sp_buf_init(&raw);
    ok(sp_pprof_encode(&a, &p, 0, &raw) == 0, "encode a huge count");
    pb = perftools__profiles__profile__unpack(NULL, raw.len, raw.data);
    ok(pb != NULL && pb->n_sample == 5 && pb->sample[0]->n_value == 2
       && pb->sample[0]->value[0] == INT64_MAX / 2
       && pb->sample[0]->value[1] == INT64_MAX
       && pb->sample[1]->value[1] == 2 * 10000000,
       "count * period saturates at INT64_MAX (other samples exact)");
    if (pb != NULL) {
        perftools__profiles__profile__free_unpacked(pb, NULL);
    }
    p.samples[0].count = INT64_MIN / 2;
    sp_buf_reset(&raw);
    ok(sp_pprof_encode(&a, &p, 0, &raw) == 0, "encode a huge negative count");
    pb = perftools__profiles__profile__unpack(NULL, raw.len, raw.data);
    ok(pb != NULL && pb->sample[0]->value[1] == INT64_MIN,
       "count * period saturates at INT64_MIN");
    if (pb != NULL) {
        perftools__profiles__profile__free_unpacked(pb, NULL);
    }
    sp_buf_free(&raw);
    sp_arena_free(&a);

    /* Span times: negative or beyond int64 (as a JSON real) are refused,
     * so that end - start never overflows. */
    snprintf(path, sizeof(path), "%s/traces.jsonl", dir);
    f = fopen(path, "w");
    ok(f != NULL, "write traces.jsonl");
    if (f != NULL) {
#define SPAN(start, end) \
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":" \
        "\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"b7ad6b7169203331\"," \
        "\"name\":\"x\",\"startTimeUnixNano\":" start "," \
        "\"endTimeUnixNano\":" end "}]}]}]}\n"
        fputs(SPAN("\"-9223372036854775808\"", "\"9223372036854775807\""), f);
        fputs(SPAN("\"-1\"", "\"5\""), f);
        fputs(SPAN("1e300", "2e300"), f);
        fputs(SPAN("\"1795316400000000000\"", "1.7953164e18"), f);
#undef SPAN
        fclose(f);
    }
    cli_spans_load(&spans, dir);
    is_int(spans.lines, 4, "4 lines");
    is_int(spans.bad_lines, 3, "negative and out-of-range times skipped");
    ok(spans.n == 1 && spans.spans[0].start_ns == 1795316400000000000LL,
       "the good span loads");
    cli_spans_free(&spans);
    unlink(path);
    rmdir(dir);
}

int
main(void)
{
    test_times();
    test_tables();
    test_roundtrip();
    test_overflow();
    return done_testing();
}
