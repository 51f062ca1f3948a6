#ifndef SP_URL_MASK_H
#define SP_URL_MASK_H

#include <stddef.h>

/* Credentials out of text that names URLs (log lines, the configuration the
 * control API renders): the userinfo of every "scheme://userinfo@host" in
 * text is masked. "https://user:pass@host/" becomes
 * "https://user:***@host/"; a userinfo without ':' (a token used as the
 * user) is replaced whole by the three stars. The userinfo is what precedes
 * the last '@' of the authority, which ends at the first '/', '?', '#',
 * whitespace, quote or '<' '>' after "://" (RFC 3986: a userinfo has those
 * percent-encoded). The rest of text is copied as it is.
 *
 * Writes at most len bytes to out, always NUL-terminated (len > 0): a line
 * too long is cut, never a secret let through (the mask comes before the
 * cut). Returns out. No allocation; any thread.
 *
 * Exporter header values (Authorization, API keys) are never given to a
 * log line at all: callers name a header by its name only. */
char *sp_url_mask(const char *text, char *out, size_t len);

/* text has a userinfo that sp_url_mask would mask (cheap: lets a caller
 * skip the copy). */
int sp_url_has_userinfo(const char *text);

#endif
