#ifndef SP_FUZZ_TMPDIR_H
#define SP_FUZZ_TMPDIR_H

/* A directory of the fuzzing process's own, for targets that read files
 * (the CLI reads what the file exporter wrote), removed at exit. */

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char  fuzz_dir[256];
static char  fuzz_file[512];

static void
fuzz_tmpdir_remove(void)
{
    unlink(fuzz_file);
    rmdir(fuzz_dir);
}

/* Makes the directory and names fuzz_file (name) inside it. */
static inline void
fuzz_tmpdir_init(const char *name)
{
    const char  *tmp = getenv("TMPDIR");

    snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/spanprof-fuzz-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(fuzz_dir) == NULL) {
        perror(fuzz_dir);
        abort();
    }
    snprintf(fuzz_file, sizeof(fuzz_file), "%s/%s", fuzz_dir, name);
    atexit(fuzz_tmpdir_remove);
}

#endif
