/* Span queues shared by processes (span_slots.h): forked producers each
 * take a slot and write spans that a consumer in another process reads,
 * every span exactly once and in each producer's order; a producer killed
 * between a span's reservation and its commit holds its slot's queue back
 * only until the next process takes the slot (the record is sealed, and
 * counted); a consumer killed inside a release leaves nothing the next one
 * cannot read on from; a slot held by a process whose pid another process
 * has since been given is free. Every span read is decoded by protobuf-c. */

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "ring_fixture.h"
#include "common/trace/record_ring.h"
#include "common/trace/span_slots.h"
#include "common/export/wire.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"

#define PRODUCERS  4
#define PER_PROC   20000

/* Span number i of producer id (its kind field), of a size that varies
 * with i; placed in the queue when place is set. */
static void
build(sp_span_t *s, unsigned id, uint64_t i, uint8_t *place)
{
    static const uint8_t  tid[16] = { 1 }, sid[8] = { 2 };
    char                  val[900];
    size_t                len = (i * 37 + id * 11) % sizeof(val), k;

    s->place = place;
    sp_span_init(s, SP_SPAN_KIND_SERVER, tid, sid, NULL, 0, 1, i + 1);
    s->kind = (uint8_t) id;
    for (k = 0; k < len; k++) {
        val[k] = (char) ('a' + (i + k) % 26);
    }
    sp_span_set_name(s, val, len < 60 ? len : 60);
    sp_span_attr_cint(s, "n", (int64_t) i);
    if (len > 60) {
        sp_span_attr_str(s, SP_OWNER_SPAN, "big", 3, val + 60, len - 60);
    }
}

/* Pushes span i, half of them built in place; 0 when the queue is full. */
static int
put(sp_span_queue_t *q, sp_span_t *s, unsigned id, uint64_t i)
{
    uint8_t  *place = i % 2 ? sp_span_queue_place(q) : NULL;

    if (place != NULL) {
        build(s, id, i, place);
        sp_span_queue_commit_placed(q, s);
        s->place = NULL;
        return 1;
    }
    build(s, id, i, NULL);
    return sp_span_queue_push(q, s) != 0;
}

/* The consumer's view: the next span number expected of each producer. */
typedef struct {
    uint64_t  next[PRODUCERS + 2];
    uint64_t  bad, out_of_order, taken;
    size_t    room;         /* spans take() accepts before it is "full" */
} seen_t;

static size_t
take(void *data, const sp_span_rec_t *const *recs, size_t n)
{
    seen_t                                *v = data;
    Opentelemetry__Proto__Trace__V1__Span *sp;
    size_t                                 k;

    if (n > v->room) {
        n = v->room;
    }
    for (k = 0; k < n; k++) {
        sp = span_rec_decode(recs[k]);
        if (sp == NULL || (size_t) sp->kind >= PRODUCERS + 2) {
            v->bad++;
        } else {
            if (sp->start_time_unix_nano != v->next[sp->kind] + 1) {
                v->out_of_order++;
            }
            v->next[sp->kind] = sp->start_time_unix_nano;
        }
        opentelemetry__proto__trace__v1__span__free_unpacked(sp, NULL);
    }
    v->taken += n;
    v->room -= n;
    return n;
}

static size_t
drain(sp_span_slots_t *s, seen_t *v, size_t max)
{
    v->room = (size_t) -1;
    return sp_span_slots_drain(s, take, v, max);
}

/* A producer process: takes a slot, queues PER_PROC spans (waiting while
 * its queue is full), exits. */
static void
produce(sp_span_slots_t *s, unsigned id, uint64_t count)
{
    sp_span_t        *sp = calloc(1, sizeof(*sp));
    sp_span_queue_t  *q;
    uint64_t          i;
    int               slot;

    q = sp_span_slots_claim(s, (int32_t) getpid(), &slot);
    if (q == NULL || sp == NULL) {
        _exit(2);
    }
    for (i = 0; i < count; ) {
        if (put(q, sp, id, i)) {
            i++;
        } else {
            usleep(50);
        }
    }
    sp_span_slots_release(s, slot);
    _exit(0);
}

static int
wait_all(pid_t *pids, int n)
{
    int  k, st, good = 0;

    for (k = 0; k < n; k++) {
        if (waitpid(pids[k], &st, 0) == pids[k] && WIFEXITED(st)
            && WEXITSTATUS(st) == 0)
        {
            good++;
        }
    }
    return good;
}

static void
test_processes(void)
{
    sp_span_slots_t       *s = sp_span_slots_create(8, 256 * 1024);
    sp_span_slots_stats_t  st;
    seen_t                 v;
    pid_t                  pids[PRODUCERS];
    unsigned               id;
    int                    k, st_, done = 0;
    time_t                 until = time(NULL) + 60;

    ok(s != NULL, "slots made");
    if (s == NULL) {
        return;
    }
    memset(&v, 0, sizeof(v));
    sp_span_slots_consumer_start(s, (int32_t) getpid());
    for (id = 0; id < PRODUCERS; id++) {
        pids[id] = fork();
        if (pids[id] == 0) {
            produce(s, id, PER_PROC);
        }
    }
    /* This process reads while they write (256 KiB a queue: each wraps
     * and rewinds many times). */
    while (done < PRODUCERS && time(NULL) < until) {
        if (drain(s, &v, 1000) == 0) {
            usleep(100);
        }
        for (k = 0; k < PRODUCERS; k++) {
            if (pids[k] > 0 && waitpid(pids[k], &st_, WNOHANG) == pids[k]) {
                ok(WIFEXITED(st_) && WEXITSTATUS(st_) == 0,
                   "producer %d exited well", k);
                pids[k] = -1;
                done++;
            }
        }
    }
    while (drain(s, &v, 1000) != 0) { }
    is_int(v.taken, PRODUCERS * PER_PROC, "every span read once");
    is_int(v.bad, 0, "every span decodes (protobuf-c), with its producer");
    is_int(v.out_of_order, 0, "in each producer's order");
    for (k = 0; k < PRODUCERS; k++) {
        is_int(v.next[k], PER_PROC, "producer %d's last span read", k);
    }
    sp_span_slots_get_stats(s, &st);
    is_int(st.committed, PRODUCERS * PER_PROC, "committed counted");
    is_int(st.pending, 0, "none pending");
    is_int(st.sealed, 0, "none sealed");
    is_int(st.held, 0, "every slot released at exit");
    is_int(st.claims, PRODUCERS, "claims counted");
    /* Rewinds depend on how the consumer keeps up (test_record_ring). */
    printf("# %llu rewinds\n", (unsigned long long) st.rewinds);
    sp_span_slots_destroy(s);
}

/* A producer killed mid-span: how far it got (0: reserved and header
 * written, 1: header still zero, as between the head's compare-and-swap
 * and the header's store). */
static void
test_killed_producer(int zero_header)
{
    sp_span_slots_t       *s = sp_span_slots_create(2, 64 * 1024);
    sp_span_slots_stats_t  st;
    sp_span_queue_t       *q;
    seen_t                 v;
    pid_t                  pid;
    int                    status, slot = -1;

    memset(&v, 0, sizeof(v));
    sp_span_slots_consumer_start(s, (int32_t) getpid());
    pid = fork();
    if (pid == 0) {
        sp_span_t  *sp = calloc(1, sizeof(*sp));
        uint8_t    *place;
        uint64_t    i;

        q = sp_span_slots_claim(s, (int32_t) getpid(), &slot);
        for (i = 0; i < 10; i++) {
            (void) put(q, sp, 0, i);
        }
        /* Span 10 reserved, written in part, never committed. */
        place = sp_span_queue_place(q);
        if (place == NULL) {
            _exit(3);
        }
        build(sp, 0, 10, place);
        if (zero_header) {
            /* The record's header word: 8 bytes before its sp_span_rec_t
             * (record_ring.c), whose data the place is 3 bytes into. */
            memset(place - 3 - sizeof(sp_span_rec_t) - 8, 0, 8);
        }
        kill(getpid(), SIGKILL);
        _exit(4);
    }
    waitpid(pid, &status, 0);
    ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
       "%s: the producer was killed mid-span",
       zero_header ? "header unwritten" : "header written");
    is_int(drain(s, &v, 1000), 10, "the spans before it read");
    is_int(drain(s, &v, 1000), 0, "then held back, with no one after it");

    /* The next process in that slot (the dead one's, the other is free
     * too: the first free one is taken, which is the same). */
    pid = fork();
    if (pid == 0) {
        produce(s, 1, 20);
    }
    ok(wait_all(&pid, 1) == 1, "a new producer took the slot and wrote 20");
    is_int(drain(s, &v, 1000), 20, "its spans read past the sealed record");
    sp_span_slots_get_stats(s, &st);
    is_int(st.sealed, 1, "one record sealed (counted)");
    is_int(st.pending, 0, "nothing pending");
    is_int(v.bad, 0, "no garbage read");
    is_int(v.next[1], 20, "the new producer's spans all there");
    is_int(st.claims, 2, "two claims");

    /* And the queue goes on: many more through it (wrapping over the
     * sealed bytes, which must read as free space). */
    pid = fork();
    if (pid == 0) {
        produce(s, 2, 5000);
    }
    memset(&v.next, 0, sizeof(v.next));
    while (waitpid(pid, &status, WNOHANG) == 0) {
        (void) drain(s, &v, 1000);
    }
    while (drain(s, &v, 1000) != 0) { }
    is_int(v.next[2], 5000, "5,000 more after it, all read");
    is_int(v.out_of_order, 0, "in order");
    is_int(v.bad, 0, "none garbled");
    sp_span_slots_destroy(s);
}

/* A producer that holds a span open is not sealed while it lives. */
static void
test_live_not_sealed(void)
{
    sp_span_slots_t       *s = sp_span_slots_create(1, 64 * 1024);
    sp_span_slots_stats_t  st;
    sp_span_queue_t       *q;
    sp_span_t             *sp = calloc(1, sizeof(*sp));
    sp_span_t             *other = calloc(1, sizeof(*other));
    seen_t                 v;
    uint8_t               *place;
    int                    slot;

    memset(&v, 0, sizeof(v));
    sp_span_slots_consumer_start(s, (int32_t) getpid());
    q = sp_span_slots_claim(s, (int32_t) getpid(), &slot);
    ok(q != NULL && slot == 0, "this process took the slot");
    (void) put(q, sp, 3, 0);
    place = sp_span_queue_place(q);
    build(sp, 3, 1, place);
    (void) put(q, other, 4, 0);  /* a span queued after the open one */
    is_int(drain(s, &v, 100), 1, "the span before the open one read");
    is_int(drain(s, &v, 100), 0, "the open one holds back the next");
    ok(sp_span_slots_claim(s, (int32_t) getpid() + 1, &slot) == NULL,
       "a live process's slot is not taken");
    sp_span_queue_commit_placed(q, sp);
    sp->place = NULL;
    is_int(drain(s, &v, 100), 2, "committed: both read");
    sp_span_slots_get_stats(s, &st);
    is_int(st.sealed, 0, "nothing sealed");
    is_int(st.held, 1, "the slot held");
    sp_span_slots_release(s, 0);
    free(sp);
    free(other);
    sp_span_slots_destroy(s);
}

/* A taker with room for only some: the rest come again, in order; and a
 * consumer that takes over reads again what was peeked, not released. */
static void
test_partial_and_restart(void)
{
    sp_span_slots_t  *s = sp_span_slots_create(3, 64 * 1024);
    sp_span_queue_t  *q[3];
    sp_span_t        *sp = calloc(1, sizeof(*sp));
    seen_t            v;
    int               slot, k, i;
    const sp_span_rec_t  *out[8];

    memset(&v, 0, sizeof(v));
    sp_span_slots_consumer_start(s, (int32_t) getpid());
    for (k = 0; k < 3; k++) {
        /* Three slots, as for three live processes. */
        static const int  who[3] = { 0, 1, 2 };
        int32_t           pid = who[k] == 0 ? (int32_t) getpid()
                                : who[k] == 1 ? (int32_t) getppid() : 1;

        q[k] = sp_span_slots_claim(s, pid, &slot);
        for (i = 0; i < 30; i++) {
            (void) put(q[k], sp, (unsigned) k, (uint64_t) i);
        }
    }
    v.room = 25;
    is_int(sp_span_slots_drain(s, take, &v, 1000), 25, "25 taken, full");
    v.room = 25;
    is_int(sp_span_slots_drain(s, take, &v, 1000), 25, "25 more");
    is_int(drain(s, &v, 1000), 40, "the other 40");
    is_int(v.out_of_order, 0, "in order per producer, across the stops");
    is_int(v.next[0] + v.next[1] + v.next[2], 90, "all 90 once");

    /* Peeked and not released, then a new consumer. */
    for (i = 0; i < 5; i++) {
        (void) put(q[1], sp, 1, (uint64_t) (30 + i));
    }
    is_int(sp_span_queue_peek(q[1], out, 8), 5, "a consumer peeks 5");
    is_int(sp_span_slots_consumer_start(s, (int32_t) getpid()), 0,
           "(still the consumer: nothing reset)");
    sp_span_slots_consumer_stop(s, (int32_t) getpid());
    is_int(sp_span_slots_consumer_start(s, (int32_t) getpid()), 0,
           "let go, then a consumer again");
    is_int(drain(s, &v, 1000), 5, "the next consumer reads the 5 again");
    is_int(v.next[1], 35, "in order");
    free(sp);
    sp_span_slots_destroy(s);
}

/* A consumer killed inside a release (its bytes half zeroed, the tail not
 * moved): the next one finishes it and reads on. */
static void
test_consumer_killed_in_release(void)
{
    sp_span_slots_t  *s = sp_span_slots_create(1, 64 * 1024);
    sp_span_queue_t  *q;
    sp_span_t        *sp = calloc(1, sizeof(*sp));
    seen_t            v;
    int               slot, i, status;
    pid_t             pid;

    memset(&v, 0, sizeof(v));
    is_int(sp_span_slots_consumer_start(s, (int32_t) getpid()), 0,
           "this process the consumer");
    q = sp_span_slots_claim(s, (int32_t) getpid(), &slot);
    for (i = 0; i < 40; i++) {
        (void) put(q, sp, 5, (uint64_t) i);
    }
    pid = fork();
    if (pid == 0) {
        /* Not while the parent is. */
        _exit(sp_span_slots_consumer_start(s, (int32_t) getpid()) == -1
              ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "another process cannot start while this one consumes");
    sp_span_slots_consumer_stop(s, (int32_t) getpid());
    pid = fork();
    if (pid == 0) {
        if (sp_span_slots_consumer_start(s, (int32_t) getpid()) != 0) {
            _exit(1);
        }
        /* The consumer: stopped by SIGKILL from inside memset, as a
         * release zeroes 20 spans' bytes (a signal from a timer). */
        const sp_span_rec_t  *out[20];

        (void) sp_span_queue_peek(q, out, 20);
        /* Half way, by hand: releasing_to stored, some bytes zeroed. */
        {
            sp_record_ring_t  *r = (sp_record_ring_t *) (void *) q;
            uint64_t           t = atomic_load(&r->tail);

            atomic_store(&r->releasing_to, sp_span_queue_mark(q));
            memset(r->buf + (t & r->mask), 0,
                   (size_t) (sp_span_queue_mark(q) - t) / 2);
        }
        kill(getpid(), SIGKILL);
        _exit(1);
    }
    waitpid(pid, &status, 0);
    ok(WIFSIGNALED(status), "the consumer (a child) killed in its release");
    is_int(sp_span_slots_consumer_start(s, (int32_t) getpid()), 0,
           "the next one takes over from the one gone");
    is_int(drain(s, &v, 1000), 20, "the next one reads the other 20");
    is_int(v.bad, 0, "none garbled");
    is_int(v.next[5], 40, "from span 20 on, in order");
    is_int(v.out_of_order, 1, "(the first read is 21st: one jump)");
    for (i = 40; i < 400; i++) {
        (void) put(q, sp, 5, (uint64_t) i);
        if (i % 50 == 0) {
            (void) drain(s, &v, 1000);
        }
    }
    (void) drain(s, &v, 1000);
    is_int(v.next[5], 400, "and on, over the bytes released");
    is_int(v.bad, 0, "none garbled");
    sp_span_slots_release(s, slot);
    free(sp);
    sp_span_slots_destroy(s);
}

/* The next fork of this pid namespace gets pid (root: ns_last_pid); the
 * child pauses. Returns it, or -1 (not root, or another process took the
 * pid first). */
static pid_t
fork_as(pid_t pid)
{
    char     buf[32];
    int      fd, n, tries, status;
    pid_t    child;

    for (tries = 0; tries < 20; tries++) {
        fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            return -1;
        }
        n = snprintf(buf, sizeof(buf), "%d", (int) pid - 1);
        if (write(fd, buf, (size_t) n) != n) {
            close(fd);
            return -1;
        }
        close(fd);
        child = fork();
        if (child == 0) {
            pause();
            _exit(0);
        }
        if (child == pid) {
            return child;
        }
        if (child > 0) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
        }
    }
    return -1;
}

/* A producer killed in its slot, its pid given to another process since
 * (pid_max wraps; 32768 on many systems): that process is not the one
 * that holds the slot, which is free for the next producer. */
static void
test_pid_reused(void)
{
    sp_span_slots_t  *s = sp_span_slots_create(1, 64 * 1024);
    pid_t             first, second;
    int               status, slot = -1;

    first = fork();
    if (first == 0) {
        if (sp_span_slots_claim(s, (int32_t) getpid(), &slot) == NULL) {
            _exit(1);
        }
        kill(getpid(), SIGKILL);
        _exit(2);
    }
    waitpid(first, &status, 0);
    ok(WIFSIGNALED(status), "a producer took the only slot, killed in it");
    /* A start time is counted in clock ticks (10 ms): a pid given again
     * within the same tick is not told apart. Real reuse is pid_max forks
     * later. */
    nanosleep(&(struct timespec) { 0, 30 * 1000 * 1000 }, NULL);
    second = fork_as(first);
    if (second < 0) {
        ok(1, "# SKIP pid %d not given again (needs root)", (int) first);
        sp_span_slots_destroy(s);
        return;
    }
    is_int(sp_span_slots_live(s), 0, "the process given pid %d since is not "
           "the one that holds the slot", (int) second);
    ok(sp_span_slots_claim(s, (int32_t) getpid(), &slot) != NULL && slot == 0,
       "the slot is free for the next producer");
    sp_span_slots_release(s, slot);
    /* The consumer's role likewise. */
    first = fork();
    if (first == 0) {
        _exit(sp_span_slots_consumer_start(s, (int32_t) getpid()) == 0
              ? 0 : 1);
    }
    waitpid(first, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a consumer took the role and exited without letting go");
    kill(second, SIGKILL);
    waitpid(second, &status, 0);
    nanosleep(&(struct timespec) { 0, 30 * 1000 * 1000 }, NULL);
    second = fork_as(first);
    if (second < 0) {
        ok(1, "# SKIP pid %d not given again", (int) first);
    } else {
        is_int(sp_span_slots_consumer_start(s, (int32_t) getpid()), 0,
               "the process given its pid since does not hold the role");
        kill(second, SIGKILL);
        waitpid(second, &status, 0);
    }
    sp_span_slots_destroy(s);
}

int
main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    test_processes();
    test_killed_producer(0);
    test_killed_producer(1);
    test_live_not_sealed();
    test_partial_and_restart();
    test_consumer_killed_in_release();
    test_pid_reused();
    return done_testing();
}
