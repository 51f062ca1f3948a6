/* The file endpoint's directory and traces.jsonl (see file_output.h). */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/export/file_output.h"

#define SP_OPEN_APPEND  (O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY \
                         | O_NONBLOCK)


/* As nginx's ngx_create_paths and log reopening: the worker user owns what
 * it must write, with at least rw(x) for itself. */
static int
give(int fd, uid_t uid, gid_t gid, mode_t need, const char *what,
    char *err, size_t errlen)
{
    struct stat  st;

    if (uid == (uid_t) -1 || geteuid() != 0) {
        return 0;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "stat \"%s\" failed: %s", what, strerror(errno));
        return -1;
    }
    if (st.st_uid != uid && fchown(fd, uid, gid) != 0) {
        snprintf(err, errlen, "chown \"%s\" failed: %s", what,
                 strerror(errno));
        return -1;
    }
    if ((st.st_mode & need) != need && fchmod(fd, st.st_mode | need) != 0) {
        snprintf(err, errlen, "chmod \"%s\" failed: %s", what,
                 strerror(errno));
        return -1;
    }
    return 0;
}


int
sp_file_output_prepare(const char *dir, uid_t uid, gid_t gid,
    int want_traces, sp_file_output_fds_t *fds, char *err, size_t errlen)
{
    fds->dir_fd = -1;
    fds->traces_fd = -1;

    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir \"%s\" failed: %s", dir,
                 strerror(errno));
        return -1;
    }
    fds->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fds->dir_fd < 0) {
        snprintf(err, errlen, "open \"%s\" failed: %s", dir, strerror(errno));
        return -1;
    }
    if (give(fds->dir_fd, uid, gid, S_IRWXU, dir, err, errlen) != 0) {
        goto failed;
    }
    if (want_traces) {
        fds->traces_fd = openat(fds->dir_fd, SP_FILE_OUTPUT_TRACES,
                                SP_OPEN_APPEND | O_CREAT, 0644);
        if (fds->traces_fd < 0) {
            snprintf(err, errlen, "open \"%s/" SP_FILE_OUTPUT_TRACES
                     "\" failed: %s", dir, strerror(errno));
            goto failed;
        }
        if (give(fds->traces_fd, uid, gid, S_IRUSR | S_IWUSR,
                 SP_FILE_OUTPUT_TRACES, err, errlen) != 0)
        {
            goto failed;
        }
    }
    return 0;

failed:
    sp_file_output_fds_close(fds);
    return -1;
}


void
sp_file_output_fds_close(sp_file_output_fds_t *fds)
{
    if (fds->traces_fd >= 0) {
        close(fds->traces_fd);
    }
    if (fds->dir_fd >= 0) {
        close(fds->dir_fd);
    }
    fds->dir_fd = -1;
    fds->traces_fd = -1;
}


static void
remember(sp_file_output_t *o)
{
    struct stat  st;

    if (o->traces_fd >= 0 && fstat(o->traces_fd, &st) == 0) {
        o->traces_dev = st.st_dev;
        o->traces_ino = st.st_ino;
    }
}


int
sp_file_output_open(sp_file_output_t *o, const char *dir,
    const sp_file_output_fds_t *fds, char *err, size_t errlen)
{
    memset(o, 0, sizeof(sp_file_output_t));
    o->dir_fd = -1;
    o->traces_fd = -1;

    o->dir = strdup(dir);
    if (o->dir == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (fds != NULL) {
        o->dir_fd = fcntl(fds->dir_fd, F_DUPFD_CLOEXEC, 0);
        if (fds->traces_fd >= 0) {
            o->traces_fd = fcntl(fds->traces_fd, F_DUPFD_CLOEXEC, 0);
        }
    } else {
        o->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (o->dir_fd < 0 || (fds != NULL && fds->traces_fd >= 0
                          && o->traces_fd < 0))
    {
        snprintf(err, errlen, "cannot open \"%s\": %s", dir, strerror(errno));
        sp_file_output_close(o);
        return -1;
    }
    remember(o);
    return 0;
}


void
sp_file_output_close(sp_file_output_t *o)
{
    if (o->traces_fd >= 0) {
        close(o->traces_fd);
    }
    if (o->dir_fd >= 0) {
        close(o->dir_fd);
    }
    free(o->dir);
    o->dir = NULL;
    o->dir_fd = -1;
    o->traces_fd = -1;
}


/* Moves to the file the name holds now, if it is another one. */
static void
follow(sp_file_output_t *o)
{
    struct stat  st;
    int          fd;

    if (fstatat(o->dir_fd, SP_FILE_OUTPUT_TRACES, &st, 0) != 0) {
        /* Renamed and not recreated yet: keep the one we have. */
        return;
    }
    if (o->traces_fd >= 0 && st.st_dev == o->traces_dev
        && st.st_ino == o->traces_ino)
    {
        return;
    }
    fd = openat(o->dir_fd, SP_FILE_OUTPUT_TRACES, SP_OPEN_APPEND);
    if (fd < 0) {
        return;
    }
    if (o->traces_fd >= 0) {
        close(o->traces_fd);
        o->reopened++;
    }
    o->traces_fd = fd;
    remember(o);
}


ssize_t
sp_file_output_append(sp_file_output_t *o, const void *p, size_t n)
{
    follow(o);
    if (o->traces_fd < 0) {
        /* Nobody opened it for us (no parent): create it here. */
        o->traces_fd = openat(o->dir_fd, SP_FILE_OUTPUT_TRACES,
                              SP_OPEN_APPEND | O_CREAT, 0644);
        if (o->traces_fd < 0) {
            return -1;
        }
        remember(o);
    }
    return write(o->traces_fd, p, n);
}


int
sp_file_output_write_whole(const sp_file_output_t *o, const char *name,
    const void *p, size_t n)
{
    char     tmp[64];
    ssize_t  w;
    int      fd, e;

    snprintf(tmp, sizeof(tmp), ".spanprof-%d.tmp", (int) getpid());
    fd = openat(o->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC
                | O_NOCTTY, 0644);
    if (fd < 0) {
        return -1;
    }
    w = write(fd, p, n);
    e = errno;
    close(fd);
    if (w != (ssize_t) n || renameat(o->dir_fd, tmp, o->dir_fd, name) != 0) {
        e = w != (ssize_t) n ? (w < 0 ? e : EIO) : errno;
        unlinkat(o->dir_fd, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}
