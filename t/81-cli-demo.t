#!/usr/bin/perl
# End to end: demo/run.sh (nginx with the module and the demo backend, file
# exporter, profiling, traffic, spanprof traces + flamegraph) in a temporary
# directory; the SVG rendered by headless Chromium must not be blank, its
# scripts must hover and zoom, and the slow route's hot function,
# demo_price_report_compute, must be the widest frame on top of the stack.

use strict;
use warnings;

use File::Temp qw(tempdir);
use Test::More;

use lib 't/lib';
use SpanProf::Cli;

my $HOT = 'demo_price_report_compute';
my $root = repo_root();

need_cli();
my @need = ("$root/build/nginx/ngx_http_spanprof_module.so",
            "$root/build/demo-nginx/ngx_http_demo_backend_module.so");
for my $f (@need) {
    next if -f $f;
    my $msg = "not built: $f (run `make`)";
    BAIL_OUT($msg) if $ENV{SPANPROF_REQUIRE_MODULE};
    plan skip_all => $msg;
}
my ($chromium) = grep { -x } map { ("$_/chromium", "$_/chromium-browser") }
                 split /:/, ($ENV{PATH} || '');
if (!$chromium) {
    my $msg = 'chromium is not installed (Debian package chromium); '
            . 'set SPANPROF_REQUIRE_CHROMIUM=1 to fail instead';
    BAIL_OUT($msg) if $ENV{SPANPROF_REQUIRE_CHROMIUM};
    plan skip_all => $msg;
}

my $tmp = tempdir(CLEANUP => !$ENV{SPANPROF_KEEP});
# nginx's workers (nobody or www-data) must reach the output directory.
chmod 0755, $tmp;
my $demo = "$tmp/demo";
my ($port, $backend) = (free_port(), free_port());

# --- the demo flow -----------------------------------------------------------

my $r = run_cmd({ SPANPROF_DEMO_NO_BUILD => 1, SPANPROF_DEMO_DIR => $demo, SPANPROF_DEMO_EXPORT => 'file',
                  SPANPROF_DEMO_PORT => $port, SPANPROF_DEMO_BACKEND_PORT => $backend },
                'timeout', '180', 'bash', "$root/demo/run.sh");
is $r->{exit}, 0, 'demo/run.sh: exit 0'
    or diag "stdout:\n$r->{out}\nstderr:\n$r->{err}\nerror.log:\n"
            . (-f "$demo/error.log" ? read_file("$demo/error.log") : '(none)');
my $out = $r->{out};
like $out, qr{^== nginx on 127\.0\.0\.1:$port \(front\) -> 127\.0\.0\.1:$backend \(demo backend\)}m,
    'demo: nginx started on the given ports';
like $out, qr{^\{"report":"correlation","instruments":400,"days":1500,"pair":\[\d+,\d+\],"correlation":0\.\d+\}$}m,
    'demo: the slow route answered';
like $out, qr{^\$ spanprof traces \Q$demo\E/out --slowest 5$}m, 'demo: runs spanprof traces';
my $ntraces = () = $out =~ /^TRACE \w{32}  [\d.]+ ms/mg;
is $ntraces, 5, 'demo: five traces in the table';
my ($slowest) = $out =~ /^TRACE (\w{32})/m;
my ($block) = $out =~ /^(TRACE $slowest.*?)(?:\n\n|\n\$)/ms;
like $block, qr{^  \w{16}  SERVER .* GET /api/\s+/api/\s+/api/report$}m,
    'slowest trace: the front span of /api/report';
like $block, qr{^  \w{16}  CLIENT .*GET\s+-\s+127\.0\.0\.1:$backend$}m, '... its proxy CLIENT span';
my ($backend_samples) = $block =~ m{^  \w{16}  SERVER .*  200\s+(\d+)      GET /api/report\s+/api/report\s+/api/report$}m;
ok defined $backend_samples, '... and the backend span, under it';
cmp_ok $backend_samples // 0, '>=', 20, '... which has the CPU samples';
like $out, qr{^\$ spanprof flamegraph \Q$demo\E/out --trace $slowest -o \Q$demo\E/slowest\.svg$}m,
    'demo: runs spanprof flamegraph for the slowest trace';
like $r->{err}, qr{^spanprof: wrote \Q$demo\E/slowest\.svg: \d+ CPU samples from \d+ profiles?, \d+ frames$}m,
    'demo: spanprof says what it wrote';
like $out, qr{^Flame graph of the slowest trace: \Q$demo\E/slowest\.svg$}m, 'demo: prints where the SVG is';

my $svgf = "$demo/slowest.svg";
ok -s $svgf, 'the SVG exists' or BAIL_OUT('no SVG: nothing more to check');
my $svg = read_file($svgf);
my ($wf, $why) = xml_wellformed($svgf);
SKIP: {
    skip 'xmllint not installed', 1 unless defined $wf;
    ok $wf, 'the SVG is well-formed XML' or diag $why;
}
like $svg, qr{<text id="title"[^>]*>GET /api/ \(/api/report\)  [\d.]+ ms  ·  trace $slowest</text>},
    'title: route, path, duration and trace';
like $svg, qr{>\Q$HOT\E</text>}, 'the SVG text names the hot function';

# --- the hot function is the widest frame on top of the stack ---------------

# From the folded stacks: the most self samples, most of the trace's CPU.
$r = run_cli('folded', "$demo/out", '--trace', $slowest);
is $r->{exit}, 0, 'folded of the slowest trace';
my (%self, %total, $all);
for (split /\n/, $r->{out}) {
    my ($stack, $n) = /^(.*) (\d+)$/ or next;
    my @f = split /;/, $stack;
    $self{ $f[-1] } += $n;
    my %seen;
    $total{$_} += $n for grep { !$seen{$_}++ } @f;
    $all += $n;
}
my ($top) = sort { $self{$b} <=> $self{$a} } keys %self;
is $top, $HOT, 'folded: the hot function has the most samples of its own';
cmp_ok $self{$HOT} / ($all || 1), '>=', 0.5, 'folded: it has over half the trace\'s samples'
    or diag "$self{$HOT} of $all";

# In the SVG: only its callers (frames below it that span it) are wider.
my @frames = svg_frames($svg);
my ($hot) = grep { $_->{name} eq $HOT } @frames;
ok $hot, 'SVG: a frame for the hot function' or BAIL_OUT('no hot frame');
my @wider = grep { $_->{width} > $hot->{width} + 0.01 } @frames;
my @not_callers = grep {
    !($_->{y} > $hot->{y} && $_->{x} <= $hot->{x} + 0.01
      && $_->{x} + $_->{width} >= $hot->{x} + $hot->{width} - 0.01)
} @wider;
is_deeply [ map { $_->{name} } @not_callers ], [],
    'SVG: every wider frame is one of its callers';
# The widest plateau: a frame's width less the frames on the row just above
# it (its callees). A frame with any callee at all (a libm call, a sample
# caught in a helper) still has its plateau.
my %rows = map { $_->{y} => 1 } @frames;
my @ys = sort { $a <=> $b } keys %rows;
my %above = map { $ys[$_] => $ys[$_ - 1] } 1 .. $#ys;
my %plateau;
for my $f (@frames) {
    my $w = $f->{width};
    if (defined(my $y = $above{ $f->{y} })) {
        $w -= $_->{width} for grep { $_->{y} == $y && $_->{x} >= $f->{x} - 0.01
                                     && $_->{x} < $f->{x} + $f->{width} - 0.01 } @frames;
    }
    $plateau{ $f->{name} } = $w if $w > ($plateau{ $f->{name} } // -1);
}
my ($widest) = sort { $plateau{$b} <=> $plateau{$a} } keys %plateau;
is $widest, $HOT, 'SVG: it has the widest plateau (width less its callees)'
    or diag join ', ', map { "$_ $plateau{$_}" } (sort { $plateau{$b} <=> $plateau{$a} } keys %plateau)[0 .. 3];

# --- rendering in headless Chromium ---------------------------------------

my ($height) = $svg =~ /<svg [^>]*height="(\d+)"/;
my $png = "$tmp/slowest.png";
my @chrome = ($chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
              '--no-first-run', '--disable-background-networking',
              '--disable-component-update', '--disable-sync',
              "--user-data-dir=$tmp/chromium");
$r = run_cmd({}, 'timeout', '90', @chrome, "--screenshot=$png",
             "--window-size=1200,$height", "file://$svgf");
ok -s $png, 'chromium rendered a PNG' or diag "exit $r->{exit}: $r->{err}";
SKIP: {
    skip 'no PNG', 3 unless -s $png;
    my $info = png_info($png);
    is $info->{width}, 1200, 'PNG: 1200 px wide';
    cmp_ok $info->{colours}, '>', 20, 'PNG: not blank (many colours)' or diag explain $info;
    cmp_ok $info->{non_bg}, '>', 0.3, 'PNG: frames cover much of the picture' or diag explain $info;
}

# The scripts: hover fills the details line, click zooms, the root resets.
(my $probe = $svg) =~ s{</svg>\s*\z}{<script type="text/ecmascript"><![CDATA[
window.addEventListener("load", function () { setTimeout(function () {
  var gs = document.getElementById("frames").getElementsByTagName("g"), hot = null, i, hidden = 0;
  for (i = 0; i < gs.length; i++) {
    if (gs[i].getElementsByTagName("title")[0].textContent.indexOf("$HOT (") == 0) { hot = gs[i]; }
  }
  var rect = hot.getElementsByTagName("rect")[0], res = { before: rect.getAttribute("width") };
  hot.dispatchEvent(new MouseEvent("mouseover"));
  res.details = document.getElementById("details").textContent;
  hot.dispatchEvent(new MouseEvent("click"));
  res.zoomed = rect.getAttribute("width");
  for (i = 0; i < gs.length; i++) { if (gs[i].style.display == "none") { hidden++; } }
  res.hidden = hidden;
  res.unzoom = document.getElementById("unzoom").style.display;
  gs[0].dispatchEvent(new MouseEvent("click"));
  res.reset = rect.getAttribute("width");
  document.documentElement.setAttribute("data-probe", JSON.stringify(res));
}, 10); });
]]></script>
</svg>
};
write_file("$tmp/probe.svg", $probe);
$r = run_cmd({}, 'timeout', '90', @chrome, '--virtual-time-budget=2000', '--dump-dom',
             "file://$tmp/probe.svg");
my ($json) = $r->{out} =~ /data-probe="([^"]*)"/;
ok defined $json, 'chromium ran the SVG\'s script' or diag $r->{err};
SKIP: {
    skip 'no probe result', 5 unless defined $json;
    $json =~ s/&quot;/"/g;
    $json =~ s/&amp;/&/g;
    require JSON::PP;
    my $p = JSON::PP::decode_json($json);
    like $p->{details}, qr{^\Q$HOT\E \(\d+ samples?, [\d.]+%\)$}, 'hover: function, samples and share';
    is $p->{zoomed}, '1180.00', 'click: the frame fills the width';
    cmp_ok $p->{hidden}, '>=', 1, 'click: frames outside it are hidden';
    is $p->{unzoom}, '', 'click: "Reset zoom" shows';
    is $p->{reset}, $p->{before}, 'click on the root: back to the full view';
}

done_testing;
