#ifndef SP_OTLP_JSON_H
#define SP_OTLP_JSON_H

#include <protobuf-c/protobuf-c.h>

#include "common/base/buf.h"

/* Encodes any protobuf-c message as OTLP/JSON (the protobuf JSON mapping with
 * OTLP's exceptions), on one line, no trailing newline:
 *  - field names in lowerCamelCase (json_name), fields with default values
 *    omitted (proto3), oneof members written when set;
 *  - trace_id, span_id, parent_span_id and profile_id (any bytes field with
 *    those names) as lowercase hex, other bytes fields as base64;
 *  - enums as integers; int64/uint64/fixed64/sint64/sfixed64 as decimal
 *    strings; other integers as numbers; doubles as numbers ("NaN",
 *    "Infinity", "-Infinity" as strings); strings escaped per RFC 8259 with
 *    invalid UTF-8 replaced by U+FFFD.
 * Returns 0, or -1 when the buffer failed to grow. */
int sp_otlp_json_encode(const ProtobufCMessage *msg, sp_buf_t *out);

#endif
