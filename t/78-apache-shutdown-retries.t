#!/usr/bin/perl
# Retries at shutdown in apache2 children (the exporter's own thread): on
# `apache2 -k graceful-stop` with spans queued and a collector answering 503
# (no Retry-After) the retries keep their exponential backoff within
# OtelExporterShutdownTimeout; with 429 and a Retry-After past that bound
# the retry is not made and the stop does not wait for the bound. What is
# not sent is dropped and said in one log line per child. POST counts and
# spacing come from the receiver's own timestamps.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $SPANS = 100;

# The time of an error log line: [Wed Nov 25 09:36:43.586256 2026] (local).
sub log_time {
    my ($l) = @_;
    my %mon; @mon{qw(Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)} = 0 .. 11;
    my ($b, $d, $h, $m, $s, $us, $y) = $l =~ /^\[\w+ (\w+) +(\d+) (\d+):(\d+):(\d+)\.(\d+) (\d+)\]/
        or return undef;
    return POSIX::mktime($s, $m, $h, $d, $mon{$b}, $y - 1900, 0, 0, -1) + $us / 1e6;
}

sub graceful_stop {
    my ($ap, $timeout) = @_;
    my $master = $ap->master_pid;
    my $t0 = time;
    my ($code, $out) = SpanProf::Apache::_run([$SpanProf::Apache::APACHE,
        '-f', $ap->conf_path, '-k', 'graceful-stop'], timeout => 30);
    die "apache2 -k graceful-stop exited $code: $out\n" if $code != 0;
    wait_until($timeout, sub { !SpanProf::Apache::Server::_alive($master) });
    return time - $t0;
}

sub run_stop {
    my (%o) = @_;
    my $recv = start_receiver(default => $o{answer});
    my $ap = start_apache(mpm => $o{mpm}, receiver => $recv, servers => 1,
        files => { 'htdocs/ok.txt' => "ok\n" }, conf => <<"EOF");
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 60
OtelExporterBatchSize 4
OtelExporterBatchCount 32
OtelExporterShutdownTimeout $o{shutdown}
OtelTrace On
AliasMatch ^/ok %%PREFIX%%/htdocs/ok.txt
EOF
    my $ok = grep { http_get($ap->port, "/ok/$_")->{status} == 200 } 1 .. $SPANS;
    is $ok, $SPANS, "$SPANS requests served";
    ok wait_until(5, sub { $recv->requests >= 1 }), 'the first full batch was posted (and refused)';
    my $t_stop = time;
    my $took = graceful_stop($ap, 15);
    # Each child's exporter on its own: POST times by the pid in the spans.
    my %posts;
    for my $r (grep { $_->{path} eq '/v1/traces' } $recv->requests) {
        my @s = request_spans($recv, $r);
        push @{ $posts{ $s[0]{resource}{'process.pid'} // '?' } }, $r->{time};
    }
    my @drops = grep { /spanprof: dropped/ } split /\n/, $ap->error_log;
    note sprintf('%s %s: %s; stop took %.2f s; %s', $o{mpm}, $o{answer},
        join('; ', map { my $p = $posts{$_}; "child $_: " . scalar(@$p) . ' POSTs, gaps '
            . join(' ', map { sprintf '%.3f', $p->[$_] - $p->[$_ - 1] } 1 .. $#$p) } sort keys %posts),
        $took, join(' | ', @drops));
    is scalar($ap->crash_lines), 0, 'no crash';
    return { recv => $recv, ap => $ap, posts => \%posts, took => $took,
             drops => \@drops, t_stop => $t_stop };
}

# One line per child, together naming every span (none was accepted).
sub drop_lines {
    my ($r, $why) = @_;
    my $children = keys %{ $r->{posts} };
    is scalar @{ $r->{drops} }, $children, "one \"dropped\" line per child ($children)"
        or diag join("\n", @{ $r->{drops} });
    my $n = 0;
    for (@{ $r->{drops} }) {
        $n += $1 if /spanprof: dropped (\d+) spans at shutdown: $why/;
    }
    is $n, $SPANS, "they count the $SPANS spans";
}

my %want = map { $_ => 1 } apache_mpms();
for my $mpm (grep { $want{$_} } qw(event prefork)) {
    subtest "$mpm: 503 without Retry-After: the backoff holds at graceful-stop" => sub {
        my $r = run_stop(mpm => $mpm, answer => '503', shutdown => 1);
        my ($early, $n) = (0, 0);
        for my $p (values %{ $r->{posts} }) {
            $n += @$p;
            for my $i (1 .. $#$p) {
                my $base = 0.25 * 2**($i - 1);
                my $gap = $p->[$i] - $p->[$i - 1];
                $early++, diag sprintf('retry %d after %.3f s (< %.3f)', $i, $gap, $base / 2)
                    if $gap < $base / 2 - 0.01;
            }
        }
        # the child starts its flush a little after graceful-stop; it ends
        # (the drop line) within the bound, and nothing is posted after it
        my @said = map { log_time($_) } @{ $r->{drops} };
        my @last = map { $_->[-1] } values %{ $r->{posts} };
        ok @said && !(grep { !defined $_ || $_ - $r->{t_stop} > 1 + 0.8 } @said),
            sprintf('the flush ended %s s after graceful-stop (bound 1 s)',
                join(', ', map { sprintf '%.2f', ($_ // 0) - $r->{t_stop} } @said));
        ok @said && !(grep { my $l = $_; grep { $l > $_ + 0.01 } @said } @last),
            'no POST after that';
        ok $n >= 2 && $n <= 6 * keys %{ $r->{posts} }, "$n POSTs in all";
        is $early, 0, 'no retry before its backoff (half of 250, 500, 1000 ms at least)';
        ok $r->{took} < 3, sprintf('graceful-stop took %.2f s', $r->{took});
        drop_lines($r, qr/(?:not sent within|the collector's next retry was due after) the shutdown timeout \(1000 ms\)/);
    };
}

subtest 'event: 429 with Retry-After: 30: no retry at graceful-stop, no wait for the bound' => sub {
    plan skip_all => 'event MPM not selected' unless $want{event};
    my $r = run_stop(mpm => 'event', answer => '429:retry-after:30', shutdown => 2);
    my @p = map { @$_ } values %{ $r->{posts} };
    is scalar @p, 1, 'one POST: the one before the stop';
    # apache2's own stop takes about a second more: the exporter's end is
    # when it logged its drop
    my $said = log_time($r->{drops}[0] // '');
    ok defined $said && $said - $r->{t_stop} < 1,
        sprintf('the drop said %.2f s after graceful-stop (the 2 s bound not waited for)',
            ($said // 0) - $r->{t_stop});
    drop_lines($r, qr/the collector's next retry was due after the shutdown timeout \(2000 ms\)/);
};

done_testing;
