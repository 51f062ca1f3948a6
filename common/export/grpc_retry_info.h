#ifndef SP_GRPC_RETRY_INFO_H
#define SP_GRPC_RETRY_INFO_H

#include <stddef.h>
#include <stdint.h>

/* The grpc-status-details-bin trailer: base64 (padded or not) of a
 * google.rpc.Status { int32 code = 1; string message = 2; repeated
 * google.protobuf.Any details = 3; }. Looks among the details for an Any
 * whose type_url is type.googleapis.com/google.rpc.RetryInfo, a
 * google.rpc.RetryInfo { google.protobuf.Duration retry_delay = 1; }
 * (Duration { int64 seconds = 1; int32 nanos = 2; }), as the OTLP
 * specification asks exporters to honour. Names and numbers as in
 * googleapis' google/rpc/status.proto and error_details.proto (our copies:
 * proto/google/rpc/).
 * Returns 1 with *delay_ms (rounded up, at most an hour, 0 for a negative
 * delay) when there is a RetryInfo, 0 when there is none, -1 when the
 * value is not base64 of a well-formed Status. */
int sp_grpc_retry_info(const char *b64, size_t len, uint64_t *delay_ms);

/* Base64 (standard alphabet; '=' padding optional; no whitespace) into
 * out (room for len * 3 / 4 + 3 bytes): the decoded length, or -1. */
long sp_grpc_base64_decode(const char *in, size_t len, uint8_t *out);

#endif
