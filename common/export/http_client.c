#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "common/base/file_read.h"
#include "common/export/gzip.h"
#include "common/export/http_client.h"

#define SP_HTTP_MAX_BODY  (64 * 1024)

struct sp_http_client {
    sp_http_transfer_t  xfer;      /* first: the loop hands it back */
    sp_http_loop_t     *loop;
    CURL               *curl;
    struct curl_slist  *headers;
    int                 gzip;
    sp_buf_t            gz;        /* reused compression buffer */
    sp_http_response_t  resp;      /* of the transfer under way */
    sp_http_done_fn     done;      /* non-NULL while one is */
    void               *done_ud;
    char                ct[128];   /* its Content-Type header, in front */
    char                curl_err[CURL_ERROR_SIZE];
    char               *ca_name;   /* for TLS errors; NULL: system CAs */
    struct curl_slist   ct_header; /* of the fixed ones */
};

static size_t
on_body(char *p, size_t size, size_t n, void *ud)
{
    sp_http_client_t  *c = ud;
    size_t             len = size * n;
    size_t             room = SP_HTTP_MAX_BODY - c->resp.body.len;

    sp_buf_append(&c->resp.body, p, len < room ? len : room);
    return len;
}

static size_t
on_header(char *p, size_t size, size_t n, void *ud)
{
    sp_http_client_t  *c = ud;
    size_t             len = size * n, vlen;
    const char        *v;
    struct timespec    ts;

    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        v = p + 12;
        vlen = len - 12;
        clock_gettime(CLOCK_REALTIME, &ts);
        c->resp.retry_after_ms = sp_http_parse_retry_after(v, vlen,
            (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000);
    } else if (len > 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
        v = p + 13;
        vlen = len - 13;
        while (vlen > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n')) {
            vlen--;
        }
        if (vlen >= sizeof(c->resp.content_type)) {
            vlen = sizeof(c->resp.content_type) - 1;
        }
        memcpy(c->resp.content_type, v, vlen);
        c->resp.content_type[vlen] = '\0';
    }
    return len;
}

static void transfer_done(sp_http_transfer_t *t, int curl_result);

sp_http_client_t *
sp_http_client_new(sp_http_loop_t *loop, const sp_http_client_conf_t *conf)
{
    sp_http_client_t   *c;
    const char *const  *h;
    struct curl_slist  *l;

    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->curl = curl_easy_init();
    if (c->curl == NULL) {
        free(c);
        return NULL;
    }
    sp_buf_init(&c->gz);
    sp_buf_init(&c->resp.body);
    c->loop = loop;
    c->gzip = conf->gzip;

    /* "Expect: 100-continue" would cost a round trip per batch. */
    c->headers = curl_slist_append(NULL, "Expect:");
    if (c->gzip && c->headers != NULL) {
        l = curl_slist_append(c->headers, "Content-Encoding: gzip");
        c->headers = l != NULL ? l : c->headers;
    }
    for (h = conf->headers; h != NULL && *h != NULL; h++) {
        l = curl_slist_append(c->headers, *h);
        if (l != NULL) {
            c->headers = l;
        }
    }

    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
                     (long) (conf->connect_timeout_ms ? conf->connect_timeout_ms
                                                      : 2000));
    curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "spanprof");
    curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
    if (conf->ca_pem != NULL) {
        /* The bytes, not the path: a worker may not be able to open it. */
        struct curl_blob  blob = {
            .data = (void *) conf->ca_pem,
            .len = conf->ca_pem_len,
            .flags = CURL_BLOB_COPY,
        };

        if (curl_easy_setopt(c->curl, CURLOPT_CAINFO_BLOB, &blob)
            != CURLE_OK)
        {
            sp_http_client_free(c);
            return NULL;
        }
        if (conf->ca_name != NULL) {
            c->ca_name = strdup(conf->ca_name);
        }
    }
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_err);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->curl, CURLOPT_UPLOAD_BUFFERSIZE, 2048L * 1024);
    c->xfer.easy = c->curl;
    c->xfer.done = transfer_done;
    return c;
}

void
sp_http_client_free(sp_http_client_t *c)
{
    if (c == NULL) {
        return;
    }
    if (c->done != NULL) {
        sp_http_loop_cancel(c->loop, &c->xfer);
    }
    curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    free(c->ca_name);
    sp_buf_free(&c->gz);
    sp_buf_free(&c->resp.body);
    free(c);
}

int
sp_http_client_post(sp_http_client_t *c, const char *url,
    const char *content_type, const void *body, size_t len,
    uint64_t timeout_ms, sp_http_done_fn done, void *ud)
{
    if (c->done != NULL) {
        return -1;
    }
    c->resp.status = 0;
    c->resp.retry_after_ms = 0;
    c->resp.error[0] = '\0';
    c->curl_err[0] = '\0';
    c->resp.content_type[0] = '\0';
    sp_buf_reset(&c->resp.body);

    if (c->gzip) {
        sp_buf_reset(&c->gz);
        if (sp_gzip_append(body, len, &c->gz) != 0) {
            return -1;
        }
        body = c->gz.data;
        len = c->gz.len;
    }

    snprintf(c->ct, sizeof(c->ct), "Content-Type: %s", content_type);
    c->ct_header.data = c->ct;
    c->ct_header.next = c->headers;

    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, &c->ct_header);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
                     (long) (timeout_ms > 0 ? timeout_ms : 1));

    if (sp_http_loop_start(c->loop, &c->xfer) != 0) {
        return -1;
    }
    c->done = done;
    c->done_ud = ud;
    return 0;
}

int
sp_http_client_busy(const sp_http_client_t *c)
{
    return c->done != NULL;
}

static int
tls_verify_error(int curl_result)
{
    return curl_result == CURLE_PEER_FAILED_VERIFICATION
           || curl_result == CURLE_SSL_CACERT_BADFILE
           || curl_result == CURLE_SSL_ISSUER_ERROR;
}

static void
transfer_done(sp_http_transfer_t *t, int curl_result)
{
    sp_http_client_t  *c = (sp_http_client_t *) t;
    sp_http_done_fn    done = c->done;
    const char        *msg;

    c->done = NULL;
    if (curl_result != CURLE_OK) {
        c->resp.status = 0;
        /* curl's detail ("SSL certificate problem: ...") over its
         * generic text, and which CAs a failed verification used. */
        msg = c->curl_err[0] != '\0'
              ? c->curl_err : curl_easy_strerror((CURLcode) curl_result);

        if (tls_verify_error(curl_result) && c->ca_name != NULL) {
            snprintf(c->resp.error, sizeof(c->resp.error),
                     "%s (trusted_certificate %s)", msg, c->ca_name);
        } else {
            snprintf(c->resp.error, sizeof(c->resp.error), "%s", msg);
        }
    } else {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->resp.status);
    }
    if (done != NULL) {
        done(c->done_ud, &c->resp);
    }
}

int
sp_http_ca_load(const char *path, char **pem, size_t *len, char *err,
    size_t errlen)
{
    if (sp_file_read_all(path, SP_HTTP_CA_MAX, pem, len, err, errlen) != 0) {
        return -1;
    }
    /* Caught here, not at the first export from a worker. */
    if (strstr(*pem, "-----BEGIN CERTIFICATE-----") == NULL) {
        snprintf(err, errlen, "no PEM certificate in it");
        free(*pem);
        *pem = NULL;
        return -1;
    }
    return 0;
}

uint64_t
sp_http_parse_retry_after(const char *v, size_t len, uint64_t now_ms)
{
    char       buf[64];
    char      *end;
    long long  secs;
    time_t     t;
    size_t     i = 0;

    while (i < len && (v[i] == ' ' || v[i] == '\t')) {
        i++;
    }
    while (len > i && isspace((unsigned char) v[len - 1])) {
        len--;
    }
    len -= i;
    if (len == 0 || len >= sizeof(buf)) {
        return 0;
    }
    memcpy(buf, v + i, len);
    buf[len] = '\0';

    if (isdigit((unsigned char) buf[0])) {
        secs = strtoll(buf, &end, 10);
        if (*end != '\0' || secs < 0) {
            return 0;
        }
        /* A collector asking for more than an hour is capped to one. */
        return (uint64_t) (secs > 3600 ? 3600 : secs) * 1000;
    }

    /* To the millisecond: the retry comes at the date, not up to a
     * second after it. */
    t = curl_getdate(buf, NULL);
    if (t < 0 || (uint64_t) t * 1000 <= now_ms) {
        return 0;
    }
    return (uint64_t) t * 1000 - now_ms > 3600000
           ? 3600000 : (uint64_t) t * 1000 - now_ms;
}
