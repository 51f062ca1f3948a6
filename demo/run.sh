#!/usr/bin/env bash
# The spanprof demo: installs what it needs, builds the nginx module, runs
# Debian's nginx with it on 127.0.0.1 (file exporter, no collector needed),
# sends a few requests through a proxied route and prints the spans written.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

bash scripts/install-deps
make -s nginx >/dev/null

demo=$repo/build/demo
rm -rf "$demo"
mkdir -p "$demo/out" "$demo/tmp"
# Workers run as nobody when nginx is started as root.
chmod 0777 "$demo/out" "$demo/tmp"

port=${SPANPROF_DEMO_PORT:-18080}
backend=$((port + 1))

cat > "$demo/nginx.conf" <<CONF
load_module $repo/build/nginx/ngx_http_spanprof_module.so;
worker_processes 1;
error_log $demo/error.log info;
pid $demo/nginx.pid;
events { worker_connections 256; }
http {
    access_log $demo/access.log;
    client_body_temp_path $demo/tmp/body;
    proxy_temp_path $demo/tmp/proxy;

    otel_exporter { endpoint file://$demo/out; interval 200ms; }
    otel_service_name spanprof-demo;
    otel_trace on;
    otel_trace_context propagate;

    server {
        listen 127.0.0.1:$port;
        location /api/ {
            proxy_pass http://127.0.0.1:$backend;
        }
        location / {
            add_header X-Trace-Id \$otel_trace_id;
            return 200 "hello from trace \$otel_trace_id\n";
        }
    }

    server {
        listen 127.0.0.1:$backend;
        # Only read the context here, so \$http_traceparent shows what
        # arrived rather than what this server would send on.
        otel_trace_context extract;
        location / {
            otel_span_attr app.backend "demo";
            return 200 "backend saw traceparent: \$http_traceparent\n";
        }
    }
}
CONF

/usr/sbin/nginx -p "$demo/" -c "$demo/nginx.conf"
trap '[ -f "$demo/nginx.pid" ] && kill -QUIT "$(cat "$demo/nginx.pid")" 2>/dev/null || true' EXIT

for i in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
done

echo "== requests"
curl -s "http://127.0.0.1:$port/hello?x=1"
curl -s "http://127.0.0.1:$port/api/orders" \
     -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
curl -s "http://127.0.0.1:$port/api/missing"

# QUIT makes the worker flush its queue before it exits.
kill -QUIT "$(cat "$demo/nginx.pid")"
for i in $(seq 1 50); do
    [ -f "$demo/nginx.pid" ] || break
    sleep 0.1
done
trap - EXIT

echo
echo "== spans written to $demo/out/traces.jsonl"
perl -MJSON::PP -ne '
    my $d = decode_json($_);
    for my $rs (@{$d->{resourceSpans}}) {
        for my $ss (@{$rs->{scopeSpans}}) {
            for my $s (@{$ss->{spans}}) {
                my %a = map { $_->{key} => (values %{$_->{value}})[0] }
                        @{$s->{attributes} || []};
                printf "%s  %-16s %-12s %-7s status=%-3s %7.3f ms  parent=%s\n",
                    $s->{traceId}, $s->{spanId} . " " . ($s->{kind} == 2 ? "SERVER" : "CLIENT"),
                    $s->{name}, $a{"url.path"} // $a{"server.address"} // "",
                    $a{"http.response.status_code"} // "-",
                    ($s->{endTimeUnixNano} - $s->{startTimeUnixNano}) / 1e6,
                    $s->{parentSpanId} // "-";
            }
        }
    }' "$demo/out/traces.jsonl"
