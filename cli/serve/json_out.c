#include <string.h>

#include "cli/serve/json_out.h"

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
    static const char  hex[] = "0123456789abcdef";
    size_t             i;

    sp_buf_append_char(out, '"');
    for (i = 0; i < n; i++) {
        sp_buf_append_char(out, hex[p[i] >> 4]);
        sp_buf_append_char(out, hex[p[i] & 15]);
    }
    sp_buf_append_char(out, '"');
}

static int
nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int
serve_hex_parse(const char *s, uint8_t *p, size_t n)
{
    size_t  i;
    int     hi, lo;

    if (strlen(s) != 2 * n) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        hi = nibble(s[2 * i]);
        lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -1;
        }
        p[i] = (uint8_t) (hi << 4 | lo);
    }
    return 0;
}
