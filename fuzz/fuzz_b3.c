/* b3: the Zipkin B3 headers (otel_propagation b3 / b3multi).
 * An input without '\n' is a `b3` header value; with '\n', its lines are
 * X-B3-TraceId, -SpanId, -ParentSpanId, -Sampled, -Flags (an absent line is
 * an absent header, an empty one an empty value).
 * Properties: a valid value with ids has non-zero ids, a 64-bit trace id
 * lands in the low half; its ids format back to a `b3` value that parses to
 * the same ids and sampling decision. */

#include <stdint.h>
#include <string.h>

#include "common/trace/b3.h"
#include "fuzz/fuzz.h"

static void
check_valid(const sp_b3_t *b3)
{
    char     out[SP_B3_SINGLE_LEN];
    sp_b3_t  again;

    if (!b3->has_ids) {
        FUZZ_CHECK(!b3->has_parent);
        return;
    }
    FUZZ_CHECK(!sp_id_is_zero(b3->trace_id, SP_TRACE_ID_LEN));
    FUZZ_CHECK(!sp_id_is_zero(b3->span_id, SP_SPAN_ID_LEN));
    FUZZ_CHECK(!b3->has_parent
               || !sp_id_is_zero(b3->parent_id, SP_SPAN_ID_LEN));

    FUZZ_CHECK(sp_b3_format_single(out, b3->trace_id, b3->span_id,
                                   sp_b3_sampled(b3))
               == SP_B3_SINGLE_LEN);
    FUZZ_CHECK(sp_b3_parse_single(out, sizeof(out), &again) == 0);
    FUZZ_CHECK(again.has_ids && !again.has_parent
               && sp_b3_sampled(&again) == sp_b3_sampled(b3)
               && memcmp(again.trace_id, b3->trace_id, SP_TRACE_ID_LEN) == 0
               && memcmp(again.span_id, b3->span_id, SP_SPAN_ID_LEN) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char  *s = (const char *) data, *f[5], *nl;
    size_t       len[5], i, pos;
    sp_b3_t      b3;

    if (memchr(s, '\n', size) == NULL) {
        if (sp_b3_parse_single(s, size, &b3) == 0) {
            /* ids: 16/32 + 1 + 16 [+ 2 [+ 17]]; sampling alone: 1 */
            FUZZ_CHECK(b3.has_ids ? size >= 33 && size <= 68 : size == 1);
            check_valid(&b3);
        }
        return 0;
    }

    pos = 0;
    for (i = 0; i < 5; i++) {
        if (pos > size) {
            f[i] = NULL;
            len[i] = 0;
            continue;
        }
        nl = memchr(s + pos, '\n', size - pos);
        f[i] = s + pos;
        len[i] = nl ? (size_t) (nl - (s + pos)) : size - pos;
        pos += len[i] + 1;
    }

    if (sp_b3_parse_multi(f[0], len[0], f[1], len[1], f[2], len[2],
                          f[3], len[3], f[4], len[4], &b3) == 0)
    {
        FUZZ_CHECK(b3.has_ids);
        FUZZ_CHECK(len[0] == 16 || len[0] == 32);
        if (len[0] == 16) {
            FUZZ_CHECK(sp_id_is_zero(b3.trace_id, SP_TRACE_ID_LEN / 2));
        }
        check_valid(&b3);
    }
    return 0;
}
