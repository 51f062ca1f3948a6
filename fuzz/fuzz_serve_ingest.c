/* spanprof serve's OTLP ingest (serve_ingest_traces / _profiles) into a
 * real store in a temporary directory: any body a client posts. The first
 * byte picks traces or profiles, protobuf or JSON. Properties: a refused
 * body stores nothing (accepted 0); an accepted one's counts add up; the
 * store keeps working (a flush succeeds). */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve/otlp_ingest.h"
#include "cli/serve/store.h"
#include "fuzz/fuzz.h"

static serve_store_t  *store;
static char            dir[64];

/* The store and its directory go at exit. */
static void
cleanup(void)
{
    char  cmd[100];

    serve_store_close(store);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) {
        return;
    }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char  err[256];

    /* In memory when /dev/shm is there: SQLite writes at every input. */
    strcpy(dir, "/dev/shm/spanprof-fuzz-ingest-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        strcpy(dir, "/tmp/spanprof-fuzz-ingest-XXXXXX");
        if (mkdtemp(dir) == NULL) {
            abort();
        }
    }
    store = serve_store_open(dir, err, sizeof(err));
    if (store == NULL) {
        abort();
    }
    atexit(cleanup);
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    serve_ingest_result_t  r;
    int                    rc, json;

    if (size < 1) {
        return 0;
    }
    json = (data[0] >> 1) & 1;
    rc = data[0] & 1
         ? serve_ingest_profiles(store, data + 1, size - 1, json, &r)
         : serve_ingest_traces(store, data + 1, size - 1, json, &r);
    if (rc != 0) {
        FUZZ_CHECK(r.accepted == 0 && r.error[0] != '\0');
    }
    FUZZ_CHECK(serve_store_flush(store) == 0);
    return 0;
}
