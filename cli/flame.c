/* Flame graphs: samples merged into a call tree root first, written as
 * folded stacks or as a self-contained interactive SVG (inline script, no
 * external fonts, scripts or links). */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/spanprof.h"

#define PAD         10      /* px left and right */
#define FRAME_H     16      /* px per level, 1 px of it a gap */
#define TOP         62      /* px for the title lines */
#define BOTTOM      30      /* px for the details line */
#define CHAR_W      6.7     /* px per character at 11 px monospace */
#define MIN_W       0.1     /* px: narrower frames are left out */

void
cli_tree_init(cli_tree_t *t, cli_strpool_t *names)
{
    cli_node_t  *root;

    memset(t, 0, sizeof(*t));
    t->names = names;
    cli_keymap_init(&t->children, 8);
    root = CLI_PUSH(t->nodes, t->n, t->cap);
    memset(root, 0, sizeof(*root));
    root->name = -1;
    root->parent = root->first_child = root->next_sibling = -1;
}

void
cli_tree_free(cli_tree_t *t)
{
    free(t->nodes);
    cli_keymap_free(&t->children);
    memset(t, 0, sizeof(*t));
}

static int32_t
child(cli_tree_t *t, int32_t parent, int32_t name)
{
    int32_t      key[2] = { parent, name }, idx;
    cli_node_t  *n;

    idx = cli_keymap_put(&t->children, key, (int32_t) t->n);
    if (idx != (int32_t) t->n) {
        return idx;
    }
    n = CLI_PUSH(t->nodes, t->n, t->cap);
    memset(n, 0, sizeof(*n));
    n->name = name;
    n->parent = parent;
    n->depth = t->nodes[parent].depth + 1;
    n->first_child = -1;
    n->next_sibling = t->nodes[parent].first_child;
    t->nodes[parent].first_child = idx;
    if (n->depth > t->max_depth) {
        t->max_depth = n->depth;
    }
    return idx;
}

void
cli_tree_add_samples(cli_tree_t *t, const cli_model_t *m, const size_t *sel,
    size_t nsel, int side)
{
    const cli_sample_t  *s;
    int32_t              node, no_stack = -1, cut = -1;
    size_t               i, j, len;

    for (i = 0; i < nsel; i++) {
        s = &m->samples[sel[i]];
        node = 0;
        t->nodes[0].total[side] += s->count;
        len = s->stack_len;
        if (len > CLI_MAX_STACK_DEPTH) {
            /* Keep the innermost frames (the ones burning the CPU), as the
             * module's sampler does; one [truncated] frame stands for the
             * callers cut off. */
            if (cut < 0) {
                cut = cli_strpool_intern(t->names, "[truncated]", 11);
            }
            node = child(t, 0, cut);
            t->nodes[node].total[side] += s->count;
            len = CLI_MAX_STACK_DEPTH - 1;
            t->truncated++;
        }
        for (j = len; j > 0; j--) {
            node = child(t, node, m->locs[m->stacks[s->stack_off + j - 1]].frame);
            t->nodes[node].total[side] += s->count;
        }
        if (s->stack_len == 0) {
            if (no_stack < 0) {
                no_stack = cli_strpool_intern(t->names, "[no stack]", 10);
            }
            node = child(t, 0, no_stack);
            t->nodes[node].total[side] += s->count;
        }
        t->nodes[node].self[side] += s->count;
    }
}

void
cli_tree_warn_truncated(const cli_tree_t *t)
{
    if (t->truncated > 0) {
        cli_warn("%zu sample%s had a stack deeper than %d frames: cut to "
                 "the innermost %d under a [truncated] frame",
                 t->truncated, t->truncated == 1 ? "" : "s",
                 CLI_MAX_STACK_DEPTH, CLI_MAX_STACK_DEPTH - 1);
    }
}

static const char *
node_name(const cli_tree_t *t, int32_t node)
{
    int32_t  name = t->nodes[node].name;

    return name < 0 ? "all" : t->names->strs[name];
}

static const cli_tree_t  *sort_tree;

static int
cmp_nodes(const void *a, const void *b)
{
    return strcmp(node_name(sort_tree, *(const int32_t *) a),
                  node_name(sort_tree, *(const int32_t *) b));
}

void
cli_tree_finish(cli_tree_t *t)
{
    int32_t  *kids = xmalloc((t->n + 1) * sizeof(int32_t)), c;
    size_t    i, j, k;

    sort_tree = t;
    for (i = 0; i < t->n; i++) {
        k = 0;
        for (c = t->nodes[i].first_child; c >= 0; c = t->nodes[c].next_sibling) {
            kids[k++] = c;
        }
        if (k == 0) {
            continue;
        }
        qsort(kids, k, sizeof(int32_t), cmp_nodes);
        t->nodes[i].first_child = kids[0];
        for (j = 0; j < k; j++) {
            t->nodes[kids[j]].next_sibling = j + 1 < k ? kids[j + 1] : -1;
        }
    }
    free(kids);
}

/* --- folded -------------------------------------------------------------- */

static void
append_folded_name(sp_buf_t *b, const char *s)
{
    for (; *s != '\0'; s++) {
        switch (*s) {
        case ';':
            sp_buf_append_char(b, ':');
            break;
        case '\n': case '\r': case '\t':
            sp_buf_append_char(b, ' ');
            break;
        default:
            sp_buf_append_char(b, *s);
        }
    }
}

/* Root first, without recursion (a path is as deep as its stack). */
static void
folded_path(const cli_tree_t *t, int32_t node, int32_t *path, sp_buf_t *b)
{
    size_t  n = 0;

    for (; node > 0; node = t->nodes[node].parent) {
        path[n++] = node;
    }
    while (n > 0) {
        append_folded_name(b, node_name(t, path[--n]));
        if (n > 0) {
            sp_buf_append_char(b, ';');
        }
    }
}

static int
cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

void
cli_tree_folded(const cli_tree_t *t, sp_buf_t *out)
{
    char     **lines = NULL;
    size_t     n = 0, cap = 0, i;
    sp_buf_t   b;
    int32_t   *path = xmalloc(((size_t) t->max_depth + 1) * sizeof(int32_t));

    sp_buf_init(&b);
    for (i = 1; i < t->n; i++) {
        if (t->nodes[i].self[0] <= 0) {
            continue;
        }
        sp_buf_reset(&b);
        folded_path(t, (int32_t) i, path, &b);
        sp_buf_appendf(&b, " %lld", (long long) t->nodes[i].self[0]);
        sp_buf_append_char(&b, '\0');
        if (sp_buf_failed(&b)) {
            cli_die("out of memory");
        }
        *CLI_PUSH(lines, n, cap) = xstrdup((char *) b.data);
    }
    if (n > 0) {
        qsort(lines, n, sizeof(char *), cmp_lines);
    }
    for (i = 0; i < n; i++) {
        sp_buf_append_str(out, lines[i]);
        sp_buf_append_char(out, '\n');
        free(lines[i]);
    }
    free(lines);
    free(path);
    sp_buf_free(&b);
}

/* --- SVG ----------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s, or 0. */
static size_t
utf8_len(const unsigned char *s)
{
    size_t  n, i;

    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)) {
            return 0;               /* overlong, or a surrogate */
        }
        n = 3;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)) {
            return 0;
        }
        n = 4;
    } else {
        return 0;
    }
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    return n;
}

void
cli_xml_escape(sp_buf_t *out, const char *s)
{
    unsigned char  c;
    size_t         n;

    for (; (c = (unsigned char) *s) != '\0'; s++) {
        if (c >= 0x80) {
            /* Names from pprof files need not be UTF-8; XML must be. */
            n = utf8_len((const unsigned char *) s);
            if (n == 0) {
                sp_buf_append_char(out, '?');
            } else {
                sp_buf_append(out, s, n);
                s += n - 1;
            }
            continue;
        }
        switch (c) {
        case '&':  sp_buf_append_str(out, "&amp;"); break;
        case '<':  sp_buf_append_str(out, "&lt;"); break;
        case '>':  sp_buf_append_str(out, "&gt;"); break;
        case '"':  sp_buf_append_str(out, "&quot;"); break;
        case '\'': sp_buf_append_str(out, "&apos;"); break;
        default:
            /* Control characters are not allowed in XML 1.0. */
            sp_buf_append_char(out, c < 0x20 ? ' ' : (char) c);
        }
    }
}

/* s cut to at most n characters (".." marks the cut), without splitting
 * a UTF-8 sequence. */
static void
append_fit(sp_buf_t *out, const char *s, long n)
{
    size_t  len = strlen(s), cut;
    char   *tmp;

    if (n < 3) {
        return;
    }
    if ((long) len <= n) {
        cli_xml_escape(out, s);
        return;
    }
    cut = (size_t) n - 2;
    while (cut > 0 && ((unsigned char) s[cut] & 0xc0) == 0x80) {
        cut--;
    }
    tmp = xstrndup(s, cut);
    cli_xml_escape(out, tmp);
    sp_buf_append_str(out, "..");
    free(tmp);
}

static uint64_t
name_hash(const char *s)
{
    uint64_t  h = 0xcbf29ce484222325ULL;

    for (; *s != '\0'; s++) {
        h = (h ^ (unsigned char) *s) * 0x100000001b3ULL;
    }
    return h ^ (h >> 31);
}

/* flamegraph.pl's "hot" palette: red to yellow, by the name. */
static void
warm_colour(const char *name, int rgb[3])
{
    uint64_t  h = name_hash(name);
    double    v1 = (double) (h & 0xffff) / 65535.0,
              v2 = (double) ((h >> 16) & 0xffff) / 65535.0,
              v3 = (double) ((h >> 32) & 0xffff) / 65535.0;

    rgb[0] = 205 + (int) (50 * v3);
    rgb[1] = (int) (230 * v1);
    rgb[2] = (int) (55 * v2);
}

/* Neutral grey to red (more in the compared range) or blue (less). */
static void
diff_colour(double delta, double scale, int rgb[3])
{
    static const int  grey[3] = { 224, 224, 224 }, red[3] = { 232, 48, 48 },
                      blue[3] = { 56, 104, 232 };
    const int        *to = delta > 0 ? red : blue;
    double            k = scale > 0 ? fabs(delta) / scale : 0;
    int               i;

    if (k > 1) {
        k = 1;
    }
    for (i = 0; i < 3; i++) {
        rgb[i] = (int) lround(grey[i] + (to[i] - grey[i]) * k);
    }
}

static double
pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double) part / (double) whole : 0;
}

/* Percentage points of its profile's total: compared minus base. */
static double
node_delta(const cli_tree_t *t, int32_t i)
{
    return pct(t->nodes[i].total[0], t->nodes[0].total[0])
           - pct(t->nodes[i].total[1], t->nodes[0].total[1]);
}

static const char  svg_script[] =
"var W = %d, PAD = %d, CW = %.1f, HINT = \"%s\";\n"
"var details, unzoomBtn, frames = [], rootY = 0;\n"
"function init(evt) {\n"
"  details = document.getElementById(\"details\").firstChild;\n"
"  unzoomBtn = document.getElementById(\"unzoom\");\n"
"  unzoomBtn.onclick = unzoom;\n"
"  var gs = document.getElementById(\"frames\").getElementsByTagName(\"g\");\n"
"  for (var i = 0; i < gs.length; i++) {\n"
"    var g = gs[i], r = g.getElementsByTagName(\"rect\")[0];\n"
"    var info = g.getElementsByTagName(\"title\")[0].textContent;\n"
"    g.fx = +r.getAttribute(\"x\");\n"
"    g.fw = +r.getAttribute(\"width\");\n"
"    g.fy = +r.getAttribute(\"y\");\n"
"    g.info = info;\n"
"    g.fname = info.replace(/ \\([^()]*\\)$/, \"\");\n"
"    g.onmouseover = function () { details.nodeValue = this.info; };\n"
"    g.onmouseout = function () { details.nodeValue = HINT; };\n"
"    g.onclick = function () {\n"
"      if (this.fy >= rootY) { unzoom(); } else { zoom(this); }\n"
"    };\n"
"    if (g.fy > rootY) { rootY = g.fy; }\n"
"    frames.push(g);\n"
"  }\n"
"}\n"
"function place(g, x, w) {\n"
"  var r = g.getElementsByTagName(\"rect\")[0];\n"
"  var t = g.getElementsByTagName(\"text\")[0];\n"
"  var n = Math.floor((w - 6) / CW), s = g.fname;\n"
"  r.setAttribute(\"x\", x.toFixed(2));\n"
"  r.setAttribute(\"width\", w.toFixed(2));\n"
"  t.setAttribute(\"x\", (x + 3).toFixed(2));\n"
"  t.textContent = n < 3 ? \"\" : s.length <= n ? s : s.substring(0, n - 2) + \"..\";\n"
"}\n"
"function show(g, on, parent) {\n"
"  g.style.display = on ? \"\" : \"none\";\n"
"  g.style.opacity = parent ? \"0.5\" : \"\";\n"
"}\n"
"function zoom(n) {\n"
"  var x0 = n.fx, w0 = n.fw, k = (W - 2 * PAD) / w0, e = 0.05;\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var g = frames[i];\n"
"    if (g.fy > n.fy) {\n"
"      var caller = g.fx <= x0 + e && g.fx + g.fw >= x0 + w0 - e;\n"
"      show(g, caller, true);\n"
"      if (caller) { place(g, PAD, W - 2 * PAD); }\n"
"    } else {\n"
"      var inside = g.fx >= x0 - e && g.fx + g.fw <= x0 + w0 + e;\n"
"      show(g, inside, false);\n"
"      if (inside) { place(g, PAD + (g.fx - x0) * k, g.fw * k); }\n"
"    }\n"
"  }\n"
"  unzoomBtn.style.display = \"\";\n"
"}\n"
"function unzoom() {\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    show(frames[i], true, false);\n"
"    place(frames[i], frames[i].fx, frames[i].fw);\n"
"  }\n"
"  unzoomBtn.style.display = \"none\";\n"
"}\n";

static const char  hint[] =
    "Hover over a frame for its function, samples and share; click to "
    "zoom, click the bottom frame to reset.";

static void
frame_info(const cli_tree_t *t, int32_t i, const cli_svg_opts_t *o,
    sp_buf_t *out)
{
    const cli_node_t  *n = &t->nodes[i];
    const char        *u1 = o->unit, *un = o->unit;
    double             d;

    if (o->unit == NULL) {
        u1 = "sample";
        un = "samples";
    }
    cli_xml_escape(out, node_name(t, i));
    if (!o->diff) {
        sp_buf_appendf(out, " (%lld ", (long long) n->total[0]);
        cli_xml_escape(out, n->total[0] == 1 ? u1 : un);
        sp_buf_appendf(out, ", %.2f%%)",
                       pct(n->total[0], t->nodes[0].total[0]));
        return;
    }
    d = node_delta(t, i);
    sp_buf_appendf(out, " (compare %lld ", (long long) n->total[0]);
    cli_xml_escape(out, un);
    sp_buf_appendf(out, ", %.2f%%; base %lld ",
                   pct(n->total[0], t->nodes[0].total[0]),
                   (long long) n->total[1]);
    cli_xml_escape(out, un);
    sp_buf_appendf(out, ", %.2f%%; %+.2f points)",
                   pct(n->total[1], t->nodes[0].total[1]),
                   fabs(d) < 0.005 ? 0.0 : d);
}

void
cli_tree_svg(const cli_tree_t *t, const cli_svg_opts_t *o, sp_buf_t *out)
{
    const cli_node_t  *n;
    int64_t           *off;
    int32_t           *stack, i, c, depth = 0;
    size_t             sp = 0;
    double             scale, x, w, y, maxdelta = 0;
    int                rgb[3], width = o->width, height;
    long               title_chars;

    off = xcalloc(t->n + 1, sizeof(int64_t));
    stack = xmalloc((t->n + 1) * sizeof(int32_t));
    scale = t->nodes[0].total[0] > 0
            ? (double) (width - 2 * PAD) / (double) t->nodes[0].total[0] : 0;

    /* Offsets of every node in samples, and the depth actually drawn. */
    stack[sp++] = 0;
    while (sp > 0) {
        i = stack[--sp];
        n = &t->nodes[i];
        if ((double) n->total[0] * scale < MIN_W) {
            continue;
        }
        if (n->depth > depth) {
            depth = n->depth;
        }
        if (o->diff && fabs(node_delta(t, i)) > maxdelta) {
            maxdelta = fabs(node_delta(t, i));
        }
        x = (double) off[i];
        for (c = n->first_child; c >= 0; c = t->nodes[c].next_sibling) {
            off[c] = (int64_t) x;
            x += (double) t->nodes[c].total[0];
            stack[sp++] = c;
        }
    }
    /* Below one point every change is shown faint. */
    if (maxdelta < 1.0) {
        maxdelta = 1.0;
    }
    height = TOP + (depth + 1) * FRAME_H + BOTTOM;
    title_chars = (long) ((width - 2 * PAD) / CHAR_W);

    sp_buf_appendf(out,
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
        "<svg version=\"1.1\" width=\"%d\" height=\"%d\" "
        "viewBox=\"0 0 %d %d\" onload=\"init(evt)\" "
        "xmlns=\"http://www.w3.org/2000/svg\">\n<title>",
        width, height, width, height);
    cli_xml_escape(out, o->doc_title ? o->doc_title : o->title);
    sp_buf_append_str(out,
        "</title>\n<style type=\"text/css\">\n"
        "text { font-family: monospace; font-size: 12px; fill: #000; }\n"
        "#title { font-family: sans-serif; font-size: 17px; "
        "font-weight: bold; }\n"
        "#subtitle { fill: #333; }\n"
        "#unzoom { cursor: pointer; fill: #1a5fb4; }\n"
        ".f { cursor: pointer; }\n"
        ".f text { font-size: 11px; pointer-events: none; }\n"
        ".f:hover rect { stroke: #000; stroke-width: 0.6; }\n"
        "</style>\n<script type=\"text/ecmascript\"><![CDATA[\n");
    sp_buf_appendf(out, svg_script, width, PAD, CHAR_W, hint);
    sp_buf_append_str(out, "]]></script>\n");
    sp_buf_appendf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
                   "fill=\"#f8f8f4\"/>\n", width, height);
    sp_buf_appendf(out, "<text id=\"title\" x=\"%d\" y=\"24\" "
                   "text-anchor=\"middle\">", width / 2);
    append_fit(out, o->title, (long) (title_chars * 0.85));
    sp_buf_append_str(out, "</text>\n");
    if (o->subtitle != NULL) {
        sp_buf_appendf(out, "<text id=\"subtitle\" x=\"%d\" y=\"44\" "
                       "text-anchor=\"middle\">", width / 2);
        append_fit(out, o->subtitle, title_chars);
        sp_buf_append_str(out, "</text>\n");
    }
    sp_buf_appendf(out, "<text id=\"unzoom\" x=\"%d\" y=\"24\" "
                   "style=\"display: none\">Reset zoom</text>\n", PAD);
    sp_buf_appendf(out, "<text id=\"details\" x=\"%d\" y=\"%d\">%s</text>\n",
                   PAD, height - 10, hint);
    sp_buf_append_str(out, "<g id=\"frames\">\n");

    /* Frames, depth first (parents before their callees). */
    sp = 0;
    stack[sp++] = 0;
    while (sp > 0) {
        i = stack[--sp];
        n = &t->nodes[i];
        w = (double) n->total[0] * scale;
        if (w < MIN_W) {
            continue;
        }
        x = PAD + (double) off[i] * scale;
        y = height - BOTTOM - (n->depth + 1) * FRAME_H;
        if (o->diff) {
            diff_colour(node_delta(t, i), maxdelta, rgb);
        } else {
            warm_colour(node_name(t, i), rgb);
        }
        sp_buf_append_str(out, "<g class=\"f\"><title>");
        frame_info(t, i, o, out);
        sp_buf_appendf(out, "</title><rect x=\"%.2f\" y=\"%.0f\" "
                       "width=\"%.2f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
                       "rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.0f\">",
                       x, y, w, FRAME_H - 1, rgb[0], rgb[1], rgb[2],
                       x + 3, y + 11);
        append_fit(out, node_name(t, i), (long) floor((w - 6) / CHAR_W));
        sp_buf_append_str(out, "</text></g>\n");

        /* Push in reverse so the first child (by name) comes out first. */
        {
            size_t  first = sp;

            for (c = n->first_child; c >= 0; c = t->nodes[c].next_sibling) {
                stack[sp++] = c;
            }
            for (size_t a = first, b = sp; a + 1 < b; a++, b--) {
                int32_t  tmp = stack[a];

                stack[a] = stack[b - 1];
                stack[b - 1] = tmp;
            }
        }
    }
    sp_buf_append_str(out, "</g>\n</svg>\n");
    free(off);
    free(stack);
}
