#ifndef SP_CONTROL_TICK_H
#define SP_CONTROL_TICK_H

#include <stdint.h>

#include "common/control/control_shm.h"

/* The worker/child side of the control API. Everything runs on the
 * exporter's side (its thread, or nginx's event loop through
 * sp_exporter_run), never on the request path: each tick, at most every
 * SP_CONTROL_TICK_MS, publishes this process's counters into its status
 * slot and applies a control change it has not applied yet (sampler pause
 * and rate). Nothing is done in a process that did not attach. */

#define SP_CONTROL_TICK_MS  250

struct sp_exporter;

/* In the worker/child, before or after its exporter starts: takes a
 * status slot. 0, or -1 when every slot is held (then no status, but the
 * control state is still applied). */
int sp_control_worker_attach(sp_control_shm_t *c);
/* Right after the worker's sampler started (before its threads arm their
 * timers, or at once after): applies the control state now rather than
 * at the first tick, so a worker or child started while profiling is
 * paused, or at another rate, does not sample with the configured state
 * until then. Any thread. */
void sp_control_worker_apply(void);

/* At exit: frees the slot; ticks do nothing from then on. */
void sp_control_worker_detach(void);

/* Exporter side, from its loop: the exporter's conf.tick (exporter.h),
 * data unused. Returns the earlier of next and the time of the next tick
 * (monotonic ns). */
uint64_t sp_control_tick(void *data, struct sp_exporter *e, uint64_t now,
    uint64_t next);

#endif
