#ifndef SP_LOG_H
#define SP_LOG_H

/* Logging from common/ goes through a callback the server glue provides, so
 * lines land in nginx's error_log or httpd's ErrorLog. The callback may be
 * called from the exporter's own thread (where it has one). */

enum { SP_LOG_ERR = 0, SP_LOG_WARN = 1, SP_LOG_INFO = 2, SP_LOG_DEBUG = 3 };

typedef void (*sp_log_fn)(void *ud, int level, const char *msg);

typedef struct {
    sp_log_fn  fn;
    void      *ud;
} sp_logger_t;

/* Formats into a stack buffer (truncated at 1 KiB) and hands it to the logger;
 * a NULL logger or callback writes nothing. The userinfo of any URL in the
 * line is masked first (url_mask.h): credentials never reach a log. */
void sp_logf(const sp_logger_t *log, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
