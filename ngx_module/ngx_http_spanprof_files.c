/*
 * What a worker must not have to open by path, opened by the master the way
 * nginx opens its logs and temp paths: the file endpoint's directory
 * (created and given to the worker user by ngx_create_paths) and its
 * traces.jsonl (one of the cycle's open files: reopened by the master on
 * "nginx -s reopen", with the ownership nginx gives its logs), and the
 * mapped ELF files the symbolizer reads. Workers inherit the descriptors,
 * so neither the output nor a module under a directory the worker user
 * cannot search (a clone in /root) needs a path the worker can reach.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_spanprof_module.h"


/* The current cycle's descriptors; a reload makes new ones and the old
 * cycle's pool cleanup closes its own. */
typedef struct {
    sp_file_output_fds_t   files;
    sp_symbol_files_t     *symbol_files;
} ngx_http_spanprof_files_t;

static ngx_http_spanprof_files_t  *ngx_http_spanprof_files;


char *
ngx_http_spanprof_files_conf(ngx_conf_t *cf,
    ngx_http_spanprof_main_conf_t *mcf)
{
    ngx_str_t    dir, name;
    ngx_path_t  *path;

    dir.data = mcf->endpoint.data + sizeof("file://") - 1;
    dir.len = mcf->endpoint.len - (sizeof("file://") - 1);
    while (dir.len > 1 && dir.data[dir.len - 1] == '/') {
        dir.len--;
    }

    path = ngx_pcalloc(cf->pool, sizeof(ngx_path_t));
    if (path == NULL) {
        return NGX_CONF_ERROR;
    }
    path->name.data = ngx_pnalloc(cf->pool, dir.len + 1);
    if (path->name.data == NULL) {
        return NGX_CONF_ERROR;
    }
    *ngx_cpymem(path->name.data, dir.data, dir.len) = '\0';
    path->name.len = dir.len;
    path->conf_file = cf->conf_file->file.name.data;
    path->line = cf->conf_file->line;

    if (ngx_add_path(cf, &path) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    mcf->file_dir = path->name;

    name.len = dir.len + sizeof("/" SP_FILE_OUTPUT_TRACES) - 1;
    name.data = ngx_pnalloc(cf->pool, name.len + 1);
    if (name.data == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_sprintf(name.data, "%V/" SP_FILE_OUTPUT_TRACES "%Z", &dir);

    mcf->traces_file = ngx_conf_open_file(cf->cycle, &name);
    if (mcf->traces_file == NULL) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static void
ngx_http_spanprof_files_cleanup(void *data)
{
    ngx_http_spanprof_files_t  *f = data;

    sp_file_output_fds_close(&f->files);
    sp_symbol_files_close(f->symbol_files);
    f->symbol_files = NULL;

    if (ngx_http_spanprof_files == f) {
        ngx_http_spanprof_files = NULL;
    }
}


ngx_int_t
ngx_http_spanprof_files_init_module(ngx_cycle_t *cycle)
{
    char                            err[256];
    ngx_pool_cleanup_t             *cln;
    ngx_http_conf_ctx_t            *http;
    ngx_http_spanprof_files_t      *f;
    ngx_http_spanprof_main_conf_t  *mcf;

    http = (ngx_http_conf_ctx_t *) ngx_get_conf(cycle->conf_ctx,
                                                ngx_http_module);
    if (http == NULL) {
        return NGX_OK;
    }
    mcf = http->main_conf[ngx_http_spanprof_module.ctx_index];
    if (!mcf->used || (mcf->traces_file == NULL && !mcf->profiling_used)) {
        return NGX_OK;
    }

    cln = ngx_pool_cleanup_add(cycle->pool, sizeof(ngx_http_spanprof_files_t));
    if (cln == NULL) {
        return NGX_ERROR;
    }
    f = cln->data;
    f->files.dir_fd = -1;
    f->files.traces_fd = -1;
    f->symbol_files = NULL;
    cln->handler = ngx_http_spanprof_files_cleanup;

    if (mcf->traces_file != NULL) {
        /* ngx_create_paths has made the directory and given it to the
         * worker user already; this only holds it open. */
        f->files.dir_fd = open((char *) mcf->file_dir.data,
                               O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->files.dir_fd == -1) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                          "spanprof: open() \"%V\" failed", &mcf->file_dir);
            return NGX_ERROR;
        }
    }

    if (mcf->profiling_used) {
        f->symbol_files = sp_symbol_files_open(err, sizeof(err));
        if (f->symbol_files == NULL) {
            /* Symbols are then read by path, as far as workers can. */
            ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                          "spanprof: mapped files not opened: %s", err);
        } else {
            ngx_log_error(NGX_LOG_DEBUG, cycle->log, 0,
                          "spanprof: %uz mapped files opened for the "
                          "symbolizer, %uz could not be",
                          sp_symbol_files_count(f->symbol_files),
                          sp_symbol_files_failed(f->symbol_files));
        }
    }

    ngx_http_spanprof_files = f;
    return NGX_OK;
}


void
ngx_http_spanprof_files_worker(ngx_http_spanprof_main_conf_t *mcf,
    sp_exporter_conf_t *ec, sp_file_output_fds_t *files)
{
    ngx_http_spanprof_files_t  *f = ngx_http_spanprof_files;

    if (f == NULL) {
        return;
    }
    ec->symbol_files = f->symbol_files;

    if (mcf->traces_file != NULL && f->files.dir_fd != -1) {
        /* The master's current descriptor: it reopens on USR1 and hands
         * a new file to the worker user; the exporter moves to it. */
        files->dir_fd = f->files.dir_fd;
        files->traces_fd = mcf->traces_file->fd;
        ec->files = files;

        /* The worker's own "reopen" would open by path, which it may
         * not reach: the exporter follows the name through the
         * directory's descriptor instead. */
        mcf->traces_file->name.len = 0;
    }
}
