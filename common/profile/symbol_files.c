/* The mapped files' descriptors, opened before privileges are dropped
 * (see symbol_files.h). */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/profile/proc_maps.h"
#include "common/profile/symbol_files.h"


typedef struct {
    char      *path;
    size_t     len;
    unsigned   major;
    unsigned   minor;
    uint64_t   inode;
    int        fd;
} sp_symbol_file_t;

struct sp_symbol_files {
    sp_symbol_file_t  *files;
    size_t             nfiles;
    size_t             failed;
};


static int
known(const sp_symbol_files_t *f, const sp_maps_line_t *l)
{
    return sp_symbol_files_fd(f, l->path, l->len, l->major, l->minor,
                              l->inode) >= 0;
}


sp_symbol_files_t *
sp_symbol_files_open(char *err, size_t errlen)
{
    sp_symbol_files_t  *f;
    sp_symbol_file_t   *e;
    sp_maps_line_t     *l;
    sp_proc_maps_t      maps;
    size_t              i;
    char               *path;
    int                 fd;

    if (sp_proc_maps_load(&maps) != 0) {
        snprintf(err, errlen, "cannot read /proc/self/maps: %s",
                 strerror(errno));
        return NULL;
    }

    f = calloc(1, sizeof(sp_symbol_files_t));
    if (f != NULL) {
        f->files = calloc(maps.nlines ? maps.nlines : 1,
                          sizeof(sp_symbol_file_t));
    }
    if (f == NULL || f->files == NULL) {
        free(f);
        sp_proc_maps_free(&maps);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }

    for (i = 0; i < maps.nlines; i++) {
        l = &maps.lines[i];
        /* A deleted file's path may name another file by now. */
        if (!l->exec || l->path[0] != '/' || l->deleted || known(f, l)) {
            continue;
        }
        path = strndup(l->path, l->len);
        if (path == NULL) {
            f->failed++;
            continue;
        }
        /* O_NONBLOCK: a FIFO at that path must not hang the server. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
            free(path);
            f->failed++;
            continue;
        }
        e = &f->files[f->nfiles++];
        e->path = path;
        e->len = l->len;
        e->major = l->major;
        e->minor = l->minor;
        e->inode = l->inode;
        e->fd = fd;
    }

    sp_proc_maps_free(&maps);
    return f;
}


void
sp_symbol_files_close(sp_symbol_files_t *f)
{
    size_t  i;

    if (f == NULL) {
        return;
    }
    for (i = 0; i < f->nfiles; i++) {
        close(f->files[i].fd);
        free(f->files[i].path);
    }
    free(f->files);
    free(f);
}


size_t
sp_symbol_files_count(const sp_symbol_files_t *f)
{
    return f != NULL ? f->nfiles : 0;
}


size_t
sp_symbol_files_failed(const sp_symbol_files_t *f)
{
    return f != NULL ? f->failed : 0;
}


int
sp_symbol_files_fd(const sp_symbol_files_t *f, const char *path,
    size_t len, unsigned major, unsigned minor, uint64_t inode)
{
    size_t  i;

    if (f == NULL) {
        return -1;
    }
    /* A few dozen files, looked up once per file per symbolizer. */
    for (i = 0; i < f->nfiles; i++) {
        if (f->files[i].inode == inode && f->files[i].len == len
            && f->files[i].major == major && f->files[i].minor == minor
            && memcmp(f->files[i].path, path, len) == 0)
        {
            return f->files[i].fd;
        }
    }
    return -1;
}
