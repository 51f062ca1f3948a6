/* What one timestamp costs (common/base/clock.h): sp_now_ns() reading the
 * time-stamp counter, and reading clock_gettime(CLOCK_REALTIME), in
 * alternating rounds of back-to-back reads; each figure is the best
 * round's. bench/run runs it on the server's CPU. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/clock.h"

#define READS   (10 * 1000 * 1000)
#define ROUNDS  7

static double
round_ns(void)
{
    uint64_t           t0, t1, sum = 0;
    int                i;

    t0 = sp_mono_ns();
    for (i = 0; i < READS; i++) {
        sum += sp_now_ns();
    }
    t1 = sp_mono_ns();
    /* The sum is used, so the reads are not optimised away. */
    if (sum == 42) {
        puts("");
    }
    return (double) (t1 - t0) / READS;
}

int
main(void)
{
    double  best[2] = { 1e9, 1e9 }, ns;
    int     r, m, have_tsc;

    have_tsc = sp_clock_use(SP_CLOCK_TSC) == SP_CLOCK_TSC;
    for (r = 0; r < ROUNDS; r++) {
        for (m = 0; m < 2; m++) {
            if (m == 1 && !have_tsc) {
                continue;
            }
            sp_clock_use(m == 0 ? SP_CLOCK_GETTIME : SP_CLOCK_TSC);
            ns = round_ns();
            best[m] = ns < best[m] ? ns : best[m];
        }
    }
    printf("clock_gettime %.2f ns per read\n", best[0]);
    if (have_tsc) {
        sp_clock_stats_t  st;

        sp_clock_get_stats(&st);
        printf("tsc %.2f ns per read (%llu rebases)\n", best[1],
               (unsigned long long) st.rebases);
    } else {
        printf("tsc not available\n");
    }
    printf("best of %d rounds of %d reads; sp_clock_init() here chooses %s\n",
           ROUNDS, READS,
           sp_clock_init() == SP_CLOCK_TSC ? "tsc" : "clock_gettime");
    return 0;
}
