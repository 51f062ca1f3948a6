#ifndef SP_TRACESTATE_H
#define SP_TRACESTATE_H

#include <stddef.h>

/* W3C Trace Context `tracestate` (Level 2 text, spec/20-http_request_header_
 * format.md). The glue joins several header lines with ',' in the order
 * received and asks whether the result may be kept and forwarded.
 * Valid means: at most 512 characters, at most 32 non-empty list members,
 * each `key=value` with
 *   key   = ( lcalpha / DIGIT ) 0*255 ( keychar )
 *   keychar = lcalpha / DIGIT / _ - * / @   (no tenant@system split)
 *   value = 1..256 printable ASCII chars other than ',' and '=' whose last
 *           one is not a space,
 * spaces and tabs around each member ignored, empty or whitespace-only
 * members allowed (and not counted). Duplicate keys do not make it invalid:
 * the header is still propagated (the specification lets a vendor drop
 * duplicates it did not generate, never the whole header). Any control
 * character (CR, LF, ...) other than a tab next to a ',' makes it invalid. */

#define SP_TRACESTATE_MAX_LEN      512
#define SP_TRACESTATE_MAX_MEMBERS  32

/* 0 when valid, -1 when invalid. An empty string is valid (and not sent). */
int sp_tracestate_validate(const char *s, size_t len);

/* Validates s and writes the list to forward into out (at least len
 * bytes; out may be s itself): the members joined by ',' in order, without
 * the optional whitespace and the empty members (the specification lets a
 * vendor drop both). Returns the length written (0: nothing to send) or -1
 * when invalid (out then unspecified). */
int sp_tracestate_normalize(const char *s, size_t len, char *out);

#endif
