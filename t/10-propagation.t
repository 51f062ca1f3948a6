#!/usr/bin/perl
# W3C trace context handling by otel_trace_context mode: ignore (default),
# extract, inject, propagate; tracestate forwarding; the $otel_* variables;
# propagation after internal redirects (error_page to a named location,
# try_files); a location overriding the server's mode.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;

need_module();

my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name propagation-test;

server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    add_header X-Parent-Id $otel_parent_id always;
    add_header X-Parent-Sampled $otel_parent_sampled always;
    add_header X-Traceparent $otel_traceparent always;

    location /default/   { proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /ignore/    { otel_trace_context ignore;    proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /extract/   { otel_trace_context extract;   proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /inject/    { otel_trace_context inject;    proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /propagate/ { otel_trace_context propagate; proxy_pass http://127.0.0.1:%%PORT2%%; }
}

# propagate at server level; internal redirects into a proxying location
server {
    listen 127.0.0.1:%%PORT3%%;
    otel_trace on;
    otel_trace_context propagate;
    root %%PREFIX%%/html;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    add_header X-Parent-Id $otel_parent_id always;
    add_header X-Parent-Sampled $otel_parent_sampled always;
    add_header X-Traceparent $otel_traceparent always;

    location /redir/ { error_page 404 = @fallback; return 404; }
    location /tf/    { try_files /nonexistent @fallback; }
    location /off/   { otel_trace_context ignore; proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /       { proxy_pass http://127.0.0.1:%%PORT2%%; }
    location @fallback { proxy_pass http://127.0.0.1:%%PORT2%%; }
}

# echo backend, not traced
server {
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate\n"; }
}
EOF

my $TS = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';

# One case per request; each gets its own incoming trace id.
my @cases;
sub send_case {
    my ($name, $port, $path, %o) = @_;
    my $tid = rand_hex(32);
    my $pid = rand_hex(16);
    my $flags = $o{flags} // '01';
    my %h;
    $h{traceparent} = "00-$tid-$pid-$flags" unless $o{no_tp};
    $h{traceparent} = $o{tp} if defined $o{tp};
    $h{tracestate} = $o{ts} if defined $o{ts};
    my $r = http_get($port, $path, headers => \%h);
    my ($up_tp, $up_ts) = parse_echo($r->{content});
    push @cases, { %o, name => $name, path => $path, in_tid => $tid, in_pid => $pid,
        in_tp => $h{traceparent}, res => $r, up_tp => $up_tp, up_ts => $up_ts };
}

my ($P1, $P3) = ($ngx->port, $ngx->port3);
send_case('default mode is ignore', $P1, '/default/a', ts => $TS, mode => 'ignore');
send_case('ignore',                 $P1, '/ignore/a',  ts => $TS, mode => 'ignore');
send_case('ignore, no headers',     $P1, '/ignore/b',  no_tp => 1, mode => 'ignore');
send_case('extract',                $P1, '/extract/a', ts => $TS, mode => 'extract');
send_case('extract, unsampled parent', $P1, '/extract/b', ts => $TS, flags => '00', mode => 'extract');
send_case('extract, no headers',    $P1, '/extract/c', no_tp => 1, mode => 'extract');
send_case('inject',                 $P1, '/inject/a',  ts => $TS, mode => 'inject');
send_case('inject, no headers',     $P1, '/inject/b',  no_tp => 1, mode => 'inject');
send_case('propagate',              $P1, '/propagate/a', ts => $TS, mode => 'propagate');
send_case('propagate, unsampled parent', $P1, '/propagate/b', ts => $TS, flags => '00', mode => 'propagate');
send_case('propagate, two tracestate lines', $P1, '/propagate/c',
    ts => ['congo=t61rcWkgMzE', 'rojo=00f067aa0ba902b7'], mode => 'propagate', want_ts => $TS);
send_case('propagate, invalid tracestate (uppercase key)', $P1, '/propagate/d',
    ts => 'Congo=t61rcWkgMzE', mode => 'propagate', want_ts => '');
# The Level 2 text: a tracestate with duplicate keys is still propagated
# (this case pinned the old rule, which dropped the whole header).
send_case('propagate, tracestate with a duplicate key still forwarded', $P1, '/propagate/e',
    ts => 'congo=a,congo=b', mode => 'propagate', want_ts => 'congo=a,congo=b');
send_case('propagate, no headers',  $P1, '/propagate/f', no_tp => 1, mode => 'propagate');
send_case('propagate, tracestate without traceparent', $P1, '/propagate/g', no_tp => 1,
    ts => $TS, mode => 'propagate', want_ts => '');
send_case('propagate, invalid traceparent drops tracestate', $P1, '/propagate/h',
    tp => '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01', ts => $TS,
    mode => 'propagate', invalid_tp => 1, want_ts => '');
send_case('server-level propagate', $P3, '/plain/a', ts => $TS, mode => 'propagate');
send_case('location ignore overrides server propagate', $P3, '/off/a', ts => $TS, mode => 'ignore');
send_case('propagate after error_page to a named location', $P3, '/redir/a', ts => $TS, mode => 'propagate');
send_case('propagate after try_files to a named location', $P3, '/tf/a', ts => $TS, mode => 'propagate');

my @all = sync_spans($recv, $P1);

for my $c (@cases) {
    subtest $c->{name} => sub { check_case($c) };
}

sub check_case {
    my ($c) = @_;
    my $r = $c->{res};
    my $mode = $c->{mode};
    is $r->{status}, 200, "GET $c->{path}: 200";
    ok defined $c->{up_tp}, 'echo backend answered' or diag $r->{content};
    my $tid = $r->{headers}{'x-trace-id'} // '';
    like $tid, qr/^[0-9a-f]{32}$/, '$otel_trace_id is 32 hex';

    my @sv = grep { $_->{trace_id} eq $tid } server_spans(@all);
    is scalar @sv, 1, 'exactly one SERVER span in the trace' or return diag span_summary(@all);
    my $s = $sv[0];
    is $s->{attrs}{'url.path'}, $c->{path}, 'it is this request';
    is $s->{span_id}, $r->{headers}{'x-span-id'}, '$otel_span_id is the SERVER span id';
    ok $s->{flags} & 0x100, 'flags: HAS_IS_REMOTE bit';

    my @cl = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
    is scalar @cl, 1, 'one CLIENT span, child of the SERVER span' or diag span_summary(@all);
    my $cl = $cl[0] || {};
    is $cl->{trace_id}, $tid, 'CLIENT span in the same trace';

    my $extracts = ($mode eq 'extract' || $mode eq 'propagate') && $c->{in_tp} && !$c->{invalid_tp};
    if ($extracts) {
        is $tid, $c->{in_tid}, 'trace id taken from the incoming traceparent';
        is $s->{parent_span_id}, $c->{in_pid}, 'parent = incoming parent-id';
        ok $s->{flags} & 0x200, 'flags: IS_REMOTE bit (parent from the request)';
        is $r->{headers}{'x-parent-id'}, $c->{in_pid}, '$otel_parent_id';
        is $r->{headers}{'x-parent-sampled'}, ($c->{flags} // '01') eq '00' ? '0' : '1', '$otel_parent_sampled';
    }
    else {
        isnt $tid, $c->{in_tid}, 'new trace id';
        is $s->{parent_span_id}, '', 'no parent';
        ok !($s->{flags} & 0x200), 'flags: no IS_REMOTE bit';
        is $r->{headers}{'x-parent-id'} // '', '', '$otel_parent_id is empty (add_header omits empty values)';
    }

    my $in_ts = ref $c->{ts} ? $c->{ts}[0] : ($c->{ts} // '');
    if ($mode eq 'ignore' || $mode eq 'extract') {
        is $c->{up_tp}, $c->{in_tp} // '', 'upstream gets the client traceparent untouched';
        is $c->{up_ts}, $in_ts, 'upstream gets the client tracestate untouched';
        return;
    }

    # inject / propagate: our traceparent replaces the client's
    my ($v, $t, $p, $f) = ($c->{up_tp} // '') =~ /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
    ok defined $v, "upstream traceparent well-formed: " . ($c->{up_tp} // 'undef');
    is $v, '00', 'version 00';
    is $t, $tid, 'trace id of the SERVER span';
    is $p, $cl->{span_id}, 'parent-id = the CLIENT span id';
    ok defined $f && (hex($f) & 1), 'sampled flag set';
    is $r->{headers}{'x-traceparent'}, $c->{up_tp}, '$otel_traceparent = what the upstream got';
    if ($mode eq 'inject') {
        is $c->{up_ts}, '', 'inject: tracestate removed';
    }
    else {
        my $want = exists $c->{want_ts} ? $c->{want_ts} : $in_ts;
        is $c->{up_ts}, $want, "propagate: tracestate '" . ($want) . "' forwarded";
    }
}

is scalar($ngx->crash_lines), 0, 'no crash in the error log' or diag join "\n", $ngx->crash_lines;

done_testing;
