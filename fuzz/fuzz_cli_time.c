/* The CLI's --since/--until/--range values (cli_parse_time,
 * cli_parse_range): command-line text. The input is "<arg>", and a range
 * is tried on the same text. Properties: an error comes with a message; a
 * parsed range is ordered (A < B, as the header promises). */

#include <stdint.h>
#include <stdlib.h>

#include "cli/spanprof.h"
#include "fuzz/fuzz.h"

#define NOW_NS  INT64_C(1795316400000000000)   /* 2026-11-22T03:00:00Z */

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char        *s = fuzz_cstr(data, size), buf[64];
    const char  *err = NULL;
    int64_t      t, from, to;

    if (cli_parse_time(s, NOW_NS, &t, &err) != 0) {
        FUZZ_CHECK(err != NULL);
    } else {
        cli_format_time(t, buf, sizeof(buf));
        cli_format_clock(t, buf, sizeof(buf));
    }
    err = NULL;
    if (cli_parse_range(s, NOW_NS, &from, &to, &err) != 0) {
        FUZZ_CHECK(err != NULL);
    } else {
        FUZZ_CHECK(from < to);
        if (!__builtin_sub_overflow(to, from, &t)) {
            cli_format_ms(t, buf, sizeof(buf));
        }
    }
    free(s);
    return 0;
}
