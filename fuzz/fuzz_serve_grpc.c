/* spanprof serve's OTLP/gRPC connection (serve_grpc.c on libnghttp2) with
 * a real store in a temporary directory: any bytes a client sends. The
 * first byte: bit 0 prepends the HTTP/2 client preface (so that inputs
 * reach the frames), bits 1-3 pick the size of the reads the bytes come
 * in. What serve answers is written nowhere, but all of it is asked for.
 * Properties: no crash, leak or UBSan report; once the connection is
 * refused nothing more is fed; the store keeps working (a flush
 * succeeds). */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve/serve_grpc.h"
#include "cli/serve/store.h"
#include "fuzz/fuzz.h"

static serve_t  sv;
static char     dir[64];

static void
cleanup(void)
{
    char  cmd[100];

    serve_store_close(sv.store);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) {
        return;
    }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char  err[256];

    strcpy(dir, "/dev/shm/spanprof-fuzz-grpc-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        strcpy(dir, "/tmp/spanprof-fuzz-grpc-XXXXXX");
        if (mkdtemp(dir) == NULL) {
            abort();
        }
    }
    sv.store = serve_store_open(dir, err, sizeof(err));
    if (sv.store == NULL) {
        abort();
    }
    pthread_mutex_init(&sv.lock, NULL);
    atexit(cleanup);
    return 0;
}

/* The client reads everything, at once. */
static ssize_t
sink(void *ud, const uint8_t *p, size_t n)
{
    (void) ud; (void) p;
    return (ssize_t) n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char   preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    serve_grpc_conn_t  *c;
    size_t              chunk, off = 0, n;
    int                 ok = 1;

    if (size < 1) {
        return 0;
    }
    c = serve_grpc_conn_new(&sv, sink, NULL);
    FUZZ_CHECK(c != NULL);
    chunk = (size_t) 1 << (((data[0] >> 1) & 7) * 2);     /* 1 .. 16384 */
    if (data[0] & 1) {
        ok = serve_grpc_conn_recv(c, (const uint8_t *) preface,
                                  sizeof(preface) - 1) == 0;
    }
    data++;
    size--;
    while (ok && off < size) {
        n = size - off < chunk ? size - off : chunk;
        ok = serve_grpc_conn_recv(c, data + off, n) == 0
             && serve_grpc_conn_send(c) == 0;
        off += n;
    }
    serve_grpc_conn_goaway(c);
    (void) serve_grpc_conn_send(c);
    serve_grpc_conn_free(c);
    FUZZ_CHECK(serve_store_flush(sv.store) == 0);
    return 0;
}
