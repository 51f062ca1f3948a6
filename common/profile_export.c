#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "arena.h"
#include "buf.h"
#include "clock.h"
#include "loader_snapshot.h"
#include "otlp_profiles.h"
#include "pprof.h"
#include "profile_builder.h"
#include "profile_export.h"
#include "sampler.h"
#include "symbols.h"

#define MS  1000000ull
#define ERROR_LOG_EVERY_MS  5000

struct sp_profile_export {
    sp_profile_export_conf_t  conf;
    sp_profile_builder_t     *builder;
    sp_symbolizer_t          *symbolizer;
    sp_http_client_t         *pyroscope;
    sp_arena_t                arena;
    sp_buf_t                  body;
    sp_buf_t                  form;
    uint64_t                  start_ns;      /* wall clock */
    uint64_t                  due;           /* monotonic */
    uint64_t                  last_error_log;
    uint64_t                  exported, failed, samples;
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
    pe->symbolizer = sp_symbolizer_new();
    if (c->pyroscope_url != NULL) {
        /* Its own connection: the collector's headers and gzip setting are
         * not Pyroscope's. */
        pe->pyroscope = sp_http_client_new(&(sp_http_client_conf_t) {
            .connect_timeout_ms = 2000,
        });
    }
    if (pe->builder == NULL || pe->symbolizer == NULL
        || (c->pyroscope_url != NULL && pe->pyroscope == NULL))
    {
        sp_profile_export_free(pe);
        return NULL;
    }
    sp_arena_init(&pe->arena, 256 * 1024);
    sp_buf_init(&pe->body);
    sp_buf_init(&pe->form);
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
    sp_http_client_free(pe->pyroscope);
    sp_arena_free(&pe->arena);
    sp_buf_free(&pe->body);
    sp_buf_free(&pe->form);
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

static int
post(sp_profile_export_t *pe, sp_http_client_t *http, const char *url,
    const char *content_type, const sp_buf_t *body, uint64_t timeout_ms)
{
    sp_http_response_t  resp;
    char                status[32];
    int                 ok;

    memset(&resp, 0, sizeof(resp));
    sp_buf_init(&resp.body);
    sp_http_post(http, url, content_type, body->data, body->len, timeout_ms,
                 &resp);
    ok = resp.status >= 200 && resp.status < 300;
    if (!ok) {
        snprintf(status, sizeof(status), "status %ld", resp.status);
        fail(pe, "profile export to %s failed: %s", url,
             resp.status ? status : resp.error);
    }
    sp_buf_free(&resp.body);
    return ok ? 0 : -1;
}

static void
write_pprof_file(sp_profile_export_t *pe)
{
    char     path[4096], tmp[4096];
    int      fd;
    ssize_t  n = -1;

    snprintf(path, sizeof(path), "%s/cpu-%llu-%d.pb.gz", pe->conf.dir,
             (unsigned long long) (pe->start_ns / MS), (int) getpid());
    snprintf(tmp, sizeof(tmp), "%s/.cpu-%d.tmp", pe->conf.dir, (int) getpid());

    /* Written aside and renamed, so a reader never sees half a file. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        n = write(fd, pe->body.data, pe->body.len);
        close(fd);
    }
    if (n != (ssize_t) pe->body.len || rename(tmp, path) != 0) {
        fail(pe, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return;
    }
    pe->exported++;
}

static void
send_pyroscope(sp_profile_export_t *pe, const sp_profile_t *p,
    uint64_t timeout_ms)
{
    static const char  boundary[] = "spanprof-7d1c2a9e4b";
    const char        *service = sp_resource_get(p->resource, "service.name");
    char              *name, *url;
    char               app[512];
    size_t             len;

    /* The application name carries the service as a Pyroscope label. */
    snprintf(app, sizeof(app), "%s{service_name=%s}",
             service ? service : "spanprof", service ? service : "spanprof");
    name = curl_easy_escape(NULL, app, 0);
    if (name == NULL) {
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

    if (!sp_buf_failed(&pe->form)) {
        char  ct[96];

        snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%s", boundary);
        if (post(pe, pe->pyroscope, url, ct, &pe->form, timeout_ms) == 0) {
            pe->exported++;
        }
    }
    free(url);
}

void
sp_profile_export_flush(sp_profile_export_t *pe, uint64_t timeout_ms)
{
    sp_profile_t  p;
    uint64_t      end = sp_now_ns();

    sp_profile_export_drain(pe);
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
            if (pe->conf.otlp_url != NULL) {
                sp_buf_reset(&pe->body);
                if (sp_otlp_profiles_encode(&pe->arena, &p, &pe->body) == 0
                    && post(pe, pe->conf.otlp_http, pe->conf.otlp_url,
                            "application/x-protobuf", &pe->body,
                            timeout_ms) == 0)
                {
                    pe->exported++;
                }
                sp_arena_reset(&pe->arena);
            }
            if (pe->conf.dir != NULL || pe->pyroscope != NULL) {
                sp_buf_reset(&pe->body);
                if (sp_pprof_encode(&pe->arena, &p, 1, &pe->body) == 0) {
                    if (pe->conf.dir != NULL) {
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

    sp_profile_builder_reset(pe->builder);
    pe->start_ns = end;
    pe->due = sp_mono_ns() + pe->conf.interval_ms * MS;
}

void
sp_profile_export_stats(const sp_profile_export_t *pe, uint64_t *exported,
    uint64_t *failed, uint64_t *samples)
{
    *exported = pe->exported;
    *failed = pe->failed;
    *samples = pe->samples;
}
