#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/file_read.h"

int
sp_file_read_all(const char *path, size_t max, char **data, size_t *len,
    char *err, size_t errlen)
{
    int          fd;
    struct stat  st;
    char        *buf = NULL;
    size_t       got = 0;
    ssize_t      n;

    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO at the path must not hang the configuration. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd == -1) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        goto fail;
    }
    if ((unsigned long long) st.st_size > max) {
        snprintf(err, errlen, "larger than %zu bytes", max);
        goto fail;
    }
    /* One byte more than allowed, to see a file that grew meanwhile. */
    buf = malloc(max + 2);
    if (buf == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for ( ;; ) {
        n = read(fd, buf + got, max + 1 - got);
        if (n == -1 && errno == EINTR) {
            continue;
        }
        if (n == -1) {
            snprintf(err, errlen, "%s", strerror(errno));
            goto fail;
        }
        if (n == 0) {
            break;
        }
        got += (size_t) n;
        if (got > max) {
            snprintf(err, errlen, "larger than %zu bytes", max);
            goto fail;
        }
    }
    if (got == 0) {
        snprintf(err, errlen, "empty");
        goto fail;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return 0;

fail:
    free(buf);
    close(fd);
    return -1;
}
