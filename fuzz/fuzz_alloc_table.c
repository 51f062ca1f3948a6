/* alloc_table: the live table of sampled allocations (alloc_table.h).
 * The input is a sequence of operations (4 bytes each: insert or remove,
 * which address of a small pool, a size) run against a 64- or 128-slot
 * table and a plain model, as t/unit/test_alloc_table.c does with random
 * sequences. Properties: remove finds exactly what the model holds and
 * gives back its value; the live count, the refused-insert count and the
 * walk match the model; the capacity bound holds; the filter never misses
 * a live address, and every counter is back to zero once emptied. */

#include <stdint.h>
#include <string.h>

#include "common/profile/alloc_table.h"
#include "fuzz/fuzz.h"
#include "t/unit/alloc_table_model.h"

typedef struct {
    const uint8_t  *data;
    size_t          size, pos;
} input_t;

static uint32_t
next_op(void *state)
{
    input_t   *in = state;
    uint32_t   v = 0;
    size_t     i;

    for (i = 0; i < 4; i++) {
        v = (v << 8) | (in->pos < in->size ? in->data[in->pos] : 0);
        in->pos++;
    }
    return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sp_alloc_table_t  t[2];
    static int               ready;
    static alloc_model_t     m;
    input_t                  in = { data, size, 1 };
    sp_alloc_table_t        *tab;
    const char              *why = "";
    size_t                   fail;

    if (!ready) {
        FUZZ_CHECK(sp_alloc_table_init(&t[0], 64) == 0);
        FUZZ_CHECK(sp_alloc_table_init(&t[1], 128) == 0);
        ready = 1;
    }
    if (size < 1) {
        return 0;
    }
    tab = &t[data[0] & 1];
    sp_alloc_table_clear(tab);
    atomic_store(&tab->full, 0);
    fail = alloc_model_run(tab, &m, (size - 1) / 4, next_op, &in, &why);
    if (fail != 0) {
        fuzz_fail(__FILE__, __LINE__, why);
    }
    return 0;
}
