#ifndef SPANPROF_SPIN_LOOP_H
#define SPANPROF_SPIN_LOOP_H

/* The fixed work of bench/amplification, shared by the test modules
 * t/ngx_burn and t/mod_burn: four independent xorshift chains, registers
 * only, no memory, so the loop takes the same time whatever the request
 * around it did to the caches. Returns a value to keep (so the compiler
 * keeps the loop). */

#include <stdint.h>

static inline uint64_t
spanprof_spin_loop(uint64_t seed, unsigned long n)
{
    uint64_t       a = seed, b = seed * 3, c = seed * 5, d = seed * 7;
    unsigned long  i;

    for (i = 0; i < n; i++) {
        a ^= a << 13; a ^= a >> 7;
        b ^= b << 13; b ^= b >> 7;
        c ^= c << 13; c ^= c >> 7;
        d ^= d << 13; d ^= d >> 7;
    }
    return a + b + c + d;
}

#endif
