#ifndef SP_CONTROL_BODY_H
#define SP_CONTROL_BODY_H

#include <stddef.h>

/* The body of a control API write (POST/PUT):
 *     {"profiling": true|false, "rate": N,
 *      "cpu": true|false, "wall": true|false, "wall_rate": N,
 *      "memory": true|false}
 * every member optional but at least one, rates integers 1..1000, no
 * other member. "profiling" pauses or resumes every type; "cpu", "wall"
 * and "memory" switch one type. */

#define SP_CONTROL_BODY_MAX  4096     /* bytes the servers read */

typedef struct {
    int       profiling;              /* -1: not given */
    unsigned  rate_hz;                /* 0: not given */
    int       cpu, wall;              /* -1: not given */
    unsigned  wall_rate_hz;           /* 0: not given */
    int       memory;                 /* -1: not given */
} sp_control_body_t;

/* 0, or -1 with a reason for the client in err. */
int sp_control_body_parse(const char *body, size_t len, sp_control_body_t *out,
    char *err, size_t errlen);

#endif
