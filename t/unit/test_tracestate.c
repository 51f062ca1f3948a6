/* sp_tracestate_validate against the W3C Trace Context Level 2 ABNF. */

#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "common/trace/tracestate.h"

typedef struct {
    const char  *in;
    size_t       len;       /* 0: strlen(in) */
    int          rc;
    const char  *name;
} ts_case_t;

static const ts_case_t cases[] = {
    /* valid: the specification's own examples */
    { "", 0, 0, "empty string (vendors MUST accept empty tracestate)" },
    { "rojo=00f067aa0ba902b7", 0, 0, "spec example: single tracing system" },
    { "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", 0, 0,
      "spec example: multiple tracing systems" },
    { "vendorname1=opaqueValue1,vendorname2=opaqueValue2", 0, 0,
      "spec example: a list with two list-members" },
    { "congo=congosSecondPosition,rojo=rojosFirstPosition", 0, 0,
      "spec example: the rewritten congo entry" },

    /* valid: Level 2 key grammar, key = ( lcalpha / DIGIT ) 0*255 keychar */
    { "1a=1", 0, 0, "key may begin with a digit" },
    { "0=1", 0, 0, "key of one digit" },
    { "a_-*/9@=1", 0, 0, "every keychar, '@' included" },
    { "tenant@sys=v", 0, 0, "a tenant@system key is just a key" },
    { "tenant@1sys=1", 0, 0, "'@' followed by a digit (no system-id rule)" },
    { "tenant@=1", 0, 0, "key ending in '@'" },
    { "a@b@c=1", 0, 0, "two '@'" },
    { "a@b/c*d_e-f=1", 0, 0, "'@' anywhere" },

    /* valid: OWS "surrounding list-members is ignored", empty members */
    { "a=1 , b=2", 0, 0, "spaces around ','" },
    { "a=1\t,\tb=2", 0, 0, "tabs around ','" },
    { "a=1 \t , \t b=2", 0, 0, "mixed OWS around ','" },
    { " a=1", 0, 0, "OWS before the first member" },
    { "a=1 ", 0, 0, "OWS after the last member (trailing spaces are OWS)" },
    { "a=1\t", 0, 0, "tab after the last member" },
    { "\t a=1 \t", 0, 0, "OWS at both ends" },
    { ",,a=1,,", 0, 0, "empty members" },
    { " , a=1 , ", 0, 0, "whitespace-only members at both ends" },
    { "   ", 0, 0, "only OWS" },
    { ",,,", 0, 0, "only commas" },
    { "a=b c", 0, 0, "space inside a value" },
    { "a= b", 0, 0, "leading space in a value (part of it)" },
    { "a=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~", 0, 0, "punctuation in a value" },

    /* valid: duplicate keys are propagated, not a reason to drop all */
    { "a=1,a=2", 0, 0, "duplicate keys" },
    { "congo=congosFirstPosition,rojo=rojosFirstPosition,"
      "congo=congosSecondPosition", 0, 0,
      "spec's counter-example with a duplicate key still propagates" },

    /* invalid */
    { "A=1", 0, -1, "uppercase key" },
    { "aB=1", 0, -1, "uppercase inside key" },
    { "_a=1", 0, -1, "key starting with '_'" },
    { "@sys=1", 0, -1, "key starting with '@'" },
    { "-a=1", 0, -1, "key starting with '-'" },
    { "tenant@Sys=1", 0, -1, "uppercase after '@'" },
    { "a.b=1", 0, -1, "'.' in key" },
    { "a=x=", 0, -1, "value with '='" },
    { "a=b=c", 0, -1, "value with '=' inside" },
    { "a=b,c", 0, -1, "value with ',' (leaves member 'c' without '=')" },
    { "a =1", 0, -1, "space before '='" },
    { "a=1\r", 0, -1, "CR" },
    { "a=1\r\n", 0, -1, "CRLF" },
    { "a=1\nb=2", 0, -1, "LF" },
    { "a=1,\nb=2", 0, -1, "LF as whitespace" },
    { "a=b\tc", 0, -1, "tab inside a value" },
    { "a=b\x7f", 0, -1, "DEL in a value" },
    { "a\x7f=b", 0, -1, "DEL in a key" },
    { "a=b\x80", 0, -1, "byte 0x80" },
    { "a=\xc3\xa9", 0, -1, "UTF-8 in a value" },
    { "a=b\x01", 0, -1, "control char 0x01" },
    { "a=b\0c", 5, -1, "NUL inside" },
    { "key", 0, -1, "key without '='" },
    { "a=1,key", 0, -1, "second member without '='" },
    { "=value", 0, -1, "value without key" },
    { "a=", 0, -1, "empty value" },
    { "a=,b=1", 0, -1, "empty value before ','" },
    { "a= ", 0, -1, "value of one space (trimmed: empty)" },
    { "a=1;b=2", 0, -1, "';' is part of a value, then '=' in it" },
};


static void
test_table(void)
{
    size_t            i, len;
    const ts_case_t  *c;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c = &cases[i];
        len = c->len ? c->len : strlen(c->in);
        is_int(sp_tracestate_validate(c->in, len), c->rc, "%s: %s",
               c->rc == 0 ? "valid" : "invalid", c->name);
    }
}


static void
fill(char *buf, size_t n, char c)
{
    memset(buf, c, n);
    buf[n] = '\0';
}


static void
test_limits(void)
{
    char    s[1024], key[300], val[300];
    size_t  i, n;

    /* 32 members valid, 33 invalid. */
    n = 0;
    for (i = 0; i < 32; i++) {
        n += sprintf(s + n, "%sk%zu=v", i ? "," : "", i);
    }
    is_int(sp_tracestate_validate(s, n), 0, "32 members");
    n += sprintf(s + n, ",k32=v");
    is_int(sp_tracestate_validate(s, n), -1, "33 members");

    /* Empty members do not count. */
    n = 0;
    for (i = 0; i < 32; i++) {
        n += sprintf(s + n, "k%zu=v,,", i);
    }
    is_int(sp_tracestate_validate(s, n), 0, "32 members plus empty ones");

    /* 512 characters valid, 513 invalid: "a=" + 254 'x' + ",b=" + 253 'y' */
    fill(val, 254, 'x');
    fill(key, 253, 'y');
    n = sprintf(s, "a=%s,b=%s", val, key);
    is_int(n, 512, "built a 512-char header");
    is_int(sp_tracestate_validate(s, n), 0, "512 chars");
    n = sprintf(s, "a=%s,b=%sy", val, key);
    is_int(sp_tracestate_validate(s, n), -1, "513 chars");
    n = sprintf(s, "a=%s, ,,b=%s", val, key);
    is_int(sp_tracestate_validate(s, n), -1, "513 chars of which 3 are OWS");

    /* Key lengths: 1 + 255 = 256 chars, '@' anywhere (no tenant/system
     * limits of 241 and 14 any more: the Level 1 limits were pinned here
     * before the Level 2 grammar dropped them). */
    fill(key, 256, 'k');
    n = sprintf(s, "%s=v", key);
    is_int(sp_tracestate_validate(s, n), 0, "key of 256");
    fill(key, 257, 'k');
    n = sprintf(s, "%s=v", key);
    is_int(sp_tracestate_validate(s, n), -1, "key of 257");
    fill(key, 250, 't');
    n = sprintf(s, "%s@sssss=v", key);
    is_int(sp_tracestate_validate(s, n), 0,
           "key of 256 with '@' after 250 chars (tenant > 241)");
    n = sprintf(s, "t@ssssssssssssssssssss=v");
    is_int(sp_tracestate_validate(s, n), 0, "20 chars after '@' (> 14)");
    fill(key, 250, 't');
    n = sprintf(s, "%s@ssssss=v", key);
    is_int(sp_tracestate_validate(s, n), -1, "key of 257 with '@'");

    /* Value lengths: 256 valid, 257 invalid. */
    fill(val, 256, 'v');
    n = sprintf(s, "a=%s", val);
    is_int(sp_tracestate_validate(s, n), 0, "value of 256");
    fill(val, 257, 'v');
    n = sprintf(s, "a=%s", val);
    is_int(sp_tracestate_validate(s, n), -1, "value of 257");

    /* 32 members, duplicates among them: valid; 33 with a duplicate: not. */
    n = 0;
    for (i = 0; i < 32; i++) {
        n += sprintf(s + n, "%sk%zu=v", i ? "," : "", i % 4);
    }
    is_int(sp_tracestate_validate(s, n), 0, "32 members with duplicate keys");
    n += sprintf(s + n, ",k0=v");
    is_int(sp_tracestate_validate(s, n), -1, "33 members with duplicates");

    /* Only len bytes are read. */
    is_int(sp_tracestate_validate("a=1,B=2", 3), 0, "len honoured");
    is_int(sp_tracestate_validate("a=1,B=2", 7), -1, "whole buffer invalid");
}


typedef struct {
    const char  *in;
    const char  *out;       /* NULL: invalid */
    const char  *name;
} ts_norm_t;

static const ts_norm_t norms[] = {
    { "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
      "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "spec example unchanged" },
    { " a=1 ,\t, b=2\t", "a=1,b=2", "OWS and empty members dropped" },
    { ",,,", "", "only empty members: nothing to send" },
    { "a= x y  ,b=2", "a= x y,b=2",
      "a value's leading space kept, trailing spaces dropped" },
    { "a=1,a=2", "a=1,a=2", "duplicates forwarded as received" },
    { "a=1,B=2", NULL, "invalid" },
};


static void
test_normalize(void)
{
    char              buf[SP_TRACESTATE_MAX_LEN + 1];
    size_t            i;
    int               n;
    const ts_norm_t  *c;

    for (i = 0; i < sizeof(norms) / sizeof(norms[0]); i++) {
        c = &norms[i];
        memset(buf, 0, sizeof(buf));
        n = sp_tracestate_normalize(c->in, strlen(c->in), buf);
        if (c->out == NULL) {
            is_int(n, -1, "normalize: %s", c->name);
            continue;
        }
        ok(n >= 0, "normalize: %s: valid", c->name);
        buf[n < 0 ? 0 : n] = '\0';
        is_str(buf, c->out, "normalize: %s", c->name);
    }

    /* In place, as the glue calls it. */
    strcpy(buf, " a=1 , ,b=2 ");
    n = sp_tracestate_normalize(buf, strlen(buf), buf);
    buf[n < 0 ? 0 : n] = '\0';
    is_str(buf, "a=1,b=2", "normalize in place");
}


int
main(void)
{
    test_table();
    test_limits();
    test_normalize();

    return done_testing();
}
