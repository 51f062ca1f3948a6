#ifndef SERVE_OTLP_REPLY_H
#define SERVE_OTLP_REPLY_H

/* The protobuf answer to an OTLP export, shared by the OTLP/HTTP and the
 * OTLP/gRPC receivers. */

#include <stdint.h>

#include "common/base/buf.h"

/* Appends an Export{Trace,Profiles}ServiceResponse: empty when rejected
 * is 0, else partial_success { rejected_*: rejected, error_message: msg
 * (cut to 100 bytes) }. */
void serve_otlp_partial_success(sp_buf_t *out, uint64_t rejected,
    const char *msg);

#endif
