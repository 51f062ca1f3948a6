#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "cli/serve/json_out.h"
#include "cli/serve/otlp_json_decode.h"
#include "cli/serve/otlp_ingest.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue         kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue         any_t;
typedef Opentelemetry__Proto__Resource__V1__Resource       resource_t;
typedef Opentelemetry__Proto__Trace__V1__Span              pb_span_t;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest
                                                           trace_req_t;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
                                                           prof_req_t;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary
                                                           dict_t;
typedef Opentelemetry__Proto__Profiles__V1development__Profile   pb_profile_t;
typedef Opentelemetry__Proto__Profiles__V1development__Sample    pb_sample_t;

#define ANY(x)  OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

static const any_t *
attr(kv_t *const *kvs, size_t n, const char *key)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (kvs[i]->key != NULL && strcmp(kvs[i]->key, key) == 0) {
            return kvs[i]->value;
        }
    }
    return NULL;
}

static const char *
attr_str(kv_t *const *kvs, size_t n, const char *key)
{
    const any_t  *v = attr(kvs, n, key);

    return v != NULL && v->value_case == ANY(STRING_VALUE) ? v->string_value
                                                          : NULL;
}

static int64_t
attr_int(kv_t *const *kvs, size_t n, const char *key)
{
    const any_t  *v = attr(kvs, n, key);

    return v != NULL && v->value_case == ANY(INT_VALUE) ? v->int_value : 0;
}

/* {"key":value,...}: strings, integers (as numbers), booleans, doubles;
 * other kinds as their type's name. */
static void
attrs_json(sp_buf_t *out, kv_t *const *kvs, size_t n)
{
    size_t  i;

    sp_buf_append_char(out, '{');
    for (i = 0; i < n; i++) {
        const any_t  *v = kvs[i]->value;

        if (i > 0) {
            sp_buf_append_char(out, ',');
        }
        serve_json_str(out, kvs[i]->key != NULL ? kvs[i]->key : "");
        sp_buf_append_char(out, ':');
        if (v == NULL) {
            sp_buf_append_str(out, "null");
            continue;
        }
        switch (v->value_case) {
        case ANY(STRING_VALUE):
            serve_json_str(out, v->string_value);
            break;
        case ANY(BOOL_VALUE):
            sp_buf_append_str(out, v->bool_value ? "true" : "false");
            break;
        case ANY(INT_VALUE):
            sp_buf_appendf(out, "%" PRId64, v->int_value);
            break;
        case ANY(DOUBLE_VALUE):
            if (v->double_value == v->double_value
                && v->double_value < 1e300 && v->double_value > -1e300)
            {
                sp_buf_appendf(out, "%.17g", v->double_value);
            } else {
                sp_buf_append_str(out, "null");
            }
            break;
        default:
            serve_json_str(out, "(structured value)");
            break;
        }
    }
    sp_buf_append_char(out, '}');
}

static const char *
resource_service(const resource_t *r)
{
    return r != NULL ? attr_str(r->attributes, r->n_attributes,
                                "service.name")
                     : NULL;
}

/* --- traces -------------------------------------------------------------- */

static int
store_span(serve_store_t *s, const char *service, const pb_span_t *ps,
    sp_buf_t *scratch)
{
    serve_span_t  sp;
    const char   *addr;
    char          peer[300];
    int64_t       port;

    memset(&sp, 0, sizeof(sp));
    if (ps->trace_id.len != 16 || ps->span_id.len != 8) {
        return 1;
    }
    memcpy(sp.trace_id, ps->trace_id.data, 16);
    memcpy(sp.span_id, ps->span_id.data, 8);
    if (ps->parent_span_id.len == 8) {
        memcpy(sp.parent_id, ps->parent_span_id.data, 8);
        sp.has_parent = 1;
    }
    sp.service = service;
    sp.name = ps->name;
    sp.kind = (int) ps->kind;
    sp.route = attr_str(ps->attributes, ps->n_attributes, "http.route");
    sp.method = attr_str(ps->attributes, ps->n_attributes,
                         "http.request.method");
    sp.target = attr_str(ps->attributes, ps->n_attributes, "url.path");
    if (sp.target == NULL) {
        addr = attr_str(ps->attributes, ps->n_attributes, "server.address");
        port = attr_int(ps->attributes, ps->n_attributes, "server.port");
        if (addr != NULL) {
            if (port > 0) {
                snprintf(peer, sizeof(peer), "%.256s:%" PRId64, addr, port);
            } else {
                snprintf(peer, sizeof(peer), "%.256s", addr);
            }
            sp.target = peer;
        }
    }
    sp.http_status = (int) attr_int(ps->attributes, ps->n_attributes,
                                    "http.response.status_code");
    sp.error = ps->status != NULL
               && ps->status->code
                  == OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    sp.start_ns = (int64_t) (ps->start_time_unix_nano & INT64_MAX);
    sp.end_ns = (int64_t) (ps->end_time_unix_nano & INT64_MAX);
    if (sp.end_ns < sp.start_ns) {
        sp.end_ns = sp.start_ns;
    }
    sp_buf_reset(scratch);
    attrs_json(scratch, ps->attributes, ps->n_attributes);
    sp_buf_append_char(scratch, '\0');
    if (sp_buf_failed(scratch)) {
        return -1;
    }
    sp.attrs_json = (const char *) scratch->data;
    return serve_store_add_span(s, &sp);
}

/* The request message from protobuf or OTLP/JSON; NULL with r->error. */
static ProtobufCMessage *
decode(const ProtobufCMessageDescriptor *d, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r)
{
    ProtobufCMessage  *m;

    if (json) {
        return serve_otlp_json_decode(d, (const char *) body, len, r->error,
                                      sizeof(r->error));
    }
    m = protobuf_c_message_unpack(d, NULL, len, body);
    if (m == NULL) {
        snprintf(r->error, sizeof(r->error), "not an %s", d->short_name);
    }
    return m;
}

int
serve_ingest_traces(serve_store_t *s, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r)
{
    trace_req_t  *req;
    sp_buf_t      scratch;
    size_t        i, j, k;
    int           rc = 0, one;

    memset(r, 0, sizeof(*r));
    req = (trace_req_t *) decode(
        &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
        body, len, json, r);
    if (req == NULL) {
        return -1;
    }
    sp_buf_init(&scratch);
    if (serve_store_begin(s) != 0) {
        rc = -2;
    }
    for (i = 0; rc == 0 && i < req->n_resource_spans; i++) {
        const char  *service = resource_service(req->resource_spans[i]
                                                    ->resource);

        for (j = 0; rc == 0 && j < req->resource_spans[i]->n_scope_spans;
             j++)
        {
            Opentelemetry__Proto__Trace__V1__ScopeSpans  *ss =
                req->resource_spans[i]->scope_spans[j];

            for (k = 0; k < ss->n_spans; k++) {
                one = store_span(s, service, ss->spans[k], &scratch);
                if (one < 0) {
                    rc = -2;
                    break;
                }
                if (one > 0) {
                    r->rejected++;
                    snprintf(r->error, sizeof(r->error),
                             "a span without a 16-byte trace id and an "
                             "8-byte span id");
                } else {
                    r->accepted++;
                }
            }
        }
    }
    if (rc == 0 && serve_store_commit(s) != 0) {
        rc = -2;
    }
    if (rc != 0) {
        serve_store_rollback(s);
        r->rejected += r->accepted;
        r->accepted = 0;
        snprintf(r->error, sizeof(r->error), "cannot store: %s",
                 serve_store_error(s));
        rc = 0;
    }
    sp_buf_free(&scratch);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    return rc;
}

/* --- profiles ------------------------------------------------------------ */

static const char *
dict_str(const dict_t *d, int32_t i)
{
    return i >= 0 && (size_t) i < d->n_string_table ? d->string_table[i]
                                                    : NULL;
}

/* Appends the frame name of location li: its (innermost) function's name,
 * else "file+0xoffset", else "0xaddress". ';' would split the stack and
 * becomes ':'. */
static void
frame_name(sp_buf_t *out, const dict_t *d, int32_t li)
{
    Opentelemetry__Proto__Profiles__V1development__Location  *l;
    Opentelemetry__Proto__Profiles__V1development__Mapping   *m;
    const char  *name = NULL, *file, *base;
    size_t       start = out->len, i;

    if (li < 0 || (size_t) li >= d->n_location_table) {
        sp_buf_append_str(out, "[unknown]");
        return;
    }
    l = d->location_table[li];
    if (l->n_lines > 0 && l->lines[0]->function_index > 0
        && (size_t) l->lines[0]->function_index < d->n_function_table)
    {
        name = dict_str(d, d->function_table[l->lines[0]->function_index]
                               ->name_strindex);
    }
    if (name != NULL && name[0] != '\0') {
        sp_buf_append_str(out, name);
    } else if (l->mapping_index > 0
               && (size_t) l->mapping_index < d->n_mapping_table)
    {
        m = d->mapping_table[l->mapping_index];
        file = dict_str(d, m->filename_strindex);
        base = file != NULL ? strrchr(file, '/') : NULL;
        sp_buf_appendf(out, "%s+0x%" PRIx64,
                       base ? base + 1 : (file && *file ? file : "?"),
                       l->address - m->memory_start + m->file_offset);
    } else {
        sp_buf_appendf(out, "0x%" PRIx64, l->address);
    }
    for (i = start; i < out->len; i++) {
        if (out->data[i] == ';') {
            out->data[i] = ':';
        }
    }
}

/* The stack of sample ps, root first, joined by ';', NUL-terminated. */
static int
stack_text(sp_buf_t *out, const dict_t *d, const pb_sample_t *ps)
{
    Opentelemetry__Proto__Profiles__V1development__Stack  *st;
    size_t  i;

    sp_buf_reset(out);
    if (ps->stack_index < 0 || (size_t) ps->stack_index >= d->n_stack_table) {
        return -1;
    }
    st = d->stack_table[ps->stack_index];
    for (i = st->n_location_indices; i > 0; i--) {
        if (i != st->n_location_indices) {
            sp_buf_append_char(out, ';');
        }
        frame_name(out, d, st->location_indices[i - 1]);
    }
    if (st->n_location_indices == 0) {
        sp_buf_append_str(out, "[no frames]");
    }
    sp_buf_append_char(out, '\0');
    return sp_buf_failed(out) ? -2 : 0;
}

static int
is_all_zero(const uint8_t *p, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (p[i] != 0) {
            return 0;
        }
    }
    return 1;
}

static const char *
sample_attr_str(const dict_t *d, const pb_sample_t *ps, const char *key)
{
    size_t  i;

    for (i = 0; i < ps->n_attribute_indices; i++) {
        int32_t  a = ps->attribute_indices[i];
        Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit  *kv;
        const char  *k;

        if (a < 0 || (size_t) a >= d->n_attribute_table) {
            continue;
        }
        kv = d->attribute_table[a];
        k = dict_str(d, kv->key_strindex);
        if (k != NULL && strcmp(k, key) == 0 && kv->value != NULL
            && kv->value->value_case == ANY(STRING_VALUE))
        {
            return kv->value->string_value;
        }
    }
    return NULL;
}

/* Stores one profile's samples; 0, 1 when the profile is unusable, -1 on
 * a store failure. */
static int
store_profile(serve_store_t *s, const dict_t *d, const char *service,
    int64_t pid, const pb_profile_t *p, sp_buf_t *stack)
{
    serve_sample_t  sa;
    const char     *unit = NULL;
    int             cpu_values;
    size_t          i, j;

    if (p->sample_type != NULL) {
        unit = dict_str(d, p->sample_type->unit_strindex);
    }
    /* A sample's values are CPU nanoseconds (sample_type cpu/nanoseconds)
     * or counts of periods (samples/count). */
    cpu_values = unit != NULL && strcmp(unit, "nanoseconds") == 0;

    for (i = 0; i < p->n_samples; i++) {
        const pb_sample_t  *ps = p->samples[i];
        int64_t             sum = 0;

        if (stack_text(stack, d, ps) != 0) {
            return 1;
        }
        for (j = 0; j < ps->n_values; j++) {
            sum += ps->values[j];
        }
        memset(&sa, 0, sizeof(sa));
        sa.time_ns = (int64_t) (p->time_unix_nano & INT64_MAX);
        sa.duration_ns = (int64_t) (p->duration_nano & INT64_MAX);
        sa.service = service;
        sa.pid = pid;
        if (cpu_values) {
            sa.cpu_ns = sum;
            sa.count = ps->n_timestamps_unix_nano > 0
                       ? (int64_t) ps->n_timestamps_unix_nano
                       : (p->period > 0 ? sum / p->period : 0);
        } else {
            sa.count = ps->n_values > 0 ? sum
                                        : (int64_t) ps->n_timestamps_unix_nano;
            sa.cpu_ns = sa.count * p->period;
        }
        if (ps->link_index > 0 && (size_t) ps->link_index < d->n_link_table) {
            Opentelemetry__Proto__Profiles__V1development__Link  *l =
                d->link_table[ps->link_index];

            if (l->trace_id.len == 16 && l->span_id.len == 8
                && !is_all_zero(l->span_id.data, 8))
            {
                sa.trace_id = l->trace_id.data;
                sa.span_id = l->span_id.data;
            }
        }
        sa.span_name = sample_attr_str(d, ps, "span.name");
        sa.stack = (const char *) stack->data;
        if (serve_store_add_sample(s, &sa) != 0) {
            return -1;
        }
    }
    return 0;
}

int
serve_ingest_profiles(serve_store_t *s, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r)
{
    static const dict_t  empty =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    prof_req_t          *req;
    const dict_t        *d;
    sp_buf_t             stack;
    size_t               i, j, k;
    int                  rc = 0, one;

    memset(r, 0, sizeof(*r));
    req = (prof_req_t *) decode(
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
        body, len, json, r);
    if (req == NULL) {
        return -1;
    }
    d = req->dictionary != NULL ? req->dictionary : &empty;
    sp_buf_init(&stack);
    if (serve_store_begin(s) != 0) {
        rc = -1;
    }
    for (i = 0; rc == 0 && i < req->n_resource_profiles; i++) {
        Opentelemetry__Proto__Profiles__V1development__ResourceProfiles  *rp =
            req->resource_profiles[i];
        const char  *service = resource_service(rp->resource);
        int64_t      pid = rp->resource != NULL
                           ? attr_int(rp->resource->attributes,
                                      rp->resource->n_attributes,
                                      "process.pid")
                           : 0;

        for (j = 0; rc == 0 && j < rp->n_scope_profiles; j++) {
            for (k = 0; k < rp->scope_profiles[j]->n_profiles; k++) {
                one = store_profile(s, d, service, pid,
                                    rp->scope_profiles[j]->profiles[k],
                                    &stack);
                if (one < 0) {
                    rc = -1;
                    break;
                }
                if (one > 0) {
                    r->rejected++;
                    snprintf(r->error, sizeof(r->error),
                             "a sample's stack_index is out of range");
                } else {
                    r->accepted++;
                }
            }
        }
    }
    if (rc == 0 && serve_store_commit(s) != 0) {
        rc = -1;
    }
    if (rc != 0) {
        serve_store_rollback(s);
        r->rejected += r->accepted;
        r->accepted = 0;
        snprintf(r->error, sizeof(r->error), "cannot store: %s",
                 serve_store_error(s));
    }
    sp_buf_free(&stack);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    return 0;
}
