/* The h2c connection state machine for libcurl < 8 (h2c_reuse.h): which
 * calls go with prior knowledge, which reuse, which are re-sent. */
#include <string.h>

#include "tap.h"

#include "common/export/h2c_reuse.h"

#define A  "http://127.0.0.1:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define A2 "http://127.0.0.1:4317/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define B  "http://10.0.0.1:4317/x/Export"

static void
test_sequence(void)
{
    sp_h2c_reuse_t  r;
    int             m, m2;

    memset(&r, 0, sizeof(r));
    is_int(sp_h2c_begin(&r, A, 0), SP_H2C_PRIOR, "no connection: prior knowledge");
    is_int(sp_h2c_begin(&r, A2, 0), SP_H2C_REUSE,
           "a second call (same origin) while the first connects waits for it");
    is_int(sp_h2c_end(&r, A2, SP_H2C_REUSE, 1, 0), 0, "it ran on that connection");
    is_int(sp_h2c_end(&r, A, SP_H2C_PRIOR, 1, 1), 0, "the first was answered over HTTP/2");
    is_int(sp_h2c_begin(&r, A, 0), SP_H2C_REUSE, "then the connection is reused");
    is_int(sp_h2c_end(&r, A, SP_H2C_REUSE, 0, 0), 0,
           "a call failing on the connection itself is not re-sent");
    m = sp_h2c_begin(&r, A, 0);
    is_int(m, SP_H2C_REUSE, "and the next still reuses");
    is_int(sp_h2c_end(&r, A, m, 0, 1), 1,
           "one that opened a connection with no HTTP/2 answer (Upgrade) is re-sent");
    is_int(sp_h2c_reconnects(&r), 0, "counted only once re-sent");
    m = sp_h2c_begin(&r, A, 1);
    is_int(m, SP_H2C_PRIOR, "re-sent with prior knowledge");
    is_int(sp_h2c_reconnects(&r), 1, "counted");
    m2 = sp_h2c_begin(&r, A2, 0);
    is_int(m2, SP_H2C_REUSE, "another call meanwhile waits for its connection");
    is_int(sp_h2c_end(&r, A, m, 0, 1), 0, "a re-sent call is never re-sent again");
    is_int(sp_h2c_end(&r, A2, m2, 0, 1), 1, "the waiting call, on an Upgrade, is");
    is_int(sp_h2c_begin(&r, A, 1), SP_H2C_PRIOR, "(re-sent)");
    is_int(sp_h2c_end(&r, A, SP_H2C_PRIOR, 0, 1), 0, "and fails");
    is_int(sp_h2c_begin(&r, A, 0), SP_H2C_PRIOR,
           "with no live connection, prior knowledge again");
    is_int(sp_h2c_reconnects(&r), 2, "2 re-sent in all");
}

static void
test_origins(void)
{
    sp_h2c_reuse_t  r;
    char            url[64];
    int             i;

    memset(&r, 0, sizeof(r));
    sp_h2c_begin(&r, A, 0);
    sp_h2c_end(&r, A, SP_H2C_PRIOR, 1, 1);
    is_int(sp_h2c_begin(&r, B, 0), SP_H2C_PRIOR, "another host has its own state");
    sp_h2c_end(&r, B, SP_H2C_PRIOR, 0, 1);
    is_int(sp_h2c_begin(&r, A, 0), SP_H2C_REUSE, "the first one's is kept");
    for (i = 0; i < SP_H2C_ORIGINS; i++) {
        snprintf(url, sizeof(url), "http://h%d:1/m", i);
        sp_h2c_begin(&r, url, 0);
    }
    is_int(sp_h2c_begin(&r, A, 0), SP_H2C_PRIOR,
           "with more origins than slots, the oldest is forgotten (prior knowledge)");
    is_int(sp_h2c_begin(&r, "http://127.0.0.1:43170/m", 0), SP_H2C_PRIOR,
           "a longer port is another origin");
}

int
main(void)
{
    test_sequence();
    test_origins();
    return done_testing();
}
