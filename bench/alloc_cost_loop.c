/* The allocating loop of bench/alloc_cost, in its own shared object (full
 * RELRO, as Debian's servers): its malloc/free go through its GOT, which
 * the hooks patch. */

#include <stdlib.h>

__attribute__((visibility("default"))) void
alloc_cost_loop(size_t n, size_t size)
{
    size_t          i;
    void *volatile  p;

    for (i = 0; i < n; i++) {
        p = malloc(size);
        free(p);
    }
}
