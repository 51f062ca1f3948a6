#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve/flame_json.h"
#include "cli/serve/json_out.h"
#include "cli/spanprof.h"

typedef struct {
    int32_t   name;                 /* string id */
    int32_t   first_child, next_sibling;
    int64_t   total[2], samples[2];
} node_t;

struct serve_flame {
    cli_strpool_t   names;
    cli_keymap_t    children;       /* (parent, name) -> node */
    node_t         *nodes;
    size_t          n, cap;
};

serve_flame_t *
serve_flame_new(void)
{
    serve_flame_t  *f = xcalloc(1, sizeof(*f));
    node_t         *root;

    cli_strpool_init(&f->names);
    cli_keymap_init(&f->children, 2 * sizeof(int32_t));
    root = CLI_PUSH(f->nodes, f->n, f->cap);
    memset(root, 0, sizeof(*root));
    root->name = -1;
    root->first_child = root->next_sibling = -1;
    return f;
}

void
serve_flame_free(serve_flame_t *f)
{
    if (f == NULL) {
        return;
    }
    cli_strpool_free(&f->names);
    cli_keymap_free(&f->children);
    free(f->nodes);
    free(f);
}

static int32_t
child(serve_flame_t *f, int32_t parent, const char *name, size_t len)
{
    int32_t   key[2], id;
    node_t   *c;

    key[0] = parent;
    key[1] = cli_strpool_intern(&f->names, name, len);
    id = cli_keymap_get(&f->children, key);
    if (id >= 0) {
        return id;
    }
    id = (int32_t) f->n;
    c = CLI_PUSH(f->nodes, f->n, f->cap);
    memset(c, 0, sizeof(*c));
    c->name = key[1];
    c->first_child = -1;
    c->next_sibling = f->nodes[parent].first_child;
    f->nodes[parent].first_child = id;
    cli_keymap_put(&f->children, key, id);
    return id;
}

/* a += b, saturating: the sums come from received samples (at most 2^46 ns
 * each, but any number of them). */
static void
add_sat(int64_t *a, int64_t b)
{
    if (__builtin_add_overflow(*a, b, a)) {
        *a = b < 0 ? INT64_MIN : INT64_MAX;
    }
}

int
serve_flame_add(serve_flame_t *f, const char *stack, int64_t cpu_ns,
    int64_t samples, int side)
{
    const char  *p = stack, *e;
    int32_t      at = 0;
    int          depth = 0;

    add_sat(&f->nodes[0].total[side], cpu_ns);
    add_sat(&f->nodes[0].samples[side], samples);
    while (*p != '\0' && depth < SERVE_FLAME_MAX_DEPTH) {
        e = strchr(p, ';');
        if (e == NULL) {
            e = p + strlen(p);
        }
        at = child(f, at, p, (size_t) (e - p));
        add_sat(&f->nodes[at].total[side], cpu_ns);
        add_sat(&f->nodes[at].samples[side], samples);
        depth++;
        p = *e == ';' ? e + 1 : e;
    }
    return 0;
}

static int
cmp_name(const void *a, const void *b, void *ud)
{
    const serve_flame_t  *f = ud;

    return strcmp(f->names.strs[f->nodes[*(const int32_t *) a].name],
                  f->names.strs[f->nodes[*(const int32_t *) b].name]);
}

static void
write_node(serve_flame_t *f, int32_t id, const char *name, int diff,
    sp_buf_t *out)
{
    node_t   *nd = &f->nodes[id];
    int32_t  *kids = NULL, c;
    size_t    nk = 0, ck = 0, i;

    sp_buf_append_str(out, "{\"n\":");
    serve_json_str(out, name);
    if (diff) {
        sp_buf_appendf(out, ",\"t\":[%lld,%lld],\"s\":[%lld,%lld]",
                       (long long) nd->total[0], (long long) nd->total[1],
                       (long long) nd->samples[0],
                       (long long) nd->samples[1]);
    } else {
        sp_buf_appendf(out, ",\"t\":[%lld],\"s\":[%lld]",
                       (long long) nd->total[0], (long long) nd->samples[0]);
    }
    for (c = nd->first_child; c >= 0; c = f->nodes[c].next_sibling) {
        *CLI_PUSH(kids, nk, ck) = c;
    }
    if (nk > 0) {
        qsort_r(kids, nk, sizeof(int32_t), cmp_name, f);
        sp_buf_append_str(out, ",\"c\":[");
        for (i = 0; i < nk; i++) {
            if (i > 0) {
                sp_buf_append_char(out, ',');
            }
            write_node(f, kids[i], f->names.strs[f->nodes[kids[i]].name],
                       diff, out);
        }
        sp_buf_append_char(out, ']');
    }
    sp_buf_append_char(out, '}');
    free(kids);
}

int
serve_flame_json(serve_flame_t *f, const char *root_name, int diff,
    sp_buf_t *out)
{
    write_node(f, 0, root_name, diff, out);
    return sp_buf_failed(out) ? -1 : 0;
}
