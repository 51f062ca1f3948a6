#ifndef SP_GRPC_CALL_H
#define SP_GRPC_CALL_H

/* Where OTLP/gRPC's unary Export calls go: the method's path on the
 * endpoint's scheme://host:port (any path of the endpoint dropped: a gRPC
 * endpoint names a server, not a base). */

#define SP_GRPC_TRACES_METHOD \
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define SP_GRPC_PROFILES_METHOD \
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

/* endpoint "http(s)://host[:port][/...]" + method: a malloc'd URL, or NULL
 * when out of memory. */
char *sp_grpc_method_url(const char *endpoint, const char *method);

#endif
