/*
 * One OTLP request stored for either listener (serve_http.c's OTLP/HTTP,
 * serve_grpc.c's OTLP/gRPC) and counted the same way: the spans and
 * profiles accepted and rejected are shared counters, a body that is not
 * the message is the listener's own.
 */

#include "cli/serve/serve.h"


int
serve_store_request(serve_t *sv, int traces, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r, uint64_t *bad)
{
    int  rc;

    rc = traces ? serve_ingest_traces(sv->store, body, len, json, r)
                : serve_ingest_profiles(sv->store, body, len, json, r);
    if (rc != 0) {
        (*bad)++;
    } else if (traces) {
        sv->counters.spans_accepted += r->accepted;
        sv->counters.spans_rejected += r->rejected;
    } else {
        sv->counters.profiles_accepted += r->accepted;
        sv->counters.profiles_rejected += r->rejected;
    }
    return rc;
}
