/* sp_http_client_post_parts over HTTP/1.1, against a plain socket server
 * in a thread that stores each request's body: a body of many parts of
 * 64 KiB and more (libcurl reads them from the client's callback into its
 * upload buffer), a small one (put together and sent with the headers),
 * a one-part post after them on the same client (POSTFIELDS again), each
 * received byte for byte as the parts' concatenation. */

#define _GNU_SOURCE     /* strcasestr */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "common/base/clock.h"
#include "common/export/http_client.h"
#include "common/export/http_loop.h"

#define MAX_BODY  (1024 * 1024)

static int            listen_fd;
static unsigned char  got[MAX_BODY];
static size_t         got_len;
static int            got_requests;
static pthread_mutex_t  mu = PTHREAD_MUTEX_INITIALIZER;

/* Reads requests on one keep-alive connection at a time, answers 200. */
static void *
server(void *arg)
{
    static char  buf[MAX_BODY + 8192];
    int          fd;
    size_t       have, need, hlen, clen;
    ssize_t      r;
    char        *end, *cl;

    for ( ;; ) {
        fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) {
            return NULL;
        }
        have = 0;
        for ( ;; ) {
            buf[have] = '\0';
            end = strstr(buf, "\r\n\r\n");
            if (end == NULL) {
                r = read(fd, buf + have, sizeof(buf) - 1 - have);
                if (r <= 0) {
                    break;
                }
                have += (size_t) r;
                continue;
            }
            hlen = (size_t) (end - buf) + 4;
            cl = strcasestr(buf, "\r\nContent-Length:");
            clen = cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
            need = hlen + clen;
            while (have < need) {
                r = read(fd, buf + have, sizeof(buf) - 1 - have);
                if (r <= 0) {
                    break;
                }
                have += (size_t) r;
            }
            if (have < need || clen > MAX_BODY) {
                break;
            }
            pthread_mutex_lock(&mu);
            memcpy(got, buf + hlen, clen);
            got_len = clen;
            got_requests++;
            pthread_mutex_unlock(&mu);
            if (write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38)
                != 38)
            {
                break;
            }
            memmove(buf, buf + need, have - need);
            have -= need;
        }
        close(fd);
    }
    return arg;
}

static void
on_done(void *ud, const sp_http_response_t *resp)
{
    *(long *) ud = resp->status;
}

/* Posts the parts, waits for the answer; 1 when the server got exactly
 * their concatenation. */
static int
post(sp_http_loop_t *l, sp_http_client_t *c, const char *url,
    const sp_http_part_t *parts, size_t nparts, const char *what)
{
    static unsigned char  want[MAX_BODY];
    size_t                i, len = 0;
    long                  status = -1;
    uint64_t              end;
    int                   same, before;

    for (i = 0; i < nparts; i++) {
        memcpy(want + len, parts[i].data, parts[i].len);
        len += parts[i].len;
    }
    pthread_mutex_lock(&mu);
    before = got_requests;
    pthread_mutex_unlock(&mu);
    ok((nparts == 1
        ? sp_http_client_post(c, url, "application/x-protobuf",
                              parts[0].data, parts[0].len, 5000, on_done,
                              &status)
        : sp_http_client_post_parts(c, url, "application/x-protobuf", parts,
                                    nparts, len, 5000, on_done, &status))
       == 0, "%s: started", what);
    end = sp_mono_ns() + 10000000000ull;
    while (status == -1 && sp_mono_ns() < end) {
        sp_http_loop_poll(l, -1, 100);
    }
    is_int(status, 200, "%s: answered", what);
    pthread_mutex_lock(&mu);
    same = got_requests == before + 1 && got_len == len
           && memcmp(got, want, len) == 0;
    pthread_mutex_unlock(&mu);
    ok(same, "%s: %zu bytes in %zu parts received as one body", what, len,
       nparts);
    return same;
}

int
main(void)
{
    static unsigned char   pool[MAX_BODY];
    static sp_http_part_t  parts[2000];
    struct sockaddr_in     a;
    socklen_t              alen = sizeof(a);
    pthread_t              th;
    sp_http_loop_t        *l;
    sp_http_client_t      *c;
    sp_http_client_conf_t  conf = { .connect_timeout_ms = 2000 };
    char                   url[64];
    size_t                 i, off, n;

    for (i = 0; i < sizeof(pool); i++) {
        pool[i] = (unsigned char) (i * 7 + (i >> 8) * 13);
    }
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *) &a, sizeof(a))
        || listen(listen_fd, 8)
        || getsockname(listen_fd, (struct sockaddr *) &a, &alen))
    {
        printf("1..0 # SKIP no loopback socket\n");
        return 0;
    }
    pthread_create(&th, NULL, server, NULL);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces",
             ntohs(a.sin_port));
    l = sp_http_loop_new();
    c = sp_http_client_new(l, &conf);
    ok(l != NULL && c != NULL, "loop and client");

    /* A batch's shape: two short heads around two fixed parts, then 1,500
     * records of varied length, ~600 KiB in all. */
    parts[0] = (sp_http_part_t) { pool + 11, 7 };
    parts[1] = (sp_http_part_t) { pool + 100, 60 };
    parts[2] = (sp_http_part_t) { pool + 3, 9 };
    parts[3] = (sp_http_part_t) { pool + 500, 20 };
    for (i = 0, off = 1000, n = 4; i < 1500; i++, n++) {
        parts[n].data = pool + off;
        parts[n].len = 150 + (i * 37) % 500;
        off += parts[n].len + (i % 3);
    }
    post(l, c, url, parts, n, "many parts");
    post(l, c, url, parts, 40, "40 parts under 64 KiB");
    post(l, c, url, parts, n, "many parts again, the connection reused");
    post(l, c, url, parts + 4, 1, "one part");
    parts[0] = (sp_http_part_t) { pool, 300000 };
    parts[1] = (sp_http_part_t) { pool + 300000, 0 };
    parts[2] = (sp_http_part_t) { pool + 400000, 200000 };
    post(l, c, url, parts, 3, "large parts and an empty one");

    sp_http_client_free(c);
    sp_http_loop_free(l);
    shutdown(listen_fd, SHUT_RDWR);
    close(listen_fd);
    pthread_join(th, NULL);
    return done_testing();
}
