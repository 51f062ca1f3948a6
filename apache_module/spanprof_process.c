/*
 * What this process holds for every file of the module: the settings
 * gathered while the configuration is read, the main server, the child's
 * exporter and whether it exports spans, and the defaults of a directory
 * that sets nothing. The module file writes them (pre_config,
 * post_config, child_init); the others only read them. Keeping them here,
 * not in mod_spanprof.c, keeps the module a tree: every file calls down,
 * none calls back up into the module file.
 */

#include "httpd.h"
#include "http_config.h"

#include "mod_spanprof.h"


spanprof_globals_t   spanprof_globals;
sp_exporter_t       *spanprof_exporter;
int                  spanprof_export_spans;
server_rec          *spanprof_main_server;

const spanprof_dir_conf_t  spanprof_dir_defaults = {
    .trace = 0, .context = SPANPROF_CTX_IGNORE, .profiling = 0,
    .keep = { .flags = SP_KEEP_ALL }
};
