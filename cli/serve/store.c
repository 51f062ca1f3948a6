#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "cli/serve/attr_keys.h"
#include "cli/serve/attrs_json.h"
#include "cli/serve/json_out.h"
#include "cli/serve/part_map.h"
#include "cli/serve/store.h"
#include "cli/serve/wire_read.h"

/* The version of the schema below, in PRAGMA user_version. 0 with tables:
 * the first schema (one global index per random key); 2: parts without
 * their summaries (the parts table); 3: CPU samples only (no types
 * table, the value column named cpu_ns). Others are refused rather than
 * misread. */
#define SCHEMA_VERSION      4
#define SCHEMA_VERSION_STR  "4"

/* The sample types a database holds at most (cpu, wall, off_cpu, the
 * four memory types, ...): a profile of another type beyond them is
 * refused (counted by the caller). */
#define TYPES_MAX  64

/* Spans are stored in parts of 32,768 consecutive spans (part, assigned
 * here, ascending) and the indexes on random keys (the trace id, the
 * duration) lead with the part: inserts land in the newest part's subtree,
 * about 130 pages an index, so a commit writes those pages rather than one
 * page per span as a global index outgrowing the cache does (and the
 * larger a part, the more of its pages a commit dirties: 2^17 ingested 15%
 * slower). Each part is summed up in memory (part_map.h: a Bloom filter of
 * its trace keys, its longest SERVER span, their first and last start),
 * and in the parts table once the part is full: opening a trace probes
 * the index of the parts that may hold it only (one or two, of 305 at 10M
 * spans), and the slowest-first search reads the parts of its time range
 * by their longest span, stopping at the first that cannot make the
 * list. */
#define PART_BITS  15

/* Statements prepared once and reused for every row. */
enum {
    ST_BEGIN, ST_COMMIT, ST_SPAN,
    ST_STACK_PUT, ST_STACK_GET, ST_SAMPLE, ST_KEY_PUT, ST_PART_PUT,
    ST_TYPE_PUT, ST_N
};

static const char *const  stmt_sql[ST_N] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_SPAN] =
        "INSERT INTO spans(id, part, tkey, trace_id, span_id, parent_id,"
        " service, name, kind, route, method, target, http_status, error,"
        " start_ns, end_ns, dur_ns, attrs)"
        " VALUES(?15,?17,?16,?1,?2,?3,?4,?5,?6,?7,?8,?9,"
        "?10,?11,?12,?13,?13-?12,?14)",
    [ST_STACK_PUT] =
        "INSERT INTO stacks(stack) VALUES(?1) ON CONFLICT(stack) DO NOTHING",
    [ST_STACK_GET] = "SELECT id FROM stacks WHERE stack = ?1",
    [ST_SAMPLE] =
        "INSERT INTO samples(time_ns, duration_ns, service, pid, trace_id,"
        " span_id, span_name, stack_id, count, value, type)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
    [ST_KEY_PUT] = "INSERT INTO attr_keys(id, key) VALUES(?1, ?2)",
    /* The columns of parts in their order: part, max_dur, min_start,
     * max_start, bloom. */
    [ST_PART_PUT] = "INSERT OR REPLACE INTO parts VALUES(?1,?2,?4,?5,?3)",
    [ST_TYPE_PUT] = "INSERT INTO types(id, name, unit) VALUES(?1, ?2, ?3)",
};

static const char  pragmas[] =
    "PRAGMA journal_mode = WAL;"
    "PRAGMA synchronous = NORMAL;"
    /* Fewer, larger checkpoints (each one syncs the file), and a cache
     * that holds the hot index pages. */
    "PRAGMA wal_autocheckpoint = 16384;"
    "PRAGMA cache_size = -131072;";

static const char  schema[] =
    "BEGIN IMMEDIATE;"
    /* tkey: the trace id's first 4 bytes as an integer (the query checks
     * the whole id): a smaller index key than the 16-byte blob. */
    "CREATE TABLE spans("
    " id INTEGER PRIMARY KEY, part INTEGER NOT NULL, tkey INTEGER NOT NULL,"
    " trace_id BLOB NOT NULL, span_id BLOB NOT NULL,"
    " parent_id BLOB, service TEXT, name TEXT, kind INTEGER, route TEXT,"
    " method TEXT, target TEXT, http_status INTEGER, error INTEGER,"
    " start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, attrs BLOB);"
    /* The attributes' keys, numbered (attr_keys.h, attrs_json.h). */
    "CREATE TABLE attr_keys(id INTEGER PRIMARY KEY, key TEXT NOT NULL);"
    "CREATE INDEX spans_trace ON spans(part, tkey);"
    "CREATE INDEX spans_start ON spans(start_ns);"
    /* The slowest-first search, over SERVER spans (kind 2), part by part. */
    "CREATE INDEX spans_dur ON spans(part, kind, dur_ns);"
    "CREATE INDEX spans_route ON spans(service, route, start_ns);"
    /* The summary of each full part (part_map.h): its longest SERVER
     * span, their first and last start (NULL: none) and the Bloom filter
     * of its trace keys. */
    "CREATE TABLE parts("
    " part INTEGER PRIMARY KEY, max_dur INTEGER, min_start INTEGER,"
    " max_start INTEGER, bloom BLOB NOT NULL);"
    "CREATE TABLE stacks("
    " id INTEGER PRIMARY KEY, stack TEXT NOT NULL UNIQUE);"
    /* The sample types (a profile's sample_type), numbered 1, 2, ... as
     * they come; cpu is 1. A sample's value is in its type's unit. */
    "CREATE TABLE types("
    " id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, unit TEXT);"
    "INSERT INTO types VALUES(1, 'cpu', 'nanoseconds');"
    "CREATE TABLE samples("
    " id INTEGER PRIMARY KEY, time_ns INTEGER, duration_ns INTEGER,"
    " service TEXT, pid INTEGER, trace_id BLOB, span_id BLOB,"
    " span_name TEXT, stack_id INTEGER, count INTEGER, value INTEGER,"
    " type INTEGER NOT NULL);"
    "CREATE INDEX samples_span ON samples(span_id);"
    "CREATE INDEX samples_time ON samples(time_ns);"
    "PRAGMA user_version = " SCHEMA_VERSION_STR ";"
    "COMMIT;";

struct serve_store {
    sqlite3              *db;
    sqlite3_stmt         *st[ST_N];
    char                  err[256];
    serve_store_stats_t   stats;
    uint64_t              batch_spans, batch_samples;
    /* The transaction that batches: open since open_ns, holding
     * pending_rows rows of released batches. */
    int                   in_txn;
    int64_t               open_ns;
    uint64_t              pending_rows;
    int64_t               next_id;      /* of the next span */
    /* The attribute keys, as many as at the start of the transaction
     * (what a rollback keeps); a span's attributes packed. */
    serve_keys_t         *keys;
    size_t                keys_at_txn;
    /* The sample types (types[i] is id i + 1), as many at the start of
     * the transaction. */
    char                 *types[TYPES_MAX];
    char                 *units[TYPES_MAX];
    size_t                ntypes, types_at_txn;
    sp_buf_t              attrs;
    int                   part_bits;
    /* The parts' summaries; the part spans are added to and the spans
     * it holds; the transaction (numbered) that batches. */
    serve_part_map_t      parts;
    int64_t               cur_part, cur_count;
    uint64_t              txn_no;
    sp_buf_t              enc;
};

static int
fail(serve_store_t *s, const char *what)
{
    snprintf(s->err, sizeof(s->err), "%s: %s", what, sqlite3_errmsg(s->db));
    return -1;
}

static int64_t
pragma_int(serve_store_t *s, const char *sql)
{
    sqlite3_stmt  *st;
    int64_t        v = -1;

    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        return -1;
    }
    if (sqlite3_step(st) == SQLITE_ROW) {
        v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

/* The trace id's index key: its first 4 bytes, as a signed integer (4
 * bytes in a record). */
static int64_t
trace_key(const uint8_t tid[16])
{
    return (int32_t) ((uint32_t) tid[0] << 24 | (uint32_t) tid[1] << 16
                      | (uint32_t) tid[2] << 8 | tid[3]);
}

/* One integer a statement with one int64 bound (?1) returns: 0 with *v
 * set (dflt for NULL or no row), or -1. */
static int
query_i64(serve_store_t *s, const char *sql, int64_t arg, int64_t dflt,
    int64_t *v)
{
    sqlite3_stmt  *st;
    int            rc;

    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        return fail(s, "prepare");
    }
    sqlite3_bind_int64(st, 1, arg);
    rc = sqlite3_step(st);
    *v = rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL
         ? sqlite3_column_int64(st, 0) : dflt;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, "query");
}

/* A part's summary made again from its spans (none: no summary); the
 * number of its spans in *count. */
static int
rebuild_part(serve_store_t *s, int64_t part, int64_t *count)
{
    sqlite3_stmt  *st;
    serve_part_t  *p;
    int64_t        n;
    int            rc;

    if (query_i64(s, "SELECT count(*) FROM spans WHERE part = ?1", part, 0,
                  &n) != 0)
    {
        return -1;
    }
    *count = n;
    if (n == 0) {
        return 0;
    }
    if (n < (int64_t) 1 << s->part_bits) {
        n = (int64_t) 1 << s->part_bits;
    }
    p = serve_part_new(&s->parts, part, (size_t) n);
    if (p == NULL) {
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    if (sqlite3_prepare_v2(s->db, "SELECT max(dur_ns), min(start_ns),"
                           " max(start_ns) FROM spans WHERE part = ?1"
                           " AND kind = 2", -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    sqlite3_bind_int64(st, 1, part);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        p->max_dur = sqlite3_column_int64(st, 0);
        p->min_start = sqlite3_column_int64(st, 1);
        p->max_start = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) {
        return fail(s, "read a part");
    }
    if (sqlite3_prepare_v2(s->db, "SELECT tkey FROM spans WHERE part = ?1",
                           -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    sqlite3_bind_int64(st, 1, part);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        serve_part_add(p, sqlite3_column_int64(st, 0), 0, 0, 0);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "read a part");
}

static int save_parts(serve_store_t *s, int64_t upto);

/* The parts' summaries: as stored for the full parts; made again from
 * the spans for the newest part (spans may have been added to it since)
 * and for any part without one (its summary was in a group lost). */
static int
load_parts(serve_store_t *s)
{
    sqlite3_stmt  *st;
    int64_t        lo, hi, part, n = 0;
    int            rc;

    if (sqlite3_prepare_v2(s->db, "SELECT part, max_dur, min_start,"
                           " max_start, bloom FROM parts ORDER BY part",
                           -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (serve_part_load(&s->parts, sqlite3_column_int64(st, 0),
                sqlite3_column_type(st, 1) == SQLITE_NULL
                ? INT64_MIN : sqlite3_column_int64(st, 1),
                sqlite3_column_type(st, 2) == SQLITE_NULL
                ? INT64_MAX : sqlite3_column_int64(st, 2),
                sqlite3_column_type(st, 3) == SQLITE_NULL
                ? INT64_MIN : sqlite3_column_int64(st, 3),
                sqlite3_column_blob(st, 4),
                (size_t) sqlite3_column_bytes(st, 4)) == NULL)
        {
            sqlite3_finalize(st);
            snprintf(s->err, sizeof(s->err),
                     "a malformed parts table (or out of memory)");
            return -1;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        return fail(s, "read parts");
    }
    if (query_i64(s, "SELECT min(part) FROM spans", 0, -1, &lo) != 0
        || query_i64(s, "SELECT max(part) FROM spans", 0, -1, &hi) != 0)
    {
        return -1;
    }
    serve_part_map_keep(&s->parts, lo, hi);
    for (part = lo; hi >= 0 && part <= hi; part++) {
        if ((part == hi || serve_part_find(&s->parts, part) == NULL)
            && rebuild_part(s, part, &n) != 0)
        {
            return -1;
        }
    }
    s->cur_part = hi >= 0 ? hi : 0;
    s->cur_count = n;
    /* The full parts' summaries made again: stored now. */
    for (part = 0; part < (int64_t) s->parts.n; part++) {
        if (s->parts.v[part].dirty && s->parts.v[part].part < s->cur_part) {
            if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)
                != SQLITE_OK)
            {
                return fail(s, "begin");
            }
            if (save_parts(s, s->cur_part - 1) != 0
                || sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL)
                   != SQLITE_OK)
            {
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                return fail(s, "store the parts' summaries");
            }
            break;
        }
    }
    return 0;
}

/* Writes the summaries changed of the parts up to `upto` (in the open
 * transaction). */
static int
save_parts(serve_store_t *s, int64_t upto)
{
    sqlite3_stmt  *st = s->st[ST_PART_PUT];
    serve_part_t  *p;
    size_t         i;
    int            rc;

    for (i = 0; i < s->parts.n && s->parts.v[i].part <= upto; i++) {
        p = &s->parts.v[i];
        if (!p->dirty) {
            continue;
        }
        sp_buf_reset(&s->enc);
        if (sp_buf_reserve(&s->enc, serve_part_encoded_len(p)) != 0) {
            snprintf(s->err, sizeof(s->err), "out of memory");
            return -1;
        }
        serve_part_encode(p, s->enc.data);
        sqlite3_bind_int64(st, 1, p->part);
        if (p->max_dur != INT64_MIN) {
            sqlite3_bind_int64(st, 2, p->max_dur);
            sqlite3_bind_int64(st, 4, p->min_start);
            sqlite3_bind_int64(st, 5, p->max_start);
        }
        sqlite3_bind_blob(st, 3, s->enc.data,
                          (int) serve_part_encoded_len(p), SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (rc != SQLITE_DONE) {
            return fail(s, "write a part's summary");
        }
        p->dirty = 0;
        p->written_in = s->txn_no;
    }
    return 0;
}

/* The open transaction is undone: the summaries it wrote are to be
 * written again. */
static void
parts_rolled_back(serve_store_t *s)
{
    size_t  i;

    for (i = 0; i < s->parts.n; i++) {
        if (s->parts.v[i].written_in == s->txn_no) {
            s->parts.v[i].dirty = 1;
        }
    }
}

/* The dictionary of attribute keys, from the database. */
static int
load_keys(serve_store_t *s)
{
    sqlite3_stmt  *st;
    int            rc;

    if (sqlite3_prepare_v2(s->db, "SELECT id, key FROM attr_keys"
                           " ORDER BY id", -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char  *k = (const char *) sqlite3_column_text(st, 1);

        /* Numbered 1, 2, ... as added: anything else is not ours. */
        if (k == NULL || sqlite3_column_int64(st, 0)
                         != (int64_t) serve_keys_count(s->keys) + 1
            || serve_keys_add(s->keys, k, (size_t) sqlite3_column_bytes(st, 1))
               == 0)
        {
            sqlite3_finalize(st);
            snprintf(s->err, sizeof(s->err), "a malformed attr_keys table");
            return -1;
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "read attr_keys");
}

static int run(serve_store_t *s, int which, const char *what);

/* The sample types, from the database. */
static int
load_types(serve_store_t *s)
{
    sqlite3_stmt  *st;
    int            rc;

    if (sqlite3_prepare_v2(s->db, "SELECT id, name, unit FROM types"
                           " ORDER BY id", -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char  *n = (const char *) sqlite3_column_text(st, 1),
                    *u = (const char *) sqlite3_column_text(st, 2);

        if (n == NULL || s->ntypes == TYPES_MAX
            || sqlite3_column_int64(st, 0) != (int64_t) s->ntypes + 1
            || (s->types[s->ntypes] = strdup(n)) == NULL
            || (s->units[s->ntypes] = strdup(u ? u : "")) == NULL)
        {
            sqlite3_finalize(st);
            snprintf(s->err, sizeof(s->err), "a malformed types table");
            return -1;
        }
        s->ntypes++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "read types");
}

static void
types_truncate(serve_store_t *s, size_t n)
{
    while (s->ntypes > n) {
        s->ntypes--;
        free(s->types[s->ntypes]);
        free(s->units[s->ntypes]);
        s->types[s->ntypes] = s->units[s->ntypes] = NULL;
    }
}

int
serve_store_type_find(const serve_store_t *s, const char *name)
{
    size_t  i;

    for (i = 0; i < s->ntypes; i++) {
        if (strcmp(s->types[i], name) == 0) {
            return (int) i + 1;
        }
    }
    return 0;
}

const char *
serve_store_type_unit(const serve_store_t *s, int type)
{
    return type >= 1 && (size_t) type <= s->ntypes ? s->units[type - 1]
                                                    : NULL;
}

int
serve_store_type(serve_store_t *s, const char *name, const char *unit)
{
    int     id = serve_store_type_find(s, name);
    size_t  n = s->ntypes;

    if (id > 0) {
        return id;
    }
    if (n == TYPES_MAX || !s->in_txn) {
        snprintf(s->err, sizeof(s->err), "too many sample types (%d)",
                 TYPES_MAX);
        return 0;
    }
    if ((s->types[n] = strdup(name)) == NULL
        || (s->units[n] = strdup(unit ? unit : "")) == NULL)
    {
        free(s->types[n]);
        s->types[n] = NULL;
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    s->ntypes++;
    sqlite3_bind_int64(s->st[ST_TYPE_PUT], 1, (int64_t) n + 1);
    sqlite3_bind_text(s->st[ST_TYPE_PUT], 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s->st[ST_TYPE_PUT], 3, unit ? unit : "", -1,
                      SQLITE_STATIC);
    if (run(s, ST_TYPE_PUT, "insert a sample type") != 0) {
        types_truncate(s, n);
        return -1;
    }
    return (int) n + 1;
}

serve_store_t *
serve_store_open(const char *dir, char *err, size_t errlen)
{
    serve_store_t  *s;
    char           *path;
    size_t          n = strlen(dir) + sizeof("/spanprof.db");
    int64_t         version, tables;
    int             i;

    /* Before SQLite's first use (else refused, harmlessly): no statistics
     * kept on every allocation, each under a global mutex. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    s = calloc(1, sizeof(*s));
    path = malloc(n);
    if (s == NULL || path == NULL
        || (s->keys = serve_keys_new()) == NULL)
    {
        snprintf(err, errlen, "out of memory");
        if (s != NULL) {
            serve_keys_free(s->keys);
        }
        free(s);
        free(path);
        return NULL;
    }
    sp_buf_init(&s->attrs);
    sp_buf_init(&s->enc);
    snprintf(path, n, "%s/spanprof.db", dir);
    if (sqlite3_open(path, &s->db) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto failed;
    }
    sqlite3_busy_timeout(s->db, 5000);
    /* The layout first: a file of another is left as it is. */
    version = pragma_int(s, "PRAGMA user_version");
    tables = pragma_int(s, "SELECT count(*) FROM sqlite_master");
    if (version < 0 || tables < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path,
                 sqlite3_errmsg(s->db));
        goto failed;
    }
    if ((version == 0 && tables == 0) || version == SCHEMA_VERSION) {
        if (sqlite3_exec(s->db, pragmas, NULL, NULL, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "cannot set up %s: %s", path,
                     sqlite3_errmsg(s->db));
            goto failed;
        }
    }
    if (version == 0 && tables == 0) {
        if (sqlite3_exec(s->db, schema, NULL, NULL, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "cannot set up %s: %s", path,
                     sqlite3_errmsg(s->db));
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            goto failed;
        }
    } else if (version != SCHEMA_VERSION) {
        /* Never read or write another layout: say so and stop. */
        snprintf(err, errlen, "%s was written by %s spanprof serve "
                 "(database schema %" PRId64 "; this one reads schema %d "
                 "only): move the file away (or delete it) to start an "
                 "empty database", path,
                 version < SCHEMA_VERSION ? "an earlier" : "a later",
                 version, SCHEMA_VERSION);
        goto failed;
    }
    if (load_keys(s) != 0 || load_types(s) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, s->err);
        goto failed;
    }
    s->part_bits = PART_BITS;
    s->next_id = pragma_int(s, "SELECT coalesce(max(id), 0) + 1 FROM spans");
    if (s->next_id < 1) {
        snprintf(err, errlen, "cannot read %s: %s", path,
                 sqlite3_errmsg(s->db));
        goto failed;
    }
    for (i = 0; i < ST_N; i++) {
        if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1,
                               SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL)
            != SQLITE_OK)
        {
            snprintf(err, errlen, "cannot prepare a statement on %s: %s",
                     path, sqlite3_errmsg(s->db));
            goto failed;
        }
    }
    if (load_parts(s) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, s->err);
        goto failed;
    }
    free(path);
    return s;

failed:
    free(path);
    serve_store_close(s);
    return NULL;
}

void
serve_store_set_part_bits(serve_store_t *s, int bits)
{
    s->part_bits = bits;
}

void
serve_store_close(serve_store_t *s)
{
    int  i;

    if (s == NULL) {
        return;
    }
    (void) serve_store_flush(s);
    for (i = 0; i < ST_N; i++) {
        sqlite3_finalize(s->st[i]);
    }
    sqlite3_close(s->db);
    serve_keys_free(s->keys);
    types_truncate(s, 0);
    sp_buf_free(&s->attrs);
    sp_buf_free(&s->enc);
    serve_part_map_free(&s->parts);
    free(s);
}

const char *
serve_store_error(const serve_store_t *s)
{
    return s->err;
}

static int
run(serve_store_t *s, int which, const char *what)
{
    sqlite3_stmt  *st = s->st[which];
    int            rc = sqlite3_step(st);

    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        return fail(s, what);
    }
    return 0;
}

/* Batches are added to the open transaction, which commits when it holds
 * enough rows or is old enough (serve_store_flush): one commit for many
 * requests, far fewer page writes. A batch is not a savepoint: SQLite
 * would copy every page a batch changes before changing it (10% of the
 * ingest's CPU); callers check their input before adding, so only a store
 * failure undoes a batch, and it undoes the whole group (counted). */
#define COMMIT_ROWS  50000
#define COMMIT_NS    250000000LL

static int64_t
mono_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int
serve_store_begin(serve_store_t *s)
{
    s->batch_spans = s->batch_samples = 0;
    if (!s->in_txn) {
        if (run(s, ST_BEGIN, "begin") != 0) {
            return -1;
        }
        s->in_txn = 1;
        s->txn_no++;
        s->open_ns = mono_ns();
        s->pending_rows = 0;
        s->keys_at_txn = serve_keys_count(s->keys);
        s->types_at_txn = s->ntypes;
    }
    return 0;
}

int
serve_store_flush(serve_store_t *s)
{
    if (!s->in_txn) {
        return 0;
    }
    s->in_txn = 0;
    if (run(s, ST_COMMIT, "commit") != 0) {
        /* What the batches held is lost: counted, said by the caller. */
        s->stats.rows_lost += s->pending_rows;
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        serve_keys_truncate(s->keys, s->keys_at_txn);
        types_truncate(s, s->types_at_txn);
        parts_rolled_back(s);
        return -1;
    }
    return 0;
}

int
serve_store_commit(serve_store_t *s)
{
    s->stats.spans_stored += s->batch_spans;
    s->stats.samples_stored += s->batch_samples;
    s->pending_rows += s->batch_spans + s->batch_samples;
    if (s->pending_rows >= COMMIT_ROWS
        || mono_ns() - s->open_ns >= COMMIT_NS)
    {
        return serve_store_flush(s);
    }
    return 0;
}

void
serve_store_rollback(serve_store_t *s)
{
    if (s->in_txn) {
        /* SQLite may have rolled back already (a full disk): then this
         * ROLLBACK fails, harmlessly. */
        s->in_txn = 0;
        s->stats.rows_lost += s->pending_rows;
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        serve_keys_truncate(s->keys, s->keys_at_txn);
        types_truncate(s, s->types_at_txn);
        parts_rolled_back(s);
    }
    s->stats.batches_failed++;
}

static void
bind_str(sqlite3_stmt *st, int i, serve_str_t v)
{
    if (v.p != NULL) {
        sqlite3_bind_text(st, i, v.p, (int) v.len, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(st, i);
    }
}

static void
bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v != NULL) {
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(st, i);
    }
}

static void
put_varint(sp_buf_t *b, uint64_t v)
{
    uint8_t  t[10];
    size_t   n = 0;

    for (; v >= 0x80; v >>= 7) {
        t[n++] = (uint8_t) (v | 0x80);
    }
    t[n++] = (uint8_t) v;
    sp_buf_append(b, t, n);
}

/* A span's attributes (KeyValue fields) into s->attrs as stored (see
 * attrs_json.h): the key's number in the dictionary, added to it (and to
 * attr_keys, in the batch) when new, inline when the dictionary is full;
 * the AnyValue as it came. About a third of the size of the KeyValues. */
static int
pack_attrs(serve_store_t *s, const uint8_t *p, size_t len)
{
    serve_wire_t   w, kv;
    serve_field_t  f, g;
    const uint8_t *key, *val;
    size_t         klen, vlen;
    uint32_t       id;

    sp_buf_reset(&s->attrs);
    serve_wire_init(&w, p, len);
    while (len > 0 && serve_wire_next(&w, &f)) {
        if (f.type != 2) {
            continue;
        }
        key = val = NULL;
        klen = vlen = 0;
        serve_wire_init(&kv, f.data, f.len);
        while (serve_wire_next(&kv, &g)) {
            if (g.num == 1 && g.type == 2) {
                key = g.data;
                klen = g.len;
            } else if (g.num == 2 && g.type == 2) {
                val = g.data;
                vlen = g.len;
            }
        }
        if (key == NULL) {
            continue;
        }
        id = serve_keys_find(s->keys, (const char *) key, klen);
        if (id == 0 && (id = serve_keys_add(s->keys, (const char *) key,
                                            klen)) != 0)
        {
            sqlite3_bind_int64(s->st[ST_KEY_PUT], 1, id);
            sqlite3_bind_text(s->st[ST_KEY_PUT], 2, (const char *) key,
                              (int) klen, SQLITE_STATIC);
            if (run(s, ST_KEY_PUT, "insert an attribute key") != 0) {
                serve_keys_truncate(s->keys, id - 1);
                return -1;
            }
        }
        put_varint(&s->attrs, id);
        if (id == 0) {
            put_varint(&s->attrs, klen);
            sp_buf_append(&s->attrs, key, klen);
        }
        put_varint(&s->attrs, vlen);
        if (vlen > 0) {
            sp_buf_append(&s->attrs, val, vlen);
        }
    }
    if (sp_buf_failed(&s->attrs)) {
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    return 0;
}

int
serve_store_add_span(serve_store_t *s, const serve_span_t *sp)
{
    sqlite3_stmt  *st = s->st[ST_SPAN];
    serve_part_t  *p;

    /* The part full: its summary stored with the spans that fill the
     * next (a part is never added to again). */
    if (s->cur_count >= (int64_t) 1 << s->part_bits) {
        if (save_parts(s, s->cur_part) != 0) {
            return -1;
        }
        s->cur_part++;
        s->cur_count = 0;
    }
    p = serve_part_get(&s->parts, s->cur_part, (size_t) 1 << s->part_bits);
    if (p == NULL) {
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    sqlite3_bind_blob(st, 1, sp->trace_id, 16, SQLITE_STATIC);
    sqlite3_bind_int64(st, 15, s->next_id++);
    sqlite3_bind_int64(st, 17, s->cur_part);
    sqlite3_bind_int64(st, 16, trace_key(sp->trace_id));
    sqlite3_bind_blob(st, 2, sp->span_id, 8, SQLITE_STATIC);
    if (sp->has_parent) {
        sqlite3_bind_blob(st, 3, sp->parent_id, 8, SQLITE_STATIC);
    }
    bind_str(st, 4, sp->service);
    bind_str(st, 5, sp->name);
    sqlite3_bind_int(st, 6, sp->kind);
    bind_str(st, 7, sp->route);
    bind_str(st, 8, sp->method);
    bind_str(st, 9, sp->target);
    sqlite3_bind_int(st, 10, sp->http_status);
    sqlite3_bind_int(st, 11, sp->error);
    sqlite3_bind_int64(st, 12, sp->start_ns);
    sqlite3_bind_int64(st, 13, sp->end_ns);
    if (sp->attrs_len > 0) {
        if (pack_attrs(s, sp->attrs, sp->attrs_len) != 0) {
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            return -1;
        }
        sqlite3_bind_blob(st, 14, s->attrs.data, (int) s->attrs.len,
                          SQLITE_STATIC);
    }
    if (run(s, ST_SPAN, "insert a span") != 0) {
        return -1;
    }
    serve_part_add(p, trace_key(sp->trace_id), sp->kind, sp->start_ns,
                   sp->end_ns - sp->start_ns);
    s->cur_count++;
    s->batch_spans++;
    return 0;
}

static int64_t
stack_id(serve_store_t *s, const char *stack)
{
    sqlite3_stmt  *st;
    int64_t        id = -1;

    sqlite3_bind_text(s->st[ST_STACK_PUT], 1, stack, -1, SQLITE_STATIC);
    if (run(s, ST_STACK_PUT, "insert a stack") != 0) {
        return -1;
    }
    st = s->st[ST_STACK_GET];
    sqlite3_bind_text(st, 1, stack, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        id = sqlite3_column_int64(st, 0);
    } else {
        fail(s, "look a stack up");
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return id;
}

int
serve_store_add_sample(serve_store_t *s, const serve_sample_t *sa)
{
    sqlite3_stmt  *st = s->st[ST_SAMPLE];
    int64_t        id;

    id = stack_id(s, sa->stack);
    if (id < 0) {
        return -1;
    }
    sqlite3_bind_int64(st, 1, sa->time_ns);
    sqlite3_bind_int64(st, 2, sa->duration_ns);
    bind_text(st, 3, sa->service);
    sqlite3_bind_int64(st, 4, sa->pid);
    if (sa->trace_id != NULL && sa->span_id != NULL) {
        sqlite3_bind_blob(st, 5, sa->trace_id, 16, SQLITE_STATIC);
        sqlite3_bind_blob(st, 6, sa->span_id, 8, SQLITE_STATIC);
    }
    bind_text(st, 7, sa->span_name);
    sqlite3_bind_int64(st, 8, id);
    sqlite3_bind_int64(st, 9, sa->count);
    sqlite3_bind_int64(st, 10, sa->value);
    sqlite3_bind_int64(st, 11, sa->type > 0 ? sa->type : SERVE_TYPE_CPU);
    if (run(s, ST_SAMPLE, "insert a sample") != 0) {
        return -1;
    }
    s->batch_samples++;
    return 0;
}

/* --- retention ----------------------------------------------------------- */

int64_t
serve_store_size(serve_store_t *s)
{
    int64_t  pages = pragma_int(s, "PRAGMA page_count"),
             free_pages = pragma_int(s, "PRAGMA freelist_count"),
             page = pragma_int(s, "PRAGMA page_size");

    if (pages < 0 || free_pages < 0 || page < 0) {
        return -1;
    }
    return (pages - free_pages) * page;
}

/* Runs a DELETE with one int64 bound; the rows it removed, or -1. */
static int64_t
delete_where(serve_store_t *s, const char *sql, int64_t v)
{
    sqlite3_stmt  *st;
    int            rc;

    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        return fail(s, "prepare a delete");
    }
    sqlite3_bind_int64(st, 1, v);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        return fail(s, "delete");
    }
    return sqlite3_changes(s->db);
}

static int
delete_counted(serve_store_t *s, const char *spans_sql,
    const char *samples_sql, int64_t v)
{
    int64_t  a, b, lo = INT64_MAX;

    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)
        != SQLITE_OK)
    {
        return fail(s, "begin");
    }
    a = delete_where(s, spans_sql, v);
    b = a < 0 ? -1 : delete_where(s, samples_sql, v);
    /* The summaries of the parts left without spans go with them (those
     * of parts left with some still say "maybe" for the spans gone). */
    if (b < 0
        || query_i64(s, "SELECT min(part) FROM spans", 0, INT64_MAX, &lo)
           != 0
        || delete_where(s, "DELETE FROM parts WHERE part < ?1", lo) < 0
        || delete_where(s, "DELETE FROM stacks WHERE ?1 AND id NOT IN"
                        " (SELECT stack_id FROM samples)", b > 0) < 0
        || sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    serve_part_map_keep(&s->parts, lo, INT64_MAX);
    s->stats.spans_deleted += (uint64_t) a;
    s->stats.samples_deleted += (uint64_t) b;
    return 0;
}

int
serve_store_retain(serve_store_t *s, int64_t now_ns, int64_t max_age_ns,
    int64_t max_bytes)
{
    int64_t  size;
    int      rounds;

    if (serve_store_flush(s) != 0) {
        return -1;
    }
    if (max_age_ns > 0
        && delete_counted(s, "DELETE FROM spans WHERE start_ns < ?1",
                          "DELETE FROM samples WHERE time_ns < ?1",
                          now_ns - max_age_ns) != 0)
    {
        return -1;
    }
    /* Oldest first, a tenth of the rows a round, until under the bound
     * (at most 10 rounds: then the database is empty). */
    for (rounds = 0; max_bytes > 0 && rounds < 10; rounds++) {
        size = serve_store_size(s);
        if (size < 0) {
            return fail(s, "measure the database");
        }
        if (size <= max_bytes) {
            break;
        }
        if (delete_counted(s,
                "DELETE FROM spans WHERE id <= ?1 + (SELECT min(id) +"
                " (max(id) - min(id)) / 10 FROM spans)",
                "DELETE FROM samples WHERE id <= ?1 + (SELECT min(id) +"
                " (max(id) - min(id)) / 10 FROM samples)", 0) != 0)
        {
            return -1;
        }
    }
    return 0;
}

void
serve_store_get_stats(const serve_store_t *s, serve_store_stats_t *st)
{
    *st = s->stats;
}

/* --- queries --------------------------------------------------------------- */

static void
col_json_str(sp_buf_t *out, sqlite3_stmt *st, int i)
{
    const unsigned char  *v = sqlite3_column_text(st, i);

    if (v == NULL) {
        sp_buf_append_str(out, "null");
    } else {
        serve_json_strn(out, (const char *) v,
                        (size_t) sqlite3_column_bytes(st, i));
    }
}

static void
col_json_hex(sp_buf_t *out, sqlite3_stmt *st, int i)
{
    const void  *v = sqlite3_column_blob(st, i);

    if (v == NULL) {
        sp_buf_append_str(out, "null");
    } else {
        serve_json_hex(out, v, (size_t) sqlite3_column_bytes(st, i));
    }
}

int
serve_store_services(serve_store_t *s, sp_buf_t *out)
{
    sqlite3_stmt  *st;
    int            rc, first = 1;

    if (sqlite3_prepare_v2(s->db, "SELECT DISTINCT service FROM spans"
                           " WHERE service IS NOT NULL ORDER BY service",
                           -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    sp_buf_append_char(out, '[');
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!first) {
            sp_buf_append_char(out, ',');
        }
        first = 0;
        col_json_str(out, st, 0);
    }
    sp_buf_append_char(out, ']');
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "list services");
}

/* The columns of one span, as a JSON object's members (no braces). */
#define SPAN_COLS \
    "trace_id, span_id, parent_id, service, name, kind, route, method," \
    " target, http_status, error, start_ns, end_ns"

static void
span_members(sp_buf_t *out, sqlite3_stmt *st, int c)
{
    sp_buf_append_str(out, "\"trace_id\":");
    col_json_hex(out, st, c + 0);
    sp_buf_append_str(out, ",\"span_id\":");
    col_json_hex(out, st, c + 1);
    sp_buf_append_str(out, ",\"parent_id\":");
    col_json_hex(out, st, c + 2);
    sp_buf_append_str(out, ",\"service\":");
    col_json_str(out, st, c + 3);
    sp_buf_append_str(out, ",\"name\":");
    col_json_str(out, st, c + 4);
    sp_buf_appendf(out, ",\"kind\":%d,\"route\":",
                   sqlite3_column_int(st, c + 5));
    col_json_str(out, st, c + 6);
    sp_buf_append_str(out, ",\"method\":");
    col_json_str(out, st, c + 7);
    sp_buf_append_str(out, ",\"target\":");
    col_json_str(out, st, c + 8);
    sp_buf_appendf(out, ",\"http_status\":%d,\"error\":%s,"
                   "\"start_ns\":%" PRId64 ",\"duration_ns\":%" PRId64,
                   sqlite3_column_int(st, c + 9),
                   sqlite3_column_int(st, c + 10) ? "true" : "false",
                   (int64_t) sqlite3_column_int64(st, c + 11),
                   (int64_t) (sqlite3_column_int64(st, c + 12)
                              - sqlite3_column_int64(st, c + 11)));
}

/* Bounds the rows a search reads to find `limit` distinct traces (a trace
 * with many SERVER spans shows once). */
#define SEARCH_MAX_ROWS  100000

#define SEARCH_FILTERS \
    " AND (?1 IS NULL OR service = ?1) AND (?2 IS NULL OR route = ?2)" \
    " AND (?3 IS NULL OR method = ?3) AND (?4 = 0 OR http_status = ?4)" \
    " AND start_ns >= ?6 AND start_ns < ?7"

/* A search's candidate: a trace by its best span so far. */
typedef struct {
    int64_t  id, key;               /* the span; its duration or start */
    uint8_t  tid[16];
} hit_t;

/* Keeps best[0..*n) the `limit` traces of highest key, one entry per
 * trace (its highest key), highest first. */
static void
best_add(hit_t *best, int *n, int limit, const hit_t *h)
{
    int  i, at;

    for (i = 0; i < *n; i++) {
        if (memcmp(best[i].tid, h->tid, 16) == 0) {
            if (best[i].key >= h->key) {
                return;
            }
            memmove(&best[i], &best[i + 1], (size_t) (*n - i - 1)
                    * sizeof(*best));
            (*n)--;
            break;
        }
    }
    for (at = *n; at > 0 && best[at - 1].key < h->key; at--) {
        /* the place after the entries with a key as high */
    }
    if (at >= limit) {
        return;
    }
    if (*n == limit) {
        (*n)--;
    }
    memmove(&best[at + 1], &best[at], (size_t) (*n - at) * sizeof(*best));
    best[at] = *h;
    (*n)++;
}

/* Walks st's rows (id, trace_id, key; key descending) into best, until
 * no further row can enter it or *rows reaches the bound. */
static int
search_scan(sqlite3_stmt *st, hit_t *best, int *n, int limit, int *rows)
{
    hit_t  h;
    int    rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const void  *tid = sqlite3_column_blob(st, 1);

        h.key = sqlite3_column_int64(st, 2);
        if (*n == limit && h.key <= best[limit - 1].key) {
            break;
        }
        if (++*rows > SEARCH_MAX_ROWS) {
            break;
        }
        if (tid == NULL || sqlite3_column_bytes(st, 1) != 16) {
            continue;
        }
        h.id = sqlite3_column_int64(st, 0);
        memcpy(h.tid, tid, 16);
        best_add(best, n, limit, &h);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* Appends to sql the parts that may hold spans of trace key k
 * ("p1,p2,..."): how many. */
static int
parts_of_trace(serve_store_t *s, int64_t k, sp_buf_t *sql)
{
    size_t  i;
    int     n = 0;

    for (i = 0; i < s->parts.n; i++) {
        if (serve_part_may_hold(&s->parts.v[i], k)) {
            sp_buf_appendf(sql, "%s%" PRId64, n++ ? "," : "",
                           s->parts.v[i].part);
        }
    }
    return n;
}

/* The number of spans of a trace. */
static int
trace_spans(serve_store_t *s, const uint8_t tid[16], int64_t *count)
{
    sp_buf_t  sql;
    int       rc;

    *count = 0;
    sp_buf_init(&sql);
    sp_buf_append_str(&sql, "SELECT count(*) FROM spans WHERE part IN (");
    if (parts_of_trace(s, trace_key(tid), &sql) == 0) {
        sp_buf_free(&sql);
        return 0;
    }
    sp_buf_append_str(&sql, ") AND tkey = ?1 AND trace_id = ?2");
    sp_buf_append_char(&sql, '\0');
    if (sp_buf_failed(&sql)) {
        sp_buf_free(&sql);
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    {
        sqlite3_stmt  *st;

        if (sqlite3_prepare_v2(s->db, (const char *) sql.data, -1, &st, NULL)
            != SQLITE_OK)
        {
            sp_buf_free(&sql);
            return fail(s, "prepare");
        }
        sqlite3_bind_int64(st, 1, trace_key(tid));
        sqlite3_bind_blob(st, 2, tid, 16, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *count = sqlite3_column_int64(st, 0);
        }
        sqlite3_finalize(st);
    }
    sp_buf_free(&sql);
    return rc == SQLITE_ROW ? 0 : fail(s, "count a trace's spans");
}

/* Orders parts' summaries by their longest span, longest first (then
 * the newest first). */
static int
cmp_longest(const void *a, const void *b)
{
    const serve_part_t  *x = *(const serve_part_t *const *) a,
                        *y = *(const serve_part_t *const *) b;

    if (x->max_dur != y->max_dur) {
        return x->max_dur < y->max_dur ? 1 : -1;
    }
    return x->part < y->part ? 1 : x->part > y->part ? -1 : 0;
}

static void
bind_search(sqlite3_stmt *st, const serve_trace_query_t *q)
{
    bind_text(st, 1, q->service);
    bind_text(st, 2, q->route);
    bind_text(st, 3, q->method);
    sqlite3_bind_int(st, 4, q->status);
    sqlite3_bind_int64(st, 5, q->min_duration_ns);
    sqlite3_bind_int64(st, 6, q->from_ns);
    sqlite3_bind_int64(st, 7, q->to_ns);
}

int
serve_store_traces(serve_store_t *s, const serve_trace_query_t *q,
    sp_buf_t *out)
{
    sqlite3_stmt   *st = NULL, *row = NULL;
    serve_part_t  **by_dur = NULL;
    hit_t          *best;
    int             n = 0, rows = 0, i, rc = -1;
    int64_t         spans;
    size_t          j, nparts = 0;

    best = calloc((size_t) q->limit + 1, sizeof(*best));
    by_dur = malloc((s->parts.n + 1) * sizeof(*by_dur));
    if (best == NULL || by_dur == NULL) {
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    /* The SERVER spans in the order asked, descending, keeping the first
     * span of each trace: the newest from the start index; the slowest
     * from the duration index of the parts by their longest span, merged
     * (a trace's slowest span in its part is its slowest overall or not
     * among the first `limit`), until the next part's longest cannot
     * make the list. No GROUP BY: a search reads about `limit` rows. */
    if (sqlite3_prepare_v2(s->db, q->slowest
            /* One lower bound on dur_ns (?9, the minimum duration or
             * what has been kept): with two, SQLite may take the lower
             * for the index range and read the whole part. */
            ? "SELECT id, trace_id, dur_ns FROM spans WHERE part = ?8"
              " AND kind = 2 AND dur_ns > ?9" SEARCH_FILTERS
              " ORDER BY dur_ns DESC"
            : "SELECT id, trace_id, start_ns FROM spans WHERE kind = 2"
              " AND dur_ns >= ?5" SEARCH_FILTERS " ORDER BY start_ns DESC",
            -1, &st, NULL)
            != SQLITE_OK
        || sqlite3_prepare_v2(s->db, "SELECT " SPAN_COLS " FROM spans"
                              " WHERE id = ?1", -1, &row, NULL) != SQLITE_OK)
    {
        fail(s, "prepare");
        goto done;
    }
    bind_search(st, q);
    if (q->slowest) {
        /* The parts that may hold SERVER spans long enough, started in
         * the range. */
        for (j = 0; j < s->parts.n; j++) {
            if (s->parts.v[j].max_dur != INT64_MIN
                && s->parts.v[j].max_dur >= q->min_duration_ns
                && s->parts.v[j].max_start >= q->from_ns
                && s->parts.v[j].min_start < q->to_ns)
            {
                by_dur[nparts++] = &s->parts.v[j];
            }
        }
        qsort(by_dur, nparts, sizeof(*by_dur), cmp_longest);
        for (j = 0; j < nparts && rows <= SEARCH_MAX_ROWS; j++) {
            if (n == q->limit && by_dur[j]->max_dur <= best[n - 1].key) {
                break;
            }
            /* Once `limit` traces are found, a part's index is read from
             * the top down to the lowest of them only. */
            sqlite3_bind_int64(st, 8, by_dur[j]->part);
            sqlite3_bind_int64(st, 9, n == q->limit
                                      && best[n - 1].key >= q->min_duration_ns
                                      ? best[n - 1].key
                                      : q->min_duration_ns - 1);
            if (search_scan(st, best, &n, q->limit, &rows) != 0) {
                fail(s, "search traces");
                goto done;
            }
        }
    } else if (search_scan(st, best, &n, q->limit, &rows) != 0) {
        fail(s, "search traces");
        goto done;
    }

    sp_buf_append_char(out, '[');
    for (i = 0; i < n; i++) {
        sqlite3_bind_int64(row, 1, best[i].id);
        if (sqlite3_step(row) != SQLITE_ROW) {
            fail(s, "read a span");
            goto done;
        }
        sp_buf_append_str(out, i ? ",{" : "{");
        span_members(out, row, 0);
        sqlite3_reset(row);
        if (trace_spans(s, best[i].tid, &spans) != 0) {
            goto done;
        }
        sp_buf_appendf(out, ",\"spans\":%" PRId64 "}", spans);
    }
    sp_buf_append_char(out, ']');
    rc = 0;

done:
    free(best);
    free(by_dur);
    sqlite3_finalize(row);
    sqlite3_finalize(st);
    return rc;
}

/* *v := the integer after key in the JSON object out[at..] (the span's
 * attributes as serve_attrs_json wrote them: keys escaped, so a key's
 * quoted text appears only as that key), when there is one. */
static void
attr_time(const sp_buf_t *out, size_t at, const char *key, int64_t *v)
{
    const char  *p = (const char *) out->data + at,
                *end = (const char *) out->data + out->len;
    size_t       klen = strlen(key);
    char        *e;
    long long    x;

    for (; p + klen < end; p++) {
        if (memcmp(p, key, klen) == 0) {
            char  num[24];
            size_t  n = 0;

            p += klen;
            while (p < end && n < sizeof(num) - 1
                   && (*p == '-' || (*p >= '0' && *p <= '9')))
            {
                num[n++] = *p++;
            }
            num[n] = '\0';
            x = strtoll(num, &e, 10);
            if (n > 0 && *e == '\0' && x >= 0) {
                *v = x;
            }
            return;
        }
    }
}

int
serve_store_trace(serve_store_t *s, const uint8_t trace_id[16],
    sp_buf_t *out)
{
    sqlite3_stmt  *st;
    sp_buf_t       sql;
    int            rc, n = 0;

    sp_buf_append_str(out, "{\"trace_id\":");
    serve_json_hex(out, trace_id, 16);
    sp_buf_append_str(out, ",\"spans\":[");
    /* Only the parts whose filter may hold the trace (usually one). */
    sp_buf_init(&sql);
    sp_buf_append_str(&sql,
        "SELECT " SPAN_COLS ", attrs,"
        " (SELECT total(count) FROM samples a"
        "  WHERE a.span_id = s.span_id AND a.trace_id = s.trace_id"
        "  AND a.type = 1),"
        " (SELECT total(value) FROM samples a"
        "  WHERE a.span_id = s.span_id AND a.trace_id = s.trace_id"
        "  AND a.type = 1),"
        " (SELECT sum(value) FROM samples a"
        "  WHERE a.span_id = s.span_id AND a.trace_id = s.trace_id"
        "  AND a.type = ?3),"
        " (SELECT sum(value) FROM samples a"
        "  WHERE a.span_id = s.span_id AND a.trace_id = s.trace_id"
        "  AND a.type = ?4)"
        " FROM spans s WHERE part IN (");
    if (parts_of_trace(s, trace_key(trace_id), &sql) == 0) {
        sp_buf_free(&sql);
        sp_buf_append_str(out, "]}");
        return 1;
    }
    sp_buf_append_str(&sql, ") AND tkey = ?2 AND trace_id = ?1"
                      " ORDER BY start_ns, id");
    sp_buf_append_char(&sql, '\0');
    if (sp_buf_failed(&sql)) {
        sp_buf_free(&sql);
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    rc = sqlite3_prepare_v2(s->db, (const char *) sql.data, -1, &st, NULL);
    sp_buf_free(&sql);
    if (rc != SQLITE_OK) {
        return fail(s, "prepare");
    }
    sqlite3_bind_blob(st, 1, trace_id, 16, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, trace_key(trace_id));
    sqlite3_bind_int64(st, 3, serve_store_type_find(s, "wall"));
    sqlite3_bind_int64(st, 4, serve_store_type_find(s, "off_cpu"));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        size_t   at;
        int64_t  v[3];

        sp_buf_append_str(out, n++ ? ",{" : "{");
        span_members(out, st, 0);
        sp_buf_append_str(out, ",\"attributes\":");
        at = out->len;
        serve_attrs_json(out, sqlite3_column_blob(st, 13),
                         (size_t) sqlite3_column_bytes(st, 13), s->keys);
        /* The times the module measured for the span (its attributes)
         * when it sent them; else the sum of its samples (wall, off_cpu:
         * null when none came). */
        v[0] = sqlite3_column_int64(st, 15);
        v[1] = sqlite3_column_type(st, 16) == SQLITE_NULL ? -1
               : sqlite3_column_int64(st, 16);
        v[2] = sqlite3_column_type(st, 17) == SQLITE_NULL ? -1
               : sqlite3_column_int64(st, 17);
        attr_time(out, at, "\"spanprof.cpu_time_ns\":", &v[0]);
        attr_time(out, at, "\"spanprof.wall_time_ns\":", &v[1]);
        attr_time(out, at, "\"spanprof.off_cpu_time_ns\":", &v[2]);
        sp_buf_appendf(out, ",\"cpu_samples\":%" PRId64 ",\"cpu_ns\":%"
                       PRId64, (int64_t) sqlite3_column_int64(st, 14), v[0]);
        for (int i = 1; i < 3; i++) {
            sp_buf_appendf(out, i == 1 ? ",\"wall_ns\":" : ",\"off_cpu_ns\":");
            if (v[i] < 0) {
                sp_buf_append_str(out, "null");
            } else {
                sp_buf_appendf(out, "%" PRId64, v[i]);
            }
        }
        sp_buf_append_char(out, '}');
    }
    sp_buf_append_str(out, "]}");
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        return fail(s, "read a trace");
    }
    return n == 0 ? 1 : 0;
}

int
serve_store_workers(serve_store_t *s, int64_t from_ns, int64_t to_ns,
    sp_buf_t *out)
{
    sqlite3_stmt  *st;
    int            rc, n = 0;

    if (sqlite3_prepare_v2(s->db,
            "SELECT pid, max(service), total(count), total(value),"
            " total(CASE WHEN span_id IS NULL THEN 0 ELSE value END),"
            " min(time_ns), max(time_ns + duration_ns)"
            " FROM samples WHERE time_ns >= ?1 AND time_ns < ?2"
            " AND type = 1"
            " GROUP BY pid ORDER BY total(value) DESC LIMIT 1000",
            -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    sqlite3_bind_int64(st, 1, from_ns);
    sqlite3_bind_int64(st, 2, to_ns);
    sp_buf_append_char(out, '[');
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sp_buf_appendf(out, "%s{\"pid\":%lld,\"service\":", n++ ? "," : "",
                       (long long) sqlite3_column_int64(st, 0));
        col_json_str(out, st, 1);
        sp_buf_appendf(out, ",\"samples\":%lld,\"cpu_ns\":%lld,"
                       "\"in_requests_ns\":%lld,\"first_ns\":%lld,"
                       "\"last_ns\":%lld}",
                       (long long) sqlite3_column_int64(st, 2),
                       (long long) sqlite3_column_int64(st, 3),
                       (long long) sqlite3_column_int64(st, 4),
                       (long long) sqlite3_column_int64(st, 5),
                       (long long) sqlite3_column_int64(st, 6));
    }
    sp_buf_append_char(out, ']');
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "list workers");
}

/* The samples a query selects: the conditions on samples a (bound by
 * bind_selection), without the type. */
static const char *
selection_where(const serve_sample_query_t *q)
{
    if (q->span_id != NULL) {
        return " a.span_id = ?1 AND a.trace_id = ?2";
    }
    if (q->route != NULL) {
        return " a.span_id IN (SELECT span_id FROM spans"
               "  WHERE service IS ?3 AND route = ?4 AND kind = 2"
               "  AND start_ns >= ?5 AND start_ns < ?6"
               "  AND end_ns - start_ns >= ?7 AND end_ns - start_ns < ?8)";
    }
    return " a.time_ns >= ?5 AND a.time_ns < ?6 AND (?9 = 0 OR a.pid = ?9)";
}

static void
bind_selection(sqlite3_stmt *st, const serve_sample_query_t *q)
{
    if (q->span_id != NULL) {
        sqlite3_bind_blob(st, 1, q->span_id, 8, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, q->trace_id, 16, SQLITE_STATIC);
    }
    bind_text(st, 3, q->service);
    bind_text(st, 4, q->route);
    sqlite3_bind_int64(st, 5, q->from_ns);
    sqlite3_bind_int64(st, 6, q->to_ns);
    sqlite3_bind_int64(st, 7, q->min_duration_ns);
    sqlite3_bind_int64(st, 8, q->max_duration_ns > 0 ? q->max_duration_ns
                                                    : INT64_MAX);
    sqlite3_bind_int64(st, 9, q->pid);
    sqlite3_bind_int64(st, 10, q->type != 0 ? q->type : SERVE_TYPE_CPU);
}

/* A type whose samples are each a snapshot (in-use memory), not a sum of
 * events over their interval. */
static int
is_gauge(const serve_store_t *s, int type)
{
    return type >= 1 && (size_t) type <= s->ntypes
           && strncmp(s->types[type - 1], "inuse_", 6) == 0;
}

int
serve_store_stacks(serve_store_t *s, const serve_sample_query_t *q,
    serve_stack_fn fn, void *ud)
{
    sqlite3_stmt  *st;
    sp_buf_t       sql;
    int            rc, all = q->span_id == NULL && q->route == NULL;

    sp_buf_init(&sql);
    sp_buf_append_str(&sql, "SELECT k.stack, total(a.count), total(a.value), ");
    sp_buf_append_str(&sql, all ? "a.span_id IS NOT NULL" : "1");
    sp_buf_append_str(&sql, " FROM samples a JOIN stacks k"
                      " ON k.id = a.stack_id WHERE");
    sp_buf_append_str(&sql, selection_where(q));
    sp_buf_append_str(&sql, " AND a.type = ?10");
    if (is_gauge(s, q->type)) {
        /* Snapshots do not add up over time: each worker's latest one in
         * the selection. */
        sp_buf_append_str(&sql, " AND a.time_ns = (SELECT max(b.time_ns)"
                          " FROM samples b WHERE b.pid = a.pid"
                          " AND b.type = a.type AND b.time_ns >= ?5"
                          " AND b.time_ns < ?6)");
    }
    sp_buf_append_str(&sql, all
                      ? " GROUP BY a.stack_id, a.span_id IS NOT NULL"
                      : " GROUP BY a.stack_id");
    sp_buf_append_char(&sql, '\0');
    if (sp_buf_failed(&sql)) {
        sp_buf_free(&sql);
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    rc = sqlite3_prepare_v2(s->db, (const char *) sql.data, -1, &st, NULL);
    sp_buf_free(&sql);
    if (rc != SQLITE_OK) {
        return fail(s, "prepare");
    }
    bind_selection(st, q);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (fn(ud, (const char *) sqlite3_column_text(st, 0),
               sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
               sqlite3_column_int(st, 3)) != 0)
        {
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "read samples");
}

int
serve_store_types(serve_store_t *s, const serve_sample_query_t *q,
    sp_buf_t *out)
{
    sqlite3_stmt  *st;
    sp_buf_t       sql;
    int            rc, n = 0;

    sp_buf_init(&sql);
    sp_buf_append_str(&sql, "SELECT a.type, total(a.value), total(a.count)"
                      " FROM samples a WHERE");
    sp_buf_append_str(&sql, selection_where(q));
    sp_buf_append_str(&sql, " AND ?10 = ?10 GROUP BY a.type ORDER BY a.type");
    sp_buf_append_char(&sql, '\0');
    if (sp_buf_failed(&sql)) {
        sp_buf_free(&sql);
        snprintf(s->err, sizeof(s->err), "out of memory");
        return -1;
    }
    rc = sqlite3_prepare_v2(s->db, (const char *) sql.data, -1, &st, NULL);
    sp_buf_free(&sql);
    if (rc != SQLITE_OK) {
        return fail(s, "prepare");
    }
    bind_selection(st, q);
    sp_buf_append_char(out, '[');
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int  t = sqlite3_column_int(st, 0);

        if (t < 1 || (size_t) t > s->ntypes) {
            continue;
        }
        sp_buf_append_str(out, n++ ? ",{\"type\":" : "{\"type\":");
        serve_json_str(out, s->types[t - 1]);
        sp_buf_append_str(out, ",\"unit\":");
        serve_json_str(out, s->units[t - 1]);
        sp_buf_appendf(out, ",\"gauge\":%s,\"value\":%lld,\"samples\":%lld}",
                       is_gauge(s, t) ? "true" : "false",
                       (long long) sqlite3_column_int64(st, 1),
                       (long long) sqlite3_column_int64(st, 2));
    }
    sp_buf_append_char(out, ']');
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "list sample types");
}

int
serve_store_memory(serve_store_t *s, int64_t from_ns, int64_t to_ns,
    sp_buf_t *out)
{
    sqlite3_stmt  *st;
    int            rc, n = 0, type = serve_store_type_find(s, "inuse_space");
    int64_t        pid = 0;

    sp_buf_append_char(out, '[');
    if (type == 0) {
        sp_buf_append_char(out, ']');
        return 0;
    }
    /* Each profile of a worker is one snapshot: its samples' sum. */
    if (sqlite3_prepare_v2(s->db,
            "SELECT pid, max(service), time_ns, total(value) FROM samples"
            " WHERE type = ?3 AND time_ns >= ?1 AND time_ns < ?2"
            " GROUP BY pid, time_ns ORDER BY pid, time_ns LIMIT 100000",
            -1, &st, NULL) != SQLITE_OK)
    {
        return fail(s, "prepare");
    }
    sqlite3_bind_int64(st, 1, from_ns);
    sqlite3_bind_int64(st, 2, to_ns);
    sqlite3_bind_int64(st, 3, type);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t  p = sqlite3_column_int64(st, 0);

        if (n == 0 || p != pid) {
            sp_buf_appendf(out, "%s{\"pid\":%lld,\"service\":",
                           n ? "]}," : "", (long long) p);
            col_json_str(out, st, 1);
            sp_buf_append_str(out, ",\"points\":[");
            pid = p;
        } else {
            sp_buf_append_char(out, ',');
        }
        sp_buf_appendf(out, "[%lld,%lld]",
                       (long long) sqlite3_column_int64(st, 2),
                       (long long) sqlite3_column_int64(st, 3));
        n++;
    }
    sp_buf_append_str(out, n ? "]}]" : "]");
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "list in-use memory");
}
