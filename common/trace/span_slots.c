#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/trace/span_slots.h"

#define PAGE      4096u
/* Where the last producers to take a slot found its queue's head: a
 * record held back before the earliest of them that is past it ends
 * there. More than this many processes taking a slot between two drains
 * (each killed mid-span) is not told apart: the padding then ends at the
 * earliest one kept, and the spans between are lost with it. */
#define ATTACHES  8u
/* Spans given to take() at once. */
#define TAKE_MAX  256u
/* A process is named by its pid and its start time (clock ticks since
 * boot, /proc/PID/stat), in one word that is compared and swapped at once:
 * a pid alone may be another process's by the time it is looked at (with
 * pid_max 32768, a server that forks CGI scripts goes round it in
 * minutes), and a slot or the consumer's role would then stay held by a
 * process that never took it. pid_max is at most 2^22. A start time is
 * counted in clock ticks: a pid given again within the same tick (10 ms)
 * is not told apart, and reuse takes pid_max forks. */
#define PID_BITS  22u
#define PID_MASK  ((UINT64_C(1) << PID_BITS) - 1)

typedef struct {
    _Alignas(64) _Atomic uint64_t owner;        /* 0: free */
    _Atomic uint64_t              attaches;     /* processes that took it */
    _Atomic uint64_t              attach_head[ATTACHES];
} slot_t;

struct sp_span_slots {
    size_t             nslots;
    size_t             slot_bytes;   /* a queue's footprint, paged */
    size_t             map_bytes;
    size_t             queue_bytes;
    _Atomic uint64_t   claims;
    _Atomic uint64_t   consumer;     /* its owner word; 0: none */
    /* The consumer's own. */
    _Atomic uint64_t   sealed;
    size_t             next_slot;
    slot_t            *slots;
    unsigned char     *queues;
};

static size_t
round_page(size_t n)
{
    return (n + PAGE - 1) & ~(size_t) (PAGE - 1);
}

static sp_span_queue_t *
queue_of(const sp_span_slots_t *s, size_t i)
{
    return (sp_span_queue_t *) (void *) (s->queues + i * s->slot_bytes);
}

sp_span_slots_t *
sp_span_slots_create(size_t nslots, size_t bytes_per_slot)
{
    sp_span_slots_t  *s;
    size_t            head, slot_bytes, total, i;
    unsigned char    *m;

    if (nslots == 0 || bytes_per_slot < PAGE
        || (bytes_per_slot & (bytes_per_slot - 1)) != 0)
    {
        return NULL;
    }
    head = round_page(sizeof(*s) + 64 + nslots * sizeof(slot_t));
    slot_bytes = round_page(sp_span_queue_footprint(bytes_per_slot));
    total = head + nslots * slot_bytes;
    /* Zero, and only the pages a queue uses are ever allocated. */
    m = mmap(NULL, total, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        return NULL;
    }
    s = (sp_span_slots_t *) (void *) m;
    s->nslots = nslots;
    s->slot_bytes = slot_bytes;
    s->map_bytes = total;
    s->queue_bytes = bytes_per_slot;
    s->slots = (slot_t *) (void *) (m + ((sizeof(*s) + 63) & ~(size_t) 63));
    s->queues = m + head;
    for (i = 0; i < nslots; i++) {
        if (sp_span_queue_init_in(queue_of(s, i), bytes_per_slot) == NULL) {
            munmap(m, total);
            return NULL;
        }
    }
    return s;
}

void
sp_span_slots_destroy(sp_span_slots_t *s)
{
    if (s != NULL) {
        munmap(s, s->map_bytes);
    }
}

size_t
sp_span_slots_count(const sp_span_slots_t *s)
{
    return s->nslots;
}

/* The process's start time, in clock ticks since boot; 0 when it cannot
 * be read (gone, or /proc hidden). */
static uint64_t
start_ticks(int32_t pid)
{
    char                path[32], buf[512], *p, *end;
    int                 fd, field;
    ssize_t             n;
    unsigned long long  v;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    /* After the name (which may hold spaces and parentheses): the state
     * is field 3, the start time field 22. */
    p = strrchr(buf, ')');
    if (p == NULL) {
        return 0;
    }
    for (field = 2; field < 22 && p != NULL; field++) {
        p = strchr(p + 1, ' ');
    }
    if (p == NULL) {
        return 0;
    }
    v = strtoull(p + 1, &end, 10);
    return end != p + 1 ? (uint64_t) v : 0;
}

static uint64_t
owner_of(int32_t pid)
{
    return (start_ticks(pid) << PID_BITS) | ((uint64_t) pid & PID_MASK);
}

/* A process that cannot write any more: it does not exist, or its pid is
 * another process's now. (One of another user answers EPERM: alive.) */
static int
gone(uint64_t owner)
{
    pid_t     pid = (pid_t) (owner & PID_MASK);
    uint64_t  start = owner >> PID_BITS, now;

    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return 1;
    }
    if (start == 0) {
        return 0;       /* its start time was not known */
    }
    now = start_ticks(pid);
    return now != 0 && now != start;
}

size_t
sp_span_slots_queue_bytes(const sp_span_slots_t *s)
{
    return s->queue_bytes;
}

size_t
sp_span_slots_live(const sp_span_slots_t *s)
{
    size_t    i, n = 0;
    uint64_t  p;

    for (i = 0; i < s->nslots; i++) {
        p = atomic_load_explicit(&s->slots[i].owner, memory_order_relaxed);
        n += p != 0 && !gone(p);
    }
    return n;
}

sp_span_queue_t *
sp_span_slots_claim(sp_span_slots_t *s, int32_t pid, int *slot)
{
    size_t    i;
    uint64_t  p, a, me = owner_of(pid);
    slot_t   *sl;

    /* The first slot free or whose process is gone: a gone one's queue is
     * read on from its dead record only once it is taken again. (A held
     * slot costs a kill() and, for a live one, a read of /proc: once per
     * slot at a child's start.) */
    for (i = 0; i < s->nslots; i++) {
        sl = &s->slots[i];
        p = atomic_load_explicit(&sl->owner, memory_order_acquire);
        if (p != 0 && (p == me || !gone(p))) {
            continue;
        }
        if (!atomic_compare_exchange_strong(&sl->owner, &p, me)) {
            continue;
        }
        /* The queue's head now: the end of whatever a gone producer
         * reserved. Published before this process reserves anything. */
        a = atomic_load_explicit(&sl->attaches, memory_order_relaxed);
        atomic_store_explicit(&sl->attach_head[a % ATTACHES],
                              sp_span_queue_head(queue_of(s, i)),
                              memory_order_relaxed);
        atomic_store_explicit(&sl->attaches, a + 1, memory_order_release);
        atomic_fetch_add_explicit(&s->claims, 1, memory_order_relaxed);
        *slot = (int) i;
        return queue_of(s, i);
    }
    return NULL;
}

void
sp_span_slots_release(sp_span_slots_t *s, int slot)
{
    if (slot >= 0 && (size_t) slot < s->nslots) {
        atomic_store_explicit(&s->slots[slot].owner, 0,
                              memory_order_release);
    }
}

int
sp_span_slots_consumer_start(sp_span_slots_t *s, int32_t pid)
{
    size_t    i;
    uint64_t  p = atomic_load_explicit(&s->consumer, memory_order_acquire);
    uint64_t  me;

    if (p != 0 && (p & PID_MASK) == (uint64_t) pid && !gone(p)) {
        return 0;       /* this process already */
    }
    if (p != 0 && !gone(p)) {
        return -1;
    }
    me = owner_of(pid);
    if (!atomic_compare_exchange_strong(&s->consumer, &p, me)) {
        return -1;
    }
    for (i = 0; i < s->nslots; i++) {
        sp_span_queue_consumer_reset(queue_of(s, i));
    }
    s->next_slot = 0;
    return 0;
}

void
sp_span_slots_consumer_stop(sp_span_slots_t *s, int32_t pid)
{
    uint64_t  p = atomic_load_explicit(&s->consumer, memory_order_acquire);

    if ((p & PID_MASK) == (uint64_t) pid) {
        (void) atomic_compare_exchange_strong(&s->consumer, &p, 0);
    }
}

/* The slot's queue held back at its next record by a producer gone since
 * (one took the slot after that record was reserved): sealed up to where
 * the first such one found the head. 1 when sealed. */
static int
seal_gone(sp_span_slots_t *s, size_t i, sp_span_queue_t *q)
{
    slot_t    *sl = &s->slots[i];
    uint64_t   pos = sp_span_queue_next(q), a, k, h, end = 0;

    if (pos >= sp_span_queue_head(q)) {
        return 0;       /* nothing reserved past what was read */
    }
    a = atomic_load_explicit(&sl->attaches, memory_order_acquire);
    for (k = a > ATTACHES ? a - ATTACHES : 0; k < a; k++) {
        h = atomic_load_explicit(&sl->attach_head[k % ATTACHES],
                                 memory_order_relaxed);
        if (h > pos && (end == 0 || h < end)) {
            end = h;
        }
    }
    if (end == 0 || !sp_span_queue_seal(q, end)) {
        return 0;
    }
    atomic_fetch_add_explicit(&s->sealed, 1, memory_order_relaxed);
    return 1;
}

size_t
sp_span_slots_drain(sp_span_slots_t *s, sp_span_slots_take_fn take,
    void *data, size_t max)
{
    const sp_span_rec_t  *recs[TAKE_MAX];
    size_t                taken = 0, i, idx, n, k, want;
    sp_span_queue_t      *q;

    for (i = 0; i < s->nslots && taken < max; i++) {
        idx = (s->next_slot + i) % s->nslots;
        q = queue_of(s, idx);
        while (taken < max) {
            want = max - taken < TAKE_MAX ? max - taken : TAKE_MAX;
            n = sp_span_queue_peek(q, recs, want);
            if (n == 0) {
                if (seal_gone(s, idx, q)) {
                    continue;
                }
                break;
            }
            k = take(data, recs, n);
            if (k > 0) {
                sp_span_queue_release(q, k);
                taken += k;
            }
            if (k < n) {
                /* The taker is full: the rest are given again first. */
                sp_span_queue_unpeek(q);
                s->next_slot = idx;
                return taken;
            }
        }
        if (taken >= max) {
            /* This slot may hold more: the next drain starts after it,
             * so that one busy process does not starve the others. */
            s->next_slot = (idx + 1) % s->nslots;
            return taken;
        }
    }
    return taken;
}

void
sp_span_slots_get_stats(const sp_span_slots_t *s, sp_span_slots_stats_t *st)
{
    size_t            i;
    sp_span_queue_t  *q;

    memset(st, 0, sizeof(*st));
    for (i = 0; i < s->nslots; i++) {
        q = queue_of(s, i);
        st->committed += sp_span_queue_committed(q);
        st->dropped += sp_span_queue_dropped(q);
        st->rewinds += sp_span_queue_rewinds(q);
        st->pending += sp_span_queue_pending(q);
        st->held += atomic_load_explicit(&s->slots[i].owner,
                                         memory_order_relaxed) != 0;
    }
    st->sealed = atomic_load_explicit(&((sp_span_slots_t *) s)->sealed,
                                      memory_order_relaxed);
    st->claims = atomic_load_explicit(&((sp_span_slots_t *) s)->claims,
                                      memory_order_relaxed);
}
