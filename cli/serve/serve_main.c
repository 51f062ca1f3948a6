#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/serve/serve.h"
#include "cli/serve/serve_grpc.h"
#include "cli/spanprof.h"

static const char  help_serve[] =
"spanprof serve [--otlp ADDR] [--otlp-grpc ADDR] [--ui ADDR] [--data DIR]\n"
"               [--retention AGE] [--max-size SIZE] [--token TOKEN]\n"
"               [--import DIR]\n"
"  One process that receives what the modules export and shows it in a\n"
"  browser: an OTLP/HTTP receiver (POST /v1/traces and\n"
"  /v1development/profiles, protobuf or JSON, gzip or not) and an\n"
"  OTLP/gRPC one (TraceService/Export, ProfilesService/Export, h2c, gzip\n"
"  or not) storing spans and CPU samples in SQLite, and a web UI with its\n"
"  JSON API under /api/.\n"
"    --otlp ADDR       the OTLP/HTTP listener (default 127.0.0.1:4318)\n"
"    --otlp-grpc ADDR  the OTLP/gRPC listener (default 127.0.0.1:4317;\n"
"                      off: none)\n"
"    --ui ADDR         the UI and API listener (default 127.0.0.1:16686)\n"
"    --data DIR        where spanprof.db lives (default ./spanprof-data,\n"
"                      created)\n"
"    --retention AGE   delete spans and samples older than AGE: 30m, 24h,\n"
"                      7d (default 24h; 0: keep)\n"
"    --max-size SIZE   keep the database under SIZE: 500m, 2g (default\n"
"                      2g; 0: no bound), oldest deleted first\n"
"    --token TOKEN     the UI and API ask for ?token=TOKEN or\n"
"                      \"Authorization: Bearer TOKEN\"; required when --ui\n"
"                      is not a loopback address\n"
"    --import DIR      first store what the file exporter wrote in DIR\n"
"                      (traces.jsonl, cpu-*.pb.gz), then serve\n";

static volatile sig_atomic_t  stopping;

static void
on_signal(int sig)
{
    (void) sig;
    stopping = 1;
}

/* "24h", "30m", "7d", "90s", "0"; -1 when invalid. */
static int64_t
parse_age(const char *s)
{
    char  *end;
    long   v = strtol(s, &end, 10);

    if (end == s || v < 0 || v > 100000) {
        return -1;
    }
    switch (*end) {
    case '\0': return v == 0 ? 0 : -1;
    case 's': return end[1] ? -1 : v * 1000000000LL;
    case 'm': return end[1] ? -1 : v * 60000000000LL;
    case 'h': return end[1] ? -1 : v * 3600000000000LL;
    case 'd': return end[1] ? -1 : v * 86400000000000LL;
    }
    return -1;
}

/* "2g", "500m", "64k", "1048576"; -1 when invalid. */
static int64_t
parse_size(const char *s)
{
    char  *end;
    long   v = strtol(s, &end, 10);

    if (end == s || v < 0 || v > 1000000000L) {
        return -1;
    }
    switch (*end) {
    case '\0': return v;
    case 'k': case 'K': return end[1] ? -1 : v * 1024LL;
    case 'm': case 'M': return end[1] ? -1 : v * 1024LL * 1024;
    case 'g': case 'G': return end[1] ? -1 : v * 1024LL * 1024 * 1024;
    }
    return -1;
}

static int
loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strncmp(addr, "localhost:", 10)
           == 0;
}

int
cli_serve_main(int argc, char **argv)
{
    serve_t           sv;
    struct sigaction  sa;
    char              err[512];
    const char       *v, *import = NULL;
    serve_import_stats_t  ist;
    int               i;
    struct timespec   ts = { 0, 200 * 1000000L };
    time_t            last_retain = 0;

    memset(&sv, 0, sizeof(sv));
    sv.conf.otlp_addr = "127.0.0.1:4318";
    sv.conf.grpc_addr = "127.0.0.1:4317";
    sv.conf.ui_addr = "127.0.0.1:16686";
    sv.conf.data_dir = "spanprof-data";
    sv.conf.retention_ns = 24 * 3600000000000LL;
    sv.conf.max_bytes = 2LL * 1024 * 1024 * 1024;

    for (i = 1; i < argc; i++) {
        const char  *o = argv[i];

        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            fputs(help_serve, stdout);
            return 0;
        }
        if (strncmp(o, "--", 2) != 0) {
            cli_usage_die("serve: unexpected argument \"%s\"", o);
        }
        v = strchr(o, '=');
        if (v != NULL) {
            v++;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            cli_usage_die("serve: %s needs a value", o);
        }
#define IS(name)  (strncmp(o, name, strlen(name)) == 0 \
                   && (o[strlen(name)] == '\0' || o[strlen(name)] == '='))
        if (IS("--otlp")) {
            sv.conf.otlp_addr = v;
        } else if (IS("--otlp-grpc")) {
            sv.conf.grpc_addr = *v && strcmp(v, "off") != 0 ? v : NULL;
        } else if (IS("--ui")) {
            sv.conf.ui_addr = v;
        } else if (IS("--data")) {
            sv.conf.data_dir = v;
        } else if (IS("--import")) {
            import = v;
        } else if (IS("--token")) {
            sv.conf.token = *v ? v : NULL;
        } else if (IS("--retention")) {
            if ((sv.conf.retention_ns = parse_age(v)) < 0) {
                cli_usage_die("serve: invalid --retention \"%s\": e.g. "
                              "24h, 30m, 7d, 0", v);
            }
        } else if (IS("--max-size")) {
            if ((sv.conf.max_bytes = parse_size(v)) < 0) {
                cli_usage_die("serve: invalid --max-size \"%s\": e.g. 2g, "
                              "500m, 0", v);
            }
        } else {
            cli_usage_die("serve: unknown option %s", o);
        }
#undef IS
    }
    if (!loopback(sv.conf.ui_addr) && sv.conf.token == NULL) {
        cli_usage_die("serve: --ui %s is not a loopback address: give "
                      "--token too", sv.conf.ui_addr);
    }
    if (mkdir(sv.conf.data_dir, 0700) != 0 && errno != EEXIST) {
        cli_die("serve: cannot create %s: %s", sv.conf.data_dir,
                strerror(errno));
    }
    sv.store = serve_store_open(sv.conf.data_dir, err, sizeof(err));
    if (sv.store == NULL) {
        cli_die("serve: %s", err);
    }
    pthread_mutex_init(&sv.lock, NULL);
    if (import != NULL) {
        if (serve_import_dir(&sv, import, &ist, err, sizeof(err)) != 0) {
            serve_store_close(sv.store);
            cli_die("serve: --import: %s", err);
        }
        printf("spanprof serve: imported %s: %zu spans (%zu lines, %zu bad, "
               "%zu spans refused), %zu samples from %zu profiles (cpu %zu, "
               "wall %zu, alloc %zu, inuse %zu; %zu types refused)\n",
               import, ist.spans, ist.lines, ist.bad_lines,
               ist.spans_rejected, ist.samples, ist.profiles, ist.files[0],
               ist.files[1], ist.files[2], ist.files[3],
               ist.profiles_rejected);
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (serve_http_start(&sv, err, sizeof(err)) != 0) {
        serve_store_close(sv.store);
        cli_die("serve: %s", err);
    }
    if (serve_grpc_start(&sv, err, sizeof(err)) != 0) {
        serve_http_stop();
        serve_store_close(sv.store);
        cli_die("serve: %s", err);
    }
    printf("spanprof serve: OTLP on http://%s (/v1/traces, "
           "/v1development/profiles), OTLP/gRPC on %s%s, UI on "
           "http://%s/%s%s, data in %s/spanprof.db\n", sv.conf.otlp_addr,
           sv.conf.grpc_addr ? "http://" : "",
           sv.conf.grpc_addr ? sv.conf.grpc_addr : "off", sv.conf.ui_addr,
           sv.conf.token ? "?token=" : "", sv.conf.token ? sv.conf.token : "",
           sv.conf.data_dir);
    fflush(stdout);

    while (!stopping) {
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&sv.lock);
        if (serve_store_flush(sv.store) != 0) {
            cli_warn("serve: commit: %s", serve_store_error(sv.store));
        }
        pthread_mutex_unlock(&sv.lock);
        if (time(NULL) - last_retain >= 1) {
            last_retain = time(NULL);
            pthread_mutex_lock(&sv.lock);
            if (serve_store_retain(sv.store, cli_now_ns(),
                                   sv.conf.retention_ns, sv.conf.max_bytes)
                != 0)
            {
                cli_warn("serve: retention: %s",
                         serve_store_error(sv.store));
            }
            pthread_mutex_unlock(&sv.lock);
        }
    }
    serve_grpc_stop();
    serve_http_stop();
    serve_store_close(sv.store);
    fprintf(stderr, "spanprof serve: stopped\n");
    return 0;
}
