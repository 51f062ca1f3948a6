#ifndef SP_GRPC_STATUS_H
#define SP_GRPC_STATUS_H

#include <stddef.h>
#include <stdint.h>

/* gRPC status codes (grpc/doc/statuscodes.md): their names, the status a
 * non-200 HTTP answer means (grpc/doc/http-grpc-status-mapping.md), which
 * ones an OTLP exporter retries, and grpc-message's percent-decoding. */

enum {
    SP_GRPC_OK = 0,
    SP_GRPC_CANCELLED = 1,
    SP_GRPC_UNKNOWN = 2,
    SP_GRPC_INVALID_ARGUMENT = 3,
    SP_GRPC_DEADLINE_EXCEEDED = 4,
    SP_GRPC_NOT_FOUND = 5,
    SP_GRPC_ALREADY_EXISTS = 6,
    SP_GRPC_PERMISSION_DENIED = 7,
    SP_GRPC_RESOURCE_EXHAUSTED = 8,
    SP_GRPC_FAILED_PRECONDITION = 9,
    SP_GRPC_ABORTED = 10,
    SP_GRPC_OUT_OF_RANGE = 11,
    SP_GRPC_UNIMPLEMENTED = 12,
    SP_GRPC_INTERNAL = 13,
    SP_GRPC_UNAVAILABLE = 14,
    SP_GRPC_DATA_LOSS = 15,
    SP_GRPC_UNAUTHENTICATED = 16,
};

/* "UNAVAILABLE"; "UNKNOWN" for a code outside 0..16. */
const char *sp_grpc_status_name(int code);

/* The status of an answer whose HTTP status is not 200: 400 INTERNAL,
 * 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED,
 * 429/502/503/504 UNAVAILABLE, anything else UNKNOWN. */
int sp_grpc_status_from_http(long http_status);

/* The OTLP specification's retryable codes: CANCELLED, DEADLINE_EXCEEDED,
 * ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS, and RESOURCE_EXHAUSTED
 * only when the server sent a RetryInfo (it can recover). */
int sp_grpc_retryable(int code, int has_retry_info);

/* Parses a grpc-status value (decimal digits, no sign): the code, or -1. */
int sp_grpc_status_parse(const char *v, size_t len);

/* grpc-message is percent-encoded (%XX, other bytes as they are): decodes
 * v into out (always NUL-terminated, cut to outlen - 1 bytes); an invalid
 * escape is kept as it is. Returns the length written. */
size_t sp_grpc_percent_decode(const char *v, size_t len, char *out,
    size_t outlen);

#endif
