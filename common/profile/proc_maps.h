#ifndef SP_PROC_MAPS_H
#define SP_PROC_MAPS_H

#include <stddef.h>
#include <stdint.h>

/* This process's memory map as /proc/self/maps gives it: the lines that
 * name a file (or the vdso), for the symbolizer and for the table of
 * mapped files opened before a server drops its privileges. */

typedef struct {
    uint64_t     start;
    uint64_t     end;
    uint64_t     offset;
    uint64_t     inode;
    unsigned     major;
    unsigned     minor;
    int          exec;         /* mapped executable */
    int          deleted;      /* " (deleted)" was cut from path */
    const char  *path;         /* not NUL-ended at len: use len */
    size_t       len;
} sp_maps_line_t;

typedef struct {
    char            *buf;      /* the text the lines point into */
    sp_maps_line_t  *lines;    /* in address order */
    size_t           nlines;
} sp_proc_maps_t;

/* Reads and parses /proc/self/maps. 0, or -1 (errno set) on failure. */
int sp_proc_maps_load(sp_proc_maps_t *m);
void sp_proc_maps_free(sp_proc_maps_t *m);

/* Both lines map the same file (path, device and inode). */
int sp_maps_same_file(const sp_maps_line_t *a, const sp_maps_line_t *b);

#endif
