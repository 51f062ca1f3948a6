/* Spans encoded as they are built (common/trace/span.c), queued, and batched into
 * an ExportTraceServiceRequest (common/export/otlp_traces_wire.c), read back by
 * real decoders: protobuf-c unpacks every field of every span (events with
 * attributes, status with a message, tracestate, a parent, bool, double and
 * negative int attributes, dropped counts, an overridden attribute, what
 * does not fit), protoc decodes the same bytes, and the file exporter's JSON
 * holds the ids in hex. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "common/export/otlp_traces.h"
#include "common/trace/span_queue.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Trace__V1__Span  pb_span_t;
typedef Opentelemetry__Proto__Common__V1__KeyValue  pb_kv_t;

static void
fill(sp_span_t *s, int i)
{
    uint8_t  tid[16], sid[8], pid[8];
    char     big[600];
    int      ev, k;

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
    /* The user's value replaces the module's. */
    sp_span_attr_set_str(s, "http.request.method", 19, "PURGE", 5);
    if (i == 2) {
        sp_span_set_status(s, SP_STATUS_ERROR, "upstream timed out", 18);
        ev = sp_span_add_event(s, "upstream.attempt", 16, s->start_ns + 5);
        sp_span_attr_str(s, SP_OWNER_EVENT(ev), "server.address", 14,
                         "127.0.0.1", 9);
        ev = sp_span_add_event(s, "", 0, s->start_ns + 9);
        sp_span_attr_int(s, SP_OWNER_EVENT(0), "server.port", 11, 8080);
        sp_span_attr_int(s, SP_OWNER_EVENT(5), "no.such.event", 13, 1);
        s->dropped_events = 1;
    } else if (i == 0) {
        sp_span_set_status(s, SP_STATUS_ERROR, NULL, 0);
        /* Values are cut at SP_SPAN_MAX_VALUE bytes; attributes beyond
         * SP_SPAN_MAX_ATTRS are counted, not kept. */
        memset(big, 'b', sizeof(big));
        sp_span_attr_cstr(s, "big", big, sizeof(big));
        /* An override found past entries with two-byte lengths. */
        sp_span_attr_cstr(s, "huge", big, 300);
        sp_span_attr_set_str(s, "huge", 4, "h", 1);
        for (k = 0; k < SP_SPAN_MAX_ATTRS; k++) {
            sp_span_attr_cint(s, "n", k);
        }
    }
}

static const pb_kv_t *
kv(pb_kv_t **a, size_t n, const char *key)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (strcmp(a[i]->key, key) == 0) {
            return a[i];
        }
    }
    return NULL;
}

static int
count_key(pb_kv_t **a, size_t n, const char *key)
{
    size_t  i;
    int     c = 0;

    for (i = 0; i < n; i++) {
        c += strcmp(a[i]->key, key) == 0;
    }
    return c;
}

static void
check_spans(Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req)
{
    pb_span_t      **sp, *s;
    const pb_kv_t   *a;
    uint8_t          want[16];

    ok(req->n_resource_spans == 1
       && req->resource_spans[0]->n_scope_spans == 1
       && req->resource_spans[0]->scope_spans[0]->n_spans == 3,
       "one resource, one scope, three spans");
    if (tap_failed) {
        return;
    }
    ok(kv(req->resource_spans[0]->resource->attributes,
          req->resource_spans[0]->resource->n_attributes, "service.name")
       != NULL, "resource has service.name");
    is_str(req->resource_spans[0]->scope_spans[0]->scope->name, "spanprof",
           "scope name");
    sp = req->resource_spans[0]->scope_spans[0]->spans;

    s = sp[0];
    memset(want, 0x10, 16);
    ok(s->trace_id.len == 16 && memcmp(s->trace_id.data, want, 16) == 0,
       "trace id");
    memset(want, 0x20, 8);
    ok(s->span_id.len == 8 && memcmp(s->span_id.data, want, 8) == 0,
       "span id");
    memset(want, 0x30, 8);
    ok(s->parent_span_id.len == 8
       && memcmp(s->parent_span_id.data, want, 8) == 0, "parent id");
    is_str(s->trace_state, "a=1,b=2", "tracestate");
    is_str(s->name, "GET /api/", "name");
    is_int(s->kind, 2, "SERVER");
    ok(s->start_time_unix_nano == 1700000000000000000ull
       && s->end_time_unix_nano == 1700000000123456789ull, "times");
    is_int(s->flags, 0x303, "flags: sampled, has-remote, remote");
    ok(s->status != NULL && s->status->code == 2
       && (s->status->message == NULL || s->status->message[0] == '\0'),
       "status error without a message");
    is_int(count_key(s->attributes, s->n_attributes, "http.request.method"),
           1, "the overridden attribute appears once");
    a = kv(s->attributes, s->n_attributes, "http.request.method");
    ok(a && a->value->value_case == 1
       && strcmp(a->value->string_value, "PURGE") == 0, "with the new value");
    a = kv(s->attributes, s->n_attributes, "neg");
    ok(a && a->value->value_case == 3 && a->value->int_value == -42,
       "negative int");
    a = kv(s->attributes, s->n_attributes, "zero");
    ok(a && a->value->value_case == 3 && a->value->int_value == 0,
       "zero int");
    a = kv(s->attributes, s->n_attributes, "flag");
    ok(a && a->value->value_case == 2 && a->value->bool_value == 1, "bool");
    a = kv(s->attributes, s->n_attributes, "ratio");
    ok(a && a->value->value_case == 4 && a->value->double_value == 0.25,
       "double");
    a = kv(s->attributes, s->n_attributes, "long");
    ok(a && strcmp(a->value->string_value, "x\"y\\z\n\xc3\xa9") == 0,
       "bytes of a string kept as they are");
    a = kv(s->attributes, s->n_attributes, "big");
    ok(a && strlen(a->value->string_value) == SP_SPAN_MAX_VALUE,
       "long value cut at %d bytes", SP_SPAN_MAX_VALUE);
    is_int(s->n_attributes, SP_SPAN_MAX_ATTRS, "at most %d attributes",
           SP_SPAN_MAX_ATTRS);
    is_int(count_key(s->attributes, s->n_attributes, "huge"), 1,
           "a long attribute overridden once");
    a = kv(s->attributes, s->n_attributes, "huge");
    ok(a && strcmp(a->value->string_value, "h") == 0, "with the new value");
    /* 7 attributes, "big" and "huge" took 9 places: 9 of the 40 "n" did
     * not fit. */
    is_int(s->dropped_attributes_count, 9, "the rest counted as dropped");

    s = sp[1];
    ok(s->parent_span_id.len == 0, "root span: no parent");
    is_int(s->flags, 0x103, "flags: has-remote, not remote");
    ok(s->status == NULL, "no status");
    ok(s->trace_state == NULL || s->trace_state[0] == '\0', "no tracestate");

    s = sp[2];
    is_int(s->kind, 3, "CLIENT");
    ok(s->status && s->status->code == 2
       && strcmp(s->status->message, "upstream timed out") == 0,
       "status message");
    is_int(s->n_events, 2, "two events");
    if (s->n_events == 2) {
        is_str(s->events[0]->name, "upstream.attempt", "event name");
        ok(s->events[0]->time_unix_nano == s->start_time_unix_nano + 5,
           "event time");
        is_int(s->events[0]->n_attributes, 2,
               "event attributes, one added after a later event");
        a = kv(s->events[0]->attributes, s->events[0]->n_attributes,
               "server.port");
        ok(a && a->value->int_value == 8080, "event int attribute");
        a = kv(s->events[0]->attributes, s->events[0]->n_attributes,
               "server.address");
        ok(a && strcmp(a->value->string_value, "127.0.0.1") == 0,
           "event string attribute");
        ok(s->events[1]->name == NULL || s->events[1]->name[0] == '\0',
           "unnamed event");
        is_int(s->events[1]->n_attributes, 0, "without attributes");
    }
    is_int(s->dropped_events_count, 1, "dropped events");
}

int
main(void)
{
    sp_span_t              *s = calloc(1, sizeof(sp_span_t));
    const sp_span_rec_t    *recs[3];
    sp_span_queue_t        *q = sp_span_queue_create(64, 0);
    sp_resource_t           res;
    sp_arena_t              a;
    sp_buf_t                wire, json;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req;
    char                    tmp[] = "/tmp/sp_wire_XXXXXX", cmd[512], out[32768];
    FILE                   *p;
    size_t                  n;
    int                     fd, i;

    sp_resource_init(&res, "test", "wire", "1.0");
    /* Through the queue, as the exporter gets them. */
    for (i = 0; i < 3; i++) {
        fill(s, i);
        ok(sp_span_queue_push(q, s) > 0, "span %d queued", i);
        memset(s, 0xa5, sizeof(*s));        /* the record stands alone */
        s->place = NULL;                    /* (a span not placed by the exporter) */
    }
    is_int(sp_span_queue_peek(q, recs, 3), 3, "three records");
    sp_arena_init(&a, 0);
    sp_buf_init(&wire);
    sp_buf_init(&json);

    ok(sp_otlp_traces_encode(&a, &res, recs, 3, &wire) == 0, "batch encoded");
    sp_arena_reset(&a);
    ok(sp_otlp_traces_encode_json(&a, &res, recs, 3, &json) == 0,
       "JSON encoded");
    sp_arena_reset(&a);

    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
              NULL, wire.len, wire.data);
    ok(req != NULL, "protobuf-c unpacks the batch");
    if (req != NULL) {
        check_spans(req);
        is_int(protobuf_c_message_get_packed_size(&req->base), wire.len,
               "canonical: protobuf-c packs it to the same size");
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            req, NULL);
    }
    ok(json.len > 0 && json.data[json.len - 1] == '\n'
       && memchr(json.data, '\n', json.len - 1) == NULL, "JSON on one line");
    sp_buf_append_char(&json, '\0');
    ok(strstr((char *) json.data,
              "\"traceId\":\"10101010101010101010101010101010\"") != NULL
       && strstr((char *) json.data, "\"spanId\":\"2020202020202020\"")
          != NULL, "JSON ids in hex");
    ok(strstr((char *) json.data, "\"stringValue\":\"PURGE\"") != NULL,
       "JSON attributes");

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
    ok(strstr(out, "int_value: -42") != NULL, "protoc: negative int");
    ok(strstr(out, "double_value: 0.25") != NULL, "protoc: double");
    ok(strstr(out, "message: \"upstream timed out\"") != NULL,
       "protoc: status message");
    ok(strstr(out, "flags: 771") != NULL, "protoc: flags with the remote bits");
    ok(strstr(out, "dropped_events_count: 1") != NULL,
       "protoc: dropped events");

    sp_span_queue_release(q, 3);
    sp_span_queue_destroy(q);
    sp_buf_free(&wire);
    sp_buf_free(&json);
    sp_arena_free(&a);
    sp_resource_free(&res);
    free(s);
    return done_testing();
}
