#!/usr/bin/perl
# OtelTrace with an expression (a boolean ap_expr, as <If>), decided once
# per request after its ids: parent-based sampling with
# %{OTEL_PARENT_SAMPLED}, ratio sampling with otel_ratio() (OTel's
# consistent rule on the trace id's last 56 bits: exactly the predicted
# trace ids are exported), the two across a proxied hop (the backend keeps
# exactly the traces the front kept), a request header, a section's
# OtelTrace Off below an expression, a ratio that fails at run time, and
# the variables in mod_headers' expr= values. Deciding to trace adds no
# Vary.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $CONF = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelTraceContext propagate
Header always set X-Trace-Id "%{OTEL_TRACE_ID}e"
Header always set X-Traceparent "%{OTEL_TRACEPARENT}e"
Header always set X-Expr "expr=%{OTEL_TRACE_ID} %{OTEL_SPAN_ID} %{OTEL_PARENT_ID} %{OTEL_PARENT_SAMPLED}"
<Location /pb>
    OtelTrace "%{OTEL_PARENT_SAMPLED} == '1'"
</Location>
<Location /ratio>
    OtelTrace "otel_ratio('0.25') == '1'"
</Location>
<Location /ratio/off>
    OtelTrace Off
</Location>
<Location /front>
    OtelTrace "%{OTEL_PARENT_SAMPLED} == '1' || otel_ratio('0.5') == '1'"
    ProxyPass http://127.0.0.1:%%PORT2%%/pb/x.txt
</Location>
<Location /hdr>
    OtelTrace "%{HTTP:X-Debug} == 'on'"
</Location>
<Location /dyn>
    OtelTrace "otel_ratio(%{HTTP:X-Ratio}) == '1'"
</Location>
EOF

my %FILES = map { ("htdocs/$_/x.txt" => "x\n") } qw(pb ratio ratio/off hdr dyn);

# OTel's rule: kept when the trace id's last 56 bits >= (1 - ratio) * 2^56
sub kept_at {
    my ($trace, $ratio) = @_;
    no warnings "portable";    # 56-bit hex: perl has 64-bit integers here
    return hex(substr($trace, 18)) >= int((1 - $ratio) * 2**56 + 0.5);
}

my $ap = start_apache(mpm => 'event', conf => $CONF, dirs => ['out'], files => \%FILES);
my $T1 = rand_hex(32);
my $T0 = rand_hex(32);
my $P  = rand_hex(16);

my %r;
$r{pb_sampled}   = http_get($ap->port, '/pb/x.txt', headers => { traceparent => "00-$T1-$P-01" });
$r{pb_unsampled} = http_get($ap->port, '/pb/x.txt', headers => { traceparent => "00-$T0-$P-00" });
$r{pb_none}      = http_get($ap->port, '/pb/x.txt');
my @ratio = map { http_get($ap->port, "/ratio/x.txt?n=$_") } 1 .. 200;
my @off   = map { http_get($ap->port, "/ratio/off/x.txt?n=$_") } 1 .. 20;
my @front = map { http_get($ap->port, "/front?n=$_") } 1 .. 40;
$r{hdr_on}  = http_get($ap->port, '/hdr/x.txt', headers => { 'X-Debug' => 'on' });
$r{hdr_off} = http_get($ap->port, '/hdr/x.txt', headers => { 'X-Debug' => 'no' });
$r{dyn_1}   = http_get($ap->port, '/dyn/x.txt', headers => { 'X-Ratio' => '1' });
$r{dyn_bad} = http_get($ap->port, '/dyn/x.txt', headers => { 'X-Ratio' => 'abc' });
$ap->stop;

my @spans = grep { $_->{kind} eq 'SPAN_KIND_SERVER' } file_spans($ap->prefix . '/out');
my %by_trace;
push @{ $by_trace{ $_->{trace_id} } }, $_ for @spans;
# a proxied response has the backend's X-Trace-Id too (the same trace)
sub trace_of { my $t = $_[0]{headers}{'x-trace-id'} // ''; return ref $t ? $t->[0] : $t }
sub spans_of { return @{ $by_trace{ trace_of($_[0]) } || [] } }

subtest 'every request answered, with its ids in the variables' => sub {
    for my $x (values(%r), @ratio, @off, @front) {
        is $x->{status}, 200, 'status' or diag explain $x;
    }
    my ($id, $span, $parent, $ps) = split / /, $r{pb_sampled}{headers}{'x-expr'} // '';
    is $id, $T1, 'mod_headers expr=: %{OTEL_TRACE_ID}';
    like $span, qr/^[0-9a-f]{16}$/, '%{OTEL_SPAN_ID}';
    is $parent, $P, '%{OTEL_PARENT_ID}';
    is $ps, '1', '%{OTEL_PARENT_SAMPLED} of a sampled parent';
    like $r{pb_unsampled}{headers}{'x-expr'}, qr/ $P 0$/, '... of an unsampled parent';
    like $r{pb_none}{headers}{'x-expr'}, qr/^[0-9a-f]{32} [0-9a-f]{16}  0$/, '... without a parent';
};

subtest 'parent-based' => sub {
    my @s = spans_of($r{pb_sampled});
    is scalar(@s), 1, 'sampled parent: traced';
    is $s[0]{parent_span_id}, $P, '... as a child of it' if @s;
    is scalar(spans_of($r{pb_unsampled})), 0, 'unsampled parent: not traced';
    is scalar(spans_of($r{pb_none})), 0, 'no parent: not traced';
    like $r{pb_sampled}{headers}{'x-traceparent'}, qr/^00-$T1-[0-9a-f]{16}-01$/, 'sent on: sampled';
    like $r{pb_unsampled}{headers}{'x-traceparent'}, qr/^00-$T0-[0-9a-f]{16}-00$/, 'sent on: not sampled';
    like $r{pb_none}{headers}{'x-traceparent'}, qr/-02$/, 'sent on, new trace: random, not sampled';
};

subtest 'otel_ratio: exactly the trace ids OTel\'s rule keeps' => sub {
    my @want = grep { kept_at(trace_of($_), 0.25) } @ratio;
    ok @want >= 20 && @want <= 80, scalar(@want) . ' of 200 ids fall in the ratio (premise)';
    my ($kept, $wrong, $missed) = (0, 0, 0);
    for my $x (@ratio) {
        my $n = scalar spans_of($x);
        my $want = kept_at(trace_of($x), 0.25);
        $kept++ if $n;
        $wrong++ if $n && !$want;
        $missed++ if !$n && $want;
        like $x->{headers}{'x-traceparent'}, ($want ? qr/-03$/ : qr/-02$/), 'flags sent on' if $x == $ratio[0];
    }
    is $kept, scalar(@want), "$kept traced";
    is $wrong, 0, 'none outside the ratio';
    is $missed, 0, 'none inside it left out';
    is scalar(map { spans_of($_) } @off), 0, 'OtelTrace Off in a section below: none of 20';
};

subtest 'ratio at the front, parent-based at the backend: the same traces' => sub {
    my @fs = map { [ grep { $_->{attrs}{'url.path'} eq '/front' } spans_of($_) ] } @front;
    my @bs = map { [ grep { $_->{attrs}{'url.path'} eq '/pb/x.txt' } spans_of($_) ] } @front;
    my $nf = grep { @$_ } @fs;
    ok $nf >= 5 && $nf <= 35, "$nf of 40 fronts traced (premise)";
    for my $i (0 .. $#front) {
        my $want = kept_at(trace_of($front[$i]), 0.5) ? 1 : 0;
        is scalar(@{ $fs[$i] }), $want, "front $i: " . ($want ? 'traced' : 'not traced');
        is scalar(@{ $bs[$i] }), $want, "backend $i: the same";
    }
};

subtest 'request header; Vary left alone' => sub {
    is scalar(spans_of($r{hdr_on})), 1, 'X-Debug: on: traced';
    is scalar(spans_of($r{hdr_off})), 0, 'X-Debug: no: not traced';
    ok !defined $r{hdr_on}{headers}{vary}, 'no Vary' or diag $r{hdr_on}{headers}{vary};
};

subtest 'otel_ratio with a ratio read at run time' => sub {
    is scalar(spans_of($r{dyn_1})), 1, 'ratio 1: traced';
    is scalar(spans_of($r{dyn_bad})), 0, 'ratio abc: not traced';
    like $ap->error_log, qr/OtelTrace expression \S+:\d+ failed, request not traced: otel_ratio: "abc" is not a number from 0 to 1/,
        'and a warning says why';
    is scalar($ap->crash_lines), 0, 'no crash';
};

done_testing;
