/* sp_b3_parse_single / sp_b3_parse_multi / sp_b3_format_single against the
 * openzipkin/b3-propagation specification. */

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "common/trace/b3.h"
#include "common/trace/ids.h"

#define T128  "80f198ee56343ba864fe8b2a57d3eff7"
#define T64   "a3ce929d0e0e4736"
#define SPAN  "e457b5a2e4d86bd1"
#define PAR   "05e3ac9a4f6e3b90"
#define ZERO16 "0000000000000000"

typedef struct {
    const char        *in;
    int                rc;
    int                has_ids;
    int                has_parent;
    sp_b3_sampling_t   sampling;
    const char        *trace;     /* expected 32-hex trace id, when ids */
    const char        *name;
} b3_case_t;

static const b3_case_t single[] = {
    /* valid */
    { T128 "-" SPAN "-1-" PAR, 0, 1, 1, SP_B3_ACCEPT, T128,
      "spec example: all four fields" },
    { T128 "-" SPAN "-1", 0, 1, 0, SP_B3_ACCEPT, T128, "no parent" },
    { T128 "-" SPAN, 0, 1, 0, SP_B3_DEFER, T128, "only ids: defer" },
    { T128 "-" SPAN "-d", 0, 1, 0, SP_B3_DEBUG, T128, "debug" },
    { T128 "-" SPAN "-0", 0, 1, 0, SP_B3_DENY, T128, "ids, deny" },
    { T128 "-" SPAN "-d-" PAR, 0, 1, 1, SP_B3_DEBUG, T128, "debug, parent" },
    { T64 "-" SPAN "-1", 0, 1, 0, SP_B3_ACCEPT, ZERO16 T64,
      "64-bit trace id, left-padded" },
    { "0", 0, 0, 0, SP_B3_DENY, NULL, "b3: 0 (deny, no ids)" },
    { "1", 0, 0, 0, SP_B3_ACCEPT, NULL, "b3: 1 (sampling only)" },
    { "d", 0, 0, 0, SP_B3_DEBUG, NULL, "b3: d (sampling only)" },

    /* invalid */
    { "", -1, 0, 0, 0, NULL, "empty" },
    { "2", -1, 0, 0, 0, NULL, "sampling 2" },
    { "D", -1, 0, 0, 0, NULL, "uppercase D" },
    { "true", -1, 0, 0, 0, NULL, "true in the single header" },
    { T128, -1, 0, 0, 0, NULL, "trace id alone" },
    { T128 "-" SPAN "-2", -1, 0, 0, 0, NULL, "sampling 2 after ids" },
    { T128 "-" SPAN "-", -1, 0, 0, 0, NULL, "empty sampling" },
    { T128 "-" SPAN "-1-", -1, 0, 0, 0, NULL, "empty parent" },
    { T128 "-" SPAN "-1-" PAR "-x", -1, 0, 0, 0, NULL, "five fields" },
    { T128 "-" SPAN "-1-" ZERO16, -1, 0, 0, 0, NULL, "zero parent" },
    { "80F198EE56343BA864FE8B2A57D3EFF7-" SPAN, -1, 0, 0, 0, NULL,
      "uppercase trace id" },
    { T128 "-E457B5A2E4D86BD1", -1, 0, 0, 0, NULL, "uppercase span id" },
    { "0" T128 "-" SPAN, -1, 0, 0, 0, NULL, "33-char trace id" },
    { "a3ce929d0e0e473-" SPAN, -1, 0, 0, 0, NULL, "15-char trace id" },
    { "a3ce929d0e0e47360-" SPAN, -1, 0, 0, 0, NULL, "17-char trace id" },
    { T128 "-e457b5a2e4d86bd", -1, 0, 0, 0, NULL, "15-char span id" },
    { T128 "-" SPAN "0", -1, 0, 0, 0, NULL, "17-char span id" },
    { "00000000000000000000000000000000-" SPAN, -1, 0, 0, 0, NULL,
      "zero 128-bit trace id" },
    { ZERO16 "-" SPAN, -1, 0, 0, 0, NULL, "zero 64-bit trace id" },
    { T128 "-" ZERO16, -1, 0, 0, 0, NULL, "zero span id" },
    { T128 "-g457b5a2e4d86bd1", -1, 0, 0, 0, NULL, "non-hex span id" },
    { "-" SPAN, -1, 0, 0, 0, NULL, "empty trace id" },
    { "-", -1, 0, 0, 0, NULL, "a lone '-'" },
    { "---", -1, 0, 0, 0, NULL, "only separators" },
};


static void
check(const char *what, const b3_case_t *c, int rc, const sp_b3_t *b3)
{
    char  hex[2 * SP_TRACE_ID_LEN + 1];

    is_int(rc, c->rc, "%s %s: %s", what, c->rc == 0 ? "valid" : "invalid",
           c->name);
    if (rc != 0 || c->rc != 0) {
        return;
    }
    ok(b3->has_ids == (unsigned) c->has_ids
       && b3->has_parent == (unsigned) c->has_parent
       && b3->sampling == c->sampling,
       "%s %s: ids %d parent %d sampling %d", what, c->name, b3->has_ids,
       b3->has_parent, b3->sampling);
    if (c->trace != NULL) {
        sp_hex_encode(hex, b3->trace_id, SP_TRACE_ID_LEN);
        hex[2 * SP_TRACE_ID_LEN] = '\0';
        is_str(hex, c->trace, "%s %s: trace id", what, c->name);
    }
}


static void
test_single(void)
{
    size_t    i;
    int       rc;
    sp_b3_t   b3;
    char      hex[2 * SP_SPAN_ID_LEN + 1];

    for (i = 0; i < sizeof(single) / sizeof(single[0]); i++) {
        memset(&b3, 0xa5, sizeof(b3));
        rc = sp_b3_parse_single(single[i].in, strlen(single[i].in), &b3);
        check("single", &single[i], rc, &b3);
        if (rc != 0 && single[i].rc != 0) {
            ok(b3.trace_id[0] == 0xa5 && b3.span_id[7] == 0xa5,
               "single %s: out untouched", single[i].name);
        }
    }

    rc = sp_b3_parse_single(T128 "-" SPAN "-1-" PAR,
                            strlen(T128 "-" SPAN "-1-" PAR), &b3);
    sp_hex_encode(hex, b3.span_id, SP_SPAN_ID_LEN);
    hex[16] = '\0';
    is_str(hex, SPAN, "span id bytes");
    sp_hex_encode(hex, b3.parent_id, SP_SPAN_ID_LEN);
    is_str(hex, PAR, "parent span id bytes");
    ok(sp_b3_sampled(&b3), "accept is sampled");

    /* len is honoured: "0" from "0garbage" */
    is_int(sp_b3_parse_single("0garbage", 1, &b3), 0, "only len bytes read");
    is_int(sp_b3_parse_single(NULL, 0, &b3), -1, "NULL");
}


typedef struct {
    const char        *trace, *span, *parent, *sampled, *flags;
    int                rc;
    int                has_parent;
    sp_b3_sampling_t   sampling;
    const char        *want_trace;
    const char        *name;
} b3_multi_t;

#define L(s)  (s), ((s) ? strlen(s) : 0)

static const b3_multi_t multi[] = {
    { T128, SPAN, PAR, "1", NULL, 0, 1, SP_B3_ACCEPT, T128,
      "all headers, sampled" },
    { T128, SPAN, NULL, "0", NULL, 0, 0, SP_B3_DENY, T128, "not sampled" },
    { T128, SPAN, NULL, NULL, NULL, 0, 0, SP_B3_DEFER, T128, "defer" },
    { T128, SPAN, NULL, NULL, "1", 0, 0, SP_B3_DEBUG, T128, "X-B3-Flags: 1" },
    { T128, SPAN, NULL, "0", "1", 0, 0, SP_B3_DEBUG, T128,
      "debug wins over Sampled: 0" },
    { T128, SPAN, NULL, "1", "0", 0, 0, SP_B3_ACCEPT, T128,
      "Flags other than 1 ignored" },
    { T128, SPAN, NULL, "true", NULL, 0, 0, SP_B3_ACCEPT, T128,
      "Sampled: true (older tracers)" },
    { T128, SPAN, NULL, "false", NULL, 0, 0, SP_B3_DENY, T128,
      "Sampled: false" },
    { T64, SPAN, NULL, "1", NULL, 0, 0, SP_B3_ACCEPT, ZERO16 T64,
      "64-bit trace id, left-padded" },

    { NULL, SPAN, NULL, "1", NULL, -1, 0, 0, NULL, "no trace id" },
    { T128, NULL, NULL, "1", NULL, -1, 0, 0, NULL, "no span id" },
    { NULL, NULL, NULL, "0", NULL, -1, 0, 0, NULL, "only Sampled: 0" },
    { T128, SPAN, NULL, "2", NULL, -1, 0, 0, NULL, "Sampled: 2" },
    { T128, SPAN, NULL, "d", NULL, -1, 0, 0, NULL, "Sampled: d" },
    { T128, SPAN, "xyz", "1", NULL, -1, 0, 0, NULL, "bad parent" },
    { T128, SPAN, ZERO16, "1", NULL, -1, 0, 0, NULL, "zero parent" },
    { "a3ce929d0e0e47", SPAN, NULL, NULL, NULL, -1, 0, 0, NULL,
      "14-char trace id" },
    { T128, "e457b5a2e4d86bd1e", NULL, NULL, NULL, -1, 0, 0, NULL,
      "17-char span id" },
    { T128 " ", SPAN, NULL, NULL, NULL, -1, 0, 0, NULL, "space in trace id" },
};


static void
test_multi(void)
{
    size_t             i;
    int                rc;
    sp_b3_t            b3;
    b3_case_t          c;
    const b3_multi_t  *m;

    for (i = 0; i < sizeof(multi) / sizeof(multi[0]); i++) {
        m = &multi[i];
        memset(&b3, 0xa5, sizeof(b3));
        rc = sp_b3_parse_multi(L(m->trace), L(m->span), L(m->parent),
                               L(m->sampled), L(m->flags), &b3);
        c.in = NULL;
        c.rc = m->rc;
        c.has_ids = 1;
        c.has_parent = m->has_parent;
        c.sampling = m->sampling;
        c.trace = m->want_trace;
        c.name = m->name;
        check("multi", &c, rc, &b3);
    }
}


static void
test_format(void)
{
    char      out[SP_B3_SINGLE_LEN + 1];
    uint8_t   trace[SP_TRACE_ID_LEN], span[SP_SPAN_ID_LEN];
    sp_b3_t   b3;
    size_t    n;
    int       i, good;

    sp_hex_decode(trace, T128, SP_TRACE_ID_LEN);
    sp_hex_decode(span, SPAN, SP_SPAN_ID_LEN);
    memset(out, 0, sizeof(out));
    n = sp_b3_format_single(out, trace, span, 1);
    is_int(n, SP_B3_SINGLE_LEN, "format length");
    is_str(out, T128 "-" SPAN "-1", "format sampled");
    sp_b3_format_single(out, trace, span, 0);
    is_str(out, T128 "-" SPAN "-0", "format not sampled");

    good = 1;
    for (i = 0; i < 200; i++) {
        sp_trace_id_generate(trace);
        sp_span_id_generate(span);
        n = sp_b3_format_single(out, trace, span, i & 1);
        if (sp_b3_parse_single(out, n, &b3) != 0 || !b3.has_ids
            || sp_b3_sampled(&b3) != (i & 1)
            || memcmp(b3.trace_id, trace, SP_TRACE_ID_LEN) != 0
            || memcmp(b3.span_id, span, SP_SPAN_ID_LEN) != 0)
        {
            good = 0;
            printf("# round trip failed for %.51s\n", out);
            break;
        }
    }
    ok(good, "format -> parse round trip of 200 random ids");
}


int
main(void)
{
    test_single();
    test_multi();
    test_format();

    return done_testing();
}
