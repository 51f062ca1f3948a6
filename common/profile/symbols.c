/* Program counters of this process to function names, for the exporter
 * thread (see symbols.h). Mappings come from /proc/self/maps, names from
 * each ELF file's own .symtab (or .dynsym), parsed by hand with bounds
 * checks against the file size: a truncated or hostile file yields no
 * names, never a crash.
 *
 * Not async-signal-safe and not thread-safe: a symbolizer belongs to one
 * thread (the exporter); other threads need their own. */

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/profile/proc_maps.h"
#include "common/profile/symbol_files.h"
#include "common/profile/symbols.h"

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SYM_ELFDATA        ELFDATA2LSB
#else
#define SYM_ELFDATA        ELFDATA2MSB
#endif

#define SYM_CACHE_MAX      65536        /* per-pc results, cleared when full */
#define SYM_CACHE_MIN      1024         /* initial slot count */
#define SYM_REFRESH_NS     100000000ULL /* automatic refresh at most 10/s */
#define SYM_BLOCK_SIZE     65536        /* string arena block */
#define SYM_MAX_BUILD_ID   64           /* bytes of a build id we keep */
#define SYM_MAX_READ       (256u << 20) /* read() fallback when mmap fails */
#define SYM_DEBUG_DIR      "/usr/lib/debug/.build-id/"


typedef struct {
    uint64_t     addr;          /* ELF virtual address */
    uint64_t     size;
    const char  *name;          /* in the object's copy of the strtab */
    int          rank;          /* lower is the preferred alias */
} sym_func_t;

typedef struct {
    uint64_t     offset;
    uint64_t     vaddr;
    uint64_t     filesz;
    int          exec;
} sym_load_t;

/* What one ELF file yields. */
typedef struct {
    sym_func_t  *funcs;
    size_t       nfuncs;
    char        *names;
    sym_load_t  *loads;
    size_t       nloads;
    int          from_symtab;   /* names from .symtab, not .dynsym */
    char         build_id[2 * SYM_MAX_BUILD_ID + 1];
} sym_elf_t;

typedef struct sym_obj_s  sym_obj_t;

/* A mapped file, parsed on first use and kept until the symbolizer is
 * freed (its strings are handed out), keyed by path, device and inode as
 * /proc/self/maps shows them, or by address for the vdso. */
struct sym_obj_s {
    sym_obj_t   *next;
    const char  *path;          /* interned; "[vdso]" for the vdso */
    const char  *base;          /* suffix of path */
    unsigned     dev_major;
    unsigned     dev_minor;
    uint64_t     inode;
    uint64_t     vdso_start;    /* nonzero for the vdso */
    int          state;         /* 0 not parsed, 1 parsed, -1 failed */
    sym_elf_t    elf;
    const char  *build_id;      /* interned, or NULL */
};

typedef struct {
    uint64_t     start;
    uint64_t     end;
    uint64_t     offset;
    uint64_t     file_low;      /* lowest start of any mapping of the file */
    uint64_t     bias;          /* runtime address minus ELF vaddr */
    int          bias_done;
    int          deleted;
    sym_obj_t   *obj;
} sym_map_t;

typedef struct {
    uint64_t     pc;
    sp_symbol_t  sym;
} sym_entry_t;

typedef struct sym_block_s  sym_block_t;

struct sym_block_s {
    sym_block_t  *next;
    size_t        used;
    size_t        size;
    char          data[];
};

struct sp_symbolizer {
    sym_map_t     *maps;        /* executable mappings, sorted by start */
    size_t         nmaps;
    sym_obj_t     *objs;

    sym_entry_t   *entries;     /* per-pc cache: entries + index slots */
    size_t         nentries;
    size_t         entries_cap;
    uint32_t      *slots;       /* entry index + 1, 0 when empty */
    size_t         nslots;

    const char   **strs;        /* interned strings, open addressing */
    size_t         nstrs;
    size_t         strs_cap;
    sym_block_t   *blocks;

    const sp_symbol_files_t *files;  /* opened before privileges went */
    uint64_t       last_auto_refresh;
    int            auto_refreshed;
    uint64_t       page_size;
};


/* Test-only: parses an ELF file as the symbolizer does, for the unit
 * tests' garbage files. Not in symbols.h on purpose. */
int sp_symbols_test_load(const char *path, size_t *nsyms);


/* ---- strings -------------------------------------------------------- */

static uint64_t
sym_hash_bytes(const char *p, size_t n)
{
    uint64_t  h;

    h = 0xcbf29ce484222325ULL;
    while (n--) {
        h ^= (unsigned char) *p++;
        h *= 0x100000001b3ULL;
    }
    return h;
}


static char *
sym_alloc(sp_symbolizer_t *s, size_t n)
{
    sym_block_t  *b;
    size_t        size;

    b = s->blocks;
    if (b == NULL || b->size - b->used < n) {
        size = n > SYM_BLOCK_SIZE ? n : SYM_BLOCK_SIZE;
        b = malloc(sizeof(sym_block_t) + size);
        if (b == NULL) {
            return NULL;
        }
        b->size = size;
        b->used = 0;
        /* A big string gets a block of its own behind the current one, so
         * the current block's free space is not wasted. */
        if (s->blocks != NULL && size > SYM_BLOCK_SIZE) {
            b->next = s->blocks->next;
            s->blocks->next = b;
        } else {
            b->next = s->blocks;
            s->blocks = b;
        }
    }
    b->used += n;
    return b->data + b->used - n;
}


static int
sym_strs_grow(sp_symbolizer_t *s)
{
    const char  **strs, *str;
    size_t        cap, i, j;

    cap = s->strs_cap ? s->strs_cap * 2 : 1024;
    strs = calloc(cap, sizeof(char *));
    if (strs == NULL) {
        return -1;
    }
    for (i = 0; i < s->strs_cap; i++) {
        str = s->strs[i];
        if (str == NULL) {
            continue;
        }
        j = sym_hash_bytes(str, strlen(str)) & (cap - 1);
        while (strs[j] != NULL) {
            j = (j + 1) & (cap - 1);
        }
        strs[j] = str;
    }
    free(s->strs);
    s->strs = strs;
    s->strs_cap = cap;
    return 0;
}


/* One stable copy per distinct string; NULL when out of memory. */
static const char *
sym_intern(sp_symbolizer_t *s, const char *str, size_t len)
{
    const char  *p;
    char        *copy;
    size_t       i;

    if ((s->nstrs + 1) * 2 > s->strs_cap && sym_strs_grow(s) != 0) {
        return NULL;
    }

    i = sym_hash_bytes(str, len) & (s->strs_cap - 1);
    while ((p = s->strs[i]) != NULL) {
        if (memcmp(p, str, len) == 0 && p[len] == '\0') {
            return p;
        }
        i = (i + 1) & (s->strs_cap - 1);
    }

    copy = sym_alloc(s, len + 1);
    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, str, len);
    copy[len] = '\0';
    s->strs[i] = copy;
    s->nstrs++;
    return copy;
}


/* "0x<v>", or "<base>+0x<v>". */
static const char *
sym_intern_hex(sp_symbolizer_t *s, const char *base, uint64_t v)
{
    char  buf[512];
    int   n;

    if (base != NULL) {
        n = snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, base, v);
    } else {
        n = snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    }
    if (n < 0) {
        return NULL;
    }
    /* An absurdly long name is cut, consistently. */
    if ((size_t) n >= sizeof(buf)) {
        n = sizeof(buf) - 1;
    }
    return sym_intern(s, buf, (size_t) n);
}


/* ---- ELF ------------------------------------------------------------ */

/* Whether count items of size bytes at off fit in n bytes, overflow-safe. */
static int
elf_fits(size_t n, uint64_t off, uint64_t count, uint64_t size)
{
    if (off > n) {
        return 0;
    }
    return size == 0 || count <= (n - off) / size;
}


static uint64_t
elf_align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}


/* Scans a note area for NT_GNU_BUILD_ID; hex into out when found. */
static void
elf_notes(const unsigned char *p, size_t n, uint64_t off, uint64_t size,
    uint64_t align, char *out)
{
    static const char  hex[] = "0123456789abcdef";
    Elf64_Nhdr         nh;
    uint64_t           pos, desc, next;
    uint32_t           i;

    if (!elf_fits(n, off, size, 1)) {
        return;
    }
    /* 8-aligned notes (.note.gnu.property) pad name and desc to 8. */
    align = align == 8 ? 8 : 4;
    pos = 0;

    while (size - pos >= sizeof(Elf64_Nhdr)) {
        memcpy(&nh, p + off + pos, sizeof(Elf64_Nhdr));
        desc = elf_align_up(pos + sizeof(Elf64_Nhdr) + nh.n_namesz, align);
        if (desc > size || nh.n_descsz > size - desc) {
            return;
        }

        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4
            && memcmp(p + off + pos + sizeof(Elf64_Nhdr), "GNU", 4) == 0)
        {
            if (nh.n_descsz == 0 || nh.n_descsz > SYM_MAX_BUILD_ID) {
                return;
            }
            for (i = 0; i < nh.n_descsz; i++) {
                out[2 * i] = hex[p[off + desc + i] >> 4];
                out[2 * i + 1] = hex[p[off + desc + i] & 0xf];
            }
            out[2 * i] = '\0';
            return;
        }

        next = elf_align_up(desc + nh.n_descsz, align);
        if (next <= pos) {
            return;
        }
        pos = next;
    }
}


static int
elf_func_cmp(const void *a, const void *b)
{
    const sym_func_t  *x = a, *y = b;
    size_t             lx, ly;

    if (x->addr != y->addr) {
        return x->addr < y->addr ? -1 : 1;
    }
    if (x->rank != y->rank) {
        return x->rank < y->rank ? -1 : 1;
    }
    lx = strlen(x->name);
    ly = strlen(y->name);
    if (lx != ly) {
        return lx < ly ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}


/* Among aliases at one address, the public spelling wins: fewer leading
 * underscores ("getpid" over "__getpid"), then GLOBAL, WEAK, LOCAL, then
 * the shorter name ("strtol" over "strtoimax"). */
static int
elf_func_rank(const char *name, unsigned bind)
{
    int  u;

    for (u = 0; name[u] == '_' && u < 7; u++) { /* void */ }

    return u * 4 + (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2);
}


/* Function symbols of the first section of the given type: -1 when it is
 * absent or malformed, else how many were kept. */
static int
elf_symbols(const unsigned char *p, size_t n, const Elf64_Shdr *sh,
    size_t shnum, uint32_t type, sym_elf_t *e)
{
    const Elf64_Shdr  *tab, *str;
    Elf64_Sym          sym;
    sym_func_t        *funcs;
    unsigned           st;
    size_t             i, j, count, nsym;
    char              *names;

    tab = NULL;
    for (i = 0; i < shnum; i++) {
        if (sh[i].sh_type == type) {
            tab = &sh[i];
            break;
        }
    }
    if (tab == NULL || tab->sh_entsize != sizeof(Elf64_Sym)
        || !elf_fits(n, tab->sh_offset, tab->sh_size, 1)
        || tab->sh_link == 0 || tab->sh_link >= shnum)
    {
        return -1;
    }
    str = &sh[tab->sh_link];
    if (str->sh_type != SHT_STRTAB || str->sh_size == 0
        || !elf_fits(n, str->sh_offset, str->sh_size, 1))
    {
        return -1;
    }

    /* A private copy of the string table, NUL-terminated even when the
     * file's is not, holds the names. */
    names = malloc(str->sh_size + 1);
    if (names == NULL) {
        return -1;
    }
    memcpy(names, p + str->sh_offset, str->sh_size);
    names[str->sh_size] = '\0';

    nsym = tab->sh_size / sizeof(Elf64_Sym);
    count = 0;
    for (i = 0; i < nsym; i++) {
        memcpy(&sym, p + tab->sh_offset + i * sizeof(Elf64_Sym),
               sizeof(Elf64_Sym));
        st = ELF64_ST_TYPE(sym.st_info);
        if ((st == STT_FUNC || st == STT_GNU_IFUNC) && sym.st_size > 0
            && sym.st_shndx != SHN_UNDEF && sym.st_name != 0
            && sym.st_name < str->sh_size && names[sym.st_name] != '\0'
            && sym.st_value + sym.st_size > sym.st_value)
        {
            count++;
        }
    }

    funcs = count ? malloc(count * sizeof(sym_func_t)) : NULL;
    if (count && funcs == NULL) {
        free(names);
        return -1;
    }

    j = 0;
    for (i = 0; i < nsym && j < count; i++) {
        memcpy(&sym, p + tab->sh_offset + i * sizeof(Elf64_Sym),
               sizeof(Elf64_Sym));
        st = ELF64_ST_TYPE(sym.st_info);
        if ((st == STT_FUNC || st == STT_GNU_IFUNC) && sym.st_size > 0
            && sym.st_shndx != SHN_UNDEF && sym.st_name != 0
            && sym.st_name < str->sh_size && names[sym.st_name] != '\0'
            && sym.st_value + sym.st_size > sym.st_value)
        {
            funcs[j].addr = sym.st_value;
            funcs[j].size = sym.st_size;
            funcs[j].name = names + sym.st_name;
            funcs[j].rank = elf_func_rank(funcs[j].name,
                                          ELF64_ST_BIND(sym.st_info));
            j++;
        }
    }
    count = j;

    /* Sorted by address, one symbol per address: the best-ranked alias. */
    if (count > 1) {
        qsort(funcs, count, sizeof(sym_func_t), elf_func_cmp);
        for (i = 1, j = 1; i < count; i++) {
            if (funcs[i].addr != funcs[j - 1].addr) {
                funcs[j++] = funcs[i];
            }
        }
        count = j;
    }

    free(e->funcs);
    free(e->names);
    e->funcs = funcs;
    e->nfuncs = count;
    e->names = names;
    e->from_symtab = type == SHT_SYMTAB;
    return (int) (count > INT32_MAX ? INT32_MAX : count);
}


static void
elf_free(sym_elf_t *e)
{
    free(e->funcs);
    free(e->names);
    free(e->loads);
    memset(e, 0, sizeof(sym_elf_t));
}


/* Parses an ELF64 image of n bytes at p (a mapped file, or the vdso in
 * memory). -1 when it is not a native ELF64 executable or shared object
 * or its header tables lie outside the image; a file without (valid)
 * symbols is fine, it just yields no names. */
static int
elf_parse(const unsigned char *p, size_t n, sym_elf_t *e)
{
    Elf64_Ehdr   eh;
    Elf64_Phdr   ph;
    Elf64_Shdr  *sh;
    size_t       i;

    memset(e, 0, sizeof(sym_elf_t));

    if (n < sizeof(Elf64_Ehdr)) {
        return -1;
    }
    memcpy(&eh, p, sizeof(Elf64_Ehdr));

    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0
        || eh.e_ident[EI_CLASS] != ELFCLASS64
        || eh.e_ident[EI_DATA] != SYM_ELFDATA
        || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
    {
        return -1;
    }

    if (eh.e_phnum > 0
        && (eh.e_phentsize != sizeof(Elf64_Phdr)
            || !elf_fits(n, eh.e_phoff, eh.e_phnum, sizeof(Elf64_Phdr))))
    {
        return -1;
    }
    if (eh.e_shnum > 0
        && (eh.e_shentsize != sizeof(Elf64_Shdr)
            || !elf_fits(n, eh.e_shoff, eh.e_shnum, sizeof(Elf64_Shdr))))
    {
        return -1;
    }

    if (eh.e_phnum > 0) {
        e->loads = malloc(eh.e_phnum * sizeof(sym_load_t));
        if (e->loads == NULL) {
            return -1;
        }
    }
    for (i = 0; i < eh.e_phnum; i++) {
        memcpy(&ph, p + eh.e_phoff + i * sizeof(Elf64_Phdr),
               sizeof(Elf64_Phdr));
        if (ph.p_type == PT_LOAD && ph.p_filesz > 0) {
            e->loads[e->nloads].offset = ph.p_offset;
            e->loads[e->nloads].vaddr = ph.p_vaddr;
            e->loads[e->nloads].filesz = ph.p_filesz;
            e->loads[e->nloads].exec = (ph.p_flags & PF_X) != 0;
            e->nloads++;

        } else if (ph.p_type == PT_NOTE && e->build_id[0] == '\0') {
            elf_notes(p, n, ph.p_offset, ph.p_filesz, ph.p_align,
                      e->build_id);
        }
    }

    if (eh.e_shnum == 0) {
        return 0;
    }

    sh = malloc(eh.e_shnum * sizeof(Elf64_Shdr));
    if (sh == NULL) {
        elf_free(e);
        return -1;
    }
    memcpy(sh, p + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));

    for (i = 0; i < eh.e_shnum && e->build_id[0] == '\0'; i++) {
        if (sh[i].sh_type == SHT_NOTE) {
            elf_notes(p, n, sh[i].sh_offset, sh[i].sh_size,
                      sh[i].sh_addralign, e->build_id);
        }
    }

    if (elf_symbols(p, n, sh, eh.e_shnum, SHT_SYMTAB, e) <= 0) {
        (void) elf_symbols(p, n, sh, eh.e_shnum, SHT_DYNSYM, e);
    }

    free(sh);
    return 0;
}


static int
elf_open(const char *path)
{
    /* O_NONBLOCK: a FIFO at that path must not hang the exporter. */
    return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
}


static int
elf_load_fd(int fd, sym_elf_t *e)
{
    struct stat     st;
    unsigned char  *buf;
    size_t          size, got;
    ssize_t         r;
    void           *p;
    int             rc;

    memset(e, 0, sizeof(sym_elf_t));

    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)
        || st.st_size < (off_t) sizeof(Elf64_Ehdr)
        || (uint64_t) st.st_size > SIZE_MAX)
    {
        return -1;
    }
    size = (size_t) st.st_size;

    /* Only the headers and symbol tables are touched, so mapping the file
     * costs a few pages even for a binary with debug info. */
    p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
        rc = elf_parse(p, size, e);
        munmap(p, size);
        return rc;
    }

    if (size > SYM_MAX_READ) {
        return -1;
    }
    buf = malloc(size);
    if (buf == NULL) {
        return -1;
    }
    for (got = 0; got < size; got += (size_t) r) {
        r = pread(fd, buf + got, size - got, (off_t) got);
        if (r < 0 && errno == EINTR) {
            r = 0;
            continue;
        }
        if (r <= 0) {
            break;
        }
    }
    rc = elf_parse(buf, got, e);
    free(buf);
    return rc;
}


static int
elf_load_path(const char *path, sym_elf_t *e)
{
    int  fd, rc;

    memset(e, 0, sizeof(sym_elf_t));
    fd = elf_open(path);
    if (fd < 0) {
        return -1;
    }
    rc = elf_load_fd(fd, e);
    close(fd);
    return rc;
}


/* A stripped file's .symtab may be installed apart (Debian's -dbgsym
 * packages), found by build id. */
static void
elf_debug_file(sym_elf_t *e)
{
    sym_elf_t  d;
    char       path[sizeof(SYM_DEBUG_DIR) + 2 * SYM_MAX_BUILD_ID + 8];

    if (e->from_symtab || strlen(e->build_id) < 4) {
        return;
    }
    snprintf(path, sizeof(path), SYM_DEBUG_DIR "%.2s/%s.debug",
             e->build_id, e->build_id + 2);

    if (elf_load_path(path, &d) == 0 && d.from_symtab && d.nfuncs > 0) {
        free(e->funcs);
        free(e->names);
        e->funcs = d.funcs;
        e->nfuncs = d.nfuncs;
        e->names = d.names;
        e->from_symtab = 1;
        d.funcs = NULL;
        d.names = NULL;
    }
    elf_free(&d);
}


int
sp_symbols_test_load(const char *path, size_t *nsyms)
{
    sym_elf_t  e;
    int        rc;

    rc = elf_load_path(path, &e);
    if (nsyms != NULL) {
        *nsyms = rc == 0 ? e.nfuncs : 0;
    }
    elf_free(&e);
    return rc;
}


/* ---- objects and mappings ------------------------------------------- */

static void
obj_load(sp_symbolizer_t *s, sym_obj_t *o, const sym_map_t *m)
{
    char  path[64];
    int   fd, rc;

    o->state = -1;

    if (o->vdso_start != 0) {
        /* The vdso is a complete ELF image in memory. */
        rc = elf_parse((const unsigned char *) (uintptr_t) m->start,
                       m->end - m->start, &o->elf);

    } else {
        /* The descriptor opened before privileges were dropped reaches
         * the file whatever the directories above it allow, and is the
         * mapped file even after the path was deleted or replaced. */
        fd = sp_symbol_files_fd(s->files, o->path, strlen(o->path),
                                o->dev_major, o->dev_minor, o->inode);
        if (fd >= 0) {
            rc = elf_load_fd(fd, &o->elf);

        } else {
            /* A deleted file's path may name another file by now; the
             * map_files link reaches the mapped one (needs privileges). */
            fd = m->deleted ? -1 : elf_open(o->path);
            if (fd < 0) {
                snprintf(path, sizeof(path),
                         "/proc/self/map_files/%" PRIx64 "-%" PRIx64,
                         m->start, m->end);
                fd = elf_open(path);
            }
            if (fd < 0) {
                return;
            }
            rc = elf_load_fd(fd, &o->elf);
            close(fd);
        }
        if (rc == 0) {
            elf_debug_file(&o->elf);
        }
    }

    if (rc != 0) {
        elf_free(&o->elf);
        return;
    }
    if (o->elf.build_id[0] != '\0') {
        o->build_id = sym_intern(s, o->elf.build_id,
                                 strlen(o->elf.build_id));
    }
    o->state = 1;
}


static sym_obj_t *
obj_get(sp_symbolizer_t *s, const char *path, size_t len, unsigned major,
    unsigned minor, uint64_t inode, uint64_t vdso_start)
{
    sym_obj_t   *o;
    const char  *ipath, *slash;

    ipath = sym_intern(s, path, len);
    if (ipath == NULL) {
        return NULL;
    }

    for (o = s->objs; o != NULL; o = o->next) {
        if (o->path == ipath && o->dev_major == major
            && o->dev_minor == minor && o->inode == inode
            && o->vdso_start == vdso_start)
        {
            return o;
        }
    }

    o = calloc(1, sizeof(sym_obj_t));
    if (o == NULL) {
        return NULL;
    }
    o->path = ipath;
    slash = strrchr(ipath, '/');
    o->base = slash ? slash + 1 : ipath;
    o->dev_major = major;
    o->dev_minor = minor;
    o->inode = inode;
    o->vdso_start = vdso_start;
    o->next = s->objs;
    s->objs = o;
    return o;
}


/* bias = runtime address - ELF virtual address for this mapping. */
static void
map_bias(sp_symbolizer_t *s, sym_map_t *m)
{
    const sym_elf_t   *e;
    const sym_load_t  *l;
    uint64_t           low;
    size_t             i;
    int                pass;

    m->bias_done = 1;
    /* Without ELF headers pc - bias is at least the offset in the file. */
    m->bias = m->start - m->offset;

    if (m->obj->state != 1 || m->obj->elf.nloads == 0) {
        return;
    }
    e = &m->obj->elf;

    /* The PT_LOAD segment the mapping was made from holds its (page
     * aligned) file offset; executable segments first. The loader maps
     * file offset o of a segment at bias + p_vaddr + (o - p_offset). */
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < e->nloads; i++) {
            l = &e->loads[i];
            if (l->exec != !pass) {
                continue;
            }
            if (m->offset >= (l->offset & ~(s->page_size - 1))
                && m->offset < l->offset + l->filesz)
            {
                m->bias = m->start - m->offset - (l->vaddr - l->offset);
                return;
            }
        }
    }

    /* Else: the file's lowest mapping holds its lowest segment. */
    low = UINT64_MAX;
    for (i = 0; i < e->nloads; i++) {
        if (e->loads[i].vaddr < low) {
            low = e->loads[i].vaddr;
        }
    }
    m->bias = m->file_low - (low & ~(s->page_size - 1));
}


static int
map_cmp(const void *a, const void *b)
{
    const sym_map_t  *x = a, *y = b;

    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    return 0;
}


static sym_map_t *
map_find(sp_symbolizer_t *s, uint64_t pc)
{
    size_t  lo, hi, mid;

    lo = 0;
    hi = s->nmaps;
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (s->maps[mid].start <= pc) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0 || pc >= s->maps[lo - 1].end) {
        return NULL;
    }
    return &s->maps[lo - 1];
}


static const sym_func_t *
func_find(const sym_elf_t *e, uint64_t vaddr)
{
    const sym_func_t  *f;
    size_t             lo, hi, mid;

    lo = 0;
    hi = e->nfuncs;
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (e->funcs[mid].addr <= vaddr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) {
        return NULL;
    }
    f = &e->funcs[lo - 1];
    /* Past its end is a gap (padding, a PLT, code without a symbol), not
     * the tail of the neighbour. */
    return vaddr - f->addr < f->size ? f : NULL;
}


/* ---- per-pc cache --------------------------------------------------- */

static size_t
cache_slot(uint64_t pc, size_t nslots)
{
    return (size_t) ((pc * 0x9e3779b97f4a7c15ULL) >> 32) & (nslots - 1);
}


static void
cache_clear(sp_symbolizer_t *s)
{
    s->nentries = 0;
    if (s->slots != NULL) {
        memset(s->slots, 0, s->nslots * sizeof(uint32_t));
    }
}


static const sym_entry_t *
cache_find(sp_symbolizer_t *s, uint64_t pc)
{
    size_t    i;
    uint32_t  k;

    if (s->nentries == 0) {
        return NULL;
    }
    for (i = cache_slot(pc, s->nslots); (k = s->slots[i]) != 0;
         i = (i + 1) & (s->nslots - 1))
    {
        if (s->entries[k - 1].pc == pc) {
            return &s->entries[k - 1];
        }
    }
    return NULL;
}


static void
cache_insert(sp_symbolizer_t *s, uint64_t pc, const sp_symbol_t *sym)
{
    sym_entry_t  *entries;
    uint32_t     *slots;
    size_t        n, i, k;

    if (s->nentries == SYM_CACHE_MAX) {
        /* Simplest bounded policy; hot pcs come back within a batch. */
        cache_clear(s);
    }

    if (s->nentries == s->entries_cap) {
        n = s->entries_cap ? s->entries_cap * 2 : SYM_CACHE_MIN / 2;
        entries = realloc(s->entries, n * sizeof(sym_entry_t));
        if (entries == NULL) {
            return;
        }
        s->entries = entries;
        s->entries_cap = n;
    }

    /* At most half the slots used. */
    if ((s->nentries + 1) * 2 > s->nslots) {
        n = s->nslots ? s->nslots * 2 : SYM_CACHE_MIN;
        slots = calloc(n, sizeof(uint32_t));
        if (slots == NULL) {
            return;
        }
        for (k = 0; k < s->nentries; k++) {
            i = cache_slot(s->entries[k].pc, n);
            while (slots[i] != 0) {
                i = (i + 1) & (n - 1);
            }
            slots[i] = (uint32_t) (k + 1);
        }
        free(s->slots);
        s->slots = slots;
        s->nslots = n;
    }

    i = cache_slot(pc, s->nslots);
    while (s->slots[i] != 0) {
        i = (i + 1) & (s->nslots - 1);
    }
    s->entries[s->nentries].pc = pc;
    s->entries[s->nentries].sym = *sym;
    s->slots[i] = (uint32_t) ++s->nentries;
}


int
sp_symbolizer_refresh(sp_symbolizer_t *s)
{
    sp_maps_line_t  *lines;
    sp_proc_maps_t   pm;
    sym_map_t       *maps, *m;
    size_t           nlines, nmaps, i, j;
    int              vdso;

    if (s == NULL || sp_proc_maps_load(&pm) != 0) {
        return -1;
    }
    lines = pm.lines;
    nlines = pm.nlines;

    nmaps = 0;
    for (i = 0; i < nlines; i++) {
        nmaps += lines[i].exec;
    }
    maps = calloc(nmaps ? nmaps : 1, sizeof(sym_map_t));
    if (maps == NULL) {
        sp_proc_maps_free(&pm);
        return -1;
    }

    nmaps = 0;
    for (i = 0; i < nlines; i++) {
        if (!lines[i].exec) {
            continue;
        }
        m = &maps[nmaps];
        m->start = lines[i].start;
        m->end = lines[i].end;
        m->offset = lines[i].offset;
        m->deleted = lines[i].deleted;

        /* maps is sorted by address and a file's mappings are adjacent:
         * the first of the run is its lowest (for the fallback bias). */
        m->file_low = lines[i].start;
        for (j = i; j > 0 && sp_maps_same_file(&lines[j - 1], &lines[i]);
             j--)
        {
            m->file_low = lines[j - 1].start;
        }

        vdso = lines[i].path[0] == '[';
        m->obj = obj_get(s, lines[i].path, lines[i].len, lines[i].major,
                         lines[i].minor, lines[i].inode,
                         vdso ? lines[i].start : 0);
        if (m->obj != NULL) {
            nmaps++;
        }
    }

    sp_proc_maps_free(&pm);

    qsort(maps, nmaps, sizeof(sym_map_t), map_cmp);

    /* Unchanged mappings keep the old array (and its computed biases)
     * and the per-pc cache; any change drops the cache, since another
     * file may now sit where a cached pc pointed. */
    if (nmaps == s->nmaps) {
        for (i = 0; i < nmaps; i++) {
            if (maps[i].start != s->maps[i].start
                || maps[i].end != s->maps[i].end
                || maps[i].offset != s->maps[i].offset
                || maps[i].obj != s->maps[i].obj)
            {
                break;
            }
        }
        if (i == nmaps) {
            free(maps);
            return 0;
        }
    }

    free(s->maps);
    s->maps = maps;
    s->nmaps = nmaps;
    cache_clear(s);
    return 0;
}


/* ---- public --------------------------------------------------------- */

sp_symbolizer_t *
sp_symbolizer_new(const sp_symbol_files_t *files)
{
    sp_symbolizer_t  *s;
    long              pg;

    s = calloc(1, sizeof(sp_symbolizer_t));
    if (s == NULL) {
        return NULL;
    }
    pg = sysconf(_SC_PAGESIZE);
    s->page_size = pg > 0 ? (uint64_t) pg : 4096;
    s->files = files;

    /* A failure here is retried by the first unknown pc. */
    (void) sp_symbolizer_refresh(s);
    return s;
}


void
sp_symbolizer_free(sp_symbolizer_t *s)
{
    sym_obj_t    *o, *on;
    sym_block_t  *b, *bn;

    if (s == NULL) {
        return;
    }
    for (o = s->objs; o != NULL; o = on) {
        on = o->next;
        elf_free(&o->elf);
        free(o);
    }
    for (b = s->blocks; b != NULL; b = bn) {
        bn = b->next;
        free(b);
    }
    free(s->maps);
    free(s->entries);
    free(s->slots);
    free(s->strs);
    free(s);
}


static uint64_t
sym_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}


int
sp_symbolize(sp_symbolizer_t *s, uint64_t pc, sp_symbol_t *out)
{
    const sym_entry_t  *ce;
    const sym_func_t   *f;
    sym_map_t          *m;
    sym_obj_t          *o;
    uint64_t            now;
    const char         *at;

    memset(out, 0, sizeof(sp_symbol_t));

    if (s == NULL) {
        out->display = "?";
        return 0;
    }

    ce = cache_find(s, pc);
    if (ce != NULL) {
        *out = ce->sym;
        return 0;
    }

    m = map_find(s, pc);
    if (m == NULL) {
        /* Perhaps a library loaded since; but a stream of garbage pcs must
         * not re-read /proc/self/maps for each one. */
        now = sym_now();
        if (!s->auto_refreshed || now - s->last_auto_refresh >= SYM_REFRESH_NS)
        {
            s->auto_refreshed = 1;
            s->last_auto_refresh = now;
            (void) sp_symbolizer_refresh(s);
            m = map_find(s, pc);
        }
    }

    if (m == NULL) {
        /* Not cached: the interned string makes repeats cheap enough, and
         * a later refresh may yet find the pc. */
        out->display = sym_intern_hex(s, NULL, pc);
        if (out->display == NULL) {
            out->display = "?";
        }
        return 0;
    }

    o = m->obj;
    if (o->state == 0) {
        obj_load(s, o, m);
    }
    if (!m->bias_done) {
        map_bias(s, m);
    }

    out->object = o->path;
    out->object_base = o->base;
    out->build_id = o->build_id;
    out->map_start = m->start;
    out->map_limit = m->end;
    out->map_offset = m->offset;
    out->file_offset = pc - m->bias;

    f = o->state == 1 ? func_find(&o->elf, out->file_offset) : NULL;
    if (f != NULL) {
        /* .symtab names of versioned symbols ("clock_gettime@@GLIBC_2.17")
         * are shown as the function's own name. */
        at = strchr(f->name, '@');
        out->function = at != NULL && at != f->name
                        ? sym_intern(s, f->name, (size_t) (at - f->name))
                        : f->name;
        out->function_start = f->addr + m->bias;
        out->display = out->function;

    } else {
        out->display = sym_intern_hex(s, o->base, out->file_offset);
    }
    if (out->display == NULL) {
        out->display = "?";
        return 0;
    }

    cache_insert(s, pc, out);
    return 0;
}
