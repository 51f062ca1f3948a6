#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "cli/serve/json_out.h"
#include "cli/serve/otlp_ingest.h"
#include "cli/serve/otlp_reply.h"
#include "cli/serve/serve.h"
#include "cli/spanprof.h"

/* One request's body, gathered across the handler's calls. */
typedef struct {
    sp_buf_t  body;
    int       too_large;
} upload_t;

static struct MHD_Daemon  *otlp_daemon, *ui_daemon;

static enum MHD_Result
reply(struct MHD_Connection *c, int status, const char *type,
    const void *body, size_t len, const char *disposition)
{
    struct MHD_Response  *resp;
    enum MHD_Result       rc;

    resp = MHD_create_response_from_buffer(len, (void *) body,
                                           MHD_RESPMEM_MUST_COPY);
    if (resp == NULL) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (disposition != NULL) {
        MHD_add_response_header(resp, "Content-Disposition", disposition);
    }
    rc = MHD_queue_response(c, (unsigned) status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result
reply_text(struct MHD_Connection *c, int status, const char *text)
{
    return reply(c, status, "text/plain; charset=utf-8", text, strlen(text),
                 NULL);
}

/* Gathers the body; returns 1 while more is coming (the caller answers
 * MHD_YES), 0 once it is all in *u. */
static int
gather(void **con_cls, const char *data, size_t *size, upload_t **u)
{
    upload_t  *up = *con_cls;

    if (up == NULL) {
        up = xcalloc(1, sizeof(*up));
        sp_buf_init(&up->body);
        *con_cls = up;
        return 1;
    }
    if (*size > 0) {
        if (up->body.len + *size > SERVE_MAX_BODY) {
            up->too_large = 1;
        } else {
            sp_buf_append(&up->body, data, *size);
        }
        *size = 0;
        return 1;
    }
    *u = up;
    return 0;
}

static void
request_done(void *cls, struct MHD_Connection *c, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
    upload_t  *up = *con_cls;

    (void) cls; (void) c; (void) toe;
    if (up != NULL) {
        sp_buf_free(&up->body);
        free(up);
        *con_cls = NULL;
    }
}

/* --- OTLP/HTTP ------------------------------------------------------------- */

static enum MHD_Result
otlp_handler(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *data,
    size_t *size, void **con_cls)
{
    serve_t                *sv = cls;
    upload_t               *u;
    const char             *ctype, *cenc, *err;
    const uint8_t          *body;
    size_t                  len;
    sp_buf_t                plain, resp;
    serve_ingest_result_t   r;
    int                     traces, rc, json;
    enum MHD_Result         ret;

    (void) version;
    traces = strcmp(url, "/v1/traces") == 0;
    if (!traces && strcmp(url, "/v1development/profiles") != 0) {
        pthread_mutex_lock(&sv->lock);
        sv->counters.otlp_unsupported++;
        pthread_mutex_unlock(&sv->lock);
        return reply_text(c, 404, "not an OTLP path: POST /v1/traces or "
                                  "/v1development/profiles\n");
    }
    if (strcmp(method, "POST") != 0) {
        pthread_mutex_lock(&sv->lock);
        sv->counters.otlp_unsupported++;
        pthread_mutex_unlock(&sv->lock);
        return reply_text(c, 405, "POST only\n");
    }
    if (gather(con_cls, data, size, &u)) {
        return MHD_YES;
    }

    pthread_mutex_lock(&sv->lock);
    sv->counters.otlp_requests++;
    pthread_mutex_unlock(&sv->lock);

    if (u->too_large) {
        pthread_mutex_lock(&sv->lock);
        sv->counters.otlp_too_large++;
        pthread_mutex_unlock(&sv->lock);
        return reply_text(c, 413, "body larger than 16 MiB\n");
    }
    ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                        "Content-Type");
    json = ctype != NULL && strncasecmp(ctype, "application/json", 16) == 0;
    if (!json && (ctype == NULL
                  || strncasecmp(ctype, "application/x-protobuf", 22) != 0))
    {
        pthread_mutex_lock(&sv->lock);
        sv->counters.otlp_unsupported++;
        pthread_mutex_unlock(&sv->lock);
        return reply_text(c, 415, "Content-Type must be "
                                  "application/x-protobuf or "
                                  "application/json\n");
    }

    body = u->body.data;
    len = u->body.len;
    sp_buf_init(&plain);
    cenc = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                       "Content-Encoding");
    if (cenc != NULL && strcasecmp(cenc, "gzip") == 0) {
        if (cli_gunzip(body, len, SERVE_MAX_BODY, &plain, &err) != 0) {
            sp_buf_free(&plain);
            pthread_mutex_lock(&sv->lock);
            if (strstr(err, "size limit") != NULL) {
                sv->counters.otlp_too_large++;
                pthread_mutex_unlock(&sv->lock);
                return reply_text(c, 413, "body larger than 16 MiB once "
                                          "unzipped\n");
            }
            sv->counters.otlp_bad_requests++;
            pthread_mutex_unlock(&sv->lock);
            return reply_text(c, 400, err);
        }
        body = plain.data;
        len = plain.len;
    } else if (cenc != NULL && strcasecmp(cenc, "identity") != 0) {
        sp_buf_free(&plain);
        pthread_mutex_lock(&sv->lock);
        sv->counters.otlp_unsupported++;
        pthread_mutex_unlock(&sv->lock);
        return reply_text(c, 415, "Content-Encoding must be gzip or "
                                  "identity\n");
    }

    pthread_mutex_lock(&sv->lock);
    rc = serve_store_request(sv, traces, body, len, json, &r,
                             &sv->counters.otlp_bad_requests);
    pthread_mutex_unlock(&sv->lock);
    sp_buf_free(&plain);

    if (rc != 0) {
        return reply_text(c, 400, r.error);
    }
    sp_buf_init(&resp);
    if (json) {
        sp_buf_append_str(&resp, "{");
        if (r.rejected > 0) {
            sp_buf_appendf(&resp, "\"partialSuccess\":{\"%s\":\"%llu\","
                           "\"errorMessage\":",
                           traces ? "rejectedSpans" : "rejectedProfiles",
                           (unsigned long long) r.rejected);
            serve_json_str(&resp, r.error);
            sp_buf_append_str(&resp, "}");
        }
        sp_buf_append_str(&resp, "}");
    } else {
        serve_otlp_partial_success(&resp, r.rejected, r.error);
    }
    ret = reply(c, 200, json ? "application/json" : "application/x-protobuf",
                resp.data ? (const void *) resp.data : "",
                resp.len, NULL);
    sp_buf_free(&resp);
    return ret;
}

/* --- the UI and the API ---------------------------------------------------- */

static const char *
query_arg(void *ud, const char *name)
{
    return MHD_lookup_connection_value(ud, MHD_GET_ARGUMENT_KIND, name);
}

/* With --token: "Authorization: Bearer T" or ?token=T. */
static int
authorized(const serve_t *sv, struct MHD_Connection *c)
{
    const char  *h, *q;

    if (sv->conf.token == NULL) {
        return 1;
    }
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h != NULL && strncmp(h, "Bearer ", 7) == 0
        && strcmp(h + 7, sv->conf.token) == 0)
    {
        return 1;
    }
    q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    return q != NULL && strcmp(q, sv->conf.token) == 0;
}

static enum MHD_Result
ui_handler(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *data,
    size_t *size, void **con_cls)
{
    serve_t          *sv = cls;
    serve_reply_t     r;
    enum MHD_Result   ret;

    (void) version; (void) data; (void) size; (void) con_cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        return reply_text(c, 405, "GET only\n");
    }
    pthread_mutex_lock(&sv->lock);
    sv->counters.api_requests++;
    if (!authorized(sv, c)) {
        sv->counters.api_unauthorized++;
        pthread_mutex_unlock(&sv->lock);
        return reply_text(c, 401, "a token is required: ?token=... or "
                                  "Authorization: Bearer ...\n");
    }
    memset(&r, 0, sizeof(r));
    sp_buf_init(&r.body);
    serve_api_get(sv, url, query_arg, c, &r);
    pthread_mutex_unlock(&sv->lock);
    ret = sp_buf_failed(&r.body)
          ? reply_text(c, 500, "out of memory\n")
          : reply(c, r.status, r.content_type,
                  r.body.data ? (const void *) r.body.data : "", r.body.len,
                  r.disposition);
    sp_buf_free(&r.body);
    return ret;
}

/* --- listeners ------------------------------------------------------------- */

int
serve_parse_addr(const char *s, struct sockaddr_in *sa)
{
    const char  *colon = strrchr(s, ':');
    char         host[64];
    long         port;
    char        *end;

    if (colon == NULL || (size_t) (colon - s) >= sizeof(host)) {
        return -1;
    }
    memcpy(host, s, (size_t) (colon - s));
    host[colon - s] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535 || colon[1] == '\0') {
        return -1;
    }
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t) port);
    if (strcmp(host, "localhost") == 0) {
        strcpy(host, "127.0.0.1");
    }
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static struct MHD_Daemon *
listen_on(const char *addr, MHD_AccessHandlerCallback h, serve_t *sv,
    char *err, size_t errlen)
{
    struct sockaddr_in   sa;
    struct MHD_Daemon   *d;

    if (serve_parse_addr(addr, &sa) != 0) {
        snprintf(err, errlen, "invalid address \"%s\": expected "
                 "IPV4:PORT", addr);
        return NULL;
    }
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                         0, NULL, NULL, h, sv,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &sa,
                         MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) 30,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned) 256,
                         MHD_OPTION_END);
    if (d == NULL) {
        snprintf(err, errlen, "cannot listen on %s (in use, or not an "
                 "address of this machine)", addr);
    }
    return d;
}

int
serve_http_start(serve_t *sv, char *err, size_t errlen)
{
    otlp_daemon = listen_on(sv->conf.otlp_addr, otlp_handler, sv, err,
                            errlen);
    if (otlp_daemon == NULL) {
        return -1;
    }
    ui_daemon = listen_on(sv->conf.ui_addr, ui_handler, sv, err, errlen);
    if (ui_daemon == NULL) {
        MHD_stop_daemon(otlp_daemon);
        otlp_daemon = NULL;
        return -1;
    }
    return 0;
}

void
serve_http_stop(void)
{
    if (otlp_daemon != NULL) {
        MHD_stop_daemon(otlp_daemon);
    }
    if (ui_daemon != NULL) {
        MHD_stop_daemon(ui_daemon);
    }
    otlp_daemon = ui_daemon = NULL;
}
