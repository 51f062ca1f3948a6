#!/usr/bin/perl
# Attribute details: otel_span_attr overrides a built-in attribute instead of
# duplicating its key; a unix-socket upstream gives the socket path as
# server.address; a failed upstream followed by an error_page redirect to a
# second upstream keeps both attempts inside the CLIENT span.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;

need_module();

my $dead = dead_port();
my $recv = start_receiver();
my $conf = <<'EOF2';
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }

server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_trace_context inject;

    location /override/ {
        otel_span_attr http.route "/override/{id}";
        otel_span_attr app.extra yes;
        return 200 "ok\n";
    }
    location /unix/ { proxy_pass http://unix:%%PREFIX%%/backend.sock; }
    location /redirected/ {
        proxy_pass http://127.0.0.1:%%DEAD%%;
        proxy_intercept_errors on;
        error_page 502 = @fallback;
    }
    location @fallback { proxy_pass http://127.0.0.1:%%PORT2%%; }
}

server {
    listen unix:%%PREFIX%%/backend.sock;
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "backend\n"; }
}
EOF2
$conf =~ s/%%DEAD%%/$dead/g;
my $ngx = start_nginx(receiver => $recv, conf => $conf);

is http_get($ngx->port, '/override/7')->{status}, 200, 'override answered';
is http_get($ngx->port, '/unix/x')->{status}, 200, 'unix upstream answered';
is http_get($ngx->port, '/redirected/x')->{status}, 200, 'fallback answered';

my @spans = wait_for_spans($recv, 5, 10);
my ($override) = grep { ($_->{attrs}{'url.path'} // '') eq '/override/7' } server_spans(@spans);
my ($unix_srv) = grep { ($_->{attrs}{'url.path'} // '') eq '/unix/x'
                        && $_->{attrs}{'server.port'} == $ngx->port } server_spans(@spans);
my ($redir)    = grep { ($_->{attrs}{'url.path'} // '') eq '/redirected/x'
                        && $_->{attrs}{'server.port'} == $ngx->port } server_spans(@spans);

subtest 'otel_span_attr overrides a built-in attribute' => sub {
    ok $override, 'span found' or return;
    my @route = grep { $_ eq 'http.route' } @{ $override->{attr_keys} };
    is scalar(@route), 1, 'one http.route key, not two';
    is $override->{attrs}{'http.route'}, '/override/{id}', 'the user value wins';
    is $override->{attrs}{'app.extra'}, 'yes', 'other user attributes still added';
};

subtest 'unix-socket upstream' => sub {
    ok $unix_srv, 'server span found' or return;
    my ($client) = grep { $_->{parent_span_id} eq $unix_srv->{span_id} } client_spans(@spans);
    ok $client, 'client span found' or return;
    is $client->{attrs}{'server.address'}, $ngx->prefix . '/backend.sock',
        'server.address is the socket path';
    is $client->{attrs}{'network.transport'}, 'unix', 'network.transport unix';
    ok !exists $client->{attrs}{'server.port'}, 'no server.port';
};

subtest 'attempts before an error_page redirect stay inside the CLIENT span' => sub {
    ok $redir, 'server span found' or return;
    my ($client) = grep { $_->{parent_span_id} eq $redir->{span_id} } client_spans(@spans);
    ok $client, 'client span found' or return;
    is $client->{attrs}{'http.request.resend_count'}, 1, 'one resend';
    my @ev = @{ $client->{events} };
    is scalar(@ev), 2, 'two attempts';
    ok !exists $ev[0]{attrs}{'http.response.status_code'}, 'the dead peer never answered';
    is $ev[0]{attrs}{'error.type'}, 'connection_failed', 'first attempt: connection_failed';
    is $ev[1]{attrs}{'http.response.status_code'}, 200, 'second attempt: 200';
    ok $client->{start} <= $ev[0]{time}, 'first attempt not before the span';
    ok $client->{end} >= $ev[1]{time}, 'second attempt not after the span';
    ok $client->{start} >= $redir->{start} && $client->{end} <= $redir->{end},
        'client span inside the server span';
};

done_testing();
