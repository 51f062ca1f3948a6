#!/usr/bin/perl
# OTLP profiles stay CPU-true when the control API changes the sampling
# rate inside one profile interval (issue 28): nginx at
# otel_profiling_rate 1000 with a 60 s profile interval (so the whole test
# is one profile, sent when nginx quits) burns alpha (300 ms of thread
# CPU), then POST /api {"rate": 100} switches the worker to 100 Hz, then
# beta burns 300 ms. In the one OTLP profile (protoc --decode):
#  - each value is its own signal's weight x its own period, not the
#    profile's period (10 ms at its end): alpha's are whole ms adding up to
#    its samples x 1 ms exactly, beta's whole 10 ms, its samples x 10 ms;
#  - both add up to the 300 ms burnt (15%), and to the cpu/nanoseconds of
#    the pprof sent to the Pyroscope ingest for the same interval (1%);
#  - the samples x the profile's period would be ~10x off for alpha.
# Uses the test-only module t/ngx_burn.
use strict;
use warnings;
use lib 't/lib';
use JSON::PP qw(decode_json);
use Test::More;
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $MS = 300;

my $recv = start_receiver();
my $ngx = start_nginx(receiver => $recv, burn => 1, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_profiling_pyroscope %%RECEIVER%%/pyro;
otel_service_name rate-api;
otel_profiling_rate 1000;
otel_profiling_interval 60s;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /alpha { spanprof_burn alpha 300; }
    location /beta  { spanprof_burn beta 300; }
    location = /api { otel_trace off; otel_profiling off; otel_api write=on; }
}
EOF
my $port = $ngx->port;

sub worker_rates {
    my $r = http_get($port, '/api');
    my $j = eval { decode_json($r->{content}) } or return ();
    return map { $_->{rate} } @{ $j->{workers} || [] };
}

is http_get($port, '/alpha')->{status}, 200, "alpha: $MS ms of CPU at 1000 Hz";
my $r = http_request('POST', $port, '/api', content => '{"rate": 100}');
is $r->{status}, 200, 'POST /api {"rate": 100}: 200' or diag $r->{content};
ok wait_until(5, sub { my @r = worker_rates(); @r && !grep { $_ != 100 } @r }),
    'the worker samples at 100 Hz' or diag join ' ', worker_rates();
is http_get($port, '/beta')->{status}, 200, "beta: $MS ms of CPU at 100 Hz";
$ngx->quit(15);

my @o = collect_otlp_samples($recv);
my %seqs = map { $_->{seq} => 1 } grep {
    my $s = $_; grep { /spanprof_burn_(alpha|beta)/ } @{ $s->{stack} } } @o;
is scalar(keys %seqs), 1, 'alpha and beta are in one OTLP profile (the rate changed inside it)';
my %per = map { $_->{profile}{period} => 1 } @o;
is join(',', keys %per), '10000000', "the profile's period: 10 ms (100 Hz, at its end)";

my (%sum, %ts, %vals);
for my $smp (@o) {
    my ($fn) = map { /^spanprof_burn_(alpha|beta)$/ ? $1 : () } @{ $smp->{stack} } or next;
    $sum{$fn} += $_ for @{ $smp->{values} };
    $ts{$fn} += @{ $smp->{timestamps} };
    $vals{$fn}{$_}++ for @{ $smp->{values} };
}
diag sprintf('OTLP: alpha %.1f ms in %d signals (values %s), beta %.1f ms in %d signals (values %s)',
    ($sum{alpha} // 0) / 1e6, $ts{alpha} // 0, join(' ', map { "$_ x$vals{alpha}{$_}" } sort keys %{ $vals{alpha} || {} }),
    ($sum{beta} // 0) / 1e6, $ts{beta} // 0, join(' ', map { "$_ x$vals{beta}{$_}" } sort keys %{ $vals{beta} || {} }));
# Each value is its signal's weight (1 + timer overruns, many on a loaded
# machine) x its period: positive multiples of 1 ms for alpha, of 10 ms
# for beta (one period each with the rest on the last would not be).
my @bad_a = grep { $_ <= 0 || $_ % 1_000_000 } keys %{ $vals{alpha} || {} };
my @bad_b = grep { $_ <= 0 || $_ % 10_000_000 } keys %{ $vals{beta} || {} };
ok $ts{alpha} && !@bad_a, 'alpha: whole milliseconds per signal (1000 Hz)' or diag "@bad_a";
ok $ts{beta} && !@bad_b, 'beta: whole 10 ms per signal (100 Hz)' or diag "@bad_b";
for my $fn (qw(alpha beta)) {
    ok abs(($sum{$fn} // 0) - $MS * 1e6) <= 0.15 * $MS * 1e6,
        sprintf('OTLP %s values %.1f ms = the %d ms burnt (15%%)', $fn, ($sum{$fn} // 0) / 1e6, $MS);
}
# The pprof of the same interval (Pyroscope ingest): the same CPU.
my (%pp, %pn);
for my $q (grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests) {
    my ($b) = ($q->{headers}{'content-type'} // '') =~ /boundary="?([^";]+)"?/;
    my ($part) = grep { ($_->{name} // '') eq 'profile' } multipart_parts($q->{body}, $b // 'none');
    for my $smp (pprof_samples(decode_pprof($part ? $part->{content} : ''))) {
        my ($fn) = map { /^spanprof_burn_(alpha|beta)$/ ? $1 : () } @{ $smp->{stack} } or next;
        $pp{$fn} += $smp->{cpu_ns};
        $pn{$fn} += $smp->{count};
    }
}
# The samples (weights) of each: at 1 ms and at 10 ms exactly.
is $sum{alpha} // 0, ($pn{alpha} // -1) * 1_000_000, "OTLP alpha = its $pn{alpha} samples x 1 ms exactly";
is $sum{beta} // 0, ($pn{beta} // -1) * 10_000_000, "OTLP beta = its $pn{beta} samples x 10 ms exactly";
ok(($pn{alpha} // 0) * 10e6 > 5 * $MS * 1e6,
    sprintf('(the samples x the profile period would say %.0f ms for alpha)', ($pn{alpha} // 0) * 10));
for my $fn (qw(alpha beta)) {
    ok abs(($sum{$fn} // 0) - ($pp{$fn} // 0)) <= 0.01 * ($pp{$fn} // 1),
        sprintf('OTLP %s %.1f ms = the pprof cpu/nanoseconds %.1f ms', $fn, ($sum{$fn} // 0) / 1e6, ($pp{$fn} // 0) / 1e6);
}
is scalar($ngx->crash_lines), 0, 'no crash';
$ngx->stop;
$recv->stop;
done_testing;
