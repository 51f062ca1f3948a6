#!/usr/bin/perl
# The spanprof CLI on crafted inputs: pprof files made with protoc from text
# (two workers' profiles, different id numbering, an inlined frame) and a
# traces.jsonl with good and bad lines. Exact folded counts, the traces
# table, filtering by trace/span/range, the SVG, the diff, the filtered
# pprof, and every bad-input case.

use strict;
use warnings;

use File::Temp qw(tempdir);
use JSON::PP;
use Test::More;

use lib 't/lib';
use SpanProf::Cli;

need_cli();

my $T1  = 'aaaa1111' x 4;
my $T2  = 'aabb2222' x 4;
my $T3  = 'cccc3333' x 4;
my $S1  = '51' x 8;     # GET /slow, the backend's SERVER span
my $S1b = '1b' x 8;     # GET /, the front's SERVER span (root)
my $C1  = 'c1' x 8;     # the front's CLIENT span
my $S2  = '52' x 8;
my $S3  = '53' x 8;
my $T0  = 1795316400;   # 2026-11-22T03:00:00Z

my $tmp = tempdir(CLEANUP => !$ENV{SPANPROF_KEEP});
my $dir = "$tmp/out";
mkdir $dir or die;

sub lab { my ($t, $s, $n) = @_; +{ trace_id => $t, span_id => $s, ($n ? (span_name => $n) : ()) } }

# Worker 100, 03:00:00 + 10 s.
my $profA = profile_text(
    time => $T0 * 1e9, duration => 10e9, period => 1e6,
    functions => [qw(main ngx_worker handler_a hot_a cold_a epoll_wait)],
    locations => [[1], [2], [3], [4], [5], [6]],
    samples => [
        { stack => [4, 3, 2, 1], count => 30, labels => lab($T1, $S1, 'GET /slow') },
        { stack => [5, 3, 2, 1], count => 5,  labels => lab($T1, $S1, 'GET /slow') },
        { stack => [3, 2, 1],    count => 2,  labels => lab($T1, $S1b, 'GET /') },
        { stack => [5, 3, 2, 1], count => 4,  labels => lab($T2, $S2, 'GET /fast') },
        { stack => [6, 2, 1],    count => 50 },
    ],
);
# Worker 101, 03:00:10 + 10 s; its own ids and string order, an inlined
# function (location 6: inlined_helper inlined into handler_a).
my $profB = profile_text(
    time => ($T0 + 10) * 1e9, duration => 10e9, period => 1e6, id_offset => 100,
    functions => [qw(epoll_wait main ngx_worker hot_a handler_a inlined_helper)],
    locations => [[2], [3], [5], [4], [1], [6, 5]],
    samples => [
        { stack => [4, 3, 2, 1], count => 12, labels => lab($T1, $S1) },
        { stack => [5, 2, 1],    count => 20 },
        { stack => [6, 2, 1],    count => 3,  labels => lab($T2, $S2, 'GET /fast') },
    ],
);
write_file("$dir/cpu-${T0}000-100.pb.gz", gzip_bytes(pprof_encode($profA)));
write_file("$dir/cpu-" . ($T0 + 10) . "000-101.pb.gz", gzip_bytes(pprof_encode($profB)));
# Not profiles: the exporter's temporary file and something else.
write_file("$dir/.cpu-100.tmp", "partial");
write_file("$dir/notes.txt", "hello");

sub attr {
    my ($k, $v) = @_;
    return { key => $k, value => ($v =~ /^\d+$/ ? { intValue => "$v" } : { stringValue => $v }) };
}
sub span {
    my (%a) = @_;
    my $start = $a{start};
    return {
        traceId => $a{trace}, spanId => $a{span},
        ($a{parent} ? (parentSpanId => $a{parent}) : ()),
        name => $a{name}, kind => $a{kind} // 2,
        startTimeUnixNano => "$start", endTimeUnixNano => "" . ($start + $a{dur}),
        attributes => [ map { attr($_, $a{attrs}{$_}) } sort keys %{ $a{attrs} || {} } ],
        status => ($a{error} ? { code => 2 } : {}),
    };
}
sub export_line {
    my ($service, @spans) = @_;
    return JSON::PP->new->canonical->encode({ resourceSpans => [{
        resource => { attributes => [ attr('service.name', $service) ] },
        scopeSpans => [{ scope => { name => 'spanprof' }, spans => \@spans }],
    }] }) . "\n";
}

my $t1 = ($T0 + 1) * 1_000_000_000;
my @lines = (
    export_line('svc-a',
        span(trace => $T1, span => $S1b, name => 'GET /', start => $t1, dur => 250e6,
             attrs => { 'http.route' => '/', 'url.path' => '/slow', 'http.response.status_code' => 200 }),
        span(trace => $T1, span => $C1, parent => $S1b, name => 'GET', kind => 3,
             start => $t1 + 100_000, dur => 249.8e6,
             attrs => { 'server.address' => '127.0.0.1', 'server.port' => 8081, 'http.response.status_code' => 200 }),
        span(trace => $T1, span => $S1, parent => $C1, name => 'GET /slow',
             start => $t1 + 200_000, dur => 240e6,
             attrs => { 'http.route' => '/slow', 'url.path' => '/slow', 'http.response.status_code' => 200 })),
    '{"resourceSpans":[{"resource":' . "\n",                       # line 2: cut short
    export_line('svc-b',
        span(trace => $T2, span => $S2, name => 'GET /fast', start => ($T0 + 5) * 1e9, dur => 5e6,
             error => 1, attrs => { 'http.route' => '/fast', 'url.path' => '/fast?x=1', 'http.response.status_code' => 500 })),
    export_line('svc-a',
        span(trace => $T3, span => $S3, name => 'GET /other', start => ($T0 + 50) * 1e9, dur => 1e6,
             attrs => { 'http.route' => '/other', 'url.path' => '/other', 'http.response.status_code' => 404 })),
    "\n",                                                          # line 5: blank
    qq({"foo":1}\n),                                               # line 6: not OTLP
    export_line('svc-a', span(trace => 'xyz', span => $S3, name => 'bad', start => 1, dur => 1)),  # line 7
);
# The OTLP/JSON spec also allows numbers for 64-bit ints: line 3 uses them.
$lines[2] =~ s/"intValue":"500"/"intValue":500/;
write_file("$dir/traces.jsonl", join '', @lines);

sub folded_hash {
    my ($text) = @_;
    my %h;
    for (split /\n/, $text) {
        my ($stack, $n) = /^(.*) (\d+)$/ or return undef;
        $h{$stack} = $n;
    }
    return \%h;
}

# --- folded: exact counts --------------------------------------------------

my $r = run_cli('folded', $dir);
is $r->{exit}, 0, 'folded: exit 0' or diag $r->{err};
is $r->{out}, <<'EOF', 'folded: every sample of both profiles, merged, sorted, exact counts';
main;ngx_worker;epoll_wait 70
main;ngx_worker;handler_a 2
main;ngx_worker;handler_a;cold_a 9
main;ngx_worker;handler_a;hot_a 42
main;ngx_worker;handler_a;inlined_helper 3
EOF
is $r->{err}, '', 'folded without --trace: traces.jsonl is not read, no warnings'
    or diag $r->{err};

$r = run_cli('folded', $dir, '--trace', $T1);
is $r->{out}, <<'EOF', 'folded --trace: only the samples labelled with the trace, from both files';
main;ngx_worker;handler_a 2
main;ngx_worker;handler_a;cold_a 5
main;ngx_worker;handler_a;hot_a 42
EOF

$r = run_cli('folded', $dir, '--trace', $T1, '--span', $S1);
is $r->{out}, "main;ngx_worker;handler_a;cold_a 5\nmain;ngx_worker;handler_a;hot_a 42\n",
    'folded --trace --span: only the span';
$r = run_cli('folded', $dir, "--span=$S1b");
is $r->{out}, "main;ngx_worker;handler_a 2\n", 'folded --span alone (--opt=value form)';
$r = run_cli('folded', $dir, '--trace', 'AAAA1111');
is $r->{exit}, 0, 'a unique trace id prefix, in upper case, is enough';
is_deeply folded_hash($r->{out}), { 'main;ngx_worker;handler_a' => 2,
    'main;ngx_worker;handler_a;cold_a' => 5, 'main;ngx_worker;handler_a;hot_a' => 42 },
    '... the same samples';
$r = run_cli('folded', $dir, '--trace', $T2);
is $r->{out}, "main;ngx_worker;handler_a;cold_a 4\nmain;ngx_worker;handler_a;inlined_helper 3\n",
    'folded: an inlined function is its own frame above its caller';
$r = run_cli('folded', $dir, '--range', "$T0..@{[$T0 + 5]}");
is_deeply folded_hash($r->{out}), { 'main;ngx_worker;epoll_wait' => 50,
    'main;ngx_worker;handler_a' => 2, 'main;ngx_worker;handler_a;cold_a' => 9,
    'main;ngx_worker;handler_a;hot_a' => 30 },
    'folded --range: only the profile whose interval overlaps';
$r = run_cli('folded', $dir, '--range', '2026-11-22T03:00:15Z..2026-11-22T03:00:16Z', '-o', "$tmp/f.txt");
is $r->{out}, '', 'folded -o: nothing on stdout';
is_deeply folded_hash(read_file("$tmp/f.txt")), { 'main;ngx_worker;epoll_wait' => 20,
    'main;ngx_worker;handler_a;hot_a' => 12, 'main;ngx_worker;handler_a;inlined_helper' => 3 },
    'folded --range (RFC 3339) -o FILE: the second profile';

# --- traces ----------------------------------------------------------------

$r = run_cli('traces', $dir);
is $r->{exit}, 0, 'traces: exit 0 despite bad lines' or diag $r->{err};
like $r->{err}, qr{^spanprof: warning: \Q$dir\E/traces\.jsonl:2: malformed JSON \(.*\); line skipped$}m,
    'malformed JSON line: warning names the file and line';
like $r->{err}, qr{traces\.jsonl:6: not an OTLP/JSON trace export}, 'non-OTLP line: warning with line';
like $r->{err}, qr{traces\.jsonl:7: span without a valid traceId}, 'bad trace id: warning with line';
unlike $r->{err}, qr{traces\.jsonl:[45]:}, 'good and blank lines: no warning';
my $out = $r->{out};
like $out, qr{^\Q$dir\E: 5 spans in 3 traces; 126 CPU samples in 2 profiles \(03:00:00\.000 to 03:00:20\.000 UTC\)$}m,
    'traces: summary line';
like $out, qr{^All 3 traces, slowest first:$}m, 'traces: heading';
my @order = $out =~ /^TRACE (\w+)/mg;
is_deeply \@order, [$T1, $T2, $T3], 'traces: slowest first';
like $out, qr{^TRACE $T1  250\.00 ms  2026-11-22T03:00:01\.000Z  3 spans  49 CPU samples  service svc-a$}m,
    'trace header: duration, start, spans, samples, service';
like $out, qr{^  SPAN\s+KIND\s+START\s+DURATION\s+STATUS\s+SAMPLES\s+NAME\s+ROUTE\s+TARGET$}m, 'table header';
like $out, qr{^  $S1b  SERVER\s+\+0\.00 ms\s+250\.00 ms  200\s+2  GET /\s+/\s+/slow$}m, 'root span row';
like $out, qr{^  $C1  CLIENT\s+\+0\.10 ms\s+249\.80 ms  200\s+0    GET\s+-\s+127\.0\.0\.1:8081$}m,
    'client span row: indented under its parent, peer as target';
like $out, qr{^  $S1  SERVER\s+\+0\.20 ms\s+240\.00 ms  200\s+47      GET /slow\s+/slow\s+/slow$}m,
    'backend span row: 47 samples from both profiles';
like $out, qr{^  $S2  SERVER\s+\+0\.00 ms\s+5\.00 ms  500 ERROR\s+7  GET /fast\s+/fast\s+/fast\?x=1$}m,
    'error span: status with ERROR, samples (incl. the inlined frame)';
like $out, qr{^  $S3  SERVER .* 404\s+0  GET /other}m, 'span without samples: 0';

$r = run_cli('traces', $dir, '--slowest', 1);
is_deeply [ $r->{out} =~ /^TRACE (\w+)/mg ], [$T1], '--slowest 1';
like $r->{out}, qr{^The 1 slowest of 3 traces:$}m, '--slowest: heading';
$r = run_cli('traces', $dir, '--service', 'svc-b');
is_deeply [ $r->{out} =~ /^TRACE (\w+)/mg ], [$T2], '--service';
$r = run_cli('traces', $dir, '--since', $T0 + 10);
is_deeply [ $r->{out} =~ /^TRACE (\w+)/mg ], [$T3], '--since (unix seconds)';
$r = run_cli('traces', $dir, '--since', '2026-11-22T03:00:00Z', '--until', '2026-11-22T03:00:03Z');
is_deeply [ $r->{out} =~ /^TRACE (\w+)/mg ], [$T1], '--since/--until (RFC 3339)';
$r = run_cli('traces', $dir, '--since', '-5m');
is $r->{exit}, 1, '--since -5m: those traces are older';
like $r->{err}, qr{^spanprof: no trace in \Q$dir\E/traces\.jsonl matches --since -5m$}m, '... and says so';
$r = run_cli('traces', $dir, '--ids', '--slowest', 2);
is $r->{out}, "$T1\n$T2\n", '--ids';

# --- flamegraph ------------------------------------------------------------

my $svgf = "$tmp/t1.svg";
$r = run_cli('flamegraph', $dir, '--trace', $T1, '-o', $svgf);
is $r->{exit}, 0, 'flamegraph --trace: exit 0' or diag $r->{err};
like $r->{err}, qr{^spanprof: wrote \Q$svgf\E: 49 CPU samples from 2 profiles, 5 frames$}m, '... and says what it wrote';
my $svg = read_file($svgf);
my ($wf, $why) = xml_wellformed($svgf);
SKIP: {
    skip 'xmllint not installed', 1 unless defined $wf;
    ok $wf, 'SVG is well-formed XML (xmllint)' or diag $why;
}
like $svg, qr{^<\?xml version="1\.0" encoding="UTF-8"}, 'XML declaration';
like $svg, qr{<svg [^>]*xmlns="http://www\.w3\.org/2000/svg"}, 'SVG namespace';
like $svg, qr{<text id="title"[^>]*>GET / \(/slow\)  250\.00 ms  ·  trace $T1</text>},
    'title: root span name, path, duration, trace';
like $svg, qr{<text id="subtitle"[^>]*>root span $S1b \(SERVER\) · route / · path /slow · status 200 · 49 CPU samples · 2026-11-22T03:00:01\.000Z · service svc-a</text>},
    'subtitle: span, route, status, samples';
my @frames = svg_frames($svg);
my %fr = map { $_->{name} => $_ } @frames;
is_deeply [ sort keys %fr ], [qw(all cold_a handler_a hot_a main ngx_worker)], 'frames: the trace\'s functions only';
is $fr{hot_a}{info}, 'hot_a (42 samples, 85.71%)', 'frame tooltip: function, samples, share';
is $fr{all}{info}, 'all (49 samples, 100.00%)', 'root frame';
cmp_ok abs($fr{all}{width} - 1180), '<', 0.01, 'root spans the width';
cmp_ok abs($fr{hot_a}{width} - 1180 * 42 / 49), '<', 0.02, 'widths proportional to samples';
cmp_ok $fr{hot_a}{y}, '<', $fr{handler_a}{y}, 'callees above callers';
like $svg, qr{<script type="text/ecmascript"><!\[CDATA\[.*function zoom.*function unzoom.*\]\]></script>}s,
    'inline script with zoom';
like $svg, qr{onmouseover} , 'hover handler';
like $svg, qr{<g class="f"><title>hot_a \(42 samples, 85\.71%\)</title><rect}, '<title> per frame';
unlike $svg, qr{href|src=|\@import|url\(}, 'no external references';
my @urls = $svg =~ m{(https?://[^"\s<]+)}g;
is_deeply \@urls, ['http://www.w3.org/2000/svg'], 'the only URL is the SVG namespace name';
like $svg, qr{<text[^>]*>hot_a</text>}, 'frame text names the function';

$r = run_cli('flamegraph', $dir, '--span', $S1);
is $r->{exit}, 0, 'flamegraph --span to stdout (not a terminal)';
like $r->{out}, qr{<text id="title"[^>]*>GET /slow  240\.00 ms  ·  span $S1  ·  trace $T1</text>},
    'span title: name, duration, span, trace';
like $r->{out}, qr{<title>all \(47 samples, 100\.00%\)</title>}, 'span: 47 samples';

$r = run_cli('flamegraph', $dir, '--title', 'My <graph>', '--width', 800);
is $r->{exit}, 0, 'flamegraph of everything';
like $r->{out}, qr{<svg version="1\.1" width="800"}, '--width';
like $r->{out}, qr{>My &lt;graph&gt;</text>}, '--title, escaped';
like $r->{out}, qr{<title>all \(126 samples, 100\.00%\)</title>}, 'whole profile: every sample';
like $r->{out}, qr{<title>epoll_wait \(70 samples, 55\.56%\)</title>}, 'idle samples included';

# --- diff --------------------------------------------------------------------

$r = run_cli('diff', $dir, '--base', "$T0..@{[$T0 + 5]}", '--compare',
             "@{[$T0 + 15]}..@{[$T0 + 16]}", '-o', "$tmp/d.svg");
is $r->{exit}, 0, 'diff: exit 0' or diag $r->{err};
$svg = read_file("$tmp/d.svg");
($wf, $why) = xml_wellformed("$tmp/d.svg");
SKIP: {
    skip 'xmllint not installed', 1 unless defined $wf;
    ok $wf, 'diff SVG is well-formed XML' or diag $why;
}
%fr = map { $_->{name} => $_ } svg_frames($svg);
is $fr{hot_a}{info}, 'hot_a (compare 12 samples, 34.29%; base 30 samples, 32.97%; +1.32 points)',
    'diff tooltip: both ranges and the change';
is $fr{handler_a}{info}, 'handler_a (compare 15 samples, 42.86%; base 41 samples, 45.05%; -2.20 points)',
    'a frame that lost share';
ok !exists $fr{cold_a}, 'frames absent from the compared range have no width';
cmp_ok abs($fr{all}{width} - 1180), '<', 0.01, 'widths by the compared range';
sub fill_of { my ($name) = @_; $svg =~ m{<title>\Q$name\E \([^<]*</title><rect [^>]*fill="rgb\((\d+),(\d+),(\d+)\)"} ; [$1, $2, $3] }
my $red = fill_of('epoll_wait');
my $blue = fill_of('handler_a');
ok $red->[0] > $red->[2] + 30, 'larger share: red' or diag "@$red";
ok $blue->[2] > $blue->[0] + 30, 'smaller share: blue' or diag "@$blue";
is_deeply fill_of('inlined_helper'), [232, 48, 48], 'the largest change: full red';
is_deeply fill_of('all'), [224, 224, 224], 'no change: grey';
like $svg, qr{compare: 35 samples in 1 profile · base: 91 samples in 1 profile}, 'diff subtitle';

$r = run_cli('diff', $dir, '--base', "$T0..@{[$T0 + 5]}", '--compare', '1000..2000');
is $r->{exit}, 1, 'diff: a range without profiles is an error';
like $r->{err}, qr{^spanprof: no CPU samples in the compare range 1000\.\.2000: the profiles in \Q$dir\E cover 2026-11-22T03:00:00\.000Z to 2026-11-22T03:00:20\.000Z$},
    '... naming the range and what the profiles cover';
$r = run_cli('diff', $dir, '--base', "$T0..@{[$T0 + 5]}");
is $r->{exit}, 2, 'diff without --compare: usage error';

# --- pprof -------------------------------------------------------------------

$r = run_cli('pprof', $dir, '--trace', $T1, '-o', "$tmp/t1.pb.gz");
is $r->{exit}, 0, 'pprof --trace: exit 0' or diag $r->{err};
my $dec = pprof_decode(gunzip_bytes(read_file("$tmp/t1.pb.gz")));
my @strings = $dec =~ /^string_table: "(.*)"$/mg;
my @samples = $dec =~ /^sample \{\n(.*?)^\}/msg;
is scalar(@samples), 4, 'pprof: the trace\'s 4 samples';
my ($sum, $traces_ok) = (0, 1);
my %idx = map { $strings[$_] => $_ } 0 .. $#strings;
for my $s (@samples) {
    my ($count) = $s =~ /value: (\d+)/;
    $sum += $count;
    my %l = $s =~ /label \{\s*key: (\d+)\s*str: (\d+)\s*\}/g;
    $traces_ok = 0 unless ($l{ $idx{trace_id} } // -1) == $idx{$T1};
}
is $sum, 49, 'pprof: 49 samples in all';
ok $traces_ok, 'pprof: every sample labelled with the trace';
ok !grep({ $_ eq $T2 || $_ eq 'epoll_wait' || $_ eq 'inlined_helper' } @strings),
    'pprof: nothing of other traces or idle';
like $dec, qr{time_nanos: ${T0}000000000\nduration_nanos: 20000000000}, 'pprof: interval of both files';
mkdir "$tmp/re" or die;
write_file("$tmp/re/cpu-1-1.pb.gz", read_file("$tmp/t1.pb.gz"));
$r = run_cli('folded', "$tmp/re");
is $r->{out}, run_cli('folded', $dir, '--trace', $T1)->{out}, 'pprof output reads back to the same stacks';
$r = run_cli('pprof', $dir, '--trace', $T1);
is $r->{exit}, 2, 'pprof without -o: usage error';

# --- names that folded and XML must not take literally -------------------

mkdir "$tmp/weird" or die;
write_file("$tmp/weird/cpu-1795316400000-1.pb.gz", gzip_bytes(pprof_encode(profile_text(
    time => $T0 * 1e9, duration => 1e9,
    functions => ['main', 'a;b', "operator<< <std::ostream&>", "bad\xff\xfe name \xc3\xa9"],
    locations => [[1], [2], [3], [4], { address => 0x5000, lines => [] }],
    samples => [{ stack => [3, 2, 1], count => 7 }, { stack => [4, 1], count => 2 },
                { stack => [5, 1], count => 1 }, { stack => [], count => 4 }],
))));
$r = run_cli('folded', "$tmp/weird");
is $r->{out}, "[no stack] 4\nmain;a:b;operator<< <std::ostream&> 7\nmain;bad\xff\xfe name \xc3\xa9 2\nmain;nginx+0x4000 1\n",
    'folded: ";" in a name becomes ":", bytes kept, unsymbolized frames are object+offset, empty stacks counted';
$r = run_cli('flamegraph', "$tmp/weird", '-o', "$tmp/weird.svg");
is $r->{exit}, 0, 'flamegraph of odd names';
($wf, $why) = xml_wellformed("$tmp/weird.svg");
SKIP: {
    skip 'xmllint not installed', 1 unless defined $wf;
    ok $wf, 'odd names: still well-formed XML (escaped, invalid UTF-8 replaced)' or diag $why;
}
$svg = read_file("$tmp/weird.svg");
like $svg, qr{<title>operator&lt;&lt; &lt;std::ostream&amp;&gt; \(7 samples, 50\.00%\)</title>}, 'markup escaped';
like $svg, qr{<title>bad\?\? name \xc3\xa9 \(2 samples}, 'invalid UTF-8 bytes replaced, valid kept';

# --- bad input -------------------------------------------------------------

# The same data without the bad lines, so errors are alone on stderr.
my $clean = "$tmp/clean";
mkdir $clean or die;
write_file("$clean/$_", read_file("$dir/$_")) for grep { /\.pb\.gz$/ } do {
    opendir my $dh, $dir or die; readdir $dh };
write_file("$clean/traces.jsonl", join '', @lines[0, 2, 3]);

sub one_line_error {
    my ($r, $code, $re, $name) = @_;
    is $r->{exit}, $code, "$name: exit $code";
    is $r->{signal}, 0, "$name: no crash";
    like $r->{err}, qr{^spanprof: $re\n\z}, "$name: one clear line" or diag $r->{err};
}

sub bad_dir {
    my ($name, $bytes) = @_;
    my $d = "$tmp/$name";
    mkdir $d or die;
    write_file("$d/traces.jsonl", $lines[0]);
    write_file("$d/cpu-1795316400000-7.pb.gz", $bytes) if defined $bytes;
    return $d;
}

my $gz = gzip_bytes(pprof_encode($profA));
my $d = bad_dir('trunc', substr($gz, 0, int(length($gz) * 0.6)));
for my $cmd (['folded'], ['traces'], ['flamegraph', '--trace', $T1], ['pprof', '-o', "$tmp/x.pb.gz"]) {
    $r = run_cli($cmd->[0], $d, @{$cmd}[1 .. $#$cmd]);
    one_line_error($r, 1, qr{\Q$d\E/cpu-1795316400000-7\.pb\.gz: truncated gzip data \(the file ends early\)},
                   "truncated .pb.gz ($cmd->[0])");
}
$d = bad_dir('notgz', pprof_encode($profA));
one_line_error(run_cli('folded', $d), 1, qr{.*cpu-1795316400000-7\.pb\.gz: not gzip data}, 'uncompressed file');
$d = bad_dir('garbage', gzip_bytes("\x0a\x05garbage and more"));
one_line_error(run_cli('folded', $d), 1, qr{.*: not a pprof profile \(protobuf decoding failed\)}, 'gzip of garbage');
$d = bad_dir('dangling', gzip_bytes(pprof_encode(profile_text(
    functions => ['f'], locations => [[1]], samples => [{ stack => [9], count => 1 }]))));
one_line_error(run_cli('folded', $d), 1,
    qr{.*: invalid pprof profile: sample 0 refers to location 9, which does not exist}, 'dangling location id');
$d = bad_dir('badstr', gzip_bytes(pprof_encode(profile_text(functions => ['f'], locations => [[1]],
    samples => [{ stack => [1], count => 1 }]) . "default_sample_type: 0\nfunction { id: 50 name: 999 }\n")));
one_line_error(run_cli('folded', $d), 1, qr{.*: invalid pprof profile: function 50 has a string index out of range},
    'string index out of range');

one_line_error(run_cli('flamegraph', $clean, '--trace', 'f' x 32), 1,
    qr{trace ffffffffffffffffffffffffffffffff not found in \Q$clean\E \(no span in traces\.jsonl and no CPU sample labelled with it\)},
    'unknown trace id');
one_line_error(run_cli('folded', $clean, '--trace', 'aa'), 1,
    qr{trace id prefix aa is ambiguous in \Q$clean\E: .*}, 'ambiguous prefix');
one_line_error(run_cli('flamegraph', $clean, '--trace', $T3), 1,
    qr{no CPU sample in \Q$clean\E is labelled with trace $T3 \(was otel_profiling on for its location\?\)},
    'trace without samples');
one_line_error(run_cli('flamegraph', $clean, '--trace', $T2, '--span', $S1), 1,
    qr{span $S1 not found in trace $T2 in \Q$clean\E .*}, 'span of another trace');
one_line_error(run_cli('flamegraph', $dir, '--trace', 'xyz'), 2,
    qr{flamegraph: --trace "xyz" is not a trace id \(1 to 32 hex digits\)}, 'not a trace id');

mkdir "$tmp/empty" or die;
one_line_error(run_cli('traces', "$tmp/empty"), 1,
    qr{\Q$tmp\E/empty: no traces\.jsonl and no cpu-\*\.pb\.gz files \(not a directory written by the file exporter\?\)},
    'empty directory (traces)');
one_line_error(run_cli('flamegraph', "$tmp/empty"), 1, qr{.*no traces\.jsonl and no cpu-\*\.pb\.gz files.*},
    'empty directory (flamegraph)');
one_line_error(run_cli('folded', "$tmp/missing"), 1, qr{\Q$tmp\E/missing: No such file or directory}, 'missing directory');
one_line_error(run_cli('folded', "$tmp/f.txt"), 1, qr{\Q$tmp\E/f\.txt: not a directory}, 'a file, not a directory');

mkdir "$tmp/profonly" or die;
write_file("$tmp/profonly/cpu-1795316400000-1.pb.gz", $gz);
one_line_error(run_cli('traces', "$tmp/profonly"), 1,
    qr{\Q$tmp\E/profonly/traces\.jsonl: not found \(no spans were exported to \Q$tmp\E/profonly\)},
    'traces without traces.jsonl');
is run_cli('folded', "$tmp/profonly")->{exit}, 0, '... folded works without it';
mkdir "$tmp/jsononly" or die;
write_file("$tmp/jsononly/traces.jsonl", $lines[0]);
one_line_error(run_cli('flamegraph', "$tmp/jsononly", '--trace', $T1), 1,
    qr{\Q$tmp\E/jsononly: no CPU profiles \(cpu-\*\.pb\.gz\), so no samples of trace $T1},
    'flamegraph without profiles');
$r = run_cli('traces', "$tmp/jsononly");
is $r->{exit}, 0, 'traces without profiles';
like $r->{out}, qr{; no CPU profiles$}m, '... says there are none';
mkdir "$tmp/allbad" or die;
write_file("$tmp/allbad/traces.jsonl", "{nope\n[1,2]\n");
$r = run_cli('traces', "$tmp/allbad");
is $r->{exit}, 1, 'only bad lines: error';
like $r->{err}, qr{allbad/traces\.jsonl:1: malformed JSON.*\n.*allbad/traces\.jsonl:2: not an OTLP.*\nspanprof: \Q$tmp\E/allbad/traces\.jsonl: no spans \(2 lines, 2 skipped\)\n\z},
    '... after a warning per line';

# --- usage -----------------------------------------------------------------

one_line_error(run_cli('frobnicate', $dir), 2, qr{unknown command "frobnicate".*}, 'unknown command');
one_line_error(run_cli('traces', $dir, '--frob'), 2, qr{traces: unknown option "--frob" \(see spanprof traces --help\)}, 'unknown option');
one_line_error(run_cli('folded', $dir, '--slowest', 3), 2, qr{folded: unknown option "--slowest".*}, 'option of another command');
one_line_error(run_cli('traces', $dir, '--slowest', 0), 2, qr{traces: --slowest takes a number from 1 to 1000000, not "0"}, 'bad number');
one_line_error(run_cli('traces', $dir, '--since', 'yesterday'), 2, qr{traces: --since "yesterday": not a time .*}, 'bad time');
one_line_error(run_cli('folded', $dir, '--range', '5..4'), 2, qr{folded: --range "5\.\.4": the range ends before it starts .*}, 'bad range');
one_line_error(run_cli('traces'), 2, qr{traces: which directory\? .*}, 'no directory');
one_line_error(run_cli('traces', $dir, $dir), 2, qr{traces: unexpected argument .*}, 'two directories');
one_line_error(run_cli('folded', $dir, '--trace'), 2, qr{folded: --trace needs a value .*}, 'missing value');

# --- --type: the sample type of multi-type profiles -------------------------
# Go heap profiles (four sample types, no samples/count) and a cpu + wall
# profile, encoded by protoc from text: each type gives its own values.
{
    my $heap = "$tmp/heap";
    mkdir $heap or die;
    my @ht = ([qw(alloc_objects count)], [qw(alloc_space bytes)],
              [qw(inuse_objects count)], [qw(inuse_space bytes)]);
    my %common = (types => \@ht, period_type => [qw(space bytes)], period => 524288,
                  functions => [qw(main alloc_a alloc_b)], locations => [[1], [2], [3]]);
    write_file("$heap/cpu-${T0}000-7.pb.gz", gzip_bytes(pprof_encode(profile_text(%common,
        time => $T0 * 1e9, duration => 10e9,
        samples => [ { stack => [2, 1], values => [10, 40960, 2, 8192] },
                     { stack => [3, 1], values => [5, 1000, 5, 1000] } ]))));
    write_file("$heap/cpu-" . ($T0 + 10) . "000-7.pb.gz", gzip_bytes(pprof_encode(profile_text(%common,
        time => ($T0 + 10) * 1e9, duration => 10e9,
        samples => [ { stack => [2, 1], values => [1, 4096, 1, 4096] },
                     { stack => [3, 1], values => [7, 7000, 0, 0] } ]))));

    my %want = (
        ''                  => "main;alloc_a 11\nmain;alloc_b 12\n",   # the first type
        alloc_objects       => "main;alloc_a 11\nmain;alloc_b 12\n",
        alloc_space         => "main;alloc_a 45056\nmain;alloc_b 8000\n",
        inuse_objects       => "main;alloc_a 3\nmain;alloc_b 5\n",
        'inuse_space/bytes' => "main;alloc_a 12288\nmain;alloc_b 1000\n",
    );
    for my $t (sort keys %want) {
        my $r = run_cli('folded', $heap, ($t ne '' ? ('--type', $t) : ()));
        is $r->{exit}, 0, "heap folded --type '$t': exit 0" or diag $r->{err};
        is $r->{out}, $want{$t}, "heap folded --type '$t': its own values";
    }
    my $types = 'alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes';
    for my $t ('nope', 'inuse_space/count', 'samples') {
        one_line_error(run_cli('folded', $heap, '--type', $t), 1,
            qr{\Q$heap\E/cpu-${T0}000-7\.pb\.gz: no sample type "\Q$t\E" \(--type\); its sample types: \Q$types\E},
            "--type $t: unknown, the available ones listed");
    }
    one_line_error(run_cli('traces', $heap, '--type', 'cpu'), 2,
        qr{traces: unknown option "--type".*}, '--type is not a traces option');

    my $r = run_cli('flamegraph', $heap, '--type', 'alloc_space', '-o', "$tmp/heap.svg");
    is $r->{exit}, 0, 'heap flamegraph --type alloc_space' or diag $r->{err};
    my $svg = read_file("$tmp/heap.svg");
    my %f = map { $_->{name} => $_ } svg_frames($svg);
    like $f{alloc_a}{info} // '', qr{\(45056 alloc_space/bytes, 84\.92%\)}, 'hover: alloc_a 45056 bytes, its share';
    like $f{alloc_b}{info} // '', qr{\(8000 alloc_space/bytes, 15\.08%\)}, 'hover: alloc_b 8000 bytes';
    like $svg, qr{values: alloc_space/bytes}, 'the subtitle names the type';

    $r = run_cli('diff', $heap, '--type', 'inuse_space', '--base', "$T0.." . ($T0 + 5),
                 '--compare', ($T0 + 10) . '..' . ($T0 + 15), '-o', "$tmp/heapdiff.svg");
    is $r->{exit}, 0, 'heap diff --type inuse_space' or diag $r->{err};
    %f = map { $_->{name} => $_ } svg_frames(read_file("$tmp/heapdiff.svg"));
    like $f{alloc_a}{info} // '', qr{compare 4096 inuse_space/bytes, 100\.00%; base 8192 inuse_space/bytes, 89\.12%},
        'diff: each range\'s inuse_space of alloc_a';
    $r = run_cli('diff', $heap, '--type', 'nope', '--base', "$T0.." . ($T0 + 5),
                 '--compare', ($T0 + 10) . '..' . ($T0 + 15), '-o', "$tmp/x.svg");
    is $r->{exit}, 1, 'diff --type nope: exit 1';
    like $r->{err}, qr{no sample type "nope"}, '... the reason';

    $r = run_cli('pprof', $heap, '--type', 'alloc_space', '-o', "$tmp/heap.pb.gz");
    is $r->{exit}, 0, 'heap pprof --type alloc_space' or diag $r->{err};
    my $txt = pprof_decode(gunzip_bytes(read_file("$tmp/heap.pb.gz")));
    my @strs = map { my $s = $_; $s =~ s/\\(.)/$1/g; $s } $txt =~ /^string_table: "(.*)"$/mg;
    my @st = $txt =~ /^sample_type \{\s*type: (\d+)\s*unit: (\d+)\s*\}/mg;
    is join(',', map { $strs[$_] } @st), 'alloc_space,bytes', 'protoc: one sample_type, alloc_space/bytes';
    my @ptu = $txt =~ /^period_type \{\s*type: (\d+)\s*unit: (\d+)\s*\}/m;
    is join(',', map { $strs[$_] } @ptu), 'space,bytes', '... the period type of the input';
    my @vals = sort { $a <=> $b } map { my @v = /value: (-?\d+)/g; "@v" } $txt =~ /^sample \{(.*?)^\}/msg;
    is_deeply \@vals, [1000, 4096, 7000, 40960], '... each sample its alloc_space value alone';
    # the pprof written reads back with its one type
    my $back = "$tmp/heapback";
    mkdir $back or die;
    write_file("$back/cpu-${T0}000-1.pb.gz", read_file("$tmp/heap.pb.gz"));
    $r = run_cli('folded', $back, '--type', 'alloc_space');
    is $r->{out}, "main;alloc_a 45056\nmain;alloc_b 8000\n", '... and reads back with the same values';

    # cpu + wall (as a wall-clock sampler would write): --type wall
    my $cw = "$tmp/cpuwall";
    mkdir $cw or die;
    write_file("$cw/cpu-${T0}000-9.pb.gz", gzip_bytes(pprof_encode(profile_text(
        types => [[qw(samples count)], [qw(cpu nanoseconds)], [qw(wall nanoseconds)]],
        time => $T0 * 1e9, duration => 10e9, period => 1e6,
        functions => [qw(main work sleep)], locations => [[1], [2], [3]],
        samples => [ { stack => [2, 1], values => [3, 3e6, 3e6] },
                     { stack => [3, 1], values => [0, 0, 50e6] } ]))));
    is run_cli('folded', $cw)->{out}, "main;work 3\n", 'cpu+wall: default samples/count (the off-CPU sample has none)';
    is run_cli('folded', $cw, '--type', 'cpu')->{out}, "main;work 3000000\n", '--type cpu: CPU ns';
    is run_cli('folded', $cw, '--type', 'wall')->{out}, "main;sleep 50000000\nmain;work 3000000\n",
        '--type wall: wall ns, the sleeping stack too';
    # the exporter's own profiles: --type cpu gives count x period
    is run_cli('folded', $dir, '--type', 'cpu/nanoseconds')->{out}, <<'EOF', 'our profiles: --type cpu/nanoseconds';
main;ngx_worker;epoll_wait 70000000
main;ngx_worker;handler_a 2000000
main;ngx_worker;handler_a;cold_a 9000000
main;ngx_worker;handler_a;hot_a 42000000
main;ngx_worker;handler_a;inlined_helper 3000000
EOF
}

$r = run_cli('--help');
is $r->{exit}, 0, '--help: exit 0';
for my $o (qw(traces flamegraph diff folded pprof --slowest --service --since --until --ids
              --trace --span --range -o --output --width --title --base --compare --type --help --version)) {
    like $r->{out}, qr{(?<![\w-])\Q$o\E(?![\w-])}, "help documents $o";
}
like $r->{out}, qr{RFC 3339}, 'help documents the time forms';
like $r->{out}, qr{overlaps}, 'help explains how ranges select profile files';
$r = run_cli('flamegraph', '--help');
is $r->{exit}, 0, 'flamegraph --help';
like $r->{out}, qr{^spanprof flamegraph DIR}m, '... shows the command\'s help';
unlike $r->{out}, qr{^spanprof traces DIR}m, '... only that command';
is run_cli('help', 'diff')->{exit}, 0, 'help diff';
like run_cli('--version')->{out}, qr{^spanprof \d+\.\d+\.\d+$}, '--version';
is run_cli()->{exit}, 2, 'no arguments: usage, exit 2';

SKIP: {
    my ($script) = grep { -x "$_/script" } split /:/, ($ENV{PATH} || '');
    skip 'script(1) not installed', 2 unless $script;
    my $cmd = join ' ', map { "'$_'" } cli_bin(), 'flamegraph', $dir;
    $r = run_cmd({}, 'script', '-qec', $cmd, '/dev/null');
    is $r->{exit}, 2, 'SVG to a terminal: refused';
    like $r->{out}, qr{flamegraph: not writing an SVG to a terminal; use -o FILE or redirect standard output},
        '... with a hint';
}

done_testing;
