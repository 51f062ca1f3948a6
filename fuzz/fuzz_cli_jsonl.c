/* The CLI's traces.jsonl reader (cli_spans_load): one OTLP/JSON export per
 * line, from the file exporter or anything else that wrote the file. Bad
 * lines are skipped with a warning (stderr is closed by `make fuzz`).
 * Properties: every line is counted as kept or bad, never both; kept spans
 * have hex ids of the right length and a name. */

#include <stdint.h>
#include <string.h>

#include "cli/spanprof.h"
#include "fuzz/fuzz.h"
#include "fuzz/fuzz_tmpdir.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_tmpdir_init("traces.jsonl");
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cli_spans_t  s;
    size_t       i;

    fuzz_write_file(fuzz_file, data, size);
    cli_spans_load(&s, fuzz_dir);
    FUZZ_CHECK(s.found && s.bad_lines <= s.lines);
    for (i = 0; i < s.n; i++) {
        FUZZ_CHECK(strlen(s.spans[i].trace_id) == 32
                   && cli_is_hex(s.spans[i].trace_id, 32));
        FUZZ_CHECK(strlen(s.spans[i].span_id) == 16
                   && cli_is_hex(s.spans[i].span_id, 16));
        FUZZ_CHECK(s.spans[i].parent_id[0] == '\0'
                   || cli_is_hex(s.spans[i].parent_id, 16));
        FUZZ_CHECK(s.spans[i].name != NULL);
        (void) cli_span_kind_name(s.spans[i].kind);
    }
    cli_spans_free(&s);
    return 0;
}
