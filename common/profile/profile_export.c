#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/base/clock.h"
#include "common/profile/loader_snapshot.h"
#include "common/export/otlp_profiles.h"
#include "common/export/pprof.h"
#include "common/profile/profile_builder.h"
#include "common/profile/profile_export.h"
#include "common/profile/sampler.h"
#include "common/profile/symbols.h"

#define MS  1000000ull
#define ERROR_LOG_EVERY_MS  5000

struct sp_profile_export {
    sp_profile_export_conf_t  conf;
    sp_profile_builder_t     *builder;
    sp_symbolizer_t          *symbolizer;
    sp_http_client_t         *otlp;
    sp_http_client_t         *pyroscope;
    sp_arena_t                arena;
    sp_buf_t                  otlp_body;     /* each kept until sent */
    sp_buf_t                  body;          /* pprof */
    sp_buf_t                  form;
    char                     *pyroscope_req; /* its URL, until sent */
    uint64_t                  start_ns;      /* wall clock */
    uint64_t                  due;           /* monotonic */
    uint64_t                  last_error_log;
    uint64_t                  exported, failed, samples;
    uint64_t                  builder_dropped;   /* of the profiles reset */
    uint64_t                  bytes_exported, bytes_failed;
};

sp_profile_export_t *
sp_profile_export_new(const sp_profile_export_conf_t *c)
{
    sp_profile_export_t  *pe = calloc(1, sizeof(*pe));

    if (pe == NULL) {
        return NULL;
    }
    pe->conf = *c;
    pe->builder = sp_profile_builder_new();
    pe->symbolizer = sp_symbolizer_new(pe->conf.symbol_files);
    sp_buf_init(&pe->otlp_body);
    sp_buf_init(&pe->body);
    sp_buf_init(&pe->form);
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
    if (pe->builder == NULL || pe->symbolizer == NULL
        || (c->otlp_url != NULL && pe->otlp == NULL)
        || (c->pyroscope_url != NULL && pe->pyroscope == NULL))
    {
        sp_profile_export_free(pe);
        return NULL;
    }
    sp_arena_init(&pe->arena, 256 * 1024);
    pe->start_ns = sp_now_ns();
    pe->due = sp_mono_ns() + c->interval_ms * MS;
    return pe;
}

void
sp_profile_export_free(sp_profile_export_t *pe)
{
    if (pe == NULL) {
        return;
    }
    sp_profile_builder_free(pe->builder);
    sp_symbolizer_free(pe->symbolizer);
    sp_http_client_free(pe->otlp);
    sp_http_client_free(pe->pyroscope);
    sp_arena_free(&pe->arena);
    sp_buf_free(&pe->otlp_body);
    sp_buf_free(&pe->body);
    sp_buf_free(&pe->form);
    free(pe->pyroscope_req);
    free(pe);
}

void
sp_profile_export_drain(sp_profile_export_t *pe)
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
    char  status[32];

    if (resp->status >= 200 && resp->status < 300) {
        pe->exported++;
        pe->bytes_exported += len;
        return;
    }
    pe->bytes_failed += len;
    snprintf(status, sizeof(status), "status %ld", resp->status);
    fail(pe, "profile export to %s failed: %s", url,
         resp->status ? status : resp->error);
}

static void
posted_otlp(void *ud, const sp_http_response_t *resp)
{
    sp_profile_export_t  *pe = ud;

    posted(pe, pe->conf.otlp_url, resp, pe->otlp_body.len);
}

static void
posted_pyroscope(void *ud, const sp_http_response_t *resp)
{
    sp_profile_export_t  *pe = ud;

    posted(pe, pe->conf.pyroscope_url, resp, pe->form.len);
}

static void
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
    }
}

static void
write_pprof_file(sp_profile_export_t *pe)
{
    char  name[96], path[4200];

    snprintf(name, sizeof(name), "cpu-%llu-%d.pb.gz",
             (unsigned long long) (pe->start_ns / MS), (int) getpid());
    if (sp_file_output_write_whole(pe->conf.file, name, pe->body.data,
                                   pe->body.len) != 0)
    {
        snprintf(path, sizeof(path), "%s/%s", pe->conf.file->dir, name);
        pe->bytes_failed += pe->body.len;
        fail(pe, "cannot write %s: %s", path, strerror(errno));
        return;
    }
    pe->exported++;
    pe->bytes_exported += pe->body.len;
}


static void
send_pyroscope(sp_profile_export_t *pe, const sp_profile_t *p,
    uint64_t timeout_ms)
{
    static const char  boundary[] = "spanprof-7d1c2a9e4b";
    const char        *service = sp_resource_get(p->resource, "service.name");
    char              *name, *url;
    char               ct[96];
    char               app[512];
    size_t             len;

    /* The application name carries the service as a Pyroscope label. */
    snprintf(app, sizeof(app), "%s{service_name=%s}",
             service ? service : "spanprof", service ? service : "spanprof");
    name = curl_easy_escape(NULL, app, 0);
    if (name == NULL || sp_http_client_busy(pe->pyroscope)) {
        curl_free(name);
        fail(pe, "profile export to %s skipped: %s", pe->conf.pyroscope_url,
             name == NULL ? "out of memory" : "the last one is still being "
             "sent");
        return;
    }
    len = strlen(pe->conf.pyroscope_url) + strlen(name) + 160;
    url = malloc(len);
    if (url == NULL) {
        curl_free(name);
        return;
    }
    snprintf(url, len, "%s/ingest?name=%s&from=%llu&until=%llu"
             "&format=pprof&spyName=spanprof", pe->conf.pyroscope_url, name,
             (unsigned long long) (p->start_ns / 1000000000ull),
             (unsigned long long) ((p->end_ns + 999999999ull) / 1000000000ull));
    curl_free(name);

    sp_buf_reset(&pe->form);
    sp_buf_appendf(&pe->form, "--%s\r\nContent-Disposition: form-data; "
                   "name=\"profile\"; filename=\"profile.pprof\"\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n", boundary);
    sp_buf_append(&pe->form, pe->body.data, pe->body.len);
    sp_buf_appendf(&pe->form, "\r\n--%s--\r\n", boundary);

    free(pe->pyroscope_req);
    pe->pyroscope_req = url;
    if (!sp_buf_failed(&pe->form)) {
        snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%s", boundary);
        post(pe, pe->pyroscope, url, ct, &pe->form, timeout_ms);
    }
}

int
sp_profile_export_flush(sp_profile_export_t *pe, uint64_t timeout_ms)
{
    sp_profile_t  p;
    uint64_t      end = sp_now_ns();

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
    /* New libraries get unwound through from the next sample on. */
    sp_loader_snapshot_refresh();

    if (sp_profile_builder_samples(pe->builder) > 0) {
        pe->samples += sp_profile_builder_samples(pe->builder);

        if (sp_profile_builder_build(pe->builder, pe->symbolizer,
                                     pe->conf.resource, pe->start_ns, end,
                                     sp_sampler_period_ns(), &p) != 0)
        {
            fail(pe, "out of memory building a profile%s%s", "", "");

        } else {
            if (pe->otlp != NULL) {
                sp_buf_reset(&pe->otlp_body);
                if (sp_otlp_profiles_encode(&pe->arena, &p, &pe->otlp_body)
                    == 0)
                {
                    post(pe, pe->otlp, pe->conf.otlp_url,
                         "application/x-protobuf", &pe->otlp_body,
                         timeout_ms);
                }
                sp_arena_reset(&pe->arena);
            }
            if (pe->conf.file != NULL || pe->pyroscope != NULL) {
                sp_buf_reset(&pe->body);
                if (sp_pprof_encode(&pe->arena, &p, 1, &pe->body) == 0) {
                    if (pe->conf.file != NULL) {
                        write_pprof_file(pe);
                    }
                    if (pe->pyroscope != NULL) {
                        send_pyroscope(pe, &p, timeout_ms);
                    }
                }
                sp_arena_reset(&pe->arena);
            }
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
           || (pe->pyroscope != NULL && sp_http_client_busy(pe->pyroscope));
}

void
sp_profile_export_stats(const sp_profile_export_t *pe, uint64_t *exported,
    uint64_t *failed, uint64_t *samples)
{
    *exported = pe->exported;
    *failed = pe->failed;
    *samples = pe->samples;
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
