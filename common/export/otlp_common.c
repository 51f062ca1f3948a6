#include <string.h>

#include "common/export/otlp_common.h"
#include "common/base/version.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue  pb_any_t;

static sp_pb_kv_t *
kv_new(sp_arena_t *a, const char *k, size_t klen, pb_any_t **any)
{
    static const sp_pb_kv_t  kv_init =
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    static const pb_any_t    any_init =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sp_pb_kv_t  *kv = sp_arena_alloc(a, sizeof(*kv));

    *any = sp_arena_alloc(a, sizeof(**any));
    if (kv == NULL || *any == NULL) {
        return NULL;
    }
    *kv = kv_init;
    **any = any_init;
    kv->key = sp_arena_strndup(a, k, klen);
    kv->value = *any;
    return kv->key != NULL ? kv : NULL;
}

sp_pb_kv_t *
sp_otlp_kv_str(sp_arena_t *a, const char *k, size_t klen, const char *v,
    size_t vlen)
{
    pb_any_t    *any;
    sp_pb_kv_t  *kv = kv_new(a, k, klen, &any);

    if (kv == NULL) {
        return NULL;
    }
    any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    any->string_value = sp_arena_strndup(a, v, vlen);
    return any->string_value != NULL ? kv : NULL;
}

sp_pb_kv_t *
sp_otlp_kv_int(sp_arena_t *a, const char *k, size_t klen, int64_t v)
{
    pb_any_t    *any;
    sp_pb_kv_t  *kv = kv_new(a, k, klen, &any);

    if (kv != NULL) {
        any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        any->int_value = v;
    }
    return kv;
}

sp_pb_kv_t *
sp_otlp_kv_bool(sp_arena_t *a, const char *k, size_t klen, int v)
{
    pb_any_t    *any;
    sp_pb_kv_t  *kv = kv_new(a, k, klen, &any);

    if (kv != NULL) {
        any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
        any->bool_value = v != 0;
    }
    return kv;
}

sp_pb_kv_t *
sp_otlp_kv_double(sp_arena_t *a, const char *k, size_t klen, double v)
{
    pb_any_t    *any;
    sp_pb_kv_t  *kv = kv_new(a, k, klen, &any);

    if (kv != NULL) {
        any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
        any->double_value = v;
    }
    return kv;
}

Opentelemetry__Proto__Resource__V1__Resource *
sp_otlp_resource(sp_arena_t *a, const sp_resource_t *r)
{
    static const Opentelemetry__Proto__Resource__V1__Resource  init =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    Opentelemetry__Proto__Resource__V1__Resource  *res;
    const sp_resource_attr_t                      *at;
    size_t                                         i;

    res = sp_arena_alloc(a, sizeof(*res));
    if (res == NULL) {
        return NULL;
    }
    *res = init;
    res->attributes = sp_arena_alloc(a, r->nattrs * sizeof(sp_pb_kv_t *));
    if (res->attributes == NULL && r->nattrs > 0) {
        return NULL;
    }
    for (i = 0; i < r->nattrs; i++) {
        at = &r->attrs[i];
        res->attributes[i] = at->str != NULL
            ? sp_otlp_kv_str(a, at->key, strlen(at->key), at->str,
                             strlen(at->str))
            : sp_otlp_kv_int(a, at->key, strlen(at->key), at->num);
        if (res->attributes[i] == NULL) {
            return NULL;
        }
    }
    res->n_attributes = r->nattrs;
    return res;
}

Opentelemetry__Proto__Common__V1__InstrumentationScope *
sp_otlp_scope(sp_arena_t *a)
{
    static const Opentelemetry__Proto__Common__V1__InstrumentationScope  init =
        OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    Opentelemetry__Proto__Common__V1__InstrumentationScope  *s;

    s = sp_arena_alloc(a, sizeof(*s));
    if (s != NULL) {
        *s = init;
        s->name = (char *) SP_SCOPE_NAME;
        s->version = (char *) SP_VERSION;
    }
    return s;
}
