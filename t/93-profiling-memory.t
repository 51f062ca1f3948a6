#!/usr/bin/perl
# Memory profiling in nginx (otel_profiling_types cpu memory): the
# allocations of the worker, sampled by bytes, go out as alloc-*.pb.gz
# (alloc_objects/count, alloc_space/bytes) and inuse-*.pb.gz
# (inuse_objects/count, inuse_space/bytes) pprof files, decoded here with
# protoc. t/ngx_burn's spanprof_alloc allocates (and frees) 4 MB per request
# in spanprof_burn_alloc: alloc_space at that stack is within 25% of what
# was allocated, on the requests' spans, and nothing of it stays in use;
# spanprof_leak never frees what spanprof_burn_leak allocates: its in-use
# bytes grow interval after interval. The status API counts the samples
# and the hooked objects; the control API switches memory off and on; keep
# rules unlabel the allocations of a request not kept; OTLP carries the
# four memory types in one request.
# nginx -s reload under load with memory profiling on: no crash, every
# request answered.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $ALLOC = 'spanprof_burn_alloc';
my $LEAK  = 'spanprof_burn_leak';

my $CONF = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name prof-memory;
otel_profiling_types cpu memory;
otel_profiling_memory_interval 16k;
otel_profiling_interval 400ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Span-Id $otel_span_id always;
    location /alloc { spanprof_alloc 4096; }
    location /leak  { spanprof_leak 1024 6144; }
    location = /api { otel_trace off; otel_profiling off; otel_api write=on; }
}
EOF

my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => $CONF);
my $dir = $ngx->prefix . '/prof';
my $port = $ngx->port;

sub api {
    my ($method, $body) = @_;
    my $r = http_request($method, $port, '/api', defined $body ? (content => $body,
        headers => { 'content-type' => 'application/json' }) : ());
    return ($r->{status}, eval { JSON::PP::decode_json($r->{content}) } || {});
}
sub counter {
    my ($name) = @_;
    my (undef, $j) = api('GET');
    my $t = 0;
    $t += $_->{counters}{$name} // 0 for @{ $j->{workers} || [] };
    return $t;
}

# 10 requests of 4 MB each, allocated and freed; one 1 MB leak per
# profiling interval (6 MB at most), each after a freeing request
my (%alloc_sid, $failed, $n_alloc);
my $N = 10;
for my $i (1 .. $N) {
    my $r = http_get($port, '/alloc');
    $failed++ unless $r->{status} == 200;
    $alloc_sid{ $r->{headers}{'x-span-id'} // '' } = 1;
    $n_alloc++;
}
for my $i (1 .. 5) {
    my $r = http_get($port, '/leak');
    $failed++ unless $r->{status} == 200;
    sleep 0.45;
}
ok !$failed, 'every request answered 200';

my ($js_samples, $prom_samples) = api_counter($port, '/api', 'memory_samples');
ok(($js_samples // 0) > 0, "memory_samples in JSON: " . ($js_samples // 'none'));
ok(($prom_samples // 0) > 0, "memory_samples in Prometheus: " . ($prom_samples // 'none'));
ok counter('memory_hooked_objects') >= 3, 'memory_hooked_objects: ' . counter('memory_hooked_objects');
is counter('memory_profiling'), 1, 'memory_profiling 1';
is counter("memory_interval_bytes"), 16384, "memory_interval_bytes 16384";

# the control API switches memory sampling off, then on again
subtest 'control API: memory off and on' => sub {
    my ($st, $j) = api('GET');
    is $j->{control}{memory} ? 1 : 0, 1, 'control.memory true (configured)';
    ($st, $j) = api('POST', '{"memory": false}');
    is $st, 200, 'POST {"memory": false}';
    is $j->{control}{memory} ? 1 : 0, 0, 'control.memory false';
    ok wait_until(10, sub { counter('memory_profiling') == 0 }), 'worker: memory_profiling 0';
    my $before = counter('memory_samples');
    http_get($port, '/alloc') for 1 .. 3;
    is counter('memory_samples'), $before, 'no allocation sampled while off (12 MB allocated)';
    ($st, $j) = api('POST', '{"memory": true}');
    is $st, 200, 'POST {"memory": true}';
    ok wait_until(10, sub { counter('memory_profiling') == 1 }), 'worker: memory_profiling 1';
    for (1 .. 2) {
        my $r = http_get($port, '/alloc');
        $alloc_sid{ $r->{headers}{'x-span-id'} // '' } = 1;
    }
    ok wait_until(5, sub { counter('memory_samples') > $before }), 'sampled again once on';
    ($st) = api('POST', '{"memory": 1}');
    is $st, 400, 'POST {"memory": 1}: 400';
};

my $took = $ngx->quit(15);
ok $took < 10, "quit in $took s";
is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;

sub files_of {
    my ($type) = @_;
    opendir(my $dh, $dir) or die "$dir: $!";
    my @f = map { "$dir/$_" } sort grep { /^$type-\d+-\d+\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    return @f;
}

my @alloc_files = files_of('alloc');
my @inuse_files = files_of('inuse');
ok @alloc_files >= 1, scalar(@alloc_files) . ' alloc pprof file(s)' or diag `ls -la $dir`;
ok @inuse_files >= 4, scalar(@inuse_files) . ' inuse pprof file(s)' or diag `ls -la $dir`;

my $sum = sub { my $i = shift; my $t = 0; $t += $_->{values}[$i] // 0 for @_; $t };
my @as;
for my $f (@alloc_files) {
    my $p = eval { read_pprof_file($f) };
    ok $p, "$f decodes" or diag $@;
    next unless $p;
    my $m = pprof_meta($p);
    is_deeply $m->{sample_types}, ['alloc_objects/count', 'alloc_space/bytes'],
        'alloc: sample types alloc_objects/count, alloc_space/bytes';
    is $m->{period_type}, 'space/bytes', 'alloc: period type space/bytes';
    is $m->{period}, 16384, "alloc: period 16384 (the interval)";
    push @as, pprof_samples($p);
}
my $diag = stacks_summary(\@as, 15);

subtest 'alloc_space at spanprof_burn_alloc, on its requests\' spans' => sub {
    # the first 10 requests, and 2 more after the control API's test
    my $want = ($N + 2) * 4096 * 1024;
    my @at = grep { has_frame($_, $ALLOC) } @as;
    my $bytes = $sum->(1, @at);
    ok abs($bytes - $want) <= 0.25 * $want,
        sprintf("alloc_space at $ALLOC: %.1f MB, allocated %.1f MB (within 25%%)", $bytes / 2**20, $want / 2**20)
        or diag $diag;
    my $objects = $sum->(0, @at);
    my $want_objects = $want / 16384;
    ok abs($objects - $want_objects) <= 0.25 * $want_objects,
        "alloc_objects at $ALLOC: $objects (allocated $want_objects blocks)";
    my @on_span = grep { $alloc_sid{ $_->{labels}{span_id} // '' } } @at;
    ok $bytes && $sum->(1, @on_span) / $bytes >= 0.9,
        sprintf('%.0f%% of it on the /alloc spans', 100 * $sum->(1, @on_span) / ($bytes || 1));
    my @traced = grep { ($_->{labels}{trace_id} // '') =~ /^[0-9a-f]{32}$/ } @on_span;
    is scalar @traced, scalar @on_span, 'with their trace_id';
    my @leak = grep { has_frame($_, $LEAK) } @as;
    my $lb = $sum->(1, @leak);
    ok abs($lb - 5 * 2**20) <= 0.25 * 5 * 2**20,
        sprintf("alloc_space at $LEAK: %.1f MB (leaked 5 MB)", $lb / 2**20);
};

subtest 'in use: the leak grows, the freed allocations do not stay' => sub {
    my (@leak, @freed);
    for my $f (@inuse_files) {
        my $p = eval { read_pprof_file($f) } or next;
        my $m = pprof_meta($p);
        is_deeply $m->{sample_types}, ['inuse_objects/count', 'inuse_space/bytes'], 'inuse sample types'
            if $f eq $inuse_files[0];
        my @s = pprof_samples($p);
        push @leak, $sum->(1, grep { has_frame($_, $LEAK) } @s);
        push @freed, $sum->(1, grep { has_frame($_, $ALLOC) } @s);
    }
    my $steps = 0;
    $steps += $leak[$_] > $leak[$_ - 1] for 1 .. $#leak;
    my @drops = grep { $leak[$_] < $leak[$_ - 1] * 0.5 } 1 .. $#leak;
    diag sprintf('inuse at %s by interval (MB): %s', $LEAK, join ' ', map { sprintf '%.2f', $_ / 2**20 } @leak);
    ok $steps >= 3, "in-use bytes at $LEAK grew in $steps intervals (5 leaks, one per interval)";
    ok !@drops, 'never fell by half';
    ok $leak[-1] >= 0.75 * 5 * 2**20 && $leak[-1] <= 1.25 * 5 * 2**20,
        sprintf('in use at the end: %.1f MB (5 MB leaked)', $leak[-1] / 2**20);
    my ($max_freed) = sort { $b <=> $a } @freed;
    is $max_freed // 0, 0, "nothing in use at $ALLOC in any interval";
};

# keep rules apply to allocations: a request that is not kept has its
# allocation samples without its labels, one that is kept keeps them
subtest 'keep rules: allocations of a request not kept lose its labels' => sub {
    (my $conf = $CONF) =~ s{location /alloc \{ spanprof_alloc 4096; \}}{otel_profiling_keep errors;
    location /kept    { spanprof_alloc 2048; spanprof_burn_status 500; }
    location /dropped { spanprof_alloc 2048; }};
    my $k = start_nginx(burn => 1, dirs => ['prof'], conf => $conf);
    my (%kept, %dropped);
    for (1 .. 3) {
        my $r = http_get($k->port, '/kept');
        $kept{ $r->{headers}{'x-span-id'} // '' } = 1 if $r->{status} == 500;
        $r = http_get($k->port, '/dropped');
        $dropped{ $r->{headers}{'x-span-id'} // '' } = 1 if $r->{status} == 200;
    }
    $k->quit(15);
    is scalar(keys %kept) + scalar(keys %dropped), 6, 'answered 500 and 200';
    my $d = $k->prefix . '/prof';
    opendir(my $dh, $d) or die "$d: $!";
    my @s = map { pprof_samples(read_pprof_file("$d/$_")) } sort grep { /^alloc-\d+-\d+\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    my @at = grep { has_frame($_, $ALLOC) } @s;
    my $kb = $sum->(1, grep { $kept{ $_->{labels}{span_id} // '' } } @at);
    my $db = $sum->(1, grep { $dropped{ $_->{labels}{span_id} // '' } } @at);
    my $ub = $sum->(1, grep { !exists $_->{labels}{span_id} } @at);
    ok $kb >= 0.75 * 6 * 2**20, sprintf('kept requests: %.1f MB on their spans (6 MB)', $kb / 2**20)
        or diag stacks_summary(\@at, 10);
    is $db, 0, 'requests not kept: nothing on their spans';
    ok $ub >= 0.75 * 6 * 2**20, sprintf('unlabelled: %.1f MB (their 6 MB)', $ub / 2**20);
};

# memory alone, with stacks deeper than the allocation stacks keep
subtest 'otel_profiling_types memory, otel_profiling_max_depth 200' => sub {
    (my $conf = $CONF) =~ s{otel_profiling_types cpu memory;}{otel_profiling_types memory;\notel_profiling_max_depth 200;};
    my $m = start_nginx(burn => 1, dirs => ['prof'], conf => $conf);
    my $ok = 0;
    for (1 .. 3) { $ok++ if http_get($m->port, '/alloc')->{status} == 200 }
    $m->quit(15);
    is $ok, 3, 'answered';
    my @e = grep { /\[(alert|emerg|crit)\]/ } split /\n/, $m->error_log;
    is scalar @e, 0, 'no alert' or diag join "\n", @e;
    my $d = $m->prefix . '/prof';
    opendir(my $dh, $d) or die "$d: $!";
    my @f = sort grep { /^(alloc|cpu)-\d+-\d+\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    my @alloc = grep { /^alloc-/ } @f;
    ok @alloc >= 1, scalar(@alloc) . ' alloc file(s)';
    my @s = map { pprof_samples(read_pprof_file("$d/$_")) } @alloc;
    my $b = $sum->(1, grep { has_frame($_, $ALLOC) } @s);
    ok abs($b - 12 * 2**20) <= 0.25 * 12 * 2**20, sprintf("alloc_space at $ALLOC: %.1f MB (12 MB)", $b / 2**20);
};

# OTLP: the memory profiles go in one request (with the CPU one when it
# has samples), one Profile per type, decoded with protoc
subtest 'OTLP: alloc_* and inuse_* profiles, one request' => sub {
    my $recv = start_receiver();
    (my $conf = $CONF) =~ s{endpoint file://%%PREFIX%%/prof;}{endpoint %%RECEIVER%%; protocol http/protobuf;};
    my $o = start_nginx(receiver => $recv, burn => 1, conf => $conf);
    my %sid;
    for (1 .. 3) {
        my $r = http_get($o->port, '/alloc');
        $sid{ $r->{headers}{'x-span-id'} // '' } = 1;
    }
    http_get($o->port, '/leak');
    my $t_end = time;
    my ($covered, @all) = wait_otlp_covering($recv, $t_end, 15, poke => sub { http_get($o->port, '/api') });
    ok $covered, 'a profile covering the requests arrived';
    $o->stop;
    my %types;
    $types{ $_->{profile}{sample_type} }++ for @all;
    ok $types{$_}, "a $_ profile" or diag explain \%types
        for 'alloc_objects/count', 'alloc_space/bytes', 'inuse_objects/count', 'inuse_space/bytes';
    my %seqs;
    $seqs{ $_->{seq} }{ $_->{profile}{sample_type} } = 1 for @all;
    ok scalar(grep { $_->{'alloc_space/bytes'} && $_->{'inuse_space/bytes'} } values %seqs),
        'alloc_space and inuse_space in one request';
    my $sumv = sub { my $t = 0; for my $x (@_) { $t += $_ for @{ $x->{values} } } $t };
    my @as = grep { $_->{profile}{sample_type} eq 'alloc_space/bytes' && has_frame($_, $ALLOC) } @all;
    my $on = $sumv->(grep { $sid{ sample_span($_) } } @as);
    ok abs($on - 12 * 2**20) <= 0.25 * 12 * 2**20,
        sprintf("alloc_space at $ALLOC on the spans: %.1f MB (12 MB)", $on / 2**20);
    my ($ap) = map { $_->{profile} } @as;
    is $ap->{period_type}, 'space/bytes', 'period_type space/bytes' if $ap;
    is $ap->{period}, 16384, 'period 16384' if $ap;
    my @in = grep { $_->{profile}{sample_type} eq 'inuse_space/bytes' && has_frame($_, $LEAK) } @all;
    ok $sumv->(@in) > 0, sprintf("inuse_space at $LEAK: %.1f MB", $sumv->(@in) / 2**20);
};

# reload under load: every request answered, no worker crashes
subtest 'nginx -s reload under load with memory profiling on' => sub {
    my $n = start_nginx(burn => 1, dirs => ['prof'], conf => $CONF);
    my $p = $n->port;
    my $load = open(my $fh, '-|') // die "fork: $!";
    if (!$load) {
        my ($ok, $bad) = (0, 0);
        my $t_end = time + 4;
        while (time < $t_end) {
            for my $path ('/alloc', '/leak') {
                my $r = http_get($p, $path);
                $r->{status} == 200 ? $ok++ : $bad++;
            }
        }
        print "$ok $bad\n";
        close STDOUT;
        POSIX::_exit(0);
    }
    sleep 0.5;
    for (1 .. 3) {
        $n->reload;
        sleep 0.6;
    }
    my ($ok, $bad) = split ' ', (<$fh> // '0 1');
    close $fh;
    ok $ok > 10, "$ok requests answered during the reloads";
    is $bad, 0, 'none failed';
    my $t = $n->quit(15);
    ok $t < 10, "quit in $t s";
    is scalar($n->crash_lines), 0, 'no crash' or diag join "\n", $n->crash_lines;
    my @e = grep { /\[(alert|emerg|crit)\]/ } split /\n/, $n->error_log;
    is scalar @e, 0, 'no alert in the error log' or diag join "\n", @e;
};

done_testing;
