#ifndef SP_PYROSCOPE_INGEST_H
#define SP_PYROSCOPE_INGEST_H

#include <stdint.h>

#include "common/base/buf.h"
#include "common/trace/resource.h"

/* The URL of a Pyroscope ingest (POST {base}/ingest?name=...):
 *
 * name = APP{label=value,...}: APP is service.name (Pyroscope adds the
 * service_name label from it), in the characters an application name may
 * hold ([A-Za-z0-9_.-], others become '_'). The series labels are the
 * resource's static string attributes: service.version,
 * deployment.environment(.name), every otel_resource_attr /
 * OtelResourceAttr; not service.name, nor what the module sets itself
 * (host.name, process.pid, telemetry.sdk.*), which would split series per
 * host or process. A label name follows Prometheus' rules: every character
 * outside [A-Za-z0-9_] (the dots) becomes '_', a leading digit gets a '_'
 * before it; names starting "__" (Pyroscope drops them), "service_name"
 * and a name already given are left out. Pyroscope's parser has no
 * escapes: a value ends at ',' or '}' and is trimmed, so ',', '{', '}',
 * '=' and control characters become '_', spaces around are cut, and an
 * empty value leaves the label out. The whole query is percent-encoded. */

/* Appends the name (not yet URL-encoded) to out. */
void sp_pyroscope_name(const sp_resource_t *r, sp_buf_t *out);

/* Appends "{base}/ingest?name=...&from=S&until=S&format=pprof&spyName=
 * spanprof" for the interval [start_ns, end_ns) (unix seconds, until
 * rounded up) to out. */
void sp_pyroscope_ingest_url(const char *base, const sp_resource_t *r,
    uint64_t start_ns, uint64_t end_ns, sp_buf_t *out);

#endif
