#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "cli/serve/otlp_ingest.h"
#include "cli/serve/otlp_reply.h"
#include "cli/serve/serve_grpc.h"
#include "cli/spanprof.h"

#define TRACES_PATH \
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define PROFILES_PATH \
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
    GRPC_OK = 0,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14
};

/* One call: its headers, its body as it arrives, then its answer. */
typedef struct gstream_s  gstream_t;
struct gstream_s {
    gstream_t  *prev, *next;    /* the connection's open calls */
    char      path[128];        /* cut; "" when longer than that */
    char      encoding[32];     /* grpc-encoding */
    unsigned  post:1;
    unsigned  grpc_type:1;      /* content-type application/grpc[+proto] */
    unsigned  too_large:1;      /* the body passed the limit: dropped */
    unsigned  overload:1;       /* SERVE_GRPC_MAX_BUFFERED reached */
    unsigned  answered:1;
    sp_buf_t  body;
    sp_buf_t  reply;            /* the length-prefixed response message */
    size_t    reply_off;
};

struct serve_grpc_conn_s {
    serve_t              *sv;
    nghttp2_session      *session;
    serve_grpc_write_pt   write;
    void                 *ud;
    gstream_t            *streams;      /* freed with the connection */
};

/* What the bodies of all connections hold (one thread: no lock). */
static size_t  buffered;

#define NV(n, v)  { (uint8_t *) (n), (uint8_t *) (v), sizeof(n) - 1, \
                    strlen(v), NGHTTP2_NV_FLAG_NONE }

static void
count(serve_t *sv, uint64_t *counter)
{
    pthread_mutex_lock(&sv->lock);
    (*counter)++;
    pthread_mutex_unlock(&sv->lock);
}

static void
stream_body_free(gstream_t *st)
{
    buffered -= st->body.len;
    sp_buf_free(&st->body);
    sp_buf_init(&st->body);
}

static void
stream_free(serve_grpc_conn_t *c, gstream_t *st)
{
    if (st->prev != NULL) {
        st->prev->next = st->next;
    } else {
        c->streams = st->next;
    }
    if (st->next != NULL) {
        st->next->prev = st->prev;
    }
    stream_body_free(st);
    sp_buf_free(&st->reply);
    free(st);
}

/* grpc-message is percent-encoded: what is not printable ASCII, and %. */
static void
percent_encode(char *out, size_t outlen, const char *msg)
{
    static const char  hex[] = "0123456789ABCDEF";
    size_t             n = 0;

    for (; *msg != '\0' && n + 4 < outlen; msg++) {
        unsigned char  ch = (unsigned char) *msg;

        if (ch < 0x20 || ch > 0x7e || ch == '%') {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        } else {
            out[n++] = (char) ch;
        }
    }
    out[n] = '\0';
}

/* A call that ends without a message: "Trailers-Only", the status in the
 * response's only HEADERS frame. */
static int
answer_status(nghttp2_session *s, int32_t id, int code, const char *msg)
{
    char  status[4], enc[400];

    snprintf(status, sizeof(status), "%d", code);
    percent_encode(enc, sizeof(enc), msg);
    {
        nghttp2_nv  nv[] = {
            NV(":status", "200"),
            NV("content-type", "application/grpc"),
            NV("grpc-accept-encoding", "identity,gzip"),
            NV("grpc-status", status),
            NV("grpc-message", enc),
        };

        return nghttp2_submit_response(s, id, nv, 5, NULL);
    }
}

/* Not a gRPC call at all: a plain HTTP status. */
static int
answer_http(nghttp2_session *s, int32_t id, const char *status)
{
    nghttp2_nv  nv[] = { NV(":status", status) };

    return nghttp2_submit_response(s, id, nv, 1, NULL);
}

/* The response message, then the trailers with grpc-status 0. */
static ssize_t
read_reply(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    gstream_t   *st = src->ptr;
    size_t       n = st->reply.len - st->reply_off;
    nghttp2_nv   trailers[] = {
        NV("grpc-status", "0"),
    };

    (void) ud;
    if (n > length) {
        n = length;
    }
    memcpy(buf, st->reply.data + st->reply_off, n);
    st->reply_off += n;
    if (st->reply_off == st->reply.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (nghttp2_submit_trailer(s, id, trailers, 1) != 0) {
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
    }
    return (ssize_t) n;
}

/* Unframes, unzips and stores the call's message; the status to answer
 * with (msg: why), or GRPC_OK with the response in st->reply. */
static int
handle_call(serve_t *sv, gstream_t *st, int traces, const char **msg,
    char *err, size_t errlen)
{
    const uint8_t          *p = st->body.data;
    size_t                  len = st->body.len, mlen;
    sp_buf_t                plain;
    serve_ingest_result_t   r;
    const char             *gzerr;
    int                     rc, code = GRPC_OK;

    count(sv, &sv->counters.grpc_requests);
    if (st->overload) {
        count(sv, &sv->counters.grpc_unavailable);
        *msg = "spanprof serve is holding too many requests: retry";
        return GRPC_UNAVAILABLE;
    }
    if (st->too_large) {
        count(sv, &sv->counters.grpc_too_large);
        *msg = "message larger than 16 MiB";
        return GRPC_RESOURCE_EXHAUSTED;
    }
    /* One message: a flag byte, its length (big-endian), the bytes. */
    if (len < 5 || p[0] > 1) {
        count(sv, &sv->counters.grpc_bad_requests);
        *msg = "not one length-prefixed gRPC message";
        return GRPC_INVALID_ARGUMENT;
    }
    mlen = (size_t) p[1] << 24 | (size_t) p[2] << 16 | (size_t) p[3] << 8
           | p[4];
    if (mlen != len - 5) {
        count(sv, &sv->counters.grpc_bad_requests);
        *msg = "the message's length prefix does not match its bytes";
        return GRPC_INVALID_ARGUMENT;
    }
    p += 5;
    len = mlen;
    sp_buf_init(&plain);
    if (st->body.data[0] == 1) {
        if (strcasecmp(st->encoding, "gzip") != 0) {
            if (st->encoding[0] == '\0'
                || strcasecmp(st->encoding, "identity") == 0)
            {
                count(sv, &sv->counters.grpc_bad_requests);
                *msg = "a compressed message without grpc-encoding";
                return GRPC_INTERNAL;
            }
            count(sv, &sv->counters.grpc_unsupported);
            *msg = "grpc-encoding must be gzip or identity";
            return GRPC_UNIMPLEMENTED;
        }
        if (cli_gunzip(p, len, SERVE_MAX_BODY, &plain, &gzerr) != 0) {
            sp_buf_free(&plain);
            if (strstr(gzerr, "size limit") != NULL) {
                count(sv, &sv->counters.grpc_too_large);
                *msg = "message larger than 16 MiB once unzipped";
                return GRPC_RESOURCE_EXHAUSTED;
            }
            count(sv, &sv->counters.grpc_bad_requests);
            snprintf(err, errlen, "bad gzip: %s", gzerr);
            *msg = err;
            return GRPC_INVALID_ARGUMENT;
        }
        p = plain.data;
        len = plain.len;
    }

    pthread_mutex_lock(&sv->lock);
    rc = serve_store_request(sv, traces, p, len, 0, &r,
                             &sv->counters.grpc_bad_requests);
    /* The store refused the whole request (a failed write): the client
     * keeps it and retries, where OTLP/HTTP answers a partial success. */
    if (rc == 0 && r.accepted == 0 && r.rejected > 0
        && strncmp(r.error, "cannot store", 12) == 0)
    {
        sv->counters.grpc_unavailable++;
        code = GRPC_UNAVAILABLE;
    }
    pthread_mutex_unlock(&sv->lock);
    sp_buf_free(&plain);

    if (rc != 0 || code != GRPC_OK) {
        snprintf(err, errlen, "%s", r.error);
        *msg = err;
        return rc != 0 ? GRPC_INVALID_ARGUMENT : code;
    }
    /* The response message, length-prefixed, uncompressed. */
    sp_buf_append(&st->reply, "\0\0\0\0\0", 5);
    serve_otlp_partial_success(&st->reply, r.rejected, r.error);
    if (sp_buf_failed(&st->reply)) {
        *msg = "out of memory";
        return GRPC_UNAVAILABLE;
    }
    mlen = st->reply.len - 5;
    st->reply.data[1] = (uint8_t) (mlen >> 24);
    st->reply.data[2] = (uint8_t) (mlen >> 16);
    st->reply.data[3] = (uint8_t) (mlen >> 8);
    st->reply.data[4] = (uint8_t) mlen;
    return GRPC_OK;
}

/* The client's side of the call is complete: answer it. */
static int
answer(serve_grpc_conn_t *c, int32_t id, gstream_t *st)
{
    serve_t               *sv = c->sv;
    const char            *msg = "";
    char                   err[300];
    int                    traces, code;
    nghttp2_data_provider  prd;
    nghttp2_nv             nv[] = {
        NV(":status", "200"),
        NV("content-type", "application/grpc"),
        NV("grpc-accept-encoding", "identity,gzip"),
    };

    if (st->answered) {
        return 0;
    }
    st->answered = 1;
    if (!st->post) {
        count(sv, &sv->counters.grpc_unsupported);
        return answer_http(c->session, id, "405");
    }
    if (!st->grpc_type) {
        count(sv, &sv->counters.grpc_unsupported);
        return answer_http(c->session, id, "415");
    }
    traces = strcmp(st->path, TRACES_PATH) == 0;
    if (!traces && strcmp(st->path, PROFILES_PATH) != 0) {
        count(sv, &sv->counters.grpc_unsupported);
        return answer_status(c->session, id, GRPC_UNIMPLEMENTED,
                             "unknown method: spanprof serve answers "
                             "TraceService/Export and "
                             "ProfilesService/Export");
    }
    code = handle_call(sv, st, traces, &msg, err, sizeof(err));
    stream_body_free(st);
    if (code != GRPC_OK) {
        return answer_status(c->session, id, code, msg);
    }
    prd.source.ptr = st;
    prd.read_callback = read_reply;
    return nghttp2_submit_response(c->session, id, nv, 3, &prd);
}

/* --- nghttp2's callbacks ----------------------------------------------- */

static ssize_t
on_send(nghttp2_session *s, const uint8_t *data, size_t length, int flags,
    void *ud)
{
    serve_grpc_conn_t  *c = ud;
    ssize_t             n;

    (void) s; (void) flags;
    n = c->write(c->ud, data, length);
    if (n < 0) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return n == 0 ? NGHTTP2_ERR_WOULDBLOCK : n;
}

static int
on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    serve_grpc_conn_t  *c = ud;
    gstream_t          *st;

    if (frame->hd.type != NGHTTP2_HEADERS
        || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    {
        return 0;
    }
    st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    sp_buf_init(&st->body);
    sp_buf_init(&st->reply);
    st->next = c->streams;
    if (c->streams != NULL) {
        c->streams->prev = st;
    }
    c->streams = st;
    nghttp2_session_set_stream_user_data(s, frame->hd.stream_id, st);
    return 0;
}

static int
is(const uint8_t *p, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(p, s, n) == 0;
}

static int
on_header(nghttp2_session *s, const nghttp2_frame *frame,
    const uint8_t *name, size_t namelen, const uint8_t *value,
    size_t valuelen, uint8_t flags, void *ud)
{
    gstream_t  *st;

    (void) flags; (void) ud;
    if (frame->hd.type != NGHTTP2_HEADERS
        || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    {
        return 0;
    }
    st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (st == NULL) {
        return 0;
    }
    if (is(name, namelen, ":method")) {
        st->post = is(value, valuelen, "POST");
    } else if (is(name, namelen, ":path")) {
        if (valuelen < sizeof(st->path)) {
            memcpy(st->path, value, valuelen);
            st->path[valuelen] = '\0';
        }
    } else if (is(name, namelen, "content-type")) {
        /* application/grpc, application/grpc+proto, ...;params */
        st->grpc_type = valuelen >= 16
                        && strncasecmp((const char *) value,
                                       "application/grpc", 16) == 0
                        && (valuelen == 16 || value[16] == '+'
                            || value[16] == ';');
    } else if (is(name, namelen, "grpc-encoding")) {
        if (valuelen < sizeof(st->encoding)) {
            memcpy(st->encoding, value, valuelen);
            st->encoding[valuelen] = '\0';
        } else {
            strcpy(st->encoding, "?");
        }
    }
    return 0;
}

static int
on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *ud)
{
    gstream_t  *st = nghttp2_session_get_stream_user_data(s, id);

    (void) flags; (void) ud;
    if (st == NULL || st->too_large || st->overload) {
        return 0;
    }
    /* The body is a 5-byte prefix and the message. */
    if (st->body.len + len > (size_t) SERVE_MAX_BODY + 5) {
        st->too_large = 1;
        stream_body_free(st);
        return 0;
    }
    if (buffered + len > (size_t) SERVE_GRPC_MAX_BUFFERED) {
        st->overload = 1;
        stream_body_free(st);
        return 0;
    }
    sp_buf_append(&st->body, data, len);
    if (sp_buf_failed(&st->body)) {
        st->overload = 1;
        stream_body_free(st);
        return 0;
    }
    buffered += len;
    return 0;
}

static int
on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    serve_grpc_conn_t  *c = ud;
    gstream_t          *st;

    if ((frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS)
        || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    {
        return 0;
    }
    st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (st == NULL) {
        return 0;
    }
    return answer(c, frame->hd.stream_id, st) == 0
           ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int
on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code,
    void *ud)
{
    gstream_t  *st = nghttp2_session_get_stream_user_data(s, id);

    (void) error_code;
    if (st != NULL) {
        nghttp2_session_set_stream_user_data(s, id, NULL);
        stream_free(ud, st);
    }
    return 0;
}

/* --- the connection ------------------------------------------------------ */

serve_grpc_conn_t *
serve_grpc_conn_new(serve_t *sv, serve_grpc_write_pt w, void *ud)
{
    serve_grpc_conn_t          *c;
    nghttp2_session_callbacks  *cb;
    nghttp2_settings_entry      iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, SERVE_GRPC_MAX_STREAMS },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20 },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384 },
    };
    int                         rc;

    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->sv = sv;
    c->write = w;
    c->ud = ud;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        free(c);
        return NULL;
    }
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
                                                              on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb,
                                                           on_stream_close);
    rc = nghttp2_session_server_new(&c->session, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        free(c);
        return NULL;
    }
    /* A connection window as large as two whole messages: an exporter's
     * batch is not held back by flow control. */
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 3) != 0
        || nghttp2_session_set_local_window_size(c->session,
               NGHTTP2_FLAG_NONE, 0, 2 * SERVE_MAX_BODY) != 0)
    {
        nghttp2_session_del(c->session);
        free(c);
        return NULL;
    }
    return c;
}

int
serve_grpc_conn_recv(serve_grpc_conn_t *c, const uint8_t *p, size_t n)
{
    ssize_t  rc = nghttp2_session_mem_recv(c->session, p, n);

    if (rc < 0 || (size_t) rc != n) {
        count(c->sv, &c->sv->counters.grpc_protocol_errors);
        return -1;
    }
    return 0;
}

int
serve_grpc_conn_send(serve_grpc_conn_t *c)
{
    return nghttp2_session_send(c->session) == 0 ? 0 : -1;
}

int
serve_grpc_conn_want_write(const serve_grpc_conn_t *c)
{
    return nghttp2_session_want_write(c->session);
}

int
serve_grpc_conn_alive(const serve_grpc_conn_t *c)
{
    return nghttp2_session_want_read(c->session)
           || nghttp2_session_want_write(c->session);
}

void
serve_grpc_conn_goaway(serve_grpc_conn_t *c)
{
    nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
}

void
serve_grpc_conn_free(serve_grpc_conn_t *c)
{
    if (c != NULL) {
        nghttp2_session_del(c->session);    /* no on_stream_close calls */
        while (c->streams != NULL) {
            stream_free(c, c->streams);
        }
        free(c);
    }
}
