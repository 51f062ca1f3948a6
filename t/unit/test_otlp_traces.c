/* The wire-format traces encoder against protobuf-c: spans with every kind
 * of field (events with attributes, status with a message, tracestate, a
 * parent, bool/double/negative int attributes, dropped counts) are encoded
 * straight to protobuf; protobuf-c's decoder unpacks them, and the message
 * it gets, written as OTLP/JSON, must equal what the JSON exporter writes
 * for the same spans from its protobuf-c message tree. protoc must decode
 * the bytes too. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "common/otlp_json.h"
#include "common/otlp_traces.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

static void
fill(sp_span_t *s, int i)
{
    uint8_t  tid[16], sid[8], pid[8];
    int      ev;

    memset(tid, 0x10 + i, sizeof(tid));
    memset(sid, 0x20 + i, sizeof(sid));
    memset(pid, 0x30 + i, sizeof(pid));
    sp_span_init(s, i ? SP_SPAN_KIND_CLIENT : SP_SPAN_KIND_SERVER, tid, sid,
                 i == 1 ? NULL : pid, i == 0, 0x03,
                 1700000000000000000ull + (uint64_t) i);
    s->end_ns = s->start_ns + 123456789;
    sp_span_set_name(s, "GET /api/", 9);
    if (i == 0) {
        sp_span_set_tracestate(s, "a=1,b=2", 7);
    }
    sp_span_attr_cstr(s, "http.request.method", "GET", 3);
    sp_span_attr_cint(s, "http.response.status_code", 503);
    sp_span_attr_int(s, SP_OWNER_SPAN, "neg", 3, -42);
    sp_span_attr_int(s, SP_OWNER_SPAN, "zero", 4, 0);
    sp_span_attr_bool(s, SP_OWNER_SPAN, "flag", 4, 1);
    sp_span_attr_double(s, SP_OWNER_SPAN, "ratio", 5, 0.25);
    sp_span_attr_cstr(s, "long", "x\"y\\z\n\xc3\xa9", 8);
    if (i == 2) {
        sp_span_set_status(s, SP_STATUS_ERROR, "upstream timed out", 18);
        ev = sp_span_add_event(s, "upstream.attempt", 16, s->start_ns + 5);
        sp_span_attr_str(s, SP_OWNER_EVENT(ev), "server.address", 14,
                         "127.0.0.1", 9);
        sp_span_attr_int(s, SP_OWNER_EVENT(ev), "server.port", 11, 8080);
        ev = sp_span_add_event(s, "", 0, s->start_ns + 9);
        s->dropped_attrs = 3;
        s->dropped_events = 1;
        s->dropped_event_attrs[0] = 2;
    } else if (i == 0) {
        sp_span_set_status(s, SP_STATUS_ERROR, NULL, 0);
    }
}

int
main(void)
{
    sp_span_buf_t *bufs = calloc(3, sizeof(sp_span_buf_t));
    void          *recs[3];
    sp_span_t     *ptrs[3];
    sp_resource_t  res;
    sp_arena_t     a;
    sp_buf_t       wire, json_direct, json_roundtrip;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req;
    char           tmp[] = "/tmp/sp_wire_XXXXXX", cmd[512], out[16384];
    FILE          *p;
    size_t         n;
    int            fd, i;

    sp_resource_init(&res, "test", "wire", "1.0");
    /* Encoded from the compact queue records, as the exporter does. */
    for (i = 0; i < 3; i++) {
        fill(sp_span_buf_init(&bufs[i]), i);
        recs[i] = aligned_alloc(8, (sp_span_record_size(&bufs[i].span) + 7)
                                   & ~(size_t) 7);
        ptrs[i] = sp_span_record_write(recs[i], &bufs[i].span);
        memset(&bufs[i], 0xa5, sizeof(bufs[i]));   /* the record stands alone */
    }
    sp_arena_init(&a, 0);
    sp_buf_init(&wire);
    sp_buf_init(&json_direct);
    sp_buf_init(&json_roundtrip);

    ok(sp_otlp_traces_encode(&a, &res, ptrs, 3, &wire) == 0, "wire encoded");
    sp_arena_reset(&a);
    ok(sp_otlp_traces_encode_json(&a, &res, ptrs, 3, &json_direct) == 0,
       "JSON encoded from the message tree");
    sp_arena_reset(&a);

    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
              NULL, wire.len, wire.data);
    ok(req != NULL, "protobuf-c unpacks the wire bytes");
    if (req != NULL) {
        ok(sp_otlp_json_encode(&req->base, &json_roundtrip) == 0,
           "re-encoded as JSON");
        sp_buf_append_char(&json_roundtrip, '\n');
        ok(json_roundtrip.len == json_direct.len
           && memcmp(json_roundtrip.data, json_direct.data, json_direct.len) == 0,
           "same message as the protobuf-c encoding");
        if (tap_failed) {
            printf("# direct:    %.*s# roundtrip: %.*s", (int) json_direct.len,
                   json_direct.data, (int) json_roundtrip.len,
                   json_roundtrip.data);
        }
        is_int(protobuf_c_message_get_packed_size(&req->base), wire.len,
               "canonical: protobuf-c packs it to the same size");
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            req, NULL);
    }

    fd = mkstemp(tmp);
    n = (size_t) write(fd, wire.data, wire.len);
    close(fd);
    snprintf(cmd, sizeof(cmd), "protoc --decode=opentelemetry.proto.collector."
             "trace.v1.ExportTraceServiceRequest -I proto opentelemetry/proto/"
             "collector/trace/v1/trace_service.proto < %s", tmp);
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
    out[n] = '\0';
    ok(p != NULL && pclose(p) == 0, "protoc decodes it");
    unlink(tmp);
    ok(strstr(out, "int_value: -42") != NULL, "negative int");
    ok(strstr(out, "double_value: 0.25") != NULL, "double");
    ok(strstr(out, "message: \"upstream timed out\"") != NULL, "status message");
    ok(strstr(out, "flags: 771") != NULL, "flags with the remote bits");
    ok(strstr(out, "dropped_events_count: 1") != NULL, "dropped events");

    sp_buf_free(&wire);
    sp_buf_free(&json_direct);
    sp_buf_free(&json_roundtrip);
    sp_arena_free(&a);
    sp_resource_free(&res);
    for (i = 0; i < 3; i++) {
        free(recs[i]);
    }
    free(bufs);
    return done_testing();
}
