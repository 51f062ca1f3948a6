/*
 * ExportTraceServiceRequest written to the protobuf wire format from spans
 * that are already encoded: this is the exporter's hot loop (it runs
 * on the worker's core), so per span it is one copy. Field numbers are
 * those of proto/opentelemetry/proto/collector/trace/v1/trace_service.proto
 * and trace/v1/trace.proto; the tests decode what it writes with protoc.
 */

#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/resource/v1/resource.pb-c.h"

#include "common/export/otlp_common.h"
#include "common/export/otlp_traces.h"
#include "common/export/wire.h"

/* The spans arrive encoded (span.c, on the request threads): a batch is
 * the request's headers, whose lengths are known once the records are
 * counted, then the records copied one after another. */

int
sp_otlp_traces_encode(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out)
{
    Opentelemetry__Proto__Resource__V1__Resource  *r;
    Opentelemetry__Proto__Common__V1__InstrumentationScope  *scope;
    size_t     i, res_len, scope_len, spans_len, ss_len, rs_len;
    uint8_t   *p;

    /* The resource and scope are a few dozen bytes a batch: protobuf-c. */
    r = sp_otlp_resource(a, res);
    scope = sp_otlp_scope(a);
    if (r == NULL || scope == NULL) {
        return -1;
    }
    res_len = protobuf_c_message_get_packed_size(&r->base);
    scope_len = protobuf_c_message_get_packed_size(&scope->base);
    spans_len = 0;
    for (i = 0; i < n; i++) {
        spans_len += spans[i]->len;
    }

    /* ExportTraceServiceRequest.resource_spans { resource, scope_spans {
     * scope, spans... } } */
    ss_len = sp_wire_lsize(scope_len) + spans_len;
    rs_len = sp_wire_lsize(res_len) + sp_wire_lsize(ss_len);
    if (sp_buf_reserve(out, sp_wire_lsize(rs_len)) != 0) {
        return -1;
    }
    p = out->data + out->len;
    *p++ = SP_TAG(1, SP_WT_LEN);            /* resource_spans */
    p = sp_wire_varint(p, rs_len);
    *p++ = SP_TAG(1, SP_WT_LEN);            /* .resource */
    p = sp_wire_varint(p, res_len);
    p += protobuf_c_message_pack(&r->base, p);
    *p++ = SP_TAG(2, SP_WT_LEN);            /* .scope_spans */
    p = sp_wire_varint(p, ss_len);
    *p++ = SP_TAG(1, SP_WT_LEN);            /* ..scope */
    p = sp_wire_varint(p, scope_len);
    p += protobuf_c_message_pack(&scope->base, p);
    for (i = 0; i < n; i++) {
        memcpy(p, spans[i]->data, spans[i]->len);
        p += spans[i]->len;
    }
    out->len = (size_t) (p - out->data);
    return 0;
}

int
sp_otlp_traces_fixed_init(sp_otlp_traces_fixed_t *f, sp_arena_t *a,
    const sp_resource_t *res)
{
    Opentelemetry__Proto__Resource__V1__Resource  *r;
    Opentelemetry__Proto__Common__V1__InstrumentationScope  *scope;

    memset(f, 0, sizeof(*f));
    r = sp_otlp_resource(a, res);
    scope = sp_otlp_scope(a);
    if (r == NULL || scope == NULL) {
        return -1;
    }
    f->res_len = protobuf_c_message_get_packed_size(&r->base);
    f->scope_len = protobuf_c_message_get_packed_size(&scope->base);
    f->res = malloc(f->res_len + 1);
    f->scope = malloc(f->scope_len + 1);
    if (f->res == NULL || f->scope == NULL) {
        sp_otlp_traces_fixed_free(f);
        return -1;
    }
    protobuf_c_message_pack(&r->base, f->res);
    protobuf_c_message_pack(&scope->base, f->scope);
    return 0;
}

void
sp_otlp_traces_fixed_free(sp_otlp_traces_fixed_t *f)
{
    free(f->res);
    free(f->scope);
    memset(f, 0, sizeof(*f));
}

size_t
sp_otlp_traces_heads(const sp_otlp_traces_fixed_t *f, size_t spans_len,
    uint8_t head1[SP_OTLP_TRACES_HEAD_MAX], size_t *head1_len,
    uint8_t head2[SP_OTLP_TRACES_HEAD_MAX], size_t *head2_len)
{
    size_t    ss_len = sp_wire_lsize(f->scope_len) + spans_len;
    size_t    rs_len = sp_wire_lsize(f->res_len) + sp_wire_lsize(ss_len);
    uint8_t  *p;

    /* As sp_otlp_traces_encode: resource_spans { resource, scope_spans {
     * scope, spans... } }, the messages' bytes between the heads. */
    p = head1;
    *p++ = SP_TAG(1, SP_WT_LEN);            /* resource_spans */
    p = sp_wire_varint(p, rs_len);
    *p++ = SP_TAG(1, SP_WT_LEN);            /* .resource */
    p = sp_wire_varint(p, f->res_len);
    *head1_len = (size_t) (p - head1);
    p = head2;
    *p++ = SP_TAG(2, SP_WT_LEN);            /* .scope_spans */
    p = sp_wire_varint(p, ss_len);
    *p++ = SP_TAG(1, SP_WT_LEN);            /* ..scope */
    p = sp_wire_varint(p, f->scope_len);
    *head2_len = (size_t) (p - head2);
    return sp_wire_lsize(rs_len);
}
