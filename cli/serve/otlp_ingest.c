#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "cli/serve/json_out.h"
#include "cli/serve/otlp_json_decode.h"
#include "cli/serve/otlp_ingest.h"
#include "cli/serve/wire_read.h"

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

static const char *
resource_service(const resource_t *r)
{
    return r != NULL ? attr_str(r->attributes, r->n_attributes,
                                "service.name")
                     : NULL;
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

/* --- traces ---------------------------------------------------------------
 * Read in place from the wire format: the hot path (a span is a few
 * hundred bytes; protobuf-c's unpack would allocate for every attribute). */

static int
slice_is(const serve_field_t *f, const char *s)
{
    size_t  n = strlen(s);

    return f->len == n && memcmp(f->data, s, n) == 0;
}

/* An attribute (KeyValue) of interest to the columns: its value when it is
 * a string (*str) or an integer (*num). */
static void
span_attr(serve_span_t *sp, const serve_field_t *kvf, serve_str_t *server,
    int64_t *port)
{
    serve_wire_t   w, vw;
    serve_field_t  f, key = { 0 }, val = { 0 };
    int            have_key = 0, have_val = 0;

    serve_wire_init(&w, kvf->data, kvf->len);
    while (serve_wire_next(&w, &f)) {
        if (f.num == 1 && f.type == 2) {
            key = f;
            have_key = 1;
        } else if (f.num == 2 && f.type == 2) {
            serve_wire_init(&vw, f.data, f.len);
            have_val = serve_wire_next(&vw, &val);
        }
    }
    if (!have_key || !have_val) {
        return;
    }
    if (val.num == 1 && val.type == 2) {            /* string_value */
        serve_str_t  v = { (const char *) val.data, val.len };

        if (slice_is(&key, "http.route")) {
            sp->route = v;
        } else if (slice_is(&key, "http.request.method")) {
            sp->method = v;
        } else if (slice_is(&key, "url.path")) {
            sp->target = v;
        } else if (slice_is(&key, "server.address")) {
            *server = v;
        }
    } else if (val.num == 3 && val.type == 0) {     /* int_value */
        if (slice_is(&key, "http.response.status_code")) {
            sp->http_status = (int) (int64_t) val.v;
        } else if (slice_is(&key, "server.port")) {
            *port = (int64_t) val.v;
        }
    }
}

/* One Span message: 0 stored, 1 refused (bad ids), -1 malformed or a store
 * failure (r->error says which). s NULL: read only, nothing stored. */
static int
ingest_span(serve_store_t *s, serve_str_t service, const uint8_t *p,
    size_t len, sp_buf_t *attrs, serve_ingest_result_t *r)
{
    serve_wire_t   w, sw;
    serve_field_t  f, g;
    serve_span_t   sp;
    serve_str_t    server = { NULL, 0 };
    int64_t        port = 0;
    char           peer[300];
    int            have_tid = 0, have_sid = 0;
    uint8_t        hdr[11];
    size_t         h;
    uint64_t       n;

    memset(&sp, 0, sizeof(sp));
    sp.service = service;
    sp_buf_reset(attrs);
    serve_wire_init(&w, p, len);
    while (serve_wire_next(&w, &f)) {
        switch (f.num) {
        case 1:
            if (f.type == 2 && f.len == 16) {
                memcpy(sp.trace_id, f.data, 16);
                have_tid = 1;
            }
            break;
        case 2:
            if (f.type == 2 && f.len == 8) {
                memcpy(sp.span_id, f.data, 8);
                have_sid = 1;
            }
            break;
        case 4:
            if (f.type == 2 && f.len == 8) {
                memcpy(sp.parent_id, f.data, 8);
                sp.has_parent = 1;
            }
            break;
        case 5:
            if (f.type == 2) {
                sp.name.p = (const char *) f.data;
                sp.name.len = f.len;
            }
            break;
        case 6:
            if (f.type == 0) {
                sp.kind = (int) f.v;
            }
            break;
        case 7:
            if (f.type == 1) {
                sp.start_ns = (int64_t) (f.v & INT64_MAX);
            }
            break;
        case 8:
            if (f.type == 1) {
                sp.end_ns = (int64_t) (f.v & INT64_MAX);
            }
            break;
        case 9:
            if (f.type == 2 && s != NULL) {
                span_attr(&sp, &f, &server, &port);
                /* Kept as the field it came as: tag, length, KeyValue. */
                h = 0;
                hdr[h++] = 0x4a;
                for (n = f.len; n >= 0x80; n >>= 7) {
                    hdr[h++] = (uint8_t) (n | 0x80);
                }
                hdr[h++] = (uint8_t) n;
                sp_buf_append(attrs, hdr, h);
                sp_buf_append(attrs, f.data, f.len);
            }
            break;
        case 15:
            if (f.type == 2) {
                serve_wire_init(&sw, f.data, f.len);
                while (serve_wire_next(&sw, &g)) {
                    if (g.num == 3 && g.type == 0 && g.v == 2) {
                        sp.error = 1;
                    }
                }
            }
            break;
        }
    }
    if (w.bad) {
        snprintf(r->error, sizeof(r->error), "a malformed Span");
        return -1;
    }
    if (!have_tid || !have_sid) {
        snprintf(r->error, sizeof(r->error), "a span without a 16-byte "
                 "trace id and an 8-byte span id");
        return 1;
    }
    if (sp.target.p == NULL && server.p != NULL) {
        if (port > 0) {
            snprintf(peer, sizeof(peer), "%.*s:%" PRId64,
                     (int) (server.len > 256 ? 256 : server.len), server.p,
                     port);
        } else {
            snprintf(peer, sizeof(peer), "%.*s",
                     (int) (server.len > 256 ? 256 : server.len), server.p);
        }
        sp.target.p = peer;
        sp.target.len = strlen(peer);
    }
    if (sp.end_ns < sp.start_ns) {
        sp.end_ns = sp.start_ns;
    }
    if (sp_buf_failed(attrs)) {
        snprintf(r->error, sizeof(r->error), "out of memory");
        return -1;
    }
    sp.attrs = attrs->data;
    sp.attrs_len = attrs->len;
    if (s == NULL) {
        return 0;
    }
    if (serve_store_add_span(s, &sp) != 0) {
        snprintf(r->error, sizeof(r->error), "cannot store: %s",
                 serve_store_error(s));
        return -2;
    }
    return 0;
}

/* The service.name of a Resource message. */
static serve_str_t
wire_service(const uint8_t *p, size_t len)
{
    serve_wire_t   w, kv, vw;
    serve_field_t  f, g, v;
    serve_str_t    none = { NULL, 0 };

    serve_wire_init(&w, p, len);
    while (serve_wire_next(&w, &f)) {
        int  is_name = 0;

        if (f.num != 1 || f.type != 2) {
            continue;
        }
        serve_wire_init(&kv, f.data, f.len);
        while (serve_wire_next(&kv, &g)) {
            if (g.num == 1 && g.type == 2) {
                is_name = slice_is(&g, "service.name");
            } else if (g.num == 2 && g.type == 2 && is_name) {
                serve_wire_init(&vw, g.data, g.len);
                if (serve_wire_next(&vw, &v) && v.num == 1 && v.type == 2) {
                    serve_str_t  s = { (const char *) v.data, v.len };

                    return s;
                }
            }
        }
    }
    return none;
}

/* Walks ExportTraceServiceRequest > ResourceSpans > ScopeSpans > Span,
 * storing each (s NULL: reading only). */
static int
ingest_trace_request(serve_store_t *s, const uint8_t *body, size_t len,
    serve_ingest_result_t *r)
{
    serve_wire_t   req, rs, ss;
    serve_field_t  f, g, h;
    serve_str_t    service;
    sp_buf_t       attrs;
    int            rc = 0, one;

    sp_buf_init(&attrs);
    serve_wire_init(&req, body, len);
    while (rc == 0 && serve_wire_next(&req, &f)) {
        if (f.num != 1 || f.type != 2) {
            continue;
        }
        /* The resource may come after the spans: find it first. */
        service.p = NULL;
        service.len = 0;
        serve_wire_init(&rs, f.data, f.len);
        while (serve_wire_next(&rs, &g)) {
            if (g.num == 1 && g.type == 2) {
                service = wire_service(g.data, g.len);
            }
        }
        serve_wire_init(&rs, f.data, f.len);
        while (rc == 0 && serve_wire_next(&rs, &g)) {
            if (g.num != 2 || g.type != 2) {
                continue;
            }
            serve_wire_init(&ss, g.data, g.len);
            while (rc == 0 && serve_wire_next(&ss, &h)) {
                if (h.num != 2 || h.type != 2) {
                    continue;
                }
                one = ingest_span(s, service, h.data, h.len, &attrs, r);
                if (one < 0) {
                    rc = one;
                } else if (one > 0) {
                    r->rejected++;
                } else {
                    r->accepted++;
                }
            }
            if (ss.bad) {
                rc = -1;
            }
        }
        if (rs.bad) {
            rc = -1;
        }
    }
    if (req.bad) {
        rc = -1;
    }
    if (rc == -1 && r->error[0] == '\0') {
        snprintf(r->error, sizeof(r->error),
                 "not an ExportTraceServiceRequest");
    }
    sp_buf_free(&attrs);
    return rc;
}

int
serve_ingest_traces(serve_store_t *s, const uint8_t *body, size_t len,
    int json, serve_ingest_result_t *r)
{
    ProtobufCMessage  *m;
    uint8_t           *pb = NULL;
    size_t             n;
    uint64_t           total;
    int                rc;

    memset(r, 0, sizeof(*r));
    if (json) {
        /* JSON becomes protobuf, then takes the one path. */
        m = decode(&opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
                   body, len, 1, r);
        if (m == NULL) {
            return -1;
        }
        n = protobuf_c_message_get_packed_size(m);
        pb = malloc(n + 1);
        if (pb == NULL) {
            protobuf_c_message_free_unpacked(m, NULL);
            snprintf(r->error, sizeof(r->error), "out of memory");
            return -1;
        }
        protobuf_c_message_pack(m, pb);
        protobuf_c_message_free_unpacked(m, NULL);
        body = pb;
        len = n;
    }
    /* Read through first: a malformed request is refused before anything
     * is stored, so a batch is never undone for it (undoing one costs a
     * copy of every page it changes, kept until its end). */
    if (ingest_trace_request(NULL, body, len, r) != 0) {
        free(pb);
        r->accepted = r->rejected = 0;
        return -1;
    }
    total = r->accepted + r->rejected;
    r->accepted = r->rejected = 0;
    if (serve_store_begin(s) != 0) {
        free(pb);
        snprintf(r->error, sizeof(r->error), "cannot store: %s",
                 serve_store_error(s));
        r->rejected = total;
        return 0;
    }
    rc = ingest_trace_request(s, body, len, r);
    if (rc == 0 && serve_store_commit(s) != 0) {
        rc = -2;
        snprintf(r->error, sizeof(r->error), "cannot store: %s",
                 serve_store_error(s));
    }
    free(pb);
    if (rc == 0) {
        return 0;
    }
    serve_store_rollback(s);
    if (rc == -1) {
        /* Malformed: nothing stored, the request refused. */
        r->accepted = r->rejected = 0;
        return -1;
    }
    /* The store failed: the whole request is refused, in partial success
     * (every span of it, the one that failed included). */
    r->rejected = total;
    r->accepted = 0;
    return 0;
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

/* A received value beyond the bounds (otlp_ingest.h) is not a
 * measurement: the profile is refused (counted in profiles_rejected). */
#define SAMPLE_MAX_VALUE   SERVE_SAMPLE_MAX_VALUE
#define SAMPLE_MAX_COUNT   SERVE_SAMPLE_MAX_COUNT

/* How a profile's sample values read: time in nanoseconds (cpu, wall,
 * off_cpu), CPU in counts of periods (the legacy samples/count), or
 * amounts of another unit (bytes, objects: the memory types). */
typedef enum {
    AMOUNT_NS = 0,
    AMOUNT_PERIODS,
    AMOUNT_SUM
} amount_t;

/* Sample ps's count and value (in its unit) from its values and the
 * profile's period, in checked arithmetic: 0, or -1 when a value is
 * negative or a result overflows or is out of the bounds above. */
static int
sample_amounts(const pb_profile_t *p, const pb_sample_t *ps, amount_t how,
    int64_t *count, int64_t *value)
{
    int64_t  sum = 0, c, v;
    size_t   j;

    for (j = 0; j < ps->n_values; j++) {
        if (ps->values[j] < 0
            || __builtin_add_overflow(sum, ps->values[j], &sum))
        {
            return -1;
        }
    }
    if (p->period < 0) {
        return -1;
    }
    switch (how) {
    case AMOUNT_NS:
        /* Samples in periods: a timestamp may stand for several (timer
         * overruns), and its value says how much time. Rounded: sum /
         * period + (remainder >= period / 2), which cannot overflow. */
        v = sum;
        c = p->period > 0 ? sum / p->period
                            + (sum % p->period
                               >= p->period / 2 + p->period % 2)
                          : (int64_t) ps->n_timestamps_unix_nano;
        break;
    case AMOUNT_PERIODS:
        c = ps->n_values > 0 ? sum : (int64_t) ps->n_timestamps_unix_nano;
        if (__builtin_mul_overflow(c, p->period, &v)) {
            return -1;
        }
        break;
    default:
        /* Bytes, objects, ...: the values' sum, one sample each. */
        v = sum;
        c = ps->n_timestamps_unix_nano > 0
            ? (int64_t) ps->n_timestamps_unix_nano : 1;
        break;
    }
    if (c < 0 || c > SAMPLE_MAX_COUNT || v > SAMPLE_MAX_VALUE) {
        return -1;
    }
    *count = c;
    *value = v;
    return 0;
}

/* Stores one profile's samples under its type; 0, 1 when the profile is
 * unusable or its type one too many (r->error says why; none of its
 * samples stored), -1 on a store failure. */
static int
store_profile(serve_store_t *s, const dict_t *d, const char *service,
    int64_t pid, const pb_profile_t *p, sp_buf_t *stack,
    serve_ingest_result_t *r)
{
    serve_sample_t  sa;
    const char     *name = NULL, *unit = NULL;
    int             type, ns_values;
    amount_t        how;
    int64_t         count, value;
    size_t          i;

    if (p->sample_type != NULL) {
        name = dict_str(d, p->sample_type->type_strindex);
        unit = dict_str(d, p->sample_type->unit_strindex);
    }
    /* Every type is stored under its name (cpu, wall, off_cpu, the
     * memory types, ...), its values in its unit; a profile without one,
     * or of the legacy samples/count, is CPU counted in periods. */
    if (name == NULL || name[0] == '\0' || strcmp(name, "samples") == 0) {
        name = "cpu";
        unit = strcmp(unit ? unit : "", "nanoseconds") == 0 ? unit : "count";
    }
    ns_values = unit != NULL && strcmp(unit, "nanoseconds") == 0;
    type = strcmp(name, "cpu") == 0 ? SERVE_TYPE_CPU
           : serve_store_type(s, name, ns_values ? "nanoseconds"
                                      : unit != NULL ? unit : "");
    if (type < 0) {
        return -1;
    }
    if (type == 0) {
        snprintf(r->error, sizeof(r->error),
                 "too many sample types in the database");
        return 1;
    }
    how = ns_values ? AMOUNT_NS
          : type == SERVE_TYPE_CPU ? AMOUNT_PERIODS : AMOUNT_SUM;

    /* Checked before any sample is stored: a profile is stored whole or
     * not at all. */
    for (i = 0; i < p->n_samples; i++) {
        const pb_sample_t  *ps = p->samples[i];

        if (ps->stack_index < 0
            || (size_t) ps->stack_index >= d->n_stack_table)
        {
            snprintf(r->error, sizeof(r->error),
                     "a sample's stack_index is out of range");
            return 1;
        }
        if (sample_amounts(p, ps, how, &count, &value) != 0) {
            snprintf(r->error, sizeof(r->error),
                     "a sample's values or the profile's period are out of "
                     "range (negative, or over 2^46 in its unit)");
            return 1;
        }
    }
    for (i = 0; i < p->n_samples; i++) {
        const pb_sample_t  *ps = p->samples[i];

        if (stack_text(stack, d, ps) != 0) {
            return -1;
        }
        (void) sample_amounts(p, ps, how, &count, &value);
        memset(&sa, 0, sizeof(sa));
        sa.time_ns = (int64_t) (p->time_unix_nano & INT64_MAX);
        sa.duration_ns = (int64_t) (p->duration_nano & INT64_MAX);
        sa.service = service;
        sa.pid = pid;
        sa.type = type;
        sa.count = count;
        sa.value = value;
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
                                    &stack, r);
                if (one < 0) {
                    rc = -1;
                    break;
                }
                if (one > 0) {
                    r->rejected++;
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
