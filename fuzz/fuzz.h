#ifndef SP_FUZZ_H
#define SP_FUZZ_H

/* Helpers shared by the libFuzzer targets in fuzz/ (header-only: each
 * target is one .c file linked with the fuzz build of common/ or cli/).
 * A target aborts on a broken property; the sanitizers catch the rest. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sanitizer/common_interface_defs.h>

/* Aborts with a message: a property of the parser does not hold. libFuzzer
 * reports the abort as a crash and saves the input. The message goes where
 * the sanitizers report (fuzz/run closes the target's stderr). */
#define FUZZ_CHECK(cond)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fuzz_fail(__FILE__, __LINE__, #cond);                             \
        }                                                                     \
    } while (0)

__attribute__((noreturn)) static inline void
fuzz_fail(const char *file, int line, const char *what)
{
    char  msg[512];

    snprintf(msg, sizeof(msg), "fuzz: %s:%d: property failed: %s", file,
             line, what);
    __sanitizer_report_error_summary(msg);
    abort();
}

/* The input as a C string (a directive value, a command-line argument):
 * what such an API sees ends at the first NUL. Free it. */
static inline char *
fuzz_cstr(const uint8_t *data, size_t size)
{
    char  *s = malloc(size + 1);

    if (s == NULL) {
        abort();
    }
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Writes data to path (readers of files are fuzzed through the file). */
static inline void
fuzz_write_file(const char *path, const void *data, size_t size)
{
    FILE  *f = fopen(path, "wb");

    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size)
        || fclose(f) != 0)
    {
        perror(path);
        abort();
    }
}

#endif
