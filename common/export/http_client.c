#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "common/base/file_read.h"
#include "common/export/grpc_frame.h"
#include "common/export/grpc_response.h"
#include "common/export/grpc_status.h"
#include "common/export/gzip.h"
#include "common/export/h2c_reuse.h"
#include "common/export/http_client.h"

#define SP_HTTP_MAX_BODY  (64 * 1024)

struct sp_http_client {
    sp_http_transfer_t  xfer;      /* first: the loop hands it back */
    sp_http_loop_t     *loop;
    CURL               *curl;
    struct curl_slist  *headers;
    int                 gzip;
    int                 grpc;
    sp_buf_t            gz;        /* reused compression buffer */
    /* gRPC: the message's 5-byte prefix, the message (the caller's body,
     * or gz), and how much of the two libcurl has read (on_upload): the
     * message is not copied to be framed. */
    uint8_t             prefix[SP_GRPC_FRAME_HEADER];
    size_t              prefix_len;    /* 0 for HTTP */
    const sp_http_part_t *parts;       /* the body: the caller's, or one */
    size_t              nparts;
    sp_http_part_t      one;
    size_t              body_len;
    size_t              read_pos;      /* of prefix and body */
    size_t              part, part_off;    /* where read_pos is */
    sp_buf_t            flat;          /* small parts put together */
    sp_buf_t            raw;       /* gRPC: the answer's body, framed */
    sp_grpc_response_t  grpc_resp;
    char                grpc_timeout[40];
    struct curl_slist   timeout_header;
    sp_http_response_t  resp;      /* of the transfer under way */
    sp_http_done_fn     done;      /* non-NULL while one is */
    void               *done_ud;
    char                ct[128];   /* its Content-Type header, in front */
    char                curl_err[CURL_ERROR_SIZE];
    char               *ca_name;   /* for TLS errors; NULL: system CAs */
    struct curl_slist   ct_header; /* of the fixed ones */
    /* libcurl < 8, h2c: how the call under way was sent (h2c_reuse.h;
     * 0: not so), its URL, and its timeout (for a re-sent call). */
    int                 h2c_mode;
    int                 h2c_broken;    /* sp_h2c_reuse_broken(), once */
    char                h2c_url[SP_H2C_ORIGIN_MAX];
    uint64_t            timeout_ms;
};

static size_t
on_body(char *p, size_t size, size_t n, void *ud)
{
    sp_http_client_t  *c = ud;
    size_t             len = size * n;
    sp_buf_t          *b = c->grpc ? &c->raw : &c->resp.body;
    /* gRPC: room for the frame header too, so that a whole answer of
     * the limit still unframes. */
    size_t             max = SP_HTTP_MAX_BODY
                             + (c->grpc ? SP_GRPC_FRAME_HEADER : 0);
    size_t             room = max - b->len;

    sp_buf_append(b, p, len < room ? len : room);
    return len;
}

static size_t
on_header(char *p, size_t size, size_t n, void *ud)
{
    sp_http_client_t  *c = ud;
    size_t             len = size * n, vlen;
    const char        *v;
    struct timespec    ts;

    if (c->grpc) {
        /* Headers, then the trailers after the body: both come here. */
        sp_grpc_response_header(&c->grpc_resp, p, len);
    }
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

/* libcurl reads the request body from here (gRPC: the prefix, then the
 * message): the parts one after another, straight into its upload
 * buffer. */
static size_t
on_upload(char *buf, size_t size, size_t n, void *ud)
{
    sp_http_client_t      *c = ud;
    size_t                 room = size * n, got = 0, k;
    const sp_http_part_t  *pt;

    if (c->read_pos < c->prefix_len) {
        k = c->prefix_len - c->read_pos;
        k = k < room ? k : room;
        memcpy(buf, c->prefix + c->read_pos, k);
        got = k;
        c->read_pos += k;
    }
    while (got < room && c->part < c->nparts) {
        pt = &c->parts[c->part];
        k = pt->len - c->part_off;
        k = k < room - got ? k : room - got;
        memcpy(buf + got, (const uint8_t *) pt->data + c->part_off, k);
        got += k;
        c->read_pos += k;
        c->part_off += k;
        if (c->part_off == pt->len) {
            c->part++;
            c->part_off = 0;
        }
    }
    return got;
}

/* Puts the read position at offset of the prefix and body. */
static void
upload_seek(sp_http_client_t *c, size_t offset)
{
    size_t  left;

    c->read_pos = offset;
    c->part = 0;
    c->part_off = 0;
    left = offset > c->prefix_len ? offset - c->prefix_len : 0;
    while (c->part < c->nparts && left >= c->parts[c->part].len) {
        left -= c->parts[c->part].len;
        c->part++;
    }
    c->part_off = left;
}

/* libcurl rewinds the body when it sends it again (a connection that
 * died under a reused request). */
static int
on_upload_seek(void *ud, curl_off_t offset, int origin)
{
    sp_http_client_t  *c = ud;

    if (origin != SEEK_SET || offset < 0
        || (uint64_t) offset > c->prefix_len + c->body_len)
    {
        return CURL_SEEKFUNC_CANTSEEK;
    }
    upload_seek(c, (size_t) offset);
    return CURL_SEEKFUNC_OK;
}

static void transfer_done(sp_http_transfer_t *t, int curl_result);

/* A gRPC call's fixed headers; the exporter's "Name: value" headers are
 * metadata, whose names are lowercase. NULL when out of memory. */
static struct curl_slist *
grpc_headers(const sp_http_client_conf_t *conf)
{
    struct curl_slist  *l = NULL, *n;
    const char *const  *h;
    const char         *fixed[] = {
        "te: trailers",
        "grpc-accept-encoding: identity,gzip",
        conf->gzip ? "grpc-encoding: gzip" : NULL,
        /* No Accept header: gRPC does not use it. */
        "Accept:",
    };
    char                buf[1024];
    size_t              i, k;

    for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (fixed[i] != NULL) {
            if ((n = curl_slist_append(l, fixed[i])) == NULL) {
                goto nomem;
            }
            l = n;
        }
    }
    for (h = conf->headers; h != NULL && *h != NULL; h++) {
        snprintf(buf, sizeof(buf), "%s", *h);
        for (k = 0; buf[k] != '\0' && buf[k] != ':'; k++) {
            buf[k] = (char) tolower((unsigned char) buf[k]);
        }
        if ((n = curl_slist_append(l, buf)) == NULL) {
            goto nomem;
        }
        l = n;
    }
    return l;
nomem:
    curl_slist_free_all(l);
    return NULL;
}

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
    sp_buf_init(&c->raw);
    sp_buf_init(&c->flat);
    c->loop = loop;
    c->gzip = conf->gzip;
    c->grpc = conf->grpc;
    /* curl_version_info() builds its answer anew each time. */
    c->h2c_broken = conf->grpc && sp_h2c_reuse_broken();

    if (c->grpc) {
        c->headers = grpc_headers(conf);
        if (c->headers == NULL) {
            sp_http_client_free(c);
            return NULL;
        }
    } else {
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
    /* gRPC, and HTTP bodies in parts (sp_http_client_post_parts). */
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, on_upload);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, c);
    curl_easy_setopt(c->curl, CURLOPT_SEEKFUNCTION, on_upload_seek);
    curl_easy_setopt(c->curl, CURLOPT_SEEKDATA, c);
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
        if (c->h2c_mode != 0) {
            /* Not connecting any more. */
            sp_h2c_end(sp_http_loop_h2c(c->loop), c->h2c_url, c->h2c_mode,
                       0, 0);
        }
    }
    curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    free(c->ca_name);
    sp_buf_free(&c->gz);
    sp_buf_free(&c->raw);
    sp_buf_free(&c->flat);
    sp_buf_free(&c->resp.body);
    free(c);
}

/* How an h2c call goes with libcurl < 8 (h2c_reuse.h): prior knowledge
 * on a new connection, or HTTP/2 on the loop's live connection (or the
 * one being set up: PIPEWAIT), multiplexed. */
static void
h2c_set_mode(sp_http_client_t *c, int mode)
{
    int  prior = mode == SP_H2C_PRIOR;

    c->h2c_mode = mode;
    curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION,
                     prior ? (long) CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                           : (long) CURL_HTTP_VERSION_2_0);
    curl_easy_setopt(c->curl, CURLOPT_FRESH_CONNECT, (long) prior);
    curl_easy_setopt(c->curl, CURLOPT_PIPEWAIT, (long) !prior);
}

int
sp_http_client_post(sp_http_client_t *c, const char *url,
    const char *content_type, const void *body, size_t len,
    uint64_t timeout_ms, sp_http_done_fn done, void *ud)
{
    if (c->done != NULL) {
        return -1;
    }
    c->one.data = body;
    c->one.len = len;
    return sp_http_client_post_parts(c, url, content_type, &c->one, 1, len,
                                     timeout_ms, done, ud);
}

/* What libcurl 7.88 sends in the same write as the headers when it is
 * given as POSTFIELDS (its MAX_INITIAL_POST_SIZE). */
#define SP_HTTP_SMALL_BODY  (64 * 1024)

int
sp_http_client_post_parts(sp_http_client_t *c, const char *url,
    const char *content_type, const sp_http_part_t *parts, size_t nparts,
    size_t len, uint64_t timeout_ms, sp_http_done_fn done, void *ud)
{
    long         tls;
    size_t       i;
    const void  *body;

    if (c->done != NULL) {
        return -1;
    }
    if (nparts != 1 && (c->gzip || (!c->grpc && len < SP_HTTP_SMALL_BODY))) {
        /* One body: gzip takes it whole; a small one goes with the
         * headers (POSTFIELDS, HTTP). */
        sp_buf_reset(&c->flat);
        for (i = 0; i < nparts; i++) {
            sp_buf_append(&c->flat, parts[i].data, parts[i].len);
        }
        if (sp_buf_failed(&c->flat)) {
            return -1;
        }
        c->one.data = c->flat.data;
        c->one.len = c->flat.len;
        parts = &c->one;
        nparts = 1;
        len = c->flat.len;
    }
    body = nparts > 0 ? parts[0].data : "";
    c->resp.status = 0;
    c->resp.retry_after_ms = 0;
    c->resp.error[0] = '\0';
    c->curl_err[0] = '\0';
    c->resp.content_type[0] = '\0';
    c->resp.grpc = 0;
    c->resp.grpc_status = 0;
    c->resp.grpc_retry_info = 0;
    c->resp.grpc_message[0] = '\0';
    sp_buf_reset(&c->resp.body);

    if (c->gzip) {
        sp_buf_reset(&c->gz);
        if (sp_gzip_append(body, len, &c->gz) != 0) {
            return -1;
        }
        body = c->gz.data;
        len = c->gz.len;
        c->one.data = body;
        c->one.len = len;
        parts = &c->one;
        nparts = 1;
    }
    c->parts = parts;
    c->nparts = nparts;
    c->body_len = len;
    c->prefix_len = 0;

    if (c->grpc) {
        sp_grpc_response_reset(&c->grpc_resp);
        sp_buf_reset(&c->raw);
        if (len > UINT32_MAX) {
            return -1;      /* the prefix's length has 4 bytes */
        }
        sp_grpc_frame_header(c->prefix, len, c->gzip);
        c->prefix_len = SP_GRPC_FRAME_HEADER;
        len += SP_GRPC_FRAME_HEADER;
        content_type = "application/grpc";
        /* The server gives up when the client would: at most 8 digits. */
        if (timeout_ms <= 99999999) {
            snprintf(c->grpc_timeout, sizeof(c->grpc_timeout),
                     "grpc-timeout: %llum", (unsigned long long) timeout_ms);
        } else {
            snprintf(c->grpc_timeout, sizeof(c->grpc_timeout),
                     "grpc-timeout: %lluS",
                     (unsigned long long) (timeout_ms / 1000 > 99999999
                                           ? 99999999 : timeout_ms / 1000));
        }
        c->timeout_header.data = c->grpc_timeout;
        c->timeout_header.next = c->headers;
        tls = strncmp(url, "https:", 6) == 0;
        c->h2c_mode = 0;
        if (!tls && c->h2c_broken) {
            snprintf(c->h2c_url, sizeof(c->h2c_url), "%s", url);
            h2c_set_mode(c, sp_h2c_begin(sp_http_loop_h2c(c->loop),
                                         c->h2c_url, 0));
        } else {
            curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION,
                             tls ? (long) CURL_HTTP_VERSION_2TLS
                                 : (long) CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
            curl_easy_setopt(c->curl, CURLOPT_FRESH_CONNECT, 0L);
            /* Wait for the worker's one connection to the collector and
             * multiplex on it rather than open another. */
            curl_easy_setopt(c->curl, CURLOPT_PIPEWAIT, 1L);
        }
    }

    snprintf(c->ct, sizeof(c->ct), "%s: %s",
             c->grpc ? "content-type" : "Content-Type", content_type);
    c->ct_header.data = c->ct;
    c->ct_header.next = c->grpc ? &c->timeout_header : c->headers;

    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, &c->ct_header);
    upload_seek(c, 0);
    if (!c->grpc) {
        /* One part: libcurl sends a small body with the headers, a large
         * one from its upload buffer; parts: read from on_upload. */
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS,
                         nparts == 1 ? body : NULL);
    }
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
                     (long) (timeout_ms > 0 ? timeout_ms : 1));

    c->timeout_ms = timeout_ms;
    if (sp_http_loop_start(c->loop, &c->xfer) != 0) {
        if (c->h2c_mode != 0) {
            sp_h2c_end(sp_http_loop_h2c(c->loop), c->h2c_url, c->h2c_mode,
                       0, 0);
        }
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

/* The call's outcome into resp: its status and message, the response
 * message as the body, RetryInfo's delay as the Retry-After. */
static void
grpc_done(sp_http_client_t *c)
{
    sp_grpc_response_t  *g = &c->grpc_resp;

    sp_buf_reset(&c->resp.body);
    c->resp.grpc = 1;
    c->resp.grpc_status = sp_grpc_response_finish(g, c->resp.status,
                                                 c->raw.data, c->raw.len,
                                                 SP_HTTP_MAX_BODY,
                                                 &c->resp.body);
    snprintf(c->resp.grpc_message, sizeof(c->resp.grpc_message), "%s",
             g->message);
    c->resp.grpc_retry_info = g->retry_info;
    if (g->retry_info) {
        c->resp.retry_after_ms = g->retry_delay_ms;
    } else if (c->resp.status == 200) {
        c->resp.retry_after_ms = 0;     /* Retry-After is HTTP's, not gRPC's */
    }
}

/* libcurl < 8, h2c: ends the call's part in h2c_reuse.h, and re-sends
 * it at once with prior knowledge when it met a dead connection (an
 * Upgrade refused on the new one), within what is left of its timeout.
 * Returns 1 when it is under way again. */
static int
h2c_resend(sp_http_client_t *c, int curl_result)
{
    long        version = 0, conns = 0;
    curl_off_t  spent_us = 0;
    uint64_t    spent_ms;

    curl_easy_getinfo(c->curl, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &conns);
    if (!sp_h2c_end(sp_http_loop_h2c(c->loop), c->h2c_url, c->h2c_mode,
                    curl_result == CURLE_OK
                    && version == (long) CURL_HTTP_VERSION_2_0,
                    conns > 0))
    {
        return 0;
    }
    curl_easy_getinfo(c->curl, CURLINFO_TOTAL_TIME_T, &spent_us);
    spent_ms = (uint64_t) spent_us / 1000;
    if (spent_ms >= c->timeout_ms) {
        return 0;
    }
    h2c_set_mode(c, sp_h2c_begin(sp_http_loop_h2c(c->loop), c->h2c_url, 1));
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
                     (long) (c->timeout_ms - spent_ms));
    c->resp.status = 0;
    c->resp.retry_after_ms = 0;
    c->resp.content_type[0] = '\0';
    c->curl_err[0] = '\0';
    sp_grpc_response_reset(&c->grpc_resp);
    sp_buf_reset(&c->raw);
    upload_seek(c, 0);
    if (sp_http_loop_start(c->loop, &c->xfer) != 0) {
        sp_h2c_end(sp_http_loop_h2c(c->loop), c->h2c_url, c->h2c_mode, 0, 0);
        return 0;
    }
    return 1;
}

static void
transfer_done(sp_http_transfer_t *t, int curl_result)
{
    sp_http_client_t  *c = (sp_http_client_t *) t;
    sp_http_done_fn    done = c->done;
    const char        *msg;

    if (c->h2c_mode != 0 && h2c_resend(c, curl_result)) {
        return;
    }
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
        if (c->grpc) {
            grpc_done(c);
        }
    }
    if (done != NULL) {
        done(c->done_ud, &c->resp);
    }
}

int
sp_http_response_ok(const sp_http_response_t *r)
{
    if (r->grpc) {
        return r->grpc_status == SP_GRPC_OK;
    }
    return r->status >= 200 && r->status < 300;
}

int
sp_http_response_retryable(const sp_http_response_t *r)
{
    if (r->grpc) {
        return sp_grpc_retryable(r->grpc_status, r->grpc_retry_info);
    }
    return r->status == 0 || r->status == 429 || r->status == 502
           || r->status == 503 || r->status == 504;
}

const char *
sp_http_response_describe(const sp_http_response_t *r, char *buf,
    size_t len)
{
    if (r->grpc) {
        snprintf(buf, len, "gRPC status %d %s%s%s", r->grpc_status,
                 sp_grpc_status_name(r->grpc_status),
                 r->grpc_message[0] != '\0' ? ": " : "", r->grpc_message);
    } else if (r->status == 0) {
        snprintf(buf, len, "%s", r->error);
    } else {
        snprintf(buf, len, "%ld", r->status);
    }
    return buf;
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
