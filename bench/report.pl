#!/usr/bin/perl
# bench/report.pl RUN_DIR OUT.md [--quiet] - turns what bench/run measured
# into the tables of BENCHMARKS.md (and prints them, unless --quiet).
# bench/analysis.md, written by hand after profiling, is appended as it is;
# so are bench/request_path.md and bench/grpc_path.md. The sections of
# bench/keep, bench/cli and bench/serve in OUT.md are kept; `make bench`
# runs this once more after them, so that the issue-29 targets table has
# this run's bench/serve numbers.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use TimeSplitSums qw(ns_by_kind pair_sums);

my ($W, $out, $quiet) = @ARGV;
die "usage: $0 RUN_DIR OUT.md [--quiet]\n" unless $W && $out;
$quiet = defined $quiet && $quiet eq '--quiet';

sub slurp { my $f = shift; open(my $fh, '<', $f) or return ''; local $/; my $t = <$fh>; close $fh; return $t }

my %meta = map { /^([^=]+)=(.*)$/ ? ($1, $2) : () } split /\n/, slurp("$W/meta.txt");
my $hz = $meta{clk_tck} || 100;

# ---- results -------------------------------------------------------------------
my ($rows_ref, $S_ref) = load_results("$W/results.tsv", $hz);
my @rows = @$rows_ref;
my %S = %$S_ref;   # summary per workload/cfg

sub median { my @v = sort { $a <=> $b } @_; return undef unless @v; my $n = @v; return $n % 2 ? $v[$n/2] : ($v[$n/2-1] + $v[$n/2]) / 2 }
sub min { my $m; for (@_) { $m = $_ if !defined $m || $_ < $m } $m }
sub max { my $m; for (@_) { $m = $_ if !defined $m || $_ > $m } $m }
sub sum { my $s = 0; $s += $_ for @_; $s }

my @cfgs = qw(A B C D E F G J W M);
my %desc = (
    A => 'no module',
    B => 'module loaded, `otel_trace off`',
    C => 'tracing, collector answers 200',
    D => 'C + profiling at 100 Hz',
    E => 'C, collector down (refused)',
    F => 'D + an `otel_api` location (status and control every 250 ms)',
    G => 'C with `protocol grpc` (OTLP/gRPC)',
    J => 'C with `protocol http/json` (OTLP/JSON)',
    W => 'D + wall-clock profiling (`otel_profiling_types cpu wall;`, 100 Hz)',
    M => 'D + memory profiling (`otel_profiling_types cpu memory;`, 512k interval)',
);
my %wdesc = (
    r200   => '`return 200` (`GET /r200`)',
    static => '1 KiB static file (`GET /static/1k.bin`, sendfile)',
    proxy  => 'proxied to a local upstream (`GET /proxy/x`, keepalive upstream in the same nginx, `return 200`)',
);
my @wls = grep { $S{$_} } split ' ', ($meta{workloads} || 'r200 static proxy');

# X over A for summary S (requests/s; CPU per request A over X).
sub ratio { my ($S, $wl, $c) = @_; return undef unless $S->{$wl}{A} && $S->{$wl}{$c}; return $S->{$wl}{$c}{rps} / $S->{$wl}{A}{rps} }
sub cpu_ratio { my ($S, $wl, $c) = @_; return undef unless $S->{$wl}{A} && $S->{$wl}{$c}; return $S->{$wl}{A}{cpu} / $S->{$wl}{$c}{cpu} }

# Rows of a results.tsv (bench/run's columns) -> (rows, {workload}{cfg} => summary).
# MPM: only the rows of that MPM (bench/run_apache's mpm column; a row
# without one is event's).
sub load_results {
    my ($file, $tck, $mpm) = @_;
    my (@rs, %byc, %sum);
    open(my $fh, '<', $file) or die "$file: $!";
    my $h = <$fh>; chomp $h; my @c = split /\t/, $h;
    while (<$fh>) {
        chomp; my %r; @r{@c} = split /\t/;
        next unless defined $r{requests} && $r{requests} =~ /^\d+$/ && $r{requests} > 0;
        next if defined $mpm && ($r{mpm} // 'event') ne $mpm;
        $r{cpu_us} = $r{ticks} / $tck * 1e6 / $r{requests};
        $r{exp_us} = ($r{thread_ticks} // 0) / $tck * 1e6 / $r{requests};
        # The receiver's CPU (on wrk's CPU) per span it received; runs
        # from before bench/run recorded it have none.
        $r{recv_us} = $r{recv_ticks} / $tck * 1e6 / $r{spans}
            if defined $r{recv_ticks} && $r{recv_ticks} =~ /^\d+$/ && ($r{spans} // '') =~ /^\d+$/ && $r{spans} > 0;
        push @rs, \%r;
        push @{ $byc{$r{workload}}{$r{cfg}} }, \%r;
    }
    close $fh;
    for my $wl (keys %byc) {
        for my $c (keys %{ $byc{$wl} }) {
            my $g = $byc{$wl}{$c};
            my %s = (
                rps  => median(map { $_->{rps} } @$g), rmin => min(map { $_->{rps} } @$g), rmax => max(map { $_->{rps} } @$g),
                cpu  => median(map { $_->{cpu_us} } @$g), cmin => min(map { $_->{cpu_us} } @$g), cmax => max(map { $_->{cpu_us} } @$g),
                exp  => median(map { $_->{exp_us} } @$g),
                recv => (grep { defined $_->{recv_us} } @$g) ? median(map { $_->{recv_us} // () } @$g) : undef,
                rss  => median(map { $_->{rss_kb} } @$g),
                rssmax => max(map { $_->{rss_max} =~ /^\d+$/ ? $_->{rss_max} : $_->{rss_kb} } @$g),
                reqs => sum(map { $_->{requests} } @$g), served => sum(map { $_->{served} } @$g),
                errors => sum(map { $_->{errors} } @$g), drop_lines => sum(map { $_->{drop_lines} } @$g),
                n => scalar @$g,
            );
            if ($g->[0]{expected} ne '-') {
                $s{spans} = sum(map { $_->{spans} } @$g);
                $s{expected} = sum(map { $_->{expected} } @$g);
                $s{short_runs} = scalar grep { $_->{spans} < $_->{expected} } @$g;
            }
            $sum{$wl}{$c} = \%s;
        }
    }
    return (\@rs, \%sum);
}

sub target_row {
    my ($name, $ok, $detail, $result) = @_;
    return sprintf("| %s | %s | %s |", $name, $result // ($ok ? 'met' : '**not met**'), $detail);
}

# The B/A, C/A, D/A, E/A and no-drop rows of a summary.
sub ratio_targets {
    my ($S, $wls) = @_;
    my @out;
    for my $t ([B => 0.99], [C => 0.97], [D => 0.95], [E => 0.97]) {
        my ($c, $min) = @$t;
        my (@parts, @met, @missed);
        for my $wl (@$wls) {
            my $r = ratio($S, $wl, $c); next unless defined $r;
            push @{ $r >= $min ? \@met : \@missed }, $wl;
            push @parts, sprintf("%s %.3f (CPU-based %.3f, %+.2f µs/req)", $wl, $r, cpu_ratio($S, $wl, $c),
                                 $S->{$wl}{$c}{cpu} - $S->{$wl}{A}{cpu});
        }
        push @out, target_row("$c/A ≥ $min (requests/s, medians)", !@missed, join('; ', @parts),
                              @missed && @met ? 'met for ' . join(', ', @met) . '; **not met** for ' . join(', ', @missed) : undef);
    }
    my @parts; my $ok = 1;
    for my $c (qw(C D W M)) {
        for my $wl (@$wls) {
            my $s = $S->{$wl}{$c} or next;
            next unless defined $s->{spans};
            $ok &&= $s->{spans} >= $s->{expected} && !$s->{drop_lines};
            push @parts, sprintf("%s %s %d/%d%s", $c, $wl, $s->{spans}, $s->{expected},
                                 $s->{drop_lines} ? " ($s->{drop_lines} drop lines)" : '');
        }
    }
    push @out, target_row('No span dropped in C, D, W and M (received / served × spans per request)', $ok, join('; ', @parts));
    return @out;
}
sub f { my ($fmt, $v) = @_; return defined $v ? sprintf($fmt, $v) : '-' }

# X − Y in CPU µs per request on a workload: the difference of the medians
# (as in the tables), and the median and range of the differences round by
# round (X and Y run one after the other in each round).
sub delta {
    my ($S, $rows, $wl, $x, $y) = @_;
    my ($sx, $sy) = ($S->{$wl}{$x}, $S->{$wl}{$y});
    return undef unless $sx && $sy;
    my (%by, @d);
    $by{$_->{cfg}}{$_->{round}} = $_->{cpu_us} for grep { $_->{workload} eq $wl } @$rows;
    for my $r (sort { $a <=> $b } keys %{ $by{$x} }) {
        push @d, $by{$x}{$r} - $by{$y}{$r} if defined $by{$y}{$r};
    }
    # Interference from outside (other tenants of the VM) only adds time:
    # each one's quietest round, differenced, is reported beside the medians.
    my @bx = values %{ $by{$x} }; my @by = values %{ $by{$y} };
    return { d => $sx->{cpu} - $sy->{cpu}, rel => $sx->{cpu} / $sy->{cpu} - 1,
             pmed => median(@d), pmin => min(@d), pmax => max(@d), n => scalar @d,
             best => @bx && @by ? min(@bx) - min(@by) : undef,
             x => $sx->{cpu}, y => $sy->{cpu} };
}
sub delta_text {
    my ($d, $x, $y) = @_;
    return sprintf("%s − %s = **%+.3f µs** (%.2f − %.2f; %+.1f%%); round by round %+.2f (%+.2f to %+.2f, %d rounds); quietest rounds %+.2f",
                   $x, $y, $d->{d}, $d->{x}, $d->{y}, 100 * $d->{rel}, $d->{pmed} // 0, $d->{pmin} // 0, $d->{pmax} // 0, $d->{n}, $d->{best} // 0);
}
# A target row on an absolute limit (µs) or a relative one (fraction).
sub limit_row {
    my ($name, $d, $x, $y, %o) = @_;
    return "| $name | not measured | $x or $y missing from this run |" unless $d;
    my $ok = defined $o{abs} ? $d->{d} <= $o{abs} : $d->{rel} <= $o{rel};
    # A row with no target of its own still says where it stands against the limit.
    return target_row($name, $ok, delta_text($d, $x, $y),
                      $o{reported} ? ($ok ? 'reported: within the limit' : 'reported: **over the limit**') : undef);
}

# ---- micro-benchmarks -----------------------------------------------------------
sub parse_kv_lines {
    my @out;
    for (split /\n/, shift) {
        next if /^#/ || !/=/;
        push @out, { map { split /=/, $_, 2 } split ' ' };
    }
    return @out;
}
my @sc256 = parse_kv_lines(slurp("$W/sample_cost_256.txt"));
my @sc64  = parse_kv_lines(slurp("$W/sample_cost_64.txt"));
my %sc64 = map { $_->{depth} => $_ } @sc64;
my @enc = parse_kv_lines(slurp("$W/encode.txt"));
my ($post) = parse_kv_lines(slurp("$W/post.txt") =~ s/^post //mgr);
my %verify = map { /^([^=]+)=(.*)$/ ? ($1, $2) : () } split ' ', slurp("$W/verify.txt");
my %hang = map { /^([^=]+)=(.*)$/ ? ($1, $2) : () } split ' ', slurp("$W/hang.txt");

# ---- targets ---------------------------------------------------------------------
my @targets;
sub target { push @targets, target_row(@_) }
push @targets, ratio_targets(\%S, \@wls);
# The control API works off the request path: F (D with an otel_api
# location) may not cost more per request than D beyond noise.
{
    my (@parts, $ok);
    $ok = 1;
    for my $wl (@wls) {
        my ($d, $fx) = ($S{$wl}{D}, $S{$wl}{F});
        next unless $d && $fx;
        my $delta = $fx->{cpu} - $d->{cpu};
        my $noise = $d->{cmax} - $d->{cmin};
        $ok &&= $delta <= 0.05 || $delta <= $noise;
        push @parts, sprintf("%s %+.3f µs/req (D's own spread %.2f µs/req; F/D requests/s %.3f)",
                             $wl, $delta, $noise, $fx->{rps} / $d->{rps});
    }
    target('F − D ≤ 0.05 µs/req or within D\'s spread (the control API adds nothing to the request path)', $ok,
           join('; ', @parts)) if @parts;
}
my ($e_first, $e_last, $e_min, $e_max, @e_series);
{
    # The E instance lives through every workload: its RSS after each run,
    # in the order of the runs.
    my @er = grep { $_->{cfg} eq 'E' } @rows;
    @e_series = map { $_->{rss_kb} } @er;
    if (@e_series) {
        ($e_first, $e_last) = ($e_series[0], $e_series[-1]);
        $e_min = min(@e_series); $e_max = max(@e_series);
        my @inrun = map { ($_->{rss_max} =~ /^\d+$/ ? $_->{rss_max} : 0) - ($_->{rss_min} =~ /^\d+$/ ? $_->{rss_min} : 0) } @er[1 .. $#er];
        my $growth = $e_max - $e_first;
        my ($dq, $dx) = split ' ', ($meta{e_dropped} // '0 0');
        my $ok = $growth <= 0.02 * $e_first;
        target('E: RSS flat while the collector is down (after every E run within 2% of the first)', $ok,
               sprintf("%d runs, %.1f minutes: RSS after the first %.1f MiB, then %.1f–%.1f MiB, last %.1f MiB (%+.1f%% at most); largest rise within a run after the first: %d kB; meanwhile %d spans dropped (queue full) and %d (export failed)",
                       scalar @e_series, ($meta{elapsed} // 0) / 60, $e_first / 1024, $e_min / 1024, $e_max / 1024, $e_last / 1024,
                       100 * $growth / $e_first, max(@inrun) // 0, $dq, $dx));
    }
}
{
    my ($worst) = sort { $b->{cost_med} <=> $a->{cost_med} } @sc64;
    if ($worst) {
        my $pct = 100 * $worst->{med} / 1e9 * 100;
        target('Sampler under 1% of a busy worker at 100 Hz', $pct < 1,
               sprintf("worst depth (max_depth 64): handler %d ns median, whole signal incl. raise() %d ns → %.3f%% of one CPU at 100 Hz",
                       $worst->{cost_med}, $worst->{med}, $pct));
    }
}
if (%hang) {
    target('`nginx -s quit` finishes while the collector hangs (shutdown_timeout 2s + slack ≤ 3.5 s)',
           $hang{done} eq 'yes' && $hang{secs} <= 3.5,
           sprintf("%s s (%s); the collector held %s export request(s)", $hang{secs},
                   $hang{done} eq 'yes' ? 'finished' : 'did NOT finish within 20 s', $hang{held}));
}

# ---- Apache httpd (bench/run_apache) -------------------------------------------
# Only when RUN_DIR/apache/results.tsv exists: its own rows, summaries and
# targets, kept apart from the nginx ones above.
my $AW = "$W/apache";
my $apache_run = -f "$AW/results.tsv";
my (%ameta, @arows, %aS, @awls, @atargets, @ae_series, @mpms, %mrows, %mS, %mwls);
my %adesc = (
    A => 'no module',
    B => 'module loaded, `OtelTrace Off`',
    C => 'tracing, collector answers 200',
    D => 'C + profiling at 100 Hz',
    E => 'C, collector down (refused)',
    W => 'D + wall-clock profiling (`OtelProfilingTypes cpu wall`, 100 Hz)',
    M => 'D + memory profiling (`OtelProfilingTypes cpu memory`, 512k interval)',
);
my %awdesc = (
    r200   => '`Redirect 200` + `ErrorDocument 200 "ok"` (`GET /r200`)',
    static => '1 KiB static file (`GET /static/1k.bin`, `EnableSendfile On`)',
    proxy  => 'proxied to a local backend (`GET /proxy/x`, mod_proxy_http to a second port of the same apache2, pooled keep-alive connections, answered as r200)',
);

sub atarget { push @atargets, target_row(@_) }

if ($apache_run) {
    %ameta = map { /^([^=]+)=(.*)$/ ? ($1, $2) : () } split /\n/, slurp("$AW/meta.txt");
    my ($rs, $sm) = load_results("$AW/results.tsv", $ameta{clk_tck} || 100, 'event');
    @arows = @$rs; %aS = %$sm;
    @awls = grep { $aS{$_} } split ' ', ($ameta{workloads} || 'r200 static proxy');
    # The prefork and worker MPMs (fewer configurations, workloads, rounds).
    for my $m (split ' ', $ameta{mpms} // '') {
        my ($r2, $s2) = load_results("$AW/results.tsv", $ameta{clk_tck} || 100, $m);
        next unless @$r2;
        push @mpms, $m; $mrows{$m} = $r2; $mS{$m} = $s2;
        $mwls{$m} = [ grep { $s2->{$_} } split ' ', ($ameta{workloads} || 'r200 static proxy') ];
    }

    push @atargets, ratio_targets(\%aS, \@awls);
    my @er = grep { $_->{cfg} eq 'E' } @arows;
    @ae_series = map { $_->{rss_kb} } @er;
    if (@ae_series) {
        my ($first, $last) = ($ae_series[0], $ae_series[-1]);
        my ($lo, $hi) = (min(@ae_series), max(@ae_series));
        my @inrun = map { ($_->{rss_max} =~ /^\d+$/ ? $_->{rss_max} : 0) - ($_->{rss_min} =~ /^\d+$/ ? $_->{rss_min} : 0) } @er[1 .. $#er];
        # httpd itself grows with the workload (mod_proxy's connection
        # pools, more threads used): A's RSS after the same run is
        # subtracted, so what is measured is the module's part.
        my %a_rss = map { ("$_->{workload}/$_->{round}" => $_->{rss_kb}) } grep { $_->{cfg} eq 'A' } @arows;
        my @diff = map { defined $a_rss{"$_->{workload}/$_->{round}"} ? $_->{rss_kb} - $a_rss{"$_->{workload}/$_->{round}"} : () } @er;
        my $growth = @diff ? max(@diff) - $diff[0] : $hi - $first;
        my ($dq, $dx) = split ' ', ($ameta{e_dropped} // '0 0');
        atarget('E: RSS flat while the collector is down (E minus A after the same run: within 2% of E\'s first RSS throughout)', $growth <= 0.02 * $first,
                sprintf("%d runs, %.1f minutes: E's RSS after the first %.1f MiB, then %.1f–%.1f MiB, last %.1f MiB; E minus A %.1f MiB after the first, %.1f–%.1f MiB (%+.1f%% of E's first at most); largest rise within a run after the first: %d kB; meanwhile %d spans dropped (queue full) and %d (export failed)",
                        scalar @ae_series, ($ameta{elapsed} // 0) / 60, $first / 1024, $lo / 1024, $hi / 1024, $last / 1024,
                        (@diff ? ($diff[0] / 1024, min(@diff) / 1024, max(@diff) / 1024) : (0, 0, 0)),
                        100 * $growth / $first, max(@inrun) // 0, $dq, $dx));
    }
}


# ---- issue 29 and issue 28: their targets, every one reported met or not ----------
my $serve_text = slurp($out);
my ($serve_section_now) = $serve_text =~ /(<!-- bench\/serve: begin.*?<!-- bench\/serve: end -->)/s;
my %alloc;
{
    my $t = slurp("$W/alloc_cost.txt");
    ($alloc{off}) = $t =~ /unhooked\s+([\d.]+)/;
    ($alloc{on}, $alloc{per_call}) = $t =~ /hooked, 512 KiB interval\s+([\d.]+)\s+\(\+?(-?[\d.]+) ns per call\)/;
    ($alloc{sampled}, $alloc{nsampled}) = $t =~ /sampled\s+([\d.]+)\s+\((\d+) sampled in all\)/;
    ($alloc{pairs}) = $t =~ /best of (\d+ x \d+)/;
}
my %clock;
{
    my $t = -e "$W/clock_cost.txt" ? slurp("$W/clock_cost.txt") : '';
    ($clock{gettime}) = $t =~ /^clock_gettime ([\d.]+) ns per read/m;
    ($clock{tsc}) = $t =~ /^tsc ([\d.]+) ns per read/m;
    ($clock{rounds}, $clock{chosen}) = $t =~ /best of (\d+ rounds of \d+ reads); sp_clock_init\(\) here chooses (\S+)/;
}
my (@i29, @i28);
{
    my $dl = sub { my ($S, $rows, $wl, $x, $y) = @_; delta($S, $rows, $wl, $x, $y) };
    for my $wl (@wls) {
        my $rep = $wl ne 'r200';
        my $tag = $rep ? " (reported beside r200)" : '';
        push @i29, limit_row("nginx $wl: tracing over http/protobuf, C − A ≤ +0.20 µs$tag", $dl->(\%S, \@rows, $wl, 'C', 'A'), 'C', 'A', abs => 0.20, reported => $rep);
        push @i29, limit_row("nginx $wl: tracing over gRPC, G − A ≤ +0.30 µs$tag", $dl->(\%S, \@rows, $wl, 'G', 'A'), 'G', 'A', abs => 0.30, reported => $rep);
        push @i29, limit_row("nginx $wl: profiling at 100 Hz over tracing, D − C ≤ +0.05 µs$tag", $dl->(\%S, \@rows, $wl, 'D', 'C'), 'D', 'C', abs => 0.05, reported => $rep);
    }
    if ($apache_run) {
        for my $wl (@awls) {
            my $rep = $wl eq 'proxy';
            my $tag = $rep ? " (reported)" : '';
            push @i29, limit_row("Apache event $wl: tracing, C − A ≤ +0.6 µs$tag", $dl->(\%aS, \@arows, $wl, 'C', 'A'), 'C', 'A', abs => 0.6, reported => $rep);
            push @i29, limit_row("Apache event $wl: profiling over tracing, D − C ≤ +0.2 µs$tag", $dl->(\%aS, \@arows, $wl, 'D', 'C'), 'D', 'C', abs => 0.2, reported => $rep);
        }
        for my $m (@mpms) {
            for my $wl (@{ $mwls{$m} }) {
                push @i29, limit_row("Apache $m $wl: tracing, C − A (reported; event's limit +0.6 µs)", $dl->($mS{$m}, $mrows{$m}, $wl, 'C', 'A'), 'C', 'A', abs => 0.6, reported => 1);
                push @i29, limit_row("Apache $m $wl: profiling over tracing, D − C (reported; event's limit +0.2 µs)", $dl->($mS{$m}, $mrows{$m}, $wl, 'D', 'C'), 'D', 'C', abs => 0.2, reported => 1);
            }
        }
    } else {
        push @i29, "| Apache event, prefork, worker | not measured | bench/run_apache did not run (BENCH_APACHE=0) or failed |";
    }
    # spanprof serve (bench/serve; make bench runs it after bench/run).
    if ($serve_section_now) {
        my ($spans) = $serve_section_now =~ /without HTTP, ([\d,]+) spans stored/;
        my ($date) = $serve_section_now =~ /Measured (\S+) on this machine/;
        my ($om, $ow) = $serve_section_now =~ /\| Open a trace \(median \/ worst of \d+\) \| ([\d.]+) \/ ([\d.]+) ms/;
        my ($sm, $sw) = $serve_section_now =~ /\| Slowest-first search, 20 traces \(median \/ worst of \d+\) \| ([\d.]+) \/ ([\d.]+) ms/;
        (my $n = $spans // 0) =~ s/,//g;
        my $at10m = $n >= 9_900_000;   # serve_bench stores whole batches: 9,999,872 for 10M
        my $where = sprintf("%s spans stored, bench/serve of %s (its section below)", $spans // '?', $date // '?');
        for my $t (['spanprof serve: opening a trace ≤ 1 ms at 10M spans', $om, $ow, 1],
                   ['spanprof serve: a search listing 20 traces ≤ 10 ms at 10M spans', $sm, $sw, 10]) {
            my ($name, $med, $worst, $lim) = @$t;
            if (!defined $med) { push @i29, "| $name | not measured | no bench/serve numbers in $out |"; next }
            push @i29, target_row($name, $med <= $lim,
                sprintf("median **%.3f ms**, worst %.3f ms; %s", $med, $worst, $where),
                $at10m ? undef : "not checked: measured at $spans spans, not 10M (SERVE_BENCH_SPANS)");
        }
    } else {
        push @i29, "| spanprof serve: opening a trace ≤ 1 ms and a 20-trace search ≤ 10 ms at 10M spans | not measured | no bench/serve section in $out yet: `make bench` runs bench/serve after bench/run, then this report again |";
    }

    # Issue 28: W and M against D (memory/wall off, CPU profiling on) and C
    # (no profiling).
    my @sets = ([ 'nginx', \%S, \@rows, \@wls ]);
    push @sets, [ 'Apache event', \%aS, \@arows, \@awls ] if $apache_run;
    for my $set (@sets) {
        my ($srv, $Sx, $rx, $wx) = @$set;
        for my $wl (@$wx) {
            push @i28, limit_row("$srv $wl: memory profiling on, M within 3% of D (memory off)", $dl->($Sx, $rx, $wl, 'M', 'D'), 'M', 'D', rel => 0.03);
            push @i28, limit_row("$srv $wl: memory profiling on, M within 3% of C (profiling off)", $dl->($Sx, $rx, $wl, 'M', 'C'), 'M', 'C', rel => 0.03);
            push @i28, limit_row("$srv $wl: wall-clock profiling on, W − D (reported; 3% shown as for memory)", $dl->($Sx, $rx, $wl, 'W', 'D'), 'W', 'D', rel => 0.03, reported => 1);
            push @i28, limit_row("$srv $wl: wall-clock profiling on, W − C (reported)", $dl->($Sx, $rx, $wl, 'W', 'C'), 'W', 'C', rel => 0.03, reported => 1);
            my ($m, $d) = ($Sx->{$wl}{M}, $Sx->{$wl}{D});
            push @i28, sprintf("| %s %s: RSS with memory profiling (M) against D | reported | M %.1f MiB, D %.1f MiB after a run (medians; %+.1f MiB); largest seen M %.1f, D %.1f MiB |",
                               $srv, $wl, $m->{rss} / 1024, $d->{rss} / 1024, ($m->{rss} - $d->{rss}) / 1024, $m->{rssmax} / 1024, $d->{rssmax} / 1024)
                if $m && $d;
        }
    }
    if (defined $alloc{per_call}) {
        push @i28, target_row('An allocation that is not sampled costs ≤ 5 ns (bench/alloc_cost: malloc+free pairs through a GOT, hooks installed at 512 KiB against none)',
                              $alloc{per_call} <= 5,
                              sprintf("**%+.2f ns per call** (pair %.2f ns hooked, %.2f ns unhooked; best of %s pairs); every allocation sampled: %.0f ns per 64 KiB pair", $alloc{per_call}, $alloc{on}, $alloc{off}, $alloc{pairs} // '?', $alloc{sampled} // 0));
    } else {
        push @i28, "| An allocation that is not sampled costs ≤ 5 ns | not measured | bench/alloc_cost did not run or failed |";
    }
}

# One configuration's row of a throughput table (s: its summary, a: A's).
sub config_row {
    my ($c, $desc, $s, $a, $r) = @_;
    return sprintf("| %s: %s | %.0f | (%.0f–%.0f) | %s | %.2f (%.2f–%.2f) | %s | %s | %.1f MiB; %.1f MiB | %s | %d |",
        $c, $desc, $s->{rps}, $s->{rmin}, $s->{rmax}, f('%.3f', $r),
        $s->{cpu}, $s->{cmin}, $s->{cmax},
        $c eq 'A' ? '' : sprintf('%+.2f', $s->{cpu} - $a->{cpu}),
        $s->{exp} > 0 ? sprintf('%.2f', $s->{exp}) : '-',
        $s->{rss} / 1024, $s->{rssmax} / 1024,
        defined $s->{spans} ? sprintf('%d / %d%s', $s->{spans}, $s->{expected},
                                      $s->{drop_lines} ? " ($s->{drop_lines} drop lines)" : '')
                            : ($c eq 'E' ? 'collector down' : '-'),
        $s->{errors});
}

# ---- write -----------------------------------------------------------------------
my @md;
sub p { push @md, @_ }
my (@TS_SECTION, @TS_SUM);   # bench/time_split: its section, its sums

p "# Benchmarks", "",
  "Measured by `make bench` (`bench/run`) on $meta{date}; everything in this file except the",
  "Analysis section is rewritten by each run (the analysis is `bench/analysis.md`). Numbers",
  "from a 2-core VM are noisy: runs are interleaved round by round and reported as medians",
  "with their spread, and the worker's CPU time per request is given beside requests/s.", "";

p "## Targets", "", "| Target | Result | Numbers |", "| --- | --- | --- |", @targets, "";
p "Ratios are medians of requests/s of X over A on the same workload. \"CPU-based\" is the",
  "ratio of the worker's CPU per request (A over X): what throughput would be if the worker",
  "alone were the bottleneck; it is steadier when wrk shares the machine.", "";
p "For scale (from the issue, return 200, one worker, `wrk -t1 -c32`): nginx-otel reached",
  "C/A 0.77 (+2.4 µs of worker CPU per request), 0.86 with its collector down, and did not",
  "finish `nginx -s quit` while its collector hung.", "";

# bench/time_split (make bench-time-split): the server's CPU per request
# sampled by shared object and function, each configuration against its
# base (C and G against A, D against C): first a summary by kind of code
# against issue 29's targets, then each pair's tables.
{
    my %target = ('apache C - A' => 0.6, 'apache D - C' => 0.2,
                  'nginx C - A' => 0.2, 'nginx D - C' => 0.05, 'nginx G - A' => 0.3);
    my @ts;
    for my $s ('apache', 'nginx') {
        my $name = $s eq 'apache' ? 'Apache (event MPM)' : 'nginx';
        my $r = slurp("$W/../time_split/$s-r200/report.md");
        my $failed = slurp("$W/../time_split-$s.failed");
        if ($failed ne '') { chomp $failed; push @ts, "$s: not measured in this run ($failed).", ""; next }
        next if $r eq '';
        # ns a request by kind of code, per configuration (mean of rounds)
        my $ns = ns_by_kind("$W/../time_split/$s-r200/samples.tsv") || {};
        for my $line (split /\n/, $r) {
            if ($line =~ /^\S+ r200, (\w) against (\w), /) {
                my ($y, $x) = ($1, $2);
                push @ts, "#### $name r200: $y − $x";
                my $t = $target{"$s $y - $x"};
                if (my $sum = pair_sums($ns, $y, $x)) {
                    my $d = sub { sprintf '%+.0f', $sum->{ $_[0] } };
                    push @TS_SUM, sprintf '| %s r200 %s − %s | %s | %s | %s | %s | %s | **%+.0f** | %s | %s | %s |',
                        $name, $y, $x, defined $t ? sprintf('≤ %.0f', $t * 1000) : '',
                        $d->('module'), $d->('transport'), $d->('clock'), $d->('libc'), $sum->{user},
                        $d->('server'), $d->('kernel'), $d->('total');
                }
                next;
            }
            push @ts, $line;
        }
        push @ts, "";
    }
    if (@ts) {
        @TS_SECTION = ("## Where a traced request's time goes, sampled", "",
          "`bench/time_split` (run by make bench after bench/run, on its configurations): A, C, D (and",
          "G for nginx) run side by side on CPU 1, warmed, and in each of 3 interleaved rounds of 12 s",
          "CPU 1 is sampled by `perf record -e cpu-clock -F 2000` while wrk loads it from CPU 0. A row is",
          "the server's samples in that shared object or function × 500 µs / the requests wrk counted,",
          "the mean of the rounds: time, where callgrind counts instructions (a cache miss counts as one).",
          "The module's rows are what spanprof's own code costs a request; the kernel's row moves by",
          "microseconds between rounds (in a VM its samples land where interrupts are enabled again), so",
          "the difference of the totals is no more exact than the tables above. The sums by kind of code",
          "are in the Issue 29 section.", "", @ts);
    }
}


p "## Issue 29: the request path near its limit", "",
  "Worker (Apache: child) CPU per request added by each step, in this run: the difference of",
  "the medians of the tables below (met or not is decided on it), and the differences round by",
  "round (X and Y run one after the other in each round: their median and range show how much",
  "of a difference the machine's noise makes), and the difference of each one's quietest round",
  "(what runs beside the benchmark on a shared VM only adds time, so the lowest rounds are the",
  "least disturbed; reported, not judged). Static and proxied workloads are reported beside",
  "`return 200`, for which the targets are set; the prefork and worker MPMs against event's limits.",
  "Where each nanosecond goes: the request path and the gRPC path part by part, after the Analysis",
  "(`bench/request_path.md`, `bench/grpc_path.md`).", "",
  "| Target | Result | Numbers |", "| --- | --- | --- |", @i29, "";
if (@TS_SUM) {
    p "The same steps sampled in time (`bench/time_split`, this run; the section \"Where a traced",
      "request's time goes, sampled\" has each pair by function): ns per request, each configuration",
      "against its base. The module's code (with ld.so's TLS look-ups it makes and libunwind's",
      "unwinding in D), libcurl and nghttp2 (the transport), the clock reads (vDSO and libc's",
      "wrapper), libc's other functions (copies, allocation), and their sum: spanprof's user space,",
      "which moves by about ±10% from run to run where the medians above move by more than the",
      "targets. Then the server's own code (nginx, or apache2 with APR, its modules and libc's lock",
      "and futex calls: the event MPM's queue), the kernel, and the total. The server's and the",
      "kernel's rows hold no spanprof code but the exporter's sends (in the kernel's row, with the",
      "loopback receiver's half of each TCP transfer): they move with how the load falls on the",
      "CPU, round by round.", "",
      "| pair | target | module | transport | clock | libc | **user space** | server | kernel | total |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", @TS_SUM, "";
}

p "## Issue 28: wall-clock and memory profiling", "",
  "W is D with `otel_profiling_types cpu wall;` (`OtelProfilingTypes cpu wall`), wall clock at",
  ($meta{wall_rate} // 100) . " Hz; M is D with `otel_profiling_types cpu memory;` (`OtelProfilingTypes cpu memory`),",
  "a mean interval of " . ($meta{memory_interval} // '512k') . " between sampled allocations. Both trace and profile CPU at",
  "100 Hz as D does, so M against D is what memory profiling adds, M against C what all of",
  "profiling adds. Same runs as the tables below (interleaved with every other configuration).", "",
  "| Target | Result | Numbers |", "| --- | --- | --- |", @i28, "";

p "## Machine and versions", "",
  "| | |", "| --- | --- |",
  "| CPUs | $meta{nproc} × $meta{cpu} |",
  "| Memory | $meta{mem} |",
  "| Kernel | $meta{kernel} |",
  "| nginx | $meta{nginx} (Debian's `/usr/sbin/nginx`) |",
  "| wrk | $meta{wrk} |",
  "| gcc | $meta{gcc} |",
  "| libcurl | $meta{libcurl} |",
  "| spanprof | git $meta{git} |",
  "| Pinning | $meta{pinned} |",
  "| Apache module | " . ($apache_run ? 'build/apache/mod_spanprof.so, benchmarked below ([Apache httpd (event MPM)](#apache-httpd-event-mpm))'
                          : $meta{apache} eq 'present' ? 'build/apache/mod_spanprof.so present (not benchmarked in this run)'
                          : 'pending: build/apache/mod_spanprof.so did not exist') . " |", "";

p "## How it was run", "",
  "```sh",
  "make bench                      # bench/run, then bench/time_split, bench/keep, bench/cli, bench/serve: about 50 minutes",
  ($meta{estimate} ? "                                # this time: estimated $meta{estimate} min for " . ($meta{estimate_of} // "bench/run") . "; bench/run took " . sprintf('%.0f', ($meta{run_elapsed} // 0) / 60) . " min" : ()),
  "BENCH_FROM_MAKE=1 bench/run --estimate      # make bench's estimate alone (bench/run's without the variable)",
  "BENCH_DURATION=2 BENCH_ROUNDS=2 bench/run   # a quick look",
  "BENCH_APACHE=0 bench/run        # nginx only",
  "bench/run_apache                # Apache only (then bench/report.pl RUN_DIR OUT.md)",
  "bench/amplification [N]         # step 6 alone: the loop of N iterations (200) beside each workload",
  "BENCH_AMPLIFICATION=0 bench/run # without step 6",
  "TIME_SPLIT_CONFIGS=\"A C D\" bench/time_split [apache|nginx] [r200|static|proxy] [ROUNDS]   # the time split alone (after bench/run)",
  "```", "",
  "`bench/run` builds the module (`make nginx`) and the tools (`make bench-tools`:",
  "`build/bench/{receiver,sample_cost,encode_bench}`), then:", "",
  "- starts one nginx instance per configuration, each `worker_processes 1`, with",
  "  `taskset -c 1 /usr/sbin/nginx -p DIR/ -c DIR/nginx.conf -e DIR/error.log` (master and",
  "  worker on CPU 1; the exporter runs on the worker's own event loop, no thread of its own,",
  "  so its CPU is part of the worker's);",
  "- starts `taskset -c 0 build/bench/receiver --port P` for C, D, F, J, W and M: an epoll HTTP/1.1",
  "  server that answers every request `200` with an empty body and counts the spans of",
  "  each `/v1/traces` body by walking the protobuf (checked against `protoc`, below);",
  "  for G `taskset -c 0 /usr/bin/python3 t/grpc_receiver.py --port P --count FILE`, a",
  "  python3-grpcio server answering every `TraceService/Export` OK and counting its spans",
  "  with protobuf's parser on a skeleton of the message (spans kept as bytes; the first and",
  "  every 64th request also parsed whole: a whole parse of every span cost ~5 µs of CPU 0 a",
  "  span, which starved wrk and halved G's request rate);",
  "  E's endpoint is a port where nothing listens;",
  "- for each workload, $meta{rounds} rounds of the configurations run on it (" . join('; ', map { my $w = $_; "$w: " . join(' ', grep { $S{$w}{$_} } @cfgs) } @wls) . ")",
  "  interleaved (" . ($meta{r200_only} ? "$meta{r200_only} on r200 only: what they measure does not depend on the workload, and the whole `make bench` stays within about 45 minutes" : 'every configuration on every workload') . "); each run is",
  ($meta{warmup} ? "  `taskset -c 0 wrk -t1 -c$meta{conns} -d$meta{warmup}s URL` (warm-up, not counted), then" : "  (no warm-up: BENCH_WARMUP=0)"),
  "  `taskset -c 0 wrk -t1 -c$meta{conns} -d$meta{duration}s URL`;",
  "- around each measured run it reads `utime+stime` (fields 14, 15 of `/proc/<worker>/stat`,",
  "  all threads, in $hz Hz ticks) and nginx's `stub_status` request counter; after the run it",
  "  waits until the receiver's count has been still for 0.5 s, then reads them again and",
  "  the worker's `VmRSS` (also sampled every 0.5 s during the run). CPU per request =",
  "  Δ(utime+stime) / requests completed by wrk. Spans expected = requests served by the",
  "  front server (stub_status) × spans per request (2 for the proxy: SERVER and CLIENT);",
  "- exporter settings for C, D, E: `interval $meta{interval}; batch_size $meta{batch_size}; batch_count $meta{batch_count};`",
  "  (a queue of " . ($meta{batch_size} * $meta{batch_count}) . " spans per worker);",
  ($apache_run ? "- then runs `bench/run_apache` (unless `BENCH_APACHE=0`): configurations A–E, W and M and the three workloads against Debian's apache2 (event MPM, one child process), and A, C, D of the prefork and worker MPMs on fewer workloads and rounds; see [Apache httpd (event MPM)](#apache-httpd-event-mpm)."
               : "- then runs `bench/run_apache` for Apache httpd, unless `BENCH_APACHE=0` (it did not run this time)."), "";
p "The configuration of C (the others differ as described: A has no `load_module` and no",
  "`otel_*` lines, B has `otel_trace off`, D adds `otel_profiling_rate 100;",
  "otel_profiling_interval 10s;` and `otel_profiling on;`, E points at a closed port, F is D",
  "with `location = /api { otel_api; }` in the measured server, G is C with `protocol grpc;`",
  "and J C with `protocol http/json;` in `otel_exporter`; W and M are D with",
  "`otel_profiling_types cpu wall; otel_profiling_wall_rate " . ($meta{wall_rate} // 100) . ";` and",
  "`otel_profiling_types cpu memory; otel_profiling_memory_interval " . ($meta{memory_interval} // '512k') . ";`"
  . ((($meta{libcurl} // '') =~ m{(\d+)\.} && $1 < 8)
     ? "; with $meta{libcurl}, before 8.0, G keeps its h2c connection by asking for prior knowledge on a new connection only (curl/curl#10634)):"
     : '):'), "",
  "```nginx", (split /\n/, slurp("$W/nginx-C.conf")), "```", "";

p "## Throughput, CPU and memory", "";
my $secs = $meta{elapsed} // 0;
p "$meta{rounds} rounds × $meta{duration} s per configuration and workload, `wrk -t1 -c$meta{conns}`; the interleaved runs took ${secs} s.", "";
for my $wl (@wls) {
    p "### $wl: $wdesc{$wl}", "",
      "| Config | req/s median | (min–max) | ratio vs A | worker CPU µs/req median (min–max) | Δ vs A | of which other threads | RSS after run (median; max seen) | spans received / expected | errors |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
    for my $c (@cfgs) {
        my $s = $S{$wl}{$c} or next;
        p config_row($c, $desc{$c}, $s, $S{$wl}{A}, ratio(\%S, $wl, $c));
    }
    p "";
}
if (my @rc = grep { defined $S{r200}{$_} && defined $S{r200}{$_}{recv} } @cfgs) {
    p "The receivers' own CPU per span received (r200, median over the rounds; utime+stime of",
      "each receiver process, which shares CPU 0 with wrk, so a costly receiver slows the load and",
      "leaves the worker less busy): " . join(', ', map { sprintf("%s %.2f µs", $_, $S{r200}{$_}{recv}) } @rc) . ".", "";
}
if (@e_series) {
    p "RSS of E's worker after each of its runs, in order (kB): " . join(', ', @e_series) . ".", "";
}
p "Every run, as measured (`build/bench/run/results.tsv`):", "",
  "<details><summary>" . scalar(@rows) . " runs</summary>", "",
  "| workload | config | round | req/s | requests | CPU µs/req | other threads µs/req | RSS kB | spans | expected | errors |",
  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
for my $r (@rows) {
    p sprintf("| %s | %s | %d | %.0f | %d | %.2f | %.2f | %d | %s | %s | %d |", $r->{workload}, $r->{cfg}, $r->{round},
              $r->{rps}, $r->{requests}, $r->{cpu_us}, $r->{exp_us}, $r->{rss_kb},
              $r->{expected} eq '-' ? '-' : $r->{spans}, $r->{expected}, $r->{errors});
}
p "", "</details>", "";

p "## Cost of one profiling sample", "",
  "`build/bench/sample_cost`: the sampler of `common/profile/sampler.c` started as in a worker (thread",
  "registered, a request record attached), then at the bottom of a recursion of d frames",
  "`raise(SIGPROF)` is timed 20000 times (CLOCK_MONOTONIC around each call; raise() runs the",
  "handler before it returns), in blocks of 250 alternating with the same raises into an",
  "empty handler (the baseline: tgkill + signal delivery + sigreturn). Handler cost =",
  "sampled − median(baseline). \"frames\" is what the sample recorded (d + raise, the",
  "measuring function, main and libc's start). `otel_profiling_max_depth` is 64 by default;",
  "the 256 column shows the cost of unwinding everything.", "",
  "| depth d | frames (max 256) | handler median / p99 ns (max_depth 256) | frames (max 64) | handler median / p99 ns (max_depth 64) | whole signal median ns (64) | CPU at 100 Hz (64, whole signal) |",
  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
for my $x (@sc256) {
    my $y = $sc64{$x->{depth}} || {};
    p sprintf("| %d | %d | %d / %d | %s | %s / %s | %s | %s |", $x->{depth}, $x->{frames}, $x->{cost_med}, $x->{cost_p99},
              $y->{frames} // '-', $y->{cost_med} // '-', $y->{cost_p99} // '-', $y->{med} // '-',
              defined $y->{med} ? sprintf('%.4f%%', 100 * $y->{med} / 1e9 * 100) : '-');
}
p "", "Baseline (raise into an empty handler): median " .
  join(', ', map { "$_->{base_med}" } @sc64) . " ns by depth; the same raises after",
  "`sp_sampler_stop()` (its own early return): " . join(', ', map { "$_->{stopped_med}" } @sc64) . " ns.", "";

p "## Encoding alone", "",
  "`build/bench/encode_bench`: SERVER spans built as the module builds them for `GET /r200`",
  "(12 attributes, with a user agent). *build*: building one span straight to the protobuf wire",
  "format and writing it into the span queue, as the request thread does at the log phase",
  "(ids and clock included). *batch*: 8192 queued spans put into requests of `batch` spans (arena",
  "reset and output buffer reused per batch), as the exporter does; the JSON rows are the",
  "file exporter's. 2 s per case, on CPU 1.", "",
  "| Step | thread | batch | spans/s | ns/span | bytes/span |", "| --- | --- | ---: | ---: | ---: | ---: |";
my %enc_name = (build => ['build + queue (`common/trace/span.c`, `span_queue.c`)', 'request'],
                pb    => ['batch, protobuf (`sp_otlp_traces_encode`)', 'exporter'],
                json  => ['batch, JSON (`sp_otlp_traces_encode_json`)', 'exporter']);
for my $e (@enc) {
    my $n = $enc_name{$e->{format}} || [$e->{format}, '?'];
    p sprintf("| %s | %s | %d | %.0f | %.0f | %.0f |", $n->[0], $n->[1],
              $e->{batch}, $e->{spans_per_s}, $e->{ns_per_span}, $e->{bytes_per_span});
}
p "";
if ($post) {
    p "Sending alone: `encode_bench --post` POSTs one encoded batch of $post->{batch} spans",
      "($post->{bytes_per_span} bytes a span) to `build/bench/receiver` again and again through",
      "`common/export/http_client.c` on `common/export/http_loop.c` (libcurl multi, keep-alive), as the exporter",
      "does, on CPU 1 with",
      "the receiver on CPU 0. CPU time of the sending thread per span:",
      sprintf("**%.0f ns user + %.0f ns system = %.0f ns**.", $post->{user_ns_per_span},
              $post->{sys_ns_per_span}, $post->{user_ns_per_span} + $post->{sys_ns_per_span}), "";
}

if (defined $alloc{per_call}) {
    p "## Allocation hooks (memory profiling) per call", "",
      "`build/bench/alloc_cost` (bench/alloc_cost.c): malloc(64)+free pairs from a full-RELRO shared",
      "object, whose GOT the hooks patch, with the hooks in a `dlopen()`ed object as in the modules",
      "(its thread-local counter reached through TLSDESC); unhooked and hooked runs alternate and",
      "each figure is the best of its rounds ($alloc{pairs} pairs); on CPU 1.", "",
      "| Case | ns |", "| --- | ---: |",
      sprintf("| malloc+free pair, hooks not installed | %.2f |", $alloc{off}),
      sprintf("| malloc+free pair, hooks installed, 512 KiB mean interval (almost every call unsampled) | %.2f |", $alloc{on}),
      sprintf("| **added per call, unsampled** (target ≤ 5 ns) | **%+.2f** |", $alloc{per_call}),
      sprintf("| malloc(64 KiB)+free pair, every allocation sampled (unwind, stack, live table, ring; %s sampled) | %.0f |", $alloc{nsampled} // '?', $alloc{sampled} // 0), "";
}

if (defined $clock{gettime}) {
    p "## One timestamp", "",
      "`build/bench/clock_cost` (bench/clock_cost.c): `sp_now_ns()` back to back on CPU 1, reading the",
      "time-stamp counter scaled to CLOCK_REALTIME (common/base/clock.h), and reading",
      "`clock_gettime(CLOCK_REALTIME)`, in alternating rounds; each figure is the best round's",
      "(" . ($clock{rounds} // '?') . "). nginx reads two a traced request (its span's start and end), Apache one",
      "(the end; the start is httpd's `request_time`); the sampler one a sample. The modules use the",
      "counter where the kernel's clocksource is `tsc` (here: " . ($clock{chosen} // '?') . ").", "",
      "| Read | ns |", "| --- | ---: |",
      sprintf("| clock_gettime(CLOCK_REALTIME) (vDSO) | %.2f |", $clock{gettime}),
      (defined $clock{tsc}
       ? (sprintf("| the counter, scaled | %.2f |", $clock{tsc}),
          sprintf("| **saved per read** | **%.2f** |", $clock{gettime} - $clock{tsc}))
       : ("| the counter, scaled | not available here |")), "";
}

p "## Collector that accepts and never answers", "",
  "`perl t/receiver.pl --port P --dir D --script hang --default hang`; nginx as in C (default",
  "`timeout 10s`, `shutdown_timeout 2s`), 2 s of `wrk -t1 -c$meta{conns}` on `/r200`, then",
  "`nginx -s quit`, timed until the master process has exited.", "",
  (%hang ? sprintf("Result: **%s s** (%s); export requests the collector was holding: %s.",
                   $hang{secs}, $hang{done} eq 'yes' ? 'finished' : 'did NOT finish within 20 s, killed', $hang{held}) : 'not run'), "";
my $hl = slurp("$W/hang/spanprof-lines.txt");
if ($hl) { p "Its error log:", "", "```", (map { s/^\S+ \S+ //r } split /\n/, $hl), "```", "" }

p "## Receiver check", "",
  "Before the runs, C's configuration sends 1 s of `/r200` load to `build/bench/receiver --dump`:",
  "the receiver counted $verify{count} spans in $verify{requests} export requests, and",
  "`protoc --decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest` on the same",
  "bodies found $verify{protoc} (" . (($verify{count} // -1) eq ($verify{protoc} // -2) ? 'equal' : '**different**') . ").",
  "Receiver totals at the end: C `$meta{recv_c}`; D `$meta{recv_d}`"
  . ($meta{recv_j} ? "; J `$meta{recv_j}`" : '') . ($meta{recv_g} ? "; G `$meta{recv_g}`" : '')
  . ($meta{recv_w} ? "; W `$meta{recv_w}`" : '') . ($meta{recv_m} ? "; M `$meta{recv_m}`" : '') . ".", "";

my $el = slurp("$W/error-lines.txt");
if ($el) { p "spanprof lines in the error logs (warn and above, last 5 per instance):", "", "```", (map { s/^(\S+) \S+ \S+ /$1 /r } split /\n/, $el), "```", "" }

# ---- Apache httpd section ----------------------------------------------------------
if ($apache_run) {
    my $th = $ameta{threads} // '?';
    p "## Apache httpd (event MPM)", "",
      "Measured by `bench/run_apache` (which `bench/run` runs) on $ameta{date}: $ameta{apache2} (Debian's",
      "`/usr/sbin/apache2`, event MPM) with `build/apache/mod_spanprof.so` (git $ameta{git}), on the",
      "machine above; $ameta{pinned}. The method is the nginx one; what differs is below.", "";
    p "### Apache targets", "", "| Target | Result | Numbers |", "| --- | --- | --- |", @atargets, "";
    p "Ratios are medians of requests/s of X over A on the same workload; \"CPU-based\" is the",
      "ratio of the child process's CPU per request (A over X).", "";

    p "### How the Apache runs were made", "",
      "- one apache2 instance per configuration (and per MPM), event's each with ONE child process",
      "  (`StartServers 1`, `ServerLimit 1`, `ThreadsPerChild $th` = `MaxRequestWorkers`; at",
      "  least twice the connections, as the proxy workload holds a thread for the front request",
      "  and one for the backend's), started with",
      "  `taskset -c 1 /usr/sbin/apache2 -f DIR/httpd.conf -k start` (parent and child on CPU 1; the",
      "  exporter thread is in the child, so it shares that CPU). Modules: mpm_event, authz_core,",
      "  alias, mime, status, proxy, proxy_http, and mod_spanprof in all but A; no access log",
      "  (mod_log_config is not loaded); `KeepAlive On`, `MaxKeepAliveRequests 0`;",
      "- workloads: **r200** is `Redirect 200 /r200` with `ErrorDocument 200 \"ok\"`: mod_alias",
      "  answers at translate_name, with a 2-byte body and no filesystem access (httpd's closest",
      "  to nginx's `return 200`: no handler runs and no file is looked up; the request still",
      "  enters `<Location /r200>`, so the span is `GET /r200` as with nginx); **static** is a",
      "  1 KiB file with `EnableSendfile On`; **proxy** is `ProxyPass` in `<Location /proxy/>` to a",
      "  second port (`<VirtualHost>`) of the same apache2, with `OtelTrace Off` there, answered",
      "  like r200 over mod_proxy's pooled keep-alive connections;",
      "- `build/bench/receiver` for each traced instance (C, D, W, M) on a port of its own; E's endpoint is a closed port;",
      "- for each workload, $ameta{rounds} rounds of the event configurations run on it (" . join('; ', map { my $w = $_; "$w: " . join(' ', grep { $aS{$w}{$_} } @cfgs) } @awls) . ")"
      . (@mpms ? ", and in the first $ameta{mpm_rounds} of those rounds, after them, " . join(' and ', @mpms) . " in $ameta{mpm_configs} on $ameta{mpm_workloads}" : '') . ", interleaved; each run is",
      ($ameta{warmup} ? "  `taskset -c 0 wrk -t1 -c$ameta{conns} -d$ameta{warmup}s URL` (warm-up, not counted), then" : "  (no warm-up: BENCH_WARMUP=0)"),
      "  `taskset -c 0 wrk -t1 -c$ameta{conns} -d$ameta{duration}s URL`;",
      "- CPU: `utime+stime` of `/proc/<child>/stat` (all the child's threads; the parent's",
      "  once-a-second maintenance is not counted) / requests completed by wrk; \"of which",
      "  exporter thread\": `/proc/<child>/task/<tid>/stat` of the exporter thread (the child's",
      "  first thread after its main one: it is started in `child_init`, before the MPM's);",
      "- requests served: mod_status's `Total Accesses` (`/status?auto` on the backend port,",
      "  which is not traced), read before and after each run. httpd counts a request right after",
      "  its `log_transaction` hooks, where the module queues the span, so it is exact and includes",
      "  the requests wrk had in flight when it stopped (which wrk does not count). Minus the",
      "  status request itself; the proxy's count is halved (front and backend requests). It",
      "  needs `ExtendedStatus On` (the default once mod_status is loaded, as in Debian's stock",
      "  apache2), which costs every request, in every configuration, a `times()` call;",
      "- exporter settings for C, D, E: `OtelExporterInterval $ameta{interval}`, `OtelExporterBatchSize $ameta{batch_size}`,",
      "  `OtelExporterBatchCount $ameta{batch_count}` (a queue of " . ($ameta{batch_size} * $ameta{batch_count}) . " spans per child); D adds",
      "  `OtelProfilingRate 100`, `OtelProfilingInterval 10` and `OtelProfiling On`; W adds to D",
      "  `OtelProfilingTypes cpu wall` and `OtelProfilingWallRate " . ($ameta{wall_rate} // 100) . "`, M `OtelProfilingTypes cpu memory`",
      "  and `OtelProfilingMemoryInterval " . ($ameta{memory_interval} // '512k') . "`;",
      (@mpms ? ("- prefork: `LoadModule mpm_prefork_module`, a fixed pool of " . ($ameta{prefork_children} // '?') . " children",
                "  (`StartServers` = `ServerLimit` = `MaxRequestWorkers` = `MaxSpareServers`: none is started",
                "  or stopped while measured; one per connection and 8 more), each with its exporter thread; CPU",
                "  and RSS are the sums over the children (CPU: each thread's run time in ns from",
                "  `/proc/<child>/task/*/schedstat`, as `/proc/<child>/stat` counts whole clock ticks per",
                "  process and a child uses a few ms in a run; \"of which exporter thread\": the children's",
                "  threads other than their main one, summed the same way); worker: `mpm_worker`, one child as event's.") : ()), "";
    p "The configuration of C (the others differ as described: A has no `LoadModule spanprof_module`",
      "and no `Otel*` lines, B has `OtelTrace Off` in the front virtual host, D adds the profiling",
      "lines, E points at a closed port; prefork's and worker's are in `build/bench/run/apache/httpd-prefork-C.conf`",
      "and the like):", "",
      "```apache", (split /\n/, slurp("$AW/httpd-C.conf")), "```", "";

    my $asecs = $ameta{elapsed} // 0;
    p "### Apache throughput, CPU and memory", "",
      "$ameta{rounds} rounds × $ameta{duration} s per configuration and workload, `wrk -t1 -c$ameta{conns}`; the interleaved runs took ${asecs} s.", "";
    for my $wl (@awls) {
        p "#### Apache $wl: $awdesc{$wl}", "",
          "| Config | req/s median | (min–max) | ratio vs A | child CPU µs/req median (min–max) | Δ vs A | of which exporter thread | RSS after run (median; max seen) | spans received / expected | errors |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
        for my $c (@cfgs) {
            my $s = $aS{$wl}{$c} or next;
            p config_row($c, $adesc{$c}, $s, $aS{$wl}{A}, ratio(\%aS, $wl, $c));
        }
        p "";
    }
    p "RSS of E's child after each of its runs, in order (kB): " . join(', ', @ae_series) . "; of A's: " .
      join(', ', map { $_->{rss_kb} } grep { $_->{cfg} eq 'A' } @arows) . ".", "" if @ae_series;
    if (@mpms) {
        p "### Apache prefork and worker MPMs", "",
          "In the same rounds as event's (the first $ameta{mpm_rounds}), $ameta{mpm_configs} only, on $ameta{mpm_workloads}.",
          "Prefork's CPU and RSS are the sums over its " . ($ameta{prefork_children} // '?') . " children (RSS counts shared pages once per child) "
          . "and, where spans are sent, its exporter process, which sends every child's (docs/exporting.md); "
          . "\"of which exporter thread\" is then that process's thread and the profiling children's own.", "";
        for my $m (@mpms) {
            for my $wl (@{ $mwls{$m} }) {
                p "#### Apache $m $wl: $awdesc{$wl}", "",
                  "| Config | req/s median | (min–max) | ratio vs A | " . ($m eq 'prefork' ? 'children' : 'child') . " CPU µs/req median (min–max) | Δ vs A | of which exporter thread | RSS after run (median; max seen) | spans received / expected | errors |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
                for my $c (@cfgs) {
                    my $s = $mS{$m}{$wl}{$c} or next;
                    p config_row($c, $adesc{$c}, $s, $mS{$m}{$wl}{A}, ratio($mS{$m}, $wl, $c));
                }
                p "";
            }
        }
    }
    my @allrows = (@arows, map { @{ $mrows{$_} } } @mpms);
    p "Every run, as measured (`build/bench/run/apache/results.tsv`):", "",
      "<details><summary>" . scalar(@allrows) . " runs</summary>", "",
      "| MPM | workload | config | round | req/s | requests | served | CPU µs/req | exporter thread µs/req | RSS kB | spans | expected | errors |",
      "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
    for my $r (@allrows) {
        p sprintf("| %s | %s | %s | %d | %.0f | %d | %d | %.2f | %.2f | %d | %s | %s | %d |", $r->{mpm} // 'event', $r->{workload}, $r->{cfg}, $r->{round},
                  $r->{rps}, $r->{requests}, $r->{served}, $r->{cpu_us}, $r->{exp_us}, $r->{rss_kb},
                  $r->{expected} eq '-' ? '-' : $r->{spans}, $r->{expected}, $r->{errors});
    }
    p "", "</details>", "";
    p "Receiver totals at the end: " . ($ameta{recv} // join('; ', grep { $_ } map { $ameta{"recv_$_"} ? "$_ `" . $ameta{"recv_$_"} . "`" : '' } qw(c d))) . ".", "";
    my $ael = slurp("$AW/error-lines.txt");
    if ($ael) { p "spanprof lines in the Apache error logs (warn and above, and the exporter's summary at exit; last 5 per instance):", "", "```", (map { s/^(\S+) \[[^\]]*\] /$1 /r } split /\n/, $ael), "```", "" }
}

my $amp = slurp("$W/amplification.txt");
if ($amp ne '') {
    p "## What added work costs beside each workload", "",
      "`bench/amplification` (step 6 of bench/run): A is the server without spanprof (the test module",
      "`t/ngx_burn` or `t/mod_burn` loaded, idle; Apache's configurations are bench/run_apache's); S",
      "adds `spanprof_spin` (Apache: `SpanprofSpin`), a loop of register-only arithmetic after every",
      "request that the server times itself; C traces as C above. The loop is the same work beside",
      "every request, so (S − A) / loop shows what one microsecond of extra work costs in worker",
      "(Apache: child) CPU beside that request on this machine. Wake-ups per request:",
      "`sched:sched_waking` events in the worker or child (perf, a separate 2 s run): nginx waking",
      "wrk, which it found asleep; in Apache also the event MPM's listener and workers waking each other.", "",
      $amp;
}

# bench/time_split's section (computed before the Issue 29 section, which
# shows its summary).
p @TS_SECTION;

my $analysis = slurp("bench/analysis.md");
p "## Analysis", "", ($analysis ne '' ? $analysis : "Not written yet.\n");
# The request path and the gRPC path part by part (callgrind counts,
# written by hand with each round of work on them: issue 29).
for my $part ("bench/request_path.md", "bench/grpc_path.md") {
    my $text = slurp($part);
    p "", $text if $text ne '';
}

# bench/cli's section (the CLI on large inputs) is written by bench/cli
# alone (make bench-cli, run after this by make bench): kept as it is.
my ($cli_section) = slurp($out) =~ /(<!-- bench\/cli: begin.*?<!-- bench\/cli: end -->)/s;
# bench/keep's section likewise (make bench-keep).
my ($keep_section) = slurp($out) =~ /(<!-- bench\/keep: begin.*?<!-- bench\/keep: end -->)/s;
# bench/serve's likewise (make bench-serve).
my ($serve_section) = slurp($out) =~ /(<!-- bench\/serve: begin.*?<!-- bench\/serve: end -->)/s;
push @md, '', $keep_section if defined $keep_section;
push @md, '', $cli_section if defined $cli_section;
push @md, '', $serve_section if defined $serve_section;

open(my $o, '>', $out) or die "$out: $!";
print $o join("\n", @md), "\n";
close $o;

# ---- console summary ---------------------------------------------------------------
sub print_summary {
    my ($S, $wls, $targets, $title) = @_;
    for my $wl (@$wls) {
        printf "\n%-7s %-3s %10s %17s %7s %11s %8s %9s %9s %17s\n", $wl, 'cfg', 'req/s', '(min-max)', 'ratio', 'CPU us/req', 'dCPU', 'exporter', 'RSS MiB', 'spans/expected';
        for my $c (@cfgs) {
            my $s = $S->{$wl}{$c} or next;
            printf "%-7s %-3s %10.0f %17s %7s %11.2f %8s %9.2f %9.1f %17s\n", '', $c, $s->{rps},
                sprintf('(%.0f-%.0f)', $s->{rmin}, $s->{rmax}), f('%.3f', ratio($S, $wl, $c)), $s->{cpu},
                $c eq 'A' ? '' : sprintf('%+.2f', $s->{cpu} - $S->{$wl}{A}{cpu}), $s->{exp}, $s->{rss} / 1024,
                defined $s->{spans} ? "$s->{spans}/$s->{expected}" : '-';
        }
    }
    print "\n$title:\n";
    for (@$targets) { my @f = split /\s*\|\s*/; printf "  %s -- %s: %s\n", $f[2], $f[1], $f[3] }
}
exit 0 if $quiet;
print_summary(\%S, \@wls, \@targets, 'Targets');
if ($apache_run) {
    print "\nApache httpd (event MPM), child process:\n";
    print_summary(\%aS, \@awls, \@atargets, 'Apache targets');
    for my $m (@mpms) {
        print "\nApache httpd ($m MPM):\n";
        print_summary($mS{$m}, $mwls{$m}, [], "Apache $m (reported in the issue 29 table)");
    }
}
for my $t (['Issue 29 targets', \@i29], ['Issue 28 targets', \@i28]) {
    print "\n$t->[0]:\n";
    for (@{ $t->[1] }) { my @f = split /\s*\|\s*/; printf "  %s -- %s: %s\n", $f[2], $f[1], $f[3] // '' }
}
