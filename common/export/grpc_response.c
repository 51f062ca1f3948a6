#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/export/grpc_frame.h"
#include "common/export/grpc_response.h"
#include "common/export/grpc_retry_info.h"
#include "common/export/grpc_status.h"

void
sp_grpc_response_reset(sp_grpc_response_t *r)
{
    memset(r, 0, sizeof(*r));
    r->status = -1;
}

static int
is(const char *name, size_t nlen, const char *want)
{
    return nlen == strlen(want) && strncasecmp(name, want, nlen) == 0;
}

void
sp_grpc_response_header(sp_grpc_response_t *r, const char *line, size_t len)
{
    const char  *colon, *v;
    size_t       nlen, vlen;
    uint64_t     ms;

    colon = memchr(line, ':', len);
    if (colon == NULL || colon == line) {
        return;                          /* "HTTP/2 200", the blank line */
    }
    nlen = (size_t) (colon - line);
    v = colon + 1;
    vlen = len - nlen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'
                        || v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
    {
        vlen--;
    }

    if (is(line, nlen, "grpc-status")) {
        r->status = sp_grpc_status_parse(v, vlen);
        if (r->status > SP_GRPC_UNAUTHENTICATED) {
            r->status = SP_GRPC_UNKNOWN;     /* as gRPC reads a code it lacks */
        } else if (r->status < 0) {
            /* A value that is no code: the call failed, we cannot say how. */
            r->status = SP_GRPC_UNKNOWN;
            snprintf(r->message, sizeof(r->message),
                     "invalid grpc-status \"%.*s\"",
                     (int) (vlen > 32 ? 32 : vlen), v);
            for (char *p = r->message; *p; p++) {
                if ((unsigned char) *p < 0x20 || *p == 0x7f) {
                    *p = '?';
                }
            }
        }
    } else if (is(line, nlen, "grpc-message")) {
        sp_grpc_percent_decode(v, vlen, r->message, sizeof(r->message));
    } else if (is(line, nlen, "grpc-status-details-bin")) {
        if (sp_grpc_retry_info(v, vlen, &ms) == 1) {
            r->retry_info = 1;
            r->retry_delay_ms = ms;
        }
    } else if (is(line, nlen, "grpc-encoding")) {
        r->gzip = vlen == 4 && strncasecmp(v, "gzip", 4) == 0;
        r->bad_encoding = !r->gzip
                          && !(vlen == 8 && strncasecmp(v, "identity", 8) == 0);
    } else if (is(line, nlen, "content-type")) {
        r->grpc_type = (vlen == 16 || (vlen > 16 && (v[16] == '+'
                                                     || v[16] == ';')))
                       && strncasecmp(v, "application/grpc", 16) == 0;
        snprintf(r->content_type, sizeof(r->content_type), "%.*s",
                 (int) (vlen > 40 ? 40 : vlen), v);
    }
}

static int
fail(sp_grpc_response_t *r, int code, const char *what)
{
    r->status = code;
    snprintf(r->message, sizeof(r->message), "%s", what);
    return code;
}

int
sp_grpc_response_finish(sp_grpc_response_t *r, long http_status,
    const void *body, size_t len, size_t max, sp_buf_t *msg)
{
    const uint8_t  *m;
    size_t          mlen;
    int             compressed;
    char            why[160], err[96];

    if (http_status != 200) {
        snprintf(why, sizeof(why), "HTTP status %ld", http_status);
        r->retry_info = 0;
        return fail(r, sp_grpc_status_from_http(http_status), why);
    }
    if (!r->grpc_type) {
        snprintf(why, sizeof(why), "not a gRPC answer (content-type \"%s\")",
                 r->content_type);
        for (char *p = why; *p; p++) {
            if ((unsigned char) *p < 0x20 || *p == 0x7f) {
                *p = '?';
            }
        }
        return fail(r, SP_GRPC_INTERNAL, why);
    }
    if (r->status < 0) {
        return fail(r, SP_GRPC_INTERNAL, "no grpc-status in the answer");
    }
    if (r->status != SP_GRPC_OK) {
        return r->status;
    }
    if (sp_grpc_unframe(body, len, &m, &mlen, &compressed, err,
                        sizeof(err)) != 0)
    {
        snprintf(why, sizeof(why), "malformed answer: %s", err);
        return fail(r, SP_GRPC_INTERNAL, why);
    }
    if (compressed && (!r->gzip || r->bad_encoding)) {
        return fail(r, SP_GRPC_INTERNAL,
                    "a compressed answer without grpc-encoding gzip");
    }
    if (compressed) {
        if (sp_grpc_gunzip(m, mlen, max, msg) != 0) {
            return fail(r, SP_GRPC_INTERNAL,
                        "an answer that does not gunzip");
        }
    } else {
        sp_buf_append(msg, m, mlen < max ? mlen : max);
    }
    return SP_GRPC_OK;
}
