#!/usr/bin/perl
# spanprof serve --import of a file-exporter directory holds every profile
# type, as OTLP brings them: an nginx with `otel_profiling_types cpu wall
# memory` writes cpu-, wall-, alloc- and inuse-*.pb.gz; serve --import
# stores cpu, wall, off_cpu, alloc_objects, alloc_space, inuse_objects and
# inuse_space, each labelled with the spans: a request that blocks its
# worker (t/ngx_burn's spanprof_block) has its wall and off-CPU time on its
# span, one that allocates 4 MB (spanprof_alloc) its alloc_space, and a
# leak (spanprof_leak) grows the worker's in-use memory snapshot by
# snapshot. In-use profiles are snapshots: the worker's flame graph holds
# the latest file's bytes, never a sum of the files. The values are the
# files' own (decoded here with protoc), sample by sample.
# Hand-made files: a cpu- file of samples/count only (another tool's) is
# CPU by its period; a type with a value out of range is refused and
# counted, the file's other type kept; an undecodable file or an
# unreadable directory stops serve with an error naming it.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use SpanProf::Test;
use SpanProf::Serve;
use SpanProf::Profile;
use SpanProf::Cli qw(profile_text pprof_encode gzip_bytes write_file run_cli);
use File::Temp qw(tempdir);

need_module();
need_burn_module();
plan skip_all => 'spanprof serve not built: ' . serve_bin() unless -x serve_bin();

my $BLOCK = 'spanprof_burn_block_on_pipe';
my $ALLOC = 'spanprof_burn_alloc';
my $LEAK  = 'spanprof_burn_leak';
my $SPIN  = 'spanprof_burn_beta';

my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => <<'EOF');
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name import-types;
otel_profiling_types cpu wall memory;
otel_profiling_wall_rate 100;
otel_profiling_rate 1000;
otel_profiling_memory_interval 16k;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /block { spanprof_block 200; }
    location /spin  { spanprof_burn beta 100; }
    location /alloc { spanprof_alloc 4096; }
    location /leak  { spanprof_leak 1024 6144; }
}
EOF
my $dir = $ngx->prefix . '/prof';
my $port = $ngx->port;

my %req;
for my $what (qw(block spin alloc)) {
    my $r = http_get($port, "/$what");
    is $r->{status}, 200, "/$what answered";
    $req{$what} = { trace => $r->{headers}{'x-trace-id'}, span => $r->{headers}{'x-span-id'} };
}
# one 1 MB leak per profiling interval: the in-use snapshots grow
for (1 .. 4) {
    http_get($port, '/leak');
    sleep 0.4;
}
my $worker = ($ngx->worker_pids)[0];
$ngx->quit(15);       # flushes the spans and the last profiles

sub files_of {
    my ($kind) = @_;
    opendir(my $dh, $dir) or die "$dir: $!";
    my @f = map { "$dir/$_" } sort grep { /^$kind-\d+-\d+\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    return @f;
}
my %files = map { $_ => [ files_of($_) ] } qw(cpu wall alloc inuse);
for my $k (qw(cpu wall alloc inuse)) {
    ok @{ $files{$k} } >= 1, scalar(@{ $files{$k} }) . " $k-*.pb.gz file(s) written"
        or diag `ls -la $dir`;
}

my $sv = start_serve(extra => [ '--import', $dir ]);
my $nfiles = 0; $nfiles += @$_ for values %files;
like $sv->log, qr/imported .*: [1-9]\d* spans .* [1-9]\d* samples from $nfiles profiles \(cpu ${\ scalar @{ $files{cpu} }}, wall ${\ scalar @{ $files{wall} }}, alloc ${\ scalar @{ $files{alloc} }}, inuse ${\ scalar @{ $files{inuse} }}; 0 types refused\)/,
    'the import reports the files of each kind' or diag $sv->log;

sub frames {
    my ($n, $out, $path) = @_;
    $out //= {};
    $out->{ $n->{n} } += $n->{t}[0] if defined $path;
    frames($_, $out, 1) for @{ $n->{c} || [] };
    return $out;
}
sub types_of {
    my (%q) = @_;
    return { map { $_->{type} => $_ } @{ $sv->api('/api/types', %q) } };
}
# The files' samples: [values, stack, labels] by kind.
my %samples = map { my $k = $_; $k => [ map { pprof_samples(read_pprof_file($_)) } @{ $files{$k} } ] }
    qw(cpu wall alloc);
sub on_span {
    my ($kind, $span, $i) = @_;
    my $t = 0;
    $t += $_->{values}[$i] for grep { ($_->{labels}{span_id} // '') eq $span } @{ $samples{$kind} };
    return $t;
}

subtest 'every type is stored, in its unit' => sub {
    my $ty = types_of();
    is_deeply [ sort keys %$ty ],
        [ sort qw(cpu wall off_cpu alloc_objects alloc_space inuse_objects inuse_space) ],
        'the type selector lists cpu, wall, off_cpu and the four memory types' or diag explain $ty;
    is $ty->{$_}{unit}, 'nanoseconds', "$_ in nanoseconds" for qw(cpu wall off_cpu);
    is $ty->{$_}{unit}, 'bytes', "$_ in bytes" for qw(alloc_space inuse_space);
    is $ty->{$_}{unit}, 'count', "$_ in count" for qw(alloc_objects inuse_objects);
    ok $ty->{inuse_space}{gauge} && !$ty->{alloc_space}{gauge}, 'in use: snapshots; allocations: sums';
};

subtest 'wall and off-CPU on the blocking request\'s span' => sub {
    my %sel = %{ $req{block} };
    my $ty = types_of(%sel);
    my $want_off = on_span('wall', $sel{span}, 2);
    cmp_ok $want_off, '>=', 180e6, sprintf('the wall file: %.1f ms off-CPU on the span', $want_off / 1e6);
    is $ty->{off_cpu}{value}, $want_off, 'off_cpu: the files\' value, to the nanosecond';
    is $ty->{wall}{value}, on_span('wall', $sel{span}, 1), 'wall: the files\' value';
    my $off = $sv->api('/api/flame', %sel, type => 'off_cpu');
    is $off->{type}, 'off_cpu', 'the off-CPU flame graph';
    cmp_ok frames($off->{tree})->{$BLOCK} // 0, '>=', 180e6, "$BLOCK holds it";
    my $t = $sv->api("/api/traces/$sel{trace}");
    my ($s) = grep { $_->{span_id} eq $sel{span} } @{ $t->{spans} };
    cmp_ok $s->{off_cpu_ns} // 0, '>=', 180e6, "the waterfall's off-CPU column: $s->{off_cpu_ns}";
    cmp_ok $s->{cpu_ns}, '<', $s->{off_cpu_ns} // 0, 'its CPU less than its off-CPU';
};

subtest 'CPU on the spinning request\'s span' => sub {
    my %sel = %{ $req{spin} };
    my $ty = types_of(%sel);
    my $want = on_span('cpu', $sel{span}, 1);
    cmp_ok $want, '>=', 50e6, sprintf('the cpu files: %.1f ms on the span', $want / 1e6);
    is $ty->{cpu}{value}, $want, 'cpu: the files\' cpu/nanoseconds';
    my $f = $sv->api('/api/flame', %sel);
    is $f->{type}, 'cpu', 'no type: cpu';
    cmp_ok frames($f->{tree})->{$SPIN} // 0, '>=', 0.8 * $want, "$SPIN holds most of it";
    my ($s) = grep { $_->{span_id} eq $sel{span} } @{ $sv->api("/api/traces/$sel{trace}")->{spans} };
    cmp_ok $s->{cpu_samples}, '>=', 40, "the waterfall's CPU column: $s->{cpu_samples} samples";
    my ($w) = grep { $_->{pid} == $worker } @{ $sv->api('/api/workers') };
    is $w && $w->{service}, 'import-types', 'the workers page: the worker, with its service';
};

subtest 'allocations on the allocating request\'s span' => sub {
    my %sel = %{ $req{alloc} };
    my $ty = types_of(%sel);
    my $want = on_span('alloc', $sel{span}, 1);
    ok abs($want - 4 * 2**20) <= 2**20, sprintf('the alloc files: %.2f MB on the span (4 MB allocated)', $want / 2**20);
    is $ty->{alloc_space}{value}, $want, 'alloc_space: the files\' bytes';
    is $ty->{alloc_objects}{value}, on_span('alloc', $sel{span}, 0), 'alloc_objects: the files\' objects';
    my $f = $sv->api('/api/flame', %sel, type => 'alloc_space');
    is $f->{unit}, 'bytes', 'its flame graph in bytes';
    cmp_ok frames($f->{tree})->{$ALLOC} // 0, '>=', 0.9 * $want, "$ALLOC holds it";
};

subtest 'in-use memory per worker: snapshots, the latest one shown' => sub {
    my @mine = grep { /-$worker\.pb\.gz$/ } @{ $files{inuse} };
    ok @mine >= 3, scalar(@mine) . " inuse files of worker $worker";
    my (@want, @leak);
    for my $f (@mine) {
        my $p = read_pprof_file($f);
        my $t = 0; $t += $_->{values}[1] for pprof_samples($p);
        my $l = 0; $l += $_->{values}[1] for grep { has_frame($_, $LEAK) } pprof_samples($p);
        push @want, [ pprof_meta($p)->{time_nanos}, $t ];
        push @leak, $l;
    }
    my ($w) = grep { $_->{pid} == $worker } @{ $sv->api('/api/memory') };
    ok $w, 'the workers page has the worker\'s in-use memory' or return;
    is $w->{service}, 'import-types', 'with its service (from its spans\' resource)';
    is_deeply $w->{points}, \@want, 'a point per inuse file: its time, its bytes'
        or diag explain [ $w->{points}, \@want ];
    ok $leak[-1] > $leak[0], sprintf('the leak grows: %.1f MB then %.1f MB', $leak[0] / 2**20, $leak[-1] / 2**20);
    my $f = $sv->api('/api/flame', pid => $worker, type => 'inuse_space');
    my $sum = 0; $sum += $_ for @leak;
    is frames($f->{tree})->{$LEAK}, $leak[-1],
        sprintf('its flame graph: the latest snapshot at %s (%.1f MB), not the sum of all (%.1f MB)',
                $LEAK, $leak[-1] / 2**20, $sum / 2**20);
    my $ty = types_of(pid => $worker);
    ok $ty->{inuse_space} && $ty->{inuse_space}{gauge}, 'inuse_space listed for the worker, as snapshots';
};

$sv->stop;

subtest 'hand-made files: another tool\'s cpu- file, a value out of range' => sub {
    my $d = tempdir('spanprof-import-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my ($t, $s) = ('ab' x 16, 'cd' x 8);
    # a minute ago: within --retention's 24 h
    my $ms = int(Time::HiRes::time() * 1000) - 60000;
    my $t0 = $ms . '000000';
    write_file("$d/cpu-$ms-4242.pb.gz", gzip_bytes(pprof_encode(profile_text(
        time => $t0, duration => 1000000000, period => 1000000, types => [[qw(samples count)]],
        functions => [qw(main legacy_hot)], locations => [[1], [2]],
        samples => [{ stack => [2, 1], values => [5], labels => { trace_id => $t, span_id => $s } }],
    ))));
    write_file("$d/alloc-$ms-4242.pb.gz", gzip_bytes(pprof_encode(profile_text(
        time => $t0, duration => 1000000000, period => 16384,
        types => [[qw(alloc_objects count)], [qw(alloc_space bytes)]], period_type => [qw(space bytes)],
        functions => [qw(main huge_alloc small_alloc)], locations => [[1], [2], [3]],
        samples => [{ stack => [2, 1], values => [1, '1125899906842624'] }, { stack => [3, 1], values => [2, 4096] }],
    ))));
    my $im = start_serve(extra => [ '--import', $d ]);
    like $im->log, qr/ 3 samples from 2 profiles \(cpu 1, wall 0, alloc 1, inuse 0; 1 types refused\)/,
        'one type refused' or diag $im->log;
    like $im->log, qr/alloc-$ms-4242\.pb\.gz: alloc_space: sample 0's value .* out of range/,
        'with a warning naming the file and the type';
    my %ty = map { $_->{type} => $_ } @{ $im->api('/api/types', pid => 4242) };
    is_deeply [ sort keys %ty ], [qw(alloc_objects cpu)], 'cpu and alloc_objects stored, alloc_space not';
    is $ty{cpu}{value}, 5e6, 'samples/count x the period: 5 ms';
    is $ty{cpu}{samples}, 5, '5 samples';
    is $ty{alloc_objects}{value}, 3, 'alloc_objects: 1 + 2';
    my $f = $im->api('/api/flame', trace => $t, span => $s);
    is frames($f->{tree})->{legacy_hot}, 5e6, 'on its span';
    $im->stop;

    my $bad = tempdir('spanprof-import-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    write_file("$bad/inuse-1795316400000-4242.pb.gz", 'not gzip');
    my $data = tempdir(CLEANUP => 1);
    my @serve = ('serve', '--otlp', '127.0.0.1:' . free_port(), '--otlp-grpc', 'off',
                 '--ui', '127.0.0.1:' . free_port(), '--data', $data);
    my $r = run_cli(@serve, '--import', $bad);
    isnt $r->{exit}, 0, 'an undecodable file: serve stops';
    like $r->{err}, qr/--import: .*inuse-1795316400000-4242\.pb\.gz/, 'naming the file' or diag $r->{err};
    $r = run_cli(@serve, '--import', "$bad/nosuch");
    isnt $r->{exit}, 0, 'a directory that does not exist: serve stops';
    like $r->{err}, qr{cannot read .*/nosuch}, 'saying so' or diag $r->{err};
};

done_testing;
