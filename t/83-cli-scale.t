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
my $LIMIT = 4096;       # CLI_MAX_STACK_DEPTH, as docs/cli.md documents it
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

# The expected rows ([span index, depth]), computed here: roots (no span of the trace has their
# parent's id) by start time, each followed by its subtree depth first,
# children (the spans whose parent is the span's id) by start time; a span
# is listed once, where first reached; then, by start time, whatever a
# cycle left, each with what it reaches.
sub expected_rows {
    my ($spans) = @_;
    my @by = sort { $spans->[$a]{start} <=> $spans->[$b]{start} } 0 .. $#$spans;
    my (%kids, %known, %done, @rows);
    for my $i (@by) {
        push @{ $kids{ $spans->[$i]{parent} } }, $i if $spans->[$i]{parent} ne '';
        $known{ $spans->[$i]{id} } = 1;
    }
    my $walk = sub {
        my ($i) = @_;
        return if $done{$i}++;
        push @rows, [$i, 0];
        my @st = ([$i, 0]);
        while (@st) {
            my $top = $st[-1];
            my $list = $kids{ $spans->[ $top->[0] ]{id} } || [];
            $top->[1]++ while $top->[1] < @$list && $done{ $list->[ $top->[1] ] };
            if ($top->[1] >= @$list) { pop @st; next }
            my $c = $list->[ $top->[1]++ ];
            $done{$c} = 1;
            push @rows, [$c, scalar @st];
            push @st, [$c, 0];
        }
    };
    $walk->($_) for grep { $spans->[$_]{parent} eq '' || !$known{ $spans->[$_]{parent} } } @by;
    $walk->($_) for @by;
    return @rows;
}

# The first row of a traces table that is not the expected one, or undef.
sub rows_mismatch {
    my ($out, $expect, $cnt) = @_;
    my @rows = grep { /^  [0-9a-f]{16}  / } split /\n/, $out;
    return 'rows: ' . scalar(@rows) . ', expected ' . scalar(@$expect) if @rows != @$expect;
    for my $k (0 .. $#rows) {
        my ($id, $samples, $name) = $rows[$k] =~ /^  ([0-9a-f]{16})  SERVER +\+[\d.]+ ms +[\d.]+ ms  -      +(\d+)  ( *(?:[A-Za-z][0-9A-Za-z]{0,16})?)/
            or return "row $k unparsed: $rows[$k]";
        my ($eid, $edepth, $ename0) = @{ $expect->[$k] };
        my $indent = 2 * $edepth < 599 ? 2 * $edepth : 599;
        my $ename = substr((' ' x $indent) . $ename0, 0, 599);
        return "row $k: got $id, $samples samples, name '$name'; expected $eid '$ename0' at depth $edepth"
            if $id ne $eid || $samples != ($cnt->{$eid} // 0) || ($indent < 599 && $name ne $ename);
    }
    return undef;
}

my @expect = map { [$spans[$_->[0]]{id}, $_->[1], "s$spans[$_->[0]]{id}"] } expected_rows(\@spans);
is scalar(@expect), $N, 'the reference walk lists every span once';

$r = run_cli('traces', $dir);
is $r->{signal}, 0, 'traces, one trace of 100,000 spans: no crash';
is $r->{exit}, 0, 'traces: exit 0' or diag $r->{err};
is $r->{err}, '', 'traces: nothing on stderr';
my @out = split /\n/, $r->{out};
like $out[0], qr/^\Q$dir\E: 100000 spans in 1 traces; 10 CPU samples in 1 profile /, 'traces: the header counts';
like $out[3], qr/^TRACE $TR  \d+\.\d\d ms  \S+  100000 spans  10 CPU samples  service scale$/, 'traces: the trace line';
is rows_mismatch($r->{out}, \@expect, \%cnt), undef, 'traces: one row per span, in tree order, each span\'s samples, names indented by depth';

$r = run_cli('flamegraph', $dir, '--trace', substr($TR, 0, 8), '-o', "$tmp/trace.svg");
is $r->{exit}, 0, 'flamegraph --trace, 100,000 spans: exit 0' or diag $r->{err};
my $svg = read_file("$tmp/trace.svg");
like $svg, qr{<text id="title"[^>]*>s$R  [\d.]+ ms  \x{c2}\x{b7}  trace $TR</text>}, 'flamegraph --trace: titled by the root span';
like $svg, qr{<text id="subtitle"[^>]*>root span $R \(SERVER\) \x{c2}\x{b7} .* 10 CPU samples }, 'flamegraph --trace: subtitle names the root span and the samples';
my %w = map { $_->{name} => $_->{info} } svg_frames($svg);
is $w{work}, 'work (10 samples, 100.00%)', 'flamegraph --trace: the trace\'s samples';

# --- cycles, a repeated span id, a span its own parent ------------------------------
#
# The same rule on a small trace with every irregular shape (the rows as
# the CLI listed them before spans were indexed, checked against it).

my $cyc = "$tmp/cycles";
mkdir $cyc or die;
my @small;
my @shape = (['a1', '', 'A'], ['78', 'a2', 'X'], ['a2', 'a1', 'B'], ['79', '78', 'Y'],
             ['d1', 'a1', 'Done'], ['e1', 'd1', 'E'], ['d1', 'a2', 'Dtwo'],       # d1 twice
             ['7a', '7b', 'P'], ['7b', '7a', 'Q'],                                # a cycle of two
             ['7f', '7f', 'Self'], ['f1', '999', 'Orphan'], ['a3', 'e1', 'F']);
for my $k (0 .. $#shape) {
    my ($id, $p, $name) = @{ $shape[$k] };
    push @small, { id => sprintf('%016s', $id) =~ tr/ /0/r, parent => $p eq '' ? '' : sprintf('%016s', $p) =~ tr/ /0/r,
                   name => $name, start => $T0 * 1e9 + $k * 1000 };
}
write_file("$cyc/traces.jsonl", '{"resourceSpans":[{"scopeSpans":[{"spans":[' . join(',', map {
    sprintf '{"traceId":"%s","spanId":"%s",%s"name":"%s","kind":2,"startTimeUnixNano":"%d","endTimeUnixNano":"%d"}',
        'ab' x 16, $_->{id}, ($_->{parent} ne '' ? qq("parentSpanId":"$_->{parent}",) : ''), $_->{name}, $_->{start}, $_->{start} + 5000
} reverse @small) . "]}]}]}\n");
my @expect_small = map { [$small[$_->[0]]{id}, $_->[1], $small[$_->[0]]{name}] } expected_rows(\@small);
$r = run_cli('traces', $cyc);
is $r->{exit}, 0, 'traces, cycles and repeats: exit 0' or diag $r->{err};
is rows_mismatch($r->{out}, \@expect_small, {}), undef, 'traces, cycles and repeats: every span once, in the same order as before'
    or diag $r->{out};
is join(' ', map { $_->[2] } @expect_small), 'A B X Y Dtwo E F Done Orphan P Q Self', 'the reference walk on the small trace';

done_testing();
