#!/usr/bin/perl
# The SERVER span of a request: name by route, every attribute, status for
# 4xx/5xx, resource and scope, ids and flags, otel_span_name /
# otel_span_attr, otel_trace on|off|$var.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Sys::Hostname qw(hostname);
use Time::HiRes qw(time);
use SpanProf::Test;

need_module();

my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name spanprof-t20;
otel_resource_attr deployment.environment test;
otel_resource_attr team "span team";

server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    root %%PREFIX%%/html;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;

    location /api/        { return 200 "hello-body\n"; }
    location = /exact     { return 200 "exact\n"; }
    location ~ ^/regex/   { return 200 "regex\n"; }
    location /named/      { try_files /nonexistent @named; }
    location @named       { return 200 "named\n"; }
    location /err/        { return 500; }
    location /unavailable/ { return 503; }
    location /missing/    { return 404; }
    location /post/       { proxy_pass http://127.0.0.1:%%PORT3%%; }
    location /custom/ {
        otel_span_name "custom $request_method $arg_x";
        otel_span_attr app.user $arg_user;
        otel_span_attr app.const fixed-value;
        return 200 "custom\n";
    }
    location /var/ { otel_trace $arg_t; return 200 "var\n"; }
    location /off/ { otel_trace off; return 200 "off\n"; }
}

# no location: server-level return
server {
    listen 127.0.0.1:%%PORT2%%;
    otel_trace on;
    return 200 "server-level\n";
}

# untraced backend for /post/
server {
    listen 127.0.0.1:%%PORT3%%;
    location / { return 200 "posted\n"; }
}
EOF

my $port = $ngx->port;
my ($worker) = $ngx->worker_pids;
my $t0 = time;

# the fully checked request, on a socket of ours to know the client port
my ($raw, $lport) = raw_request($port, "GET /api/x?a=1&b=2 HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n"
    . "User-Agent: spanprof-test/raw\r\nConnection: close\r\n\r\n");
like $raw, qr{^HTTP/1\.1 200 }, 'GET /api/x?a=1&b=2: 200';
my ($raw_tid) = $raw =~ /^X-Trace-Id: (\S+)\r$/mi;
my ($raw_sid) = $raw =~ /^X-Span-Id: (\S+)\r$/mi;

my %res;
$res{noquery}   = http_get($port, '/api/noquery');
$res{exact}     = http_get($port, '/exact');
$res{regex}     = http_get($port, '/regex/r');
$res{named}     = http_get($port, '/named/n');
$res{err}       = http_get($port, '/err/e');
$res{unavail}   = http_get($port, '/unavailable/u');
$res{missing}   = http_get($port, '/missing/m');
$res{post}      = http_request('POST', $port, '/post/p', content => '0123456789abcdef',
                      headers => { 'content-type' => 'text/plain' });
$res{put}       = http_request('PUT', $port, '/api/put', content => 'xyz');
$res{delete}    = http_request('DELETE', $port, '/api/delete');
$res{custom}    = http_get($port, '/custom/c?x=7&user=alice');
$res{server}    = http_get($ngx->port2, '/anything');
my ($foo_raw) = raw_request($port, "FOO /api/foo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
my %var;
for my $v (['a', 't=1', 1], ['b', 't=on', 1], ['c', 't=0', 0], ['d', '', 0], ['e', 't=yes', 0],
           ['f', 't=off', 0], ['g', 't=true', 0]) {
    my ($n, $q, $want) = @$v;
    my $r = http_get($port, "/var/$n" . ($q ? "?$q" : ''));
    $var{$n} = { q => $q, want => $want, status => $r->{status} };
}
my $off = http_get($port, '/off/o');
# server.port from Host: where nginx ended the name (also in its lowercased
# copy), after a trailing dot, in an IPv6 literal, or the connection's port
# when Host has none from 1 to 65535
my %host = (h1 => ['EXAMPLE.com:8080', 'example.com', 8080],
            h2 => ['example.com.:8081', 'example.com', 8081],
            h3 => ['example.com:99999', 'example.com', $port],
            h4 => ['[::1]:8082', '[::1]', 8082],
            h5 => ['[::1]', '[::1]', $port],
            h6 => ['example.com:', 'example.com', $port]);
for my $h (sort keys %host) {
    my ($r) = raw_request($port, "GET /api/$h HTTP/1.1\r\nHost: $host{$h}[0]\r\n"
        . "Connection: close\r\n\r\n");
    $host{$h}[3] = $r;
}

my @all = sync_spans($recv, $port);
my $t1 = time;

sub one {
    my ($path) = @_;
    my @s = by_path($path, @all);
    is scalar @s, 1, "one SERVER span for $path" or diag span_summary(@all);
    return $s[0] || { attrs => {}, attr_types => {}, resource => {}, scope => {}, events => [] };
}

subtest 'GET /api/x?a=1&b=2: attributes' => sub {
    my $s = one('/api/x');
    is $s->{kind}, 'SPAN_KIND_SERVER', 'kind SERVER';
    is $s->{name}, 'GET /api/', 'name "GET /api/"';
    is $s->{trace_id}, $raw_tid, 'trace id = $otel_trace_id';
    is $s->{span_id}, $raw_sid, 'span id = $otel_span_id';
    like $s->{trace_id}, qr/^[0-9a-f]{32}$/, 'trace id 32 hex';
    like $s->{span_id}, qr/^[0-9a-f]{16}$/, 'span id 16 hex';
    isnt $s->{trace_id}, '0' x 32, 'trace id not zero';
    isnt $s->{span_id}, '0' x 16, 'span id not zero';
    is $s->{parent_span_id}, '', 'root span';
    ok $s->{flags} & 0x100, 'flags 0x100 (HAS_IS_REMOTE)';
    ok !($s->{flags} & 0x200), 'no 0x200 (no remote parent)';
    is $s->{status_code}, '', 'status unset';
    ok $s->{start} > 0 && $s->{start} <= $s->{end}, 'start <= end';
    ok $s->{start} >= ($t0 - 2) * 1e9 && $s->{end} <= ($t1 + 2) * 1e9, 'timestamps are now (ns since epoch)';

    my %want = (
        'http.request.method'       => ['GET', 'string'],
        'url.path'                  => ['/api/x', 'string'],
        'url.query'                 => ['a=1&b=2', 'string'],
        'url.scheme'                => ['http', 'string'],
        'http.route'                => ['/api/', 'string'],
        'http.response.status_code' => [200, 'int'],
        'server.address'            => ['127.0.0.1', 'string'],
        'server.port'               => [$port, 'int'],
        'client.address'            => ['127.0.0.1', 'string'],
        'client.port'               => [$lport, 'int'],
        'network.protocol.version'  => ['1.1', 'string'],
        'user_agent.original'       => ['spanprof-test/raw', 'string'],
        'http.response.body.size'   => [length("hello-body\n"), 'int'],
    );
    for my $k (sort keys %want) {
        is $s->{attrs}{$k}, $want{$k}[0], "$k = $want{$k}[0]";
        is $s->{attr_types}{$k}, $want{$k}[1], "$k is $want{$k}[1]";
    }
    ok !exists $s->{attrs}{'http.request.body.size'}, 'no http.request.body.size without a body';
    ok !exists $s->{attrs}{'error.type'}, 'no error.type on 200';
    my %seen;
    my @dups = grep { $seen{$_}++ } @{ $s->{attr_keys} };
    is "@dups", '', 'no duplicate attribute keys';

    is $s->{resource}{'service.name'}, 'spanprof-t20', 'resource service.name';
    is $s->{resource}{'host.name'}, hostname(), 'resource host.name';
    is $s->{resource}{'process.pid'}, $worker, 'resource process.pid = worker pid';
    is $s->{resource_types}{'process.pid'}, 'int', 'process.pid is int';
    is $s->{resource}{'telemetry.sdk.name'}, 'spanprof', 'telemetry.sdk.name';
    is $s->{resource}{'deployment.environment'}, 'test', 'otel_resource_attr';
    is $s->{resource}{team}, 'span team', 'otel_resource_attr with a quoted value';
    is $s->{scope}{name}, 'spanprof', 'scope name';
};

subtest 'no query string' => sub {
    my $s = one('/api/noquery');
    ok !exists $s->{attrs}{'url.query'}, 'no url.query';
    is $s->{attrs}{'user_agent.original'}, 'spanprof-test/1.0', 'user agent';
};

subtest 'server.address and server.port from Host' => sub {
    for my $h (sort keys %host) {
        my ($hv, $addr, $want, $r) = @{ $host{$h} };
        like $r, qr{^HTTP/1\.1 200 }, "Host: $hv answered";
        my $s = one("/api/$h");
        is $s->{attrs}{'server.address'}, $addr, "Host: $hv: server.address";
        is $s->{attrs}{'server.port'}, $want, "Host: $hv: server.port $want";
    }
};

subtest 'exact location' => sub {
    my $s = one('/exact');
    is $s->{name}, 'GET /exact', 'name';
    is $s->{attrs}{'http.route'}, '/exact', 'http.route';
};

subtest 'regex location' => sub {
    my $s = one('/regex/r');
    is $s->{name}, 'GET', 'name is the method alone';
    ok !exists $s->{attrs}{'http.route'}, 'no http.route';
};

subtest 'named location' => sub {
    is $res{named}{content}, "named\n", 'served by @named';
    my $s = one('/named/n');
    is $s->{name}, 'GET', 'name is the method alone';
    ok !exists $s->{attrs}{'http.route'}, 'no http.route';
};

subtest 'server-level return' => sub {
    is $res{server}{content}, "server-level\n", 'served';
    my $s = one('/anything');
    is $s->{name}, 'GET', 'name is the method alone';
    ok !exists $s->{attrs}{'http.route'}, 'no http.route';
    is $s->{attrs}{'server.port'}, $ngx->port2, 'server.port';
};

for my $e (['/err/e', 500], ['/unavailable/u', 503]) {
    my ($path, $code) = @$e;
    subtest "status $code" => sub {
        my $s = one($path);
        is $s->{attrs}{'http.response.status_code'}, $code, 'status code attribute';
        is $s->{status_code}, 'STATUS_CODE_ERROR', 'span status ERROR';
        is $s->{attrs}{'error.type'}, "$code", 'error.type';
        is $s->{attr_types}{'error.type'}, 'string', 'error.type is a string';
    };
}

subtest 'status 404' => sub {
    my $s = one('/missing/m');
    is $s->{attrs}{'http.response.status_code'}, 404, 'status code attribute';
    is $s->{status_code}, '', 'span status unset on 4xx';
    is $s->{name}, 'GET /missing/', 'name';
};

subtest 'POST with a body' => sub {
    is $res{post}{status}, 200, 'POST proxied';
    my $s = one('/post/p');
    is $s->{name}, 'POST /post/', 'name';
    is $s->{attrs}{'http.request.method'}, 'POST', 'method';
    is $s->{attrs}{'http.request.body.size'}, 16, 'http.request.body.size';
    is $s->{attr_types}{'http.request.body.size'}, 'int', 'http.request.body.size is int';
    is $s->{attrs}{'http.response.body.size'}, length("posted\n"), 'http.response.body.size';
};

subtest 'PUT and DELETE' => sub {
    my $p = one('/api/put');
    is $p->{name}, 'PUT /api/', 'PUT name';
    is $p->{attrs}{'http.request.method'}, 'PUT', 'PUT method';
    is $p->{attrs}{'http.request.body.size'}, 3, 'PUT body size';
    my $d = one('/api/delete');
    is $d->{name}, 'DELETE /api/', 'DELETE name';
    is $d->{attrs}{'http.request.method'}, 'DELETE', 'DELETE method';
};

subtest 'unknown method' => sub {
    like $foo_raw, qr{^HTTP/1\.1 200 }, 'FOO answered';
    my $s = one('/api/foo');
    # OTel HTTP semantic conventions: an unknown method is named "HTTP" in
    # "{method} {route}".
    is $s->{name}, 'HTTP /api/', 'name "HTTP /api/"';
    is $s->{attrs}{'http.request.method'}, '_OTHER', 'http.request.method _OTHER';
    is $s->{attrs}{'http.request.method_original'}, 'FOO',
        'http.request.method_original FOO';
};

subtest 'otel_span_name and otel_span_attr' => sub {
    my $s = one('/custom/c');
    is $s->{name}, 'custom GET 7', 'span name with variables';
    is $s->{attrs}{'app.user'}, 'alice', 'attribute from a variable';
    is $s->{attrs}{'app.const'}, 'fixed-value', 'constant attribute';
    is $s->{attrs}{'http.request.method'}, 'GET', 'standard attributes kept';
    is $s->{span_id}, $res{custom}{headers}{'x-span-id'}, 'ids';
};

subtest 'otel_trace $variable' => sub {
    for my $n (sort keys %var) {
        my $v = $var{$n};
        is $v->{status}, 200, "/var/$n?$v->{q}: 200";
        my @s = by_path("/var/$n", @all);
        is scalar @s, $v->{want}, "t='$v->{q}' " . ($v->{want} ? 'traced' : 'not traced');
    }
};

subtest 'otel_trace off in a location' => sub {
    is $off->{status}, 200, 'served';
    is scalar(by_path('/off/o', @all)), 0, 'no span';
};

subtest 'one SERVER span per request, distinct ids' => sub {
    my @sv = server_spans(@all);
    my %tid = map { $_->{trace_id} => 1 } @sv;
    my %sid = map { $_->{span_id} => 1 } @sv;
    is scalar(keys %tid), scalar(@sv), 'distinct trace ids';
    is scalar(keys %sid), scalar(@sv), 'distinct span ids';
    for my $k (grep { $_ ne 'server' } sort keys %res) {    # 'server': no add_header there
        my $r = $res{$k};
        my @m = grep { $_->{trace_id} eq ($r->{headers}{'x-trace-id'} // '') } @sv;
        is scalar @m, 1, "$k: its \$otel_trace_id has one SERVER span";
    }
};

is scalar($ngx->crash_lines), 0, 'no crash in the error log';

done_testing;
