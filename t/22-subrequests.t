#!/usr/bin/perl
# Subrequests (auth_request to an internal location, SSI include virtual)
# never produce a second SERVER span; the main request keeps its ids, its
# extracted parent and its upstream propagation.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;

need_module();

my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }

server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_trace_context propagate;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;

    # auth subrequest answered locally / by an upstream
    location /protected/  { auth_request /auth-local; proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /protected2/ { auth_request /auth-proxy; proxy_pass http://127.0.0.1:%%PORT2%%; }
    location = /auth-local { internal; return 204; }
    location = /auth-proxy {
        internal;
        proxy_pass http://127.0.0.1:%%PORT2%%/authcheck;
        proxy_pass_request_body off;
        proxy_set_header Content-Length "";
    }

    # SSI
    location /ssi/ {
        ssi on;
        ssi_types text/plain;
        return 200 'A<!--# include virtual="/inc/x" -->B\n';
    }
    location /inc/ { return 200 "inc"; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate\n"; }
}
EOF

my %case;
for my $p ('/protected/a', '/protected2/a', '/ssi/page') {
    my $tid = rand_hex(32);
    my $pid = rand_hex(16);
    my $r = http_get($ngx->port, $p, headers => { traceparent => "00-$tid-$pid-01", tracestate => 'k=v' });
    $case{$p} = { res => $r, tid => $tid, pid => $pid };
}

my @all = sync_spans($recv, $ngx->port);

for my $p ('/protected/a', '/protected2/a', '/ssi/page') {
    subtest $p => sub {
        my $c = $case{$p};
        my $r = $c->{res};
        is $r->{status}, 200, 'status 200';
        my @sv = grep { $_->{trace_id} eq $c->{tid} } server_spans(@all);
        is scalar @sv, 1, 'exactly one SERVER span in the trace' or return diag span_summary(@all);
        my $s = $sv[0];
        is $s->{attrs}{'url.path'}, $p, 'it is the main request';
        is $s->{parent_span_id}, $c->{pid}, 'main keeps the extracted parent';
        is $r->{headers}{'x-trace-id'}, $c->{tid}, '$otel_trace_id of the main request';
        is $r->{headers}{'x-span-id'}, $s->{span_id}, '$otel_span_id = the exported SERVER span';
        if ($p =~ /protected/) {
            my ($tp, $ts) = parse_echo($r->{content});
            my ($v, $t, $parent) = ($tp // '') =~ /^(00)-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
            is $t, $c->{tid}, 'upstream traceparent carries the trace';
            my ($cl) = grep { $_->{span_id} eq ($parent // '') } client_spans(@all);
            ok $cl, 'its parent-id is a CLIENT span' or return diag span_summary(@all);
            is $cl->{parent_span_id}, $s->{span_id}, 'CLIENT span child of the main SERVER span';
            is $ts, 'k=v', 'tracestate forwarded';
        }
        else {
            is $r->{content}, "AincB\n", 'SSI include done';
        }
    };
}

subtest 'no SERVER span for subrequests' => sub {
    for my $sub ('/auth-local', '/auth-proxy', '/authcheck', '/inc/x') {
        is scalar(by_path($sub, @all)), 0, "none for $sub";
    }
    is scalar(server_spans(@all)), 4, 'four SERVER spans in all (three requests and the sync one)'
        or diag span_summary(@all);
};

is scalar($ngx->crash_lines), 0, 'no crash in the error log';

done_testing;
