/* The CLI's pprof reader (cli_profile_load_file): a cpu-*.pb.gz file, then
 * what every command does with the model (selection, the flame tree and
 * its folded stacks and SVG, a filtered pprof written back).
 * The first byte's low bit picks what the rest is: 0, a protobuf Profile
 * that the target gzips (so that mutations reach the decoder past gzip's
 * CRC); 1, the file's bytes as they are (gzip itself). The file is loaded
 * twice into one model, as two workers' files are merged.
 * Properties: a refused file comes with a message; a loaded model's
 * samples point inside its tables; the filtered pprof loads again. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/spanprof.h"
#include "common/base/buf.h"
#include "common/export/gzip.h"
#include "fuzz/fuzz.h"
#include "fuzz/fuzz_tmpdir.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_tmpdir_init("cpu-1795316400000-7.pb.gz");
    return 0;
}

static void
check_model(const cli_model_t *m)
{
    size_t  i, j;

    for (i = 0; i < m->nsamples; i++) {
        const cli_sample_t  *s = &m->samples[i];

        FUZZ_CHECK((size_t) s->stack_off + s->stack_len <= m->nstacks);
        FUZZ_CHECK(s->file >= 0 && (size_t) s->file < m->nfiles);
        for (j = 0; j < s->stack_len; j++) {
            int32_t  loc = m->stacks[s->stack_off + j];

            FUZZ_CHECK(loc >= 0 && (size_t) loc < m->nlocs);
        }
    }
    for (i = 0; i < m->nlocs; i++) {
        FUZZ_CHECK(m->locs[i].frame >= 0
                   && (size_t) m->locs[i].frame < m->strs.n);
        FUZZ_CHECK(m->locs[i].mapping < 0
                   || (size_t) m->locs[i].mapping < m->nmaps);
        FUZZ_CHECK(m->locs[i].func < 0
                   || (size_t) m->locs[i].func < m->nfuncs);
    }
}

static void
use_model(const cli_model_t *m)
{
    cli_model_t     m2;
    cli_tree_t      tree;
    cli_svg_opts_t  o;
    sp_buf_t        out;
    size_t         *sel, nsel;
    char            err[256];

    nsel = cli_model_select(m, -1, -1, &sel);
    cli_tree_init(&tree, (cli_strpool_t *) &m->strs);
    cli_tree_add_samples(&tree, m, sel, nsel, 0);
    cli_tree_add_samples(&tree, m, sel, nsel / 2, 1);
    cli_tree_finish(&tree);
    sp_buf_init(&out);
    cli_tree_folded(&tree, &out);
    sp_buf_reset(&out);
    memset(&o, 0, sizeof(o));
    o.title = "fuzz";
    o.width = 1200;
    o.diff = 1;
    cli_tree_svg(&tree, &o, &out);
    cli_tree_free(&tree);

    /* The filtered pprof must load again. */
    sp_buf_reset(&out);
    cli_model_write_pprof(m, sel, nsel, &out);
    fuzz_write_file(fuzz_file, out.data, out.len);
    cli_model_init(&m2);
    err[0] = '\0';
    if (cli_profile_load_file(&m2, fuzz_file, err, sizeof(err)) != 0) {
        __sanitizer_report_error_summary(err);
        fuzz_fail(__FILE__, __LINE__, "the written pprof loads again");
    }
    check_model(&m2);
    cli_model_free(&m2);
    sp_buf_free(&out);
    free(sel);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cli_model_t  m;
    sp_buf_t     gz;
    char         err[256];
    int          loaded = 0, k;

    if (size == 0) {
        return 0;
    }
    sp_buf_init(&gz);
    if ((data[0] & 1) == 0) {
        FUZZ_CHECK(sp_gzip_append(data + 1, size - 1, &gz) == 0);
        fuzz_write_file(fuzz_file, gz.data, gz.len);
    } else {
        fuzz_write_file(fuzz_file, data + 1, size - 1);
    }
    sp_buf_free(&gz);

    cli_model_init(&m);
    for (k = 0; k < 2; k++) {
        err[0] = '\0';
        if (cli_profile_load_file(&m, fuzz_file, err, sizeof(err)) != 0) {
            FUZZ_CHECK(err[0] != '\0');
            break;
        }
        loaded++;
        check_model(&m);
    }
    if (loaded > 0) {
        use_model(&m);
    }
    cli_model_free(&m);
    return 0;
}
