#ifndef SP_OTLP_COMMON_H
#define SP_OTLP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "opentelemetry/proto/common/v1/common.pb-c.h"
#include "opentelemetry/proto/resource/v1/resource.pb-c.h"

#include "common/base/arena.h"
#include "common/trace/resource.h"

/* Builders of the OTLP common messages shared by the traces and profiles
 * encoders; everything is allocated in the caller's arena (NULL on failure,
 * with the arena marked failed). */

typedef Opentelemetry__Proto__Common__V1__KeyValue  sp_pb_kv_t;

sp_pb_kv_t *sp_otlp_kv_str(sp_arena_t *a, const char *k, size_t klen,
    const char *v, size_t vlen);
sp_pb_kv_t *sp_otlp_kv_int(sp_arena_t *a, const char *k, size_t klen,
    int64_t v);
sp_pb_kv_t *sp_otlp_kv_bool(sp_arena_t *a, const char *k, size_t klen, int v);
sp_pb_kv_t *sp_otlp_kv_double(sp_arena_t *a, const char *k, size_t klen,
    double v);

Opentelemetry__Proto__Resource__V1__Resource *sp_otlp_resource(sp_arena_t *a,
    const sp_resource_t *r);

/* Scope "spanprof" with our version. */
Opentelemetry__Proto__Common__V1__InstrumentationScope *sp_otlp_scope(
    sp_arena_t *a);

#endif
