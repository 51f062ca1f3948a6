#ifndef SERVE_ATTRS_JSON_H
#define SERVE_ATTRS_JSON_H

/* A span's stored attributes as a JSON object: {"key": value, ...}. As
 * stored (store.c), one after the other: varint K, the key's number in
 * keys (attr_keys.h), or 0 then the key inline (varint length, bytes);
 * then the value, an AnyValue message (varint length, bytes). Strings escaped
 * (json_out.h), integers and doubles as numbers, booleans; arrays, kvlists
 * and bytes as a string naming their kind. Malformed bytes end the object
 * early, never the process. */

#include <stddef.h>
#include <stdint.h>

#include "cli/serve/attr_keys.h"
#include "common/base/buf.h"

void serve_attrs_json(sp_buf_t *out, const uint8_t *p, size_t len,
    const serve_keys_t *keys);

#endif
