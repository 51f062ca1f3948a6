#!/usr/bin/perl
# The control API and wall-clock profiling (nginx): GET shows the wall
# state (control.wall, control.wall_rate, the configured ones, each
# worker's wall_profiling/wall_rate_hz); POST {"wall": false} stops the
# wall samples at runtime (a blocking request then has none), {"wall":
# true, "wall_rate": 50} brings them back at 50 Hz; bad values get 400.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use JSON::PP ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $BLOCK = 'spanprof_burn_block_on_pipe';
my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => <<'EOF');
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_profiling_types cpu wall;
otel_profiling_interval 200ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Span-Id $otel_span_id always;
    location /block { spanprof_block 200; }
    location = /api { otel_trace off; otel_profiling off; otel_api write=on; }
}
EOF
my $port = $ngx->port;

sub api {
    my ($method, $body) = @_;
    my $r = http_request($method, $port, '/api', defined $body ? (content => $body,
        headers => { 'content-type' => 'application/json' }) : ());
    return ($r->{status}, eval { JSON::PP::decode_json($r->{content}) } || {});
}
sub worker_applied {
    my ($gen) = @_;
    return wait_until(10, sub {
        my (undef, $j) = api('GET');
        my @w = @{ $j->{workers} || [] };
        @w && !grep { ($_->{counters}{applied_generation} // 0) < $gen } @w;
    });
}

my ($st, $j) = api('GET');
is $st, 200, 'GET /api';
is $j->{control}{wall} ? 1 : 0, 1, 'control.wall true (configured)';
is $j->{control}{wall_rate}, 100, 'control.wall_rate 100';
is $j->{control}{configured}{wall} ? 1 : 0, 1, 'configured wall true';
ok wait_until(5, sub { my (undef, $x) = api('GET'); ($x->{workers}[0]{counters}{wall_rate_hz} // 0) == 100 }),
    'worker: wall_rate_hz 100';

($st) = api('POST', '{"wall": "yes"}');
is $st, 400, '"wall": "yes" is refused';
($st) = api('POST', '{"wall_rate": 0}');
is $st, 400, '"wall_rate": 0 is refused';

($st, $j) = api('POST', '{"wall": false}');
is $st, 200, 'POST {"wall": false}';
is $j->{control}{wall} ? 1 : 0, 0, 'control.wall false';
ok worker_applied($j->{control}{generation}), 'the worker applied it';
my $off = http_get($port, '/block');
my $off_sid = $off->{headers}{'x-span-id'} // 'x';

($st, $j) = api('POST', '{"wall": true, "wall_rate": 50}');
is $st, 200, 'POST {"wall": true, "wall_rate": 50}';
is $j->{control}{wall_rate}, 50, 'control.wall_rate 50';
ok worker_applied($j->{control}{generation}), 'the worker applied it';
my $on = http_get($port, '/block');
my $on_sid = $on->{headers}{'x-span-id'} // 'y';
(undef, $j) = api('GET');
is $j->{workers}[0]{counters}{wall_rate_hz}, 50, 'worker: wall_rate_hz 50';
$ngx->quit(15);

my $dir = $ngx->prefix . '/prof';
opendir(my $dh, $dir) or die "$dir: $!";
my @files = map { "$dir/$_" } sort grep { /^wall-\d+-\d+\.pb\.gz$/ } readdir $dh;
closedir $dh;
my @s = map { pprof_samples(read_pprof_file($_)) } @files;
my $w = sub { my $id = shift; my $t = 0; $t += $_->{values}[1] for grep { ($_->{labels}{span_id} // '') eq $id } @s; $t };
is $w->($off_sid), 0, 'wall off: the blocking request has no wall sample';
ok $w->($on_sid) >= 160e6, sprintf('wall on again at 50 Hz: %.0f ms of wall samples (>= 160)', $w->($on_sid) / 1e6);
done_testing;
