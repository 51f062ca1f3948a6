/* OTLP/HTTP JSON bodies and answers. The JSON is written by otlp_json.c
 * from the very messages http/protobuf sends (decoded by protobuf-c into
 * the arena): one encoder of the data, one of the JSON mapping. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include "common/export/otlp_http_json.h"
#include "common/export/otlp_json.h"
#include "common/export/otlp_profiles.h"
#include "common/export/otlp_traces.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    pb_profiles_request_t;

int
sp_otlp_http_json_traces(sp_arena_t *a, const sp_resource_t *res,
    const sp_span_rec_t *const *spans, size_t n, sp_buf_t *out)
{
    size_t  start = out->len;

    /* The file exporter's line, without its '\n'. */
    if (sp_otlp_traces_encode_json(a, res, spans, n, out) != 0) {
        return -1;
    }
    if (out->len > start && out->data[out->len - 1] == '\n') {
        out->len--;
    }
    return 0;
}

static void *
arena_alloc(void *a, size_t n)
{
    return sp_arena_alloc(a, n);
}

static void
arena_keep(void *a, void *p)
{
    /* freed with the arena */
}

int
sp_otlp_http_json_profiles(sp_arena_t *a, const sp_profile_t *p,
    sp_buf_t *out)
{
    sp_otlp_profile_part_t  part = { p, SP_OTLP_PROFILE_CPU };

    return sp_otlp_http_json_profiles_n(a, &part, 1, out);
}

int
sp_otlp_http_json_profiles_n(sp_arena_t *a,
    const sp_otlp_profile_part_t *parts, size_t n, sp_buf_t *out)
{
    ProtobufCAllocator      alloc = { arena_alloc, arena_keep, a };
    pb_profiles_request_t  *req = NULL;
    sp_buf_t                pb;
    size_t                  start = out->len;
    int                     rc;

    /* The protobuf request, decoded back into a message tree: the profile
     * encoder builds its tables (dictionary, stacks, links) only once. */
    sp_buf_init(&pb);
    rc = sp_otlp_profiles_encode_n(a, parts, n, &pb);
    if (rc == 0 && !sp_buf_failed(&pb)) {
        req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
                  &alloc, pb.len, pb.data);
    }
    sp_buf_free(&pb);
    if (req == NULL || sp_otlp_json_encode(&req->base, out) != 0) {
        if (!sp_buf_failed(out) && out->len > start) {
            out->len = start;
        }
        return -1;
    }
    return 0;
}

/* A protobuf JSON int64: a number or a decimal string. */
static int
read_int64(json_t *v, int64_t *out)
{
    const char  *s;
    char        *end;
    long long    n;

    if (json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (json_is_integer(v)) {
        *out = (int64_t) json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        /* 3.0 is an integer in JSON's eyes; 3.5 or 1e300 is not one. */
        double  d = json_real_value(v);

        if (!(d >= -9.2e18 && d <= 9.2e18) || d != (double) (long long) d) {
            return -1;
        }
        *out = (int64_t) d;
        return 0;
    }
    if (!json_is_string(v)) {
        return -1;
    }
    s = json_string_value(v);
    if (json_string_length(v) != strlen(s) || s[0] == '\0'
        || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
    {
        return -1;
    }
    errno = 0;
    n = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s) {
        return -1;
    }
    *out = (int64_t) n;
    return 0;
}

/* obj's member by its lowerCamelCase json name, else by its proto name. */
static json_t *
member(json_t *obj, const char *json_name, const char *proto_name)
{
    json_t  *v = json_object_get(obj, json_name);

    return v != NULL ? v : json_object_get(obj, proto_name);
}

int
sp_otlp_http_json_parse_response(const uint8_t *body, size_t len,
    const char *rejected_field, int64_t *rejected, char *msg, size_t msglen)
{
    json_t        *root, *ps, *v;
    json_error_t   je;
    char           proto_name[64];
    const char    *f, *s;
    size_t         i = 0, n;
    int64_t        count = 0;
    int            rc = -1;

    *rejected = 0;
    if (msglen > 0) {
        msg[0] = '\0';
    }

    /* "rejectedSpans" -> "rejected_spans" */
    for (f = rejected_field; *f != '\0' && i + 2 < sizeof(proto_name); f++) {
        if (*f >= 'A' && *f <= 'Z') {
            proto_name[i++] = '_';
            proto_name[i++] = (char) (*f - 'A' + 'a');
        } else {
            proto_name[i++] = *f;
        }
    }
    proto_name[i] = '\0';

    root = json_loadb((const char *) body, len, 0, &je);
    if (root == NULL || !json_is_object(root)) {
        goto done;
    }
    ps = member(root, "partialSuccess", "partial_success");
    if (ps == NULL || json_is_null(ps)) {
        rc = 0;
        goto done;
    }
    if (!json_is_object(ps)) {
        goto done;
    }
    v = member(ps, rejected_field, proto_name);
    if (v != NULL && read_int64(v, &count) != 0) {
        goto done;
    }
    v = member(ps, "errorMessage", "error_message");
    if (v != NULL && !json_is_null(v)) {
        if (!json_is_string(v)) {
            goto done;
        }
        s = json_string_value(v);
        n = strlen(s);
        if (msglen > 0) {
            if (n > msglen - 1) {
                n = msglen - 1;
            }
            memcpy(msg, s, n);
            msg[n] = '\0';
        }
    }
    *rejected = count > 0 ? count : 0;
    rc = 0;

done:
    if (rc != 0 && msglen > 0) {
        msg[0] = '\0';
    }
    json_decref(root);
    return rc;
}
