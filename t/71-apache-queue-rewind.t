#!/usr/bin/perl
# The span queue of an Apache child goes back to the start of its buffer
# (a rewind, record_ring.h) under real traffic, and only while the exporter
# keeps up: apache2 (event MPM, one child of 8 threads), batches of 64
# spans in a 16 MiB queue (rewinding 128 KiB in), keep-alive load from ab
# to a real receiver. Paced rounds (each sent once the last is exported): the
# status API counts rewinds (queue_rewinds, the same in JSON and
# Prometheus) and the queue's buffer is resident only at its start (its
# mapping's Rss in /proc/<child>/smaps, against the bytes that went through
# it). Then a burst faster than the exporter: nothing dropped. Every span
# arrives once (decoded by protoc) and the counters agree.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();
my ($mpm) = grep { $_ eq 'event' } apache_mpms();
plan skip_all => 'event MPM not tested' unless $mpm;
plan skip_all => 'ab (apache2-utils) not installed' unless -x '/usr/bin/ab';

my ($ROUNDS, $PACED, $BURST) = (12, 300, 2000);
my $QUEUE = 16 << 20;    # 64 x 256 spans of 1 KiB, a power of two

my $recv = start_receiver();
my $ap = start_apache(mpm => $mpm, receiver => $recv, servers => 1,
    files => { 'htdocs/ok.txt' => "ok\n" }, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
OtelExporterBatchSize 64
OtelExporterBatchCount 256
OtelTrace On
AliasMatch ^/rw %%PREFIX%%/htdocs/ok.txt
<Location /api>
    SetHandler spanprof-api
    OtelTrace Off
</Location>
EOF
my $port = $ap->port;
my @kids = $ap->child_pids;
is scalar @kids, 1, 'one child';

# The queue's buffer: the child's one anonymous read-write mapping of its
# size (reserved at child start, its pages touched only as spans go in).
sub queue_rss_kib {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/smaps") or return;
    my (@found, $cur);
    while (<$fh>) {
        if (/^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(\S*)/) {
            no warnings 'portable';
            $cur = (hex($2) - hex($1) == $QUEUE && $3 eq 'rw-p' && $4 == 0 && $5 eq '')
                   ? { } : undef;
            push @found, $cur if $cur;
        } elsif ($cur && /^Rss:\s+(\d+) kB/) {
            $cur->{rss} = $1;
        }
    }
    return $found[0]{rss} if @found == 1;
    diag "smaps of $pid: " . scalar(@found) . " mappings of $QUEUE bytes:\n"
        . `grep -E -A3 '^[0-9a-f]+-[0-9a-f]+ rw-p 00000000 00:00 0 *\$' /proc/$pid/smaps | grep -E '^[0-9a-f]|^Rss'`;
    return;
}

# ab -k -c 4 on /rw/<tag>: all answered 200, or a diagnostic.
sub load {
    my ($n, $tag) = @_;
    my $ab = `/usr/bin/ab -q -k -c 4 -n $n http://127.0.0.1:$port/rw/$tag 2>&1`;
    my ($complete) = $ab =~ /^Complete requests:\s+(\d+)/m;
    my ($failed) = $ab =~ /^Failed requests:\s+(\d+)/m;
    my ($non2xx) = $ab =~ /^Non-2xx responses:\s+(\d+)/m;
    return ($complete // 0) == $n && !$failed && !$non2xx ? '' : $ab;
}
my $counter = sub { (api_counter($port, '/api', $_[0]))[0] // -1 };

# Paced: rounds of $PACED requests, each sent once the last round's spans
# are exported (a server whose exporter keeps up).
my ($bad, $sent) = ('', 0);
for my $round (1 .. $ROUNDS) {
    $bad ||= load($PACED, 'paced');
    $sent += $PACED;
    last if $bad || !wait_until(10, sub { $counter->('spans_exported') >= $sent });
}
is $bad, '', "paced: $ROUNDS rounds of $PACED requests, all 200";
is $counter->('spans_exported'), $ROUNDS * $PACED, 'each round exported before the next';
my $paced_rewinds = $counter->('queue_rewinds');
ok $paced_rewinds >= 3, "paced: the queue rewound ($paced_rewinds times)";
my $rss = queue_rss_kib($kids[0]);

# A burst faster than the exporter and the receiver: the ring must not
# rewind while the exporter lags, or it drops what its buffer had room for.
is load($BURST, 'burst'), '', "burst: $BURST requests, all 200";

my $N = $ROUNDS * $PACED + $BURST;
my %want = ('/rw/paced' => $ROUNDS * $PACED, '/rw/burst' => $BURST);
my @s = wait_for_spans($recv, $N, 60, accepted_only => 1,
    filter => sub { $want{ $_[0]{attrs}{'url.path'} // '' } });
is scalar @s, $N, "the receiver decoded all $N spans (distinct ids)" or diag $recv->summary;
my %got;
$got{ $_->{attrs}{'url.path'} }++ for grep { $want{ $_->{attrs}{'url.path'} // '' } }
    collect_spans($recv, accepted_only => 1);
is_deeply \%got, \%want, 'each once: ' . join(', ', map { "$_ $got{$_}" } sort keys %got);
my $bytes = 0;
$bytes += length($_->{body} // '') for grep { $_->{path} eq '/v1/traces' } $recv->requests;

my %c;
for my $name (qw(queue_rewinds spans_started spans_exported spans_dropped_queue_full
                 spans_dropped_export_failed))
{
    my ($json, $prom) = api_counter($port, '/api', $name);
    $c{$name} = $json;
    is $prom, $json, "$name: the same in JSON and Prometheus (" . ($json // 'none') . ')';
}
ok $c{queue_rewinds} >= $paced_rewinds, "queue_rewinds: $c{queue_rewinds} in all";
is $c{spans_started}, $N, "spans_started $N";
is $c{spans_exported}, $N, "spans_exported $N";
is $c{spans_dropped_queue_full}, 0, 'none dropped: queue full';
is $c{spans_dropped_export_failed}, 0, 'none dropped: export failed';

# Without rewinds the child would have written (and kept resident) every
# byte it queued while paced: about the bytes of those spans sent.
my $paced_kib = $bytes / 1024 * $ROUNDS * $PACED / $N;
ok defined $rss, "the child's queue mapping (16 MiB) found";
ok defined $rss && $rss * 3 < $paced_kib,
    sprintf('paced: its resident part, %s KiB, under a third of the %d KiB of spans queued',
            $rss // 'none', $paced_kib);
note sprintf 'paced %d rewinds, %d in all; %d KiB sent; queue resident %s KiB after the paced part, %s at the end',
    $paced_rewinds, $c{queue_rewinds}, $bytes / 1024, $rss // 'none', queue_rss_kib($kids[0]) // 'none';

is scalar($ap->crash_lines), 0, 'no crash';
$ap->stop;
$recv->stop;
done_testing;
