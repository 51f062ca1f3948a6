#include <string.h>

#include "cli/serve/json_out.h"
#include "common/trace/ids.h"

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if
 * invalid. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
    size_t    len, i;
    uint32_t  c;

    if (p[0] < 0x80) {
        return 1;
    }
    if ((p[0] & 0xe0) == 0xc0) {
        len = 2; c = p[0] & 0x1f;
    } else if ((p[0] & 0xf0) == 0xe0) {
        len = 3; c = p[0] & 0x0f;
    } else if ((p[0] & 0xf8) == 0xf0) {
        len = 4; c = p[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n) {
        return 0;
    }
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
        c = (c << 6) | (p[i] & 0x3f);
    }
    if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800)
        || (len == 4 && (c < 0x10000 || c > 0x10ffff))
        || (c >= 0xd800 && c <= 0xdfff))
    {
        return 0;
    }
    return len;
}

void
serve_json_strn(sp_buf_t *out, const char *s, size_t len)
{
    static const char      hex[] = "0123456789abcdef";
    const unsigned char   *p = (const unsigned char *) s;
    size_t                 i = 0, n;

    sp_buf_append_char(out, '"');
    while (i < len) {
        unsigned char  c = p[i];

        if (c == '"' || c == '\\') {
            sp_buf_append_char(out, '\\');
            sp_buf_append_char(out, (char) c);
            i++;
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&'
                   || c == 0x7f)
        {
            char  e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

            sp_buf_append(out, e, 6);
            i++;
        } else if (c < 0x80) {
            sp_buf_append_char(out, (char) c);
            i++;
        } else if ((n = utf8_len(p + i, len - i)) != 0) {
            sp_buf_append(out, p + i, n);
            i += n;
        } else {
            sp_buf_append_str(out, "\\ufffd");
            i++;
        }
    }
    sp_buf_append_char(out, '"');
}

void
serve_json_str(sp_buf_t *out, const char *s)
{
    if (s == NULL) {
        sp_buf_append_str(out, "null");
        return;
    }
    serve_json_strn(out, s, strlen(s));
}

void
serve_json_hex(sp_buf_t *out, const uint8_t *p, size_t n)
{
    char  hex[64];
    size_t  k;

    sp_buf_append_char(out, '"');
    for (k = 0; k < n; k += sizeof(hex) / 2) {
        size_t  m = n - k < sizeof(hex) / 2 ? n - k : sizeof(hex) / 2;

        sp_hex_encode(hex, p + k, m);
        sp_buf_append(out, hex, 2 * m);
    }
    sp_buf_append_char(out, '"');
}

int
serve_hex_parse(const char *s, uint8_t *p, size_t n)
{
    char    lower[64];
    size_t  i;

    /* Ids pasted in capitals are the same ids. */
    if (2 * n > sizeof(lower) || strlen(s) != 2 * n) {
        return -1;
    }
    for (i = 0; i < 2 * n; i++) {
        lower[i] = s[i] >= 'A' && s[i] <= 'F' ? (char) (s[i] + 32) : s[i];
    }
    return sp_hex_decode(p, lower, n) == 0 ? 0 : -1;
}
