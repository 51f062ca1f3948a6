#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/version.h"
#include "common/profile/sampler.h"
#include "common/control/status_prom.h"

/* Label values here are a version and a server name: only '\\', '"' and
 * newlines would need escaping. */
static void
label_value(sp_buf_t *b, const char *s)
{
    for ( ; *s; s++) {
        if (*s == '\\' || *s == '"') {
            sp_buf_append_char(b, '\\');
            sp_buf_append_char(b, *s);
        } else if (*s == '\n') {
            sp_buf_append_str(b, "\\n");
        } else {
            sp_buf_append_char(b, *s);
        }
    }
}

static void
family(sp_buf_t *b, const char *name, const char *suffix, const char *type,
    const char *help)
{
    sp_buf_appendf(b, "# HELP spanprof_%s%s %s\n# TYPE spanprof_%s%s %s\n",
                   name, suffix, help, name, suffix, type);
}

char *
sp_status_prometheus(const sp_api_info_t *info, const sp_control_shm_t *c,
    size_t *len)
{
    sp_buf_t             b;
    sp_control_state_t   want;
    sp_status_t         *st;
    int                  n = 0, i;
    unsigned             k;
    char                *out;

    st = malloc(SP_CONTROL_SLOTS * sizeof(*st));
    if (st == NULL) {
        return NULL;
    }
    for (i = 0; i < SP_CONTROL_SLOTS; i++) {
        n += sp_control_slot_read(c, i, &st[n]);
    }
    sp_control_get(c, &want);

    sp_buf_init(&b);
    family(&b, "info", "", "gauge", "The spanprof module and its server");
    sp_buf_append_str(&b, "spanprof_info{version=\"");
    label_value(&b, SP_VERSION);
    sp_buf_append_str(&b, "\",server=\"");
    label_value(&b, info->server != NULL ? info->server : "");
    sp_buf_append_str(&b, "\"} 1\n");

    family(&b, "control_profiling", "", "gauge",
           "Profiling wanted by the control state (1 on, 0 off)");
    sp_buf_appendf(&b, "spanprof_control_profiling %d\n", want.profiling);
    family(&b, "control_rate_hz", "", "gauge",
           "Sampler rate wanted by the control state");
    sp_buf_appendf(&b, "spanprof_control_rate_hz %u\n", want.rate_hz);
    family(&b, "control_wall", "", "gauge",
           "Wall-clock profiling wanted by the control state (1 on, 0 off)");
    sp_buf_appendf(&b, "spanprof_control_wall %d\n", !!(want.types & 2));
    family(&b, "control_wall_rate_hz", "", "gauge",
           "Wall-clock sampler rate wanted by the control state");
    sp_buf_appendf(&b, "spanprof_control_wall_rate_hz %u\n",
                   want.wall_rate_hz);
    family(&b, "control_memory", "", "gauge",
           "Memory profiling wanted by the control state (1 on, 0 off)");
    sp_buf_appendf(&b, "spanprof_control_memory %d\n",
                   !!(want.types & SP_SAMPLER_TYPE_MEMORY));
    family(&b, "control_generation", "", "gauge",
           "Changes made to the control state since the configuration "
           "was loaded");
    sp_buf_appendf(&b, "spanprof_control_generation %llu\n",
                   (unsigned long long) want.generation);

    for (k = 0; k < SP_STATUS_NFIELDS; k++) {
        const sp_status_field_t  *f = &sp_status_fields[k];
        int                       counter = f->kind == SP_STATUS_COUNTER;
        const char               *sfx = counter ? "_total" : "";

        family(&b, f->name, sfx, counter ? "counter" : "gauge", f->help);
        for (i = 0; i < n; i++) {
            sp_buf_appendf(&b, "spanprof_%s%s{worker=\"%d\"} %llu\n", f->name,
                           sfx, (int) st[i].pid,
                           (unsigned long long) st[i].v[k]);
        }
    }
    free(st);

    sp_buf_append_char(&b, '\0');
    if (sp_buf_failed(&b)) {
        sp_buf_free(&b);
        return NULL;
    }
    out = (char *) b.data;
    *len = b.len - 1;
    return out;
}
