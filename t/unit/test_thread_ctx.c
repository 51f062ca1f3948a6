/* A thread context record's fill: the ids, flags and the span name as
 * OTEP 4947's one attribute, for every name length (the name's copy takes
 * a different path at 8, 16 and 32 bytes), cut to fit the record; and a
 * refill of a shorter name leaves no byte of the longer one counted. */

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "common/profile/thread_ctx.h"

int
main(void)
{
    static const uint8_t    tid[SP_TRACE_ID_LEN] = { 1, 2, 3 };
    static const uint8_t    sid[SP_SPAN_ID_LEN] = { 9, 8, 7 };
    char                    src[128];
    const char             *name;
    size_t                  n, len, want, bad = 0;
    sp_thread_ctx_record_t  rec;

    for (n = 0; n < sizeof(src); n++) {
        src[n] = (char) ('!' + n % 90);
    }

    for (n = 0; n <= 100; n++) {
        memset(&rec, 0xee, sizeof(rec));
        sp_thread_ctx_record_init(&rec, tid, sid, 1, src, n);
        want = n > SP_THREAD_CTX_ATTRS_MAX - 2 ? SP_THREAD_CTX_ATTRS_MAX - 2
                                                : n;
        len = sp_thread_ctx_record_span_name(rec.attrs_data,
                                             rec.attrs_data_size, &name);
        if (rec.valid != 1 || rec.trace_flags != 1
            || memcmp(rec.trace_id, tid, sizeof(tid)) != 0
            || memcmp(rec.span_id, sid, sizeof(sid)) != 0
            || len != want || (n > 0 && memcmp(name, src, want) != 0)
            || rec.attrs_data_size != (n > 0 ? want + 2 : 0)
            /* nothing written past the name */
            || (want + 2 < SP_THREAD_CTX_ATTRS_MAX
                && rec.attrs_data[want + 2] != 0xee))
        {
            printf("# name of %zu bytes: got %zu\n", n, len);
            bad++;
        }
    }
    is_int(bad, 0, "names of 0 to 100 bytes: ids, flags, the name (cut "
           "at %d), nothing past it", SP_THREAD_CTX_ATTRS_MAX - 2);

    sp_thread_ctx_record_init(&rec, tid, sid, 1, "GET /a/longer/route", 19);
    sp_thread_ctx_record_init(&rec, tid, sid, 0, "GET", 3);
    len = sp_thread_ctx_record_span_name(rec.attrs_data, rec.attrs_data_size,
                                         &name);
    ok(len == 3 && memcmp(name, "GET", 3) == 0 && rec.trace_flags == 0,
       "refilled with a shorter name: that name, the new flags");

    return done_testing();
}
