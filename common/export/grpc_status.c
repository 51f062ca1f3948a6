#include <string.h>

#include "common/export/grpc_status.h"

static const char *const  names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *
sp_grpc_status_name(int code)
{
    return code >= 0 && code <= SP_GRPC_UNAUTHENTICATED ? names[code]
                                                        : "UNKNOWN";
}

int
sp_grpc_status_from_http(long s)
{
    switch (s) {
    case 400: return SP_GRPC_INTERNAL;
    case 401: return SP_GRPC_UNAUTHENTICATED;
    case 403: return SP_GRPC_PERMISSION_DENIED;
    case 404: return SP_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return SP_GRPC_UNAVAILABLE;
    default:  return SP_GRPC_UNKNOWN;
    }
}

int
sp_grpc_retryable(int code, int has_retry_info)
{
    switch (code) {
    case SP_GRPC_CANCELLED:
    case SP_GRPC_DEADLINE_EXCEEDED:
    case SP_GRPC_ABORTED:
    case SP_GRPC_OUT_OF_RANGE:
    case SP_GRPC_UNAVAILABLE:
    case SP_GRPC_DATA_LOSS:
        return 1;
    case SP_GRPC_RESOURCE_EXHAUSTED:
        return has_retry_info;
    default:
        return 0;
    }
}

int
sp_grpc_status_parse(const char *v, size_t len)
{
    size_t  i;
    int     code = 0;

    if (len == 0 || len > 9) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return -1;
        }
        code = code * 10 + (v[i] - '0');
    }
    return code;
}

static int
hexval(char c)
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

size_t
sp_grpc_percent_decode(const char *v, size_t len, char *out, size_t outlen)
{
    size_t  i, o = 0;
    int     hi, lo;

    if (outlen == 0) {
        return 0;
    }
    for (i = 0; i < len && o + 1 < outlen; i++) {
        unsigned char  c = (unsigned char) v[i];

        if (c == '%' && i + 2 < len
            && (hi = hexval(v[i + 1])) >= 0 && (lo = hexval(v[i + 2])) >= 0)
        {
            c = (unsigned char) (hi << 4 | lo);
            i += 2;
        }
        /* The message goes into a log line: no control characters. */
        out[o++] = c < 0x20 || c == 0x7f ? '?' : (char) c;
    }
    out[o] = '\0';
    return o;
}
