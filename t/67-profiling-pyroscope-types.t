#!/usr/bin/perl
# Every profile type to Pyroscope, and the bounds of every profile, in
# nginx with otel_profiling_types cpu wall memory, a real HTTP receiver
# storing what it gets, each pprof and each OTLP request decoded by protoc:
#
# - Pyroscope gets an /ingest (format=pprof) per type and interval, all
#   with the same application name: CPU [samples/count, cpu/nanoseconds],
#   wall [samples/count, wall/nanoseconds, off_cpu/nanoseconds] and, as Go's
#   heap profiles, allocations [alloc_objects/count, alloc_space/bytes] and
#   in use [inuse_objects/count, inuse_space/bytes], period type
#   space/bytes. Named as Grafana Pyroscope's pprof ingestion names them
#   (its rule, restated in pyroscope_types below), they are the profile
#   types process_cpu:cpu:nanoseconds:cpu:nanoseconds,
#   wall:wall:nanoseconds:wall:nanoseconds, memory:alloc_space:bytes:
#   space:bytes, memory:inuse_space:bytes:space:bytes and the others. The
#   samples of each carry span_id and span_name (never trace_id): the wall
#   time a request blocked at spanprof_burn_block_on_pipe, the bytes one
#   allocated at spanprof_burn_alloc are on their spans.
# - otel_profiling_max_samples bounds EVERY profile: each Pyroscope ingest
#   of each type, and each Profile of an OTLP request (not only the first,
#   the CPU one), with [truncated] holding the rest.
# - otel_profiling_max_size bounds each Pyroscope ingest and the whole OTLP
#   request (uncompressed); the wall and memory Profiles are still in it,
#   nothing dropped (profiles_dropped_* 0 in the status API).
# - Apache (event MPM) sends the same types.
# - A receiver answering 500: what is not delivered is counted by type
#   (profiles_dropped_cpu, _wall, _memory) in the status API.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use SpanProf::Test;
use SpanProf::Profile;
use SpanProf::Apache;

need_module();
need_burn_module();
need_apache_module();

my $BLOCK = 'spanprof_burn_block_on_pipe';
my $ALLOC = 'spanprof_burn_alloc';
my $LEAK  = 'spanprof_burn_leak';
my $ALPHA = 'spanprof_burn_alpha';

my $CONF = <<'EOF';
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name types67;
otel_profiling_types cpu wall memory;
otel_profiling_rate 1000;
otel_profiling_wall_rate 200;
otel_profiling_memory_interval 16k;
otel_profiling_interval 500ms;
otel_profiling_pyroscope %%RECEIVER%%/pyro;
%%LIMITS%%
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Span-Id $otel_span_id always;
    location /alpha/ { spanprof_burn alpha %%MS%%; }
    location /block/ { spanprof_block %%MS%%; }
    location /alloc/ { spanprof_alloc %%KB%%; }
    location /leak/  { spanprof_leak 512 2048; }
    location = /api { otel_trace off; otel_profiling off; otel_api; }
}
EOF

sub conf {
    my (%o) = @_;
    (my $c = $CONF) =~ s/%%LIMITS%%/$o{limits} \/\/ ''/e;
    $c =~ s/%%MS%%/$o{ms}/g;
    $c =~ s/%%KB%%/$o{kb}/g;
    return $c;
}

sub url_decode { my $s = shift; $s =~ tr/+/ /; $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge; return $s }

sub plain_size {
    my ($gz) = @_;
    my $plain;
    gunzip(\$gz => \$plain) or die "gunzip failed: $GunzipError\n";
    return length $plain;
}

# The Pyroscope ingests the receiver stored, decoded.
sub pyroscope_ingests {
    my ($recv) = @_;
    my @out;
    for my $q (grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests) {
        my ($query) = $q->{path} =~ /\?(.*)$/;
        my %qp = map { my ($k, $v) = split /=/, $_, 2; (url_decode($k) => url_decode($v // '')) } split /&/, $query;
        my ($b) = ($q->{headers}{'content-type'} // '') =~ /boundary="?([^";]+)"?/;
        my ($part) = grep { ($_->{name} // '') eq 'profile' } multipart_parts($q->{body}, $b // 'none');
        my $bytes = $part ? $part->{content} : '';
        my $p = decode_pprof($bytes);
        my $meta = pprof_meta($p);
        push @out, { query => \%qp, bytes => $bytes, plain => plain_size($bytes),
            samples => [ pprof_samples($p) ], meta => $meta,
            kind => join(',', @{ $meta->{sample_types} }) };
    }
    return @out;
}

# Grafana Pyroscope's /ingest of a pprof (pkg/og/convert/pprof): the
# profile's __name__ is "wall" when a sample type is wall, else from the
# first sample type (its display name: "samples" is "cpu") containing cpu
# (process_cpu), alloc_ or inuse_ (memory); each sample type is then a
# profile type name:type:unit:period_type:period_unit.
sub pyroscope_types {
    my ($meta) = @_;
    my @st = @{ $meta->{sample_types} };
    my @names = map { (split m{/})[0] } @st;
    my $name = '';
    if (grep { $_ eq 'wall' } @names) {
        $name = 'wall';
    } else {
        for my $n (@names) {
            my $d = $n eq 'samples' ? 'cpu' : $n;
            if ($d =~ /cpu/) { $name = 'process_cpu'; last }
            if ($d =~ /alloc_|inuse_/) { $name = 'memory'; last }
        }
    }
    my $period = join ':', split m{/}, $meta->{period_type};
    return map { join(':', $name, split(m{/}, $_), $period) } @st;
}

my %KINDS = (
    cpu   => 'samples/count,cpu/nanoseconds',
    wall  => 'samples/count,wall/nanoseconds,off_cpu/nanoseconds',
    alloc => 'alloc_objects/count,alloc_space/bytes',
    inuse => 'inuse_objects/count,inuse_space/bytes',
);
my %KIND_OF = reverse %KINDS;

sub by_kind {
    my (@ing) = @_;
    my %k;
    push @{ $k{ $KIND_OF{ $_->{kind} } // "other: $_->{kind}" } }, $_ for @ing;
    return %k;
}

sub truncated_samples { my ($s) = @_; return grep { grep { $_ eq '[truncated]' } @{ $_->{stack} } } @$s }

# OTLP Profiles: [{ what, samples }] one per Profile of each request.
sub otlp_profiles {
    my ($recv) = @_;
    my %p;
    for my $s (collect_otlp_samples($recv)) {
        my $k = "request $s->{seq} $s->{profile}{sample_type} $s->{profile}{profile_id}";
        push @{ $p{$k} }, $s;
    }
    return map { { what => $_, type => (split / /, $_)[2], samples => $p{$_} } } sort keys %p;
}

sub burn {
    my ($port, $path, $n, $sids) = @_;
    my $ok = 0;
    for my $i (1 .. $n) {
        my $r = http_get($port, "$path$i");
        next unless $r->{status} == 200;
        $ok++;
        $sids->{ $r->{headers}{'x-span-id'} // '' } = 1 if $sids;
    }
    return $ok;
}

subtest 'Pyroscope: CPU, wall and memory types, on their spans' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => conf(ms => 100, kb => 4096));
    my $port = $ngx->port;
    my (%cpu, %block, %alloc, %leak);
    is burn($port, '/alpha/', 3, \%cpu), 3, '3 requests burning 100 ms of CPU';
    is burn($port, '/block/', 3, \%block), 3, '3 requests blocking the worker 100 ms';
    is burn($port, '/alloc/', 3, \%alloc), 3, '3 requests allocating (and freeing) 4 MB';
    is burn($port, '/leak/', 2, \%leak), 2, '2 requests leaking 512 KB';
    # the in-use snapshot is taken at the end of an interval
    sleep 1.2;
    $ngx->quit(15);

    my @ing = pyroscope_ingests($recv);
    my %k = by_kind(@ing);
    ok $k{$_}, "$_ profile(s) sent to Pyroscope: " . scalar(@{ $k{$_} || [] }) for qw(cpu wall alloc inuse);
    is_deeply [ grep { !$KINDS{$_} } sort keys %k ], [], 'no other sample types';
    my %names = map { ($_->{query}{name} => 1) } @ing;
    is_deeply [ keys %names ], [ 'types67{}' ], 'one application name for every type';
    is scalar(grep { ($_->{query}{format} // '') ne 'pprof' } @ing), 0, 'format=pprof';

    my %types = map { ($_ => 1) } map { pyroscope_types($_->{meta}) } @ing;
    for my $t (qw(process_cpu:cpu:nanoseconds:cpu:nanoseconds
                  process_cpu:samples:count:cpu:nanoseconds
                  wall:wall:nanoseconds:wall:nanoseconds
                  wall:off_cpu:nanoseconds:wall:nanoseconds
                  memory:alloc_objects:count:space:bytes
                  memory:alloc_space:bytes:space:bytes
                  memory:inuse_objects:count:space:bytes
                  memory:inuse_space:bytes:space:bytes))
    {
        ok $types{$t}, "Pyroscope lists $t";
    }
    is_deeply [ sort map { $_->{meta}{period_type} } @{ $k{alloc} || [] }, @{ $k{inuse} || [] } ],
        [ map { 'space/bytes' } @{ $k{alloc} || [] }, @{ $k{inuse} || [] } ], 'memory: period type space/bytes';
    ok !(grep { $_->{meta}{period} != 16384 } @{ $k{alloc} || [] }), 'memory: period 16384 (the interval)';

    my %keys;
    $keys{$_}++ for map { keys %{ $_->{labels} } } map { @{ $_->{samples} } } @ing;
    is_deeply [ sort keys %keys ], [ 'span_id', 'span_name' ], 'sample labels: span_id and span_name only';

    my $sum = sub { my ($i, @s) = @_; my $t = 0; $t += $_->{values}[$i] for @s; $t };
    my @s = map { @{ $_->{samples} } } @{ $k{wall} || [] };
    my @b = grep { has_frame($_, $BLOCK) && $block{ $_->{labels}{span_id} // '' } } @s;
    my ($w, $off) = ($sum->(1, @b), $sum->(2, @b));
    ok $w >= 0.7 * 300e6, sprintf('wall: %.0f ms at %s on the blocking requests\' spans (300 ms blocked)', $w / 1e6, $BLOCK);
    ok $off >= 0.7 * 300e6, sprintf('off_cpu: %.0f ms of it', $off / 1e6);
    is scalar(grep { ($_->{labels}{span_name} // '') !~ m{^GET /block/} } @b), 0, '... span_name GET /block/...';

    @s = map { @{ $_->{samples} } } @{ $k{alloc} || [] };
    my @a = grep { has_frame($_, $ALLOC) && $alloc{ $_->{labels}{span_id} // '' } } @s;
    my $bytes = $sum->(1, @a);
    ok $bytes >= 0.5 * 12 * 2**20 && $bytes <= 1.5 * 12 * 2**20,
        sprintf('alloc_space: %.1f MB at %s on the allocating requests\' spans (12 MB)', $bytes / 2**20, $ALLOC);
    ok $sum->(0, @a) > 0, 'alloc_objects: ' . $sum->(0, @a);

    @s = map { @{ $_->{samples} } } @{ $k{inuse} || [] };
    my @l = grep { has_frame($_, $LEAK) } @s;
    ok $sum->(1, @l) > 0, sprintf('inuse_space at %s: %.1f MB (summed over intervals)', $LEAK, $sum->(1, @l) / 2**20);
    ok !(grep { has_frame($_, $ALLOC) } @s), "nothing of $ALLOC in use (all freed)";

    @s = map { @{ $_->{samples} } } @{ $k{cpu} || [] };
    my @c = grep { has_frame($_, $ALPHA) && $cpu{ $_->{labels}{span_id} // '' } } @s;
    ok $sum->(1, @c) >= 0.5 * 300e6, sprintf('cpu: %.0f ms at %s on its spans', $sum->(1, @c) / 1e6, $ALPHA);
    $ngx->stop;
    $recv->stop;
};

my $CAP = 6;
subtest "otel_profiling_max_samples $CAP: every type's Pyroscope profile, every OTLP Profile" => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1,
        conf => conf(ms => 15, kb => 256, limits => "otel_profiling_max_samples $CAP;"));
    my $port = $ngx->port;
    is burn($port, '/alpha/', 40), 40, '40 requests of 15 ms CPU';
    is burn($port, '/block/', 40), 40, '40 requests blocking 15 ms';
    is burn($port, '/alloc/', 40), 40, '40 requests allocating 256 KB';
    my ($js, $ps);
    ok wait_until(15, sub { ($js, $ps) = api_counter($port, '/api', 'profiles_over_max_samples'); ($js // 0) >= 6 }),
        'status API: profiles_over_max_samples ' . ($js // 'none') . ' (JSON), ' . ($ps // 'none') . ' (Prometheus)';
    $ngx->quit(15);

    my %k = by_kind(pyroscope_ingests($recv));
    for my $kind (qw(cpu wall alloc)) {
        my @p = @{ $k{$kind} || [] };
        ok @p >= 1, scalar(@p) . " $kind Pyroscope profile(s)" or next;
        my @over = grep { @{ $_->{samples} } > $CAP } @p;
        is scalar @over, 0, "$kind: every Pyroscope profile <= $CAP samples: "
            . join(' ', map { scalar @{ $_->{samples} } } @p);
        my @t = grep { truncated_samples($_->{samples}) } @p;
        ok @t >= 1, scalar(@t) . " $kind Pyroscope profile(s) with [truncated]";
    }

    my @op = otlp_profiles($recv);
    my %ot;
    push @{ $ot{ $_->{type} } }, $_ for @op;
    for my $type (qw(cpu/nanoseconds wall/nanoseconds off_cpu/nanoseconds
                     alloc_objects/count alloc_space/bytes))
    {
        my @p = @{ $ot{$type} || [] };
        ok @p >= 1, scalar(@p) . " OTLP $type Profile(s)" or next;
        my @over = grep { @{ $_->{samples} } > $CAP } @p;
        is scalar @over, 0, "OTLP $type: every Profile <= $CAP samples: "
            . join(' ', map { scalar @{ $_->{samples} } } @p);
        my @t = grep { truncated_samples($_->{samples}) } @p;
        ok @t >= 1, scalar(@t) . " OTLP $type Profile(s) with [truncated]";
    }
    like $ngx->error_log, qr/OTLP profile truncated to otel_profiling_max_samples $CAP/, 'logged';
    $ngx->stop;
    $recv->stop;
};

my $SIZE = 3072;
subtest 'otel_profiling_max_size 3k: every Pyroscope profile, the whole OTLP request' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1,
        conf => conf(ms => 15, kb => 256, limits => 'otel_profiling_max_size 3k;'));
    my $port = $ngx->port;
    is burn($port, '/alpha/', 40), 40, '40 requests of 15 ms CPU';
    is burn($port, '/block/', 40), 40, '40 requests blocking 15 ms';
    is burn($port, '/alloc/', 40), 40, '40 requests allocating 256 KB';
    my %d;
    for my $t (qw(cpu wall memory)) {
        ($d{$t}) = api_counter($port, '/api', "profiles_dropped_$t");
    }
    $ngx->quit(15);

    my @ing = pyroscope_ingests($recv);
    my %k = by_kind(@ing);
    ok $k{$_}, "$_ profile(s) sent to Pyroscope: " . scalar(@{ $k{$_} || [] }) for qw(cpu wall alloc);
    is scalar(grep { $_->{plain} > $SIZE } @ing), 0, "every Pyroscope profile <= $SIZE bytes decompressed: "
        . join(' ', map { "$KIND_OF{$_->{kind}}:$_->{plain}" } @ing);
    ok scalar(grep { truncated_samples($_->{samples}) } @{ $k{wall} || [] }) >= 1, 'a wall Pyroscope profile truncated';
    ok scalar(grep { truncated_samples($_->{samples}) } @{ $k{alloc} || [] }) >= 1, 'an alloc Pyroscope profile truncated';

    my @req = profile_requests($recv);
    ok @req >= 1, scalar(@req) . ' OTLP requests' or return;
    is scalar(grep { length($_->{body}) > $SIZE } @req), 0, "every OTLP request <= $SIZE bytes: "
        . join(' ', map { length $_->{body} } @req);
    my %ot;
    push @{ $ot{ $_->{type} } }, $_ for otlp_profiles($recv);
    for my $type (qw(wall/nanoseconds alloc_space/bytes)) {
        my @p = @{ $ot{$type} || [] };
        ok @p >= 1, scalar(@p) . " OTLP $type Profile(s), not dropped";
        ok scalar(grep { truncated_samples($_->{samples}) } @p) >= 1, "... some with [truncated]";
    }
    is_deeply \%d, { cpu => 0, wall => 0, memory => 0 }, 'status API: profiles_dropped_{cpu,wall,memory} 0';
    unlike $ngx->error_log, qr/does not fit otel_profiling_max_size/, 'nothing dropped as too large';
    $ngx->stop;
    $recv->stop;
};

subtest 'a receiver that refuses everything: profiles_dropped_{cpu,wall,memory}' => sub {
    my $recv = start_receiver(default => 500);
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => conf(ms => 30, kb => 1024));
    my $port = $ngx->port;
    is burn($port, '/alpha/', 3), 3, '3 requests burning CPU';
    is burn($port, '/block/', 3), 3, '3 requests blocking';
    is burn($port, '/alloc/', 3), 3, '3 requests allocating';
    my %d;
    ok wait_until(15, sub {
        for my $t (qw(cpu wall memory)) {
            my ($js, $ps) = api_counter($port, '/api', "profiles_dropped_$t");
            $d{$t} = [ $js // 0, $ps // 0 ];
        }
        !grep { $_->[0] < 2 || $_->[1] < 2 } values %d;
    }), 'each type counted twice or more (an OTLP request and a Pyroscope ingest), JSON and Prometheus: '
        . join(', ', map { "$_ @{ $d{$_} }" } sort keys %d);
    $ngx->quit(15);
    like $ngx->error_log, qr/profile export to \S+ failed: status 500/, 'the failures are logged';
    $ngx->stop;
    $recv->stop;
};

# Apache (event MPM), the same core: its Pyroscope ingests too.
my $AP = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.1
OtelServiceName types67
OtelProfilingTypes cpu wall memory
OtelProfilingRate 1000
OtelProfilingWallRate 200
OtelProfilingMemoryInterval 16k
OtelProfilingInterval 0.5
OtelProfilingPyroscope %%RECEIVER%%/pyro
OtelTrace On
Header always set X-Span-Id "%{OTEL_SPAN_ID}e"
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF

subtest 'Apache: CPU, wall and memory types to Pyroscope, on their spans' => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'event', conf => $AP, burn => 1, dirs => ['out'], receiver => $recv);
    my (%cpu, %alloc);
    for my $i (1 .. 3) {
        my $r = http_get($ap->port, "/burn?fn=alpha&ms=100&n=$i");
        $cpu{ $r->{headers}{'x-span-id'} // '' } = 1 if ($r->{content} // '') =~ /^alpha 100 /;
        $r = http_get($ap->port, "/burn?fn=alloc&kb=4096&n=$i");
        $alloc{ $r->{headers}{'x-span-id'} // '' } = 1 if $r->{status} == 200;
    }
    is scalar(keys %cpu) + scalar(keys %alloc), 6, '3 burning and 3 allocating requests';
    $ap->stop;
    my %k = by_kind(pyroscope_ingests($recv));
    ok $k{$_}, "$_ profile(s) sent to Pyroscope: " . scalar(@{ $k{$_} || [] }) for qw(cpu wall alloc);
    my %types = map { ($_ => 1) } map { pyroscope_types($_->{meta}) } map { @$_ } values %k;
    ok $types{$_}, "Pyroscope lists $_" for qw(process_cpu:cpu:nanoseconds:cpu:nanoseconds
        wall:wall:nanoseconds:wall:nanoseconds memory:alloc_space:bytes:space:bytes);
    my @w = grep { has_frame($_, 'spanprof_apache_burn_alpha') && $cpu{ $_->{labels}{span_id} // '' } }
        map { @{ $_->{samples} } } @{ $k{wall} || [] };
    my $w = 0;
    $w += $_->{values}[1] for @w;
    ok $w >= 0.5 * 300e6, sprintf('wall: %.0f ms at spanprof_apache_burn_alpha on the burning requests\' spans', $w / 1e6);
    my @a = grep { has_frame($_, $ALLOC) && $alloc{ $_->{labels}{span_id} // '' } }
        map { @{ $_->{samples} } } @{ $k{alloc} || [] };
    my $b = 0;
    $b += $_->{values}[1] for @a;
    ok $b >= 0.5 * 12 * 2**20, sprintf('alloc_space: %.1f MB at %s on the allocating requests\' spans (12 MB)',
        $b / 2**20, $ALLOC);
    $recv->stop;
};

done_testing;
