/* Formatted logging through the server glue's callback (see log.h). */

#include <stdarg.h>
#include <stdio.h>

#include "common/base/log.h"

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

    log->fn(log->ud, level, buf);
}
