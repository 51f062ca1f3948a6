#ifndef SERVE_UI_ASSETS_H
#define SERVE_UI_ASSETS_H

/* The web UI's files, compiled into the binary (no CDN, no file read at
 * run time): generated from cli/serve/ui/ by cli/serve/embed.pl. */

#include <stddef.h>

typedef struct {
    const char           *path;          /* "/", "/app.js" */
    const char           *content_type;
    const unsigned char  *data;
    size_t                len;
} serve_asset_t;

/* The asset served at url, or NULL. */
const serve_asset_t *serve_asset_find(const char *url);

#endif
