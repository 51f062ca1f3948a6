#include <stdlib.h>
#include <string.h>

#include "common/export/grpc_retry_info.h"

#define RETRY_INFO_TYPE  "type.googleapis.com/google.rpc.RetryInfo"
#define MAX_DELAY_MS     3600000ull

static int
b64val(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

long
sp_grpc_base64_decode(const char *in, size_t len, uint8_t *out)
{
    size_t    i, o = 0, n = 0;
    uint32_t  acc = 0;
    int       v;

    while (len > 0 && in[len - 1] == '=') {
        len--;
    }
    for (i = 0; i < len; i++) {
        v = b64val(in[i]);
        if (v < 0) {
            return -1;
        }
        acc = acc << 6 | (uint32_t) v;
        if (++n == 4) {
            out[o++] = (uint8_t) (acc >> 16);
            out[o++] = (uint8_t) (acc >> 8);
            out[o++] = (uint8_t) acc;
            n = 0;
            acc = 0;
        }
    }
    if (n == 1) {
        return -1;
    }
    if (n == 2) {
        out[o++] = (uint8_t) (acc >> 4);
    } else if (n == 3) {
        out[o++] = (uint8_t) (acc >> 10);
        out[o++] = (uint8_t) (acc >> 2);
    }
    return (long) o;
}

/* A protobuf field reader: just what the three messages need. */
typedef struct {
    const uint8_t  *p, *end;
} rd_t;

static int
varint(rd_t *r, uint64_t *v)
{
    unsigned  shift;

    *v = 0;
    for (shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            return -1;
        }
        *v |= (uint64_t) (*r->p & 0x7f) << shift;
        if ((*r->p++ & 0x80) == 0) {
            return 0;
        }
    }
    return -1;
}

/* The next field: 0 with its number and wire type (a varint's value in
 * *v; a length-delimited field's bytes in *sub), 1 at the end, -1 when
 * malformed. Fixed 32/64 fields are skipped over (but returned). */
static int
field(rd_t *r, unsigned *num, unsigned *wt, uint64_t *v, rd_t *sub)
{
    uint64_t  key;

    if (r->p == r->end) {
        return 1;
    }
    if (varint(r, &key) != 0 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff) {
        return -1;
    }
    *num = (unsigned) (key >> 3);
    *wt = (unsigned) (key & 7);
    switch (*wt) {
    case 0:
        return varint(r, v);
    case 1:
    case 5:
        if ((size_t) (r->end - r->p) < (*wt == 1 ? 8u : 4u)) {
            return -1;
        }
        r->p += *wt == 1 ? 8 : 4;
        return 0;
    case 2:
        if (varint(r, v) != 0 || *v > (uint64_t) (r->end - r->p)) {
            return -1;
        }
        sub->p = r->p;
        sub->end = r->p + *v;
        r->p += *v;
        return 0;
    default:
        return -1;          /* groups are not in these messages */
    }
}

/* RetryInfo's delay, from its Duration: 0, or -1 when malformed. */
static int
retry_info_delay(rd_t r, uint64_t *ms)
{
    rd_t      sub, d;
    unsigned  num, wt;
    uint64_t  v;
    int64_t   secs = 0, nanos = 0;
    int       rc;

    *ms = 0;
    while ((rc = field(&r, &num, &wt, &v, &sub)) == 0) {
        if (num != 1 || wt != 2) {
            continue;
        }
        d = sub;
        while ((rc = field(&d, &num, &wt, &v, &sub)) == 0) {
            if (num == 1 && wt == 0) {
                secs = (int64_t) v;
            } else if (num == 2 && wt == 0) {
                nanos = (int32_t) v;
            }
        }
        if (rc < 0) {
            return -1;
        }
    }
    if (rc < 0) {
        return -1;
    }
    if (secs < 0 || (secs == 0 && nanos <= 0)) {
        return 0;
    }
    if ((uint64_t) secs >= MAX_DELAY_MS / 1000) {
        *ms = MAX_DELAY_MS;
        return 0;
    }
    *ms = (uint64_t) secs * 1000
          + (nanos > 0 ? ((uint64_t) nanos + 999999) / 1000000 : 0);
    if (*ms > MAX_DELAY_MS) {
        *ms = MAX_DELAY_MS;
    }
    return 0;
}

int
sp_grpc_retry_info(const char *b64, size_t len, uint64_t *delay_ms)
{
    uint8_t   stack[512], *buf = stack;
    long      n;
    rd_t      r, sub, any, value = { 0 };   /* read only when has_value */
    unsigned  num, wt;
    uint64_t  v;
    int       rc, found = 0, is_retry_info, has_value;

    *delay_ms = 0;
    if (len / 4 * 3 + 3 > sizeof(stack)) {
        if (len > 64 * 1024) {
            return -1;
        }
        buf = malloc(len / 4 * 3 + 3);
        if (buf == NULL) {
            return -1;
        }
    }
    n = sp_grpc_base64_decode(b64, len, buf);
    if (n < 0) {
        rc = -1;
        goto done;
    }
    r.p = buf;
    r.end = buf + n;
    while ((rc = field(&r, &num, &wt, &v, &sub)) == 0) {
        if (num != 3 || wt != 2) {
            continue;                       /* code, message */
        }
        any = sub;
        is_retry_info = 0;
        has_value = 0;
        while ((rc = field(&any, &num, &wt, &v, &sub)) == 0) {
            if (num == 1 && wt == 2) {
                is_retry_info = (size_t) (sub.end - sub.p)
                                    == sizeof(RETRY_INFO_TYPE) - 1
                                && memcmp(sub.p, RETRY_INFO_TYPE,
                                          sizeof(RETRY_INFO_TYPE) - 1) == 0;
            } else if (num == 2 && wt == 2) {
                value = sub;
                has_value = 1;
            }
        }
        if (rc < 0) {
            goto done;
        }
        if (is_retry_info && !found) {
            if (has_value && retry_info_delay(value, delay_ms) != 0) {
                rc = -1;
                goto done;
            }
            found = 1;      /* an empty RetryInfo: retry, no delay asked */
        }
    }
done:
    if (buf != stack) {
        free(buf);
    }
    if (rc < 0) {
        *delay_ms = 0;
        return -1;
    }
    return found;
}
