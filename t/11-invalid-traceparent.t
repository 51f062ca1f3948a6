#!/usr/bin/perl
# Invalid incoming traceparent values start a new trace (random trace id, no
# parent), in propagate and extract modes; in propagate mode the tracestate is
# then dropped and our traceparent sent, in extract mode the client's headers
# reach the upstream unchanged. Valid values (version 00, and a future
# version with extra fields) are positive controls.
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
    add_header X-Span-Id $otel_span_id always;
    add_header X-Parent-Id $otel_parent_id always;
    location /p/ { otel_trace_context propagate; proxy_pass http://127.0.0.1:%%PORT2%%; }
    location /e/ { otel_trace_context extract;   proxy_pass http://127.0.0.1:%%PORT2%%; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate\n"; }
}
EOF

my $T  = '0af7651916cd43dd8448eb211c80319c';
my $P  = 'b7ad6b7169203331';
my $T2 = '4bf92f3577b34da6a3ce929d0e0e4736';
my $P2 = '00f067aa0ba902b7';
my $TS = 'congo=t61rcWkgMzE';

my @invalid = (
    ['version ff'                 => "ff-$T-$P-01"],
    ['uppercase trace id'         => '00-' . uc($T) . "-$P-01"],
    ['uppercase parent id'        => "00-$T-" . uc($P) . '-01'],
    ['uppercase flags'            => "00-$T-$P-0A"],
    ['short version'              => "0-$T-$P-01"],
    ['trace id too short'         => '00-' . substr($T, 1) . "-$P-01"],
    ['trace id too long'          => "00-${T}a-$P-01"],
    ['parent id too short'        => "00-$T-" . substr($P, 1) . '-01'],
    ['parent id too long'         => "00-$T-${P}a-01"],
    ['flags too short'            => "00-$T-$P-1"],
    ['flags too long'             => "00-$T-$P-011"],
    ['all-zero trace id'          => '00-' . ('0' x 32) . "-$P-01"],
    ['all-zero parent id'         => "00-$T-" . ('0' x 16) . '-01'],
    ['bad separator _'            => "00_$T-$P-01"],
    ['bad separator +'            => "00-$T+$P-01"],
    ['bad separator space'        => "00-$T $P-01"],
    ['non-hex character'          => '00-' . substr($T, 0, 31) . "g-$P-01"],
    ['version 00 with extra data' => "00-$T-$P-01-extra"],
    ['garbage'                    => 'not a traceparent'],
    ['two traceparent headers'    => ["00-$T-$P-01", "00-$T2-$P2-01"]],
    # A future version may carry more fields, but not a ',': that is how
    # HTTP joins repeated lines (httpd does, and so may a proxy in front).
    ['two traceparent headers, a future version first' => ["cc-$T-$P-01-x", "00-$T2-$P2-01"]],
    ['two traceparent values joined on one line'       => "cc-$T-$P-01-x, 00-$T2-$P2-01"],
);
my @valid = (
    ['valid version 00'                  => "00-$T-$P-01"],
    ['future version with extra fields'  => "cc-$T-$P-01-what-the-future-will-be-like"],
);

my @cases;
my $i = 0;
for my $mode ('p', 'e') {
    for my $c ((map { [@$_, 0] } @invalid), (map { [@$_, 1] } @valid)) {
        my ($name, $tp, $is_valid) = @$c;
        my $path = "/$mode/" . ++$i;
        my $r = http_get($ngx->port, $path, headers => { traceparent => $tp, tracestate => $TS });
        my ($up_tp, $up_ts) = parse_echo($r->{content});
        push @cases, { name => ($mode eq 'p' ? 'propagate' : 'extract') . ": $name", mode => $mode,
            tp => $tp, valid => $is_valid, path => $path, res => $r, up_tp => $up_tp, up_ts => $up_ts };
    }
}

my @all = sync_spans($recv, $ngx->port);

for my $c (@cases) {
    subtest $c->{name} => sub {
        my $r = $c->{res};
        is $r->{status}, 200, "GET $c->{path}: 200";
        my @sv = by_path($c->{path}, @all);
        is scalar @sv, 1, 'one SERVER span' or return diag span_summary(@all);
        my $s = $sv[0];
        is $s->{trace_id}, $r->{headers}{'x-trace-id'}, '$otel_trace_id = span trace id';
        my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
        ok $cl, 'CLIENT span' or return diag span_summary(@all);
        # What the backend's $http_traceparent shows of the lines passed:
        # nginx 1.23 joined repeated lines with ", ", 1.22 gave the first.
        my $sent_tp = !ref $c->{tp} ? $c->{tp}
                    : nginx_version_at_least('1.23.0') ? join(', ', @{$c->{tp}})
                    : $c->{tp}[0];

        if ($c->{valid}) {
            is $s->{trace_id}, $T, 'trace id extracted';
            is $s->{parent_span_id}, $P, 'parent extracted';
            ok $s->{flags} & 0x200, 'IS_REMOTE flag';
            is $r->{headers}{'x-parent-id'}, $P, '$otel_parent_id';
        }
        else {
            like $s->{trace_id}, qr/^[0-9a-f]{32}$/, 'trace id is 32 hex';
            isnt $s->{trace_id}, $T, 'new trace id (not the one in the header)';
            isnt $s->{trace_id}, $T2, 'new trace id (not the second header either)';
            isnt $s->{trace_id}, '0' x 32, 'trace id not zero';
            is $s->{parent_span_id}, '', 'no parent';
            ok !($s->{flags} & 0x200), 'no IS_REMOTE flag';
            ok $s->{flags} & 0x100, 'HAS_IS_REMOTE flag';
            is $r->{headers}{'x-parent-id'} // '', '', '$otel_parent_id empty';
        }

        if ($c->{mode} eq 'e') {
            is $c->{up_tp}, $sent_tp, 'extract: traceparent passed unchanged';
            is $c->{up_ts}, $TS, 'extract: tracestate passed unchanged';
        }
        else {
            like $c->{up_tp} // '', qr/^00-$s->{trace_id}-$cl->{span_id}-[0-9a-f]{2}$/,
                'propagate: our traceparent (SERVER trace, CLIENT span) sent';
            is $c->{up_ts}, ($c->{valid} ? $TS : ''), $c->{valid}
                ? 'propagate: tracestate forwarded with a valid traceparent'
                : 'propagate: tracestate dropped with an invalid traceparent';
        }
    };
}

is scalar($ngx->crash_lines), 0, 'no crash in the error log' or diag join "\n", $ngx->crash_lines;

done_testing;
