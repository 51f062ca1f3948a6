#!/usr/bin/perl
# Memory profiling under apache2 (OtelProfilingTypes cpu memory), every
# MPM: each child hooks its allocations at its start (the parent never
# does) and unhooks before it exits. t/mod_burn's fn=alloc allocates and
# frees 4 MB per request in spanprof_burn_alloc: alloc_space at that stack,
# summed over the children's alloc-*.pb.gz files (decoded with protoc), is
# within 25% of what was allocated, on the requests' spans; fn=leak never
# frees what spanprof_burn_leak allocates: its in-use bytes grow interval
# after interval (event MPM, one child), the freed ones never stay in use.
# Then graceful restarts (which unload and reload every module in the
# parent) under a small load with memory profiling on: no child crashes,
# every request answered.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;
use SpanProf::Profile;

need_apache_module();

my $ALLOC = 'spanprof_burn_alloc';
my $LEAK  = 'spanprof_burn_leak';

my $CONF = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 0.4
OtelProfilingTypes cpu memory
OtelProfilingMemoryInterval 16k
OtelServiceName apache-memory
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF

my $sum = sub { my $i = shift; my $t = 0; $t += $_->{values}[$i] // 0 for @_; $t };

sub files_of {
    my ($dir, $type) = @_;
    opendir(my $dh, $dir) or return ();
    my @f = map { "$dir/$_" } sort grep { /^$type-\d+-\d+\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    return @f;
}

sub span_ids {
    my ($dir) = @_;
    return map { $_->{span_id} => 1 }
        grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.path'} // '') eq '/burn' } file_spans($dir);
}

for my $mpm (apache_mpms()) {
    subtest "$mpm: alloc_space on the span, graceful restarts under load" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'], servers => 1);
        my $port = $ap->port;
        my $N = 8;
        my $failed = 0;
        for (1 .. $N) {
            my $r = http_get($port, '/burn?fn=alloc&kb=4096');
            $failed++ unless $r->{status} == 200 && $r->{content} =~ /^alloc /;
        }
        is $failed, 0, "$N requests of 4 MB answered";

        # graceful restarts under load
        my $load = open(my $fh, '-|') // die "fork: $!";
        if (!$load) {
            my ($ok, $bad) = (0, 0);
            my $t_end = time + 4;
            while (time < $t_end) {
                for my $q ('fn=alloc&kb=256', 'fn=leak&kb=64&max=1024') {
                    my $r = http_get($port, "/burn?$q");
                    $r->{status} == 200 ? $ok++ : $bad++;
                }
            }
            print "$ok $bad\n";
            close STDOUT;
            POSIX::_exit(0);
        }
        sleep 0.5;
        my $restarts = 0;
        for (1 .. 3) {
            my @new = eval { $ap->graceful(20) };
            $restarts++ if @new;
            sleep 0.5;
        }
        my ($ok, $bad) = split ' ', (<$fh> // '0 1');
        close $fh;
        is $restarts, 3, '3 graceful restarts, new children each time';
        ok $ok > 10, "$ok requests answered during the restarts";
        is $bad, 0, 'none failed';
        my $took = $ap->stop;
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
        my @e = grep { /\[[\w:]*(?:alert|emerg|crit)\]/ } split /\n/, $ap->error_log;
        is scalar @e, 0, 'no alert in the error log' or diag join "\n", @e;

        my $out = $ap->prefix . '/out';
        my %sid = span_ids($out);
        my @files = files_of($out, 'alloc');
        ok @files >= 1, scalar(@files) . ' alloc pprof file(s)' or return diag `ls -la $out`;
        my @s;
        for my $f (@files) {
            my $p = eval { read_pprof_file($f) } or next;
            is_deeply pprof_meta($p)->{sample_types}, ['alloc_objects/count', 'alloc_space/bytes'],
                'alloc sample types' if $f eq $files[0];
            push @s, pprof_samples($p);
        }
        # the first $N requests only: the load's requests allocate 256 KB
        # each in the same function, so compare what the spans of the
        # 4 MB requests got
        my @at = grep { has_frame($_, $ALLOC) } @s;
        my %by_span;
        $by_span{ $_->{labels}{span_id} // '' } += $_->{values}[1] for @at;
        my $on_spans = 0;
        $on_spans += $by_span{$_} // 0 for grep { $_ ne '' } keys %sid;
        ok $sum->(1, @at) && $on_spans / $sum->(1, @at) >= 0.9,
            sprintf('%.0f%% of alloc_space at %s on /burn spans', 100 * $on_spans / ($sum->(1, @at) || 1), $ALLOC)
            or diag stacks_summary(\@at, 10);
        # the big requests: the spans with over 1 MB each
        my @big = grep { $_ > 2**20 } values %by_span;
        my $big = 0;
        $big += $_ for @big;
        my $want = $N * 4096 * 1024;
        ok abs($big - $want) <= 0.25 * $want,
            sprintf('alloc_space of the %d spans of 4 MB requests: %.1f MB, allocated %.1f MB (within 25%%)',
                scalar @big, $big / 2**20, $want / 2**20);
    };
}

# the leak, interval after interval, in one child
subtest 'event: in use grows for the leak, not for the freed' => sub {
    my $ap = start_apache(mpm => 'event', conf => $CONF, burn => 1, dirs => ['out'], servers => 1);
    my $port = $ap->port;
    for (1 .. 5) {
        http_get($port, '/burn?fn=alloc&kb=1024');
        http_get($port, '/burn?fn=leak&kb=1024&max=6144');
        sleep 0.45;
    }
    $ap->stop;
    is scalar($ap->crash_lines), 0, 'no crash';
    my $out = $ap->prefix . '/out';
    my %by_pid;
    for my $f (files_of($out, 'inuse')) {
        my ($pid) = $f =~ /-(\d+)\.pb\.gz$/;
        my $p = eval { read_pprof_file($f) } or next;
        my @s = pprof_samples($p);
        push @{ $by_pid{$pid} }, [ $sum->(1, grep { has_frame($_, $LEAK) } @s),
                                   $sum->(1, grep { has_frame($_, $ALLOC) } @s) ];
    }
    my ($pid) = sort { @{ $by_pid{$b} } <=> @{ $by_pid{$a} } } keys %by_pid;
    ok $pid, 'inuse pprof files' or return diag `ls -la $out`;
    my @leak = map { $_->[0] } @{ $by_pid{$pid} };
    my @freed = map { $_->[1] } @{ $by_pid{$pid} };
    diag sprintf('inuse at %s by interval (MB): %s', $LEAK, join ' ', map { sprintf '%.2f', $_ / 2**20 } @leak);
    my $steps = 0;
    $steps += $leak[$_] > $leak[$_ - 1] for 1 .. $#leak;
    ok $steps >= 3, "in-use bytes at $LEAK grew in $steps intervals (5 leaks)";
    ok $leak[-1] >= 0.75 * 5 * 2**20 && $leak[-1] <= 1.25 * 5 * 2**20,
        sprintf('in use at the end: %.1f MB (5 MB leaked)', $leak[-1] / 2**20);
    my ($max_freed) = sort { $b <=> $a } @freed;
    is $max_freed // 0, 0, "nothing in use at $ALLOC";
};

done_testing;
