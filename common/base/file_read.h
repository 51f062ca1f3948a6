#ifndef SP_FILE_READ_H
#define SP_FILE_READ_H

#include <stddef.h>

/* Reads a whole regular file into memory, for files the server's
 * master/parent reads while it still runs as root, so that workers
 * (which may not reach the path) get the bytes instead of the path. */

/* Reads path into a malloc'd buffer (NUL-terminated, not counted in
 * *len), at most max bytes. Returns 0, or -1 with err set (the reason:
 * strerror, "not a regular file", "larger than N bytes", "empty") and
 * *data NULL. The caller frees *data. */
int sp_file_read_all(const char *path, size_t max, char **data, size_t *len,
    char *err, size_t errlen);

#endif
