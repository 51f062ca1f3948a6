#!/usr/bin/perl
# The Quick start's demo as a newcomer meets it: demo/run.sh sends the
# module's spans and profiles to `spanprof serve` and prints the UI's URL;
# in a real browser (headless chromium, t/serve_ui.py) the slowest trace is
# the first row, and three clicks (the row, the span with the CPU samples,
# nothing else) reach the flame graph of the slow request's own code,
# demo_price_report_compute. Screenshots in build/test-artifacts/serve-demo/.
use strict;
use warnings;
use lib 't/lib';
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use JSON::PP;
use Test::More;
use SpanProf::Cli;

my $HOT = 'demo_price_report_compute';
my $root = repo_root();
need_cli();
for my $f ("$root/build/nginx/ngx_http_spanprof_module.so",
           "$root/build/demo-nginx/ngx_http_demo_backend_module.so",
           '/usr/bin/chromium', '/usr/bin/chromedriver') {
    next if -e $f;
    BAIL_OUT("missing: $f") if $ENV{SPANPROF_REQUIRE_MODULE};
    plan skip_all => "missing: $f";
}

my $tmp = tempdir(CLEANUP => !$ENV{SPANPROF_KEEP});
chmod 0755, $tmp;
my $demo = "$tmp/demo";
my ($port, $backend, $otlp, $ui) = (free_port(), free_port(), free_port(), free_port());

my $r = run_cmd({ SPANPROF_DEMO_NO_BUILD => 1, SPANPROF_DEMO_DIR => $demo,
                  SPANPROF_DEMO_PORT => $port, SPANPROF_DEMO_BACKEND_PORT => $backend,
                  SPANPROF_DEMO_OTLP_PORT => $otlp, SPANPROF_DEMO_UI => "127.0.0.1:$ui" },
                'timeout', '180', 'bash', "$root/demo/run.sh");
my $pid = -f "$demo/serve.pid" ? read_file("$demo/serve.pid") : undef;
chomp $pid if defined $pid;
# The demo leaves spanprof serve running (not our child: poll, then KILL).
END {
    if ($pid && kill 'TERM', $pid) {
        my $t = time + 10;
        select(undef, undef, undef, 0.1) while kill(0, $pid) && time < $t;
        kill 'KILL', $pid;
    }
}

is $r->{exit}, 0, 'demo/run.sh: exit 0' or diag "$r->{out}\n$r->{err}";
like $r->{out}, qr{spans and profiles to spanprof serve \(127\.0\.0\.1:$otlp\)}, 'nginx exports to spanprof serve';
my ($url) = $r->{out} =~ m{^Open (http://127\.0\.0\.1:$ui/) }m;
ok $url, 'the UI\'s URL is printed' or diag $r->{out};
like $r->{out}, qr/^Stop it with: kill $pid$/m, 'and how to stop it';
ok $pid && kill(0, $pid), 'spanprof serve keeps running';

my $shots = "$root/build/test-artifacts/serve-demo";
make_path($shots);
my $json = `/usr/bin/python3 $root/t/serve_ui.py $url $shots $HOT 2>&1`;
my ($line) = $json =~ /^(\{.*\})\s*$/m;
my $o = eval { decode_json($line // '') } || {};
# Every step of the plan, in order, and a JSON answer at all: no answer, an
# error or a step left out fails.
ok $o->{done} && !defined $o->{error}
    && join(',', @{ $o->{steps} || [] }) eq join(',', @{ $o->{plan} || ['?'] })
    && join(',', @{ $o->{plan} || [] }) eq 'search,trace,flame,zoom,find,hover,diff,worker',
    'the browser went through every step' or diag $json;
like $o->{first_row} // '', qr{/api/}, 'the first row: the slowest trace, a /api/ request';
like $o->{span_clicked} // '', qr{GET /api/report}, 'the span with the CPU: the backend\'s /api/report';
is $o->{clicks_to_flame}, 2, 'two clicks from the page the URL opens (it lists the slowest first), three with "Find traces"';
my $w = $o->{frame_widths} || {};
ok $w->{$HOT}, "$HOT is in the flame graph" or diag explain [ sort keys %$w ];
cmp_ok $w->{$HOT} // 0, '>=', 0.5 * ($o->{graph_width} // 1), 'and most of its width';
like $o->{matched_text} // '', qr/matched: (\d+\.\d+)%/, 'searching it gives its share';
done_testing;
