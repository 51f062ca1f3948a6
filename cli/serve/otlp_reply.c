#include <string.h>

#include "cli/serve/otlp_reply.h"

/* partial_success is field 1, holding rejected (field 1, varint) and
 * error_message (field 2). */
void
serve_otlp_partial_success(sp_buf_t *out, uint64_t rejected,
    const char *msg)
{
    uint8_t   inner[128];
    size_t    n = 0, ml = strlen(msg);
    uint64_t  v = rejected;

    if (rejected == 0) {
        return;
    }
    if (ml > 100) {
        ml = 100;       /* keeps every length a one-byte varint */
    }
    inner[n++] = 0x08;
    do {
        inner[n++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    inner[n++] = 0x12;
    inner[n++] = (uint8_t) ml;
    memcpy(inner + n, msg, ml);
    n += ml;
    sp_buf_append_char(out, 0x0a);
    sp_buf_append_char(out, (char) n);      /* n < 128 */
    sp_buf_append(out, inner, n);
}
