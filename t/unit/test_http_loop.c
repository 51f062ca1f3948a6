/* The HTTP loop's deadline against a real collector (t/grpc_receiver.py,
 * python3-grpcio): after a unary gRPC call is answered, the loop wants no
 * wake-up (its deadline is UINT64_MAX) while the HTTP/2 connection stays
 * open for the next call. libcurl 7.88 drops the timer it set when the
 * call ended without saying so; a loop that kept the deadline it was
 * last told woke its server's event loop every millisecond while idle.
 * Then a second call reuses the connection and ends the same way.
 * Skipped when /usr/bin/python3 has no grpc module. Run from the
 * repository's root (as prove does). */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "common/base/clock.h"
#include "common/export/grpc_call.h"
#include "common/export/http_client.h"
#include "common/export/http_loop.h"

static int
free_port(void)
{
    struct sockaddr_in  a;
    socklen_t           len = sizeof(a);
    int                 fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0
        || getsockname(fd, (struct sockaddr *) &a, &len) != 0)
    {
        return -1;
    }
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Starts t/grpc_receiver.py on port, storing calls under dir; its pid
 * once it said it listens, or -1. */
static pid_t
start_receiver(int port, const char *dir)
{
    int    p[2];
    pid_t  pid;
    char   ports[16], line[128];
    FILE  *f;

    if (pipe(p) != 0) {
        return -1;
    }
    snprintf(ports, sizeof(ports), "%d", port);
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl("/usr/bin/python3", "python3", "t/grpc_receiver.py", "--port",
              ports, "--dir", dir, (char *) NULL);
        _exit(127);
    }
    close(p[1]);
    f = fdopen(p[0], "r");
    if (pid < 0 || f == NULL || fgets(line, sizeof(line), f) == NULL
        || strstr(line, "listening on") == NULL)
    {
        if (pid > 0) {
            kill(pid, SIGTERM);
            waitpid(pid, NULL, 0);
        }
        return -1;
    }
    fclose(f);
    return pid;
}

typedef struct {
    int   done;
    long  status;
    int   grpc_status;
} outcome_t;

static void
on_done(void *ud, const sp_http_response_t *resp)
{
    outcome_t  *o = ud;

    o->done = 1;
    o->status = resp->status;
    o->grpc_status = resp->grpc_status;
}

/* One call, the loop polled until it is answered (at most 10 s), then for
 * 100 ms more; 1 when the loop wants no wake-up then. */
static int
call_then_idle(sp_http_loop_t *l, sp_http_client_t *c, const char *url,
    const char *what)
{
    static const uint8_t  msg[] = { 0x0a, 0x00 };   /* resource_spans {} */
    outcome_t             o = { 0, 0, -1 };
    uint64_t              end;

    ok(sp_http_client_post(c, url, NULL, msg, sizeof(msg), 5000, on_done,
                           &o) == 0, "%s: started", what);
    end = sp_mono_ns() + 10000000000ull;
    while (!o.done && sp_mono_ns() < end) {
        sp_http_loop_poll(l, -1, 100);
    }
    ok(o.done && o.status == 200 && o.grpc_status == 0,
       "%s: answered OK (HTTP %ld, gRPC status %d)", what, o.status,
       o.grpc_status);
    end = sp_mono_ns() + 100000000ull;
    while (sp_mono_ns() < end) {
        sp_http_loop_poll(l, -1, 20);
    }
    return sp_http_loop_deadline(l) == UINT64_MAX;
}

int
main(void)
{
    char                    dir[] = "/tmp/spanprof-test-http-loop-XXXXXX";
    char                    cmd[128], endpoint[64], *url;
    int                     port;
    pid_t                   recv;
    sp_http_loop_t         *l;
    sp_http_client_t       *c;
    sp_http_client_conf_t   conf = { .grpc = 1 };

    if (system("/usr/bin/python3 -c 'import grpc' 2>/dev/null") != 0) {
        printf("1..0 # SKIP no python3-grpcio\n");
        return 0;
    }
    port = free_port();
    if (mkdtemp(dir) == NULL || port < 0
        || (recv = start_receiver(port, dir)) < 0)
    {
        printf("1..0 # SKIP t/grpc_receiver.py did not start\n");
        return 0;
    }
    snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
    url = sp_grpc_method_url(endpoint, SP_GRPC_TRACES_METHOD);
    l = sp_http_loop_new();
    c = sp_http_client_new(l, &conf);
    ok(url != NULL && l != NULL && c != NULL, "loop and gRPC client");

    ok(call_then_idle(l, c, url, "first call"),
       "no wake-up wanted after the first call (HTTP/2 connection idle)");
    ok(call_then_idle(l, c, url, "second call"),
       "nor after the second, on the same connection");

    sp_http_client_free(c);
    sp_http_loop_free(l);
    free(url);
    kill(recv, SIGTERM);
    waitpid(recv, NULL, 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) {
        printf("# could not remove %s\n", dir);
    }
    return done_testing();
}
