#define _GNU_SOURCE

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "common/profile/alloc_hooks.h"

#if defined(__x86_64__)
#define RELOC_JUMP_SLOT  R_X86_64_JUMP_SLOT
#define RELOC_GLOB_DAT   R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define RELOC_JUMP_SLOT  R_AARCH64_JUMP_SLOT
#define RELOC_GLOB_DAT   R_AARCH64_GLOB_DAT
#else
#error "spanprof's allocation hooks know x86_64 and aarch64 relocations only"
#endif

#define PATCHES_MAX   4096
#define GRACE_NS      5000000ull      /* after restoring, before looking */
#define STACK_SCAN    2048            /* bytes above a stopped thread's sp */
#define LIKELY(x)     __builtin_expect(!!(x), 1)
#define CALLER        ((uintptr_t) __builtin_return_address(0))

enum {
    F_MALLOC, F_CALLOC, F_REALLOC, F_FREE, F_POSIX_MEMALIGN, F_ALIGNED_ALLOC,
    F_MEMALIGN, F_VALLOC, F_PVALLOC, F_REALLOCARRAY, F_N
};

static const char *const  fn_names[F_N] = {
    "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "reallocarray"
};

/* The allocator's functions, as the process resolves them (libc's, or an
 * allocator the executable links or LD_PRELOADs). Set before any slot
 * points at a hook, never changed after. */
static struct {
    void  *(*malloc)(size_t);
    void  *(*calloc)(size_t, size_t);
    void  *(*realloc)(void *, size_t);
    void   (*free)(void *);
    int    (*posix_memalign)(void **, size_t, size_t);
    void  *(*aligned_alloc)(size_t, size_t);
    void  *(*memalign)(size_t, size_t);
    void  *(*valloc)(size_t);
    void  *(*pvalloc)(size_t);
    void  *(*reallocarray)(void *, size_t, size_t);
} real;

static void              *hook_addr[F_N];
static void              *real_addr[F_N];

typedef struct {
    void      **slot;
    void       *orig;
    uintptr_t   base;        /* the object's dlpi_addr */
    unsigned    fn;
    int         seen;        /* during a scan */
} patch_t;

static pthread_mutex_t     lock = PTHREAD_MUTEX_INITIALIZER;
static patch_t             patches[PATCHES_MAX];
static size_t              npatches;
static int                 data_refs;
static uintptr_t           own_base;
static unsigned long long  seen_adds = ~0ull, seen_subs = ~0ull;
static int                 atfork_done;
static int                 retry_deferred;   /* a scan left slots */
static _Atomic int         installed;
static _Atomic long        in_flight;
static _Atomic uint64_t    n_failures, n_deferred, n_scans, n_timeouts, n_busy;
static _Atomic int         pinned;

/* TLSDESC like thread_ctx.c (an initial-exec variable would make glibc
 * refuse to load the module once a few graceful restarts have used up the
 * static TLS surplus, which dlclose() does not give back). */
static __thread sp_alloc_thread_t  tls;

/* Every hook and slow path is in this section: uninstall looks for
 * threads stopped inside it, or with a return address into it near the
 * top of their stack. */
#define HOOK_TEXT  __attribute__((section("sp_alloc_hook_text")))
extern const char  __start_sp_alloc_hook_text[]
    __attribute__((visibility("hidden")));
extern const char  __stop_sp_alloc_hook_text[]
    __attribute__((visibility("hidden")));


/* ---- the hooks ------------------------------------------------------------ */

static inline void
enter(void)
{
    atomic_fetch_add(&in_flight, 1);
}

static inline void
leave(void)
{
    atomic_fetch_sub(&in_flight, 1);
}

static HOOK_TEXT __attribute__((noinline)) void *
malloc_slow(sp_alloc_thread_t *t, size_t n, uintptr_t caller)
{
    void  *p;

    enter();
    p = real.malloc(n);
    sp_alloc_sampler_take(t, p, n, caller);
    leave();
    return p;
}

static HOOK_TEXT void *
hook_malloc(size_t n)
{
    sp_alloc_thread_t  *t = &tls;

    if (LIKELY((t->left -= (int64_t) n) > 0)) {
        return real.malloc(n);
    }
    return malloc_slow(t, n, CALLER);
}

static HOOK_TEXT __attribute__((noinline)) void *
calloc_slow(sp_alloc_thread_t *t, size_t k, size_t n, uintptr_t caller)
{
    void  *p;

    enter();
    p = real.calloc(k, n);
    sp_alloc_sampler_take(t, p, k * n, caller);
    leave();
    return p;
}

static HOOK_TEXT void *
hook_calloc(size_t k, size_t n)
{
    sp_alloc_thread_t  *t = &tls;
    size_t              size;

    if (__builtin_mul_overflow(k, n, &size)) {
        return real.calloc(k, n);      /* fails */
    }
    if (LIKELY((t->left -= (int64_t) size) > 0)) {
        return real.calloc(k, n);
    }
    return calloc_slow(t, k, n, CALLER);
}

static HOOK_TEXT __attribute__((noinline)) void
free_slow(void *p)
{
    enter();
    /* Before the real free: after it the address may be handed out (and
     * sampled) again on another thread. */
    sp_alloc_sampler_forget(p);
    real.free(p);
    leave();
}

static HOOK_TEXT void
hook_free(void *p)
{
    if (LIKELY(!sp_alloc_table_maybe(&sp_alloc_live, (uintptr_t) p))) {
        real.free(p);
        return;
    }
    free_slow(p);
}

static HOOK_TEXT __attribute__((noinline)) void *
realloc_slow(sp_alloc_thread_t *t, void *p, size_t n, uintptr_t caller,
    int counted)
{
    void  *q;

    enter();
    if (p != NULL) {
        /* The old block goes (realloc may free it); a failed realloc
         * keeps it, untracked: rare, and only the in-use view loses it. */
        sp_alloc_sampler_forget(p);
    }
    q = real.realloc(p, n);
    if (counted || (t->left -= (int64_t) n) <= 0) {
        sp_alloc_sampler_take(t, n ? q : NULL, n, caller);
    }
    leave();
    return q;
}

static HOOK_TEXT void *
hook_realloc(void *p, size_t n)
{
    sp_alloc_thread_t  *t = &tls;

    if (p != NULL && sp_alloc_table_maybe(&sp_alloc_live, (uintptr_t) p)) {
        return realloc_slow(t, p, n, CALLER, 0);
    }
    if (LIKELY((t->left -= (int64_t) n) > 0)) {
        return real.realloc(p, n);
    }
    return realloc_slow(t, p, n, CALLER, 1);
}

static HOOK_TEXT void *
hook_reallocarray(void *p, size_t k, size_t n)
{
    size_t  size;

    if (__builtin_mul_overflow(k, n, &size)) {
        return real.reallocarray(p, k, n);      /* fails with ENOMEM */
    }
    /* Same as realloc, but through the real reallocarray. */
    {
        sp_alloc_thread_t  *t = &tls;
        uintptr_t           caller = CALLER;
        int                 tracked = p != NULL
                              && sp_alloc_table_maybe(&sp_alloc_live,
                                                      (uintptr_t) p);
        void               *q;

        if (!tracked && LIKELY((t->left -= (int64_t) size) > 0)) {
            return real.reallocarray(p, k, n);
        }
        enter();
        if (tracked) {
            sp_alloc_sampler_forget(p);
        }
        q = real.reallocarray(p, k, n);
        if (!tracked || (t->left -= (int64_t) size) <= 0) {
            sp_alloc_sampler_take(t, size ? q : NULL, size, caller);
        }
        leave();
        return q;
    }
}

static HOOK_TEXT __attribute__((noinline)) int
posix_memalign_slow(sp_alloc_thread_t *t, void **pp, size_t a, size_t n,
    uintptr_t caller)
{
    int  rc;

    enter();
    rc = real.posix_memalign(pp, a, n);
    sp_alloc_sampler_take(t, rc == 0 ? *pp : NULL, n, caller);
    leave();
    return rc;
}

static HOOK_TEXT int
hook_posix_memalign(void **pp, size_t a, size_t n)
{
    sp_alloc_thread_t  *t = &tls;

    if (LIKELY((t->left -= (int64_t) n) > 0)) {
        return real.posix_memalign(pp, a, n);
    }
    return posix_memalign_slow(t, pp, a, n, CALLER);
}

/* aligned_alloc, memalign: (alignment, size). */
#define ALIGNED_HOOK(name)                                                   \
static HOOK_TEXT __attribute__((noinline)) void *                            \
name##_slow(sp_alloc_thread_t *t, size_t a, size_t n, uintptr_t caller)      \
{                                                                            \
    void  *p;                                                                \
                                                                             \
    enter();                                                                 \
    p = real.name(a, n);                                                     \
    sp_alloc_sampler_take(t, p, n, caller);                                  \
    leave();                                                                 \
    return p;                                                                \
}                                                                            \
                                                                             \
static HOOK_TEXT void *                                                      \
hook_##name(size_t a, size_t n)                                              \
{                                                                            \
    sp_alloc_thread_t  *t = &tls;                                            \
                                                                             \
    if (LIKELY((t->left -= (int64_t) n) > 0)) {                              \
        return real.name(a, n);                                              \
    }                                                                        \
    return name##_slow(t, a, n, CALLER);                                     \
}

ALIGNED_HOOK(aligned_alloc)
ALIGNED_HOOK(memalign)

/* valloc, pvalloc: (size). */
#define PAGE_HOOK(name)                                                      \
static HOOK_TEXT __attribute__((noinline)) void *                            \
name##_slow(sp_alloc_thread_t *t, size_t n, uintptr_t caller)                \
{                                                                            \
    void  *p;                                                                \
                                                                             \
    enter();                                                                 \
    p = real.name(n);                                                        \
    sp_alloc_sampler_take(t, p, n, caller);                                  \
    leave();                                                                 \
    return p;                                                                \
}                                                                            \
                                                                             \
static HOOK_TEXT void *                                                      \
hook_##name(size_t n)                                                        \
{                                                                            \
    sp_alloc_thread_t  *t = &tls;                                            \
                                                                             \
    if (LIKELY((t->left -= (int64_t) n) > 0)) {                              \
        return real.name(n);                                                 \
    }                                                                        \
    return name##_slow(t, n, CALLER);                                        \
}

PAGE_HOOK(valloc)
PAGE_HOOK(pvalloc)


/* ---- finding and writing GOT slots ------------------------------------- */

static ElfW(Addr)
dyn_ptr(ElfW(Addr) base, ElfW(Addr) v)
{
    /* glibc relocates d_ptr entries of .dynamic in place; the vDSO's and
     * some others' are not. */
    return v < base ? v + base : v;
}

/* 1 if the page holding p is writable now, 0 if not, -1 unknown. */
static int
page_writable(const void *p)
{
    FILE       *f;
    char        line[512];
    uintptr_t   lo, hi, a = (uintptr_t) p;
    char        perms[5];
    int         w = -1;

    f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3
            && a >= lo && a < hi)
        {
            w = perms[1] == 'w';
            break;
        }
    }
    fclose(f);
    return w;
}

/* The mappings of the process, read once per scan or restore pass
 * (reading /proc/self/maps for every slot cost a server child ~100 maps
 * reads at its start and again at its exit: 0.1-0.3 s, which held up
 * prefork's graceful restart by its 1 s maintenance cycle). Taken from
 * inside dl_iterate_phdr, with the loader's list lock held, so no object
 * we visit is unloaded before the pass ends, and:
 *  - a page the snapshot shows read-only has finished loading (the loader
 *    applies RELRO last, and nothing makes it writable again);
 *  - a writable page outside its object's PT_GNU_RELRO range (a partial-
 *    RELRO .got.plt) is never made read-only by the loader.
 * Anything else (a RELRO page still writable: an object a concurrent
 * dlopen() is relocating; a mapping made since) is asked again in
 * /proc/self/maps at the moment of the write, as before. */
#define MAPS_MAX  4096

static struct {
    uintptr_t  lo, hi;
    int        w;
} maps[MAPS_MAX];
static size_t  maps_n;
static int     maps_taken;

static void
maps_snapshot(void)
{
    FILE       *f;
    char        line[512];
    uintptr_t   lo, hi;
    char        perms[5];

    maps_n = 0;
    maps_taken = 1;
    f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        return;
    }
    while (maps_n < MAPS_MAX && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3) {
            maps[maps_n].lo = lo;
            maps[maps_n].hi = hi;
            maps[maps_n].w = perms[1] == 'w';
            maps_n++;
        }
    }
    fclose(f);
}

/* The object's RELRO pages, as the loader protects them. */
typedef struct {
    uintptr_t  lo, hi;
} relro_t;

static void
relro_of(const struct dl_phdr_info *info, relro_t *r)
{
    uintptr_t  page = (uintptr_t) sysconf(_SC_PAGESIZE), a;
    int        i;

    r->lo = r->hi = 0;
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            a = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            r->lo = a & ~(page - 1);
            r->hi = (a + info->dlpi_phdr[i].p_memsz) & ~(page - 1);
        }
    }
}

/* 1 writable, 0 read-only, -1 unknown (ask /proc/self/maps now). */
static int
snapshot_writable(const void *p, const relro_t *r)
{
    uintptr_t  a = (uintptr_t) p;
    size_t     i;

    for (i = 0; i < maps_n; i++) {
        if (a >= maps[i].lo && a < maps[i].hi) {
            if (!maps[i].w) {
                return 0;
            }
            return a >= r->lo && a < r->hi ? -1 : 1;
        }
    }
    return -1;
}

static int
set_slot(void **slot, void *value, const relro_t *r)
{
    long       page = sysconf(_SC_PAGESIZE);
    void      *pg = (void *) ((uintptr_t) slot & ~(uintptr_t) (page - 1));
    int        w = snapshot_writable(slot, r);

    if (w < 0) {
        w = page_writable(slot);
    }
    if (w < 0) {
        return -1;
    }
    if (!w && mprotect(pg, (size_t) page, PROT_READ | PROT_WRITE) != 0) {
        return -1;
    }
    __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
    if (!w) {
        /* RELRO pages are read-only, nothing else. */
        (void) mprotect(pg, (size_t) page, PROT_READ);
    }
    return 0;
}

static int
skip_object(const struct dl_phdr_info *info)
{
    static const char *const  skip[] = {
        "/libc.so", "/ld-linux", "/ld64.so", "linux-vdso", "linux-gate",
        "/libasan.so", "/libtsan.so", "/liblsan.so", "/libhwasan.so",
        "/libubsan.so", "/libjemalloc.so", "/libtcmalloc", "/libmimalloc.so"
    };
    const char  *name = info->dlpi_name != NULL ? info->dlpi_name : "";
    size_t       i;

    if (info->dlpi_addr == own_base) {
        return 1;
    }
    for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
        if (strstr(name, skip[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

static patch_t *
find_patch(void **slot)
{
    size_t  i;

    for (i = 0; i < npatches; i++) {
        if (patches[i].slot == slot) {
            return &patches[i];
        }
    }
    return NULL;
}

typedef struct {
    int   newly;
} scan_t;

static void
patch_relocs(const struct dl_phdr_info *info, const ElfW(Rela) *rela,
    size_t size, const ElfW(Sym) *symtab, const char *strtab, scan_t *sc)
{
    size_t        i;
    unsigned      fn;
    void        **slot, *cur;
    patch_t      *p;
    const char   *name;
    uintptr_t     base = info->dlpi_addr, span = 0;
    int           ph;
    relro_t       relro;

    relro_of(info, &relro);

    for (ph = 0; ph < info->dlpi_phnum; ph++) {
        if (info->dlpi_phdr[ph].p_type == PT_LOAD
            && info->dlpi_phdr[ph].p_vaddr + info->dlpi_phdr[ph].p_memsz > span)
        {
            span = info->dlpi_phdr[ph].p_vaddr + info->dlpi_phdr[ph].p_memsz;
        }
    }

    for (i = 0; i < size / sizeof(ElfW(Rela)); i++) {
        unsigned long  type = ELF64_R_TYPE(rela[i].r_info);
        unsigned long  sym = ELF64_R_SYM(rela[i].r_info);

        if (sym == 0 || (type != RELOC_JUMP_SLOT
                         && (type != RELOC_GLOB_DAT || !data_refs)))
        {
            continue;
        }
        name = strtab + symtab[sym].st_name;
        for (fn = 0; fn < F_N; fn++) {
            if (real_addr[fn] != NULL && strcmp(name, fn_names[fn]) == 0) {
                break;
            }
        }
        if (fn == F_N) {
            continue;
        }
        slot = (void **) (base + rela[i].r_offset);
        cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
        p = find_patch(slot);
        if (cur == hook_addr[fn]) {
            if (p != NULL) {
                p->seen = 1;
            }
            continue;
        }
        if (base != 0 && (uintptr_t) cur < span) {
            /* Not relocated yet (a link-time offset, or 0): the loader is
             * still at it. */
            atomic_fetch_add(&n_deferred, 1);
            retry_deferred = 1;
            continue;
        }
        if (p == NULL) {
            if (npatches == PATCHES_MAX) {
                atomic_fetch_add(&n_failures, 1);
                continue;
            }
            p = &patches[npatches++];
        }
        /* A record for this slot that does not hold our hook is stale (an
         * object unloaded and another loaded at its address): replaced. */
        p->slot = slot;
        p->orig = cur;
        p->base = base;
        p->fn = fn;
        p->seen = 1;
        if (set_slot(slot, hook_addr[fn], &relro) != 0) {
            atomic_fetch_add(&n_failures, 1);
            npatches--;
            if (p != &patches[npatches]) {
                *p = patches[npatches];
            }
            continue;
        }
        sc->newly++;
    }
}

typedef struct {
    const ElfW(Sym)   *symtab;
    const char        *strtab;
    const ElfW(Rela)  *jmprel, *rela;
    size_t             jmprelsz, relasz;
} dyn_info_t;

static int
read_dynamic(const struct dl_phdr_info *info, dyn_info_t *d)
{
    const ElfW(Dyn)  *dyn = NULL;
    ElfW(Addr)        base = info->dlpi_addr;
    int               i;

    memset(d, 0, sizeof(*d));
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *) (base + info->dlpi_phdr[i].p_vaddr);
        }
    }
    if (dyn == NULL) {
        return -1;
    }
    for ( ; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            d->symtab = (const ElfW(Sym) *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            d->strtab = (const char *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_JMPREL:
            d->jmprel = (const ElfW(Rela) *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            d->jmprelsz = dyn->d_un.d_val;
            break;
        case DT_PLTREL:
            if (dyn->d_un.d_val != DT_RELA) {
                return -1;        /* REL: not on x86_64 / aarch64 */
            }
            break;
        case DT_RELA:
            d->rela = (const ElfW(Rela) *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_RELASZ:
            d->relasz = dyn->d_un.d_val;
            break;
        }
    }
    return d->symtab != NULL && d->strtab != NULL ? 0 : -1;
}

static int
scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    scan_t      *sc = data;
    dyn_info_t   d;

    if (size >= offsetof(struct dl_phdr_info, dlpi_subs)
                + sizeof(info->dlpi_subs))
    {
        seen_adds = info->dlpi_adds;
        seen_subs = info->dlpi_subs;
    }
    if (!maps_taken) {
        maps_snapshot();
    }
    if (skip_object(info) || read_dynamic(info, &d) != 0) {
        return 0;
    }
    if (d.jmprel != NULL) {
        patch_relocs(info, d.jmprel, d.jmprelsz, d.symtab, d.strtab, sc);
    }
    if (d.rela != NULL && data_refs) {
        patch_relocs(info, d.rela, d.relasz, d.symtab, d.strtab, sc);
    }
    return 0;
}

/* Under lock: patches what is not patched yet, forgets the records of
 * objects that are gone. */
static int
scan_locked(void)
{
    scan_t  sc = { 0 };
    size_t  i, j;

    for (i = 0; i < npatches; i++) {
        patches[i].seen = 0;
    }
    retry_deferred = 0;
    maps_taken = 0;
    dl_iterate_phdr(scan_cb, &sc);
    maps_n = 0;
    for (i = 0, j = 0; i < npatches; i++) {
        if (patches[i].seen) {
            patches[j++] = patches[i];
        }
    }
    npatches = j;
    atomic_fetch_add(&n_scans, 1);
    return sc.newly;
}

static int
counts_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long long  *v = data;

    v[0] = info->dlpi_adds;
    v[1] = info->dlpi_subs;
    return 1;
}

static int
restore_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    size_t     i;
    patch_t   *p;
    void      *cur;
    relro_t    relro;

    /* The loader holds its lock while we are here: this object is mapped
     * and stays so until we return. */
    if (!maps_taken) {
        maps_snapshot();
    }
    relro_of(info, &relro);
    for (i = 0; i < npatches; i++) {
        p = &patches[i];
        if (p->base != info->dlpi_addr || p->seen) {
            continue;
        }
        p->seen = 1;
        cur = __atomic_load_n(p->slot, __ATOMIC_RELAXED);
        if (cur == hook_addr[p->fn] && set_slot(p->slot, p->orig, &relro) != 0) {
            atomic_fetch_add(&n_failures, 1);
        }
    }
    return 0;
}


/* ---- fork ----------------------------------------------------------------- */

static void
atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

static void
atfork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

static void
atfork_child(void)
{
    /* The threads that were in a slow path do not exist here. */
    atomic_store(&in_flight, 0);
    pthread_mutex_init(&lock, NULL);
    sp_alloc_sampler_atfork_child();
}


/* ---- the API ---------------------------------------------------------- */

static int
resolve_reals(char *err, size_t errlen)
{
    Dl_info   dli;
    unsigned  fn;

    hook_addr[F_MALLOC] = (void *) hook_malloc;
    hook_addr[F_CALLOC] = (void *) hook_calloc;
    hook_addr[F_REALLOC] = (void *) hook_realloc;
    hook_addr[F_FREE] = (void *) hook_free;
    hook_addr[F_POSIX_MEMALIGN] = (void *) hook_posix_memalign;
    hook_addr[F_ALIGNED_ALLOC] = (void *) hook_aligned_alloc;
    hook_addr[F_MEMALIGN] = (void *) hook_memalign;
    hook_addr[F_VALLOC] = (void *) hook_valloc;
    hook_addr[F_PVALLOC] = (void *) hook_pvalloc;
    hook_addr[F_REALLOCARRAY] = (void *) hook_reallocarray;

    if (dladdr((void *) hook_malloc, &dli) == 0) {
        snprintf(err, errlen, "dladdr() does not know our own object");
        return -1;
    }
    /* dli_fbase is the mapping's start; dlpi_addr the load bias. They are
     * equal for shared objects (first segment at vaddr 0). */
    own_base = (uintptr_t) dli.dli_fbase;

    for (fn = 0; fn < F_N; fn++) {
        real_addr[fn] = dlsym(RTLD_DEFAULT, fn_names[fn]);
    }
    if (real_addr[F_MALLOC] == NULL || real_addr[F_FREE] == NULL
        || real_addr[F_CALLOC] == NULL || real_addr[F_REALLOC] == NULL)
    {
        snprintf(err, errlen, "the allocator's malloc/free not found");
        return -1;
    }
    memcpy(&real.malloc, &real_addr[F_MALLOC], sizeof(void *));
    memcpy(&real.calloc, &real_addr[F_CALLOC], sizeof(void *));
    memcpy(&real.realloc, &real_addr[F_REALLOC], sizeof(void *));
    memcpy(&real.free, &real_addr[F_FREE], sizeof(void *));
    memcpy(&real.posix_memalign, &real_addr[F_POSIX_MEMALIGN],
           sizeof(void *));
    memcpy(&real.aligned_alloc, &real_addr[F_ALIGNED_ALLOC], sizeof(void *));
    memcpy(&real.memalign, &real_addr[F_MEMALIGN], sizeof(void *));
    memcpy(&real.valloc, &real_addr[F_VALLOC], sizeof(void *));
    memcpy(&real.pvalloc, &real_addr[F_PVALLOC], sizeof(void *));
    memcpy(&real.reallocarray, &real_addr[F_REALLOCARRAY], sizeof(void *));
    return 0;
}

int
sp_alloc_hooks_install(const sp_alloc_hooks_conf_t *conf, char *err,
    size_t errlen)
{
    if (sp_alloc_sampler_init(&conf->sampler, err, errlen) != 0) {
        return -1;
    }
    pthread_mutex_lock(&lock);
    if (real.malloc == NULL && resolve_reals(err, errlen) != 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    if (!atfork_done) {
        if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child)
            != 0)
        {
            pthread_mutex_unlock(&lock);
            snprintf(err, errlen, "pthread_atfork failed");
            return -1;
        }
        atfork_done = 1;
    }
    if (!atomic_load(&installed)) {
        /* Blocks freed while we were not hooked are still in the table,
         * and their addresses may be handed out and sampled again. No
         * hook runs now (uninstall made sure), so it can be emptied. */
        sp_alloc_sampler_clear_live();
    }
    data_refs = conf->hook_data_refs;
    /* Touch our TLS before any hook does (it may allocate a dynamic TLS
     * block: better here than inside malloc). */
    tls.busy = tls.busy;
    atomic_store(&installed, 1);
    scan_locked();
    pthread_mutex_unlock(&lock);
    return 0;
}

int
sp_alloc_hooks_rescan(void)
{
    unsigned long long  v[2] = { 0, 0 };
    int                 n = 0;

    if (!atomic_load(&installed)) {
        return 0;
    }
    dl_iterate_phdr(counts_cb, v);
    pthread_mutex_lock(&lock);
    if (atomic_load(&installed)
        && (v[0] != seen_adds || v[1] != seen_subs || retry_deferred))
    {
        n = scan_locked();
    }
    pthread_mutex_unlock(&lock);
    return n;
}

static void
pin_self(void)
{
    Dl_info  dli;
    void    *h;

    if (dladdr((void *) hook_malloc, &dli) == 0 || dli.dli_fname == NULL) {
        return;
    }
    h = dlopen(dli.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (h != NULL) {
        atomic_store(&pinned, 1);
        /* RTLD_NODELETE stays with the object; this reference goes. */
        dlclose(h);
    }
}

/* Is a stopped thread in a hook? Its pc in the hook section, or a return
 * address into it near the top of its stack (a hook waiting in the loader's
 * TLSDESC resolver, or in the allocator under a slow path). A stale word
 * that happens to look like one only makes us wait longer. */
static int
stack_points_into_hooks(pid_t pid, uintptr_t sp, uintptr_t lo, uintptr_t hi)
{
    uintptr_t     words[STACK_SCAN / sizeof(uintptr_t)];
    struct iovec  local = { words, sizeof(words) }, remote;
    ssize_t       n;
    size_t        i;

    /* process_vm_readv: a short read at the end of a stack mapping instead
     * of a fault. */
    remote.iov_base = (void *) sp;
    remote.iov_len = sizeof(words);
    n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    for (i = 0; n > 0 && i < (size_t) n / sizeof(uintptr_t); i++) {
        if (words[i] >= lo && words[i] < hi) {
            return 1;
        }
    }
    return 0;
}

/* A runnable thread (Linux shows "running" for one on a CPU and for one
 * preempted, without its registers) is asked with a signal: the handler
 * looks at the interrupted pc and stack. Each look has its number in the
 * signal's value, so that a late answer does not count for a later look. */
static int               q_sig;
static _Atomic int       q_look, q_answers, q_inside;
static uintptr_t         q_lo, q_hi;

static void
quiesce_handler(int sig, siginfo_t *si, void *ucv)
{
    int          saved_errno = errno;
    ucontext_t  *uc = ucv;
    uintptr_t    pc, sp;

    if (si->si_code != SI_QUEUE
        || si->si_value.sival_int != atomic_load(&q_look))
    {
        errno = saved_errno;
        return;
    }
#if defined(__x86_64__)
    pc = (uintptr_t) uc->uc_mcontext.gregs[REG_RIP];
    sp = (uintptr_t) uc->uc_mcontext.gregs[REG_RSP];
#else
    pc = (uintptr_t) uc->uc_mcontext.pc;
    sp = (uintptr_t) uc->uc_mcontext.sp;
#endif
    if ((pc >= q_lo && pc < q_hi)
        || stack_points_into_hooks(getpid(), sp, q_lo, q_hi))
    {
        atomic_fetch_add(&q_inside, 1);
    }
    atomic_fetch_add(&q_answers, 1);
    errno = saved_errno;
}

/* A real-time signal nobody handles, with our handler; 0 if none. */
static int
quiesce_signal_install(struct sigaction *old)
{
    struct sigaction  sa;
    int               sig;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = quiesce_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (sig = SIGRTMIN + 6; sig <= SIGRTMAX - 2; sig++) {
        if (sigaction(sig, NULL, old) == 0 && old->sa_handler == SIG_DFL
            && !(old->sa_flags & SA_SIGINFO)
            && sigaction(sig, &sa, NULL) == 0)
        {
            return sig;
        }
    }
    return 0;
}

static void
quiesce_signal_remove(int sig, const struct sigaction *old)
{
    struct sigaction  ign;

    /* Setting SIG_IGN discards what is still pending (threads that block
     * the signal): none of it may reach the default action later. */
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(sig, &ign, NULL);
    sigaction(sig, old, NULL);
}

/* 1 when, right now, no other thread is inside a hook: a blocked thread
 * by its registers in /proc, a runnable one by asking it. */
static int
threads_clear(uintptr_t lo, uintptr_t hi)
{
    DIR            *d;
    struct dirent  *e;
    char            path[64], buf[256], *tok, *last[2], *save = NULL;
    pid_t           pid = getpid(), self = (pid_t) syscall(SYS_gettid), tid;
    uintptr_t       sp, pc;
    int             fd, clear = 1, asked = 0, look, i;
    ssize_t         n;
    siginfo_t       si;
    struct timespec ts = { 0, 100000 };

    d = opendir("/proc/self/task");
    if (d == NULL) {
        return 0;
    }
    q_lo = lo;
    q_hi = hi;
    look = atomic_fetch_add(&q_look, 1) + 1;
    atomic_store(&q_answers, 0);
    atomic_store(&q_inside, 0);
    while (clear && (e = readdir(d)) != NULL) {
        tid = (pid_t) atoi(e->d_name);
        if (tid <= 0 || tid == self) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int) tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            continue;           /* exited */
        }
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0) {
            continue;
        }
        if (strncmp(buf, "running", 7) == 0) {
            memset(&si, 0, sizeof(si));
            si.si_signo = q_sig;
            si.si_code = SI_QUEUE;
            si.si_pid = pid;
            si.si_uid = getuid();
            si.si_value.sival_int = look;
            if (q_sig == 0
                || syscall(SYS_rt_tgsigqueueinfo, pid, tid, q_sig, &si) != 0)
            {
                clear = errno == ESRCH;    /* gone, or cannot ask */
                continue;
            }
            asked++;
            continue;
        }
        buf[n] = '\0';
        /* "nr args... sp pc" in a system call, "-1 sp pc" otherwise. */
        last[0] = last[1] = NULL;
        for (tok = strtok_r(buf, " \n", &save); tok != NULL;
             tok = strtok_r(NULL, " \n", &save))
        {
            last[0] = last[1];
            last[1] = tok;
        }
        if (last[0] == NULL) {
            clear = 0;
            break;
        }
        sp = (uintptr_t) strtoull(last[0], NULL, 16);
        pc = (uintptr_t) strtoull(last[1], NULL, 16);
        if ((pc >= lo && pc < hi) || stack_points_into_hooks(pid, sp, lo, hi)) {
            clear = 0;
        }
    }
    closedir(d);
    /* Runnable threads answer as soon as they run: up to 20 ms. One that
     * blocks the signal (nginx's thread pools block almost all) does not;
     * it is looked at again in /proc when it sleeps. */
    for (i = 0; clear && i < 200 && atomic_load(&q_answers) < asked; i++) {
        nanosleep(&ts, NULL);
    }
    return clear && atomic_load(&q_answers) >= asked
           && atomic_load(&q_inside) == 0;
}

int
sp_alloc_hooks_uninstall(unsigned wait_ms)
{
    struct timespec  ts = { 0, 1000000 };
    uint64_t         waited = 0, deadline;
    uintptr_t        lo = (uintptr_t) __start_sp_alloc_hook_text,
                     hi = (uintptr_t) __stop_sp_alloc_hook_text;
    size_t           i;
    int              clear_passes = 0;
    struct sigaction q_old;

    pthread_mutex_lock(&lock);
    if (!atomic_exchange(&installed, 0)) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    for (i = 0; i < npatches; i++) {
        patches[i].seen = 0;
    }
    maps_taken = 0;
    dl_iterate_phdr(restore_cb, NULL);
    maps_n = 0;
    npatches = 0;
    seen_adds = seen_subs = ~0ull;
    pthread_mutex_unlock(&lock);

    /* No new call reaches a hook now. A thread may still be between
     * reading an old slot and the tail call or the in-flight count (a few
     * instructions, but it may have been preempted there, or wait inside
     * the loader's TLS resolver), or in a slow path. Wait until none is
     * in flight and two looks 1 ms apart find no thread stopped inside a
     * hook. */
    ts.tv_nsec = (long) GRACE_NS;
    nanosleep(&ts, NULL);
    ts.tv_nsec = 1000000;
    deadline = (uint64_t) (wait_ms ? wait_ms : 2000);
    q_sig = quiesce_signal_install(&q_old);
    while (clear_passes < 2) {
        if (atomic_load(&in_flight) == 0 && threads_clear(lo, hi)) {
            clear_passes++;
        } else {
            clear_passes = 0;
            atomic_fetch_add(&n_busy, 1);
        }
        if (clear_passes < 2) {
            if (waited >= deadline) {
                atomic_fetch_add(&n_timeouts, 1);
                /* Our handler stays: a late signal must find it. */
                pin_self();
                return -1;
            }
            nanosleep(&ts, NULL);
            waited++;
        }
    }
    if (q_sig != 0) {
        quiesce_signal_remove(q_sig, &q_old);
    }
    return 0;
}

int
sp_alloc_hooks_installed(void)
{
    return atomic_load(&installed);
}

void
sp_alloc_hooks_get_stats(sp_alloc_hooks_stats_t *st)
{
    size_t  i, j;

    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&lock);
    st->slots = npatches;
    for (i = 0; i < npatches; i++) {
        for (j = 0; j < i && patches[j].base != patches[i].base; j++) {
            /* seen before? */
        }
        if (j == i) {
            st->objects++;
        }
    }
    pthread_mutex_unlock(&lock);
    st->failures = atomic_load(&n_failures);
    st->deferred = atomic_load(&n_deferred);
    st->scans = atomic_load(&n_scans);
    st->uninstall_timeouts = atomic_load(&n_timeouts);
    st->uninstall_waits = atomic_load(&n_busy);
    st->installed = atomic_load(&installed);
    st->pinned = atomic_load(&pinned);
}

/* Last resort when the glue did not uninstall: dlclose() runs this while
 * our object is still mapped. The tables are freed only when no thread can
 * be left in a hook. */
__attribute__((destructor)) static void
alloc_hooks_fini(void)
{
    if (atomic_load(&installed) && sp_alloc_hooks_uninstall(0) != 0) {
        return;
    }
    if (atomic_load(&n_timeouts) == 0) {
        sp_alloc_sampler_fini();
    }
}
