#!/usr/bin/perl
# CLIENT spans for proxied requests: identity (trace, parent, span id = the
# parent-id the upstream receives), peer attributes, status, timing inside
# the SERVER span; a retry to a second peer (resend count, one
# "upstream.attempt" event per attempt); an upstream 503; a traced backend
# extracting the context we inject (end-to-end chain).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;

need_module();

my $dead = dead_port();    # nothing listens there
my $recv = start_receiver();
my $conf = <<'EOF';
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }

upstream retry_u {
    server 127.0.0.1:%%DEAD%%;
    server 127.0.0.1:%%PORT2%%;
}

server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_trace_context inject;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    add_header X-Traceparent $otel_traceparent always;

    location /single/ { proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /retry/  { proxy_pass http://retry_u; proxy_next_upstream error; }
    location /fail/   { proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /chain/  { otel_trace_context propagate; proxy_pass http://127.0.0.1:%%PORT3%%; }
}

# echo backend, not traced
server {
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate\n"; }
    location /fail/ { return 503 "down\n"; }
}

# traced backend that extracts the context
server {
    listen 127.0.0.1:%%PORT3%%;
    otel_trace on;
    otel_trace_context extract;
    location / { return 200 "backend\n"; }
}
EOF
$conf =~ s/%%DEAD%%/$dead/g;
my $ngx = start_nginx(receiver => $recv, conf => $conf);

my $single = http_get($ngx->port, '/single/a');
my $retry  = http_get($ngx->port, '/retry/a');
my $fail   = http_get($ngx->port, '/fail/a');
my $TID = rand_hex(32);
my $PID = rand_hex(16);
my $chain  = http_get($ngx->port, '/chain/a', headers => { traceparent => "00-$TID-$PID-01" });

my @all = sync_spans($recv, $ngx->port);

sub server_and_client {
    my ($path) = @_;
    # the front server's span (the chain backend sees the same path)
    my @sv = grep { ($_->{attrs}{'server.port'} // 0) == $ngx->port } by_path($path, @all);
    is scalar @sv, 1, "one front SERVER span for $path" or diag span_summary(@all);
    my $s = $sv[0] or return;
    my @cl = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
    is scalar @cl, 1, 'one CLIENT span, child of it' or diag span_summary(@all);
    return ($s, $cl[0]);
}

subtest 'single upstream' => sub {
    is $single->{status}, 200, 'status 200';
    my ($s, $c) = server_and_client('/single/a') or return;
    $c or return;
    my ($tp) = parse_echo($single->{content});
    is $c->{kind}, 'SPAN_KIND_CLIENT', 'kind CLIENT';
    is $c->{name}, 'GET', 'name is the method';
    is $c->{trace_id}, $s->{trace_id}, 'same trace';
    is $c->{parent_span_id}, $s->{span_id}, 'parent = SERVER span';
    like $c->{span_id}, qr/^[0-9a-f]{16}$/, 'span id 16 hex';
    isnt $c->{span_id}, $s->{span_id}, 'own span id';
    like $tp // '', qr/^00-$s->{trace_id}-$c->{span_id}-[0-9a-f]{2}$/, 'upstream traceparent parent-id = CLIENT span id';
    is $single->{headers}{'x-traceparent'}, $tp, '$otel_traceparent';
    is $c->{attrs}{'server.address'}, '127.0.0.1', 'server.address';
    is $c->{attrs}{'server.port'}, $ngx->port2, 'server.port';
    is $c->{attr_types}{'server.port'}, 'int', 'server.port is int';
    is $c->{attrs}{'http.response.status_code'}, 200, 'http.response.status_code';
    is $c->{attr_types}{'http.response.status_code'}, 'int', 'http.response.status_code is int';
    ok !$c->{attrs}{'http.request.resend_count'}, 'no resend count without a retry';
    ok $c->{start} >= $s->{start} && $c->{end} <= $s->{end} && $c->{start} <= $c->{end},
        'CLIENT span inside the SERVER span';
    is_deeply $c->{resource}, $s->{resource}, 'same resource';
};

subtest 'retry to the second peer' => sub {
    is $retry->{status}, 200, 'status 200 after the retry';
    my ($s, $c) = server_and_client('/retry/a') or return;
    $c or return;
    my ($tp) = parse_echo($retry->{content});
    like $tp // '', qr/^00-$s->{trace_id}-$c->{span_id}-[0-9a-f]{2}$/, 'upstream traceparent parent-id = CLIENT span id';
    is $c->{attrs}{'http.request.resend_count'}, 1, 'http.request.resend_count 1';
    is $c->{attr_types}{'http.request.resend_count'}, 'int', 'resend count is int';
    is $c->{attrs}{'server.port'}, $ngx->port2, 'server.port of the peer that answered';
    is $c->{attrs}{'http.response.status_code'}, 200, 'status code';
    my @ev = grep { $_->{name} eq 'upstream.attempt' } @{ $c->{events} };
    is scalar @ev, 2, 'two upstream.attempt events' or return diag span_summary($c);
    is $ev[0]{attrs}{'server.address'}, '127.0.0.1', 'first attempt: address';
    is $ev[0]{attrs}{'server.port'}, $dead, 'first attempt: the dead peer';
    is $ev[0]{attr_types}{'server.port'}, 'int', 'first attempt: port is int';
    is $ev[0]{attrs}{'http.response.status_code'}, undef, 'first attempt: no status code (the peer never answered)';
    is $ev[1]{attrs}{'server.address'}, '127.0.0.1', 'second attempt: address';
    is $ev[1]{attrs}{'server.port'}, $ngx->port2, 'second attempt: the live peer';
    is $ev[1]{attrs}{'http.response.status_code'}, 200, 'second attempt: status code';
    ok $ev[0]{time} <= $ev[1]{time}, 'events in order';
    ok $ev[0]{time} >= $c->{start} && $ev[1]{time} <= $c->{end}, 'events inside the CLIENT span';
};

subtest 'upstream answers 503' => sub {
    is $fail->{status}, 503, 'status 503 passed through';
    my ($s, $c) = server_and_client('/fail/a') or return;
    $c or return;
    is $c->{attrs}{'http.response.status_code'}, 503, 'CLIENT status code 503';
    is $s->{attrs}{'http.response.status_code'}, 503, 'SERVER status code 503';
    is $s->{status_code}, 'STATUS_CODE_ERROR', 'SERVER span status ERROR';
    is $s->{attrs}{'error.type'}, '503', 'SERVER error.type';
};

subtest 'chain: front propagates, traced backend extracts' => sub {
    is $chain->{status}, 200, 'status 200';
    is $chain->{content}, "backend\n", 'backend answered';
    my ($front, $c) = server_and_client('/chain/a') or return;
    $c or return;
    is $front->{trace_id}, $TID, 'front: trace from the client';
    is $front->{parent_span_id}, $PID, 'front: parent from the client';
    is $c->{attrs}{'server.port'}, $ngx->port3, 'CLIENT span to the backend';
    my @back = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'server.port'} // 0) == $ngx->port3 } @all;
    is scalar @back, 1, 'one backend SERVER span' or return diag span_summary(@all);
    my $b = $back[0];
    is $b->{trace_id}, $TID, 'backend: same trace';
    is $b->{parent_span_id}, $c->{span_id}, 'backend: parent = front CLIENT span';
    ok $b->{flags} & 0x200, 'backend: remote parent flag';
    is $b->{name}, 'GET /', 'backend: name';
};

is scalar($ngx->crash_lines), 0, 'no crash in the error log';

done_testing;
