/* The load shedder: the directive's values are parsed or refused with a
 * reason; above the CPU threshold the sampler's rate halves once a second
 * down to 1 Hz (or it pauses with `pause`), below it the rate steps back up
 * to the configured one; every change is counted and logged; a real burn
 * of the process's CPU, measured by tick, lowers the rate. */

#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "common/base/clock.h"
#include "common/profile/load_shedder.h"
#include "common/profile/sampler.h"

#define S  1000000000ull

static char  lines[64][256];
static int   nlines;

static void
log_fn(void *ud, int level, const char *msg)
{
    (void) ud;
    if (level == SP_LOG_INFO && nlines < 64) {
        snprintf(lines[nlines++], sizeof(lines[0]), "%s", msg);
    }
}

static const sp_logger_t  logger = { log_fn, NULL };

static int
parse(const char *v, sp_load_shedder_conf_t *c, char *err)
{
    return sp_load_shedder_parse(v, strlen(v), c, err, 256);
}

static void
test_parse(void)
{
    sp_load_shedder_conf_t  c;
    char                    err[256];

    ok(parse("off", &c, err) == 0 && c.cpu_pct == 0, "off");
    ok(parse("cpu=20", &c, err) == 0 && c.cpu_pct == 20 && !c.pause,
       "cpu=20");
    ok(parse("cpu=85%", &c, err) == 0 && c.cpu_pct == 85, "cpu=85%%");
    ok(parse("cpu=150,pause", &c, err) == 0 && c.cpu_pct == 150 && c.pause,
       "cpu=150,pause");
    ok(parse("cpu=0", &c, err) == -1 && strstr(err, "1..6400") != NULL,
       "cpu=0 refused: %s", err);
    ok(parse("cpu=99999999999999", &c, err) == -1
       && strstr(err, "1..6400") != NULL, "a huge number refused: %s", err);
    ok(parse("cpu=", &c, err) == -1 && strstr(err, "number") != NULL,
       "cpu= refused: %s", err);
    ok(parse("cpu=20,stop", &c, err) == -1 && strstr(err, ",pause") != NULL,
       "cpu=20,stop refused: %s", err);
    ok(parse("cpu=20x", &c, err) == -1, "cpu=20x refused: %s", err);
    ok(parse("on", &c, err) == -1 && strstr(err, "cpu=PERCENT") != NULL,
       "on refused: %s", err);
}

static void
test_steps(void)
{
    sp_load_shedder_conf_t   c = { 20, 0 };
    sp_load_shedder_stats_t  st;
    uint64_t                 t = 5 * S, cpu = 0;
    unsigned                 rates[16];
    int                      i;

    sp_sampler_set_rate(100);
    sp_load_shedder_configure(&c);
    nlines = 0;
    sp_load_shedder_step(&logger, t, cpu);          /* baseline */
    /* 50% of a CPU, for 8 s: 100 -> 50 -> 25 -> 12 -> 6 -> 3 -> 1 Hz. */
    for (i = 0; i < 8; i++) {
        t += S / 2;
        cpu += S / 4;
        sp_load_shedder_step(&logger, t, cpu);      /* half a second: no */
        t += S / 2;
        cpu += S / 4;
        sp_load_shedder_step(&logger, t, cpu);
        rates[i] = sp_sampler_effective_rate();
    }
    is_int(rates[0], 50, "first second at 50%%: 50 Hz");
    is_int(rates[1], 25, "then 25 Hz");
    is_int(rates[5], 1, "6 s: 1 Hz");
    is_int(rates[7], 1, "and never below");
    sp_load_shedder_get_stats(&st);
    is_int(st.rate_decreases, 6, "6 decreases counted");
    is_int(st.last_cpu_pct, 50, "the last measure: 50%%");
    is_int(nlines, 6, "6 info lines");
    is_str(lines[0], "spanprof: CPU 50% > 20%: sampling rate 100 -> 50 Hz",
           "the first line");

    /* 10%: one step back a second. */
    for (i = 0; i < 8; i++) {
        t += S;
        cpu += S / 10;
        sp_load_shedder_step(&logger, t, cpu);
        rates[i] = sp_sampler_effective_rate();
    }
    is_int(rates[0], 3, "below: 3 Hz");
    is_int(rates[5], 100, "6 s: 100 Hz again");
    is_int(rates[7], 100, "and no higher");
    is_int(sp_sampler_shed_level(), 0, "level 0");
    sp_load_shedder_get_stats(&st);
    is_int(st.rate_increases, 6, "6 increases counted");
    is_str(lines[6], "spanprof: CPU 10% <= 20%: sampling rate 1 -> 3 Hz",
           "the first line back");

    /* Pause mode. */
    c.pause = 1;
    sp_load_shedder_configure(&c);
    nlines = 0;
    sp_load_shedder_step(&logger, t += S, cpu);
    sp_load_shedder_step(&logger, t += S, cpu += S);
    ok(sp_sampler_paused(), "100%% > 20%%: paused");
    is_int(sp_sampler_effective_rate(), 100, "the rate stays");
    sp_load_shedder_step(&logger, t += S, cpu += S);
    sp_load_shedder_get_stats(&st);
    is_int(st.pauses, 1, "one pause counted, not two");
    sp_load_shedder_step(&logger, t += S, cpu += S / 100);
    ok(!sp_sampler_paused(), "1%%: resumed");
    sp_load_shedder_get_stats(&st);
    is_int(st.resumes, 1, "one resume counted");
    is_int(nlines, 2, "2 info lines");
    is_str(lines[1], "spanprof: CPU 1% <= 20%: profiling resumed at 100 Hz",
           "the resume line");

    /* A pause from elsewhere (the control API) is not the shedder's to undo. */
    sp_sampler_set_paused(1);
    sp_load_shedder_step(&logger, t += S, cpu += S / 100);
    ok(sp_sampler_paused(), "a pause from elsewhere stays");
    sp_sampler_set_paused(0);

    /* Off: nothing moves. */
    c.cpu_pct = 0;
    sp_load_shedder_configure(&c);
    sp_load_shedder_step(&logger, t += S, cpu);
    sp_load_shedder_step(&logger, t += S, cpu += 4 * S);
    is_int(sp_sampler_effective_rate(), 100, "off: no change at 400%%");
}

static void
test_real_burn(void)
{
    sp_load_shedder_conf_t   c = { 5, 0 };
    sp_load_shedder_stats_t  st;
    volatile uint64_t        x = 1;
    uint64_t                 end;
    int                      i;

    /* A machine loaded by others may give the burn far less than a CPU:
     * the threshold is low. */
    sp_load_shedder_configure(&c);
    sp_load_shedder_tick(&logger);
    end = sp_mono_ns() + 1300000000ull;
    while (sp_mono_ns() < end) {
        for (int i = 0; i < 100000; i++) {
            x = x * 6364136223846793005ull + 1;
        }
        sp_load_shedder_tick(&logger);
    }
    sp_load_shedder_get_stats(&st);
    printf("# burning: %u%% of a CPU measured\n", st.last_cpu_pct);
    ok(st.last_cpu_pct > 5 && sp_sampler_effective_rate() == 50,
       "a burn measured by tick halves the rate");
    for (i = 0; i < 5 && sp_sampler_effective_rate() != 100; i++) {
        usleep(1100000);
        sp_load_shedder_tick(&logger);
    }
    sp_load_shedder_get_stats(&st);
    printf("# asleep: %u%% of a CPU measured\n", st.last_cpu_pct);
    ok(st.last_cpu_pct <= 5 && sp_sampler_effective_rate() == 100,
       "asleep: back to 100 Hz");
}

int
main(void)
{
    test_parse();
    test_steps();
    test_real_burn();
    return done_testing();
}
