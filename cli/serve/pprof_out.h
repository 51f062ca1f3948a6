#ifndef SERVE_PPROF_OUT_H
#define SERVE_PPROF_OUT_H

/* A gzip'd pprof profile (what `go tool pprof` and Pyroscope read) of the
 * stacks a flame graph shows: one function and one location per frame
 * name, samples valued samples/count and type/unit (cpu/nanoseconds,
 * wall/nanoseconds, inuse_space/bytes, ...). */

#include <stdint.h>

#include "common/base/buf.h"

typedef struct serve_pprof serve_pprof_t;

serve_pprof_t *serve_pprof_new(void);
void serve_pprof_free(serve_pprof_t *p);
/* One stack, "root;...;leaf". */
void serve_pprof_add(serve_pprof_t *p, const char *stack, int64_t samples,
    int64_t cpu_ns);
/* The encoded, gzip'd profile appended to out; 0, or -1. */
int serve_pprof_encode(serve_pprof_t *p, const char *type, const char *unit,
    int64_t period_ns, sp_buf_t *out);

#endif
