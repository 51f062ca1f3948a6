#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "common/export/otlp_common.h"
#include "common/export/otlp_json.h"
#include "common/export/otlp_traces.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest
    pb_request_t;

static void *
arena_alloc(void *a, size_t n)
{
    return sp_arena_alloc(a, n);
}

static void
arena_keep(void *a, void *p)
{
    /* freed with the arena, after the batch */
}

/* The file exporter's OTLP/JSON is made from the protobuf bytes (the spans
 * arrive encoded): protobuf-c decodes them into a message tree in the
 * arena, which the descriptor-driven JSON writer walks. */
int
sp_otlp_traces_encode_json(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out)
{
    ProtobufCAllocator  alloc = { arena_alloc, arena_keep, a };
    sp_buf_t            pb;
    pb_request_t       *req;
    int                 rc;

    sp_buf_init(&pb);
    rc = sp_otlp_traces_encode(a, res, spans, n, &pb);
    req = rc == 0
          ? opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                &alloc, pb.len, pb.data)
          : NULL;
    sp_buf_free(&pb);
    if (req == NULL || sp_otlp_json_encode(&req->base, out) != 0) {
        return -1;
    }
    sp_buf_append_char(out, '\n');
    return sp_buf_failed(out) ? -1 : 0;
}

int
sp_otlp_traces_parse_response(const uint8_t *body, size_t len,
    int64_t *rejected, char *msg, size_t msglen)
{
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse  *r;

    *rejected = 0;
    if (msglen > 0) {
        msg[0] = '\0';
    }
    r = opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
            NULL, len, body);
    if (r == NULL) {
        return -1;
    }
    if (r->partial_success != NULL) {
        *rejected = r->partial_success->rejected_spans;
        if (msglen > 0 && r->partial_success->error_message != NULL) {
            strncpy(msg, r->partial_success->error_message, msglen - 1);
            msg[msglen - 1] = '\0';
        }
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
        r, NULL);
    return 0;
}
