#ifndef SP_CONTROL_SHM_H
#define SP_CONTROL_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "common/control/status_fields.h"

/* The control API's shared memory: one block the server makes before its
 * workers/children start (an nginx shared zone, an APR shared memory
 * segment made by Apache's parent), mapped at the same place in all of
 * them. It holds
 *   - the control state: profiling on/off and the sampler rate wanted, and
 *     a generation bumped by every change (the workers apply a change
 *     when they see a generation they have not applied);
 *   - the configured state, which a reload/graceful restart brings back;
 *   - one status slot per worker/child, which only that process writes
 *     (seqlock: readers retry a slot being written).
 * Lock-free: 64-bit atomics are address-free on the supported targets.
 * No pointers inside: the block may map at another address. */

#define SP_CONTROL_SLOTS   256        /* workers/children at once */
#define SP_CONTROL_MAGIC   0x53504331u /* "SPC1" */
#define SP_CONTROL_MAX_RATE  1000

typedef struct {
    int       profiling;           /* 0/1 */
    unsigned  rate_hz;             /* 1..SP_CONTROL_MAX_RATE */
    uint64_t  generation;
    /* Sample types (sampler.h's SP_SAMPLER_TYPE_CPU | _WALL | _MEMORY;
     * default CPU)
     * and the wall-clock rate (default 100). */
    unsigned  types;
    unsigned  wall_rate_hz;
} sp_control_state_t;

typedef struct sp_control_shm sp_control_shm_t;

/* Bytes the block needs. */
size_t sp_control_shm_size(void);

/* Makes the block in mem (sp_control_shm_size() bytes, zeroed or not, any
 * alignment: the block returned is 64-byte aligned within them):
 * configured and wanted state both the given one, every slot free. */
sp_control_shm_t *sp_control_shm_init(void *mem, int profiling,
    unsigned rate_hz);

/* A block made before (nginx reuses a zone across reloads): the wanted
 * state goes back to the new configured one, with a new generation; the
 * slots stay (old workers still finishing hold theirs). NULL when mem does
 * not hold a block. */
sp_control_shm_t *sp_control_shm_reset(void *mem, int profiling,
    unsigned rate_hz);

/* Sets the configured (and wanted) sample types and wall rate, right after
 * init or reset, before any worker reads the block. */
void sp_control_shm_configure_types(sp_control_shm_t *c, unsigned types,
    unsigned wall_rate_hz);

/* The wanted state (one atomic read). */
void sp_control_get(const sp_control_shm_t *c, sp_control_state_t *st);
/* The configured one (generation 0). */
void sp_control_configured(const sp_control_shm_t *c, sp_control_state_t *st);

/* Changes the wanted state: profiling -1 and rate 0 leave that part as it
 * is. Any process, any thread; returns the new state. */
void sp_control_set(sp_control_shm_t *c, int profiling, unsigned rate_hz,
    sp_control_state_t *out);
/* The same with the types: cpu/wall/memory -1 leave that type as it is,
 * 0 or 1 switch it; wall_rate_hz 0 leaves it. */
void sp_control_set_types(sp_control_shm_t *c, int profiling,
    unsigned rate_hz, int cpu, int wall, unsigned wall_rate_hz, int memory,
    sp_control_state_t *out);

/* ---- status slots ---- */

/* Takes a free slot (or one whose process is gone) for pid; -1 when all
 * are held. */
int sp_control_slot_claim(sp_control_shm_t *c, int32_t pid);
void sp_control_slot_release(sp_control_shm_t *c, int slot);

/* The slot's owner only. */
void sp_control_slot_publish(sp_control_shm_t *c, int slot,
    const sp_status_t *st);

/* A consistent copy of slot i: 1 when it is held by a live process, else
 * 0 (st untouched). */
int sp_control_slot_read(const sp_control_shm_t *c, int i, sp_status_t *st);

#endif
