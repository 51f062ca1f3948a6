/* Formatted logging through the server glue's callback (see log.h). */

#include <stdarg.h>
#include <stdio.h>

#include "common/base/log.h"
#include "common/base/url_mask.h"

#define SP_LOG_LINE_MAX  1024


void
sp_logf(const sp_logger_t *log, int level, const char *fmt, ...)
{
    va_list  ap;
    char     buf[SP_LOG_LINE_MAX];

    if (log == NULL || log->fn == NULL) {
        return;
    }

    va_start(ap, fmt);
    /* vsnprintf truncates and always terminates; an encoding error leaves
     * an empty line rather than garbage. */
    if (vsnprintf(buf, sizeof(buf), fmt, ap) < 0) {
        buf[0] = '\0';
    }
    va_end(ap);

    /* No line from common/ shows a URL's credentials (an endpoint's
     * user:password@, in the exporter's errors or libcurl's). */
    if (sp_url_has_userinfo(buf)) {
        char  masked[SP_LOG_LINE_MAX];

        log->fn(log->ud, level, sp_url_mask(buf, masked, sizeof(masked)));
        return;
    }
    log->fn(log->ud, level, buf);
}
