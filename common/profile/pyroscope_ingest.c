#include <string.h>

#include "common/profile/pyroscope_ingest.h"

/* The module's own attributes: per host or process, not the user's. */
static const char *const  not_labels[] = {
    "service.name", "host.name", "process.pid", "telemetry.sdk.name",
    "telemetry.sdk.language", "telemetry.sdk.version",
};

static int
is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9');
}

static void
label_name(const char *key, sp_buf_t *out)
{
    const unsigned char  *k = (const unsigned char *) key;

    if (*k >= '0' && *k <= '9') {
        sp_buf_append_char(out, '_');
    }
    for (; *k != '\0'; k++) {
        sp_buf_append_char(out, is_alnum(*k) || *k == '_' ? (char) *k : '_');
    }
}

static void
label_value(const char *v, sp_buf_t *out)
{
    const unsigned char  *s = (const unsigned char *) v, *e;

    while (*s == ' ' || *s == '\t') {
        s++;
    }
    e = s + strlen((const char *) s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
    for (; s < e; s++) {
        sp_buf_append_char(out, *s == ',' || *s == '{' || *s == '}'
                                || *s == '=' || *s < 0x20 || *s == 0x7f
                                ? '_' : (char) *s);
    }
}

static int
skipped(const char *key)
{
    size_t  i;

    for (i = 0; i < sizeof(not_labels) / sizeof(not_labels[0]); i++) {
        if (strcmp(key, not_labels[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* out[from..len) holds "name=" as a label already. */
static int
has_label(const sp_buf_t *out, size_t from, const sp_buf_t *name)
{
    size_t  i;

    for (i = from; i + name->len < out->len; i++) {
        if ((i == from || out->data[i - 1] == ',')
            && memcmp(out->data + i, name->data, name->len) == 0
            && out->data[i + name->len] == '=')
        {
            return 1;
        }
    }
    return 0;
}

void
sp_pyroscope_name(const sp_resource_t *r, sp_buf_t *out)
{
    const char           *app = sp_resource_get(r, "service.name");
    const unsigned char  *s;
    sp_buf_t              name, value;
    size_t                i, open;

    if (app == NULL || app[0] == '\0') {
        app = "spanprof";
    }
    for (s = (const unsigned char *) app; *s != '\0'; s++) {
        sp_buf_append_char(out, is_alnum(*s) || *s == '_' || *s == '.'
                                || *s == '-' ? (char) *s : '_');
    }
    sp_buf_append_char(out, '{');
    open = out->len;
    sp_buf_init(&name);
    sp_buf_init(&value);
    for (i = 0; i < r->nattrs; i++) {
        if (r->attrs[i].str == NULL || skipped(r->attrs[i].key)) {
            continue;
        }
        sp_buf_reset(&name);
        sp_buf_reset(&value);
        label_name(r->attrs[i].key, &name);
        label_value(r->attrs[i].str, &value);
        if (sp_buf_failed(&name) || sp_buf_failed(&value)
            || name.len == 0 || value.len == 0
            || (name.len >= 2 && memcmp(name.data, "__", 2) == 0)
            || (name.len == 12 && memcmp(name.data, "service_name", 12) == 0)
            || has_label(out, open, &name))
        {
            continue;
        }
        if (out->len > open) {
            sp_buf_append_char(out, ',');
        }
        sp_buf_append(out, name.data, name.len);
        sp_buf_append_char(out, '=');
        sp_buf_append(out, value.data, value.len);
    }
    sp_buf_free(&name);
    sp_buf_free(&value);
    sp_buf_append_char(out, '}');
}

/* RFC 3986: all but the unreserved characters percent-encoded. */
static void
url_encode(const char *s, size_t n, sp_buf_t *out)
{
    static const char  hexd[] = "0123456789ABCDEF";
    unsigned char      c;
    size_t             i;

    for (i = 0; i < n; i++) {
        c = (unsigned char) s[i];
        if (is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            sp_buf_append_char(out, (char) c);
        } else {
            sp_buf_append_char(out, '%');
            sp_buf_append_char(out, hexd[c >> 4]);
            sp_buf_append_char(out, hexd[c & 15]);
        }
    }
}

void
sp_pyroscope_ingest_url(const char *base, const sp_resource_t *r,
    uint64_t start_ns, uint64_t end_ns, sp_buf_t *out)
{
    sp_buf_t  name;

    sp_buf_init(&name);
    sp_pyroscope_name(r, &name);
    sp_buf_appendf(out, "%s/ingest?name=", base);
    if (sp_buf_failed(&name)) {
        out->failed = 1;
    }
    url_encode((const char *) name.data, name.len, out);
    sp_buf_free(&name);
    sp_buf_appendf(out, "&from=%llu&until=%llu&format=pprof&spyName=spanprof",
                   (unsigned long long) (start_ns / 1000000000ull),
                   (unsigned long long) ((end_ns + 999999999ull)
                                         / 1000000000ull));
}
