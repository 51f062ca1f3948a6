#!/usr/bin/perl
# CPU profiling of one request at a time (one worker, 1000 Hz): the samples
# taken while a request's code runs carry its trace/span ids, in the OTLP
# profiles POSTed to {endpoint}/v1development/profiles (Link of each Sample)
# and in the pprof files of the file exporter (labels trace_id, span_id,
# span_name); stacks are symbolized (exact names for symbols, "<lib>+0x<hex>"
# otherwise); the SERVER span of a profiled request carries
# pyroscope.profile.id; a location with `otel_profiling off` is not
# labelled although its CPU is sampled; every linked span id belongs to a
# SERVER span that was exported.
#
# Uses the test-only module t/ngx_burn (spanprof_burn alpha|beta <ms>).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $ALPHA = 'spanprof_burn_alpha';
my $BETA  = 'spanprof_burn_beta';
my @BURN_CALLERS = qw(ngx_http_spanprof_burn_handler ngx_http_spanprof_burn_step);

my $SERVER = <<'EOF';
otel_service_name prof-single;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /alpha { spanprof_burn alpha 400; }
    location /beta  { otel_profiling off; spanprof_burn beta 200; }
    location /cheap { return 200; }
    # a few ms of CPU after the requests under test, so that the interval
    # holding their end has samples and is exported
    location /tick  { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF

sub pct { my ($a, $b) = @_; return $b ? sprintf('%.1f%%', 100 * $a / $b) : 'n/a' }

# ---------------------------------------------------------------------------
# OTLP over HTTP (tests 1, 3, 4)
# ---------------------------------------------------------------------------
my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, burn => 1,
    conf => "otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }\n$SERVER");

my $t0 = time;
my $ra = http_get($ngx->port, '/alpha');
my $rb = http_get($ngx->port, '/beta');
# after /alpha's 400 ms: its request pool's memory is likely reused
my $rc = http_get($ngx->port, '/cheap');
my $t_end = time;
my ($covered, @samples) = wait_otlp_covering($recv, $t_end, 15,
    poke => sub { http_get($ngx->port, '/tick') });
my @spans = sync_spans($recv, $ngx->port);
my ($sa) = by_path('/alpha', @spans);
my ($sb) = by_path('/beta', @spans);
my ($sc) = by_path('/cheap', @spans);
my %span_by_id = map { $_->{span_id} => $_ } server_spans(@spans);
my %names = map { $_->{span_id} => "$_->{name} $_->{attrs}{'url.path'}" } server_spans(@spans);

subtest 'profiles arrived' => sub {
    is $ra->{status}, 200, '/alpha answered 200';
    is $rb->{status}, 200, '/beta answered 200';
    ok $covered, 'an OTLP profile covering the end of the requests arrived'
        or diag $recv->summary;
    my @reqs = profile_requests($recv);
    ok @reqs >= 1, scalar(@reqs) . ' profile export request(s)';
    for my $q (@reqs) {
        like $q->{headers}{'content-type'} // '', qr{^application/x-protobuf$}i,
            "request #$q->{seq}: Content-Type application/x-protobuf";
        is $q->{path}, '/v1development/profiles', "request #$q->{seq}: path";
    }
    my $p = $samples[0] ? $samples[0]{profile} : {};
    is $p->{sample_type}, 'cpu/nanoseconds', 'sample_type cpu/nanoseconds (values: CPU time)';
    is $p->{period_type}, 'cpu/nanoseconds', 'period_type cpu/nanoseconds';
    is $p->{period}, 1_000_000, 'period 1 ms (1000 Hz)';
    is $p->{scope}, 'spanprof', 'scope spanprof';
    is $samples[0]{resource}{'service.name'}, 'prof-single', 'resource service.name' if @samples;
    is $samples[0]{resource}{'process.pid'}, ($ngx->worker_pids)[0], 'resource process.pid is the worker' if @samples;
};

# 1. the request's samples carry its link, and vice versa
subtest 'OTLP: samples of /alpha are linked to its span' => sub {
    my $sid = $ra->{headers}{'x-span-id'} // '';
    my $tid = $ra->{headers}{'x-trace-id'} // '';
    like $sid, qr/^[0-9a-f]{16}$/, 'X-Span-Id';
    ok $sa, 'SERVER span of /alpha received' or return diag span_summary(@spans);
    is $sa->{span_id}, $sid, 'its span_id is X-Span-Id';
    is $sa->{trace_id}, $tid, 'its trace_id is X-Trace-Id';

    my @alpha  = grep { has_frame($_, $ALPHA) } @samples;
    my @good   = grep { sample_span($_) eq $sid && sample_trace($_) eq $sa->{trace_id} } @alpha;
    my @linked = grep { sample_span($_) eq $sid } @samples;
    my @linked_alpha = grep { has_frame($_, $ALPHA) } @linked;
    my ($wa, $wg, $wl, $wla) = map { total(@$_) } \@alpha, \@good, \@linked, \@linked_alpha;

    my $diag = stacks_summary(\@samples, 15, names => \%names);
    ok $wa > 0, "samples with $ALPHA on the stack: weight $wa" or diag $diag;
    ok $wa && $wg / $wa >= 0.9, "of those, " . pct($wg, $wa) . " carry the request's link (>= 90%)"
        or diag $diag;
    ok $wl && $wla / $wl >= 0.9, "of the samples linked to it, " . pct($wla, $wl)
        . " have $ALPHA on the stack (>= 90%)" or diag $diag;
    ok $wl >= 100, "linked weight $wl >= 100 (400 ms at 1000 Hz)" or diag $diag;
    ok $wl <= 600, "linked weight $wl <= 600 (not more CPU than the request used)" or diag $diag;

    my @bad_trace = grep { sample_trace($_) ne $sa->{trace_id} } @linked;
    is scalar @bad_trace, 0, 'every sample linked to the span carries its trace id';
    my @bad_name = grep { ($_->{attrs}{'span.name'} // '') ne 'GET /alpha' } @linked;
    is scalar @bad_name, 0, 'linked samples have the attribute span.name "GET /alpha"'
        or diag explain [ map { $_->{attrs} } @bad_name[0 .. ($#bad_name < 3 ? $#bad_name : 3)] ];

    # A sample can only be taken while the span's code runs: its timestamps
    # lie between the span's start and end (2 ms of slack).
    my @ts = map { @{ $_->{timestamps} } } @linked;
    ok @ts > 0, scalar(@ts) . ' sample timestamps';
    my @outside = grep { $_ < $sa->{start} - 2e6 || $_ > $sa->{end} + 2e6 } @ts;
    is scalar @outside, 0, 'all timestamps of linked samples lie inside the span'
        or diag sprintf("span %.6f .. %.6f; outside: %s", $sa->{start} / 1e9, $sa->{end} / 1e9,
            join(' ', map { sprintf '%.6f', $_ / 1e9 } @outside[0 .. ($#outside < 9 ? $#outside : 9)]));
    my @short = grep { @{ $_->{timestamps} } && @{ $_->{timestamps} } != @{ $_->{values} } } @samples;
    is scalar @short, 0, 'samples with timestamps have one value per timestamp';
    # each value is one SIGPROF's CPU time: its weight (>= 1) times the 1 ms
    # period it was taken at
    my @odd = grep { $_ < 1_000_000 || $_ % 1_000_000 } map { @{ $_->{values} } } @samples;
    is scalar @odd, 0, 'every value is a whole number (>= 1) of 1 ms periods'
        or diag "values: @odd[0 .. ($#odd < 9 ? $#odd : 9)]";
};

# 3. pyroscope.profile.id; a location with otel_profiling off
subtest 'pyroscope.profile.id; otel_profiling off is not labelled' => sub {
    ok $sa && $sb, 'SERVER spans of /alpha and /beta' or return diag span_summary(@spans);
    is $sa->{attrs}{'pyroscope.profile.id'}, $sa->{span_id}, '/alpha: pyroscope.profile.id = its span_id';
    is $sa->{attr_types}{'pyroscope.profile.id'}, 'string', '... a string attribute';
    ok !exists $sb->{attrs}{'pyroscope.profile.id'}, '/beta (otel_profiling off): no pyroscope.profile.id'
        or diag span_summary($sb);
    is $sb->{span_id}, $rb->{headers}{'x-span-id'}, '/beta span id is X-Span-Id';

    my @of_beta = grep { sample_span($_) eq $sb->{span_id} } @samples;
    is total(@of_beta), 0, 'no sample carries the span of /beta'
        or diag stacks_summary(\@of_beta, 10, names => \%names);
    my @beta = grep { has_frame($_, $BETA) } @samples;
    ok total(@beta) >= 50, 'the sampler saw /beta burn (weight ' . total(@beta) . ' with ' . $BETA . ')'
        or diag stacks_summary(\@samples, 15, names => \%names);
    my @beta_linked = grep { sample_span($_) ne '' } @beta;
    is total(@beta_linked), 0, "no sample with $BETA on the stack carries any span"
        or diag stacks_summary(\@beta_linked, 10, names => \%names);
};

# A profiled request's CPU time starts at zero: its record's counters are
# zeroed when it is first profiled, not carried from memory a request before
# it used (the context is allocated without clearing its record).
subtest 'a cheap request after a busy one: its own CPU time' => sub {
    ok $sa, 'SERVER span of /alpha received' or return;
    ok $sc, 'SERVER span of /cheap received' or return diag span_summary(@spans);
    ok exists $sc->{attrs}{'spanprof.cpu_time_ns'}, '/cheap: spanprof.cpu_time_ns';
    my $cpu = $sc->{attrs}{'spanprof.cpu_time_ns'} // -1;
    ok $cpu >= 0 && $cpu < 100e6, "/cheap: spanprof.cpu_time_ns $cpu < 100 ms (/alpha's: "
        . ($sa->{attrs}{'spanprof.cpu_time_ns'} // 'none') . ')';
    ok !exists $sc->{attrs}{'spanprof.wall_time_ns'}, '/cheap: no wall time (wall sampling off)';
};

# 4. linked ids are ids of exported SERVER spans
subtest 'every linked span is an exported SERVER span' => sub {
    my %linked;
    $linked{ sample_span($_) } = sample_trace($_) for grep { sample_span($_) ne '' } @samples;
    ok scalar(keys %linked) >= 1, scalar(keys %linked) . ' distinct linked span(s)';
    for my $id (sort keys %linked) {
        my $s = $span_by_id{$id};
        ok $s, "linked span $id is a SERVER span received" or next;
        is $linked{$id}, $s->{trace_id}, "... with the same trace id ($s->{name})";
    }
    diag span_summary(server_spans(@spans)) unless Test::More->builder->is_passing;
};

is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
$ngx->stop;

# ---------------------------------------------------------------------------
# 2. file exporter: pprof files
# ---------------------------------------------------------------------------
subtest 'file exporter: pprof labels and symbols' => sub {
    my $fng = start_nginx(burn => 1, dirs => ['prof'],
        conf => "otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }\n$SERVER");
    my $dir = $fng->prefix . '/prof';
    my ($worker) = $fng->worker_pids;
    my $t_start = time;
    my $r = http_get($fng->port, '/alpha');
    is $r->{status}, 200, '/alpha answered 200';
    my $sid = $r->{headers}{'x-span-id'} // '';
    my $tid = $r->{headers}{'x-trace-id'} // '';
    # the last profile is written when the worker exits
    my $took = $fng->quit(15);
    ok $took < 10, "quit in $took s";

    my @files = pprof_files($dir);
    ok @files >= 1, scalar(@files) . ' pprof file(s)' or return diag `ls -la $dir`;
    for my $f (@files) {
        my ($ms, $pid) = $f =~ m{/cpu-(\d+)-(\d+)\.pb\.gz$};
        is $pid, $worker, "$f: named after the worker's pid";
        ok $ms >= ($t_start - 30) * 1000 && $ms <= (time + 1) * 1000, "$f: unix ms in the name";
    }
    my (@s, %fn_names, %alpha_w);
    for my $f (@files) {
        my $p = eval { read_pprof_file($f) };
        ok $p, "$f decodes as perftools.profiles.Profile" or diag $@;
        next unless $p;
        my $m = pprof_meta($p);
        is_deeply $m->{sample_types}, ['samples/count', 'cpu/nanoseconds'], 'sample types';
        is $m->{period_type}, 'cpu/nanoseconds', 'period type';
        is $m->{period}, 1_000_000, 'period 1 ms';
        ok $m->{time_nanos} > 1e18 && $m->{duration_nanos} > 0, 'time_nanos, duration_nanos';
        $fn_names{$_}++ for @{ $m->{functions} };
        my @fs = pprof_samples($p);
        $alpha_w{$f} = total(grep { has_frame($_, $ALPHA) } @fs);
        push @s, @fs;
    }
    my $diag = stacks_summary(\@s, 15);

    my @bad_val = grep { $_->{cpu_ns} != $_->{count} * 1_000_000 } @s;
    is scalar @bad_val, 0, 'values [count, count * period]';

    my @alpha = grep { has_frame($_, $ALPHA) } @s;
    my $wa = total(@alpha);
    ok $wa >= 100, "weight with $ALPHA on the stack: $wa (>= 100)" or diag $diag;
    my @good = grep { ($_->{labels}{span_id} // '') eq $sid && ($_->{labels}{trace_id} // '') eq $tid
        && ($_->{labels}{span_name} // '') eq 'GET /alpha' } @alpha;
    ok $wa && total(@good) / $wa >= 0.9, pct(total(@good), $wa)
        . ' of them carry labels trace_id, span_id = the response headers, span_name "GET /alpha"'
        or diag $diag;
    my @labelled = grep { exists $_->{labels}{span_id} } @s;
    my @bad_labels = grep { ($_->{labels}{trace_id} // '') !~ /^[0-9a-f]{32}$/
        || $_->{labels}{span_id} !~ /^[0-9a-f]{16}$/ } @labelled;
    is scalar @bad_labels, 0, 'labels trace_id (32 hex) and span_id (16 hex) of '
        . scalar(@labelled) . ' labelled samples' or diag explain [ map { $_->{labels} } @bad_labels ];
    my @below = grep { frame_below($_, $ALPHA, @BURN_CALLERS) } @alpha;
    ok $wa && total(@below) / $wa >= 0.9, pct(total(@below), $wa)
        . " of them have $ALPHA called by " . join(' or ', @BURN_CALLERS) . ' (>= 90%)' or diag $diag;

    # names of symbols are exact; other addresses are "<lib basename>+0x<hex>"
    my @burn_fns = grep { /spanprof_burn/ } keys %fn_names;
    ok exists $fn_names{$ALPHA}, "function \"$ALPHA\" (exact)" or diag join ', ', sort @burn_fns;
    ok exists $fn_names{$_}, "function \"$_\" (static, from .symtab)" for 'ngx_http_spanprof_burn_step';
    my @odd_burn = grep { !/^(?:spanprof_burn_(?:alpha|beta)|ngx_http_spanprof_burn_\w+)$/
        && !/^ngx_http_spanprof_burn_module\.so\+0x[0-9a-f]+$/ } @burn_fns;
    is scalar @odd_burn, 0, 'burn module names are exact symbol names' or diag join ', ', @odd_burn;
    my @hex = grep { /\+0x/ } keys %fn_names;
    my @bad_hex = grep { !/^[^\s\/+]+\+0x[0-9a-f]+$/ } @hex;
    is scalar @bad_hex, 0, 'every "+0x" name is "<basename>+0x<lowercase hex>"' or diag join ', ', @bad_hex;
    SKIP: {
        my $nginx = $ENV{SPANPROF_NGINX} || '/usr/sbin/nginx';
        my $sections = `readelf -S $nginx 2>/dev/null`;
        skip "$nginx has a .symtab or readelf is missing", 1 if $sections !~ /\.dynsym/ || $sections =~ /\.symtab/;
        ok scalar(grep { /^nginx\+0x[0-9a-f]+$/ } @hex), 'stripped nginx: static functions appear as nginx+0x<hex>'
            or diag join ', ', sort keys %fn_names;
    }

    # the spans of the file exporter (traces.jsonl) match the labels
    my @js = server_spans(map { spans_from_json($_->{json} || {}) } read_jsonl("$dir/traces.jsonl"));
    my ($js) = grep { $_->{span_id} eq $sid } @js;
    ok $js, 'the span is in traces.jsonl' or diag span_summary(@js);
    if ($js) {
        is $js->{trace_id}, $tid, '... with the trace id of the labels';
        is $js->{attrs}{'pyroscope.profile.id'}, $sid, '... and pyroscope.profile.id';
    }
    my %jsid = map { $_->{span_id} => 1 } @js;
    my @unknown = grep { !$jsid{ $_->{labels}{span_id} } } @labelled;
    is scalar @unknown, 0, 'every labelled span id is a SERVER span in traces.jsonl';

    SKIP: {
        my ($best) = sort { ($alpha_w{$b} // 0) <=> ($alpha_w{$a} // 0) } @files;
        my ($rc, $out) = go_pprof_raw($best);
        skip 'go is not on PATH', 3 unless defined $rc;
        is $rc, 0, 'go tool pprof -raw reads the file' or diag $out;
        like $out, qr/\b\Q$ALPHA\E\b/, "... and lists $ALPHA" or diag $out;
        like $out, qr/span_id:\[$sid\]/, '... and the span_id label' or diag $out;
    }
    is scalar($fng->crash_lines), 0, 'no crash' or diag join "\n", $fng->crash_lines;
};

done_testing;
