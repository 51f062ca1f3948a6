#ifndef SP_TRACESTATE_H
#define SP_TRACESTATE_H

#include <stddef.h>

/* W3C Trace Context `tracestate` validation. The glue joins several header
 * lines with ',' in the order received and asks whether the result may be
 * kept and forwarded. Valid means: at most 512 characters, at most 32
 * non-empty list members, each `key=value` with a key that is a simple key
 * (lcalpha then up to 255 of lcalpha / digit / _ - * /) or a multi-tenant key
 * (tenant-id@system-id, tenant up to 241 chars starting with lcalpha or digit,
 * system up to 14 starting with lcalpha), a value of 1..256 printable ASCII
 * chars other than ',' and '=' that does not end in a space, no duplicate keys,
 * optional spaces/tabs around members, empty members allowed. Any control
 * character (CR, LF, ...) makes it invalid. */

#define SP_TRACESTATE_MAX_LEN      512
#define SP_TRACESTATE_MAX_MEMBERS  32

/* 0 when valid, -1 when invalid. An empty string is valid (and not sent). */
int sp_tracestate_validate(const char *s, size_t len);

#endif
