#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/base/clock.h"
#include "common/profile/alloc_hooks.h"
#include "common/profile/alloc_sampler.h"
#include "common/profile/keep_rules.h"
#include "common/profile/loader_snapshot.h"
#include "common/export/gzip.h"
#include "common/export/otlp_http_json.h"
#include "common/export/otlp_profiles.h"
#include "common/export/pprof.h"
#include "common/profile/profile_builder.h"
#include "common/profile/profile_export.h"
#include "common/profile/profile_truncate.h"
#include "common/profile/pyroscope_ingest.h"
#include "common/profile/sampler.h"
#include "common/profile/symbol_redact.h"
#include "common/profile/symbols.h"

#define MS  1000000ull
#define ERROR_LOG_EVERY_MS  5000

/* The profile types an interval may export, each its own Pyroscope ingest
 * and its own drop counter (memory: ALLOC and INUSE). */
enum {
    TYPE_CPU = 0,
    TYPE_WALL,
    TYPE_ALLOC,
    TYPE_INUSE,
    NTYPES
};

static const char *const  type_names[NTYPES] = {
    "cpu", "wall", "alloc", "inuse"
};

/* This process's profiles not delivered, by type (the status API's
 * profiles_dropped_*). */
static _Atomic uint64_t  dropped[NTYPES];

/* One Pyroscope ingest waiting or being sent: a profile type's pprof in
 * its form, and its URL. An interval's are sent one after the other on the
 * one connection. */
typedef struct {
    int       type;
    char     *url;
    sp_buf_t  form;
} pyroscope_post_t;

struct sp_profile_export {
    sp_profile_export_conf_t  conf;
    sp_profile_builder_t     *builder;
    sp_symbolizer_t          *symbolizer;
    sp_symbol_redact_t       *redact;        /* NULL: off */
    sp_http_client_t         *otlp;
    sp_http_client_t         *pyroscope;
    sp_arena_t                arena;
    sp_arena_t                trunc_arena;   /* a truncated copy */
    sp_buf_t                  otlp_body;     /* each kept until sent */
    sp_buf_t                  body;          /* pprof, gzip'd */
    sp_buf_t                  raw;           /* pprof before gzip */
    pyroscope_post_t          pyro[NTYPES];
    size_t                    pyro_n;        /* queued this interval */
    size_t                    pyro_next;     /* being sent */
    uint64_t                  pyro_timeout_ms;
    unsigned                  otlp_types;    /* 1 << TYPE_x in otlp_body */
    uint64_t                  start_ns;      /* wall clock */
    uint64_t                  due;           /* monotonic */
    uint64_t                  last_error_log;
    uint64_t                  exported, failed, samples;
    uint64_t                  rejected;      /* by a partial success */
    uint64_t                  builder_dropped;   /* of the profiles reset */
    uint64_t                  bytes_exported, bytes_failed;
};

sp_profile_export_t *
sp_profile_export_new(const sp_profile_export_conf_t *c)
{
    sp_profile_export_t  *pe = calloc(1, sizeof(*pe));
    const char           *why = NULL;
    size_t                i;

    if (pe == NULL) {
        return NULL;
    }
    pe->conf = *c;
    if (pe->conf.max_size == 0) {
        pe->conf.max_size = SP_PROFILE_MAX_SIZE_DEFAULT;
    }
    if (pe->conf.max_samples == 0) {
        pe->conf.max_samples = SP_PROFILE_MAX_SAMPLES_DEFAULT;
    }
    pe->builder = sp_profile_builder_new();
    pe->symbolizer = sp_symbolizer_new(pe->conf.symbol_files);
    pe->redact = sp_symbol_redact_new(c->redact, &why);
    pe->conf.redact = NULL;
    sp_buf_init(&pe->otlp_body);
    sp_buf_init(&pe->body);
    sp_buf_init(&pe->raw);
    for (i = 0; i < NTYPES; i++) {
        sp_buf_init(&pe->pyro[i].form);
    }
    if (c->otlp_url != NULL) {
        /* A connection of its own, so a profile never waits behind spans. */
        pe->otlp = sp_http_client_new(c->loop, c->otlp_http);
    }
    if (c->pyroscope_url != NULL) {
        /* The collector's headers and gzip setting are not Pyroscope's. */
        pe->pyroscope = sp_http_client_new(c->loop, &(sp_http_client_conf_t) {
            .connect_timeout_ms = 2000,
        });
    }
    if (pe->builder == NULL || pe->symbolizer == NULL || why != NULL
        || (c->otlp_url != NULL && pe->otlp == NULL)
        || (c->pyroscope_url != NULL && pe->pyroscope == NULL))
    {
        sp_profile_export_free(pe);
        return NULL;
    }
    sp_arena_init(&pe->arena, 256 * 1024);
    sp_arena_init(&pe->trunc_arena, 64 * 1024);
    pe->start_ns = sp_now_ns();
    pe->due = sp_mono_ns() + c->interval_ms * MS;
    return pe;
}

void
sp_profile_export_free(sp_profile_export_t *pe)
{
    size_t  i;

    if (pe == NULL) {
        return;
    }
    sp_profile_builder_free(pe->builder);
    sp_symbolizer_free(pe->symbolizer);
    sp_symbol_redact_free(pe->redact);
    sp_http_client_free(pe->otlp);
    sp_http_client_free(pe->pyroscope);
    /* Ingests abandoned at the exporter's deadline: not delivered. */
    for (i = pe->pyro_next; i < pe->pyro_n; i++) {
        dropped[pe->pyro[i].type]++;
    }
    sp_arena_free(&pe->arena);
    sp_arena_free(&pe->trunc_arena);
    sp_buf_free(&pe->otlp_body);
    sp_buf_free(&pe->body);
    sp_buf_free(&pe->raw);
    for (i = 0; i < NTYPES; i++) {
        sp_buf_free(&pe->pyro[i].form);
        free(pe->pyro[i].url);
    }
    free(pe);
}

static void
drain_ring(sp_profile_export_t *pe)
{
    sp_raw_sample_t  *s[256];
    size_t            n, i;

    while ((n = sp_sampler_peek(s, 256)) > 0) {
        for (i = 0; i < n; i++) {
            sp_profile_builder_add(pe->builder, s[i]);
        }
        sp_sampler_release(n);
    }
}

/* A memory sample as the builder takes it (sampler.h): weight the objects
 * it stands for, off_cpu_ns its bytes. */
typedef struct {
    /* Room for the sample and its frames: a struct with a flexible array
     * may not be a member of another (clang's -Wgnu-...-not-at-end). */
    _Alignas(sp_raw_sample_t) unsigned char
        bytes[sizeof(sp_raw_sample_t) + SP_ALLOC_DEPTH_MAX * sizeof(uintptr_t)];
} memory_sample_t;

#define MEMORY_SAMPLE(m)  ((sp_raw_sample_t *) (void *) (m)->bytes)

/* Objects are counted in whole samples: rounded up or down at random in
 * proportion to the fraction, so that the sums stay unbiased (rounding
 * 1.58, an allocation as large as the interval, to 2 would count 26% too
 * many). Exporter thread only. */
static uint32_t
round_objects(double objects)
{
    static uint64_t  x = 0x9e3779b97f4a7c15ull;
    double           whole, frac;

    if (objects >= (double) UINT32_MAX) {
        return UINT32_MAX;
    }
    whole = (double) (uint32_t) objects;
    frac = objects - whole;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if ((double) (x >> 11) * 0x1.0p-53 < frac) {
        whole += 1;
    }
    return whole < 1 ? 1 : (uint32_t) whole;
}

static void
memory_sample(memory_sample_t *m, int kind, uint32_t stack_id,
    uint64_t size, uint64_t mean, uint64_t time_ns)
{
    const uintptr_t  *frames;
    unsigned          n;
    double            objects, bytes;

    n = sp_alloc_sampler_stack(stack_id, &frames);
    if (n > SP_ALLOC_DEPTH_MAX) {
        n = SP_ALLOC_DEPTH_MAX;
    }
    sp_alloc_weight(size, mean, &objects, &bytes);
    MEMORY_SAMPLE(m)->kind = (uint8_t) kind;
    MEMORY_SAMPLE(m)->time_ns = time_ns;
    MEMORY_SAMPLE(m)->weight = round_objects(objects);
    MEMORY_SAMPLE(m)->period_ns = 0;
    MEMORY_SAMPLE(m)->off_cpu_ns = bytes >= (double) INT64_MAX ? (uint64_t) INT64_MAX
                                                  : (uint64_t) (bytes + 0.5);
    MEMORY_SAMPLE(m)->nframes = (uint16_t) n;
    if (n > 0) {
        memcpy(MEMORY_SAMPLE(m)->frames, frames, n * sizeof(uintptr_t));
    }
}

static void
drain_alloc_ring(sp_profile_export_t *pe)
{
    sp_alloc_sample_t  *a[256];
    memory_sample_t     m;
    size_t              n, i;

    if (!sp_alloc_sampler_ready()) {
        return;
    }
    while ((n = sp_alloc_sampler_peek(a, 256)) > 0) {
        for (i = 0; i < n; i++) {
            memset(MEMORY_SAMPLE(&m), 0, sizeof(sp_raw_sample_t));
            memory_sample(&m, SP_SAMPLE_ALLOC, a[i]->stack_id, a[i]->size,
                          a[i]->mean, a[i]->time_ns);
            MEMORY_SAMPLE(&m)->has_ctx = a[i]->has_ctx;
            MEMORY_SAMPLE(&m)->keep_pending = a[i]->keep_pending;
            if (a[i]->has_ctx) {
                memcpy(MEMORY_SAMPLE(&m)->trace_id, a[i]->trace_id, SP_TRACE_ID_LEN);
                memcpy(MEMORY_SAMPLE(&m)->span_id, a[i]->span_id, SP_SPAN_ID_LEN);
                MEMORY_SAMPLE(&m)->attrs_len = a[i]->attrs_len;
                memcpy(MEMORY_SAMPLE(&m)->attrs, a[i]->attrs, sizeof(MEMORY_SAMPLE(&m)->attrs));
            }
            sp_profile_builder_add(pe->builder, MEMORY_SAMPLE(&m));
        }
        sp_alloc_sampler_release(n);
    }
}

typedef struct {
    sp_profile_export_t  *pe;
    uint64_t              now;
} inuse_walk_t;

static void
add_live(uintptr_t addr, const sp_alloc_live_t *v, void *arg)
{
    inuse_walk_t     *w = arg;
    memory_sample_t   m;

    (void) addr;
    memset(MEMORY_SAMPLE(&m), 0, sizeof(sp_raw_sample_t));
    memory_sample(&m, SP_SAMPLE_INUSE, v->stack_id, v->size, v->mean,
                  w->now);
    /* The live table keeps no span name; a block whose request's keep
     * verdict was pending when it was sampled goes unlabelled: a snapshot
     * cannot wait for verdicts, and a dropped request's labels must not
     * leak through it. */
    if (v->has_ctx && !v->keep_pending) {
        MEMORY_SAMPLE(&m)->has_ctx = 1;
        memcpy(MEMORY_SAMPLE(&m)->trace_id, v->trace_id, SP_TRACE_ID_LEN);
        memcpy(MEMORY_SAMPLE(&m)->span_id, v->span_id, SP_SPAN_ID_LEN);
    }
    sp_profile_builder_add(w->pe->builder, MEMORY_SAMPLE(&m));
}

/* In use at the end of the interval: every sampled allocation not yet
 * freed, by stack (and span), as INUSE samples. */
static void
add_inuse_snapshot(sp_profile_export_t *pe, uint64_t now)
{
    inuse_walk_t  w = { pe, now };

    if (sp_alloc_sampler_ready() && sp_alloc_hooks_installed()
        && sp_alloc_sampler_enabled())
    {
        (void) sp_alloc_sampler_each_live(add_live, &w);
    }
}

void
sp_profile_export_drain(sp_profile_export_t *pe)
{
    sp_verdict_t  v[512];
    size_t        n;

    /* Keep verdicts are taken before the ring is drained: the samples of
     * a span that were taken before its verdict was sent are then in. */
    do {
        n = sp_keep_take(v, 512);
        drain_ring(pe);
        drain_alloc_ring(pe);
        sp_profile_builder_decide(pe->builder, v, n);
    } while (n == 512);
}

uint64_t
sp_profile_export_due(const sp_profile_export_t *pe)
{
    return pe->due;
}

static void
fail(sp_profile_export_t *pe, const char *fmt, const char *a, const char *b)
{
    uint64_t  now = sp_mono_ns();
    char      msg[512];

    pe->failed++;
    if (pe->last_error_log == 0
        || now - pe->last_error_log >= ERROR_LOG_EVERY_MS * MS)
    {
        pe->last_error_log = now;
        snprintf(msg, sizeof(msg), fmt, a, b);
        sp_logf(pe->conf.log, SP_LOG_ERR, "spanprof: %s", msg);
    }
}

static void
posted(sp_profile_export_t *pe, const char *url,
    const sp_http_response_t *resp, size_t len)
{
    char  status[320], answer[300];

    if (sp_http_response_ok(resp)) {
        pe->exported++;
        pe->bytes_exported += len;
        return;
    }
    pe->bytes_failed += len;
    snprintf(status, sizeof(status), "%s%s", resp->grpc ? "" : "status ",
             sp_http_response_describe(resp, answer, sizeof(answer)));
    fail(pe, "profile export to %s failed: %s", url,
         resp->status ? status : resp->error);
}

/* A 2xx (gRPC OK) answer of the collector: 1 when its partial success
 * rejected the profile (counted and logged, as the span exporter does with
 * rejected spans), else 0 (an unreadable answer is a warning; the profile
 * counts as exported). */
static int
otlp_rejected(sp_profile_export_t *pe, const sp_http_response_t *resp)
{
    int64_t   rejected;
    uint64_t  now;
    char      msg[256];
    int       rc;

    if (resp->body.len == 0) {
        return 0;
    }
    rc = pe->conf.otlp_json
         ? sp_otlp_http_json_parse_response(resp->body.data, resp->body.len,
               "rejectedProfiles", &rejected, msg, sizeof(msg))
         : sp_otlp_profiles_parse_response(resp->body.data, resp->body.len,
               &rejected, msg, sizeof(msg));
    if (rc != 0) {
        now = sp_mono_ns();
        if (pe->last_error_log == 0
            || now - pe->last_error_log >= ERROR_LOG_EVERY_MS * MS)
        {
            pe->last_error_log = now;
            sp_logf(pe->conf.log, SP_LOG_WARN, "spanprof: collector at %s "
                    "answered %ld with a body that is not an "
                    "ExportProfilesServiceResponse", pe->conf.otlp_url,
                    resp->status);
        }
        return 0;
    }
    if (rejected <= 0) {
        return 0;
    }
    /* One profile per request: a larger count cannot mean more. */
    pe->rejected++;
    sp_logf(pe->conf.log, SP_LOG_ERR,
            "spanprof: collector rejected 1 of 1 profiles: %s", msg);
    return 1;
}

static void
drop_types(unsigned types)
{
    size_t  i;

    for (i = 0; i < NTYPES; i++) {
        if (types & (1u << i)) {
            dropped[i]++;
        }
    }
}

static void
posted_otlp(void *ud, const sp_http_response_t *resp)
{
    sp_profile_export_t  *pe = ud;

    if (sp_http_response_ok(resp) && otlp_rejected(pe, resp)) {
        /* Delivered, not kept: neither exported nor failed. */
        pe->bytes_exported += pe->otlp_body.len;
        return;
    }
    posted(pe, pe->conf.otlp_url, resp, pe->otlp_body.len);
    if (!sp_http_response_ok(resp)) {
        drop_types(pe->otlp_types);
    }
}

static void pyroscope_next(sp_profile_export_t *pe);

static void
posted_pyroscope(void *ud, const sp_http_response_t *resp)
{
    sp_profile_export_t  *pe = ud;
    pyroscope_post_t     *q = &pe->pyro[pe->pyro_next];

    posted(pe, pe->conf.pyroscope_url, resp, q->form.len);
    if (!sp_http_response_ok(resp)) {
        dropped[q->type]++;
    }
    pe->pyro_next++;
    pyroscope_next(pe);
}

static int
post(sp_profile_export_t *pe, sp_http_client_t *http, const char *url,
    const char *content_type, const sp_buf_t *body, uint64_t timeout_ms)
{
    if (sp_http_client_post(http, url, content_type, body->data, body->len,
                            timeout_ms,
                            http == pe->otlp ? posted_otlp : posted_pyroscope,
                            pe) != 0)
    {
        pe->bytes_failed += body->len;
        fail(pe, "profile export to %s failed: cannot start the request%s",
             url, "");
        return -1;
    }
    return 0;
}

static void
write_pprof_file(sp_profile_export_t *pe, int type)
{
    char  name[96], path[4200];

    snprintf(name, sizeof(name), "%s-%llu-%d.pb.gz", type_names[type],
             (unsigned long long) (pe->start_ns / MS), (int) getpid());
    if (sp_file_output_write_whole(pe->conf.file, name, pe->body.data,
                                   pe->body.len) != 0)
    {
        snprintf(path, sizeof(path), "%s/%s", pe->conf.file->dir, name);
        pe->bytes_failed += pe->body.len;
        dropped[type]++;
        fail(pe, "cannot write %s: %s", path, strerror(errno));
        return;
    }
    pe->exported++;
    pe->bytes_exported += pe->body.len;
}

#define PYROSCOPE_BOUNDARY  "spanprof-7d1c2a9e4b"

/* Starts the next queued Pyroscope ingest, if any: from the flush, then
 * from each one's completion, so that an interval's types go one after
 * the other on the one connection. */
static void
pyroscope_next(sp_profile_export_t *pe)
{
    pyroscope_post_t  *q;

    for (; pe->pyro_next < pe->pyro_n; pe->pyro_next++) {
        q = &pe->pyro[pe->pyro_next];
        if (post(pe, pe->pyroscope, q->url, "multipart/form-data; boundary="
                 PYROSCOPE_BOUNDARY, &q->form, pe->pyro_timeout_ms) == 0)
        {
            return;
        }
        dropped[q->type]++;
    }
}

/* Queues pe->body (a gzip'd pprof of type) as a Pyroscope ingest: the
 * same application and series labels for every type; Pyroscope names
 * each type from the pprof's sample types (process_cpu, wall, memory). */
static void
queue_pyroscope(sp_profile_export_t *pe, const sp_profile_t *p, int type)
{
    pyroscope_post_t  *q = &pe->pyro[pe->pyro_n];
    sp_buf_t           url;

    sp_buf_init(&url);
    sp_pyroscope_ingest_url(pe->conf.pyroscope_url, p->resource, p->start_ns,
                            p->end_ns, &url);
    sp_buf_append_char(&url, '\0');
    sp_buf_reset(&q->form);
    sp_buf_appendf(&q->form, "--%s\r\nContent-Disposition: form-data; "
                   "name=\"profile\"; filename=\"profile.pprof\"\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n",
                   PYROSCOPE_BOUNDARY);
    sp_buf_append(&q->form, pe->body.data, pe->body.len);
    sp_buf_appendf(&q->form, "\r\n--%s--\r\n", PYROSCOPE_BOUNDARY);
    if (sp_buf_failed(&url) || sp_buf_failed(&q->form)) {
        sp_buf_free(&url);
        dropped[type]++;
        fail(pe, "profile export to %s skipped: %s", pe->conf.pyroscope_url,
             "out of memory");
        return;
    }
    /* The URL lives until the post is done (the buffer's bytes, owned). */
    free(q->url);
    q->url = (char *) url.data;
    q->type = type;
    pe->pyro_n++;
}

/* OTLP with every type in one request: a Profile per part, each part one
 * of the (distinct) profiles bounded together. */
typedef struct {
    int     type[7];       /* sp_otlp_profile_type_t */
    size_t  idx[7];        /* its profile */
    size_t  n;
    int     json;
} otlp_parts_t;

static int
encode_otlp_parts(void *ud, sp_arena_t *a, const sp_profile_t *ps,
    size_t np, sp_buf_t *out)
{
    otlp_parts_t            *o = ud;
    sp_otlp_profile_part_t   parts[7];
    size_t                   i;

    for (i = 0; i < o->n; i++) {
        if (o->idx[i] >= np) {
            return -1;
        }
        parts[i].p = &ps[o->idx[i]];
        parts[i].type = o->type[i];
    }
    return o->json ? sp_otlp_http_json_profiles_n(a, parts, o->n, out)
                   : sp_otlp_profiles_encode_n(a, parts, o->n, out);
}

static int
encode_pprof(void *ud, sp_arena_t *a, const sp_profile_t *ps, size_t n,
    sp_buf_t *out)
{
    (void) n;
    return sp_pprof_encode_opts(a, &ps[0], ud, out);
}

/* Encodes the n profiles ps (one message: a pprof holds one, an OTLP
 * request several) for one output into out within max_size (uncompressed)
 * and max_samples per profile, then, when gzip is set, compresses it
 * (pprof: files and Pyroscope want .pb.gz; the size that counts is the
 * decompressed one); 0 when there is something to send. */
static int
encode(sp_profile_export_t *pe, const char *what, const sp_profile_t *ps,
    size_t n, sp_profile_encoder_n_t enc, void *ud, int gzip, sp_buf_t *out)
{
    sp_profile_truncation_t  r;
    sp_buf_t                *plain = gzip ? &pe->raw : out;
    char                     why[256];
    int                      rc;

    rc = sp_profile_encode_bounded_n(&pe->arena, &pe->trunc_arena, ps, n,
                                     pe->conf.max_size, pe->conf.max_samples,
                                     enc, ud, plain, &r);
    sp_arena_reset(&pe->trunc_arena);
    if (rc == 0 && gzip) {
        sp_buf_reset(out);
        if (sp_gzip_append(plain->data, plain->len, out) != 0) {
            rc = -1;
        }
    }
    if (rc < 0) {
        fail(pe, "cannot encode the %s profile%s", what, "");
        return -1;
    }
    if (rc > 0) {
        snprintf(why, sizeof(why), " (%zu bytes uncompressed) does not "
                 "fit otel_profiling_max_size %zu even with every stack "
                 "merged into [truncated]: dropped", r.size,
                 pe->conf.max_size);
        fail(pe, "the %s profile%s", what, why);
        return -1;
    }
    if (r.over_size) {
        sp_logf(pe->conf.log, SP_LOG_INFO, "spanprof: %s profile truncated "
                "to otel_profiling_max_size %zu (%zu bytes uncompressed%s): "
                "%zu of %zu stacks, %lld of %lld samples merged into "
                "[truncated]", what, pe->conf.max_size, r.size,
                r.over_samples ? " after the samples cap" : "",
                r.merged_entries, r.entries, (long long) r.merged_samples,
                (long long) r.samples);
    } else if (r.over_samples) {
        sp_logf(pe->conf.log, SP_LOG_INFO, "spanprof: %s profile truncated "
                "to otel_profiling_max_samples %zu: %zu of %zu stacks, "
                "%lld of %lld samples merged into [truncated]", what,
                pe->conf.max_samples, r.merged_entries, r.entries,
                (long long) r.merged_samples, (long long) r.samples);
    }
    return 0;
}

/* One request with a Profile per type that has samples: each Profile
 * within max_samples, the whole request within max_size. */
static void
send_otlp(sp_profile_export_t *pe, const sp_profile_t *kinds,
    uint64_t timeout_ms)
{
    /* the OTLP types of each of kinds[TYPE_x] */
    static const int  otlp_types[NTYPES][2] = {
        { SP_OTLP_PROFILE_CPU, -1 },
        { SP_OTLP_PROFILE_WALL, SP_OTLP_PROFILE_OFF_CPU },
        { SP_OTLP_PROFILE_ALLOC_OBJECTS, SP_OTLP_PROFILE_ALLOC_SPACE },
        { SP_OTLP_PROFILE_INUSE_OBJECTS, SP_OTLP_PROFILE_INUSE_SPACE },
    };
    sp_profile_t  ps[NTYPES];
    otlp_parts_t  op;
    size_t        np = 0, t, j;

    op.n = 0;
    op.json = pe->conf.otlp_json;
    pe->otlp_types = 0;
    for (t = 0; t < NTYPES; t++) {
        if (kinds[t].nsamples == 0) {
            continue;
        }
        for (j = 0; j < 2 && otlp_types[t][j] >= 0; j++) {
            op.type[op.n] = otlp_types[t][j];
            op.idx[op.n++] = np;
        }
        ps[np++] = kinds[t];
        pe->otlp_types |= 1u << t;
    }
    if (np == 0) {
        return;
    }
    if (encode(pe, "OTLP", ps, np, encode_otlp_parts, &op, 0,
               &pe->otlp_body) != 0
        || post(pe, pe->otlp, pe->conf.otlp_url, pe->conf.otlp_json
                ? SP_OTLP_HTTP_JSON_CONTENT_TYPE : "application/x-protobuf",
                &pe->otlp_body, timeout_ms) != 0)
    {
        drop_types(pe->otlp_types);
    }
}

int
sp_profile_export_flush(sp_profile_export_t *pe, uint64_t timeout_ms)
{
    /* kinds[TYPE_x]: the interval's profile of each type */
    static const int  sample_kinds[NTYPES] = {
        SP_SAMPLE_CPU, SP_SAMPLE_WALL, SP_SAMPLE_ALLOC, SP_SAMPLE_INUSE
    };
    static const char *const  file_what[NTYPES] = {
        "pprof file", "wall pprof file", "alloc pprof file",
        "inuse pprof file"
    };
    static const char *const  pyroscope_what[NTYPES] = {
        "Pyroscope", "Pyroscope wall", "Pyroscope alloc", "Pyroscope inuse"
    };
    sp_profile_t     kinds[NTYPES];
    sp_pprof_opts_t  po;
    unsigned         wall_rate;
    uint64_t         end = sp_now_ns();
    size_t           t;

    sp_profile_export_drain(pe);

    /* The last post is still under way (a slow collector, or a request
     * that kept nginx's event loop from driving it): this profile waits
     * and grows rather than being dropped; the post's own timeout bounds
     * the wait. */
    if (sp_profile_builder_samples(pe->builder) > 0
        && sp_profile_export_busy(pe))
    {
        sp_logf(pe->conf.log, SP_LOG_DEBUG, "spanprof: profile export "
                "postponed: the last one is still being sent");
        pe->due = sp_mono_ns() + SP_PROFILE_EXPORT_RETRY_MS * MS;
        return 1;
    }
    /* New libraries get unwound through from the next sample on, and
     * their allocations hooked. */
    sp_loader_snapshot_refresh();
    if (sp_alloc_hooks_installed()) {
        (void) sp_alloc_hooks_rescan();
    }
    add_inuse_snapshot(pe, end);

    /* Samples still waiting for a keep verdict go out with a later
     * profile, unless too old; once the sampler stopped (the process
     * ends), all of them now, without labels. */
    sp_profile_builder_expire(pe->builder, !sp_sampler_running()
                              ? UINT64_MAX
                              : end - SP_PROFILE_EXPORT_PENDING_MAX_MS * MS);

    if (sp_profile_builder_samples(pe->builder) > 0) {
        pe->samples += sp_profile_builder_samples(pe->builder);

        if (sp_profile_builder_build(pe->builder, pe->symbolizer,
                                     pe->conf.resource, pe->start_ns, end,
                                     sp_sampler_period_ns(),
                                     &kinds[TYPE_CPU]) != 0)
        {
            fail(pe, "out of memory building a profile%s%s", "", "");

        } else {
            /* Once per distinct function, before any encoder sees it (the
             * kinds share the tables). */
            sp_symbol_redact_profile(pe->redact, &kinds[TYPE_CPU]);
            wall_rate = sp_sampler_wall_effective_rate();
            sp_profile_builder_kind(pe->builder, SP_SAMPLE_WALL,
                                    &kinds[TYPE_CPU],
                                    wall_rate ? 1000000000ull / wall_rate : 0,
                                    &kinds[TYPE_WALL]);
            sp_profile_builder_kind(pe->builder, SP_SAMPLE_ALLOC,
                                    &kinds[TYPE_CPU], sp_alloc_sampler_mean(),
                                    &kinds[TYPE_ALLOC]);
            sp_profile_builder_kind(pe->builder, SP_SAMPLE_INUSE,
                                    &kinds[TYPE_CPU], sp_alloc_sampler_mean(),
                                    &kinds[TYPE_INUSE]);

            if (pe->otlp != NULL) {
                send_otlp(pe, kinds, timeout_ms);
            }
            /* Files keep the trace id; Pyroscope gets span labels only.
             * Each type is its own pprof, bounded on its own. */
            pe->pyro_n = 0;
            pe->pyro_next = 0;
            pe->pyro_timeout_ms = timeout_ms;
            for (t = 0; t < NTYPES; t++) {
                if (kinds[t].nsamples == 0) {
                    continue;
                }
                po = (sp_pprof_opts_t) { .gzip = 0,
                    .span_labels = SP_PPROF_SPAN_LABELS_TRACE,
                    .kind = sample_kinds[t] };
                if (pe->conf.file != NULL) {
                    if (encode(pe, file_what[t], &kinds[t], 1, encode_pprof,
                               &po, 1, &pe->body) == 0)
                    {
                        write_pprof_file(pe, (int) t);
                    } else {
                        dropped[t]++;
                    }
                }
                if (pe->pyroscope != NULL) {
                    po.span_labels = SP_PPROF_SPAN_LABELS_PYROSCOPE;
                    if (encode(pe, pyroscope_what[t], &kinds[t], 1,
                               encode_pprof, &po, 1, &pe->body) == 0)
                    {
                        queue_pyroscope(pe, &kinds[t], (int) t);
                    } else {
                        dropped[t]++;
                    }
                }
            }
            pyroscope_next(pe);
        }
    }

    pe->builder_dropped += sp_profile_builder_dropped(pe->builder);
    sp_profile_builder_reset(pe->builder);
    pe->start_ns = end;
    pe->due = sp_mono_ns() + pe->conf.interval_ms * MS;
    return 0;
}

int
sp_profile_export_busy(const sp_profile_export_t *pe)
{
    return (pe->otlp != NULL && sp_http_client_busy(pe->otlp))
           || (pe->pyroscope != NULL && (sp_http_client_busy(pe->pyroscope)
                                         || pe->pyro_next < pe->pyro_n));
}

void
sp_profile_export_stats(const sp_profile_export_t *pe, uint64_t *exported,
    uint64_t *failed, uint64_t *samples)
{
    *exported = pe->exported;
    *failed = pe->failed;
    *samples = pe->samples;
}

uint64_t
sp_profile_export_rejected(const sp_profile_export_t *pe)
{
    return pe->rejected;
}

uint64_t
sp_profile_export_functions_redacted(const sp_profile_export_t *pe)
{
    sp_symbol_redact_stats_t  st;

    sp_symbol_redact_get_stats(pe->redact, &st);
    return st.functions_redacted;
}


void
sp_profile_export_more_stats(const sp_profile_export_t *pe,
    uint64_t *builder_dropped, uint64_t *bytes_exported,
    uint64_t *bytes_failed)
{
    *builder_dropped = pe->builder_dropped
                       + sp_profile_builder_dropped(pe->builder);
    *bytes_exported = pe->bytes_exported;
    *bytes_failed = pe->bytes_failed;
}

void
sp_profile_export_drop_stats(sp_profile_export_drop_stats_t *st)
{
    st->cpu = dropped[TYPE_CPU];
    st->wall = dropped[TYPE_WALL];
    st->memory = dropped[TYPE_ALLOC] + dropped[TYPE_INUSE];
}
