#ifndef SP_API_REQUEST_H
#define SP_API_REQUEST_H

#include <stddef.h>

#include "common/control/api_info.h"
#include "common/control/control_shm.h"

/* One request to the control and status API, the same for every server:
 *   GET/HEAD       the status: JSON, or Prometheus text with
 *                  ?format=prometheus or an Accept naming text/plain
 *                  (?format=json wins over Accept)
 *   POST/PUT       {"profiling": b, "rate": n} changes the control state
 *                  (every worker applies it within a second); answers
 *                  the status JSON
 *   DELETE         profiling off; answers the status JSON
 * Writes get 403 when the location does not take them (info->write 0),
 * 400 for a bad body, 409 for profiling on where it is not configured;
 * other methods 405 (Allow given). Errors are {"error": "..."}. */

typedef struct {
    const char  *method;              /* "GET", ... */
    const char  *query;               /* without '?', or NULL */
    const char  *accept;              /* Accept header, or NULL */
    const char  *body;                /* POST/PUT body */
    size_t       body_len;
} sp_api_request_t;

typedef struct {
    int          status;              /* HTTP status */
    const char  *content_type;
    const char  *allow;               /* for 405, else NULL */
    char        *body;                /* malloc'd; free() it */
    size_t       body_len;
} sp_api_response_t;

#define SP_API_ALLOW  "GET, HEAD, POST, PUT, DELETE"

/* Fills resp; 0, or -1 when out of memory (then answer 500). */
int sp_api_handle(const sp_api_request_t *req, const sp_api_info_t *info,
    sp_control_shm_t *c, sp_api_response_t *resp);

/* Whether a method is a write (for servers that need to read the body
 * first). */
int sp_api_is_write(const char *method);

#endif
