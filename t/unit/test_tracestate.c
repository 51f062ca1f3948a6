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
    /* valid */
    { "", 0, 0, "empty string" },
    { "rojo=00f067aa0ba902b7", 0, 0, "simple key" },
    { "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", 0, 0, "two members" },
    { "tenant@sys=v", 0, 0, "multi-tenant key" },
    { "1tenant@sys=v", 0, 0, "tenant-id may start with a digit" },
    { "a_-*/9=1,t_-*/9@s_-*/9=2", 0, 0, "all key characters" },
    { "a=1 , b=2", 0, 0, "spaces around ','" },
    { "a=1\t,\tb=2", 0, 0, "tabs around ','" },
    { "a=1 \t , \t b=2", 0, 0, "mixed OWS around ','" },
    { ",,a=1,,", 0, 0, "empty members" },
    { " , a=1 , ", 0, 0, "whitespace-only members at both ends" },
    { "   ", 0, 0, "only OWS" },
    { ",,,", 0, 0, "only commas" },
    { "a=b c", 0, 0, "space inside a value" },
    { "a= b", 0, 0, "leading space in a value" },
    { "a=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~", 0, 0, "punctuation in a value" },

    /* invalid */
    { "A=1", 0, -1, "uppercase key" },
    { "aB=1", 0, -1, "uppercase inside key" },
    { "1a=1", 0, -1, "simple key starting with a digit" },
    { "_a=1", 0, -1, "key starting with '_'" },
    { "a.b=1", 0, -1, "'.' in key" },
    { "tenant@Sys=1", 0, -1, "uppercase system-id" },
    { "tenant@1sys=1", 0, -1, "system-id starting with a digit" },
    { "@sys=1", 0, -1, "empty tenant-id" },
    { "tenant@=1", 0, -1, "empty system-id" },
    { "a@b@c=1", 0, -1, "two '@'" },
    { "a=x=", 0, -1, "value with '='" },
    { "a=b=c", 0, -1, "value with '=' inside" },
    { "a=b,c", 0, -1, "value with ',' (leaves member 'c' without '=')" },
    { "a=1 ", 0, -1, "value ending in space" },
    { " a=1", 0, -1, "leading space before the first member" },
    { "a =1", 0, -1, "space before '='" },
    { "a=1\r", 0, -1, "CR" },
    { "a=1\r\n", 0, -1, "CRLF" },
    { "a=1\nb=2", 0, -1, "LF" },
    { "a=1,\nb=2", 0, -1, "LF as whitespace" },
    { "a=b\tc", 0, -1, "tab inside a value" },
    { "a=1\t", 0, -1, "tab ending the last value" },
    { "a=b\x7f", 0, -1, "DEL in a value" },
    { "a\x7f=b", 0, -1, "DEL in a key" },
    { "a=b\x80", 0, -1, "byte 0x80" },
    { "a=\xc3\xa9", 0, -1, "UTF-8 in a value" },
    { "a=b\x01", 0, -1, "control char 0x01" },
    { "a=b\0c", 5, -1, "NUL inside" },
    { "a=1,a=2", 0, -1, "duplicate keys" },
    { "a=1,b=2, a=3", 0, -1, "duplicate keys, later" },
    { "t@s=1,t@s=2", 0, -1, "duplicate multi-tenant keys" },
    { "key", 0, -1, "key without '='" },
    { "a=1,key", 0, -1, "second member without '='" },
    { "=value", 0, -1, "value without key" },
    { "a=", 0, -1, "empty value" },
    { "a=,b=1", 0, -1, "empty value before ','" },
    { "a= ", 0, -1, "value of one space" },
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

    /* Key lengths: simple 256, tenant 241, system 14. */
    fill(key, 256, 'k');
    n = sprintf(s, "%s=v", key);
    is_int(sp_tracestate_validate(s, n), 0, "simple key of 256");
    fill(key, 257, 'k');
    n = sprintf(s, "%s=v", key);
    is_int(sp_tracestate_validate(s, n), -1, "simple key of 257");

    fill(key, 241, 't');
    n = sprintf(s, "%s@ssssssssssssss=v", key);
    is_int(sp_tracestate_validate(s, n), 0, "tenant 241, system 14");
    fill(key, 242, 't');
    n = sprintf(s, "%s@s=v", key);
    is_int(sp_tracestate_validate(s, n), -1, "tenant-id of 242");
    n = sprintf(s, "t@sssssssssssssss=v");
    is_int(sp_tracestate_validate(s, n), -1, "system-id of 15");

    /* Value lengths: 256 valid, 257 invalid. */
    fill(val, 256, 'v');
    n = sprintf(s, "a=%s", val);
    is_int(sp_tracestate_validate(s, n), 0, "value of 256");
    fill(val, 257, 'v');
    n = sprintf(s, "a=%s", val);
    is_int(sp_tracestate_validate(s, n), -1, "value of 257");

    /* Only len bytes are read. */
    is_int(sp_tracestate_validate("a=1,B=2", 3), 0, "len honoured");
    is_int(sp_tracestate_validate("a=1,B=2", 7), -1, "whole buffer invalid");
}


int
main(void)
{
    test_table();
    test_limits();

    return done_testing();
}
