/*
 * What a child must not have to open by path, opened by the parent at
 * open_logs as root, as mod_log_config opens the logs: the file endpoint's
 * directory (created if missing and given to the User, as nginx treats its
 * temp paths) and its traces.jsonl, and the mapped ELF files the
 * symbolizer reads. Children inherit the descriptors, so neither the
 * output nor a module under a directory the User cannot search (a clone in
 * /root) needs a path the child can reach. A graceful restart runs
 * open_logs again: the new generation gets new descriptors (a rotated
 * traces.jsonl is recreated), and pconf's cleanup closes the old ones.
 */

#include <string.h>
#include <unistd.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "unixd.h"

#include "mod_spanprof.h"

APLOG_USE_MODULE(spanprof);


static sp_file_output_fds_t   spanprof_file_fds = { -1, -1 };
static sp_symbol_files_t     *spanprof_symbol_files;


static apr_status_t
spanprof_files_close(void *data)
{
    sp_file_output_fds_close(&spanprof_file_fds);
    sp_symbol_files_close(spanprof_symbol_files);
    spanprof_symbol_files = NULL;
    return APR_SUCCESS;
}


int
spanprof_files_open_logs(apr_pool_t *pconf, apr_pool_t *plog,
    apr_pool_t *ptemp, server_rec *s)
{
    char                  err[256];
    const char           *dir;
    spanprof_srv_conf_t  *sc;

    sc = ap_get_module_config(s->module_config, &spanprof_module);

    /* Left from a generation that failed before its cleanup ran. */
    spanprof_files_close(NULL);

    if (!spanprof_globals.used) {
        return OK;
    }
    apr_pool_cleanup_register(pconf, NULL, spanprof_files_close,
                              apr_pool_cleanup_null);

    if (sc->endpoint != NULL && strncmp(sc->endpoint, "file://", 7) == 0) {
        dir = sc->endpoint + 7;
        if (sp_file_output_prepare(dir, ap_unixd_config.user_id,
                                   ap_unixd_config.group_id, 1,
                                   &spanprof_file_fds, err, sizeof(err))
            != 0)
        {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                         "spanprof: OtelExporterEndpoint %s: %s",
                         sc->endpoint, err);
            return !OK;
        }
    }

    if (spanprof_globals.profiling_used) {
        spanprof_symbol_files = sp_symbol_files_open(err, sizeof(err));
        if (spanprof_symbol_files == NULL) {
            /* Symbols are then read by path, as far as children can. */
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                         "spanprof: mapped files not opened: %s", err);
        } else {
            ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                         "spanprof: %lu mapped files opened for the "
                         "symbolizer, %lu could not be",
                         (unsigned long)
                             sp_symbol_files_count(spanprof_symbol_files),
                         (unsigned long)
                             sp_symbol_files_failed(spanprof_symbol_files));
        }
    }
    return OK;
}


void
spanprof_files_child(sp_exporter_conf_t *ec)
{
    ec->symbol_files = spanprof_symbol_files;
    if (spanprof_file_fds.dir_fd >= 0) {
        ec->files = &spanprof_file_fds;
    }
}
