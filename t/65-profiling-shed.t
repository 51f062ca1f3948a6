#!/usr/bin/perl
# Load shedding (otel_profiling_shed / OtelProfilingShed cpu=10) against real
# servers, at otel_profiling_rate 1000 with the file exporter:
#  - while requests burn CPU back to back (alpha, ~5 s), the worker's CPU
#    use is above 10%: the error log shows the rate halving once a second
#    ("sampling rate 1000 -> 500 Hz", ...);
#  - idle, it steps back up to 1000 Hz;
#  - the pprof files' cpu/nanoseconds stay true CPU time across the change
#    (a profile every 3 s holds samples of several rates, so count x one
#    period would be wrong):
#    the alpha samples add up to the CPU the alpha requests burnt (each
#    burns exactly its ms of thread CPU) although their count is far below
#    one per ms; a beta request burnt after the recovery is sampled at
#    1000 Hz again (count ~ its ms) and its cpu/nanoseconds match too;
#  - nginx also sends the OTLP profiles of the same intervals: their values
#    (CPU ns per timestamp) add up to the burnt CPU and to the pprof's;
#  - with `pause` the sampler pauses instead while the load lasts, and
#    resumes at 1000 Hz;
#  - bad values are refused by nginx -t / apache2 -t with the reason.
# Uses the test-only modules t/ngx_burn and t/mod_burn.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $BURN_S  = 5;        # seconds of back-to-back alpha requests
my $ALPHA_MS = 100;     # CPU per alpha request
my $BETA_MS  = 300;     # the one beta request after the recovery

# [value, reason] refused by both servers
my @BAD = (
    ['cpu=0',          qr/the CPU threshold must be 1\.\.6400 percent/],
    ['cpu=abc',        qr/cpu= wants a number of percent/],
    ['cpu=20,stop',    qr/after cpu=PERCENT only ",pause" may follow/],
    ['on',             qr/"on" is not off, cpu=PERCENT or cpu=PERCENT,pause/],
);

sub shed_lines {
    my ($log) = @_;
    return grep { /spanprof: CPU \d+% (?:>|<=) \d+%: (?:sampling rate|profiling)/ } split /\n/, $log;
}

# The checks shared by nginx and httpd. $burn->(fn, ms, n) runs one request;
# $log->() is the error log; $finish->() stops the server (last profile
# written) and returns the pprof files' samples (pprof_samples shape).
sub check_shedding {
    my (%o) = @_;
    my ($burn, $log, $finish, $alpha_fn, $beta_fn) = @o{qw(burn log finish alpha beta)};

    my ($n_alpha, $t_end) = (0, time + ($o{burn_s} // $BURN_S));
    while (time < $t_end) {
        $burn->('alpha', $ALPHA_MS, $n_alpha++);
    }
    # idle: one step back up a second
    my $back = SpanProf::Test::wait_until(30,
        sub { grep { /<= 10%: sampling rate \d+ -> 1000 Hz/ } shed_lines($log->()) });
    ok $back, 'idle: back to 1000 Hz' or diag join "\n", shed_lines($log->());
    # all logged by now: nothing changes while idle at the full rate
    my @down = grep { /> 10%: sampling rate/ } shed_lines($log->());
    my @up = grep { /<= 10%: sampling rate/ } shed_lines($log->());
    ok @down >= 2, scalar(@down) . " rate decreases logged while burning ($n_alpha requests)"
        or diag join "\n", shed_lines($log->());
    like $down[0] // '', qr/spanprof: CPU \d+% > 10%: sampling rate 1000 -> 500 Hz/,
        'the first halves 1000 Hz';
    for my $i (1 .. $#down) {
        my ($a) = $down[$i - 1] =~ /-> (\d+) Hz/;
        my ($b, $c) = $down[$i] =~ /rate (\d+) -> (\d+) Hz/;
        is "$b -> $c", "$a -> " . int($a / 2), "then $a -> " . int($a / 2) . ' Hz';
    }
    is scalar(@up), scalar(@down), scalar(@up) . ' increases, as many as the decreases';
    for my $i (0 .. $#up) {
        my ($b, $c) = $up[$i] =~ /rate (\d+) -> (\d+) Hz/;
        my ($want) = ($down[$#down - $i] // '') =~ /rate (\d+) ->/;
        is $c, $want, "back up: $b -> " . ($want // '?') . ' Hz';
    }

    $burn->('beta', $BETA_MS, 0);
    my @s = $finish->();
    ok @s, scalar(@s) . ' pprof samples' or return;

    my ($ca, $na, $cb, $nb) = (0, 0, 0, 0);
    for my $smp (@s) {
        if (grep { $_ eq $alpha_fn } @{ $smp->{stack} }) {
            $ca += $smp->{cpu_ns}; $na += $smp->{count};
        } elsif (grep { $_ eq $beta_fn } @{ $smp->{stack} }) {
            $cb += $smp->{cpu_ns}; $nb += $smp->{count};
        }
    }
    my $true_a = $n_alpha * $ALPHA_MS * 1e6;
    diag sprintf('alpha: %d requests, %.0f ms burnt; %d samples, cpu/nanoseconds %.0f ms; '
        . 'beta: %d samples, %.0f ms', $n_alpha, $true_a / 1e6, $na, $ca / 1e6, $nb, $cb / 1e6);
    ok $na * 1e6 < 0.75 * $true_a,
        "alpha was sampled below 1000 Hz: $na samples for " . ($true_a / 1e6) . ' ms';
    ok abs($ca - $true_a) <= 0.15 * $true_a,
        sprintf('alpha cpu/nanoseconds %.0f ms = the %.0f ms burnt (15%%)', $ca / 1e6, $true_a / 1e6);
    ok abs($cb - $BETA_MS * 1e6) <= 0.15 * $BETA_MS * 1e6,
        sprintf('beta cpu/nanoseconds %.0f ms = the %d ms burnt (15%%)', $cb / 1e6, $BETA_MS);
    ok abs($nb - $BETA_MS) <= 0.15 * $BETA_MS,
        "beta sampled at 1000 Hz again: $nb samples for $BETA_MS ms";

    return unless $o{otlp};
    # The OTLP profiles of the same intervals (protoc --decode): values are
    # CPU nanoseconds per timestamp, each signal's weight times its own
    # period, so they add up to the burnt CPU too (count x the profile's
    # one period would not: most alpha samples were taken at lower rates).
    my @o = $o{otlp}->();
    ok @o, scalar(@o) . ' OTLP profile samples' or return;
    my %types = map { $_->{profile}{sample_type} => 1 } @o;
    is join(',', sort keys %types), 'cpu/nanoseconds', 'OTLP sample_type cpu/nanoseconds';
    my ($oa, $ob, $ona, $periods) = (0, 0, 0, 0);
    for my $smp (@o) {
        if (grep { $_ eq $alpha_fn } @{ $smp->{stack} }) {
            $oa += $_ for @{ $smp->{values} };
            $ona += @{ $smp->{timestamps} };
        } elsif (grep { $_ eq $beta_fn } @{ $smp->{stack} }) {
            $ob += $_ for @{ $smp->{values} };
        }
    }
    my %per = map { $_->{profile}{period} => 1 } @o;
    diag sprintf('OTLP: alpha %.0f ms in %d signals, beta %.0f ms; profile periods (ns): %s',
        $oa / 1e6, $ona, $ob / 1e6, join(' ', sort { $a <=> $b } keys %per));
    ok abs($oa - $true_a) <= 0.15 * $true_a,
        sprintf('OTLP alpha values %.0f ms = the %.0f ms burnt (15%%)', $oa / 1e6, $true_a / 1e6);
    ok abs($oa - $ca) <= 0.01 * $ca,
        sprintf('OTLP alpha values %.0f ms = the pprof cpu/nanoseconds %.0f ms of the same intervals',
            $oa / 1e6, $ca / 1e6);
    ok abs($ob - $BETA_MS * 1e6) <= 0.15 * $BETA_MS * 1e6,
        sprintf('OTLP beta values %.0f ms = the %d ms burnt (15%%)', $ob / 1e6, $BETA_MS);
}

# The decoded pprof of every Pyroscope ingest the receiver stored.
sub pyroscope_pprofs {
    my ($recv) = @_;
    my @out;
    for my $q (grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests) {
        my ($b) = ($q->{headers}{'content-type'} // '') =~ /boundary="?([^";]+)"?/;
        my ($part) = grep { ($_->{name} // '') eq 'profile' } multipart_parts($q->{body}, $b // 'none');
        push @out, decode_pprof($part ? $part->{content} : '');
    }
    return @out;
}

# ---------------------------------------------------------------------------
# nginx
# ---------------------------------------------------------------------------
# OTLP profiles to the receiver and the same profiles' pprof to its
# Pyroscope ingest, so both encoders are checked across the rate changes.
subtest 'nginx: otel_profiling_shed cpu=10' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_profiling_pyroscope %%RECEIVER%%/pyro;
otel_service_name prof-shed;
otel_profiling_rate 1000;
otel_profiling_interval 3s;
otel_profiling_shed cpu=10;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /alpha { spanprof_burn alpha 100; }
    location /beta  { spanprof_burn beta 300; }
}
EOF
    check_shedding(
        alpha => 'spanprof_burn_alpha', beta => 'spanprof_burn_beta',
        burn => sub {
            my ($fn, $ms) = @_;
            my $r = http_get($ngx->port, "/$fn");
            die "/$fn: $r->{status}\n" unless $r->{status} == 200;
        },
        log => sub { $ngx->error_log },
        finish => sub {
            $ngx->quit(15);
            return map { pprof_samples($_) } pyroscope_pprofs($recv);
        },
        otlp => sub { collect_otlp_samples($recv) },
    );
    is scalar($ngx->crash_lines), 0, 'no crash';
    $recv->stop;
};

subtest 'nginx: otel_profiling_shed cpu=10,pause' => sub {
    my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => <<'EOF');
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_profiling_rate 1000;
otel_profiling_interval 3s;
otel_profiling_shed cpu=10,pause;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_profiling on;
    location /alpha { spanprof_burn alpha 100; }
    location /beta  { spanprof_burn beta 300; }
}
EOF
    my ($n, $t_end) = (0, time + 3);
    while (time < $t_end) {
        http_get($ngx->port, '/alpha')->{status} == 200 or die "/alpha failed\n";
        $n++;
    }
    my $back = SpanProf::Test::wait_until(15,
        sub { grep { /profiling resumed/ } shed_lines($ngx->error_log) });
    my @l = shed_lines($ngx->error_log);
    ok $back, 'resumed when idle' or diag join "\n", @l;
    is scalar(grep { /spanprof: CPU \d+% > 10%: profiling paused$/ } @l), 1,
        'paused once while burning';
    is scalar(grep { /spanprof: CPU \d+% <= 10%: profiling resumed at 1000 Hz$/ } @l), 1,
        'resumed once, at 1000 Hz';
    is scalar(grep { /sampling rate/ } @l), 0, 'the rate itself never changed';
    http_get($ngx->port, '/beta');
    $ngx->quit(15);
    my ($ca, $nb) = (0, 0);
    for my $smp (map { pprof_samples(read_pprof_file($_)) } pprof_files($ngx->prefix . '/prof')) {
        $ca += $smp->{cpu_ns} if grep { $_ eq 'spanprof_burn_alpha' } @{ $smp->{stack} };
        $nb += $smp->{count} if grep { $_ eq 'spanprof_burn_beta' } @{ $smp->{stack} };
    }
    my $true_a = $n * 100e6;
    ok $ca < 0.6 * $true_a, sprintf('paused: %.0f ms of the %.0f ms alpha burnt were sampled',
        $ca / 1e6, $true_a / 1e6);
    ok abs($nb - $BETA_MS) <= 0.15 * $BETA_MS, "resumed: beta sampled at 1000 Hz ($nb samples)";
    is scalar($ngx->crash_lines), 0, 'no crash';
};

# Memory sampling is shed with the CPU sampler: its mean interval doubles
# as the rate halves, and comes back with it (each sample keeps the mean it
# was taken at: test_alloc_sampler).
subtest 'nginx: otel_profiling_shed with memory profiling' => sub {
    my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => <<'EOF');
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_profiling_types cpu memory;
otel_profiling_rate 1000;
otel_profiling_interval 3s;
otel_profiling_shed cpu=10;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_profiling on;
    location /alpha { spanprof_burn alpha 100; }
}
EOF
    my $t_end = time + 3;
    while (time < $t_end) {
        http_get($ngx->port, '/alpha')->{status} == 200 or die "/alpha failed\n";
    }
    my $back = SpanProf::Test::wait_until(20,
        sub { grep { /<= 10%: sampling rate \d+ -> 1000 Hz/ } shed_lines($ngx->error_log) });
    my @l = shed_lines($ngx->error_log);
    ok $back, 'back to 1000 Hz when idle' or diag join "\n", @l;
    like((grep { /> 10%: sampling rate/ } @l)[0] // '',
         qr/sampling rate 1000 -> 500 Hz, memory interval 512 -> 1024 KiB$/,
         'the first decrease doubles the memory interval');
    like((grep { /<= 10%: sampling rate/ } @l)[-1] // '',
         qr/sampling rate 500 -> 1000 Hz, memory interval 1024 -> 512 KiB$/,
         'the last increase brings it back to 512 KiB');
    $ngx->quit(15);
    is scalar($ngx->crash_lines), 0, 'no crash';
};

subtest 'nginx -t: bad otel_profiling_shed values' => sub {
    for my $c (@BAD) {
        my ($v, $why) = @$c;
        my ($rc, $out, $path, $text) = nginx_t("otel_profiling_shed $v;\nserver { listen 127.0.0.1:%%PORT%%; }\n");
        my $line = conf_line($text, qr/otel_profiling_shed/);
        isnt $rc, 0, "$v: nginx -t fails";
        like $out, qr/invalid otel_profiling_shed .*in \Q$path\E:$line\b/, "$v: at nginx.conf:$line";
        like $out, $why, "$v: the reason";
    }
    my ($rc, $out) = nginx_t("otel_profiling_shed cpu=50,pause;\nserver { listen 127.0.0.1:%%PORT%%; }\n");
    is $rc, 0, 'cpu=50,pause passes' or diag $out;
    ($rc, $out) = nginx_t("otel_profiling_shed off;\nserver { listen 127.0.0.1:%%PORT%%; }\n");
    is $rc, 0, 'off passes' or diag $out;
};

# ---------------------------------------------------------------------------
# httpd
# ---------------------------------------------------------------------------
SKIP: {
    require SpanProf::Apache;
    my @missing = grep { !-e $_ } (SpanProf::Apache::apache_module_path(),
                                   SpanProf::Apache::apache_burn_path());
    skip "not built: @missing", 2 if @missing;

    # One child, so that its CPU is the whole load: prefork gets a limit of
    # one child (no spares to share the load), and a shorter burn (4 s).
    for my $mpm (SpanProf::Apache::apache_mpms()) {
        my $prefork = $mpm eq 'prefork';
        subtest "httpd $mpm: OtelProfilingShed cpu=10" => sub {
            my $ap = SpanProf::Apache::start_apache(mpm => $mpm, burn => 1, dirs => ['out'],
                servers => 1, $prefork ? (server_limit => 1) : (), conf => <<'EOF');
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 3
OtelProfilingRate 1000
OtelProfilingShed cpu=10
OtelServiceName apache-shed
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF
            check_shedding(
                alpha => 'spanprof_apache_burn_alpha', beta => 'spanprof_apache_burn_beta',
                $prefork ? (burn_s => 4) : (),
                burn => sub {
                    my ($fn, $ms, $n) = @_;
                    my $r = http_get($ap->port, "/burn?fn=$fn&ms=$ms&n=$n");
                    die "/burn: $r->{status}\n" unless $r->{status} == 200;
                },
                log => sub { $ap->error_log },
                finish => sub {
                    $ap->stop;
                    return map { pprof_samples(read_pprof_file($_)) } pprof_files($ap->prefix . '/out');
                },
            );
            is scalar($ap->crash_lines), 0, 'no crash';
        };
    }

    subtest 'apache2 -t: bad OtelProfilingShed values' => sub {
        for my $c (@BAD) {
            my ($v, $why) = @$c;
            my ($code, $out, $path, $full) = SpanProf::Apache::apache_t(
                "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelTrace On\nOtelProfilingShed $v\n");
            my $line = conf_line($full, qr/OtelProfilingShed/);
            isnt $code, 0, "$v: apache2 -t fails";
            like $out, qr/Syntax error on line \Q$line\E of \Q$path\E/, "$v: file and line ($line)";
            like $out, qr/OtelProfilingShed: .*$why/, "$v: the reason";
        }
        my ($code, $out) = SpanProf::Apache::apache_t(
            "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelTrace On\nOtelProfilingShed cpu=50,pause\n");
        is $code, 0, 'cpu=50,pause passes' or diag $out;
    };
}

done_testing;
