/* sp_pyroscope_name / sp_pyroscope_ingest_url: the ingest `name` of a
 * resource (service.name the application, the static attributes series
 * labels under Prometheus' label-name rules, values made safe for
 * Pyroscope's parser, which has no escapes) and the percent-encoded URL. */

#include <stdint.h>
#include <string.h>

#include "tap.h"

#include "common/base/buf.h"
#include "common/profile/pyroscope_ingest.h"
#include "common/trace/resource.h"

static const char *
name_of(const sp_resource_t *r, sp_buf_t *b)
{
    sp_buf_reset(b);
    sp_pyroscope_name(r, b);
    sp_buf_append_char(b, '\0');
    return (const char *) b->data;
}

int
main(void)
{
    sp_resource_t  r;
    sp_buf_t       b;

    sp_buf_init(&b);

    /* The module's own attributes only: no series label. */
    sp_resource_init(&r, "nginx", "checkout", NULL);
    is_str(name_of(&r, &b), "checkout{}",
           "service.name, host.name, process.pid, telemetry.sdk.*: none is "
           "a label");
    sp_resource_free(&r);

    sp_resource_init(&r, "nginx", "shop api:v2", "1.2.3");
    sp_resource_set(&r, "deployment.environment", "prod");
    sp_resource_set(&r, "k8s.pod.name", "  a,b}c{d=e  ");
    sp_resource_set(&r, "9lives", "x");
    sp_resource_set(&r, "__secret", "y");
    sp_resource_set(&r, "empty", "   ");
    sp_resource_set(&r, "service_name", "dup");
    sp_resource_set(&r, "a.b", "1");
    sp_resource_set(&r, "a_b", "2");
    sp_resource_set(&r, "region", "eu west/\xc3\xbc");
    sp_resource_set(&r, "ctl", "a\tb\x01");
    sp_resource_set(&r, "host.name", "overridden");
    is_str(name_of(&r, &b),
           "shop_api_v2{service_version=1.2.3,deployment_environment=prod,"
           "k8s_pod_name=a_b_c_d_e,_9lives=x,a_b=1,region=eu west/\xc3\xbc,"
           "ctl=a_b_}",
           "app name sanitized; dots to '_'; a leading digit prefixed; "
           "\"__\", service_name, empty values and a name given twice left "
           "out; ',{}=' and control characters in values to '_'");
    sp_resource_free(&r);

    memset(&r, 0, sizeof(r));
    is_str(name_of(&r, &b), "spanprof{}", "no service.name: spanprof");

    /* The URL: base, the name percent-encoded, the interval in seconds. */
    sp_resource_init(&r, "nginx", "svc", NULL);
    sp_resource_set(&r, "deployment.environment.name", "prod x");
    sp_buf_reset(&b);
    sp_pyroscope_ingest_url("http://127.0.0.1:4040/p", &r,
                            1700000000500000000ULL, 1700000010200000000ULL,
                            &b);
    sp_buf_append_char(&b, '\0');
    is_str((const char *) b.data,
           "http://127.0.0.1:4040/p/ingest?name=svc%7Bdeployment_environment_"
           "name%3Dprod%20x%7D&from=1700000000&until=1700000011"
           "&format=pprof&spyName=spanprof",
           "ingest URL: name percent-encoded, from rounded down, until up");
    sp_resource_free(&r);

    sp_buf_free(&b);
    return done_testing();
}
