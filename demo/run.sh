#!/usr/bin/env bash
# The spanprof demo: installs what it needs (scripts/install-deps), builds
# the nginx module, the spanprof CLI and a small demo backend module, runs
# Debian's nginx with them on 127.0.0.1 (profiling on, no collector), sends
# traffic through a proxy to a backend with one slow, CPU-heavy route and
# stops nginx. Then, by default, the spans and profiles are in `spanprof
# serve` (started here, left running: the script prints the URL of its web
# UI and how to stop it). With SPANPROF_DEMO_EXPORT=file (no process left
# behind), nginx writes them with the file exporter instead, and the script
# shows the slowest traces with `spanprof traces` and draws the slowest one
# with `spanprof flamegraph`.
#
# Environment: SPANPROF_DEMO_PORT (front port, default 18080; the backend
# listens on the next one, or SPANPROF_DEMO_BACKEND_PORT), SPANPROF_DEMO_UI
# (the UI's address, default 127.0.0.1:16686), SPANPROF_DEMO_OTLP_PORT
# (spanprof serve's OTLP/HTTP port, default front + 2),
# SPANPROF_DEMO_GRPC_PORT (its OTLP/gRPC port, default front + 3),
# SPANPROF_DEMO_EXPORT (serve or file), SPANPROF_DEMO_DIR (default
# build/demo),
# SPANPROF_DEMO_NO_BUILD=1 (skip install-deps and make: for the tests,
# which build first). A default port that is taken (another clone's demo
# still up) is replaced by a free one, and said; a port given in the
# environment is used as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [ -z "${SPANPROF_DEMO_NO_BUILD:-}" ]; then
    bash scripts/install-deps
    echo "== building the nginx module, the spanprof CLI and the demo backend"
    make -s nginx cli demo-module >/dev/null
fi

spanprof=$repo/build/cli/spanprof
demo=${SPANPROF_DEMO_DIR:-$repo/build/demo}
export_to=${SPANPROF_DEMO_EXPORT:-serve}
case $export_to in
    serve|file) ;;
    *) echo "spanprof demo: SPANPROF_DEMO_EXPORT must be serve or file" >&2; exit 1 ;;
esac

case $demo in
    /|"") echo "spanprof demo: refusing SPANPROF_DEMO_DIR=\"$demo\"" >&2; exit 1 ;;
esac

# Show paths inside the repository relative to it (the commands below run
# from the repository's root).
case $demo in
    "$repo"/*) show=${demo#"$repo"/} ;;
    *)         show=$demo ;;
esac

# A spanprof serve left by an earlier run of the demo (in this clone, or
# with this SPANPROF_DEMO_DIR): its ports are ours again.
if [ -f "$demo/serve.pid" ]; then
    kill "$(cat "$demo/serve.pid")" 2>/dev/null || true
    sleep 0.5
fi

# 0 when nothing holds 127.0.0.1:$1 (a bind succeeds).
port_free() {
    python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}

# A port the kernel has free now, not one picked already.
picked=" "
free_port() {
    local p
    while :; do
        p=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
        case $picked in *" $p "*) continue ;; esac
        picked="$picked$p "
        echo "$p"
        return
    done
}

# The port named $1 (for the message): $2 when given in the environment
# ($3 = 1), else $2 if free, else a free one.
choose_port() {
    local what=$1 p=$2 given=$3 q
    if [ "$given" = 1 ] || { port_free "$p" && case $picked in *" $p "*) false ;; *) true ;; esac; }; then
        picked="$picked$p "
        echo "$p"
        return
    fi
    q=$(free_port)
    echo "== 127.0.0.1:$p ($what) is in use (another demo?): using 127.0.0.1:$q" >&2
    echo "$q"
}

given() { [ -n "${1:-}" ] && echo 1 || echo 0; }
port=$(choose_port "front" "${SPANPROF_DEMO_PORT:-18080}" "$(given "${SPANPROF_DEMO_PORT:-}")")
backend=$(choose_port "backend" "${SPANPROF_DEMO_BACKEND_PORT:-$((port + 1))}" \
          "$(given "${SPANPROF_DEMO_BACKEND_PORT:-}")")
otlp=$(choose_port "OTLP/HTTP" "${SPANPROF_DEMO_OTLP_PORT:-$((port + 2))}" \
       "$(given "${SPANPROF_DEMO_OTLP_PORT:-}")")
grpc=$(choose_port "OTLP/gRPC" "${SPANPROF_DEMO_GRPC_PORT:-$((port + 3))}" \
       "$(given "${SPANPROF_DEMO_GRPC_PORT:-}")")
if [ -n "${SPANPROF_DEMO_UI:-}" ]; then
    ui=$SPANPROF_DEMO_UI
else
    ui=127.0.0.1:$(choose_port "web UI" 16686 0)
fi
rm -rf "$demo"
mkdir -p "$demo/tmp"
# nginx's own temp files are opened by path in the workers (nobody when
# nginx is started as root). The spans' and profiles' directory, out/, is
# made by the master for the workers, as nginx makes its temp paths.
chmod 0777 "$demo/tmp"

if [ "$export_to" = serve ]; then
    "$spanprof" serve --otlp "127.0.0.1:$otlp" --otlp-grpc "127.0.0.1:$grpc" \
        --ui "$ui" --data "$demo/serve" > "$demo/serve.log" 2>&1 &
    echo $! > "$demo/serve.pid"
    for _ in $(seq 1 50); do
        grep -q "UI on" "$demo/serve.log" 2>/dev/null && break
        if ! kill -0 "$(cat "$demo/serve.pid")" 2>/dev/null; then
            cat "$demo/serve.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    # Spans and CPU profiles to spanprof serve, over OTLP/HTTP.
    exporter="otel_exporter { endpoint http://127.0.0.1:$otlp; protocol http/protobuf; interval 200ms; }"
else
    # Spans to out/traces.jsonl, CPU profiles to out/cpu-*.pb.gz.
    exporter="otel_exporter { endpoint file://$demo/out; interval 200ms; }"
fi

cat > "$demo/nginx.conf" <<CONF
load_module $repo/build/nginx/ngx_http_spanprof_module.so;
load_module $repo/build/demo-nginx/ngx_http_demo_backend_module.so;
worker_processes 2;
error_log $demo/error.log info;
pid $demo/nginx.pid;
events { worker_connections 256; }
http {
    access_log $demo/access.log;
    client_body_temp_path $demo/tmp/body;
    proxy_temp_path $demo/tmp/proxy;

    $exporter
    otel_service_name spanprof-demo;
    otel_trace on;
    otel_trace_context propagate;
    otel_profiling on;
    otel_profiling_rate 1000;
    otel_profiling_interval 1s;

    # The front, which clients talk to.
    server {
        listen 127.0.0.1:$port;
        location /api/ {
            proxy_pass http://127.0.0.1:$backend;
        }
        location / {
            return 200 "spanprof demo: try /api/prices?symbol=ACME or /api/report\n";
        }
    }

    # The demo backend (demo/ngx_demo_backend): a fast route, and a slow
    # one that spends ~200 ms of CPU in demo_price_report_compute().
    server {
        listen 127.0.0.1:$backend;
        location /api/prices { demo_backend prices; }
        location /api/report { demo_backend report; }
    }
}
CONF

/usr/sbin/nginx -p "$demo/" -c "$demo/nginx.conf" -e "$demo/error.log"
trap '[ -f "$demo/nginx.pid" ] && kill -QUIT "$(cat "$demo/nginx.pid")" 2>/dev/null || true' EXIT

for _ in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
done

if [ "$export_to" = serve ]; then
    dest="spanprof serve (127.0.0.1:$otlp)"
else
    dest=$show/out
fi
echo "== nginx on 127.0.0.1:$port (front) -> 127.0.0.1:$backend (demo backend); spans and profiles to $dest"
echo "== traffic: 40 x GET /api/prices?symbol=..., 4 x GET /api/report"
for round in 1 2 3 4; do
    for i in $(seq 1 10); do
        curl -sf -o /dev/null "http://127.0.0.1:$port/api/prices?symbol=S$round$i"
    done
    body=$(curl -sf "http://127.0.0.1:$port/api/report")
done
curl -sf "http://127.0.0.1:$port/api/prices?symbol=ACME"
echo "$body"

# QUIT makes each worker flush its spans and write its last profile.
kill -QUIT "$(cat "$demo/nginx.pid")"
for _ in $(seq 1 100); do
    [ -f "$demo/nginx.pid" ] || break
    sleep 0.1
done
trap - EXIT
if [ -f "$demo/nginx.pid" ]; then
    echo "spanprof demo: nginx did not stop; see $show/error.log" >&2
    exit 1
fi

if [ "$export_to" = serve ]; then
    echo
    echo "spanprof serve is running (pid $(cat "$demo/serve.pid"), data in $show/serve)."
    echo "Open http://$ui/ : the slowest traces come first; click one, then"
    echo "its span with the most CPU samples, for the flame graph of its code."
    echo "Stop it with: kill $(cat "$demo/serve.pid")"
    exit 0
fi

echo
echo "\$ spanprof traces $show/out --slowest 5"
"$spanprof" traces "$show/out" --slowest 5

slowest=$("$spanprof" traces "$show/out" --slowest 1 --ids)
echo
echo "\$ spanprof flamegraph $show/out --trace $slowest -o $show/slowest.svg"
"$spanprof" flamegraph "$show/out" --trace "$slowest" -o "$show/slowest.svg"

echo
echo "Flame graph of the slowest trace: $demo/slowest.svg"
echo "(open it in a browser: hover a frame for its samples, click to zoom)"
