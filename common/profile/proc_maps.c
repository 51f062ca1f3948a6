/* /proc/self/maps, read whole and parsed (see proc_maps.h). */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/profile/proc_maps.h"

#define SP_MAPS_DELETED  " (deleted)"


static char *
maps_read(size_t *len)
{
    char     *buf, *nbuf;
    size_t    size, used;
    ssize_t   r;
    int       fd;

    fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }

    size = 16384;
    used = 0;
    buf = malloc(size);

    while (buf != NULL) {
        if (size - used < 4096) {
            nbuf = realloc(buf, size * 2);
            if (nbuf == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nbuf;
            size *= 2;
        }
        r = read(fd, buf + used, size - used - 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (r == 0) {
            buf[used] = '\0';
            *len = used;
            break;
        }
        used += (size_t) r;
    }

    close(fd);
    return buf;
}


/* "start-end perms offset major:minor inode   path"; 0 when the line is
 * a file (or the vdso) worth remembering. */
static int
maps_line(char *line, sp_maps_line_t *l)
{
    char    perms[8];
    int     n;
    size_t  dl;

    n = -1;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64
               " %n", &l->start, &l->end, perms, &l->offset, &l->major,
               &l->minor, &l->inode, &n) < 7 || n < 0)
    {
        return -1;
    }

    l->path = line + n;
    l->len = strlen(l->path);
    if (l->len == 0 || l->end <= l->start) {
        return -1;
    }
    if (l->path[0] != '/' && strcmp(l->path, "[vdso]") != 0) {
        return -1;
    }

    l->exec = strlen(perms) >= 3 && perms[2] == 'x';
    dl = sizeof(SP_MAPS_DELETED) - 1;
    l->deleted = l->len > dl
                 && strcmp(l->path + l->len - dl, SP_MAPS_DELETED) == 0;
    if (l->deleted) {
        l->len -= dl;
    }
    return 0;
}


int
sp_proc_maps_load(sp_proc_maps_t *m)
{
    sp_maps_line_t  *nl;
    size_t           len, cap;
    char            *line, *eol;

    memset(m, 0, sizeof(sp_proc_maps_t));

    m->buf = maps_read(&len);
    if (m->buf == NULL) {
        return -1;
    }

    cap = 0;
    for (line = m->buf; line < m->buf + len; line = eol + 1) {
        eol = strchr(line, '\n');
        if (eol == NULL) {
            eol = m->buf + len;
        }
        *eol = '\0';

        if (m->nlines == cap) {
            cap = cap ? cap * 2 : 256;
            nl = realloc(m->lines, cap * sizeof(sp_maps_line_t));
            if (nl == NULL) {
                sp_proc_maps_free(m);
                errno = ENOMEM;
                return -1;
            }
            m->lines = nl;
        }
        if (maps_line(line, &m->lines[m->nlines]) == 0) {
            m->nlines++;
        }
    }
    return 0;
}


void
sp_proc_maps_free(sp_proc_maps_t *m)
{
    free(m->lines);
    free(m->buf);
    memset(m, 0, sizeof(sp_proc_maps_t));
}


int
sp_maps_same_file(const sp_maps_line_t *a, const sp_maps_line_t *b)
{
    return a->inode == b->inode && a->major == b->major
           && a->minor == b->minor && a->len == b->len
           && memcmp(a->path, b->path, a->len) == 0;
}
