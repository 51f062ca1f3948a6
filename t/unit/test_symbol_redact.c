/* otel_profiling_redact: which names match, and that neither encoder
 * writes a matching name once the profile went through the redaction. */

#define _GNU_SOURCE
#include <string.h>

#include "tap.h"
#include "common/base/arena.h"
#include "common/base/buf.h"
#include "common/export/otlp_profiles.h"
#include "common/export/pprof.h"
#include "common/profile/symbol_redact.h"
#include "common/trace/resource.h"


static void
test_match(void)
{
    static const char *const  pats[] = { "password", "", "Secret", "tok",
                                         NULL };
    static const char *const  none[] = { "", NULL };
    sp_symbol_redact_t       *r;
    sp_symbol_redact_stats_t  st;
    const char               *err = "unset";

    r = sp_symbol_redact_new(NULL, &err);
    ok(r == NULL && err == NULL, "no patterns: off, no error");
    r = sp_symbol_redact_new(none, &err);
    ok(r == NULL && err == NULL, "only empty patterns: off");
    ok(!sp_symbol_redact_match(NULL, "password"), "off matches nothing");
    sp_symbol_redact_get_stats(NULL, &st);
    ok(st.functions_redacted == 0, "off: zero stats");

    r = sp_symbol_redact_new(pats, &err);
    ok(r != NULL && err == NULL, "three patterns");
    ok(sp_symbol_redact_match(r, "check_password"), "a suffix");
    ok(sp_symbol_redact_match(r, "PASSWORD_hash"), "a prefix, upper case");
    ok(sp_symbol_redact_match(r, "ns::SeCrEtStore::load"), "mixed case");
    ok(sp_symbol_redact_match(r, "_ZN5vault6secretEv"), "inside a mangled "
       "name");
    ok(sp_symbol_redact_match(r, "tok"), "the whole name");
    ok(sp_symbol_redact_match(r, "xtokx"), "the middle");
    ok(!sp_symbol_redact_match(r, "to"), "shorter than the pattern");
    ok(!sp_symbol_redact_match(r, "passwor_d"), "not a substring");
    ok(!sp_symbol_redact_match(r, "main"), "main");
    ok(!sp_symbol_redact_match(r, ""), "an empty name");
    ok(!sp_symbol_redact_match(r, NULL), "no name");
    {
        char  long_name[800];

        /* Past the stack copy: the byte-by-byte search. */
        memset(long_name, 'x', sizeof(long_name));
        memcpy(long_name + 700, "SeCrEt", 6);
        long_name[sizeof(long_name) - 1] = '\0';
        ok(sp_symbol_redact_match(r, long_name), "a 799-byte name");
        long_name[703] = 'x';
        ok(!sp_symbol_redact_match(r, long_name), "... without the pattern");
        memcpy(long_name + 790, "tok", 3);
        ok(sp_symbol_redact_match(r, long_name), "... with one near its end");
    }
    sp_symbol_redact_free(r);
}


static int
has(const sp_buf_t *b, const char *s)
{
    return memmem(b->data, b->len, s, strlen(s)) != NULL;
}


static void
test_profile(void)
{
    static const char *const  pats[] = { "secret", "credential", NULL };
    static sp_profile_mapping_t   maps[] = {
        { "/usr/lib/libsecretstore.so", NULL, 0x1000, 0x2000, 0 },
    };
    static sp_profile_function_t  fns[] = {
        { "main", "/usr/lib/libsecretstore.so" },
        { "load_SECRET_key", "/usr/lib/libsecretstore.so" },
        { "check_credentials", "/usr/lib/libsecretstore.so" },
        { "serve", "/usr/lib/libsecretstore.so" },
    };
    static sp_profile_location_t  locs[] = {
        { 0x1100, 0, 1 }, { 0x1200, 0, 2 }, { 0x1300, 0, 3 },
        { 0x1400, 0, 0 },
    };
    static int32_t                stack[] = { 0, 2, 3,   1, 3 };
    static sp_profile_sample_t    samples[2];
    sp_profile_t                  p;
    sp_resource_t                 res;
    sp_symbol_redact_t           *r;
    sp_symbol_redact_stats_t      st;
    sp_arena_t                    a;
    sp_buf_t                      pprof, otlp;
    const char                   *err;
    size_t                        n;

    memset(&p, 0, sizeof(p));
    sp_resource_init(&res, "nginx", "svc", NULL);
    samples[0].stack_off = 0;
    samples[0].stack_len = 3;
    samples[0].count = 5;
    samples[1].stack_off = 3;
    samples[1].stack_len = 2;
    samples[1].count = 2;
    p.resource = &res;
    p.start_ns = 1700000000000000000ULL;
    p.end_ns = p.start_ns + 1000000000ULL;
    p.period_ns = 10000000;
    p.samples = samples;
    p.nsamples = 2;
    p.locs = stack;
    p.nlocs = 5;
    p.locations = locs;
    p.nlocations = 4;
    p.functions = fns;
    p.nfunctions = 4;
    p.mappings = maps;
    p.nmappings = 1;

    r = sp_symbol_redact_new(pats, &err);
    n = sp_symbol_redact_profile(r, &p);
    is_int(n, 2, "two functions redacted");
    is_str(fns[1].name, SP_SYMBOL_REDACTED, "load_SECRET_key is [REDACTED]");
    is_str(fns[2].name, SP_SYMBOL_REDACTED, "check_credentials too");
    is_str(fns[0].name, "main", "main stays");
    is_str(fns[3].name, "serve", "serve stays");
    is_str(fns[1].filename, "/usr/lib/libsecretstore.so",
           "the file name stays");
    n = sp_symbol_redact_profile(r, &p);
    is_int(n, 0, "redacted names do not match again");
    sp_symbol_redact_get_stats(r, &st);
    is_int(st.functions_redacted, 2, "the stats count them");

    sp_arena_init(&a, 64 * 1024);
    sp_buf_init(&pprof);
    sp_buf_init(&otlp);
    ok(sp_pprof_encode(&a, &p, 0, &pprof) == 0, "pprof encoded");
    ok(sp_otlp_profiles_encode(&a, &p, &otlp) == 0, "OTLP encoded");
    ok(has(&pprof, "[REDACTED]") && has(&otlp, "[REDACTED]"),
       "both carry [REDACTED]");
    ok(!has(&pprof, "load_SECRET_key") && !has(&pprof, "check_credentials"),
       "pprof: no redacted name");
    ok(!has(&otlp, "load_SECRET_key") && !has(&otlp, "check_credentials"),
       "OTLP: no redacted name");
    ok(has(&pprof, "serve") && has(&otlp, "serve"), "other names are there");

    sp_buf_free(&pprof);
    sp_buf_free(&otlp);
    sp_arena_free(&a);
    sp_resource_free(&res);
    sp_symbol_redact_free(r);
}


int
main(void)
{
    test_match();
    test_profile();

    return done_testing();
}
