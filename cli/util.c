/* Errors, allocation, hash tables, times and output files for the CLI. */

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/spanprof.h"

/* --- errors -------------------------------------------------------------- */

static void
vmsg(const char *prefix, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "spanprof: %s", prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void
cli_die(const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
    exit(CLI_EXIT_ERROR);
}

void
cli_usage_die(const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
    exit(CLI_EXIT_USAGE);
}

void
cli_warn(const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    vmsg("warning: ", fmt, ap);
    va_end(ap);
}

/* --- allocation ---------------------------------------------------------- */

void *
xmalloc(size_t n)
{
    void  *p = malloc(n ? n : 1);

    if (p == NULL) {
        cli_die("out of memory");
    }
    return p;
}

void *
xcalloc(size_t n, size_t size)
{
    void  *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL) {
        cli_die("out of memory");
    }
    return p;
}

void *
xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL) {
        cli_die("out of memory");
    }
    return p;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
    char  *p = xmalloc(n + 1);

    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void
cli_grow(void *pp, size_t *cap, size_t n, size_t sz)
{
    void  **p = pp;
    size_t  c = *cap;

    if (n <= c) {
        return;
    }
    c = c ? c : 16;
    while (c < n) {
        if (c > SIZE_MAX / 2 / sz) {
            cli_die("out of memory");
        }
        c *= 2;
    }
    *p = xrealloc(*p, c * sz);
    *cap = c;
}

/* --- hashing ------------------------------------------------------------- */

static uint64_t
hash_bytes(const void *data, size_t n)
{
    const unsigned char  *s = data;
    uint64_t              h = 0xcbf29ce484222325ULL;     /* FNV-1a */

    while (n-- > 0) {
        h = (h ^ *s++) * 0x100000001b3ULL;
    }
    return h ^ (h >> 29);
}

void
cli_strpool_init(cli_strpool_t *p)
{
    memset(p, 0, sizeof(*p));
}

void
cli_strpool_free(cli_strpool_t *p)
{
    size_t  i;

    for (i = 0; i < p->n; i++) {
        free(p->strs[i]);
    }
    free(p->strs);
    free(p->slots);
    memset(p, 0, sizeof(*p));
}

static void
strpool_rehash(cli_strpool_t *p)
{
    size_t  i, j, mask, ns = p->nslots ? p->nslots * 2 : 256;

    free(p->slots);
    p->slots = xcalloc(ns, sizeof(uint32_t));
    p->nslots = ns;
    mask = ns - 1;
    for (i = 0; i < p->n; i++) {
        j = hash_bytes(p->strs[i], strlen(p->strs[i])) & mask;
        while (p->slots[j] != 0) {
            j = (j + 1) & mask;
        }
        p->slots[j] = (uint32_t) i + 1;
    }
}

int32_t
cli_strpool_intern(cli_strpool_t *p, const char *s, size_t len)
{
    size_t    j, mask;
    uint32_t  v;

    if ((p->n + 1) * 2 > p->nslots) {
        strpool_rehash(p);
    }
    mask = p->nslots - 1;
    for (j = hash_bytes(s, len) & mask; (v = p->slots[j]) != 0;
         j = (j + 1) & mask)
    {
        if (strncmp(p->strs[v - 1], s, len) == 0
            && p->strs[v - 1][len] == '\0')
        {
            return (int32_t) v - 1;
        }
    }
    if (p->n >= INT32_MAX) {
        cli_die("too many distinct strings");
    }
    cli_grow(&p->strs, &p->cap, p->n + 1, sizeof(char *));
    p->strs[p->n] = xstrndup(s, len);
    p->slots[j] = (uint32_t) ++p->n;
    return (int32_t) p->n - 1;
}

int32_t
cli_strpool_find(const cli_strpool_t *p, const char *s)
{
    size_t    j, mask, len = strlen(s);
    uint32_t  v;

    if (p->nslots == 0) {
        return -1;
    }
    mask = p->nslots - 1;
    for (j = hash_bytes(s, len) & mask; (v = p->slots[j]) != 0;
         j = (j + 1) & mask)
    {
        if (strcmp(p->strs[v - 1], s) == 0) {
            return (int32_t) v - 1;
        }
    }
    return -1;
}

void
cli_keymap_init(cli_keymap_t *m, size_t keysz)
{
    memset(m, 0, sizeof(*m));
    m->keysz = keysz;
}

void
cli_keymap_free(cli_keymap_t *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    cli_keymap_init(m, m->keysz);
}

static size_t
keymap_slot(const cli_keymap_t *m, const void *key)
{
    size_t  j, mask = m->cap - 1;

    for (j = hash_bytes(key, m->keysz) & mask; m->used[j];
         j = (j + 1) & mask)
    {
        if (memcmp(m->keys + j * m->keysz, key, m->keysz) == 0) {
            break;
        }
    }
    return j;
}

int32_t
cli_keymap_get(const cli_keymap_t *m, const void *key)
{
    size_t  j;

    if (m->cap == 0) {
        return -1;
    }
    j = keymap_slot(m, key);
    return m->used[j] ? m->vals[j] : -1;
}

int32_t
cli_keymap_put(cli_keymap_t *m, const void *key, int32_t val)
{
    cli_keymap_t  old;
    size_t        i, j;

    if ((m->n + 1) * 2 > m->cap) {
        old = *m;
        m->cap = old.cap ? old.cap * 2 : 256;
        m->keys = xmalloc(m->cap * m->keysz);
        m->vals = xmalloc(m->cap * sizeof(int32_t));
        m->used = xcalloc(m->cap, 1);
        for (i = 0; i < old.cap; i++) {
            if (old.used[i]) {
                j = keymap_slot(m, old.keys + i * old.keysz);
                memcpy(m->keys + j * m->keysz, old.keys + i * old.keysz,
                       m->keysz);
                m->vals[j] = old.vals[i];
                m->used[j] = 1;
            }
        }
        free(old.keys);
        free(old.vals);
        free(old.used);
    }
    j = keymap_slot(m, key);
    if (m->used[j]) {
        return m->vals[j];
    }
    memcpy(m->keys + j * m->keysz, key, m->keysz);
    m->vals[j] = val;
    m->used[j] = 1;
    m->n++;
    return val;
}

/* --- times --------------------------------------------------------------- */

int64_t
cli_now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* n digits at s into *v; 0 or -1. */
static int
digits(const char *s, int n, int *v)
{
    int  i;

    *v = 0;
    for (i = 0; i < n; i++) {
        if (!isdigit((unsigned char) s[i])) {
            return -1;
        }
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

/* ".123456789" at *s: nanoseconds, *s moved past it. */
static int
fraction(const char **s, int64_t *ns)
{
    const char  *p = *s;
    int64_t      scale = 100000000;

    *ns = 0;
    if (*p != '.') {
        return 0;
    }
    p++;
    if (!isdigit((unsigned char) *p)) {
        return -1;
    }
    for (; isdigit((unsigned char) *p); p++) {
        *ns += (*p - '0') * scale;
        scale /= 10;
    }
    *s = p;
    return 0;
}

static int
parse_rfc3339(const char *s, int64_t *out)
{
    struct tm  tm;
    int        y, mo, d, h, mi, sec, oh, om;
    int64_t    frac, off = 0;
    time_t     t;
    const char *p;

    if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-'
        || digits(s + 5, 2, &mo) || s[7] != '-' || digits(s + 8, 2, &d)
        || (s[10] != 'T' && s[10] != 't' && s[10] != ' ')
        || digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi)
        || s[16] != ':' || digits(s + 17, 2, &sec))
    {
        return -1;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59
        || sec > 60 || y < 1970)
    {
        return -1;
    }
    p = s + 19;
    if (fraction(&p, &frac) != 0) {
        return -1;
    }
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        off = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6
               && digits(p + 1, 2, &oh) == 0 && p[3] == ':'
               && digits(p + 4, 2, &om) == 0 && oh <= 23 && om <= 59)
    {
        off = (int64_t) (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
    } else {
        return -1;
    }
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (tm.tm_mday != d) {          /* 2026-02-30 */
        return -1;
    }
    if ((int64_t) t - off > INT64_MAX / 1000000000 - 1) {   /* past 2262 */
        return -1;
    }
    *out = ((int64_t) t - off) * 1000000000 + frac;
    return 0;
}

static int
parse_relative(const char *s, int64_t now, int64_t *out)
{
    int64_t      total = 0, n, unit;
    int          sign = *s == '-' ? -1 : 1;
    const char  *p = s + 1;

    if (*p == '\0') {
        return -1;
    }
    while (*p != '\0') {
        if (!isdigit((unsigned char) *p)) {
            return -1;
        }
        for (n = 0; isdigit((unsigned char) *p); p++) {
            if (n > 1000000000) {
                return -1;
            }
            n = n * 10 + (*p - '0');
        }
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1000000;
            p += 2;
        } else if (*p == 's') {
            unit = 1000000000;
            p++;
        } else if (*p == 'm') {
            unit = 60 * 1000000000LL;
            p++;
        } else if (*p == 'h') {
            unit = 3600 * 1000000000LL;
            p++;
        } else if (*p == 'd') {
            unit = 86400 * 1000000000LL;
            p++;
        } else {
            return -1;
        }
        if (n > INT64_MAX / unit || total > INT64_MAX - n * unit) {
            return -1;
        }
        total += n * unit;
    }
    if (sign > 0 ? now > INT64_MAX - total : now < INT64_MIN + total) {
        return -1;
    }
    *out = now + sign * total;
    return 0;
}

int
cli_parse_time(const char *s, int64_t now_ns, int64_t *out, const char **err)
{
    const char  *p = s;
    int64_t      sec = 0, frac;

    *err = "not a time (use unix seconds, RFC 3339 like "
           "2026-11-22T03:00:00Z, \"now\" or relative like -5m)";
    if (*s == '\0') {
        return -1;
    }
    if (strcmp(s, "now") == 0) {
        *out = now_ns;
        return 0;
    }
    if (*s == '-' || *s == '+') {
        return parse_relative(s, now_ns, out);
    }
    if (strchr(s, ':') != NULL) {
        return parse_rfc3339(s, out);
    }
    for (; isdigit((unsigned char) *p); p++) {
        if (sec > 9000000000LL) {
            return -1;
        }
        sec = sec * 10 + (*p - '0');
    }
    if (p == s || fraction(&p, &frac) != 0 || *p != '\0'
        || sec > INT64_MAX / 1000000000 - 1)    /* past 2262 in ns */
    {
        return -1;
    }
    *out = sec * 1000000000 + frac;
    return 0;
}

int
cli_parse_range(const char *s, int64_t now_ns, int64_t *from, int64_t *to,
    const char **err)
{
    const char  *dots = strstr(s, "..");
    char        *a;
    int          rc;

    if (dots == NULL) {
        *err = "not a range A..B";
        return -1;
    }
    a = xstrndup(s, (size_t) (dots - s));
    rc = cli_parse_time(a, now_ns, from, err);
    free(a);
    if (rc != 0) {
        return -1;
    }
    if (dots[2] == '\0') {
        *to = now_ns;
    } else if (cli_parse_time(dots + 2, now_ns, to, err) != 0) {
        return -1;
    }
    if (*from >= *to) {
        *err = "the range ends before it starts";
        return -1;
    }
    return 0;
}

void
cli_format_time(int64_t ns, char *buf, size_t len)
{
    time_t     t = (time_t) (ns / 1000000000);
    struct tm  tm;

    gmtime_r(&t, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int) (ns % 1000000000 / 1000000));
}

void
cli_format_clock(int64_t ns, char *buf, size_t len)
{
    time_t     t = (time_t) (ns / 1000000000);
    struct tm  tm;

    gmtime_r(&t, &tm);
    snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min,
             tm.tm_sec, (int) (ns % 1000000000 / 1000000));
}

void
cli_format_ms(int64_t ns, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f ms", (double) ns / 1e6);
}

/* --- misc ---------------------------------------------------------------- */

int
cli_is_hex(const char *s, size_t max)
{
    size_t  n = 0;

    for (; s[n] != '\0'; n++) {
        if (!isxdigit((unsigned char) s[n]) || n >= max) {
            return 0;
        }
    }
    return n > 0;
}

void
cli_lowercase(char *s)
{
    for (; *s != '\0'; s++) {
        *s = (char) tolower((unsigned char) *s);
    }
}

void
cli_write_file(const char *path, const void *data, size_t len)
{
    FILE  *f;
    int    failed;

    if (strcmp(path, "-") == 0) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
            cli_die("cannot write to standard output: %s", strerror(errno));
        }
        return;
    }
    f = fopen(path, "wb");
    if (f == NULL) {
        cli_die("cannot write %s: %s", path, strerror(errno));
    }
    failed = fwrite(data, 1, len, f) != len;
    if (fclose(f) != 0 || failed) {
        cli_die("cannot write %s: %s", path, strerror(errno));
    }
}
