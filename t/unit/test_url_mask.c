/* Credentials in URLs are masked in every text that names them. */

#include <string.h>

#include "tap.h"
#include "common/base/log.h"
#include "common/base/url_mask.h"


static void
check(const char *in, const char *want)
{
    char  out[512];

    is_str(sp_url_mask(in, out, sizeof(out)), want, "%s", in);
    is_int(sp_url_has_userinfo(in), strcmp(in, want) != 0,
           "  has_userinfo agrees");
}


static void
test_mask(void)
{
    check("https://user:pass@host:4318/v1/traces",
          "https://user:***@host:4318/v1/traces");
    check("http://token@host/", "http://***@host/");
    check("http://user:@host", "http://user:***@host");
    check("http://:pw@host", "http://:***@host");
    check("http://u:p@ss@host/x", "http://u:***@host/x");
    check("http://host/path@x", "http://host/path@x");
    check("http://host?q=a@b", "http://host?q=a@b");
    check("http://host:4318/v1/traces", "http://host:4318/v1/traces");
    check("file:///var/spool/spanprof", "file:///var/spool/spanprof");
    check("no url here: a@b", "no url here: a@b");
    check("", "");
    check("://user:pw@host", "://user:pw@host");
    check("spanprof: export to http://a:SECRET@h:1/v1/traces failed: "
          "Failed to connect to h port 1; retrying (endpoint "
          "\"https://b:SECRET2@k/\")",
          "spanprof: export to http://a:***@h:1/v1/traces failed: "
          "Failed to connect to h port 1; retrying (endpoint "
          "\"https://b:***@k/\")");
    check("http://u:p\tw@host", "http://u:p\tw@host");
    check("x http://u:pw@", "x http://u:***@");
}


static void
test_cut(void)
{
    char  out[16];

    sp_url_mask("http://user:SECRETSECRET@h/", out, sizeof(out));
    is_str(out, "http://user:***", "cut after the mask");
    sp_url_mask("http://u:SECRET@h/", out, 10);
    ok(strlen(out) == 9 && strstr(out, "SEC") == NULL, "cut inside it: %s",
       out);
    out[0] = 'x';
    sp_url_mask("abc", out, 1);
    ok(out[0] == '\0', "room for the NUL only");
}


static char  logged[1200];

static void
logfn(void *ud, int level, const char *msg)
{
    strncpy(logged, msg, sizeof(logged) - 1);
}


static void
test_log(void)
{
    sp_logger_t  log = { logfn, NULL };

    sp_logf(&log, SP_LOG_ERR, "export to %s failed: %s",
            "https://user:hunter2@collector:4318/v1/traces",
            "Could not resolve host: collector");
    is_str(logged, "export to https://user:***@collector:4318/v1/traces "
           "failed: Could not resolve host: collector",
           "sp_logf masks every line from common/");
    sp_logf(&log, SP_LOG_ERR, "plain %d", 7);
    is_str(logged, "plain 7", "a line without URL is as formatted");
}


int
main(void)
{
    test_mask();
    test_cut();
    test_log();

    return done_testing();
}
