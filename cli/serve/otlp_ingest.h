#ifndef SERVE_OTLP_INGEST_H
#define SERVE_OTLP_INGEST_H

/* OTLP requests (protobuf, already gunzip'd) into the store: an
 * ExportTraceServiceRequest's spans, an ExportProfilesServiceRequest's
 * samples (stacks as function names, labelled by their link's trace and
 * span). One request is one transaction: all of it or none. */

#include <stddef.h>
#include <stdint.h>

#include "cli/serve/store.h"

/* The most a sample may stand for: 2^46 in its unit (19.5 hours of
 * nanoseconds, 64 TiB) and 2^40 samples; more is refused (here and by
 * --import). The bound keeps the API's sums over millions of stored
 * samples far below INT64_MAX. */
#define SERVE_SAMPLE_MAX_VALUE  ((int64_t) 1 << 46)
#define SERVE_SAMPLE_MAX_COUNT  ((int64_t) 1 << 40)

typedef struct {
    uint64_t  accepted;     /* spans, or profiles */
    uint64_t  rejected;     /* spans or profiles that could not be stored */
    char      error[256];   /* why, when rejected or on failure */
} serve_ingest_result_t;

/* body is protobuf, or OTLP/JSON when json (otlp_json_decode.h). 0 when
 * decoded (r says what was stored), -1 when the body is not the message
 * (r->error says why; nothing stored). */
int serve_ingest_traces(serve_store_t *s, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r);
int serve_ingest_profiles(serve_store_t *s, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r);

#endif
