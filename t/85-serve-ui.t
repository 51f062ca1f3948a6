#!/usr/bin/perl
# spanprof serve's web UI in a real browser (Debian's headless chromium via
# chromium-driver and python3-selenium, t/serve_ui.py), fed by nginx with
# the module exporting to it: search, open the slowest trace, open its
# span's flame graph (three clicks), zoom, search a function, hover, open a
# diff; a span name holding <script> is shown as text. Profile types
# (t/serve_ui_types.py), from an nginx exporting cpu and wall and a request
# that blocks: the waterfall's CPU and off-CPU columns, the type selector
# switching the span's flame graph to off_cpu and wall and the diff to
# off_cpu, the workers page without and then with in-use memory (profiles
# made with protoc --encode) and its in-use flame graph. Screenshots are
# kept in build/test-artifacts/serve-ui/.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Path qw(make_path);
use JSON::PP;
use File::Temp ();
use Time::HiRes ();
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

# --- profile types -----------------------------------------------------------

my $wngx = start_nginx(burn => 1, receiver_url => $sv->otlp_url, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name ui-wall;
otel_profiling_types cpu wall;
otel_profiling_wall_rate 100;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /block { spanprof_block 200; }
    location /tick  { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF
my $b = http_get($wngx->port, '/block');
my ($btid, $bsid) = ($b->{headers}{'x-trace-id'}, $b->{headers}{'x-span-id'});
my $bspan;
ok wait_until(20, sub {
    http_get($wngx->port, '/tick');
    my %t = map { $_->{type} => $_->{value} }
        @{ $sv->api('/api/types', trace => $btid, span => $bsid) };
    return 0 unless ($t{off_cpu} // 0) >= 180e6 && ($t{wall} // 0) >= 180e6;
    ($bspan) = grep { $_->{span_id} eq $bsid } @{ $sv->api("/api/traces/$btid")->{spans} };
    return $bspan && defined $bspan->{off_cpu_ns};
}), 'the blocking request\'s span and its wall and off-CPU samples are stored';

my $BLOCK = 'spanprof_burn_block_on_pipe';
sub ui_types {
    my $j = `/usr/bin/python3 t/serve_ui_types.py @_ 2>&1`;
    my ($l) = $j =~ /^(\{.*\})\s*$/m;
    return (eval { decode_json($l // '') } || {}, $j);
}
my ($ty, $tyout) = ui_types('types', $sv->ui_url . '/', $shots, $btid, $bsid, $BLOCK);
is $ty->{error}, undef, 'types: the browser went through every step' or diag $tyout;
is_deeply $ty->{steps}, [qw(trace span-flame switch-off_cpu switch-wall diff-off_cpu workers-no-memory done)],
    'types: the steps, in order';
my @head = @{ $ty->{waterfall_head} || [] };
ok((grep { $_ eq 'CPU' } @head) && (grep { $_ eq 'off-CPU' } @head) && (grep { $_ eq 'wall' } @head),
    'the waterfall has wall, CPU and off-CPU columns') or diag explain \@head;
is $ty->{row_ns}{'off-cpu'}, $bspan->{off_cpu_ns}, "the span's off-CPU cell is the API's ($bspan->{off_cpu_ns} ns)";
is $ty->{row_ns}{cpu}, $bspan->{cpu_ns}, "its CPU cell too ($bspan->{cpu_ns} ns)";
like $ty->{row}{'off-cpu'} // '', qr/^\d+(\.\d+)? ms$/, 'shown in ms: ' . ($ty->{row}{'off-cpu'} // '');
my %opt = map { $_ => 1 } @{ $ty->{type_options} || [] };
ok $opt{cpu} && $opt{wall} && $opt{off_cpu}, 'the selector offers cpu, wall and off_cpu'
    or diag explain $ty->{type_options};
ok !$opt{inuse_space}, 'and no type the span has no sample of';
like $ty->{cpu_title} // '', qr/^CPU of span/, 'the flame graph opens on CPU';
like $ty->{off_cpu_title} // '', qr/^off-CPU of span/, 'switched to off_cpu: ' . ($ty->{off_cpu_title} // '');
like $ty->{off_cpu_url} // '', qr/type=off_cpu/, 'the address says the type';
cmp_ok $ty->{off_cpu_widths}{$BLOCK} // 0, '>=', 0.8 * ($ty->{graph_width} // 1),
    "the off-CPU graph: $BLOCK is most of its width";
my %api_total = map { $_ => $sv->api('/api/flame', trace => $btid, span => $bsid, type => $_)->{tree}{t}[0] }
    qw(cpu off_cpu);
is $ty->{cpu_total}, $api_total{cpu}, "the CPU graph drew the span's CPU ($api_total{cpu} ns)";
is $ty->{off_cpu_total}, $api_total{off_cpu}, "the off-CPU graph its off-CPU time ($api_total{off_cpu} ns)";
cmp_ok $api_total{off_cpu}, '>', $api_total{cpu}, 'two different graphs: the request blocked more than it ran';
like $ty->{wall_title} // '', qr/^wall-clock of span/, 'switched to wall';
cmp_ok $ty->{wall_widths}{$BLOCK} // 0, '>=', 0.8 * ($ty->{graph_width} // 1),
    "the wall graph: $BLOCK is most of its width";
like $ty->{diff_title} // '', qr{/block.*off-CPU}, 'the diff switched to off_cpu: ' . ($ty->{diff_title} // '');
ok $ty->{diff_widths}{$BLOCK}, "the off-CPU diff shows $BLOCK";
like $ty->{memory_none} // '', qr/No memory profile/, 'the workers page says there is no memory data';
is $ty->{memory_rows}, 0, 'and shows no memory row';

# In-use memory (the modules do not export it yet): profiles of worker
# 4343 made with protoc --encode, two snapshots a second apart.
my $t0 = int(Time::HiRes::time() * 1e9) - 5e9;
my $snap = sub {
    my ($ts, $v1, $v2) = @_;
    return "profiles { sample_type { type_strindex: 1 unit_strindex: 2 } time_unix_nano: $ts"
        . " samples { stack_index: 1 values: $v1 } samples { stack_index: 2 values: $v2 } }";
};
my $text = 'resource_profiles { resource {'
    . ' attributes { key: "service.name" value { string_value: "ui-mem" } }'
    . ' attributes { key: "process.pid" value { int_value: 4343 } } }'
    . ' scope_profiles { ' . $snap->($t0, 2000000, 100000) . ' ' . $snap->($t0 + 1e9, 6000000, 200000) . ' } }'
    . ' dictionary { string_table: "" string_table: "inuse_space" string_table: "bytes"'
    . ' string_table: "main" string_table: "big_alloc" string_table: "small_alloc"'
    . ' function_table { } function_table { name_strindex: 3 } function_table { name_strindex: 4 }'
    . ' function_table { name_strindex: 5 } location_table { } location_table { lines { function_index: 1 } }'
    . ' location_table { lines { function_index: 2 } } location_table { lines { function_index: 3 } }'
    . ' stack_table { } stack_table { location_indices: [2, 1] } stack_table { location_indices: [3, 1] } }';
my $pb = do {
    my $root = repo_root();
    my $tmp = File::Temp->new;
    print $tmp $text;
    close $tmp;
    my ($rc, $o, $e) = SpanProf::Test::_run(['protoc',
        '--encode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest',
        '-I', "$root/proto", "$root/proto/opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"],
        stdin => $tmp->filename);
    die "protoc --encode: $e" if $rc;
    $o;
};
is $sv->post_otlp('/v1development/profiles', $pb)->{status}, 200, 'in-use memory profiles posted';
my ($mem, $memout) = ui_types('memory', $sv->ui_url . '/', $shots, 4343);
is $mem->{error}, undef, 'memory: the browser went through every step' or diag $memout;
is_deeply $mem->{steps}, [qw(workers-memory memory-flame done)], 'memory: the steps, in order';
is $mem->{memory_bytes}, 6200000, 'the worker\'s latest in-use memory';
like $mem->{memory_row} // '', qr/5\.9 MiB/, 'shown: ' . ($mem->{memory_row} // '');
is $mem->{memory_points}, 2, 'two snapshots';
is $mem->{memory_chart_points}, 2, 'drawn as a line of two points';
is $mem->{memory_none}, 0, 'no "no memory" note any more';
like $mem->{memory_title} // '', qr/^in-use memory of worker profile of pid 4343: 5\.9 MiB/,
    'its in-use flame graph: ' . ($mem->{memory_title} // '');
my $mw = $mem->{memory_widths} || {};
cmp_ok $mw->{big_alloc} // 0, '>=', 0.9 * ($mem->{graph_width} // 1) * 6000000 / 6200000,
    'big_alloc: its share of the latest snapshot';
ok $mw->{small_alloc}, 'small_alloc too';
$wngx->stop;

$ngx->stop;
done_testing;
