/* The file endpoint's output (common/export/file_output.c): what the
 * privileged parent prepares, what a worker does with the descriptors it
 * inherits, rotation followed by name, whole files written atomically. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "common/export/file_output.h"

static char *
slurp(const char *path)
{
    static char  buf[4096];
    ssize_t      n;
    int          fd;

    fd = open(path, O_RDONLY);
    if (fd < 0) {
        return NULL;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static int
count_entries(const char *dir)
{
    DIR            *d = opendir(dir);
    struct dirent  *e;
    int             n = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.' || (e->d_name[1] != '\0'
                                     && e->d_name[1] != '.');
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

int
main(void)
{
    char                  base[] = "/tmp/spanprof-fileout-XXXXXX";
    char                  dir[256], path[300], old[300], err[256];
    struct passwd        *nobody;
    struct stat           st;
    sp_file_output_fds_t  fds;
    sp_file_output_t      o;
    uid_t                 uid = (uid_t) -1;
    gid_t                 gid = (gid_t) -1;
    int                   fd;

    ok(mkdtemp(base) != NULL, "temporary directory");
    snprintf(dir, sizeof(dir), "%s/out", base);
    snprintf(path, sizeof(path), "%s/traces.jsonl", dir);
    snprintf(old, sizeof(old), "%s/traces.jsonl.1", dir);

    /* The parent: the directory made (0700) and, as root, given away. */
    nobody = getpwnam("nobody");
    if (geteuid() == 0 && nobody != NULL) {
        uid = nobody->pw_uid;
        gid = nobody->pw_gid;
    }
    ok(sp_file_output_prepare(dir, uid, gid, 1, &fds, err, sizeof(err)) == 0,
       "prepare: %s", err);
    ok(stat(dir, &st) == 0 && S_ISDIR(st.st_mode)
       && (st.st_mode & 0777) == 0700, "directory created, mode 0700");
    if (uid != (uid_t) -1) {
        is_int(st.st_uid, uid, "directory given to the worker user");
        ok(stat(path, &st) == 0 && st.st_uid == uid,
           "traces.jsonl given to the worker user");
    } else {
        ok(1, "# skip not root: ownership unchanged");
        ok(1, "# skip not root: ownership unchanged");
    }
    ok(fds.dir_fd >= 0 && fds.traces_fd >= 0, "both descriptors open");

    /* The worker: its own copies of the parent's descriptors. */
    ok(sp_file_output_open(&o, dir, &fds, err, sizeof(err)) == 0,
       "open from the parent's descriptors");
    ok(o.dir_fd != fds.dir_fd && o.traces_fd != fds.traces_fd,
       "duplicated, not shared");
    is_int(sp_file_output_append(&o, "a\n", 2), 2, "append a");
    is_str(slurp(path), "a\n", "a in traces.jsonl");

    /* Renamed, not yet recreated: the worker keeps the file it has. */
    ok(rename(path, old) == 0, "rename to traces.jsonl.1");
    is_int(sp_file_output_append(&o, "b\n", 2), 2, "append b");
    is_str(slurp(old), "a\nb\n", "b follows a in the renamed file");
    is_int(o.reopened, 0, "nothing to follow yet");

    /* The parent reopens (USR1, graceful): the worker moves to it. */
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    ok(fd >= 0, "the parent recreates traces.jsonl");
    close(fd);
    is_int(sp_file_output_append(&o, "c\n", 2), 2, "append c");
    is_str(slurp(path), "c\n", "c in the new traces.jsonl");
    is_str(slurp(old), "a\nb\n", "the renamed file keeps a and b only");
    is_int(o.reopened, 1, "one rotation followed");

    /* Whole files: renamed into place, no temporary left. */
    ok(sp_file_output_write_whole(&o, "cpu-1-2.pb.gz", "xyz", 3) == 0,
       "write a whole file");
    snprintf(old, sizeof(old), "%s/cpu-1-2.pb.gz", dir);
    is_str(slurp(old), "xyz", "its content");
    is_int(count_entries(dir), 3, "traces.jsonl, .1 and the profile only");

    sp_file_output_close(&o);
    sp_file_output_fds_close(&fds);
    ok(fds.dir_fd == -1 && fds.traces_fd == -1, "parent's closed");

    /* No parent: by path, traces.jsonl made on the first append. */
    unlink(path);
    ok(sp_file_output_open(&o, dir, NULL, err, sizeof(err)) == 0,
       "open by path");
    is_int(sp_file_output_append(&o, "d\n", 2), 2, "append d");
    is_str(slurp(path), "d\n", "d in a traces.jsonl made here");
    sp_file_output_close(&o);

    ok(sp_file_output_open(&o, "/nonexistent/spanprof", NULL, err,
                           sizeof(err)) != 0 && strstr(err, "nonexistent"),
       "a missing directory is an error naming it: %s", err);

    snprintf(old, sizeof(old), "rm -rf '%s'", base);
    if (system(old) != 0) {
        /* left behind in /tmp */
    }
    return done_testing();
}
