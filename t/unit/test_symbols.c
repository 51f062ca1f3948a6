/* The symbolizer: own functions (PIE bias), libc, gaps between symbols,
 * the vdso, unmapped pcs, libraries loaded later or deleted, a library
 * linked at a non-zero base, the per-pc cache, and garbage ELF files. */

#define _GNU_SOURCE

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/profile/symbols.h"

#define skip(...) do {                                                       \
    tap_n++;                                                                 \
    printf("ok %d # skip ", tap_n);                                          \
    printf(__VA_ARGS__);                                                     \
    printf("\n");                                                            \
} while (0)

/* Test-only entry point of symbols.c. */
extern int sp_symbols_test_load(const char *path, size_t *nsyms);

uint64_t sp_test_burn_alpha(uint64_t n);
uint64_t sp_test_burn_beta(uint64_t n);

typedef struct {
    uint64_t  addr;
    uint64_t  size;
    char      type;
    char      name[256];
} nm_sym_t;

typedef struct {
    const char  *want;          /* dlpi_name substring, "" for the exe */
    uint64_t     bias;
    uint64_t     text_lo;       /* executable PT_LOAD, ELF vaddrs */
    uint64_t     text_hi;
    int          found;
} phdr_query_t;

volatile uint64_t  sp_test_sink;

static char        exe[PATH_MAX];
static const char *exe_base;
static char        tmpdir[] = "/tmp/sp_symbols_XXXXXX";
static nm_sym_t   *nm_syms;
static size_t      nm_nsyms;


__attribute__((noinline)) uint64_t
sp_test_burn_alpha(uint64_t n)
{
    uint64_t  i, x;

    x = 1;
    for (i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + i;
        sp_test_sink = x;
    }
    return x;
}


__attribute__((noinline)) uint64_t
sp_test_burn_beta(uint64_t n)
{
    uint64_t  i, x;

    x = 7;
    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sp_test_sink = x + i;
    }
    return x;
}


__attribute__((noinline)) static uint64_t
burn_static(uint64_t n)
{
    uint64_t  i, x;

    x = 3;
    for (i = 0; i < n; i++) {
        x += (x >> 3) ^ (i * 0x9e3779b97f4a7c15ULL);
        sp_test_sink = x;
    }
    return x * 5;
}


/* Called through a volatile table so the compiler cannot specialise or
 * rename them. */
static uint64_t (*volatile burners[])(uint64_t) = {
    sp_test_burn_alpha, sp_test_burn_beta, burn_static
};
static const char *burner_names[] = {
    "sp_test_burn_alpha", "sp_test_burn_beta", "burn_static"
};


static uint64_t
now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}


static int
phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    phdr_query_t  *q = data;
    int            i;

    if (q->want[0] == '\0' ? info->dlpi_name[0] != '\0'
                           : strstr(info->dlpi_name, q->want) == NULL)
    {
        return 0;
    }
    q->bias = info->dlpi_addr;
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_LOAD
            && (info->dlpi_phdr[i].p_flags & PF_X))
        {
            q->text_lo = info->dlpi_phdr[i].p_vaddr;
            q->text_hi = q->text_lo + info->dlpi_phdr[i].p_memsz;
        }
    }
    q->found = 1;
    return 1;
}


static int
phdr_query(const char *want, phdr_query_t *q)
{
    memset(q, 0, sizeof(*q));
    q->want = want;
    dl_iterate_phdr(phdr_cb, q);
    return q->found ? 0 : -1;
}


static void
nm_load(void)
{
    char       cmd[PATH_MAX + 64], line[512];
    FILE      *f;
    nm_sym_t   sym;
    size_t     cap;

    snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s' 2>/dev/null", exe);
    f = popen(cmd, "r");
    if (f == NULL) {
        return;
    }
    cap = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %255s", &sym.addr,
                   &sym.size, &sym.type, sym.name) != 4)
        {
            continue;
        }
        if (nm_nsyms == cap) {
            cap = cap ? cap * 2 : 1024;
            nm_syms = realloc(nm_syms, cap * sizeof(nm_sym_t));
            if (nm_syms == NULL) {
                break;
            }
        }
        nm_syms[nm_nsyms++] = sym;
    }
    pclose(f);
}


static const nm_sym_t *
nm_find(const char *name)
{
    size_t  i;

    for (i = 0; i < nm_nsyms; i++) {
        if (strcmp(nm_syms[i].name, name) == 0) {
            return &nm_syms[i];
        }
    }
    return NULL;
}


static int
nm_covered(uint64_t vaddr)
{
    size_t  i;

    for (i = 0; i < nm_nsyms; i++) {
        if (nm_syms[i].size > 0 && vaddr >= nm_syms[i].addr
            && vaddr - nm_syms[i].addr < nm_syms[i].size)
        {
            return 1;
        }
    }
    return 0;
}


/* The build id as readelf sees it, or "" when readelf is missing. */
static void
readelf_build_id(const char *path, char *out, size_t len)
{
    char   cmd[PATH_MAX + 64], line[512], *p;
    FILE  *f;

    out[0] = '\0';
    snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
    f = popen(cmd, "r");
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        p = strstr(line, "Build ID: ");
        if (p != NULL && out[0] == '\0') {
            snprintf(out, len, "%s", p + strlen("Build ID: "));
            out[strcspn(out, " \r\n")] = '\0';
        }
    }
    pclose(f);
}


static int
is_hex(const char *s, size_t len)
{
    size_t  i;

    if (s == NULL || strlen(s) != len) {
        return 0;
    }
    for (i = 0; i < len; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}


static int
write_file(const char *path, const void *p, size_t n)
{
    FILE  *f;
    int    rc;

    f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    rc = fwrite(p, 1, n, f) == n ? 0 : -1;
    if (fclose(f) != 0) {
        rc = -1;
    }
    return rc;
}


static unsigned char *
read_file(const char *path, size_t *n)
{
    unsigned char  *buf;
    struct stat     st;
    FILE           *f;

    f = fopen(path, "rb");
    if (f == NULL || fstat(fileno(f), &st) != 0) {
        if (f) {
            fclose(f);
        }
        return NULL;
    }
    buf = malloc((size_t) st.st_size + 1);
    if (buf != NULL) {
        *n = fread(buf, 1, (size_t) st.st_size, f);
    }
    fclose(f);
    return buf;
}


static int
copy_file(const char *from, const char *to)
{
    unsigned char  *buf;
    size_t          n;
    int             rc;

    buf = read_file(from, &n);
    if (buf == NULL) {
        return -1;
    }
    rc = write_file(to, buf, n);
    free(buf);
    return rc;
}


/* The path of an already loaded library, through the link map. */
static int
lib_path(const char *soname, char *out, size_t len)
{
    struct link_map  *lm;
    void             *h;

    h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) {
        h = dlopen(soname, RTLD_NOW);
    }
    if (h == NULL || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
        return -1;
    }
    snprintf(out, len, "%s", lm->l_name);
    return 0;
}


static uint64_t
prng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}


/* ---- tests ---------------------------------------------------------- */

static void
test_own_functions(sp_symbolizer_t *s)
{
    phdr_query_t      q;
    const nm_sym_t   *ns;
    sp_symbol_t       sym;
    uint64_t          fn, offs[4], pc;
    char              want_id[256];
    size_t            i, k;
    int               good;

    if (phdr_query("", &q) != 0) {
        ok(0, "dl_iterate_phdr finds the test binary");
        return;
    }
    printf("# test binary load bias 0x%" PRIx64 " (%s)\n", q.bias,
           q.bias ? "PIE" : "not PIE");

    for (i = 0; i < 3; i++) {
        fn = (uint64_t) (uintptr_t) burners[i];
        ns = nm_find(burner_names[i]);
        if (ns == NULL) {
            ok(0, "nm lists %s", burner_names[i]);
            continue;
        }
        /* Our reference for bias: nm's vaddr plus the loader's bias. */
        is_int(ns->addr + q.bias, fn, "%s: nm vaddr + dlpi_addr is its "
               "address", burner_names[i]);
        ok(ns->size > 8, "%s is longer than 8 bytes (%" PRIu64 ")",
           burner_names[i], ns->size);

        offs[0] = 0;
        offs[1] = 5;
        offs[2] = ns->size / 2;
        offs[3] = ns->size - 1;
        for (k = 0; k < 4; k++) {
            pc = fn + offs[k];
            sp_symbolize(s, pc, &sym);
            is_str(sym.function, burner_names[i], "%s+%" PRIu64 ": function",
                   burner_names[i], offs[k]);
            is_str(sym.display, burner_names[i], "%s+%" PRIu64 ": display",
                   burner_names[i], offs[k]);
            is_int(sym.function_start, fn, "%s+%" PRIu64 ": function_start",
                   burner_names[i], offs[k]);
            is_str(sym.object, exe, "%s+%" PRIu64 ": object",
                   burner_names[i], offs[k]);
            is_int(sym.file_offset, ns->addr + offs[k],
                   "%s+%" PRIu64 ": file_offset is the ELF vaddr",
                   burner_names[i], offs[k]);
        }
        is_str(sym.object_base, exe_base, "%s: object_base",
               burner_names[i]);
        ok(sym.map_start <= fn && fn + ns->size <= sym.map_limit,
           "%s: inside [map_start, map_limit)", burner_names[i]);
        ok(sym.map_offset % (uint64_t) sysconf(_SC_PAGESIZE) == 0,
           "%s: map_offset 0x%" PRIx64 " is page aligned", burner_names[i],
           sym.map_offset);

        /* One past the end belongs to somebody else, or nobody. */
        sp_symbolize(s, fn + ns->size, &sym);
        good = sym.function == NULL
               || strcmp(sym.function, burner_names[i]) != 0;
        ok(good, "%s+size is not %s (got %s)", burner_names[i],
           burner_names[i], sym.display);
    }

    sp_symbolize(s, (uint64_t) (uintptr_t) sp_test_burn_alpha, &sym);
    readelf_build_id(exe, want_id, sizeof(want_id));
    if (want_id[0] == '\0') {
        skip("readelf shows no build id for the test binary");
    } else {
        is_str(sym.build_id, want_id, "test binary build id as readelf");
    }
}


static int
nm_cmp(const void *a, const void *b)
{
    const nm_sym_t  *x = a, *y = b;

    return x->addr < y->addr ? -1 : x->addr > y->addr;
}


static void
test_gaps(sp_symbolizer_t *s)
{
    phdr_query_t     q;
    nm_sym_t        *sorted;
    sp_symbol_t      sym;
    uint64_t         cur, picks[2];
    char             want[PATH_MAX + 32];
    size_t           i, n;
    int              npicks;

    if (phdr_query("", &q) != 0 || q.text_hi == 0 || nm_nsyms == 0) {
        ok(0, "test binary text segment and nm symbols found");
        return;
    }

    /* Sized symbols in the text segment, by address; then the first byte
     * of the segment not covered by any (.init, before every symbol) and
     * the first uncovered byte after the first symbol (padding, .plt.sec,
     * .fini), which a lookup ignoring st_size would give to a neighbour. */
    sorted = malloc(nm_nsyms * sizeof(nm_sym_t));
    n = 0;
    for (i = 0; i < nm_nsyms; i++) {
        if (nm_syms[i].size > 0 && nm_syms[i].addr >= q.text_lo
            && nm_syms[i].addr < q.text_hi)
        {
            sorted[n++] = nm_syms[i];
        }
    }
    qsort(sorted, n, sizeof(nm_sym_t), nm_cmp);

    npicks = 0;
    if (n > 0 && q.text_lo < sorted[0].addr && !nm_covered(q.text_lo)) {
        picks[npicks++] = q.text_lo;
    }
    cur = n > 0 ? sorted[0].addr : q.text_hi;
    for (i = 0; i < n; i++) {
        if (sorted[i].addr > cur) {
            break;
        }
        if (sorted[i].addr + sorted[i].size > cur) {
            cur = sorted[i].addr + sorted[i].size;
        }
    }
    if (cur < q.text_hi && !nm_covered(cur)) {
        picks[npicks++] = cur;
    } else {
        ok(0, "a gap after the first symbol of the text segment");
    }
    free(sorted);

    ok(npicks > 0, "found an address outside every symbol");

    for (i = 0; i < (size_t) npicks; i++) {
        sp_symbolize(s, q.bias + picks[i], &sym);
        snprintf(want, sizeof(want), "%s+0x%" PRIx64, exe_base, picks[i]);
        ok(sym.function == NULL, "gap 0x%" PRIx64 ": no function (got %s)",
           picks[i], sym.function ? sym.function : "NULL");
        is_str(sym.display, want, "gap 0x%" PRIx64 ": display", picks[i]);
        is_int(sym.file_offset, picks[i], "gap: file_offset");
        is_str(sym.object, exe, "gap: object");
    }
}


static void
test_libc(sp_symbolizer_t *s)
{
    static const char *names[] = { "getpid", "qsort", "strtol" };
    sp_symbol_t   sym, sym2;
    phdr_query_t  q;
    void         *h, *fp;
    uint64_t      addr;
    char          want_id[256];
    size_t        i;

    h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    ok(h != NULL, "libc.so.6 handle");
    if (h == NULL) {
        return;
    }
    ok(phdr_query("libc.so", &q) == 0, "libc in dl_iterate_phdr");

    for (i = 0; i < 3; i++) {
        /* Through libc's handle: RTLD_DEFAULT would find ASan's
         * interceptors first. */
        fp = dlsym(h, names[i]);
        addr = (uint64_t) (uintptr_t) fp;
        sp_symbolize(s, addr, &sym);
        ok(sym.function != NULL && strstr(sym.function, names[i]) != NULL,
           "libc %s: name %s", names[i], sym.function);
        is_int(sym.function_start, addr, "libc %s: function_start",
               names[i]);
        ok(sym.object_base != NULL
           && strncmp(sym.object_base, "libc.so", 7) == 0,
           "libc %s: object_base %s", names[i], sym.object_base);
        ok(is_hex(sym.build_id, 40), "libc %s: build id %s", names[i],
           sym.build_id);
        is_int(sym.file_offset, addr - q.bias, "libc %s: file_offset",
               names[i]);

        sp_symbolize(s, addr + 3, &sym2);
        ok(sym2.function == sym.function && sym2.function_start == addr,
           "libc %s+3: same function", names[i]);
    }

    readelf_build_id(sym.object, want_id, sizeof(want_id));
    if (want_id[0] == '\0') {
        skip("readelf shows no build id for libc");
    } else {
        is_str(sym.build_id, want_id, "libc build id as readelf");
    }
}


static void
test_vdso(sp_symbolizer_t *s)
{
    const unsigned char  *base;
    const Elf64_Shdr     *sh, *str;
    const Elf64_Sym      *sym;
    const Elf64_Ehdr     *eh;
    phdr_query_t          q;
    sp_symbol_t           out;
    uint64_t              pc, start;
    size_t                i, n;
    const char           *name;

    base = (const unsigned char *) getauxval(AT_SYSINFO_EHDR);
    if (base == NULL || phdr_query("vdso", &q) != 0) {
        skip("no vdso");
        return;
    }

    /* Find clock_gettime in the vdso's .dynsym ourselves. */
    eh = (const Elf64_Ehdr *) base;
    start = 0;
    pc = 0;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_shoff != 0
        && eh->e_shoff < 65536 && eh->e_shentsize == sizeof(Elf64_Shdr))
    {
        sh = (const Elf64_Shdr *) (base + eh->e_shoff);
        for (i = 0; i < eh->e_shnum && pc == 0; i++) {
            if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
            {
                continue;
            }
            str = &sh[sh[i].sh_link];
            sym = (const Elf64_Sym *) (base + sh[i].sh_offset);
            n = sh[i].sh_size / sizeof(Elf64_Sym);
            for (; n > 0; n--, sym++) {
                name = (const char *) base + str->sh_offset + sym->st_name;
                if (sym->st_size > 0 && strstr(name, "clock_gettime")) {
                    start = q.bias + sym->st_value;
                    pc = start + sym->st_size / 2;
                    break;
                }
            }
        }
    }
    if (pc == 0) {
        skip("the vdso has no clock_gettime symbol here");
        return;
    }

    sp_symbolize(s, pc, &out);
    is_str(out.object, "[vdso]", "vdso: object");
    is_str(out.object_base, "[vdso]", "vdso: object_base");
    ok(out.function != NULL && strstr(out.function, "clock_gettime"),
       "vdso: function %s", out.function);
    is_int(out.function_start, start, "vdso: function_start");
    is_int(out.map_start, (uintptr_t) base, "vdso: map_start is the image");
}


static void
test_unmapped(sp_symbolizer_t *s)
{
    sp_symbol_t  sym, sym2;

    sp_symbolize(s, 0x10, &sym);
    is_str(sym.display, "0x10", "0x10: display");
    ok(sym.function == NULL && sym.object == NULL && sym.object_base == NULL
       && sym.build_id == NULL && sym.map_start == 0,
       "0x10: no function, object or mapping");

    sp_symbolize(s, 0x10, &sym2);
    ok(sym2.display == sym.display, "0x10 twice: the same string");

    sp_symbolize(s, UINT64_MAX - 4, &sym);
    is_str(sym.display, "0xfffffffffffffffb", "top of the address space");
}


static void
test_cache(sp_symbolizer_t *s)
{
    sp_symbol_t  a, b;
    uint64_t     pcs[4], t0, t1;
    const char  *before;
    size_t       i, bad;

    pcs[0] = (uint64_t) (uintptr_t) sp_test_burn_alpha + 5;
    pcs[1] = (uint64_t) (uintptr_t) sp_test_burn_beta + 2;
    pcs[2] = (uint64_t) (uintptr_t) burn_static + 1;
    pcs[3] = (uint64_t) (uintptr_t) dlsym(RTLD_NEXT, "getppid");

    sp_symbolize(s, pcs[0], &a);
    sp_symbolize(s, pcs[0], &b);
    ok(a.function == b.function && a.display == b.display
       && a.object == b.object && a.build_id == b.build_id,
       "same pc twice: identical strings");
    ok(memcmp(&a, &b, sizeof(a)) == 0, "same pc twice: identical result");

    bad = 0;
    t0 = now_ns();
    for (i = 0; i < 100000; i++) {
        sp_symbolize(s, pcs[i & 3], &b);
        bad += b.display == NULL;
    }
    t1 = now_ns();
    printf("# 100000 lookups in %.3f ms\n", (double) (t1 - t0) / 1e6);
    ok(bad == 0 && t1 - t0 < 1000000000ULL, "100000 lookups under 1 s");

    /* A refresh keeps the names of files still mapped. */
    before = a.function;
    is_int(sp_symbolizer_refresh(s), 0, "refresh");
    sp_symbolize(s, pcs[0], &a);
    ok(a.function == before, "after refresh: the same name string");
}


/* Libraries loaded after the symbolizer: copies of libm (already loaded by
 * ASan, so dlopen("libm.so.6") would add nothing new). cos is an IFUNC
 * whose implementation has no dynamic symbol, so cbrt is used. */
static void
test_dlopen(void)
{
    sp_symbolizer_t  *s;
    sp_symbol_t       sym;
    uint64_t          a1, a2, t0;
    char              libm[PATH_MAX], p1[PATH_MAX], p2[PATH_MAX];
    void             *h1, *h2;
    int               ran;

    if (lib_path("libm.so.6", libm, sizeof(libm)) != 0) {
        ok(0, "libm.so.6 found");
        return;
    }
    snprintf(p1, sizeof(p1), "%s/libsp_m1.so", tmpdir);
    snprintf(p2, sizeof(p2), "%s/libsp_m2.so", tmpdir);
    ok(copy_file(libm, p1) == 0 && copy_file(libm, p2) == 0,
       "copied %s", libm);

    s = sp_symbolizer_new(NULL);

    h1 = dlopen(p1, RTLD_NOW | RTLD_LOCAL);
    ok(h1 != NULL, "dlopen copy 1: %s", h1 ? "ok" : dlerror());
    if (h1 == NULL) {
        sp_symbolizer_free(s);
        return;
    }
    a1 = (uint64_t) (uintptr_t) dlsym(h1, "cbrt");

    sp_symbolize(s, a1 + 1, &sym);
    t0 = now_ns();
    ok(sym.function != NULL && strstr(sym.function, "cbrt"),
       "library loaded later: %s", sym.display);
    is_int(sym.function_start, a1, "library loaded later: function_start");
    is_str(sym.object, p1, "library loaded later: object");

    /* Within 100 ms of that refresh, another unknown pc does not refresh
     * again; after it, it does. */
    h2 = dlopen(p2, RTLD_NOW | RTLD_LOCAL);
    a2 = h2 ? (uint64_t) (uintptr_t) dlsym(h2, "cbrt") : 0;
    ok(a2 != 0 && a2 != a1, "dlopen copy 2");
    ran = 0;
    if (now_ns() - t0 < 60000000ULL) {
        sp_symbolize(s, a2, &sym);
        if (now_ns() - t0 < 90000000ULL) {
            ok(sym.function == NULL && sym.object == NULL,
               "second unknown pc within 100 ms: no refresh (%s)",
               sym.display);
            ran = 1;
        }
    }
    if (!ran) {
        skip("too slow to observe the refresh rate limit");
    }
    usleep(120000);
    sp_symbolize(s, a2, &sym);
    ok(sym.function != NULL && strstr(sym.function, "cbrt"),
       "after 100 ms: refreshed (%s)", sym.display);
    is_str(sym.object, p2, "after 100 ms: object");

    sp_symbolizer_free(s);
}


typedef struct {
    int       has_function;
    int       has_object;
    uint64_t  file_offset;
    char      display[256];
    char      object[PATH_MAX];
} child_result_t;


static void
symbolize_into(uint64_t pc, child_result_t *r)
{
    sp_symbolizer_t  *s;
    sp_symbol_t       sym;

    memset(r, 0, sizeof(*r));
    s = sp_symbolizer_new(NULL);
    sp_symbolize(s, pc, &sym);
    r->has_function = sym.function != NULL;
    r->has_object = sym.object != NULL;
    r->file_offset = sym.file_offset;
    snprintf(r->display, sizeof(r->display), "%s", sym.display);
    snprintf(r->object, sizeof(r->object), "%s",
             sym.object ? sym.object : "");
    sp_symbolizer_free(s);
}


/* Whether this process may open /proc/self/map_files entries (root with
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE). */
static int
map_files_open(uint64_t pc)
{
    char   line[512], p[128];
    FILE  *f;
    int    fd;
    unsigned long long  lo, hi;

    fd = -1;
    f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && pc >= lo && pc < hi) {
            snprintf(p, sizeof(p), "/proc/self/map_files/%llx-%llx", lo, hi);
            fd = open(p, O_RDONLY | O_CLOEXEC);
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    if (fd >= 0) {
        close(fd);
    }
    return fd >= 0;
}


/* Without privileges /proc/self/map_files is closed and a deleted file's
 * names are gone. Root runs that part in a child as nobody. 0, -1 on
 * failure, 1 when the child could not drop privileges. */
static int
symbolize_unprivileged(uint64_t pc, child_result_t *r)
{
    pid_t  pid;
    int    fds[2], rc, st;

    if (geteuid() != 0) {
        symbolize_into(pc, r);
        return 0;
    }
    if (pipe(fds) != 0) {
        return -1;
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            _exit(2);
        }
        symbolize_into(pc, r);
        _exit(write(fds[1], r, sizeof(*r)) == (ssize_t) sizeof(*r) ? 0 : 3);
    }
    close(fds[1]);
    rc = read(fds[0], r, sizeof(*r)) == (ssize_t) sizeof(*r) ? 0 : -1;
    close(fds[0]);
    if (waitpid(pid, &st, 0) == pid && WIFEXITED(st)
        && WEXITSTATUS(st) == 2)
    {
        return 1;
    }
    return rc;
}


static void
test_deleted(void)
{
    child_result_t  r;
    phdr_query_t    q;
    uint64_t        a;
    char            libm[PATH_MAX], p[PATH_MAX], want[PATH_MAX + 32];
    void           *h;
    int             rc;

    if (lib_path("libm.so.6", libm, sizeof(libm)) != 0) {
        ok(0, "libm.so.6 found");
        return;
    }
    snprintf(p, sizeof(p), "%s/libsp_m3.so", tmpdir);
    h = copy_file(libm, p) == 0 ? dlopen(p, RTLD_NOW | RTLD_LOCAL) : NULL;
    ok(h != NULL, "dlopen copy 3");
    if (h == NULL) {
        return;
    }
    a = (uint64_t) (uintptr_t) dlsym(h, "cbrt");
    ok(phdr_query("libsp_m3.so", &q) == 0, "copy 3 in dl_iterate_phdr");
    ok(unlink(p) == 0, "copy 3 deleted");

    symbolize_into(a, &r);
    is_str(r.object, p, "deleted: object without \" (deleted)\"");
    if (map_files_open(a)) {
        ok(r.has_function && strstr(r.display, "cbrt"),
           "deleted, map_files open: named (%s)", r.display);
        is_int(r.file_offset, a - q.bias, "deleted, map_files open: "
               "file_offset");
    } else {
        ok(!r.has_function, "deleted, map_files closed: no name (%s)",
           r.display);
        skip("map_files closed");
    }

    rc = symbolize_unprivileged(a, &r);
    if (rc == 1) {
        skip("cannot become nobody");
        skip("cannot become nobody");
        skip("cannot become nobody");
        return;
    }
    if (rc != 0) {
        ok(0, "unprivileged child ran");
        return;
    }
    snprintf(want, sizeof(want), "libsp_m3.so+0x%" PRIx64, r.file_offset);
    ok(!r.has_function, "deleted, unprivileged: no function");
    is_str(r.display, want, "deleted, unprivileged: display");
    is_str(r.object, p, "deleted, unprivileged: object");
}


/* A library linked at a non-zero base (p_vaddr != p_offset), loaded
 * elsewhere: both terms of the bias. Needs a compiler at run time. */
static void
test_based_library(void)
{
    static const char  src[] =
        "int sp_based_func(int x) {\n"
        "    int i, s = 0;\n"
        "    for (i = 0; i < x; i++) s += i * x ^ (s >> 3);\n"
        "    return s;\n"
        "}\n";
    phdr_query_t  q;
    sp_symbolizer_t  *s;
    sp_symbol_t   sym;
    uint64_t      a;
    char          c[PATH_MAX], so[PATH_MAX], cmd[3 * PATH_MAX];
    void         *h, *block;

    snprintf(c, sizeof(c), "%s/based.c", tmpdir);
    snprintf(so, sizeof(so), "%s/libsp_based.so", tmpdir);
    snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -O1 -o '%s' '%s' "
             "-Wl,-Ttext-segment=0x20000000 >/dev/null 2>&1", so, c);
    if (write_file(c, src, sizeof(src) - 1) != 0 || system(cmd) != 0) {
        skip("no compiler to build a based library");
        return;
    }

    /* Keep the preferred address busy so the loader must relocate. */
    block = mmap((void *) 0x20000000, 1 << 20, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

    s = sp_symbolizer_new(NULL);
    h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    ok(h != NULL, "dlopen based library");
    if (h == NULL) {
        sp_symbolizer_free(s);
        return;
    }
    a = (uint64_t) (uintptr_t) dlsym(h, "sp_based_func");
    phdr_query("libsp_based.so", &q);
    printf("# based library: bias 0x%" PRIx64 ", text vaddr 0x%" PRIx64
           "\n", q.bias, q.text_lo);
    ok(q.text_lo >= 0x20000000, "the library's text vaddr is high");

    sp_symbolize(s, a + 4, &sym);
    is_str(sym.function, "sp_based_func", "based library: function");
    is_int(sym.function_start, a, "based library: function_start");
    is_int(sym.file_offset, a + 4 - q.bias, "based library: file_offset");

    sp_symbolizer_free(s);
    if (block != MAP_FAILED) {
        munmap(block, 1 << 20);
    }
}


static void
test_garbage(const char *libc)
{
    unsigned char  *tru, *buf;
    Elf64_Ehdr      eh;
    Elf64_Shdr      sh;
    uint64_t        seed;
    size_t          n, nsyms, i, j, k, dynsym;
    char            p[PATH_MAX];
    int             rc, bad;

    snprintf(p, sizeof(p), "%s/garbage", tmpdir);

    is_int(sp_symbols_test_load(exe, &nsyms), 0, "load test binary");
    ok(nsyms > 20, "test binary: %zu function symbols (.symtab)", nsyms);
    is_int(sp_symbols_test_load(libc, &nsyms), 0, "load libc");
    ok(nsyms > 1000, "libc: %zu function symbols (.dynsym)", nsyms);

    is_int(sp_symbols_test_load("/nonexistent/x", &nsyms), -1, "missing");
    is_int(sp_symbols_test_load("/", &nsyms), -1, "directory");
    write_file(p, "", 0);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "empty file");

    buf = malloc(65536);
    seed = 0x1234567;
    for (i = 0; i < 65536; i++) {
        buf[i] = (unsigned char) prng(&seed);
    }
    buf[0] = 0;
    write_file(p, buf, 65536);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "random bytes");
    free(buf);

    tru = read_file("/bin/true", &n);
    if (tru == NULL || n < 4096) {
        skip("no /bin/true");
        free(tru);
        return;
    }
    is_int(sp_symbols_test_load("/bin/true", &nsyms), 0, "/bin/true");
    printf("# /bin/true: %zu function symbols\n", nsyms);

    write_file(p, tru, 100);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "/bin/true, 100 bytes");
    write_file(p, tru, 4096);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "/bin/true, 4096 bytes");

    buf = malloc(n);
    memcpy(&eh, tru, sizeof(eh));

    memcpy(buf, tru, n);
    ((Elf64_Ehdr *) buf)->e_shoff = 0xffffffffffff0000ULL;
    ((Elf64_Ehdr *) buf)->e_shnum = 0xffff;
    write_file(p, buf, n);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "absurd e_shoff, e_shnum");

    memcpy(buf, tru, n);
    ((Elf64_Ehdr *) buf)->e_shnum = 0xffff;
    write_file(p, buf, n);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "absurd e_shnum");

    memcpy(buf, tru, n);
    ((Elf64_Ehdr *) buf)->e_phoff = n - 8;
    write_file(p, buf, n);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "e_phoff at the end");

    memcpy(buf, tru, n);
    buf[EI_CLASS] = ELFCLASS32;
    write_file(p, buf, n);
    is_int(sp_symbols_test_load(p, &nsyms), -1, "ELFCLASS32");

    /* Broken .dynsym headers: the file loads, without names. */
    dynsym = 0;
    for (i = 0; i < eh.e_shnum; i++) {
        memcpy(&sh, tru + eh.e_shoff + i * sizeof(sh), sizeof(sh));
        if (sh.sh_type == SHT_DYNSYM) {
            dynsym = eh.e_shoff + i * sizeof(sh);
        }
    }
    if (dynsym == 0) {
        skip("/bin/true has no .dynsym");
    } else {
        static const char  *what[] = {
            "huge sh_size", "huge sh_offset", "sh_link out of range",
            "sh_link to itself", "sh_entsize 0"
        };

        for (k = 0; k < 5; k++) {
            memcpy(buf, tru, n);
            memcpy(&sh, buf + dynsym, sizeof(sh));
            switch (k) {
            case 0: sh.sh_size = 0xfffffffffff0ULL; break;
            case 1: sh.sh_offset = 0xffffffffffffff00ULL; break;
            case 2: sh.sh_link = 0xffff; break;
            case 3: sh.sh_link = (uint32_t) ((dynsym - eh.e_shoff)
                                             / sizeof(sh)); break;
            default: sh.sh_entsize = 0; break;
            }
            memcpy(buf + dynsym, &sh, sizeof(sh));
            write_file(p, buf, n);
            nsyms = 99;
            rc = sp_symbols_test_load(p, &nsyms);
            ok(rc == 0 && nsyms == 0, ".dynsym %s: loads, no symbols "
               "(rc %d, %zu)", what[k], rc, nsyms);
        }
    }

    /* Random corruption, half of it aimed at the headers and tables. */
    bad = 0;
    seed = 0xdeadbeef;
    for (i = 0; i < 400; i++) {
        memcpy(buf, tru, n);
        for (j = 0; j < 1 + prng(&seed) % 32; j++) {
            if (prng(&seed) & 1) {
                k = eh.e_shoff + prng(&seed) % (n - eh.e_shoff);
            } else if (prng(&seed) & 1) {
                k = prng(&seed) % 2048;
            } else {
                k = prng(&seed) % n;
            }
            buf[k] = (unsigned char) prng(&seed);
        }
        k = (prng(&seed) % 4 == 0) ? prng(&seed) % n : n;
        write_file(p, buf, k);
        rc = sp_symbols_test_load(p, &nsyms);
        bad += rc != 0 && rc != -1;
    }
    ok(bad == 0, "400 corrupted copies of /bin/true: no crash, 0 or -1");

    free(buf);
    free(tru);
}


static void
cleanup(void)
{
    DIR            *d;
    struct dirent  *de;
    char            p[PATH_MAX];

    d = opendir(tmpdir);
    if (d == NULL) {
        return;
    }
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof(p), "%s/%s", tmpdir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
    rmdir(tmpdir);
}


int
main(void)
{
    sp_symbolizer_t  *s;
    sp_symbol_t       sym;
    ssize_t           n;
    const char       *slash;
    char              libc[PATH_MAX];
    uint64_t          i;

    setvbuf(stdout, NULL, _IONBF, 0);

    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || mkdtemp(tmpdir) == NULL) {
        printf("Bail out! no /proc/self/exe or temp dir\n");
        return 1;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    exe_base = slash ? slash + 1 : exe;
    nm_load();
    ok(nm_nsyms > 0, "nm lists %zu symbols of the test binary", nm_nsyms);

    for (i = 0; i < 3; i++) {
        sp_test_sink += burners[i](10);
    }

    s = sp_symbolizer_new(NULL);
    ok(s != NULL, "sp_symbolizer_new");

    test_own_functions(s);
    test_gaps(s);
    test_libc(s);
    test_vdso(s);
    test_unmapped(s);
    test_cache(s);

    sp_symbolize(s, (uint64_t) (uintptr_t) dlsym(dlopen("libc.so.6",
                 RTLD_NOW | RTLD_NOLOAD), "getpid"), &sym);
    snprintf(libc, sizeof(libc), "%s", sym.object ? sym.object : "");
    sp_symbolizer_free(s);

    test_dlopen();
    test_deleted();
    test_based_library();
    test_garbage(libc);

    cleanup();
    return done_testing();
}
