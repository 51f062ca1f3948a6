#ifndef SP_STATUS_JSON_H
#define SP_STATUS_JSON_H

#include <stddef.h>

#include "common/control/api_info.h"
#include "common/control/control_shm.h"

/* The status API's JSON document:
 * {"module": "spanprof", "version": ..., "server": ...,
 *  "config": {...sp_api_info_t...},
 *  "control": {"profiling": b, "rate": n, "generation": n,
 *              "configured": {"profiling": b, "rate": n}},
 *  "workers": [{"pid": n, "updated": unix seconds,
 *               "profiling": b, "rate": n,
 *               "counters": {<every status field>: n, ...}}, ...]}
 * One entry per live process holding a slot, in slot order. Returns a
 * malloc'd NUL-ended string (length in *len), NULL when out of memory. */
char *sp_status_json(const sp_api_info_t *info, const sp_control_shm_t *c,
    size_t *len);

/* {"error": msg} (malloc'd, NULL when out of memory). */
char *sp_status_json_error(const char *msg, size_t *len);

#endif
