#ifndef SP_SYMBOLS_H
#define SP_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "common/profile/symbol_files.h"

/* Program counters of this process to names, off the signal path (exporter
 * thread). Mappings come from /proc/self/maps (file-backed executable
 * mappings, plus [vdso]); function names from each ELF file's .symtab, or
 * .dynsym when it has none, matched by symbol address AND size, so an
 * address outside every symbol is never given the name of a neighbour.
 * Build ids come from the NT_GNU_BUILD_ID note. Results are cached per pc
 * and per file; the strings stay valid until sp_symbolizer_free. */

typedef struct sp_symbolizer sp_symbolizer_t;

typedef struct {
    const char  *function;     /* symbol name, NULL when unknown */
    uint64_t     function_start;   /* runtime address of the symbol */
    const char  *object;       /* mapped file path, "[vdso]", or NULL */
    const char  *object_base;  /* basename of object, or NULL */
    const char  *build_id;     /* lowercase hex, NULL when none */
    uint64_t     map_start;    /* the executable mapping holding pc */
    uint64_t     map_limit;
    uint64_t     map_offset;   /* its file offset */
    uint64_t     file_offset;  /* pc as an offset into the file (ELF
                                  virtual address minus load bias) */
    const char  *display;      /* function, or "libname+0xfile_offset",
                                  or "0x<pc>" when no mapping holds pc */
} sp_symbol_t;

/* files: the mapped files' descriptors opened by a privileged parent
 * (symbol_files.h), read before any path; NULL: by path only. The table
 * must outlive the symbolizer. */
sp_symbolizer_t *sp_symbolizer_new(const sp_symbol_files_t *files);
void sp_symbolizer_free(sp_symbolizer_t *s);

/* Re-reads /proc/self/maps (new libraries, unloaded ones); cached names of
 * files still mapped at the same place are kept. 0, or -1 on failure. */
int sp_symbolizer_refresh(sp_symbolizer_t *s);

/* Fills out for pc; an unknown pc triggers at most one refresh per call.
 * Always returns 0 with out->display set. */
int sp_symbolize(sp_symbolizer_t *s, uint64_t pc, sp_symbol_t *out);

#endif
