/* spanprof serve's store and ingest, in one process, without HTTP:
 *   serve_bench DIR SPANS
 * 1. ingest: ExportTraceServiceRequests of 512 SERVER spans (10 attributes
 *    each, as the module sends) until SPANS are stored, then
 *    ExportProfilesServiceRequests of 2,000 labelled samples over 300 stacks
 *    for the last spans; prints spans/s and samples/s (one core: this
 *    process, one thread);
 * 2. size: the database's bytes per million spans;
 * 3. queries, on what is stored: open a trace (/api/traces/ID), a span's
 *    flame graph (/api/flame?trace=&span=), and the slowest-first search
 *    the UI opens with (and the same for one route, and for the last
 *    tenth of the time); median and worst of
 *    200 (20 for the searches) random picks, in ms of wall and of CPU
 *    time.
 * Output: "key value" lines for bench/serve to put in BENCHMARKS.md. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "cli/serve/flame_json.h"
#include "cli/serve/otlp_ingest.h"
#include "cli/serve/store.h"

#define BATCH  512

static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This process's CPU time: the rate on one core, whatever else the
 * machine runs meanwhile. */
static double
cpu_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
ids(uint64_t n, uint8_t tid[16], uint8_t sid[8])
{
    uint64_t  h = n * 0x9e3779b97f4a7c15ULL + 1;

    memset(tid, 0, 16);
    memcpy(tid, &h, 8);
    memcpy(tid + 8, &n, 8);
    h ^= h >> 31;
    memcpy(sid, &h, 8);
    sid[0] |= 1;
}

typedef Opentelemetry__Proto__Common__V1__KeyValue  kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue  any_t;

static kv_t  kvs[10];
static any_t vals[10];
static kv_t *kvp[10];

static void
set_kv(int i, const char *k, const char *sv, int64_t iv)
{
    opentelemetry__proto__common__v1__key_value__init(&kvs[i]);
    opentelemetry__proto__common__v1__any_value__init(&vals[i]);
    kvs[i].key = (char *) k;
    kvs[i].value = &vals[i];
    if (sv != NULL) {
        vals[i].value_case =
            OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        vals[i].string_value = (char *) sv;
    } else {
        vals[i].value_case =
            OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        vals[i].int_value = iv;
    }
    kvp[i] = &kvs[i];
}

static const char *routes[] = { "/api/items", "/api/cart", "/api/report",
                                "/api/user", "/static/", "/" };

/* A packed request of BATCH spans, numbered from first. */
static uint8_t *
trace_request(uint64_t first, int64_t t0, size_t *len)
{
    static Opentelemetry__Proto__Trace__V1__Span   spans[BATCH], *sp[BATCH];
    static uint8_t  tids[BATCH][16], sids[BATCH][8];
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest
        req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans   rs =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
    Opentelemetry__Proto__Trace__V1__ScopeSpans      ss =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT, *ssp = &ss;
    Opentelemetry__Proto__Resource__V1__Resource     res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    static kv_t    rkv;
    static any_t   rval;
    static kv_t   *rkvp = &rkv;
    uint8_t       *buf;
    int            i;

    opentelemetry__proto__common__v1__key_value__init(&rkv);
    opentelemetry__proto__common__v1__any_value__init(&rval);
    rkv.key = "service.name";
    rkv.value = &rval;
    rval.value_case =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    rval.string_value = "bench";
    res.n_attributes = 1;
    res.attributes = &rkvp;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;

    for (i = 0; i < BATCH; i++) {
        uint64_t  n = first + (uint64_t) i;
        int64_t   dur = 200000 + (int64_t) ((n * 7919) % 50000000);

        opentelemetry__proto__trace__v1__span__init(&spans[i]);
        ids(n, tids[i], sids[i]);
        spans[i].trace_id.data = tids[i];
        spans[i].trace_id.len = 16;
        spans[i].span_id.data = sids[i];
        spans[i].span_id.len = 8;
        spans[i].name = "GET /api/items";
        spans[i].kind =
            OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
        spans[i].start_time_unix_nano = (uint64_t) (t0 + (int64_t) n * 1000);
        spans[i].end_time_unix_nano = spans[i].start_time_unix_nano
                                      + (uint64_t) dur;
        spans[i].n_attributes = 10;
        spans[i].attributes = kvp;
        sp[i] = &spans[i];
    }
    ss.n_spans = BATCH;
    ss.spans = sp;
    *len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    buf = malloc(*len);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
    return buf;
}

typedef Opentelemetry__Proto__Profiles__V1development__Sample    pb_sample_t;

/* A packed profiles request: nsamples samples over nstacks stacks of depth
 * 20, labelled round-robin with the spans numbered from first. */
static uint8_t *
profile_request(uint64_t first, uint64_t nspans, int nsamples, int nstacks,
    int64_t t0, size_t *len)
{
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
        req = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary dict =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    Opentelemetry__Proto__Profiles__V1development__ResourceProfiles rp =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT, *rpp = &rp;
    Opentelemetry__Proto__Profiles__V1development__ScopeProfiles sp =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT, *spp = &sp;
    Opentelemetry__Proto__Profiles__V1development__Profile prof =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILE__INIT, *profp = &prof;
    Opentelemetry__Proto__Profiles__V1development__ValueType vt =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__VALUE_TYPE__INIT;
    int        nfn = 100, i, j;
    char     **strs = calloc((size_t) nfn + 3, sizeof(char *));
    Opentelemetry__Proto__Profiles__V1development__Function  *fn = calloc((size_t) nfn + 1, sizeof(*fn)), **fnp = calloc((size_t) nfn + 1, sizeof(*fnp));
    Opentelemetry__Proto__Profiles__V1development__Location  *loc = calloc((size_t) nfn + 1, sizeof(*loc)), **locp = calloc((size_t) nfn + 1, sizeof(*locp));
    Opentelemetry__Proto__Profiles__V1development__Line      *line = calloc((size_t) nfn + 1, sizeof(*line)), **linep = calloc((size_t) nfn + 1, sizeof(*linep));
    Opentelemetry__Proto__Profiles__V1development__Stack     *stk = calloc((size_t) nstacks + 1, sizeof(*stk)), **stkp = calloc((size_t) nstacks + 1, sizeof(*stkp));
    int32_t   *stkidx = calloc((size_t) (nstacks + 1) * 20, sizeof(int32_t));
    Opentelemetry__Proto__Profiles__V1development__Link      *lk = calloc((size_t) nsamples + 1, sizeof(*lk)), **lkp = calloc((size_t) nsamples + 1, sizeof(*lkp));
    uint8_t  (*lt)[16] = calloc((size_t) nsamples + 1, 16), (*ls)[8] = calloc((size_t) nsamples + 1, 8);
    pb_sample_t  *smp = calloc((size_t) nsamples, sizeof(*smp)), **smpp = calloc((size_t) nsamples, sizeof(*smpp));
    int64_t   *vals = calloc((size_t) nsamples, sizeof(int64_t));
    uint8_t   *buf;

    strs[0] = "";
    strs[1] = "cpu";
    strs[2] = "nanoseconds";
    for (i = 0; i < nfn; i++) {
        char  name[64];

        snprintf(name, sizeof(name), "bench_function_%03d", i);
        strs[3 + i] = strdup(name);
    }
    for (i = 0; i <= nfn; i++) {
        opentelemetry__proto__profiles__v1development__function__init(&fn[i]);
        opentelemetry__proto__profiles__v1development__location__init(&loc[i]);
        opentelemetry__proto__profiles__v1development__line__init(&line[i]);
        if (i > 0) {
            fn[i].name_strindex = 2 + i;
            line[i].function_index = i;
            linep[i] = &line[i];
            loc[i].n_lines = 1;
            loc[i].lines = &linep[i];
        }
        fnp[i] = &fn[i];
        locp[i] = &loc[i];
    }
    for (i = 0; i <= nstacks; i++) {
        opentelemetry__proto__profiles__v1development__stack__init(&stk[i]);
        if (i > 0) {
            for (j = 0; j < 20; j++) {
                stkidx[i * 20 + j] = 1 + (i * 31 + j * 7) % nfn;
            }
            stk[i].n_location_indices = 20;
            stk[i].location_indices = &stkidx[i * 20];
        }
        stkp[i] = &stk[i];
    }
    for (i = 0; i <= nsamples; i++) {
        opentelemetry__proto__profiles__v1development__link__init(&lk[i]);
        lk[i].trace_id.len = 16;
        lk[i].trace_id.data = lt[i];
        lk[i].span_id.len = 8;
        lk[i].span_id.data = ls[i];
        if (i > 0) {
            ids(first + (uint64_t) (i - 1) % nspans, lt[i], ls[i]);
        }
        lkp[i] = &lk[i];
    }
    for (i = 0; i < nsamples; i++) {
        opentelemetry__proto__profiles__v1development__sample__init(&smp[i]);
        smp[i].stack_index = 1 + i % nstacks;
        smp[i].link_index = 1 + i;
        vals[i] = 1000000;
        smp[i].n_values = 1;
        smp[i].values = &vals[i];
        smpp[i] = &smp[i];
    }
    dict.n_string_table = (size_t) nfn + 3;
    dict.string_table = strs;
    dict.n_function_table = (size_t) nfn + 1;
    dict.function_table = fnp;
    dict.n_location_table = (size_t) nfn + 1;
    dict.location_table = locp;
    dict.n_stack_table = (size_t) nstacks + 1;
    dict.stack_table = stkp;
    dict.n_link_table = (size_t) nsamples + 1;
    dict.link_table = lkp;
    vt.type_strindex = 1;
    vt.unit_strindex = 2;
    prof.sample_type = &vt;
    prof.period_type = &vt;
    prof.period = 1000000;
    prof.time_unix_nano = (uint64_t) t0;
    prof.duration_nano = 10000000000ULL;
    prof.n_samples = (size_t) nsamples;
    prof.samples = smpp;
    sp.n_profiles = 1;
    sp.profiles = &profp;
    rp.n_scope_profiles = 1;
    rp.scope_profiles = &spp;
    req.n_resource_profiles = 1;
    req.resource_profiles = &rpp;
    req.dictionary = &dict;
    *len = protobuf_c_message_get_packed_size(&req.base);
    buf = malloc(*len);
    protobuf_c_message_pack(&req.base, buf);
    for (i = 0; i < nfn; i++) {
        free(strs[3 + i]);
    }
    free(strs); free(fn); free(fnp); free(loc); free(locp); free(line);
    free(linep); free(stk); free(stkp); free(stkidx); free(lk); free(lkp);
    free(lt); free(ls); free(smp); free(smpp); free(vals);
    return buf;
}

static int
cmp_d(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}

static int
add(void *ud, const char *stack, int64_t count, int64_t cpu_ns, int in)
{
    (void) in;
    return serve_flame_add(ud, stack, cpu_ns, count, 0);
}

static void
report(const char *key, double *ms, int n)
{
    qsort(ms, (size_t) n, sizeof(double), cmp_d);
    printf("%s_median_ms %.3f\n%s_max_ms %.3f\n", key, ms[n / 2], key,
           ms[n - 1]);
}

int
main(int argc, char **argv)
{
    serve_store_t          *s;
    serve_ingest_result_t   r;
    char                    err[256];
    uint64_t                nspans, n, k;
    size_t                  len;
    uint8_t                *req, tid[16], sid[8];
    double                  t, c, t_spans, t_samples, c_spans, c_samples,
                            ms[200], cms[200];
    int64_t                 t0 = 1795000000000000000LL, bytes;
    int                     i, profiles = 20, per = 2000;
    uint64_t                step, step_n = 0;
    double                  step_c = 0, min_rate = 0, last_rate = 0;
    sp_buf_t                out;
    serve_trace_query_t     q;
    serve_sample_query_t    sq;

    if (argc != 3) {
        fprintf(stderr, "usage: serve_bench DIR SPANS\n");
        return 2;
    }
    nspans = strtoull(argv[2], NULL, 10) / BATCH * BATCH;
    step = nspans >= 10000000 ? 1000000 : nspans / 10 + 1;
    s = serve_store_open(argv[1], err, sizeof(err));
    if (s == NULL) {
        fprintf(stderr, "serve_bench: %s\n", err);
        return 1;
    }
    if (getenv("SERVE_BENCH_PART_BITS") != NULL) {
        /* Many parts in a small database: the queries' cost per part. */
        serve_store_set_part_bits(s, atoi(getenv("SERVE_BENCH_PART_BITS")));
    }
    set_kv(0, "http.request.method", "GET", 0);
    set_kv(1, "url.path", "/api/items/42", 0);
    set_kv(2, "url.scheme", "http", 0);
    set_kv(3, "http.route", routes[0], 0);
    set_kv(4, "http.response.status_code", NULL, 200);
    set_kv(5, "network.protocol.version", "1.1", 0);
    set_kv(6, "server.address", "127.0.0.1", 0);
    set_kv(7, "server.port", NULL, 8080);
    set_kv(8, "client.address", "127.0.0.1", 0);
    set_kv(9, "user_agent.original", "bench/1.0", 0);

    t_spans = c_spans = 0;
    for (n = 0; n < nspans; n += BATCH) {
        vals[3].string_value = (char *) routes[(n / BATCH) % 6];
        req = trace_request(n, t0, &len);
        t = now_s();
        c = cpu_s();
        if (serve_ingest_traces(s, req, len, 0, &r) != 0 || r.accepted
            != BATCH)
        {
            fprintf(stderr, "serve_bench: ingest failed: %s\n", r.error);
            return 1;
        }
        t_spans += now_s() - t;
        c_spans += cpu_s() - c;
        free(req);
        /* The rate of each million (of each tenth, below 10M): does it
         * hold as the database grows? */
        if ((n + BATCH) % step < BATCH || n + BATCH >= nspans) {
            double  rate = (double) (n + BATCH - step_n) / (c_spans - step_c);

            fprintf(stderr, "serve_bench: %" PRIu64 " spans, %.0f per CPU"
                    " second since %" PRIu64 "\n", n + BATCH, rate, step_n);
            if (step_n > 0 && (min_rate == 0 || rate < min_rate)) {
                min_rate = rate;
            }
            last_rate = rate;
            step_n = n + BATCH;
            step_c = c_spans;
        }
    }
    printf("spans %" PRIu64 "\nspans_per_s %.0f\nspans_per_cpu_s %.0f\n",
           nspans, nspans / t_spans, nspans / c_spans);
    /* The first step fills an empty database: the others say whether the
     * rate holds as it grows. */
    printf("spans_per_cpu_s_last_step %.0f\nspans_per_cpu_s_min_step %.0f\n",
           last_rate, min_rate > 0 ? min_rate : last_rate);
    bytes = serve_store_size(s);
    printf("db_bytes_spans_only %" PRId64 "\nbytes_per_million_spans %.0f\n",
           bytes, bytes / (nspans / 1e6));

    t_samples = c_samples = 0;
    for (i = 0; i < profiles; i++) {
        req = profile_request(nspans - (uint64_t) (i + 1) * 500, 500, per,
                              300, t0, &len);
        t = now_s();
        c = cpu_s();
        if (serve_ingest_profiles(s, req, len, 0, &r) != 0
            || r.accepted != 1)
        {
            fprintf(stderr, "serve_bench: profile ingest failed: %s\n",
                    r.error);
            return 1;
        }
        t_samples += now_s() - t;
        c_samples += cpu_s() - c;
        free(req);
    }
    printf("samples %d\nsamples_per_s %.0f\nsamples_per_cpu_s %.0f\n",
           profiles * per, profiles * per / t_samples,
           profiles * per / c_samples);

    /* Queries on random traces; the spans with samples for the flame. */
    srand(1);
    sp_buf_init(&out);
    for (i = 0; i < 200; i++) {
        k = ((uint64_t) rand() * 7919) % nspans;
        ids(k, tid, sid);
        sp_buf_reset(&out);
        t = now_s();
        c = cpu_s();
        if (serve_store_trace(s, tid, &out) != 0) {
            fprintf(stderr, "serve_bench: trace %" PRIu64 " missing\n", k);
            return 1;
        }
        ms[i] = (now_s() - t) * 1e3;
        cms[i] = (cpu_s() - c) * 1e3;
    }
    report("open_trace", ms, 200);
    report("open_trace_cpu", cms, 200);
    for (i = 0; i < 200; i++) {
        serve_flame_t  *f = serve_flame_new();

        k = nspans - 1 - ((uint64_t) rand() % ((uint64_t) profiles * 500));
        ids(k, tid, sid);
        memset(&sq, 0, sizeof(sq));
        sq.trace_id = tid;
        sq.span_id = sid;
        sp_buf_reset(&out);
        t = now_s();
        if (serve_store_stacks(s, &sq, add, f) != 0
            || serve_flame_json(f, "all", 0, &out) != 0)
        {
            fprintf(stderr, "serve_bench: flame failed\n");
            return 1;
        }
        ms[i] = (now_s() - t) * 1e3;
        serve_flame_free(f);
    }
    report("span_flame", ms, 200);
    for (i = 0; i < 20; i++) {
        memset(&q, 0, sizeof(q));
        q.limit = 20;
        q.slowest = 1;
        q.to_ns = INT64_MAX;
        sp_buf_reset(&out);
        t = now_s();
        c = cpu_s();
        if (serve_store_traces(s, &q, &out) != 0) {
            fprintf(stderr, "serve_bench: search failed\n");
            return 1;
        }
        ms[i] = (now_s() - t) * 1e3;
        cms[i] = (cpu_s() - c) * 1e3;
    }
    report("search_slowest", ms, 20);
    report("search_slowest_cpu", cms, 20);
    /* The same for one route of the six: the parts' longest spans are of
     * any route, so more parts are read. */
    for (i = 0; i < 20; i++) {
        memset(&q, 0, sizeof(q));
        q.limit = 20;
        q.slowest = 1;
        q.to_ns = INT64_MAX;
        q.route = routes[i % 6];
        sp_buf_reset(&out);
        t = now_s();
        c = cpu_s();
        if (serve_store_traces(s, &q, &out) != 0) {
            fprintf(stderr, "serve_bench: search failed\n");
            return 1;
        }
        ms[i] = (now_s() - t) * 1e3;
        cms[i] = (cpu_s() - c) * 1e3;
    }
    report("search_route", ms, 20);
    report("search_route_cpu", cms, 20);
    /* And of the last tenth of the time: the parts started before it are
     * not read. */
    for (i = 0; i < 20; i++) {
        memset(&q, 0, sizeof(q));
        q.limit = 20;
        q.slowest = 1;
        q.from_ns = t0 + (int64_t) (nspans / 10 * 9) * 1000;
        q.to_ns = INT64_MAX;
        sp_buf_reset(&out);
        t = now_s();
        c = cpu_s();
        if (serve_store_traces(s, &q, &out) != 0) {
            fprintf(stderr, "serve_bench: search failed\n");
            return 1;
        }
        ms[i] = (now_s() - t) * 1e3;
        cms[i] = (cpu_s() - c) * 1e3;
    }
    report("search_recent", ms, 20);
    report("search_recent_cpu", cms, 20);
    printf("db_bytes %" PRId64 "\n", serve_store_size(s));
    sp_buf_free(&out);
    serve_store_close(s);
    return 0;
}
