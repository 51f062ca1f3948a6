/* The control API's core: body parsing, public URLs, the shared control
 * state and status slots (also across fork), and the JSON and Prometheus
 * renderings (parsed back). */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "tap.h"
#include "common/control/api_info.h"
#include "common/control/api_request.h"
#include "common/control/control_body.h"
#include "common/control/control_shm.h"
#include "common/control/status_json.h"
#include "common/control/status_prom.h"
#include "common/profile/sampler.h"

static void
test_body(void)
{
    sp_control_body_t  b;
    char               err[256];
    static const char *bad[] = {
        "", "{", "[]", "true", "{}", "{\"profiling\": 1}",
        "{\"profiling\": \"off\"}", "{\"rate\": 0}", "{\"rate\": 1001}",
        "{\"rate\": 10.5}", "{\"rate\": -3}", "{\"rate\": \"100\"}",
        "{\"speed\": 3}", "{\"rate\": 5, \"rate\": 6}", "null",
        "{\"profiling\": false} x", "{\"memory\": 1}", "{\"memory\": null}",
    };
    size_t  i;

    ok(sp_control_body_parse("{\"profiling\": false}", 20, &b, err,
                             sizeof(err)) == 0
       && b.profiling == 0 && b.rate_hz == 0, "profiling false");
    ok(sp_control_body_parse("{\"profiling\":true,\"rate\":250}", 29, &b, err,
                             sizeof(err)) == 0
       && b.profiling == 1 && b.rate_hz == 250, "profiling true, rate 250");
    ok(sp_control_body_parse("{\"rate\": 1000}", 14, &b, err, sizeof(err))
       == 0 && b.profiling == -1 && b.rate_hz == 1000, "rate only");
    ok(sp_control_body_parse("{\"memory\": false}", 17, &b, err, sizeof(err))
       == 0 && b.memory == 0 && b.profiling == -1 && b.cpu == -1
       && b.wall == -1, "memory false only");
    ok(sp_control_body_parse("{\"memory\":true,\"wall\":false}", 28, &b, err,
                             sizeof(err)) == 0
       && b.memory == 1 && b.wall == 0, "memory true, wall false");
    ok(sp_control_body_parse("{\"rate\": 5}", 11, &b, err, sizeof(err)) == 0
       && b.memory == -1, "memory not given: -1");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ok(sp_control_body_parse(bad[i], strlen(bad[i]), &b, err,
                                 sizeof(err)) != 0 && err[0] != '\0',
           "rejected: %s (%s)", bad[i], err);
    }
    ok(sp_control_body_parse("{\"rate\":5}", SP_CONTROL_BODY_MAX + 1, &b, err,
                             sizeof(err)) != 0, "too large");
}

static void
test_public_url(void)
{
    char  out[256];

    is_str(sp_api_public_url("https://user:s3cret@col.example:4318/otlp?"
                             "token=abc#x", out, sizeof(out)),
           "https://col.example:4318/otlp", "userinfo, query out");
    is_str(sp_api_public_url("http://a@b@h:1", out, sizeof(out)), "http://h:1",
           "last @ ends the userinfo");
    is_str(sp_api_public_url("http://h:4318", out, sizeof(out)),
           "http://h:4318", "plain");
    is_str(sp_api_public_url("file:///var/spool/x", out, sizeof(out)),
           "file:///var/spool/x", "file URL");
    is_str(sp_api_public_url("http://u:p@host/a", out, 10), "http://ho",
           "truncated, NUL-ended");
    is_str(sp_api_public_url(NULL, out, sizeof(out)), "", "NULL");
    is_str(sp_api_public_url("u:p@host/x", out, sizeof(out)), "",
           "no scheme: nothing shown");
    is_str(sp_api_public_url("{\"a://u@h", out, sizeof(out)), "",
           "not a scheme: nothing shown");
}

static void
test_state(void *mem)
{
    sp_control_shm_t    *c;
    sp_control_state_t   st, conf;

    /* Memory as APR's anonymous shared memory gives it: 8 bytes in. */
    c = sp_control_shm_init((char *) mem + 8, 1, 100);
    ok(((uintptr_t) c & 63) == 0 && (char *) c >= (char *) mem + 8
       && (char *) c + (sp_control_shm_size() - 64)
          <= (char *) mem + 8 + sp_control_shm_size(),
       "a block 64-byte aligned within memory that is not");

    c = sp_control_shm_init(mem, 1, 100);
    sp_control_get(c, &st);
    ok(st.profiling == 1 && st.rate_hz == 100 && st.generation == 1,
       "configured state wanted, generation 1");
    sp_control_set(c, 0, 0, &st);
    ok(st.profiling == 0 && st.rate_hz == 100 && st.generation == 2,
       "profiling off, rate kept");
    sp_control_set(c, -1, 250, &st);
    ok(st.profiling == 0 && st.rate_hz == 250 && st.generation == 3,
       "rate 250, profiling kept");
    sp_control_shm_configure_types(c, SP_SAMPLER_TYPE_CPU
                                      | SP_SAMPLER_TYPE_MEMORY, 100);
    sp_control_get(c, &st);
    ok(st.types == (SP_SAMPLER_TYPE_CPU | SP_SAMPLER_TYPE_MEMORY),
       "configured types cpu memory");
    sp_control_set_types(c, -1, 0, -1, 1, 0, 0, &st);
    ok(st.types == (SP_SAMPLER_TYPE_CPU | SP_SAMPLER_TYPE_WALL)
       && st.rate_hz == 250 && st.profiling == 0,
       "memory off, wall on; rate and profiling kept");
    sp_control_set_types(c, -1, 0, -1, -1, 0, 1, &st);
    ok(st.types == (SP_SAMPLER_TYPE_CPU | SP_SAMPLER_TYPE_WALL
                    | SP_SAMPLER_TYPE_MEMORY) && st.wall_rate_hz == 100,
       "memory on again, the others kept");
    sp_control_configured(c, &conf);
    ok(conf.types == (SP_SAMPLER_TYPE_CPU | SP_SAMPLER_TYPE_MEMORY),
       "configured types unchanged");
    ok(conf.profiling == 1 && conf.rate_hz == 100, "configured unchanged");
    ok(sp_control_shm_reset(mem, 1, 50) == c, "reset of a block");
    sp_control_get(c, &st);
    ok(st.profiling == 1 && st.rate_hz == 50 && st.generation == 6,
       "reset: the new configured state, a new generation");
    {
        static _Alignas(64) unsigned char  junk[4096];

        memset(junk, 0x5a, sizeof(junk));
        ok(sp_control_shm_reset(junk, 1, 50) == NULL,
           "reset of something else: NULL");
    }
}

static void
test_slots(void *mem)
{
    sp_control_shm_t  *c = sp_control_shm_init(mem, 1, 100);
    sp_status_t        st, got;
    pid_t              kid;
    int                s, s2, status, n, i;

    s = sp_control_slot_claim(c, getpid());
    ok(s >= 0, "slot claimed");
    is_int(sp_control_slot_claim(c, getpid()), s, "same pid: same slot");
    memset(&st, 0, sizeof(st));
    st.pid = getpid();
    st.v[SP_ST_spans_exported] = 42;
    st.v[SP_ST_rate_hz] = 100;
    sp_control_slot_publish(c, s, &st);
    ok(sp_control_slot_read(c, s, &got) && got.pid == getpid()
       && got.v[SP_ST_spans_exported] == 42, "read back");

    /* A child publishes into its own slot of the same shared block, and
     * a dead child's slot is neither shown nor kept. */
    kid = fork();
    if (kid == 0) {
        int  k = sp_control_slot_claim(c, getpid());

        st.pid = getpid();
        st.v[SP_ST_spans_exported] = 7;
        sp_control_slot_publish(c, k, &st);
        _exit(k >= 0 && k != s ? 0 : 1);
    }
    waitpid(kid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child took another slot");
    for (i = 0, n = 0; i < SP_CONTROL_SLOTS; i++) {
        n += sp_control_slot_read(c, i, &got);
    }
    is_int(n, 1, "the dead child's slot is not read");
    s2 = sp_control_slot_claim(c, 1);     /* pid 1: alive, not ours */
    ok(s2 >= 0 && s2 != s, "another pid: another slot");
    sp_control_slot_release(c, s2);
    sp_control_slot_release(c, s);
    ok(!sp_control_slot_read(c, s, &got), "released slot not read");
}

static void
test_render(void *mem)
{
    sp_control_shm_t   *c = sp_control_shm_init(mem, 1, 100);
    sp_api_info_t       info = {
        .server = "nginx", .endpoint = "http://h:4318", .profiling = 1,
        .profiling_rate = 100, .write = 1,
    };
    sp_status_t         st;
    json_t             *root, *w;
    json_error_t        je;
    char               *s;
    size_t              len;
    int                 slot;

    slot = sp_control_slot_claim(c, getpid());
    memset(&st, 0, sizeof(st));
    st.pid = getpid();
    st.v[SP_ST_profiling] = 1;
    st.v[SP_ST_rate_hz] = 100;
    st.v[SP_ST_spans_exported] = 9;
    st.v[SP_ST_profile_bytes_exported] = 12345;
    sp_control_slot_publish(c, slot, &st);

    s = sp_status_json(&info, c, &len);
    root = s != NULL ? json_loadb(s, len, 0, &je) : NULL;
    ok(root != NULL, "JSON parses");
    w = json_array_get(json_object_get(root, "workers"), 0);
    is_int(json_array_size(json_object_get(root, "workers")), 1, "one worker");
    is_int(json_integer_value(json_object_get(w, "pid")), getpid(), "its pid");
    ok(json_is_true(json_object_get(w, "profiling")), "profiling true");
    is_int(json_integer_value(json_object_get(json_object_get(w, "counters"),
                                              "spans_exported")), 9,
           "spans_exported");
    is_int(json_object_size(json_object_get(w, "counters")), SP_STATUS_NFIELDS,
           "every status field");
    is_str(json_string_value(json_object_get(json_object_get(root, "config"),
                                             "endpoint")),
           "http://h:4318", "config endpoint");
    is_int(json_integer_value(json_object_get(json_object_get(root,
                                              "control"), "rate")), 100,
           "control rate");
    json_decref(root);
    free(s);

    s = sp_status_prometheus(&info, c, &len);
    ok(s != NULL && strlen(s) == len, "Prometheus text");
    ok(strstr(s, "# TYPE spanprof_spans_exported_total counter\n") != NULL,
       "counter TYPE line with _total");
    {
        char  line[128];

        snprintf(line, sizeof(line),
                 "\nspanprof_spans_exported_total{worker=\"%d\"} 9\n",
                 (int) getpid());
        ok(strstr(s, line) != NULL, "worker sample");
        snprintf(line, sizeof(line),
                 "\nspanprof_profile_bytes_exported_total{worker=\"%d\"} "
                 "12345\n", (int) getpid());
        ok(strstr(s, line) != NULL, "bytes sample");
    }
    ok(strstr(s, "# TYPE spanprof_queue_depth gauge\n") != NULL,
       "gauge without _total");
    free(s);
    sp_control_slot_release(c, slot);
}

static void
test_requests(void *mem)
{
    sp_control_shm_t    *c = sp_control_shm_init(mem, 1, 100);
    sp_api_info_t        info = { .server = "t", .profiling = 1, .write = 0 };
    sp_api_request_t     req = { .method = "GET" };
    sp_api_response_t    resp;
    sp_control_state_t   st;

    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 200
       && strcmp(resp.content_type, "application/json") == 0, "GET: JSON");
    free(resp.body);
    req.query = "x=1&format=prometheus";
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 200
       && strncmp(resp.content_type, "text/plain", 10) == 0,
       "?format=prometheus: text");
    free(resp.body);
    req.query = NULL;
    req.accept = "text/plain;version=0.0.4";
    ok(sp_api_handle(&req, &info, c, &resp) == 0
       && strncmp(resp.content_type, "text/plain", 10) == 0,
       "Accept text/plain: text");
    free(resp.body);

    req.method = "POST";
    req.body = "{\"profiling\": false}";
    req.body_len = strlen(req.body);
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 403,
       "write=off: 403");
    free(resp.body);
    sp_control_get(c, &st);
    ok(st.profiling == 1 && st.generation == 1, "nothing changed");

    info.write = 1;
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 200,
       "POST: 200");
    free(resp.body);
    sp_control_get(c, &st);
    ok(st.profiling == 0 && st.generation == 2, "profiling off");
    req.body = "{\"rate\": 5000}";
    req.body_len = strlen(req.body);
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 400
       && strstr(resp.body, "\"error\"") != NULL, "bad rate: 400 + error");
    free(resp.body);
    req.method = "PATCH";
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 405
       && resp.allow != NULL, "PATCH: 405 with Allow");
    free(resp.body);
    info.profiling = 0;
    req.method = "PUT";
    req.body = "{\"profiling\": true}";
    req.body_len = strlen(req.body);
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 409,
       "profiling not configured: 409");
    free(resp.body);
    info.profiling = 1;
    sp_control_set(c, 1, 0, &st);
    req.method = "DELETE";
    ok(sp_api_handle(&req, &info, c, &resp) == 0 && resp.status == 200,
       "DELETE: 200");
    free(resp.body);
    sp_control_get(c, &st);
    ok(st.profiling == 0, "DELETE: profiling off");
}

int
main(void)
{
    void  *mem = mmap(NULL, sp_control_shm_size() + 64,
                      PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (mem == MAP_FAILED) {
        return 1;
    }
    test_body();
    test_public_url();
    test_state(mem);
    test_slots(mem);
    test_render(mem);
    test_requests(mem);
    return done_testing();
}
