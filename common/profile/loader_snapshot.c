#define _GNU_SOURCE

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/profile/loader_snapshot.h"

#define RETIRED_MAX  8

#if defined(__x86_64__)
#define RELOC_JUMP_SLOT  R_X86_64_JUMP_SLOT
#define RELOC_GLOB_DAT   R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define RELOC_JUMP_SLOT  R_AARCH64_JUMP_SLOT
#define RELOC_GLOB_DAT   R_AARCH64_GLOB_DAT
#endif

typedef struct {
    size_t              n;
    unsigned long long  adds, subs;
    struct dl_phdr_info info[];     /* phdrs and names follow the array */
} snapshot_t;


static _Atomic(snapshot_t *)  current;
static snapshot_t            *retired[RETIRED_MAX];
static size_t                 nretired;

/* The loader's own struct r_debug, found through the executable's DT_DEBUG
 * entry: a reference to the _r_debug symbol from an executable would get a
 * copy-relocated duplicate that the loader never updates. */
static volatile struct r_debug  *loader_debug;

/* libunwind's slot and what it held, put back when we are unloaded:
 * libunwind may outlive us (the allocation profiler keeps it loaded), and
 * its next unwind must not call into our unmapped snapshot_iterate. */
static void  **unwind_slot;
static void   *unwind_slot_orig;


/* ---- the snapshot -------------------------------------------------------- */

typedef struct {
    size_t               n, phdrs, names;
    unsigned long long   adds, subs;
    snapshot_t          *s;
    char                *cursor;
} build_t;

static int
count_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    build_t  *b = data;

    b->n++;
    b->phdrs += info->dlpi_phnum;
    b->names += strlen(info->dlpi_name != NULL ? info->dlpi_name : "") + 1;
    b->adds = info->dlpi_adds;
    b->subs = info->dlpi_subs;
    return 0;
}

static int
copy_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    build_t              *b = data;
    struct dl_phdr_info  *d;
    const char           *name = info->dlpi_name != NULL ? info->dlpi_name
                                                         : "";
    size_t                len;

    /* The set may have grown between the two walks: keep what fits. */
    if (b->s->n == b->n
        || b->cursor + info->dlpi_phnum * sizeof(ElfW(Phdr)) + strlen(name) + 1
           > (char *) b->s + sizeof(snapshot_t)
             + b->n * sizeof(struct dl_phdr_info)
             + b->phdrs * sizeof(ElfW(Phdr)) + b->names)
    {
        return 1;
    }
    d = &b->s->info[b->s->n++];
    *d = *info;
    if (size < sizeof(struct dl_phdr_info)) {
        memset((char *) d + size, 0, sizeof(*d) - size);
    }
    memcpy(b->cursor, info->dlpi_phdr, info->dlpi_phnum * sizeof(ElfW(Phdr)));
    d->dlpi_phdr = (const ElfW(Phdr) *) b->cursor;
    b->cursor += info->dlpi_phnum * sizeof(ElfW(Phdr));
    len = strlen(name) + 1;
    memcpy(b->cursor, name, len);
    d->dlpi_name = b->cursor;
    b->cursor += len;
    return 0;
}

static snapshot_t *
snapshot_build(void)
{
    build_t  b;
    size_t   size;

    memset(&b, 0, sizeof(b));
    dl_iterate_phdr(count_cb, &b);
    /* Slack for objects loaded between the two walks. */
    b.n += 4;
    b.phdrs += 64;
    b.names += 1024;
    size = sizeof(snapshot_t) + b.n * sizeof(struct dl_phdr_info)
           + b.phdrs * sizeof(ElfW(Phdr)) + b.names;
    /* Phdrs need 8-byte alignment after the info array: it has it. */
    b.s = calloc(1, size);
    if (b.s == NULL) {
        return NULL;
    }
    b.cursor = (char *) &b.s->info[b.n];
    dl_iterate_phdr(copy_cb, &b);
    b.s->adds = b.adds;
    b.s->subs = b.subs;
    return b.s;
}

static void
snapshot_publish(snapshot_t *s)
{
    snapshot_t  *old = atomic_exchange(&current, s);

    if (old == NULL) {
        return;
    }
    /* A handler may still walk the old snapshot for some microseconds:
     * free it only after several more refreshes. */
    if (nretired == RETIRED_MAX) {
        free(retired[0]);
        memmove(retired, retired + 1, (RETIRED_MAX - 1) * sizeof(*retired));
        nretired--;
    }
    retired[nretired++] = old;
}

static int
latest_counts(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long long  *v = data;

    v[0] = info->dlpi_adds;
    v[1] = info->dlpi_subs;
    return 1;   /* the counters are the same in every entry */
}

void
sp_loader_snapshot_refresh(void)
{
    static pthread_mutex_t   lock = PTHREAD_MUTEX_INITIALIZER;
    unsigned long long       v[2] = { 0, 0 };
    snapshot_t              *s;

    /* Threads registering and the exporter thread may refresh at once. */
    pthread_mutex_lock(&lock);
    s = atomic_load(&current);
    dl_iterate_phdr(latest_counts, v);
    if (s == NULL || s->adds != v[0] || s->subs != v[1]) {
        s = snapshot_build();
        if (s != NULL) {
            snapshot_publish(s);
        }
    }
    pthread_mutex_unlock(&lock);
}


/* ---- the redirected dl_iterate_phdr ---------------------------------------- */


/* libunwind's dl_iterate_phdr, on every thread and in every context: if a
 * thread outside the handler reached the real one while holding one of
 * libunwind's locks, a handler waiting for that lock on a thread that was
 * interrupted inside the loader would deadlock both. */
static int
snapshot_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
    snapshot_t  *s;
    size_t       i;
    int          rc;

    s = atomic_load_explicit(&current, memory_order_acquire);
    if (s == NULL) {
        return 0;
    }
    for (i = 0; i < s->n; i++) {
        rc = cb(&s->info[i], sizeof(struct dl_phdr_info), data);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}


/* Finds libunwind's relocations for dl_iterate_phdr and points them at
 * snapshot_iterate. */

typedef struct {
    int    found;
    int    patched;
    char   why[128];
} patch_t;

static ElfW(Addr)
dyn_ptr(ElfW(Addr) base, ElfW(Addr) v)
{
    /* glibc relocates some d_ptr entries in place, others not. */
    return v < base ? v + base : v;
}

static int
make_writable_and_set(void **slot, void *value)
{
    long       page = sysconf(_SC_PAGESIZE);
    uintptr_t  p = (uintptr_t) slot & ~(uintptr_t) (page - 1);
    FILE      *f;
    char       line[512];
    uintptr_t  lo, hi;
    char       perms[5];
    int        writable = 0;

    f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3
            && (uintptr_t) slot >= lo && (uintptr_t) slot < hi)
        {
            writable = perms[1] == 'w';
            break;
        }
    }
    fclose(f);

    if (!writable && mprotect((void *) p, page, PROT_READ | PROT_WRITE) != 0) {
        return -1;
    }
    __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
    if (!writable) {
        mprotect((void *) p, page, PROT_READ);
    }
    return 0;
}

static void
patch_relocs(ElfW(Addr) base, const ElfW(Rela) *rela, size_t size,
    const ElfW(Sym) *symtab, const char *strtab, patch_t *pt)
{
    size_t   i;
    void   **slot;

    for (i = 0; i < size / sizeof(ElfW(Rela)); i++) {
        unsigned long  type = ELF64_R_TYPE(rela[i].r_info);
        unsigned long  sym = ELF64_R_SYM(rela[i].r_info);

        if ((type != RELOC_JUMP_SLOT && type != RELOC_GLOB_DAT)
            || sym == 0
            || strcmp(strtab + symtab[sym].st_name, "dl_iterate_phdr") != 0)
        {
            continue;
        }
        pt->found = 1;
        slot = (void **) (base + rela[i].r_offset);
        if (*slot != (void *) snapshot_iterate) {
            unwind_slot = slot;
            unwind_slot_orig = *slot;
        }
        if (make_writable_and_set(slot, (void *) snapshot_iterate) == 0) {
            pt->patched = 1;
        } else {
            snprintf(pt->why, sizeof(pt->why), "cannot write libunwind's GOT");
        }
    }
}

static int
patch_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    patch_t            *pt = data;
    const ElfW(Dyn)    *dyn = NULL;
    const ElfW(Sym)    *symtab = NULL;
    const char         *strtab = NULL;
    const ElfW(Rela)   *jmprel = NULL, *rela = NULL;
    size_t              jmprelsz = 0, relasz = 0;
    int                 i;
    ElfW(Addr)          base = info->dlpi_addr;

    if (info->dlpi_name == NULL
        || strstr(info->dlpi_name, "/libunwind.so") == NULL)
    {
        return 0;
    }
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *) (base + info->dlpi_phdr[i].p_vaddr);
        }
    }
    if (dyn == NULL) {
        return 0;
    }
    for ( ; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            symtab = (const ElfW(Sym) *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            strtab = (const char *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_JMPREL:
            jmprel = (const ElfW(Rela) *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            jmprelsz = dyn->d_un.d_val;
            break;
        case DT_RELA:
            rela = (const ElfW(Rela) *) dyn_ptr(base, dyn->d_un.d_ptr);
            break;
        case DT_RELASZ:
            relasz = dyn->d_un.d_val;
            break;
        }
    }
    if (symtab == NULL || strtab == NULL) {
        return 0;
    }
    if (jmprel != NULL) {
        patch_relocs(base, jmprel, jmprelsz, symtab, strtab, pt);
    }
    if (rela != NULL) {
        patch_relocs(base, rela, relasz, symtab, strtab, pt);
    }
    return 0;
}

static int
find_r_debug(struct dl_phdr_info *info, size_t size, void *data)
{
    const ElfW(Dyn)  *dyn = NULL;
    int               i;

    /* The first object is the executable. */
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *) (info->dlpi_addr
                                       + info->dlpi_phdr[i].p_vaddr);
        }
    }
    for ( ; dyn != NULL && dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_DEBUG && dyn->d_un.d_ptr != 0) {
            loader_debug = (struct r_debug *) dyn->d_un.d_ptr;
        }
    }
    return 1;
}

int
sp_loader_snapshot_init(char *err, size_t errlen)
{
    patch_t  pt;

    if (loader_debug == NULL) {
        dl_iterate_phdr(find_r_debug, NULL);
        if (loader_debug == NULL) {
            snprintf(err, errlen, "the executable has no DT_DEBUG entry");
            return -1;
        }
    }

    memset(&pt, 0, sizeof(pt));
    dl_iterate_phdr(patch_cb, &pt);
    if (!pt.patched) {
        snprintf(err, errlen, "%s", pt.found ? pt.why
                 : "libunwind's dl_iterate_phdr relocation not found");
        return -1;
    }
    sp_loader_snapshot_refresh();
    if (atomic_load(&current) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}


__attribute__((destructor)) static void
loader_snapshot_fini(void)
{
    Dl_info  dli;

    /* Only if libunwind is still mapped and still points at us. */
    if (unwind_slot != NULL
        && *unwind_slot == (void *) snapshot_iterate
        && dladdr(unwind_slot, &dli) != 0)
    {
        make_writable_and_set(unwind_slot, unwind_slot_orig);
    }
}


/* ---- the signal path ------------------------------------------------------ */

int
sp_loader_unwind_safe(void)
{
    /* Mid-dlopen/dlclose the link map and our snapshot may disagree. */
    return loader_debug->r_state == RT_CONSISTENT;
}
