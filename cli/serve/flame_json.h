#ifndef SERVE_FLAME_JSON_H
#define SERVE_FLAME_JSON_H

/* A flame graph's tree as JSON for the UI: stacks ("root;...;leaf") with
 * their CPU time and samples merge into a tree of frames; each node is
 *   {"n":"name","t":[cpu_ns,cpu_ns_base],"s":[samples,samples_base],
 *    "c":[children...]}
 * (the _base values only for a diff: side 1). Children in name order. */

#include <stdint.h>

#include "common/base/buf.h"

typedef struct serve_flame serve_flame_t;

serve_flame_t *serve_flame_new(void);
void serve_flame_free(serve_flame_t *f);
/* Adds one stack to side 0 (or 1); 0, or -1 when out of memory. Frames
 * beyond SERVE_FLAME_MAX_DEPTH are merged into the deepest one kept. */
#define SERVE_FLAME_MAX_DEPTH  1024
int serve_flame_add(serve_flame_t *f, const char *stack, int64_t cpu_ns,
    int64_t samples, int side);
/* The tree, with a root named root_name; 0, or -1. */
int serve_flame_json(serve_flame_t *f, const char *root_name, int diff,
    sp_buf_t *out);

#endif
