#!/usr/bin/perl
# The spanprof CLI on inputs whose size or depth once broke it: a pprof
# stack of 300,000 frames (folded recursed once per frame and overflowed
# the C stack) and one trace of 100,000 spans (traces and flamegraph
# --trace scanned every span for every span). The pprof files come from
# bench/cli-gen (protobuf wire format written by hand in Perl) and from
# protoc --encode, never from spanprof's encoder. Asserts output, not time.

use strict;
use warnings;

use File::Temp qw(tempdir);
use Test::More;

use lib 't/lib';
use SpanProf::Cli;

need_cli();

my $ROOT  = repo_root();
my $GEN   = "$ROOT/bench/cli-gen";
my $LIMIT = 4096;       # CLI_MAX_STACK_DEPTH, as README documents it
my $T0    = 1795316400;

my $tmp = tempdir(CLEANUP => !$ENV{SPANPROF_KEEP});

sub gen_deep {
    my ($frames) = @_;
    my $dir = "$tmp/deep-$frames";
    mkdir $dir or die;
    system($^X, $GEN, 'deep', "$dir/cpu-${T0}000-1.pb.gz", $frames) == 0 or die "cli-gen deep failed";
    return $dir;
}

sub stack { my ($recurse, $top) = @_; join ';', $top, ('recurse') x $recurse, 'leaf' }

# ok, not is: a failure would print stacks of thousands of frames.
sub folded_is {
    my ($r, $lines, $what) = @_;
    my $want = join('', map { "$_\n" } sort @$lines);
    ok $r->{out} eq $want, $what
        or diag 'got ' . length($r->{out}) . ' bytes: ' . substr($r->{out}, 0, 200) . '...';
}

my $WARN = qr/^spanprof: warning: 1 sample had a stack deeper than $LIMIT frames: cut to the innermost ${\($LIMIT - 1)} under a \[truncated\] frame\n/;

# --- 300,000 frames -------------------------------------------------------------

my $deep = gen_deep(300_000);

# The generator's file, read back by protoc (not by us): the stack is there.
my $decoded = pprof_decode(gunzip_bytes(read_file("$deep/cpu-${T0}000-1.pb.gz")));
is scalar(() = $decoded =~ /location_id: 2\n/g), 299_998, 'cli-gen: 299,998 recurse frames in the sample, per protoc';

my $r = run_cli('folded', $deep);
is $r->{signal}, 0, 'folded, 300,000 frames: no crash';
is $r->{exit}, 0, 'folded, 300,000 frames: exit 0' or diag $r->{err};
like $r->{err}, qr/\A$WARN\z/, 'folded: the cut is said once, on one line';
folded_is $r, [stack($LIMIT - 2, '[truncated]') . ' 7', 'main;other 3'],
    'folded: the innermost frames under [truncated], the shallow stack whole';

$r = run_cli('flamegraph', $deep, '-o', "$tmp/deep.svg");
is $r->{exit}, 0, 'flamegraph, 300,000 frames: exit 0' or diag $r->{err};
like $r->{err}, qr/\A${WARN}spanprof: wrote \Q$tmp\E\/deep\.svg: 10 CPU samples from 1 profile, ${\($LIMIT + 2)} frames\n\z/,
    'flamegraph: one warning line, then the summary';
my @f = svg_frames(read_file("$tmp/deep.svg"));
my %n;
$n{ $_->{name} }++ for @f;
is_deeply \%n, { all => 1, '[truncated]' => 1, recurse => $LIMIT - 2, leaf => 1, main => 1, other => 1 },
    'flamegraph: the frames drawn';
my ($leaf) = grep { $_->{name} eq 'leaf' } @f;
my ($cut) = grep { $_->{name} eq '[truncated]' } @f;
my ($all) = grep { $_->{name} eq 'all' } @f;
is $all->{y} - $leaf->{y}, 16 * $LIMIT, 'flamegraph: the leaf is the limit\'s levels above the root';
is $all->{y} - $cut->{y}, 16, 'flamegraph: [truncated] sits on the root';

# pprof keeps the stack whole: the cut is only for drawing and folding.
$r = run_cli('pprof', $deep, '-o', "$tmp/deep.pb.gz");
is $r->{exit}, 0, 'pprof, 300,000 frames: exit 0' or diag $r->{err};
$decoded = pprof_decode(gunzip_bytes(read_file("$tmp/deep.pb.gz")));
is scalar(() = $decoded =~ /location_id: \d+\n/g), 300_002, 'pprof: every frame of both samples written';

# At the limit nothing is cut; one frame more is.
$r = run_cli('folded', gen_deep($LIMIT));
is_deeply [$r->{exit}, $r->{err}], [0, ''], "folded, exactly $LIMIT frames: exit 0, no warning";
folded_is $r, [stack($LIMIT - 2, 'main') . ' 7', 'main;other 3'], "folded, exactly $LIMIT frames: the stack whole";
$r = run_cli('folded', gen_deep($LIMIT + 1));
like $r->{err}, qr/\A$WARN\z/, "folded, ${\($LIMIT + 1)} frames: cut, one warning";
folded_is $r, [stack($LIMIT - 2, '[truncated]') . ' 7', 'main;other 3'],
    "folded, ${\($LIMIT + 1)} frames: the outermost frames are what was cut";

# --- one trace of 100,000 spans ---------------------------------------------------
#
# A root span R; a chain of 10,000 spans under it (each the parent of the
# next); 89,999 spans whose parent is a span of the caller's not in the
# file (many requests sent with one traceparent). Start times all distinct;
# the spans written in an order that is not their start order.

my $dir = "$tmp/trace";
mkdir $dir or die;
my $TR     = '7e' x 16;
my $REMOTE = 'feedfacecafebeef';
my $N      = 100_000;
my $CHAIN  = 10_000;
my (@spans, %parent);
sub sid { sprintf '%016x', $_[0] + 1 }
for my $i (0 .. $N - 1) {
    my $p = $i == 0 ? '' : $i <= $CHAIN ? sid($i - 1) : $REMOTE;
    # The chain starts first, in order; the others after it.
    push @spans, { id => sid($i), parent => $p, start => ($T0 * 1e9) + $i * 1000, dur => 1_000_000 + $i };
}
my $R = sid(0);
my @lines;
my @shuffled = map { $spans[($_ * 7919) % $N] } 0 .. $N - 1;    # 7919 is prime: a permutation
while (my @batch = splice @shuffled, 0, 500) {
    push @lines, '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"scale"}}]},"scopeSpans":[{"spans":['
        . join(',', map {
            sprintf '{"traceId":"%s","spanId":"%s",%s"name":"s%s","kind":2,"startTimeUnixNano":"%d","endTimeUnixNano":"%d"}',
                $TR, $_->{id}, ($_->{parent} ne '' ? qq("parentSpanId":"$_->{parent}",) : ''),
                $_->{id}, $_->{start}, $_->{start} + $_->{dur}
        } @batch) . "]}]}]}\n";
}
write_file("$dir/traces.jsonl", join '', @lines);

# Samples of three of its spans (the root, deep in the chain, a sibling).
my %cnt = ($R => 5, sid(9_000) => 3, sid(50_000) => 2);
write_file("$dir/cpu-${T0}000-1.pb.gz", gzip_bytes(pprof_encode(profile_text(
    time => $T0 * 1e9, duration => 10e9, period => 1e6,
    functions => [qw(main work)], locations => [[1], [2]],
    samples => [ map { { stack => [2, 1], count => $cnt{$_}, labels => { trace_id => $TR, span_id => $_ } } } sort keys %cnt ],
))));

# The expected rows, computed here: roots (no parent among the trace's
# spans) by start time, each followed by its subtree depth first, children
# by start time.
my %kids;
push @{ $kids{ $_->{parent} } }, $_->{id} for sort { $a->{start} <=> $b->{start} } @spans;
my %known = map { $_->{id} => 1 } @spans;
my @expect;
for my $root (map { $_->{id} } grep { $_->{parent} eq '' || !$known{ $_->{parent} } } sort { $a->{start} <=> $b->{start} } @spans) {
    my @st = ([$root, 0]);
    while (my $e = pop @st) {
        push @expect, $e;
        push @st, map { [$_, $e->[1] + 1] } reverse @{ $kids{ $e->[0] } || [] };
    }
}
is scalar(@expect), $N, 'the reference walk lists every span once';

$r = run_cli('traces', $dir);
is $r->{signal}, 0, 'traces, one trace of 100,000 spans: no crash';
is $r->{exit}, 0, 'traces: exit 0' or diag $r->{err};
is $r->{err}, '', 'traces: nothing on stderr';
my @out = split /\n/, $r->{out};
like $out[0], qr/^\Q$dir\E: 100000 spans in 1 traces; 10 CPU samples in 1 profile /, 'traces: the header counts';
like $out[3], qr/^TRACE $TR  \d+\.\d\d ms  \S+  100000 spans  10 CPU samples  service scale$/, 'traces: the trace line';
my @rows = grep { /^  [0-9a-f]{16}  / } @out;
is scalar(@rows), $N, 'traces: one row per span';
my ($bad, $checked) = (undef, 0);
for my $k (0 .. $#rows) {
    my ($id, $samples, $name) = $rows[$k] =~ /^  ([0-9a-f]{16})  SERVER +\+[\d.]+ ms +[\d.]+ ms  -      +(\d+)  ( *(?:s[0-9a-f]{0,16})?)/
        or do { $bad = "row $k unparsed: $rows[$k]"; last };
    my ($eid, $edepth) = @{ $expect[$k] };
    my $indent = 2 * $edepth < 599 ? 2 * $edepth : 599;
    my $ename = (' ' x $indent) . ($indent < 599 ? "s$eid" : '');
    $ename = substr($ename, 0, 599);
    if ($id ne $eid || $samples != ($cnt{$eid} // 0) || ($indent < 599 && $name ne $ename)) {
        $bad = "row $k: got $id, $samples samples, name '$name'; expected $eid at depth $edepth, " . ($cnt{$eid} // 0) . ' samples';
        last;
    }
    $checked++;
}
is $bad, undef, 'traces: rows in tree order, each span\'s samples, names indented by depth';
is $checked, $N, 'traces: every row checked';

$r = run_cli('flamegraph', $dir, '--trace', substr($TR, 0, 8), '-o', "$tmp/trace.svg");
is $r->{exit}, 0, 'flamegraph --trace, 100,000 spans: exit 0' or diag $r->{err};
my $svg = read_file("$tmp/trace.svg");
like $svg, qr{<text id="title"[^>]*>s$R  [\d.]+ ms  \x{c2}\x{b7}  trace $TR</text>}, 'flamegraph --trace: titled by the root span';
like $svg, qr{<text id="subtitle"[^>]*>root span $R \(SERVER\) \x{c2}\x{b7} .* 10 CPU samples }, 'flamegraph --trace: subtitle names the root span and the samples';
my %w = map { $_->{name} => $_->{info} } svg_frames($svg);
is $w{work}, 'work (10 samples, 100.00%)', 'flamegraph --trace: the trace\'s samples';

done_testing();
