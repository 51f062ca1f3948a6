#ifndef SERVE_JSON_OUT_H
#define SERVE_JSON_OUT_H

/* Small JSON writers for spanprof serve's API answers. */

#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

/* A JSON string of s (NULL: null): quotes, backslashes and control
 * characters escaped; < > & as \u escapes too, so a value can never close
 * a <script> element; invalid UTF-8 bytes become U+FFFD. */
void serve_json_str(sp_buf_t *out, const char *s);
void serve_json_strn(sp_buf_t *out, const char *s, size_t len);
/* "0123abcd..." (lowercase hex in quotes). */
void serve_json_hex(sp_buf_t *out, const uint8_t *p, size_t n);
/* Parses exactly 2*n hex digits; 0, or -1. */
int serve_hex_parse(const char *s, uint8_t *p, size_t n);

#endif
