#include <string.h>

#include <curl/curl.h>

#include "common/export/h2c_reuse.h"

int
sp_h2c_reuse_broken(void)
{
    return curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
}

/* The slot of url's origin, taken (the oldest replaced) when new. */
static sp_h2c_origin_t *
origin_of(sp_h2c_reuse_t *r, const char *url)
{
    const char       *host = strstr(url, "://");
    size_t            n;
    int               i;
    sp_h2c_origin_t  *o, *oldest = &r->o[0];

    host = host != NULL ? host + 3 : url;
    n = (size_t) (host - url) + strcspn(host, "/?#");
    if (n >= SP_H2C_ORIGIN_MAX) {
        n = SP_H2C_ORIGIN_MAX - 1;
    }
    for (i = 0; i < SP_H2C_ORIGINS; i++) {
        o = &r->o[i];
        if (strncmp(o->origin, url, n) == 0 && o->origin[n] == '\0') {
            o->used = ++r->clock;
            return o;
        }
        if (o->used < oldest->used) {
            oldest = o;
        }
    }
    memset(oldest, 0, sizeof(*oldest));
    memcpy(oldest->origin, url, n);
    oldest->origin[n] = '\0';
    oldest->used = ++r->clock;
    return oldest;
}

int
sp_h2c_begin(sp_h2c_reuse_t *r, const char *url, int prior)
{
    sp_h2c_origin_t  *o = origin_of(r, url);

    /* While a prior-knowledge call connects, others wait for its
     * connection (PIPEWAIT) rather than open one with an Upgrade. */
    if (!prior && (o->live || o->connecting > 0)) {
        return SP_H2C_REUSE;
    }
    if (prior) {
        atomic_fetch_add_explicit(&r->reconnects, 1, memory_order_relaxed);
    }
    o->connecting++;
    return SP_H2C_PRIOR;
}

int
sp_h2c_end(sp_h2c_reuse_t *r, const char *url, int mode, int h2,
    int new_conn)
{
    sp_h2c_origin_t  *o = origin_of(r, url);

    if (mode == SP_H2C_PRIOR) {
        if (o->connecting > 0) {
            o->connecting--;
        }
        if (h2) {
            o->live = 1;
        }
        return 0;
    }
    if (h2) {
        o->live = 1;
        return 0;
    }
    if (!new_conn) {
        return 0;   /* failed on the connection: its own error */
    }
    o->live = 0;
    return 1;
}

uint64_t
sp_h2c_reconnects(const sp_h2c_reuse_t *r)
{
    return atomic_load_explicit(&((sp_h2c_reuse_t *) r)->reconnects,
                                memory_order_relaxed);
}
