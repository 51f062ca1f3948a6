#ifndef SP_PREFETCH_H
#define SP_PREFETCH_H

#include <stdint.h>

/* Asks for every cache line of [from, to) to be brought in for writing
 * (a hint: no fault, whatever the addresses). For lines a request is about
 * to write, from a hook that runs earlier while the CPU waits anyway. */
static inline void
sp_prefetch_for_write(const void *from, const void *to)
{
    const char  *p = (const char *) ((uintptr_t) from & ~(uintptr_t) 63);

    for ( ; p < (const char *) to; p += 64) {
        __builtin_prefetch(p, 1, 3);
    }
}

#endif
