#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "common/control/control_shm.h"
#include "common/profile/sampler.h"

/* The wanted state packs into one word, so it is read and changed
 * atomically without a lock: generation << 32 | memory on << 30 | wall rate
 * << 19 | wall on << 18 | cpu off << 17 | profiling << 16 | rate (all-zero
 * type bits: CPU only, wall rate 0: the default). */
#define PACK(gen, prof, rate)                                                 \
    (((uint64_t) (gen) << 32) | ((uint64_t) ((prof) ? 1 : 0) << 16)           \
     | (uint64_t) ((rate) & 0xffff))
#define GEN(w)    ((w) >> 32)
#define PROF(w)   ((int) (((w) >> 16) & 1))
#define RATE(w)   ((unsigned) ((w) & 0xffff))
#define TYPE_BITS(w)  ((w) & ((uint64_t) 0x3fff << 17))
#define CPU_OFF   ((uint64_t) 1 << 17)
#define WALL_ON   ((uint64_t) 1 << 18)
#define WALL_RATE(w)  ((unsigned) (((w) >> 19) & 0x7ff))
#define MEM_ON    ((uint64_t) 1 << 30)
#define TYPES_PACK(cpu, wall, wrate, mem)                                     \
    (((cpu) ? 0 : CPU_OFF) | ((wall) ? WALL_ON : 0)                           \
     | ((uint64_t) ((wrate) & 0x7ff) << 19) | ((mem) ? MEM_ON : 0))

static void
unpack(uint64_t w, sp_control_state_t *st)
{
    st->profiling = PROF(w);
    st->rate_hz = RATE(w);
    st->generation = GEN(w);
    st->types = ((w & CPU_OFF) ? 0 : SP_SAMPLER_TYPE_CPU)
                | ((w & WALL_ON) ? SP_SAMPLER_TYPE_WALL : 0)
                | ((w & MEM_ON) ? SP_SAMPLER_TYPE_MEMORY : 0);
    st->wall_rate_hz = WALL_RATE(w) ? WALL_RATE(w) : 100;
}

typedef struct {
    _Alignas(64) _Atomic int32_t   pid;      /* 0: free */
    _Atomic uint32_t               seq;      /* odd while written */
    _Atomic uint64_t               updated_ns;
    _Atomic uint64_t               v[SP_STATUS_NFIELDS];
} slot_t;

struct sp_control_shm {
    uint32_t              magic;
    uint32_t              nslots;
    _Atomic uint64_t      wanted;
    uint64_t              configured;        /* generation 0 */
    slot_t                slots[SP_CONTROL_SLOTS];
};

/* The block is cache-line aligned (its slots are written by different
 * workers); the memory servers give may not be (APR's anonymous shared
 * memory starts 8 bytes in), so the size has room to align it. */
#define SP_CONTROL_ALIGN  64

size_t
sp_control_shm_size(void)
{
    return sizeof(sp_control_shm_t) + SP_CONTROL_ALIGN;
}

static sp_control_shm_t *
aligned(void *mem)
{
    uintptr_t  a = ((uintptr_t) mem + SP_CONTROL_ALIGN - 1)
                   & ~(uintptr_t) (SP_CONTROL_ALIGN - 1);

    return (sp_control_shm_t *) a;
}

static unsigned
clamp_rate(unsigned r)
{
    return r < 1 ? 1 : r > SP_CONTROL_MAX_RATE ? SP_CONTROL_MAX_RATE : r;
}

sp_control_shm_t *
sp_control_shm_init(void *mem, int profiling, unsigned rate_hz)
{
    sp_control_shm_t  *c = aligned(mem);

    memset(c, 0, sizeof(*c));
    c->nslots = SP_CONTROL_SLOTS;
    c->configured = PACK(0, profiling, clamp_rate(rate_hz));
    /* Generation 1: a worker starting with nothing applied applies it. */
    atomic_store(&c->wanted, PACK(1, profiling, clamp_rate(rate_hz)));
    c->magic = SP_CONTROL_MAGIC;
    return c;
}

sp_control_shm_t *
sp_control_shm_reset(void *mem, int profiling, unsigned rate_hz)
{
    sp_control_shm_t  *c = aligned(mem);
    uint64_t           w;

    if (c->magic != SP_CONTROL_MAGIC || c->nslots != SP_CONTROL_SLOTS) {
        return NULL;
    }
    c->configured = PACK(0, profiling, clamp_rate(rate_hz));
    w = atomic_load(&c->wanted);
    atomic_store(&c->wanted,
                 PACK(GEN(w) + 1, profiling, clamp_rate(rate_hz)));
    /* (the types come back with sp_control_shm_configure_types) */
    return c;
}

void
sp_control_shm_configure_types(sp_control_shm_t *c, unsigned types,
    unsigned wall_rate_hz)
{
    uint64_t  t = TYPES_PACK(types & SP_SAMPLER_TYPE_CPU,
                             types & SP_SAMPLER_TYPE_WALL,
                             clamp_rate(wall_rate_hz),
                             types & SP_SAMPLER_TYPE_MEMORY);
    uint64_t  w = atomic_load(&c->wanted);

    c->configured = (c->configured & ~TYPE_BITS(c->configured)) | t;
    atomic_store(&c->wanted, (w & ~TYPE_BITS(w)) | t);
}

void
sp_control_get(const sp_control_shm_t *c, sp_control_state_t *st)
{
    unpack(atomic_load(&((sp_control_shm_t *) c)->wanted), st);
}

void
sp_control_configured(const sp_control_shm_t *c, sp_control_state_t *st)
{
    unpack(c->configured, st);
    st->generation = 0;
}

void
sp_control_set(sp_control_shm_t *c, int profiling, unsigned rate_hz,
    sp_control_state_t *out)
{
    sp_control_set_types(c, profiling, rate_hz, -1, -1, 0, -1, out);
}

void
sp_control_set_types(sp_control_shm_t *c, int profiling, unsigned rate_hz,
    int cpu, int wall, unsigned wall_rate_hz, int memory,
    sp_control_state_t *out)
{
    uint64_t  w, n, t;

    w = atomic_load(&c->wanted);
    do {
        n = PACK(GEN(w) + 1, profiling < 0 ? PROF(w) : profiling,
                 rate_hz == 0 ? RATE(w) : clamp_rate(rate_hz));
        t = TYPES_PACK(cpu < 0 ? !(w & CPU_OFF) : cpu,
                       wall < 0 ? !!(w & WALL_ON) : wall,
                       wall_rate_hz == 0 ? WALL_RATE(w)
                                         : clamp_rate(wall_rate_hz),
                       memory < 0 ? !!(w & MEM_ON) : memory);
        n |= t;
    } while (!atomic_compare_exchange_weak(&c->wanted, &w, n));
    unpack(n, out);
}

/* A slot's process is gone (a worker killed without its exit hook). */
static int
gone(int32_t pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

int
sp_control_slot_claim(sp_control_shm_t *c, int32_t pid)
{
    int32_t   old;
    unsigned  i, pass;

    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < c->nslots; i++) {
            old = atomic_load(&c->slots[i].pid);
            if (old == pid) {
                return (int) i;         /* ours already (pid reused) */
            }
            if ((old == 0 || (pass == 1 && gone(old)))
                && atomic_compare_exchange_strong(&c->slots[i].pid, &old, pid))
            {
                atomic_store(&c->slots[i].updated_ns, 0);
                for (unsigned k = 0; k < SP_STATUS_NFIELDS; k++) {
                    atomic_store_explicit(&c->slots[i].v[k], 0,
                                          memory_order_relaxed);
                }
                return (int) i;
            }
        }
    }
    return -1;
}

void
sp_control_slot_release(sp_control_shm_t *c, int slot)
{
    if (slot >= 0 && (unsigned) slot < c->nslots) {
        atomic_store(&c->slots[slot].pid, 0);
    }
}

void
sp_control_slot_publish(sp_control_shm_t *c, int slot, const sp_status_t *st)
{
    slot_t    *s = &c->slots[slot];
    uint32_t   q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    unsigned   k;

    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->updated_ns, st->updated_ns,
                          memory_order_relaxed);
    for (k = 0; k < SP_STATUS_NFIELDS; k++) {
        atomic_store_explicit(&s->v[k], st->v[k], memory_order_relaxed);
    }
    atomic_store_explicit(&s->seq, q + 2, memory_order_release);
}

int
sp_control_slot_read(const sp_control_shm_t *cc, int i, sp_status_t *st)
{
    sp_control_shm_t  *c = (sp_control_shm_t *) cc;
    slot_t            *s;
    sp_status_t        tmp;
    uint32_t           q0, q1;
    unsigned           k, tries;

    if (i < 0 || (unsigned) i >= c->nslots) {
        return 0;
    }
    s = &c->slots[i];
    tmp.pid = atomic_load(&s->pid);
    if (tmp.pid == 0 || gone(tmp.pid)) {
        return 0;
    }
    /* The writer publishes at most a few times a second: a handful of
     * retries always finds it idle. */
    for (tries = 0; tries < 1000; tries++) {
        q0 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q0 & 1) {
            continue;
        }
        tmp.updated_ns = atomic_load_explicit(&s->updated_ns,
                                              memory_order_relaxed);
        for (k = 0; k < SP_STATUS_NFIELDS; k++) {
            tmp.v[k] = atomic_load_explicit(&s->v[k], memory_order_relaxed);
        }
        atomic_thread_fence(memory_order_acquire);
        q1 = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (q0 == q1) {
            *st = tmp;
            return 1;
        }
    }
    return 0;
}
