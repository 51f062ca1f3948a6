#include <stdlib.h>
#include <string.h>

#include "common/profile/symbol_redact.h"

struct sp_symbol_redact {
    char     **patterns;    /* lowercase */
    size_t    *lens;
    size_t     n;
    uint64_t   redacted;
};

static unsigned char
lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char) (c | 0x20) : c;
}

sp_symbol_redact_t *
sp_symbol_redact_new(const char *const *patterns, const char **err)
{
    sp_symbol_redact_t  *r;
    size_t               n = 0, i, j, len;

    *err = NULL;
    for (i = 0; patterns != NULL && patterns[i] != NULL; i++) {
        n += patterns[i][0] != '\0';
    }
    if (n == 0) {
        return NULL;
    }
    *err = "out of memory";
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    r->patterns = calloc(n, sizeof(char *));
    r->lens = calloc(n, sizeof(size_t));
    if (r->patterns == NULL || r->lens == NULL) {
        sp_symbol_redact_free(r);
        return NULL;
    }
    for (i = 0; patterns[i] != NULL; i++) {
        len = strlen(patterns[i]);
        if (len == 0) {
            continue;
        }
        r->patterns[r->n] = malloc(len + 1);
        if (r->patterns[r->n] == NULL) {
            sp_symbol_redact_free(r);
            return NULL;
        }
        for (j = 0; j <= len; j++) {
            r->patterns[r->n][j] = (char) lower((unsigned char)
                                                patterns[i][j]);
        }
        r->lens[r->n++] = len;
    }
    *err = NULL;
    return r;
}

void
sp_symbol_redact_free(sp_symbol_redact_t *r)
{
    size_t  i;

    if (r == NULL) {
        return;
    }
    for (i = 0; r->patterns != NULL && i < r->n; i++) {
        free(r->patterns[i]);
    }
    free(r->patterns);
    free(r->lens);
    free(r);
}

/* The byte-by-byte search, for a name longer than the stack copy. */
static int
match_long(const sp_symbol_redact_t *r, const char *name, size_t nlen)
{
    size_t  i, k, at;

    for (k = 0; k < r->n; k++) {
        for (at = 0; at + r->lens[k] <= nlen; at++) {
            for (i = 0; i < r->lens[k]
                        && lower((unsigned char) name[at + i])
                           == (unsigned char) r->patterns[k][i]; i++)
            {
                /* compare */
            }
            if (i == r->lens[k]) {
                return 1;
            }
        }
    }
    return 0;
}

int
sp_symbol_redact_match(const sp_symbol_redact_t *r, const char *name)
{
    char    low[512];
    size_t  nlen, i;

    if (r == NULL || name == NULL) {
        return 0;
    }
    nlen = strlen(name);
    if (nlen >= sizeof(low)) {
        return match_long(r, name, nlen);
    }
    /* Lowered once, then libc's substring search per pattern. */
    for (i = 0; i <= nlen; i++) {
        low[i] = (char) lower((unsigned char) name[i]);
    }
    for (i = 0; i < r->n; i++) {
        if (strstr(low, r->patterns[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

size_t
sp_symbol_redact_profile(sp_symbol_redact_t *r, sp_profile_t *p)
{
    size_t  i, n = 0;

    if (r == NULL) {
        return 0;
    }
    for (i = 0; i < p->nfunctions; i++) {
        if (sp_symbol_redact_match(r, p->functions[i].name)) {
            p->functions[i].name = SP_SYMBOL_REDACTED;
            n++;
        }
    }
    r->redacted += n;
    return n;
}

void
sp_symbol_redact_get_stats(const sp_symbol_redact_t *r,
    sp_symbol_redact_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    if (r != NULL) {
        st->functions_redacted = r->redacted;
    }
}
