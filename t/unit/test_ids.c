/* Trace/span id generation, fork and thread separation, hex helpers. */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "common/trace/ids.h"

#define N_IDS     10000
#define N_THREAD  1000

static uint8_t  trace_ids[N_IDS][SP_TRACE_ID_LEN];
static uint8_t  span_ids[N_IDS][SP_SPAN_ID_LEN];


static int
cmp_trace(const void *a, const void *b)
{
    return memcmp(a, b, SP_TRACE_ID_LEN);
}


static int
cmp_span(const void *a, const void *b)
{
    return memcmp(a, b, SP_SPAN_ID_LEN);
}


/* Sorts both tables and counts the ids equal to their neighbour. */
static int
count_duplicates(void)
{
    int  i, dup = 0;

    qsort(trace_ids, N_IDS, SP_TRACE_ID_LEN, cmp_trace);
    qsort(span_ids, N_IDS, SP_SPAN_ID_LEN, cmp_span);
    for (i = 1; i < N_IDS; i++) {
        dup += memcmp(trace_ids[i - 1], trace_ids[i], SP_TRACE_ID_LEN) == 0;
        dup += memcmp(span_ids[i - 1], span_ids[i], SP_SPAN_ID_LEN) == 0;
    }
    return dup;
}


static void
test_generate(void)
{
    int      i, zero, dup, rt;
    char     hex[2 * SP_TRACE_ID_LEN];
    uint8_t  back[SP_TRACE_ID_LEN];

    sp_ids_thread_init();

    for (i = 0; i < N_IDS; i++) {
        sp_trace_id_generate(trace_ids[i]);
        sp_span_id_generate(span_ids[i]);
    }

    zero = 0;
    rt = 1;
    for (i = 0; i < N_IDS; i++) {
        zero += sp_id_is_zero(trace_ids[i], SP_TRACE_ID_LEN);
        zero += sp_id_is_zero(span_ids[i], SP_SPAN_ID_LEN);

        sp_hex_encode(hex, trace_ids[i], SP_TRACE_ID_LEN);
        memset(back, 0, sizeof(back));
        if (sp_hex_decode(back, hex, SP_TRACE_ID_LEN) != 0
            || memcmp(back, trace_ids[i], SP_TRACE_ID_LEN) != 0)
        {
            rt = 0;
        }

        sp_hex_encode(hex, span_ids[i], SP_SPAN_ID_LEN);
        memset(back, 0, sizeof(back));
        if (sp_hex_decode(back, hex, SP_SPAN_ID_LEN) != 0
            || memcmp(back, span_ids[i], SP_SPAN_ID_LEN) != 0)
        {
            rt = 0;
        }
    }
    is_int(zero, 0, "no all-zero id among %d trace and span ids", N_IDS);
    ok(rt, "hex round trip of every id");

    /* The generator output should look random: every byte position of the
     * trace ids (W3C wants at least the right-most 7 random) takes many
     * values. */
    {
        int  pos, v, distinct, min_distinct;
        int  seen[256];

        min_distinct = 256;
        for (pos = 0; pos < SP_TRACE_ID_LEN; pos++) {
            memset(seen, 0, sizeof(seen));
            for (i = 0; i < N_IDS; i++) {
                seen[trace_ids[i][pos]] = 1;
            }
            distinct = 0;
            for (v = 0; v < 256; v++) {
                distinct += seen[v];
            }
            if (distinct < min_distinct) {
                min_distinct = distinct;
            }
        }
        /* With 10000 draws every byte value shows up (p(miss) ~ 1e-17). */
        is_int(min_distinct, 256, "every trace-id byte takes all 256 values");
    }

    dup = count_duplicates();
    is_int(dup, 0, "no duplicate among %d trace and span ids", N_IDS);
}


static void
test_hex(void)
{
    static const uint8_t  bytes[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xff };
    char                  hex[2 * sizeof(bytes) + 1];
    uint8_t               out[sizeof(bytes)], one;

    memset(hex, 0, sizeof(hex));
    sp_hex_encode(hex, bytes, sizeof(bytes));
    is_str(hex, "00017f80abff", "hex encode is lowercase");

    /* Every byte value, at every length and offset the vector path and
     * the byte-wise tail split differently, against snprintf; nothing is
     * written past 2n. */
    {
        uint8_t   all[256 + 40];
        char      got[2 * 40 + 8], want[2 * 40 + 8];
        unsigned  len, off, k, bad = 0;

        for (k = 0; k < sizeof(all); k++) {
            all[k] = (uint8_t) (k * 167 + 13);
        }
        for (k = 0; k < 256; k++) {
            all[k] = (uint8_t) k;
        }
        for (off = 0; off < 256; off += 3) {
            for (len = 0; len <= 40; len++) {
                memset(got, '#', sizeof(got));
                sp_hex_encode(got, all + off, len);
                for (k = 0; k < len; k++) {
                    snprintf(want + 2 * k, 3, "%02x", all[off + k]);
                }
                bad += memcmp(got, want, 2 * len) != 0
                       || got[2 * len] != '#';
            }
        }
        is_int(bad, 0, "hex encode of every byte, lengths 0..40, no overrun");
    }

    memset(out, 0, sizeof(out));
    is_int(sp_hex_decode(out, "00017f80abff", sizeof(out)), 0, "decode");
    ok(memcmp(out, bytes, sizeof(bytes)) == 0, "decoded bytes");

    is_int(sp_hex_decode(&one, "0123456789abcdef", 0), 0, "decode of 0 bytes");

    one = 0x55;
    is_int(sp_hex_decode(&one, "A0", 1), -1, "decode rejects 'A'");
    is_int(sp_hex_decode(&one, "0A", 1), -1, "decode rejects trailing 'A'");
    is_int(sp_hex_decode(&one, "0g", 1), -1, "decode rejects 'g'");
    is_int(sp_hex_decode(&one, "G0", 1), -1, "decode rejects 'G'");
    is_int(sp_hex_decode(&one, " 0", 1), -1, "decode rejects ' '");
    is_int(sp_hex_decode(&one, "/0", 1), -1, "decode rejects '/'");
    is_int(sp_hex_decode(&one, ":0", 1), -1, "decode rejects ':'");
    is_int(sp_hex_decode(&one, "`0", 1), -1, "decode rejects '`'");
    is_int(one, 0x55, "output untouched on error");
    is_int(sp_hex_decode(&one, "f9", 1), 0, "decode f9");
    is_int(one, 0xf9, "f9 is 0xf9");

    memset(out, 0, sizeof(out));
    is_int(sp_id_is_zero(out, sizeof(out)), 1, "zero id");
    out[sizeof(out) - 1] = 1;
    is_int(sp_id_is_zero(out, sizeof(out)), 0, "last byte set: not zero");
    out[sizeof(out) - 1] = 0;
    out[0] = 0x80;
    is_int(sp_id_is_zero(out, sizeof(out)), 0, "first byte set: not zero");
}


typedef struct {
    uint8_t  span[SP_SPAN_ID_LEN];
    uint8_t  trace[SP_TRACE_ID_LEN];
} id_pair_t;


static int
read_full(int fd, void *p, size_t n)
{
    ssize_t  r;

    while (n > 0) {
        r = read(fd, p, n);
        if (r <= 0) {
            return -1;
        }
        p = (char *) p + r;
        n -= (size_t) r;
    }

    return 0;
}


/* The child makes its pair with sp_ids_generate(). */
static int  child_both;

/* Forks; the child generates one pair and sends it back. */
static int
child_ids(id_pair_t *out)
{
    int        fds[2], rc, status;
    pid_t      pid;
    id_pair_t  mine;

    if (pipe(fds) != 0) {
        return -1;
    }

    fflush(stdout);

    pid = fork();
    if (pid < 0) {
        return -1;
    }

    if (pid == 0) {
        close(fds[0]);
        if (child_both) {
            sp_ids_generate(mine.trace, mine.span);
        } else {
            sp_span_id_generate(mine.span);
            sp_trace_id_generate(mine.trace);
        }
        _exit(write(fds[1], &mine, sizeof(mine)) == (ssize_t) sizeof(mine)
              ? 0 : 1);
    }

    close(fds[1]);
    rc = read_full(fds[0], out, sizeof(*out));
    close(fds[0]);

    if (waitpid(pid, &status, 0) != pid || rc != 0 || !WIFEXITED(status)
        || WEXITSTATUS(status) != 0)
    {
        return -1;
    }

    return 0;
}


static void
test_fork(void)
{
    id_pair_t  child, child2, parent;
    uint8_t    warm[SP_SPAN_ID_LEN];

    /* Make sure the parent thread is seeded before forking. */
    sp_span_id_generate(warm);

    is_int(child_ids(&child), 0, "child sent its ids");

    /* Without a reseed the child would have produced exactly these. */
    sp_span_id_generate(parent.span);
    sp_trace_id_generate(parent.trace);

    ok(memcmp(child.span, parent.span, SP_SPAN_ID_LEN) != 0,
       "child's first span id differs from the parent's next");
    ok(memcmp(child.trace, parent.trace, SP_TRACE_ID_LEN) != 0,
       "child's first trace id differs from the parent's next");
    ok(!sp_id_is_zero(child.span, SP_SPAN_ID_LEN)
       && !sp_id_is_zero(child.trace, SP_TRACE_ID_LEN),
       "child's ids are not zero");

    /* A second child forked from the same parent state. */
    is_int(child_ids(&child2), 0, "second child sent its ids");
    ok(memcmp(child.span, child2.span, SP_SPAN_ID_LEN) != 0
       && memcmp(child.trace, child2.trace, SP_TRACE_ID_LEN) != 0,
       "two children get different ids");

    sp_span_id_generate(parent.span);
    ok(memcmp(child2.span, parent.span, SP_SPAN_ID_LEN) != 0,
       "second child's span id differs from the parent's next");
}


static void *
thread_main(void *arg)
{
    uint8_t  (*ids)[SP_SPAN_ID_LEN] = arg;
    int      i;

    for (i = 0; i < N_THREAD; i++) {
        sp_span_id_generate(ids[i]);
    }

    return NULL;
}


static void
test_threads(void)
{
    static uint8_t  a[N_THREAD][SP_SPAN_ID_LEN], b[N_THREAD][SP_SPAN_ID_LEN];
    pthread_t       ta, tb;
    int             i, j, common;

    ok(pthread_create(&ta, NULL, thread_main, a) == 0
       && pthread_create(&tb, NULL, thread_main, b) == 0,
       "started two threads");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);

    ok(memcmp(a, b, sizeof(a)) != 0, "the two threads' sequences differ");

    /* Not merely shifted: no id of one thread appears in the other. */
    common = 0;
    for (i = 0; i < N_THREAD; i++) {
        for (j = 0; j < N_THREAD; j++) {
            common += memcmp(a[i], b[j], SP_SPAN_ID_LEN) == 0;
        }
    }
    is_int(common, 0, "no span id shared between the threads");

    /* And neither thread replays the main thread's sequence. */
    for (i = 0; i < N_THREAD; i++) {
        uint8_t  m[SP_SPAN_ID_LEN];

        sp_span_id_generate(m);
        for (j = 0; j < N_THREAD; j++) {
            common += memcmp(m, a[j], SP_SPAN_ID_LEN) == 0;
            common += memcmp(m, b[j], SP_SPAN_ID_LEN) == 0;
        }
    }
    is_int(common, 0, "main thread shares no span id with them");
}


/* Both ids in one call (nginx's request path): random, never zero, and
 * reseeded after a fork as the single calls are. */
static void
test_generate_both(void)
{
    int        i, zero, dup;
    id_pair_t  child, parent;

    for (i = 0; i < N_IDS; i++) {
        sp_ids_generate(trace_ids[i], span_ids[i]);
    }
    /* Without a trace id: the span id alone, still a new one. */
    sp_ids_generate(NULL, span_ids[0]);

    zero = 0;
    for (i = 0; i < N_IDS; i++) {
        zero += sp_id_is_zero(trace_ids[i], SP_TRACE_ID_LEN);
        zero += sp_id_is_zero(span_ids[i], SP_SPAN_ID_LEN);
    }
    is_int(zero, 0, "sp_ids_generate: no all-zero id");

    dup = count_duplicates();
    is_int(dup, 0, "sp_ids_generate: no duplicate among %d pairs", N_IDS);

    child_both = 1;
    is_int(child_ids(&child), 0, "a child made its pair in one call");
    child_both = 0;
    sp_ids_generate(parent.trace, parent.span);
    ok(memcmp(child.span, parent.span, SP_SPAN_ID_LEN) != 0
       && memcmp(child.trace, parent.trace, SP_TRACE_ID_LEN) != 0,
       "the child's pair differs from the parent's next (reseeded)");
}


int
main(void)
{
    test_hex();
    test_generate();
    test_fork();
    test_threads();
    test_generate_both();

    return done_testing();
}
