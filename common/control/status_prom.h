#ifndef SP_STATUS_PROM_H
#define SP_STATUS_PROM_H

#include <stddef.h>

#include "common/control/api_info.h"
#include "common/control/control_shm.h"

/* The same status in the Prometheus text exposition format (0.0.4):
 *   spanprof_info{version="...",server="..."} 1
 *   spanprof_control_profiling / _rate_hz / _generation (the wanted state)
 *   spanprof_<field> (gauges) and spanprof_<field>_total (counters) of
 *   every status field, one sample per process: {worker="<pid>"}
 * each family with its # HELP and # TYPE lines. Returns a malloc'd
 * NUL-ended string (length in *len), NULL when out of memory. */
char *sp_status_prometheus(const sp_api_info_t *info,
    const sp_control_shm_t *c, size_t *len);

#define SP_STATUS_PROM_CONTENT_TYPE  "text/plain; version=0.0.4; charset=utf-8"

#endif
