#!/usr/bin/perl
# Requests that end early (400 from header parsing, HTTP/1.1 without Host),
# HTTP/1.0, HTTP/0.9, a request line with no headers, a garbage request
# line, pipelined keep-alive requests and HTTP/2 (h2c, prior knowledge),
# also with propagation. nginx must not crash: same worker pid, next request
# served.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;

need_module();

my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_trace on;

server {
    listen 127.0.0.1:%%PORT%%;
    listen 127.0.0.1:%%PORT3%% http2;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /api/  { return 200 "api\n"; }
    location /prop/ { otel_trace_context propagate; proxy_pass http://127.0.0.1:%%PORT2%%; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    otel_trace off;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate\n"; }
}
EOF

my $port = $ngx->port;
my @workers = $ngx->worker_pids;

my %raw;
sub raw {
    my ($name, $bytes) = @_;
    my ($resp, $lport) = raw_request($port, $bytes);
    $raw{$name} = { resp => $resp, lport => $lport };
}
raw(dup_host => "GET /api/dup HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n");
raw(no_host  => "GET /api/nohost HTTP/1.1\r\n\r\n");
raw(http10   => "GET /api/h10 HTTP/1.0\r\n\r\n");
raw(http09   => "GET /api/h09\r\n");
raw(garbage  => "\x01\x02GARBAGE \xff\r\n\r\n");
raw(pipelined => "GET /api/k1 HTTP/1.1\r\nHost: x\r\n\r\nGET /api/k2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");

my $h2 = curl_h2($ngx->port3, '/api/h2?q=1');
my $TID = rand_hex(32);
my $PID = rand_hex(16);
my $h2p = curl_h2($ngx->port3, '/prop/h2', "traceparent: 00-$TID-$PID-01", 'tracestate: k=v');

my $after = http_get($port, '/api/after');
my @all = sync_spans($recv, $port);

sub by_client_port {
    my ($lport) = @_;
    return grep { ($_->{attrs}{'client.port'} // -1) == $lport } server_spans(@all);
}

subtest 'duplicate Host: 400' => sub {
    like $raw{dup_host}{resp}, qr{^HTTP/1\.1 400 }, 'answered 400';
    my @s = by_client_port($raw{dup_host}{lport});
    is scalar @s, 1, 'one SERVER span for the connection' or return diag span_summary(@all);
    my $s = $s[0];
    is $s->{name}, 'GET', 'name is the method alone';
    ok !exists $s->{attrs}{'http.route'}, 'no http.route';
    is $s->{attrs}{'http.response.status_code'}, 400, 'status code 400';
    is $s->{status_code}, '', 'span status unset (4xx)';
};

subtest 'HTTP/1.1 request line without headers: 400' => sub {
    like $raw{no_host}{resp}, qr{^HTTP/1\.1 400 }, 'answered 400';
    my @s = by_client_port($raw{no_host}{lport});
    is scalar @s, 1, 'one SERVER span' or return diag span_summary(@all);
    is $s[0]{name}, 'GET', 'name is the method alone';
    is $s[0]{attrs}{'http.response.status_code'}, 400, 'status code 400';
    ok !exists $s[0]{attrs}{'user_agent.original'}, 'no user agent';
};

subtest 'HTTP/1.0 request line without headers' => sub {
    like $raw{http10}{resp}, qr{^HTTP/1\.1 200 }, 'answered 200';
    my @s = by_client_port($raw{http10}{lport});
    is scalar @s, 1, 'one SERVER span' or return diag span_summary(@all);
    is $s[0]{name}, 'GET /api/', 'name';
    is $s[0]{attrs}{'network.protocol.version'}, '1.0', 'network.protocol.version 1.0';
    is $s[0]{attrs}{'url.path'}, '/api/h10', 'url.path';
    ok !exists $s[0]{attrs}{'user_agent.original'}, 'no user agent';
};

subtest 'HTTP/0.9' => sub {
    is $raw{http09}{resp}, "api\n", 'answered with the body alone';
    my @s = by_client_port($raw{http09}{lport});
    is scalar @s, 1, 'one SERVER span' or return diag span_summary(@all);
    is $s[0]{attrs}{'network.protocol.version'}, '0.9', 'network.protocol.version 0.9';
    is $s[0]{attrs}{'url.path'}, '/api/h09', 'url.path';
};

subtest 'garbage request line' => sub {
    like $raw{garbage}{resp}, qr{^HTTP/1\.1 400 }, 'answered 400';
};

subtest 'two pipelined requests on one connection' => sub {
    my @resp = $raw{pipelined}{resp} =~ m{^HTTP/1\.1 200 }mg;
    is scalar @resp, 2, 'two responses';
    my @s = sort { $a->{attrs}{'url.path'} cmp $b->{attrs}{'url.path'} } by_client_port($raw{pipelined}{lport});
    is scalar @s, 2, 'two SERVER spans' or return diag span_summary(@all);
    is_deeply [ map { $_->{attrs}{'url.path'} } @s ], ['/api/k1', '/api/k2'], 'one per request';
    isnt $s[0]{trace_id}, $s[1]{trace_id}, 'distinct trace ids';
    isnt $s[0]{span_id}, $s[1]{span_id}, 'distinct span ids';
};

subtest 'HTTP/2' => sub {
    is $h2->{exit}, 0, 'curl ok' or diag $h2->{stderr};
    is $h2->{version}, '2', 'HTTP/2 response';
    is $h2->{status}, 200, 'status 200';
    my @s = by_path('/api/h2', @all);
    is scalar @s, 1, 'one SERVER span' or return diag span_summary(@all);
    my $s = $s[0];
    is $s->{name}, 'GET /api/', 'name';
    is $s->{attrs}{'network.protocol.version'}, '2', 'network.protocol.version 2';
    is $s->{attrs}{'url.query'}, 'q=1', 'url.query';
    is $s->{attrs}{'server.port'}, $ngx->port3, 'server.port';
    is $s->{attrs}{'http.response.status_code'}, 200, 'status code';
    like $s->{attrs}{'user_agent.original'} // '', qr{^curl/}, 'user agent';
    is $s->{trace_id}, $h2->{headers}{'x-trace-id'}, '$otel_trace_id';
    is $s->{span_id}, $h2->{headers}{'x-span-id'}, '$otel_span_id';
};

subtest 'HTTP/2 with propagation' => sub {
    is $h2p->{status}, 200, 'status 200';
    my ($tp, $ts) = parse_echo($h2p->{content});
    my @s = by_path('/prop/h2', @all);
    is scalar @s, 1, 'one SERVER span' or return diag span_summary(@all);
    my $s = $s[0];
    is $s->{trace_id}, $TID, 'trace id extracted';
    is $s->{parent_span_id}, $PID, 'parent extracted';
    my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
    ok $cl, 'CLIENT span' or return;
    like $tp // '', qr/^00-$TID-$cl->{span_id}-[0-9a-f]{2}$/, 'upstream got our traceparent';
    is $ts, 'k=v', 'tracestate forwarded';
};

subtest 'nginx survived' => sub {
    is $after->{status}, 200, 'next request served';
    is_deeply [ $ngx->worker_pids ], \@workers, 'same worker pid';
    is scalar($ngx->crash_lines), 0, 'no crash in the error log' or diag join "\n", $ngx->crash_lines;
};

done_testing;
