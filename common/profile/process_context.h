#ifndef SP_PROCESS_CONTEXT_H
#define SP_PROCESS_CONTEXT_H

#include <stddef.h>

#include "common/trace/resource.h"

/* Publishes this process's OTel resource for external readers (OTEP 4719):
 * a memfd (or anonymous) mapping named "OTEL_CTX", not inherited by fork,
 * holding a header and a ProcessContext protobuf payload. The payload also
 * carries the OTEP 4947 thread-context keys (threadlocal.schema_version and
 * threadlocal.attribute_key_map), so that an external profiler can read the
 * same request labels our sampler does. Call in each worker process. */

/* 0, or -1 with err filled (then nothing is published). */
int sp_process_context_publish(const sp_resource_t *res, char *err,
    size_t errlen);

/* Unmaps what was published (the process may also just exit). */
void sp_process_context_drop(void);

#endif
