#ifndef SP_FILE_OUTPUT_H
#define SP_FILE_OUTPUT_H

#include <stddef.h>
#include <sys/types.h>

/* The file endpoint's output, opened the way nginx and httpd open their
 * logs: a privileged parent (the nginx master, httpd's parent, as root)
 * creates the directory, gives it and traces.jsonl to the worker user and
 * opens both; each worker inherits the descriptors and writes relative to
 * the directory's (write, openat, renameat), so no directory above it has
 * to be searchable by the worker user.
 *
 * Rotation: after the parent reopens (nginx -s reopen, a graceful restart),
 * traces.jsonl names a new file; a worker checks the name before each
 * append and moves to the file it now names. Until then (the file renamed
 * and not yet recreated) it keeps appending to the one it has, so every
 * line lands in exactly one of the two files. */

#define SP_FILE_OUTPUT_TRACES  "traces.jsonl"

/* Descriptors a privileged parent opened; both stay the parent's. */
typedef struct {
    int        dir_fd;        /* the directory (O_DIRECTORY) */
    int        traces_fd;     /* its traces.jsonl (O_APPEND); -1: none */
} sp_file_output_fds_t;

/* Parent side: creates dir (0700) if missing, and when uid is not -1 and
 * we may, gives dir and dir/traces.jsonl to uid:gid as nginx gives its temp
 * paths and logs; then opens both (traces only with want_traces). 0, or -1
 * with err filled. */
int sp_file_output_prepare(const char *dir, uid_t uid, gid_t gid,
    int want_traces, sp_file_output_fds_t *fds, char *err, size_t errlen);
void sp_file_output_fds_close(sp_file_output_fds_t *fds);

/* Worker side. */
typedef struct {
    char      *dir;           /* for messages */
    int        dir_fd;
    int        traces_fd;     /* -1 until opened */
    dev_t      traces_dev;
    ino_t      traces_ino;
    unsigned   reopened;      /* rotations followed */
} sp_file_output_t;

/* From the parent's descriptors (duplicated: o owns its own), or with
 * fds NULL by path (a process that never dropped privileges). 0, or -1
 * with err filled. */
int sp_file_output_open(sp_file_output_t *o, const char *dir,
    const sp_file_output_fds_t *fds, char *err, size_t errlen);
void sp_file_output_close(sp_file_output_t *o);

/* Appends one record with one write(), so lines of several processes
 * never interleave (O_APPEND). Returns what write() returns. */
ssize_t sp_file_output_append(sp_file_output_t *o, const void *p, size_t n);

/* Writes dir/name whole: under a temporary name, then renamed, so a reader
 * never sees half a file. 0, or -1 with errno set. */
int sp_file_output_write_whole(const sp_file_output_t *o, const char *name,
    const void *p, size_t n);

#endif
