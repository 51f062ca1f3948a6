/* sp_traceparent_parse / sp_traceparent_format against W3C Trace Context. */

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "common/trace/ids.h"
#include "common/trace/traceparent.h"

#define TRACE  "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"

static const uint8_t trace_bytes[SP_TRACE_ID_LEN] = {
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
    0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36
};
static const uint8_t parent_bytes[SP_SPAN_ID_LEN] = {
    0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7
};

typedef struct {
    const char  *in;
    int          rc;          /* expected return */
    int          version;     /* expected parsed fields when rc == 0 */
    int          flags;
    const char  *name;
} tp_case_t;

static const tp_case_t cases[] = {
    /* valid */
    { "00-" TRACE "-" PARENT "-01", 0, 0x00, 0x01, "v00 sampled (spec example)" },
    { "00-" TRACE "-" PARENT "-00", 0, 0x00, 0x00, "v00 not sampled" },
    { "00-" TRACE "-" PARENT "-03", 0, 0x00, 0x03, "v00 sampled + random" },
    { "00-" TRACE "-" PARENT "-ff", 0, 0x00, 0xff, "v00 unknown flag bits kept" },
    { "01-" TRACE "-" PARENT "-01", 0, 0x01, 0x01, "v01 exactly 55 chars" },
    { "01-" TRACE "-" PARENT "-01-whatever", 0, 0x01, 0x01,
      "v01 with -whatever suffix" },
    { "cc-" TRACE "-" PARENT "-00-", 0, 0xcc, 0x00, "vcc with bare '-' suffix" },
    { "fe-" TRACE "-" PARENT "-09-a-b-c", 0, 0xfe, 0x09, "vfe with suffix" },

    /* versions */
    { "ff-" TRACE "-" PARENT "-01", -1, 0, 0, "version ff" },
    { "ff-" TRACE "-" PARENT "-01-x", -1, 0, 0, "version ff with suffix" },
    { "0g-" TRACE "-" PARENT "-01", -1, 0, 0, "version 0g" },
    { "0A-" TRACE "-" PARENT "-01", -1, 0, 0, "uppercase version 0A" },
    { "01-" TRACE "-" PARENT "-01x", -1, 0, 0, "v01 extra data without '-'" },
    { "01-" TRACE "-" PARENT "-01_whatever", -1, 0, 0,
      "v01 extra data after '_'" },
    { "00-" TRACE "-" PARENT "-01-whatever", -1, 0, 0,
      "v00 with suffix" },
    { "01-" TRACE "-" PARENT "-01-x, 00-" TRACE "-" PARENT "-01", -1, 0, 0,
      "v01 and v00 joined with ', ' (two header lines)" },
    { "01-" TRACE "-" PARENT "-01-a,b", -1, 0, 0, "v01 suffix with ','" },

    /* uppercase hex in each field */
    { "00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01", -1, 0, 0,
      "uppercase trace-id" },
    { "00-4bf92f3577b34da6a3ce929d0e0e473A-" PARENT "-01", -1, 0, 0,
      "one uppercase char in trace-id" },
    { "00-" TRACE "-00F067AA0BA902B7-01", -1, 0, 0, "uppercase parent-id" },
    { "00-" TRACE "-" PARENT "-0A", -1, 0, 0, "uppercase flags" },

    /* lengths */
    { "00-" TRACE "-" PARENT "-0", -1, 0, 0, "54 chars" },
    { "00-" TRACE "-" PARENT "-011", -1, 0, 0, "56 chars" },
    /* Changed with the Level 2 text: OWS (SP, HTAB) before and after the
     * value is not part of it, so these are valid now (they were pinned
     * invalid before). Whitespace inside the value still is not. */
    { "00-" TRACE "-" PARENT "-01 ", 0, 0x00, 0x01, "OWS: trailing space" },
    { " 00-" TRACE "-" PARENT "-01", 0, 0x00, 0x01, "OWS: leading space" },
    { "\t 00-" TRACE "-" PARENT "-01 \t", 0, 0x00, 0x01,
      "OWS: spaces and tabs at both ends" },
    { "  01-" TRACE "-" PARENT "-01-x  ", 0, 0x01, 0x01,
      "OWS around a higher version with a suffix" },
    { "00 -" TRACE "-" PARENT "-01", -1, 0, 0, "space inside the value" },
    { "00-" TRACE "-" PARENT "-0 1", -1, 0, 0, "space inside the flags" },
    { "00-" TRACE "-" PARENT "-01\r", -1, 0, 0, "CR after the value" },
    { " \t ", -1, 0, 0, "only OWS" },
    { "00-4bf92f3577b34da6a3ce929d0e0e473-" PARENT "-01", -1, 0, 0,
      "short trace-id (31)" },
    { "00-4bf92f3577b34da6a3ce929d0e0e473-" PARENT "-01a", -1, 0, 0,
      "short trace-id padded to 55" },
    { "00-" TRACE "-00f067aa0ba902b7a-01", -1, 0, 0, "long parent-id (17)" },
    { "00-" TRACE "-00f067aa0ba902b7a-1", -1, 0, 0,
      "long parent-id at 55 chars" },
    { "", -1, 0, 0, "empty string" },
    { "00", -1, 0, 0, "version only" },

    /* zero ids */
    { "00-00000000000000000000000000000000-" PARENT "-01", -1, 0, 0,
      "all-zero trace-id" },
    { "00-" TRACE "-0000000000000000-01", -1, 0, 0, "all-zero parent-id" },
    { "01-00000000000000000000000000000000-" PARENT "-01-x", -1, 0, 0,
      "all-zero trace-id v01" },
    { "00-00000000000000000000000000000001-0000000000000001-00", 0, 0x00, 0x00,
      "minimal non-zero ids" },

    /* separators */
    { "00_" TRACE "-" PARENT "-01", -1, 0, 0, "'_' after version" },
    { "00-" TRACE "_" PARENT "-01", -1, 0, 0, "'_' after trace-id" },
    { "00-" TRACE "-" PARENT "_01", -1, 0, 0, "'_' after parent-id" },
    { "00" TRACE "-" PARENT "-01a", -1, 0, 0, "missing first separator" },
    { "00-" TRACE PARENT "-01a", -1, 0, 0, "missing second separator" },
    { "00-" TRACE "-" PARENT "01a", -1, 0, 0, "missing third separator" },
    { "00-" TRACE "-" PARENT "-" "0-", -1, 0, 0, "separator inside flags" },

    /* non-hex */
    { "00-4bf92f3577b34da6a3ce929d0e0e473g-" PARENT "-01", -1, 0, 0,
      "'g' in trace-id" },
    { "00-" TRACE "-00f067aa0ba9 2b7-01", -1, 0, 0, "space in parent-id" },
    { "00-" TRACE "-" PARENT "-0x", -1, 0, 0, "'x' in flags" },
    { "00-" TRACE "-" PARENT "-\0" "1", -1, 0, 0, "NUL in flags" },
};


static void
test_table(void)
{
    size_t            i, len;
    int               rc;
    sp_traceparent_t  tp;
    const tp_case_t  *c;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c = &cases[i];
        len = strlen(c->in);

        /* "NUL in flags" must be seen as 55 bytes, not cut by strlen. */
        if (strcmp(c->name, "NUL in flags") == 0) {
            len = SP_TRACEPARENT_LEN;
        }

        memset(&tp, 0xa5, sizeof(tp));
        rc = sp_traceparent_parse(c->in, len, &tp);
        is_int(rc, c->rc, "%s: %s", c->rc == 0 ? "valid" : "invalid", c->name);

        if (c->rc == 0 && rc == 0) {
            ok(tp.version == c->version && tp.flags == c->flags,
               "%s: version %02x flags %02x", c->name, tp.version, tp.flags);

        } else if (c->rc != 0 && rc != 0) {
            ok(tp.version == 0xa5 && tp.flags == 0xa5
               && tp.trace_id[0] == 0xa5 && tp.parent_id[7] == 0xa5,
               "%s: out untouched", c->name);
        }
    }
}


static void
test_fields(void)
{
    sp_traceparent_t  tp;
    const char       *s = "01-" TRACE "-" PARENT "-01-whatever";

    memset(&tp, 0, sizeof(tp));
    is_int(sp_traceparent_parse(s, strlen(s), &tp), 0, "parse v01 with suffix");
    ok(memcmp(tp.trace_id, trace_bytes, SP_TRACE_ID_LEN) == 0,
       "trace-id bytes");
    ok(memcmp(tp.parent_id, parent_bytes, SP_SPAN_ID_LEN) == 0,
       "parent-id bytes");
    is_int(tp.version, 1, "version 1");
    is_int(tp.flags, SP_TRACE_FLAG_SAMPLED, "sampled flag");

    /* len is honoured: the 55-char prefix of a longer buffer is valid. */
    s = "00-" TRACE "-" PARENT "-01garbage";
    is_int(sp_traceparent_parse(s, SP_TRACEPARENT_LEN, &tp), 0,
           "only len bytes are read");
    is_int(sp_traceparent_parse(s, strlen(s), &tp), -1,
           "the same buffer with its garbage is invalid");

    is_int(sp_traceparent_parse(NULL, 0, &tp), -1, "NULL is invalid");
}


static void
test_format(void)
{
    char              out[SP_TRACEPARENT_LEN + 1];
    uint8_t           trace[SP_TRACE_ID_LEN], span[SP_SPAN_ID_LEN];
    sp_traceparent_t  tp;
    size_t            n;
    int               i, good;

    memset(out, 0, sizeof(out));
    n = sp_traceparent_format(out, trace_bytes, parent_bytes, 0x01);
    is_int(n, SP_TRACEPARENT_LEN, "format returns 55");
    is_str(out, "00-" TRACE "-" PARENT "-01", "format of the spec example");

    memset(out, 0, sizeof(out));
    sp_traceparent_format(out, trace_bytes, parent_bytes, 0xab);
    is_str(out, "00-" TRACE "-" PARENT "-ab", "flags as lowercase hex");

    good = 1;
    for (i = 0; i < 200; i++) {
        sp_trace_id_generate(trace);
        sp_span_id_generate(span);
        n = sp_traceparent_format(out, trace, span, (uint8_t) i);

        memset(&tp, 0, sizeof(tp));
        if (sp_traceparent_parse(out, n, &tp) != 0
            || tp.version != 0 || tp.flags != (uint8_t) i
            || memcmp(tp.trace_id, trace, SP_TRACE_ID_LEN) != 0
            || memcmp(tp.parent_id, span, SP_SPAN_ID_LEN) != 0)
        {
            good = 0;
            printf("# round trip failed for %.55s\n", out);
            break;
        }
    }
    ok(good, "format -> parse round trip of 200 random ids");
}


int
main(void)
{
    test_table();
    test_fields();
    test_format();

    return done_testing();
}
