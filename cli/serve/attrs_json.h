#ifndef SERVE_ATTRS_JSON_H
#define SERVE_ATTRS_JSON_H

/* A span's stored attributes (KeyValue messages, each a length-delimited
 * protobuf field) as a JSON object: {"key": value, ...}; strings escaped
 * (json_out.h), integers and doubles as numbers, booleans; arrays, kvlists
 * and bytes as a string naming their kind. Malformed bytes end the object
 * early, never the process. */

#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

void serve_attrs_json(sp_buf_t *out, const uint8_t *p, size_t len);

#endif
