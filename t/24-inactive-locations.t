#!/usr/bin/perl
# Locations and servers that neither trace, propagate nor profile leave a
# request alone until something needs its context: a request rewritten
# from such a location into a traced one is traced there; one that a
# traced location decided keeps its span after an internal redirect into
# an untraced one; a server without any such location sends upstream
# exactly what it received and exports nothing, while $otel_* variables
# still work in it.
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
    add_header X-Trace-Id $otel_trace_id always;

    location /traced/ { return 200 "traced\n"; }
    # untraced, rewritten into a traced location
    location /quiet/ {
        otel_trace off;
        rewrite ^/quiet/(.*)$ /traced/from-quiet-$1 last;
    }
    # traced, then an internal redirect into an untraced location
    location /err/ { error_page 404 = /landing/; return 404; }
    location /landing/ { otel_trace off; return 200 "landing\n"; }
    location /off/ { otel_trace off; return 200 "off\n"; }
}

# no location traces, propagates or profiles: proxies to the echo backend
server {
    listen 127.0.0.1:%%PORT3%%;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Traceparent $otel_traceparent always;
    location / { proxy_pass http://127.0.0.1:%%PORT2%%; }
}

# echo backend
server {
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate\n"; }
}
EOF

my ($P1, $P3) = ($ngx->port, $ngx->port3);
my $tid_in = rand_hex(32);
my $tp_in  = "00-$tid_in-" . rand_hex(16) . '-01';
my $ts_in  = 'congo=t61rcWkgMzE';

my $quiet   = http_get($P1, '/quiet/q1');
my $err     = http_get($P1, '/err/e1');
my $off     = http_get($P1, '/off/o1');
my $plain   = http_get($P3, '/plain/p1', headers => { traceparent => $tp_in, tracestate => $ts_in });
my $plain2  = http_get($P3, '/plain/p2');

my @all = sync_spans($recv, $P1);
# the untraced server's requests finished before the sync request's span
# arrived; give the exporter one more interval for anything stray
select undef, undef, undef, 0.3;
{
    my %seen;
    @all = grep { !$seen{ $_->{span_id} }++ } @all, collect_spans($recv);
}

subtest 'rewritten from an untraced location into a traced one' => sub {
    is $quiet->{status}, 200, 'served';
    is $quiet->{content}, "traced\n", 'by the traced location';
    my @s = grep { ($_->{attrs}{'url.path'} // '') eq '/quiet/q1' } server_spans(@all);
    is scalar @s, 1, 'one SERVER span' or diag span_summary(@all);
    if (@s) {
        is $s[0]{attrs}{'http.route'}, '/traced/', 'route of the location that traced it';
        is $s[0]{trace_id}, $quiet->{headers}{'x-trace-id'}, 'trace id as $otel_trace_id';
    }
};

subtest 'decided in a traced location, redirected into an untraced one' => sub {
    is $err->{status}, 200, 'served';
    is $err->{content}, "landing\n", 'by the untraced location';
    my @s = by_path('/err/e1', @all);
    is scalar @s, 1, 'still one SERVER span' or diag span_summary(@all);
    if (@s) {
        is $s[0]{trace_id}, $err->{headers}{'x-trace-id'}, 'trace id as $otel_trace_id';
        is $s[0]{attrs}{'http.route'}, '/landing/', 'route of the final location';
    }
};

subtest 'an untraced location of a traced server' => sub {
    is $off->{status}, 200, 'served';
    is scalar(by_path('/off/o1', @all)), 0, 'no span';
    like $off->{headers}{'x-trace-id'} // '', qr/^[0-9a-f]{32}$/,
        '$otel_trace_id decides the context on use';
};

subtest 'a server where nothing traces, propagates or profiles' => sub {
    is $plain->{status}, 200, 'served';
    my ($tp, $ts) = parse_echo($plain->{content});
    is $tp, $tp_in, 'traceparent reaches the upstream unchanged';
    is $ts, $ts_in, 'tracestate reaches the upstream unchanged';
    my ($tp2) = parse_echo($plain2->{content});
    is $tp2, '', 'no traceparent added upstream';
    for my $r ([$plain, 'with'], [$plain2, 'without']) {
        my $tid = $r->[0]{headers}{'x-trace-id'} // '';
        like $tid, qr/^[0-9a-f]{32}$/, "\$otel_trace_id $r->[1] an incoming traceparent";
        like $r->[0]{headers}{'x-traceparent'} // '', qr/^00-\Q$tid\E-[0-9a-f]{16}-0[0-3]$/,
            "\$otel_traceparent $r->[1] one, sharing the trace id";
    }
    isnt $plain->{headers}{'x-trace-id'}, $tid_in, 'context ignore: the incoming trace id is not continued';
    my @mine = grep { ($_->{attrs}{'url.path'} // '') =~ m{^/plain/} } @all;
    is scalar @mine, 0, 'no span' or diag span_summary(@mine);
};

is scalar($ngx->crash_lines), 0, 'no crash in the error log';

done_testing;
