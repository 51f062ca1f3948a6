#!/usr/bin/perl
# Wall-clock and off-CPU profiling in nginx (otel_profiling_types cpu wall):
# a request whose code blocks the worker for 200 ms (t/ngx_burn's
# spanprof_block: a read of a pipe a helper thread fills late) gets wall
# and off-CPU samples at spanprof_burn_block_on_pipe, labelled with its
# span, >= 90% of the time it blocked, and its SERVER span carries
# spanprof.off_cpu_time_ns; a request beside it that waits on a slow
# upstream (event-driven) gets none of its waiting as samples; the worker's
# wait for events is counted as idle time (status API, JSON and
# Prometheus), never sampled, and the wall ticker does not signal the worker
# in it (wall_ticks grows, wall_signals_sent hardly).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $BLOCK = 'spanprof_burn_block_on_pipe';

my $CONF = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name prof-wall;
otel_profiling_types cpu wall;
otel_profiling_wall_rate 100;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Span-Id $otel_span_id always;
    location /block { spanprof_block 200; }
    location /slow  { proxy_pass http://127.0.0.1:%%PORT2%%/wait; }
    location = /api { otel_trace off; otel_profiling off; otel_api; }
}
server {
    listen 127.0.0.1:%%PORT2%%;
    location /wait  { otel_trace off; otel_profiling off; spanprof_wait 400; }
}
EOF

sub idle_ns {
    my ($port) = @_;
    my ($js, $ps) = api_counter($port, '/api', 'idle_ns');
    return ($js // 0, $ps // 0);
}

my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => $CONF);
my $dir = $ngx->prefix . '/prof';
my $port = $ngx->port;

# idle time grows while the worker waits for events
my ($idle0) = idle_ns($port);
my ($ticks0) = api_counter($port, '/api', 'wall_ticks');
my ($sent0) = api_counter($port, '/api', 'wall_signals_sent');
sleep 1.2;
my $idle1 = 0;
wait_until(5, sub { ($idle1) = idle_ns($port); $idle1 > $idle0 + 0.5e9 });
my ($ticks1) = api_counter($port, '/api', 'wall_ticks');
my ($sent1) = api_counter($port, '/api', 'wall_signals_sent');

# /slow first (its upstream answers in 400 ms), /block while it waits
my $slow_pid = open(my $slow_fh, '-|') // die "fork: $!";
if (!$slow_pid) {
    my $r = http_get($port, '/slow');
    print "$r->{status} ", ($r->{headers}{'x-span-id'} // ''), "\n";
    close STDOUT;
    POSIX::_exit(0);    # not exit: the parent's END blocks stop nginx
}
sleep 0.05;
my $rb = http_get($port, '/block');
my $slow_line = <$slow_fh> // '';
close $slow_fh;
my ($slow_status, $slow_sid) = split ' ', $slow_line;
my ($idle2, $idle2p) = (0, 0);
wait_until(5, sub { ($idle2, $idle2p) = idle_ns($port); $idle2 > $idle1 });
my $took = $ngx->quit(15);

my $bsid = $rb->{headers}{'x-span-id'} // '';
is $rb->{status}, 200, '/block answered 200';
is $slow_status, 200, '/slow answered 200 (through its upstream)';
like $bsid, qr/^[0-9a-f]{16}$/, '/block: X-Span-Id';
like $slow_sid // '', qr/^[0-9a-f]{16}$/, '/slow: X-Span-Id';

subtest 'idle time is counted' => sub {
    ok $idle1 >= $idle0 + 0.5e9, sprintf('idle_ns grew by %.2f s over an idle 1.2 s', ($idle1 - $idle0) / 1e9);
    ok $idle2 > $idle1, "idle_ns in JSON ($idle2) still grows";
    ok $idle2p > 0, "idle_ns in Prometheus ($idle2p)";
    my ($ticks, $sent) = (($ticks1 // 0) - ($ticks0 // 0), ($sent1 // 0) - ($sent0 // 0));
    ok $ticks >= 50, "the wall ticker ticked $ticks times meanwhile";
    # the worker runs its exporter's timers and the API requests between
    # waits: a tick may land there, rarely
    ok $sent <= $ticks / 10, "and sent $sent wall signals to the idle worker";
};

opendir(my $dh, $dir) or die "$dir: $!";
my @files = map { "$dir/$_" } sort grep { /^wall-\d+-\d+\.pb\.gz$/ } readdir $dh;
closedir $dh;
ok @files >= 1, scalar(@files) . ' wall pprof file(s)' or diag `ls -la $dir`;

my @s;
for my $f (@files) {
    my $p = eval { read_pprof_file($f) };
    ok $p, "$f decodes as perftools.profiles.Profile" or diag $@;
    next unless $p;
    my $m = pprof_meta($p);
    is_deeply $m->{sample_types}, ['samples/count', 'wall/nanoseconds', 'off_cpu/nanoseconds'],
        'sample types samples/count, wall/nanoseconds, off_cpu/nanoseconds';
    is $m->{period_type}, 'wall/nanoseconds', 'period type wall/nanoseconds';
    is $m->{period}, 10_000_000, 'period 10 ms (100 Hz)';
    push @s, pprof_samples($p);
}
my $diag = stacks_summary(\@s, 15);
my $sum = sub { my $i = shift; my $t = 0; $t += $_->{values}[$i] // 0 for @_; $t };

subtest 'the blocking request: wall and off-CPU time at its stack, on its span' => sub {
    my @at = grep { has_frame($_, $BLOCK) } @s;
    my @good = grep { ($_->{labels}{span_id} // '') eq $bsid } @at;
    my ($wall, $off) = ($sum->(1, @good), $sum->(2, @good));
    ok $wall >= 0.9 * 200e6, sprintf("wall at $BLOCK on the span: %.1f ms (>= 180)", $wall / 1e6) or diag $diag;
    ok $off >= 0.9 * 200e6, sprintf("off-CPU at $BLOCK on the span: %.1f ms (>= 180)", $off / 1e6) or diag $diag;
    ok $wall <= 400e6, sprintf('wall %.1f ms <= 400 (no more than the request took)', $wall / 1e6);
    ok $sum->(1, @at) && $wall / $sum->(1, @at) >= 0.9, "samples at $BLOCK carry the span";
    my @bad = grep { $_->{values}[2] > $_->{values}[1] } @s;
    is scalar @bad, 0, 'off-CPU never exceeds wall';
};

subtest 'the request waiting on a slow upstream: none of its wait' => sub {
    my @of_slow = grep { ($_->{labels}{span_id} // '') eq ($slow_sid // 'x') } @s;
    # its own code runs a fraction of a millisecond: a tick may land in it
    ok $sum->(1, @of_slow) <= 20e6, sprintf('wall of /slow: %.1f ms (<= 2 ticks, of its 400 ms)',
        $sum->(1, @of_slow) / 1e6) or diag $diag;
};

subtest 'the spanprof command reads the wall files (--type wall, off_cpu)' => sub {
    my $cli = $ENV{SPANPROF_CLI} || repo_root() . '/build/cli/spanprof';
    plan skip_all => 'build/cli/spanprof not built' unless -x $cli;
    for my $t (qw(wall off_cpu)) {
        my $out = `'$cli' folded '$dir' --span $bsid --type $t 2>&1`;
        is $? >> 8, 0, "folded --type $t: exit 0" or diag $out;
        my $at = 0;
        for (split /\n/, $out) {
            $at += $2 if /^(.*;\Q$BLOCK\E(?:;[^ ]*)?) (\d+)$/;
        }
        ok $at >= 0.9 * 200e6, sprintf("folded --type $t: %.1f ms at $BLOCK on the span", $at / 1e6)
            or diag $out;
    }
    my $def = `'$cli' folded '$dir' --span $bsid 2>&1`;
    unlike $def, qr/\b[0-9]{8,}$/m, 'without --type: CPU sample counts, not wall nanoseconds';
};

subtest 'span attributes' => sub {
    my @js = server_spans(map { spans_from_json($_->{json} || {}) } read_jsonl("$dir/traces.jsonl"));
    my ($sb) = grep { $_->{span_id} eq $bsid } @js;
    my ($ss) = grep { $_->{span_id} eq ($slow_sid // 'x') } @js;
    ok $sb, '/block span in traces.jsonl' or return diag span_summary(@js);
    ok(($sb->{attrs}{'spanprof.off_cpu_time_ns'} // 0) >= 180e6,
        '/block: spanprof.off_cpu_time_ns ' . ($sb->{attrs}{'spanprof.off_cpu_time_ns'} // 'none') . ' >= 180 ms');
    ok(($sb->{attrs}{'spanprof.wall_time_ns'} // 0) >= 180e6,
        '/block: spanprof.wall_time_ns ' . ($sb->{attrs}{'spanprof.wall_time_ns'} // 'none'));
    ok exists $sb->{attrs}{'spanprof.cpu_time_ns'}, '/block: spanprof.cpu_time_ns';
    ok $ss, '/slow span in traces.jsonl';
    ok(($ss->{attrs}{'spanprof.wall_time_ns'} // 0) <= 20e6, '/slow: spanprof.wall_time_ns at most 2 ticks') if $ss;
};

ok $took < 10, "quit in $took s";
is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;

# OTLP: one request holds the CPU, wall and off-CPU profiles
subtest 'OTLP: wall and off-CPU profiles beside the CPU one' => sub {
    my $recv = start_receiver();
    (my $conf = $CONF) =~ s{endpoint file://%%PREFIX%%/prof;}{endpoint %%RECEIVER%%; protocol http/protobuf;};
    my $o = start_nginx(receiver => $recv, burn => 1, conf => $conf);
    my $r = http_get($o->port, '/block');
    my $sid = $r->{headers}{'x-span-id'} // '';
    my $t_end = time;
    my ($covered, @all) = wait_otlp_covering($recv, $t_end, 15, poke => sub { http_get($o->port, '/api') });
    ok $covered, 'a profile covering the request arrived';
    $o->stop;
    my %types;
    $types{ $_->{profile}{sample_type} }++ for @all;
    my @wall = grep { $_->{profile}{sample_type} eq 'wall/nanoseconds' && sample_span($_) eq $sid } @all;
    my @off  = grep { $_->{profile}{sample_type} eq 'off_cpu/nanoseconds' && sample_span($_) eq $sid } @all;
    my $sumv = sub { my $t = 0; for my $x (@_) { $t += $_ for @{ $x->{values} } } $t };
    my @wb = grep { has_frame($_, $BLOCK) } @wall;
    my @ob = grep { has_frame($_, $BLOCK) } @off;
    ok $sumv->(@wb) >= 180e6, sprintf('wall/nanoseconds at %s on the span: %.1f ms', $BLOCK, $sumv->(@wb) / 1e6)
        or diag explain \%types;
    ok $sumv->(@ob) >= 180e6, sprintf('off_cpu/nanoseconds at %s on the span: %.1f ms', $BLOCK, $sumv->(@ob) / 1e6);
    my @per_ts = grep { @{ $_->{timestamps} } && @{ $_->{timestamps} } != @{ $_->{values} } } @wall, @off;
    is scalar @per_ts, 0, 'one value per timestamp';
    my ($wp) = map { $_->{profile} } @wall;
    is $wp->{period_type}, 'wall/nanoseconds', 'wall profile: period_type wall/nanoseconds' if $wp;
    is $wp->{period}, 10_000_000, 'wall profile: period 10 ms' if $wp;
};
done_testing;
