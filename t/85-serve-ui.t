#!/usr/bin/perl
# spanprof serve's web UI in a real browser (Debian's headless chromium via
# chromium-driver and python3-selenium, t/serve_ui.py), fed by nginx with
# the module exporting to it: search, open the slowest trace, open its
# span's flame graph (three clicks), zoom, search a function, hover, open a
# diff; a span name holding <script> is shown as text. Screenshots are kept
# in build/test-artifacts/serve-ui/.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Path qw(make_path);
use JSON::PP;
use SpanProf::Test;
use SpanProf::Serve;

need_module();
need_burn_module();
plan skip_all => 'spanprof serve not built' unless -x serve_bin();
for my $need ('/usr/bin/chromium', '/usr/bin/chromedriver') {
    next if -x $need;
    plan skip_all => "$need missing (scripts/install-deps installs it)"
        unless $ENV{SPANPROF_REQUIRE_MODULE};
    BAIL_OUT("$need missing");
}

my $sv = start_serve();
my $ngx = start_nginx(burn => 1, receiver_url => $sv->otlp_url, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name ui-test;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    location /slow { spanprof_burn alpha 250; }
    location /fast { spanprof_burn beta 20; }
    location /evil { otel_span_name $http_x_name; return 200 "evil\n"; }
    location /tick { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF

my $evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script>';
my $slow = http_get($ngx->port, '/slow');
http_get($ngx->port, '/fast') for 1 .. 3;
http_get($ngx->port, '/evil', headers => { 'X-Name' => $evil });
my $tid = $slow->{headers}{'x-trace-id'};

ok wait_until(20, sub {
    http_get($ngx->port, '/tick');
    my $r = $sv->get("/api/traces/$tid");
    return 0 unless $r->{status} == 200;
    my $t = decode_json($r->{content});
    return 0 unless ($t->{spans}[0]{cpu_samples} // 0) >= 100;
    return 0 unless @{ $sv->api('/api/traces', route => '/evil') } == 1;
    # The workers page's first row (the most CPU) must already show CPU
    # outside requests (/tick's), wide enough to be drawn: the worker's
    # profile of no request comes in a later export than the spans.
    my $ws = $sv->api('/api/workers', since => '-1h');
    return 0 unless @$ws;
    my $tree = $sv->api('/api/flame', pid => $ws->[0]{pid}, since => '-1h')->{tree};
    my ($none) = grep { $_->{n} eq '[no request]' } @{ $tree->{c} || [] };
    return $none && $none->{t}[0] >= 0.005 * $tree->{t}[0];
}), 'the slow trace with its samples, the evil one, and the worker\'s CPU of no request are stored';

my $shots = repo_root() . '/build/test-artifacts/serve-ui';
make_path($shots);
my $json = `/usr/bin/python3 t/serve_ui.py @{[ $sv->ui_url ]}/ $shots spanprof_burn_alpha /evil 2>&1`;
my ($line) = $json =~ /^(\{.*\})\s*$/m;
my $o = eval { decode_json($line // '') } || {};
# Every step of the plan, in order, and a JSON answer at all: no answer, an
# error or a step left out fails.
ok $o->{done} && !defined $o->{error}
    && join(',', @{ $o->{steps} || [] }) eq join(',', @{ $o->{plan} || ['?'] })
    && join(',', @{ $o->{plan} || [] }) eq 'search,trace,flame,zoom,find,hover,diff,worker,escaped',
    'the browser went through every step' or diag $json;

like $o->{first_row} // '', qr{/slow}, 'the first row of "slowest first" is /slow';
is $o->{clicks_to_flame}, 2, 'search result -> trace -> span: the flame graph after "Find traces" and two clicks';
like $o->{flame_title} // '', qr/CPU of span/, 'the flame graph of the span';
my $w = $o->{frame_widths} || {};
ok $w->{spanprof_burn_alpha}, 'its burn function is a frame';
ok !$w->{spanprof_burn_beta}, 'no frame of the other requests';
cmp_ok $w->{spanprof_burn_alpha} // 0, '>=', 0.6 * ($o->{graph_width} // 1),
    'the burn function is most of the width';
ok $o->{zoom_found}, 'the frame to zoom on';
cmp_ok $o->{zoom_after} // 0, '>=', 0.98 * ($o->{graph_width} // 1),
    "zoomed on $o->{zoom_name}, it spans the width ($o->{zoom_before} -> $o->{zoom_after} px)";
like $o->{matched_text} // '', qr/matched: (\d+\.\d+)%/, 'the search sums the matching share';
my ($pct) = ($o->{matched_text} // '') =~ /matched: (\d+\.\d+)%/;
cmp_ok $pct // 0, '>=', 60, 'burn_alpha holds most of the span';
cmp_ok $o->{highlighted} // 0, '>=', 1, 'matching frames highlighted';
like $o->{tooltip} // '', qr/spanprof_burn_alpha.*total [\d.]+ ms CPU.*self [\d.]+ ms/s,
    'hover: total and self CPU';
like $o->{diff_title} // '', qr{/slow}, 'the diff page of the route';
ok((grep { /rgba?\(255, \d+, \d+/ } @{ $o->{diff_colours} || [] }), 'the diff is drawn in red/blue')
    or diag explain $o->{diff_colours};
ok((grep { $_ eq '[no request]' } @{ $o->{worker_frames} || [] }),
    'a worker\'s whole profile, from the workers page, shows [no request]');
is $o->{evil_cell}, $evil, 'a span name with markup is shown as text';
ok !$o->{pwned}, 'and never runs';
is $o->{script_elements}, 0, 'no script element made it into the page';
ok -s "$shots/3-flame.png", "screenshots in $shots";

$ngx->stop;
done_testing;
