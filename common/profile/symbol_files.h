#ifndef SP_SYMBOL_FILES_H
#define SP_SYMBOL_FILES_H

#include <stddef.h>
#include <stdint.h>

/* Descriptors of the files this process has mapped executable, opened
 * while it can still reach them: by a server's master (nginx) or parent
 * (httpd) as root, before the workers that symbolize drop privileges, the
 * way both servers open their logs. A worker's symbolizer then reads each
 * file through the descriptor it inherited, so a module under a directory
 * the worker user cannot search (a clone in /root, mode 0700) still has its
 * functions named. Objects loaded after the table was made are opened by
 * path as before. */

typedef struct sp_symbol_files sp_symbol_files_t;

/* Opens the file of every file-backed executable mapping (read-only,
 * close-on-exec: kept across fork, not exec). A file that cannot be
 * opened is left out and counted. NULL with err filled on failure. */
sp_symbol_files_t *sp_symbol_files_open(char *err, size_t errlen);

/* Closes every descriptor and frees the table; NULL is fine. */
void sp_symbol_files_close(sp_symbol_files_t *f);

/* Files opened, and files that could not be. */
size_t sp_symbol_files_count(const sp_symbol_files_t *f);
size_t sp_symbol_files_failed(const sp_symbol_files_t *f);

/* The descriptor for the file a mapping names, as /proc/self/maps shows
 * it (path of len bytes, device, inode); -1 when the table has none.
 * The table keeps it: read it with pread or mmap, never close it. */
int sp_symbol_files_fd(const sp_symbol_files_t *f, const char *path,
    size_t len, unsigned major, unsigned minor, uint64_t inode);

#endif
