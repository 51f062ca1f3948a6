#!/usr/bin/perl
# Wall-clock and off-CPU profiling under apache2 (OtelProfilingTypes cpu
# wall), threaded MPMs: a request proxied to a slow backend (mod_proxy_http
# waiting 300 ms for the answer) gets wall and off-CPU samples labelled
# with its span, under mod_proxy's read of the backend, >= 90% of the time
# it waited; its SERVER span carries spanprof.off_cpu_time_ns; threads
# waiting for a connection are not sampled (no unlabelled wall samples of
# any weight while the server is idle) nor even signalled: the child's
# wall ticker ticks (status API wall_ticks) but sends no wall signal
# (wall_signals_sent) while the server is idle.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;
use SpanProf::Profile;
use JSON::PP qw(decode_json);

need_apache_module();

my $CONF = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 1
OtelProfilingTypes cpu wall
OtelProfilingWallRate 100
OtelServiceName apache-wall
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling Off
</Location>
<Location /api>
    SetHandler spanprof-api
    OtelTrace Off
</Location>
<Location /slow>
    OtelProfiling On
    ProxyPass http://127.0.0.1:%%PORT%%/burn
</Location>
EOF

my $sum = sub { my $i = shift; my $t = 0; $t += $_->{values}[$i] // 0 for @_; $t };

for my $mpm (grep { $_ ne 'prefork' } apache_mpms()) {
    subtest "$mpm: a request blocked on a slow proxied backend" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'], servers => 1);
        my $counter = sub {
            my $r = http_get($ap->port, '/api');
            my $j = eval { decode_json($r->{content}) } or die "GET /api: $r->{content}\n";
            my $t = 0;
            $t += $_->{counters}{$_[0]} // 0 for @{ $j->{workers} };
            return $t;
        };
        # idle threads: no wall samples, no wall signals (the status API's
        # counters are published once a second)
        sleep 1.2;
        my ($ticks0, $sent0) = ($counter->('wall_ticks'), $counter->('wall_signals_sent'));
        sleep 2.5;
        my ($ticks1, $sent1) = ($counter->('wall_ticks'), $counter->('wall_signals_sent'));
        cmp_ok $ticks1 - $ticks0, '>=', 50, 'idle: the wall ticker ticks';
        cmp_ok $sent1 - $sent0, '<=', 3, 'idle: no wall signal sent (the API requests aside)';
        my $r = http_get($ap->port, '/slow?fn=wait&ms=300&n=1');
        like $r->{content}, qr/^wait 300 /, 'answered through the proxy' or diag $r->{content};
        $ap->stop;
        my $out = $ap->prefix . '/out';
        my @spans = file_spans($out);
        my ($s) = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.path'} // '') eq '/slow' } @spans;
        ok $s, 'SERVER span of /slow' or return diag span_summary(@spans);

        opendir(my $dh, $out) or die "$out: $!";
        my @files = map { "$out/$_" } sort grep { /^wall-\d+-\d+\.pb\.gz$/ } readdir $dh;
        closedir $dh;
        ok @files >= 1, scalar(@files) . ' wall pprof file(s)' or return diag `ls -la $out`;
        my @smp;
        for my $f (@files) {
            my $p = read_pprof_file($f);
            is_deeply pprof_meta($p)->{sample_types}, ['samples/count', 'wall/nanoseconds', 'off_cpu/nanoseconds'],
                'wall sample types';
            push @smp, pprof_samples($p);
        }
        my $diag = stacks_summary(\@smp, 10);
        my @own = grep { ($_->{labels}{span_id} // '') eq $s->{span_id} } @smp;
        my @proxy = grep { has_frame($_, qr/proxy/) } @own;
        my ($wall, $off) = ($sum->(1, @proxy), $sum->(2, @proxy));
        ok $wall >= 0.9 * 300e6, sprintf('wall under mod_proxy on the span: %.1f ms (>= 270)', $wall / 1e6) or diag $diag;
        ok $off >= 0.9 * 300e6, sprintf('off-CPU under mod_proxy on the span: %.1f ms (>= 270)', $off / 1e6) or diag $diag;
        ok $sum->(1, @own) <= 600e6, sprintf('wall of the span %.1f ms <= 600', $sum->(1, @own) / 1e6);
        my @idle = grep { !exists $_->{labels}{span_id} } @smp;
        ok $sum->(1, @idle) <= 50e6, sprintf('unlabelled wall (threads not serving): %.1f ms (<= 50)',
            $sum->(1, @idle) / 1e6) or diag stacks_summary(\@idle, 10);
        ok(($s->{attrs}{'spanprof.off_cpu_time_ns'} // 0) >= 270e6,
            'span: spanprof.off_cpu_time_ns ' . ($s->{attrs}{'spanprof.off_cpu_time_ns'} // 'none'));
        ok exists $s->{attrs}{'spanprof.cpu_time_ns'}, 'span: spanprof.cpu_time_ns';
    };
}
done_testing;
