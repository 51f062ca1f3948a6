#ifndef SERVE_OTLP_JSON_DECODE_H
#define SERVE_OTLP_JSON_DECODE_H

/* OTLP/JSON (the protobuf JSON mapping with OTLP's exceptions) into any
 * protobuf-c message, walking its descriptor: field names in lowerCamelCase
 * or as in the .proto; trace_id, span_id and parent_span_id as hex, other
 * bytes as base64; enums as integers or names; 64-bit integers as strings
 * or numbers; unknown fields ignored. The message is allocated with
 * malloc, as protobuf-c's unpack does: free it with
 * protobuf_c_message_free_unpacked(msg, NULL). */

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* NULL with err set when the text is not JSON or does not fit the
 * message (a wrong type, an id of the wrong length, nesting deeper than
 * 64). */
ProtobufCMessage *serve_otlp_json_decode(const ProtobufCMessageDescriptor *d,
    const char *json, size_t len, char *err, size_t errlen);

#endif
