#ifndef SP_TEST_PROFILE_FIXTURE_H
#define SP_TEST_PROFILE_FIXTURE_H

/* The hand-built profile both encoder tests use, and their helpers.
 * Before including: FIXTURE_TMPDIR (a mkdtemp template) and FIXTURE_STRTAB
 * (the indentation of string_table lines in protoc's output). */

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

static char tmpdir[] = FIXTURE_TMPDIR;

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
    while ((p = strstr(p, "\n" FIXTURE_STRTAB "string_table: \""))
           != NULL && nstrs < 64)
    {
        p += strlen("\n" FIXTURE_STRTAB "string_table: \"");
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

#endif
