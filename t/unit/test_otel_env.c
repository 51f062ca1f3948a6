/* Endpoints as users write them (nginx-otel's forms) and the OTEL_*
 * variables as the SDK specification defines them. */

#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "common/export/endpoint.h"
#include "common/export/otel_env.h"


static void
norm_ok(const char *in, int allow_file, const char *want)
{
    char         out[256];
    const char  *why = NULL;

    is_int(sp_endpoint_normalize(in, allow_file, out, sizeof(out), &why), 0,
           "endpoint \"%s\" accepted", in);
    is_str(out, want, "  normalized to %s", want);
}


static void
norm_bad(const char *in, int allow_file, const char *reason)
{
    char         out[256];
    const char  *why = "";

    is_int(sp_endpoint_normalize(in, allow_file, out, sizeof(out), &why), -1,
           "endpoint \"%s\" refused", in);
    ok(strstr(why, reason) != NULL, "  because it %s (%s)", reason, why);
}


static void
test_endpoint(void)
{
    norm_ok("localhost:4317", 1, "http://localhost:4317");
    norm_ok("127.0.0.1:4317", 1, "http://127.0.0.1:4317");
    norm_ok("[::1]:4317", 1, "http://[::1]:4317");
    norm_ok("otel-collector.monitoring.svc:4317", 1,
            "http://otel-collector.monitoring.svc:4317");
    norm_ok("http://collector:4317", 1, "http://collector:4317");
    norm_ok("HTTPS://collector:443", 1, "https://collector:443");
    norm_ok("Http://collector", 1, "http://collector");
    norm_ok("http://u:p@h:4318/base/", 1, "http://u:p@h:4318/base/");
    norm_ok("https://[2001:db8::1]:4318", 1, "https://[2001:db8::1]:4318");
    norm_ok("file:///var/spool/x", 1, "file:///var/spool/x");

    norm_bad("", 1, "is empty");
    norm_bad("localhost", 1, "has no port");
    norm_bad("localhost:", 1, "invalid port");
    norm_bad("localhost:0", 1, "invalid port");
    norm_bad("localhost:65536", 1, "invalid port");
    norm_bad("localhost:4317/v1/traces", 1, "invalid port");
    norm_bad("ftp://x", 1, "must be host:port");
    norm_bad("some garbage", 1, "must be host:port");
    norm_bad("http://", 1, "has no host");
    norm_bad("http:///path", 1, "has no host");
    norm_bad("http://h:port", 1, "invalid port");
    norm_bad("http://h o:1", 1, "invalid character");
    norm_bad("http://[::1", 1, "IPv6");
    norm_bad("http://h:1/a b", 1, "space or control");
    norm_bad("file://relative", 1, "absolute directory");
    norm_bad("file:///dir", 0, "http:// or https://");

    ok(!sp_endpoint_has_path("http://h:1"), "no path");
    ok(!sp_endpoint_has_path("http://h:1/"), "\"/\" is no path");
    ok(sp_endpoint_has_path("http://h:1/otlp"), "/otlp is a path");
    ok(sp_endpoint_has_path("http://h:1?x"), "a query counts");
    is_str(sp_endpoint_path("http://u@h:1/a/b"), "/a/b", "path of a URL");
}


/* A fake environment: NULL-ended name, value pairs. */
static const char *
fake_getenv(void *ud, const char *name)
{
    const char *const  *kv = ud;

    for (; kv[0] != NULL; kv += 2) {
        if (strcmp(kv[0], name) == 0) {
            return kv[1];
        }
    }
    return NULL;
}


static int
read_env(sp_otel_env_t *env, const char *const *vars, char *err,
    size_t errlen)
{
    err[0] = '\0';
    return sp_otel_env_read(env, fake_getenv, (void *) vars, err, errlen);
}


static void
test_env_all(void)
{
    sp_otel_env_t  env;
    char           err[256];
    const char    *vars[] = {
        "OTEL_SERVICE_NAME", "checkout",
        "OTEL_RESOURCE_ATTRIBUTES",
            " deployment.environment = prod ,team=a%2Cb%3Dc, ,x=%E2%82%AC",
        "OTEL_EXPORTER_OTLP_ENDPOINT", "HTTP://collector:4318/base",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4317",
        "OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%20ecret,x-tenant=42",
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
        "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip",
        "OTEL_EXPORTER_OTLP_TIMEOUT", "2500",
        NULL
    };

    is_int(read_env(&env, vars, err, sizeof(err)), 0, "all variables: %s",
           err);
    is_str(env.service_name, "checkout", "OTEL_SERVICE_NAME");
    is_int((int) env.nresource, 3, "three attributes (an empty member "
           "skipped)");
    is_str(env.resource[0].key, "deployment.environment", "key trimmed");
    is_str(env.resource[0].value, "prod", "value trimmed");
    is_str(env.resource[1].value, "a,b=c", "value percent-decoded");
    is_str(env.resource[2].value, "\xe2\x82\xac", "UTF-8 percent-decoded");
    is_str(env.endpoint, "http://collector:4318/base", "endpoint normalized");
    is_str(env.traces_endpoint, "http://collector:4317",
           "traces endpoint in nginx-otel's bare form");
    is_int((int) env.nheaders, 2, "two headers");
    is_str(env.headers[0].key, "api-key", "header name");
    is_str(env.headers[0].value, "s ecret", "header value decoded");
    is_int(env.protocol_set, 1, "protocol set");
    is_int(env.protocol, SP_EXPORT_HTTP_PROTOBUF, "http/protobuf");
    is_int(env.compression, 1, "gzip");
    is_int((int) env.timeout_ms, 2500, "timeout in ms");
    sp_otel_env_free(&env);
}


static void
test_env_unset(void)
{
    sp_otel_env_t  env;
    char           err[256];
    const char    *vars[] = {
        "OTEL_SERVICE_NAME", "",
        "OTEL_EXPORTER_OTLP_ENDPOINT", "",
        NULL
    };

    is_int(read_env(&env, vars, err, sizeof(err)), 0, "empty is unset");
    ok(env.service_name == NULL && env.endpoint == NULL
       && env.traces_endpoint == NULL && env.nresource == 0
       && env.nheaders == 0 && !env.protocol_set && env.compression == -1
       && env.timeout_ms == -1, "nothing set");
    sp_otel_env_free(&env);
}


static void
test_env_traces_wins(void)
{
    sp_otel_env_t  env;
    char           err[256];
    const char    *vars[] = {
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc",
        "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none",
        "OTEL_EXPORTER_OTLP_HEADERS", "a=1",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=2",
        NULL
    };

    is_int(read_env(&env, vars, err, sizeof(err)), 0, "signal variables");
    is_int(env.protocol, SP_EXPORT_GRPC, "TRACES_PROTOCOL wins");
    is_int(env.compression, 0, "TRACES_COMPRESSION wins");
    ok(env.nheaders == 1 && strcmp(env.headers[0].key, "b") == 0,
       "TRACES_HEADERS wins");
    sp_otel_env_free(&env);
}


static void
env_bad(const char *var, const char *value, const char *reason)
{
    sp_otel_env_t  env;
    char           err[256];
    const char    *vars[] = { var, value, NULL };

    is_int(read_env(&env, vars, err, sizeof(err)), -1, "%s=%s refused", var,
           value);
    ok(strncmp(err, var, strlen(var)) == 0 && err[strlen(var)] == ':',
       "  the error names %s (%s)", var, err);
    ok(strstr(err, reason) != NULL, "  and says %s", reason);
    sp_otel_env_free(&env);
}


static void
test_env_bad(void)
{
    env_bad("OTEL_RESOURCE_ATTRIBUTES", "a=1,b", "not key=value");
    env_bad("OTEL_RESOURCE_ATTRIBUTES", "a=%zz", "percent-encoding");
    env_bad("OTEL_RESOURCE_ATTRIBUTES", "a=%4", "percent-encoding");
    env_bad("OTEL_RESOURCE_ATTRIBUTES", "=v", "empty key");
    env_bad("OTEL_EXPORTER_OTLP_HEADERS", "bad name=x", "header name");
    env_bad("OTEL_EXPORTER_OTLP_HEADERS", "k=a%0D%0Ab", "CR or LF");
    env_bad("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "novalue", "key=value");
    env_bad("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x", "invalid endpoint");
    env_bad("OTEL_EXPORTER_OTLP_ENDPOINT", "file:///tmp", "http://");
    env_bad("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector", "no port");
    env_bad("OTEL_EXPORTER_OTLP_PROTOCOL", "http", "grpc, http/protobuf");
    env_bad("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "HTTP/PROTOBUF",
            "invalid value");
    env_bad("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "gzip or none");
    env_bad("OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "milliseconds");
    env_bad("OTEL_EXPORTER_OTLP_TIMEOUT", "-1", "milliseconds");
    env_bad("OTEL_EXPORTER_OTLP_TIMEOUT", "0", "milliseconds");
    env_bad("OTEL_EXPORTER_OTLP_TIMEOUT", "99999999999999999999",
            "milliseconds");
}


static void
test_secret_not_shown(void)
{
    sp_otel_env_t  env;
    char           err[256];
    const char    *vars[] = {
        "OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://user:TOPSECRET@h", NULL
    };

    read_env(&env, vars, err, sizeof(err));
    ok(strstr(err, "TOPSECRET") == NULL, "an endpoint's password is not in "
       "the error (%s)", err);
    sp_otel_env_free(&env);
}


int
main(void)
{
    test_endpoint();
    test_env_all();
    test_env_unset();
    test_env_traces_wins();
    test_env_bad();
    test_secret_not_shown();

    return done_testing();
}
