/*
 * bench/receiver.c - a minimal OTLP/HTTP sink for the benchmarks.
 *
 *   receiver --port P [--dump DIR]
 *
 * One thread, epoll, 127.0.0.1:P only. Every request is answered
 * "200 OK" with an empty body (an empty ExportTraceServiceResponse), with
 * HTTP/1.1 keep-alive. Bodies sent to .../v1/traces are not stored: their
 * spans are counted by walking the protobuf wire format
 * (ExportTraceServiceRequest.resource_spans[].scope_spans[].spans[]), which
 * costs far less than decoding them; an OTLP/JSON body (protocol http/json,
 * starting with '{') by counting its "spanId" keys (spanprof's spans have
 * no links). With --dump DIR each trace body is also
 * written to DIR/NNNNNN.pb, so the count can be checked against protoc.
 *
 * "GET /stats" answers one line of counters:
 *   requests=N traces=N spans=N profiles=N bytes=N bad=N
 * (the stats request itself is not counted). SIGTERM/SIGINT end it.
 */

#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int       fd;
    uint8_t  *buf;
    size_t    len, cap;
} conn_t;

static volatile sig_atomic_t  stop;
static const char            *dump_dir;
static unsigned long long     n_requests, n_traces, n_spans, n_profiles,
                              n_bytes, n_bad, n_dumped;

static void on_signal(int sig) { stop = 1; }

/* ---- protobuf wire walking ------------------------------------------------ */

static int
varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t  x = 0;
    int       shift;

    for (shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t  b = *(*p)++;

        x |= (uint64_t) (b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Counts the length-delimited field `want` at nesting `level` (0: the
 * request, field 1 resource_spans; 1: ResourceSpans, field 2 scope_spans;
 * 2: ScopeSpans, field 2 spans). -1 when the bytes are not protobuf. */
static long
count_spans(const uint8_t *p, const uint8_t *end, int level)
{
    static const unsigned  field[3] = { 1, 2, 2 };
    uint64_t               key, len;
    long                   total = 0, n;

    while (p < end) {
        if (varint(&p, end, &key) != 0) {
            return -1;
        }
        switch (key & 7) {
        case 0:
            if (varint(&p, end, &len) != 0) {
                return -1;
            }
            break;
        case 1:
            if (end - p < 8) {
                return -1;
            }
            p += 8;
            break;
        case 5:
            if (end - p < 4) {
                return -1;
            }
            p += 4;
            break;
        case 2:
            if (varint(&p, end, &len) != 0 || len > (uint64_t) (end - p)) {
                return -1;
            }
            if ((key >> 3) == field[level]) {
                if (level == 2) {
                    total++;
                } else {
                    n = count_spans(p, p + len, level + 1);
                    if (n < 0) {
                        return -1;
                    }
                    total += n;
                }
            }
            p += len;
            break;
        default:
            return -1;
        }
    }
    return total;
}

/* Spans of an OTLP/JSON ExportTraceServiceRequest: one "spanId" key each
 * (a parentSpanId key is "parentSpanId"; a quote inside a string value is
 * escaped, so no value matches). */
static long
count_json_spans(const uint8_t *p, const uint8_t *end)
{
    static const char  key[] = "\"spanId\":";
    const uint8_t     *q;
    long               total = 0;

    while ((q = memmem(p, (size_t) (end - p), key, sizeof(key) - 1)) != NULL) {
        total++;
        p = q + sizeof(key) - 1;
    }
    return total;
}

/* ---- HTTP ----------------------------------------------------------------- */

static void
send_all(int fd, const char *p, size_t n)
{
    ssize_t  w;

    while (n > 0) {
        w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return;     /* the peer will see a reset or close */
        }
        p += w;
        n -= (size_t) w;
    }
}

static void
dump(const uint8_t *body, size_t len)
{
    char   path[4096];
    FILE  *f;

    snprintf(path, sizeof(path), "%s/%06llu.pb", dump_dir, n_dumped++);
    f = fopen(path, "wb");
    if (f != NULL) {
        fwrite(body, 1, len, f);
        fclose(f);
    }
}

static const uint8_t *
find_crlfcrlf(const uint8_t *p, size_t n)
{
    return memmem(p, n, "\r\n\r\n", 4);
}

/* Handles every complete request in c->buf; 0 to go on, -1 to close. */
static int
process(conn_t *c)
{
    static const char  ok[] =
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
        "Content-Length: 0\r\n\r\n";
    const uint8_t     *hend, *line, *eol, *body;
    char               method[16], path[512], resp[512];
    size_t             hlen, clen, consumed;
    int                close_after, n;
    long               spans;

    for ( ;; ) {
        hend = find_crlfcrlf(c->buf, c->len);
        if (hend == NULL) {
            return c->len > 65536 ? -1 : 0;
        }
        hlen = (size_t) (hend - c->buf) + 4;

        if (sscanf((const char *) c->buf, "%15s %511s", method, path) != 2) {
            return -1;
        }
        clen = 0;
        close_after = 0;
        for (line = memchr(c->buf, '\n', hlen) + 1; line < hend;
             line = eol + 1)
        {
            eol = memchr(line, '\n', (size_t) (hend + 2 - line));
            if (eol == NULL) {
                break;
            }
            if (strncasecmp((const char *) line, "content-length:", 15) == 0) {
                clen = strtoull((const char *) line + 15, NULL, 10);
            } else if (strncasecmp((const char *) line,
                                   "transfer-encoding:", 18) == 0)
            {
                n_bad++;        /* libcurl sends Content-Length */
                return -1;
            } else if (strncasecmp((const char *) line, "connection:", 11) == 0
                       && memmem(line, (size_t) (eol - line), "close", 5))
            {
                close_after = 1;
            }
        }
        if (c->len < hlen + clen) {
            return 0;   /* body not complete yet */
        }
        body = c->buf + hlen;

        if (strcmp(path, "/stats") == 0) {
            char  text[256];

            n = snprintf(text, sizeof(text),
                         "requests=%llu traces=%llu spans=%llu profiles=%llu "
                         "bytes=%llu bad=%llu\n", n_requests, n_traces,
                         n_spans, n_profiles, n_bytes, n_bad);
            n = snprintf(resp, sizeof(resp),
                         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         "Content-Length: %d\r\n\r\n%s", n, text);
            send_all(c->fd, resp, (size_t) n);
        } else {
            n_requests++;
            n_bytes += clen;
            if (strstr(path, "/v1/traces") != NULL) {
                n_traces++;
                spans = clen > 0 && body[0] == '{'
                        ? count_json_spans(body, body + clen)
                        : count_spans(body, body + clen, 0);
                if (spans < 0) {
                    n_bad++;
                } else {
                    n_spans += (unsigned long long) spans;
                }
                if (dump_dir != NULL) {
                    dump(body, clen);
                }
            } else if (strstr(path, "profiles") != NULL) {
                n_profiles++;
            }
            send_all(c->fd, ok, sizeof(ok) - 1);
        }

        consumed = hlen + clen;
        memmove(c->buf, c->buf + consumed, c->len - consumed);
        c->len -= consumed;
        if (close_after) {
            return -1;
        }
    }
}

static int
conn_read(conn_t *c)
{
    ssize_t  r;
    uint8_t *nb;

    for ( ;; ) {
        if (c->cap - c->len < 65536) {
            nb = realloc(c->buf, c->cap * 2 + 65536);
            if (nb == NULL) {
                return -1;
            }
            c->buf = nb;
            c->cap = c->cap * 2 + 65536;
        }
        r = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (r > 0) {
            c->len += (size_t) r;
            if (process(c) != 0) {
                return -1;
            }
            continue;
        }
        if (r == 0) {
            return -1;
        }
        if (errno == EINTR) {
            continue;
        }
        return errno == EAGAIN ? 0 : -1;
    }
}

int
main(int argc, char **argv)
{
    struct sockaddr_in  sa;
    struct epoll_event  ev, events[64];
    int                 lfd, ep, port = 0, i, n, fd, one = 1;
    conn_t             *c;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            port = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
            dump_dir = argv[++i];
        } else {
            fprintf(stderr, "usage: %s --port P [--dump DIR]\n", argv[0]);
            return 2;
        }
    }
    if (port <= 0) {
        fprintf(stderr, "%s: --port is required\n", argv[0]);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t) port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *) &sa, sizeof(sa)) != 0
        || listen(lfd, 128) != 0)
    {
        fprintf(stderr, "%s: cannot listen on 127.0.0.1:%d: %s\n", argv[0],
                port, strerror(errno));
        return 1;
    }

    ep = epoll_create1(EPOLL_CLOEXEC);
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);

    while (!stop) {
        n = epoll_wait(ep, events, 64, 500);
        for (i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL) {
                while ((fd = accept4(lfd, NULL, NULL,
                                     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
                {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
                               sizeof(one));
                    c = calloc(1, sizeof(*c));
                    if (c == NULL) {
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    ev.events = EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            c = events[i].data.ptr;
            if (conn_read(c) != 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                free(c->buf);
                free(c);
            }
        }
    }
    fprintf(stderr, "receiver: requests=%llu traces=%llu spans=%llu "
            "profiles=%llu bytes=%llu bad=%llu\n", n_requests, n_traces,
            n_spans, n_profiles, n_bytes, n_bad);
    return 0;
}
