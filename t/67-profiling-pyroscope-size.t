#!/usr/bin/perl
# Pyroscope labels and profile size, in nginx and Apache (the labels under
# each MPM, the size bound under event):
#
# - The pprof sent to Pyroscope's /ingest carries span_id and span_name as
#   sample labels, never trace_id (Pyroscope makes every sample label but
#   span_id a series label); the resource's static attributes are series
#   labels in the ingest `name` (svc{service_version=...,...}); the pprof
#   files keep trace_id.
# - otel_profiling_max_size / OtelProfilingMaxSize: with a 2k bound and
#   many distinct requests (one stack + span label set each), every
#   exported profile (Pyroscope's and the file's) is at most 2048 bytes
#   DECOMPRESSED (the size Pyroscope's validation.max-profile-size-bytes
#   checks), the least-sampled stacks are in one "[truncated]" sample, and
#   no sample is lost: each Pyroscope profile's total equals the file
#   profile's of the same interval and the total the error log line
#   reports, which says how many were merged. The OTLP profiles (gzip'd
#   by the exporter) are bounded the same way before compression.
# - otel_profiling_max_samples / OtelProfilingMaxSamples (Pyroscope's
#   validation.max-profile-stacktrace-samples): with 25 and many distinct
#   requests, every OTLP (nginx), pprof file (Apache) and Pyroscope profile
#   has at most 25 samples, the
#   truncated ones exactly 25 with one [truncated], totals kept; logged,
#   and counted in the status API (profiles_over_max_samples).
# - Bad sizes and sample counts are refused by nginx -t / apache2 -t with
#   file:line.
#
# Every profile is decoded by protoc (SpanProf::Profile).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use SpanProf::Test;
use SpanProf::Profile;
use SpanProf::Apache;

need_module();
need_burn_module();
need_apache_module();

my $BOUND = 2048;

# Bytes of the gunzip of $gz (gzip'd pprof): what Pyroscope measures.
sub plain_size {
    my ($gz) = @_;
    my $plain;
    gunzip(\$gz => \$plain) or die "gunzip failed: $GunzipError\n";
    return length $plain;
}

sub url_decode { my $s = shift; $s =~ tr/+/ /; $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge; return $s }

# The Pyroscope ingests the receiver stored: [{ query => {..}, bytes =>
# gzip'd pprof, samples => [...], meta => {...} }]
sub pyroscope_ingests {
    my ($recv) = @_;
    my @out;
    for my $q (grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests) {
        my ($query) = $q->{path} =~ /\?(.*)$/;
        my %qp = map { my ($k, $v) = split /=/, $_, 2; (url_decode($k) => url_decode($v // '')) } split /&/, $query;
        my ($b) = ($q->{headers}{'content-type'} // '') =~ /boundary="?([^";]+)"?/;
        my ($part) = grep { ($_->{name} // '') eq 'profile' } multipart_parts($q->{body}, $b // 'none');
        my $bytes = $part ? $part->{content} : '';
        my $p = eval { decode_pprof($bytes) };
        push @out, { query => \%qp, raw_query => $query, bytes => $bytes, decoded => $p,
            plain => plain_size($bytes),
            samples => [ $p ? pprof_samples($p) : () ], meta => $p ? pprof_meta($p) : {} };
    }
    return @out;
}

# Decoded pprof files: [{ file, bytes, samples, meta }]
sub file_profiles {
    my ($dir) = @_;
    return map {
        my $p = read_pprof_file($_);
        { file => $_, bytes => -s $_, plain => plain_size(SpanProf::Test::_slurp($_)),
          samples => [ pprof_samples($p) ], meta => pprof_meta($p) }
    } pprof_files($dir);
}

sub truncated_count {
    my ($samples) = @_;
    my @t = grep { grep { $_ eq '[truncated]' } @{ $_->{stack} } } @$samples;
    return (scalar(@t), total(@t), \@t);
}

# Labels and name (no truncation: the default bound). $burn->($i) makes
# request $i and returns (span id, trace id, span name).
sub check_labels {
    my (%o) = @_;
    my ($recv, $dir, $sids, $app, $labels) = @o{qw(recv dir sids app labels)};
    my @ing = pyroscope_ingests($recv);
    ok @ing >= 1, scalar(@ing) . ' Pyroscope ingest(s)' or return diag $recv->summary;
    for my $g (@ing) {
        is $g->{query}{name}, "$app\{$labels}", "name=$g->{query}{name}";
        unlike $g->{raw_query}, qr/name=[^&]*[{},= ]/, 'the name is percent-encoded in the URL';
        ok $g->{decoded}, 'the profile decodes (protoc)';
    }
    my @s = map { @{ $_->{samples} } } @ing;
    my %keys;
    $keys{$_}++ for map { keys %{ $_->{labels} } } @s;
    is_deeply [ sort keys %keys ], [ 'span_id', 'span_name' ], 'sample labels: span_id and span_name only';
    my @mine = grep { $sids->{ $_->{labels}{span_id} // '' } } @s;
    ok total(@mine) > 0, total(@mine) . ' samples carry the span ids of our requests';
    my @named = grep { ($_->{labels}{span_name} // '') =~ m{^GET /} } @mine;
    is total(@named), total(@mine), '... and their span names';

    my @f = file_profiles($dir);
    ok @f >= 1, scalar(@f) . ' pprof file(s)';
    my @fs = map { @{ $_->{samples} } } @f;
    my @ft = grep { defined $_->{labels}{trace_id} && $sids->{ $_->{labels}{span_id} // '' } } @fs;
    ok total(@ft) > 0, 'the pprof files keep trace_id: ' . total(@ft) . ' samples';
    my @bad = grep { ($_->{labels}{trace_id} // '') ne $sids->{ $_->{labels}{span_id} } } @ft;
    is scalar @bad, 0, '... the trace of their span';
}

# max_size: $log is the error log's text.
sub check_bound {
    my (%o) = @_;
    my ($recv, $dir, $log, $min_total) = @o{qw(recv dir log min_total)};
    my @ing = pyroscope_ingests($recv);
    my @f = file_profiles($dir);
    ok @ing >= 1 && @f >= 1, scalar(@ing) . ' Pyroscope ingest(s), ' . scalar(@f) . ' file(s)'
        or return diag $recv->summary;
    # The size a receiver checks is the decompressed one.
    my @over = grep { $_->{plain} > $BOUND } @ing;
    is scalar @over, 0, 'every Pyroscope profile <= ' . $BOUND . ' bytes decompressed: '
        . join(' ', map { "$_->{plain} (gzip " . length($_->{bytes}) . ')' } @ing);
    @over = grep { $_->{plain} > $BOUND } @f;
    is scalar @over, 0, 'every pprof file <= ' . $BOUND . ' bytes decompressed: '
        . join(' ', map { "$_->{plain} (gzip $_->{bytes})" } @f);

    my %file_by_time = map { ($_->{meta}{time_nanos} => $_) } @f;
    my @lines = grep { /profile truncated to otel_profiling_max_size $BOUND/ } split /\n/, $log;
    my ($ntrunc, $all) = (0, 0);
    for my $g (@ing) {
        my $tot = total(@{ $g->{samples} });
        $all += $tot;
        my ($n, $tc) = truncated_count($g->{samples});
        my $d = "profile of $g->{meta}{time_nanos} ($tot samples, " . length($g->{bytes}) . ' bytes)';
        ok $n <= 1, "$d: at most one [truncated] sample";
        my $fp = $file_by_time{ $g->{meta}{time_nanos} };
        ok $fp, "$d: the file of the same interval" or next;
        is total(@{ $fp->{samples} }), $tot, "$d: its total = the file profile's";
        next unless $n;
        $ntrunc++;
        my ($t) = @{ (truncated_count($g->{samples}))[2] };
        is scalar @{ $t->{stack} }, 1, "$d: [truncated] is a one-frame stack";
        is_deeply $t->{labels}, {}, "$d: ... without labels";
        my @l = grep { /Pyroscope profile truncated .*: \d+ of \d+ stacks, \Q$tc\E of \Q$tot\E samples merged into \[truncated\]/ } @lines;
        ok @l >= 1, "$d: the error log says $tc of $tot samples were merged" or diag join "\n", @lines;
    }
    ok $ntrunc >= 1, "$ntrunc Pyroscope profile(s) truncated" or diag join "\n", @lines;
    ok scalar(grep { /pprof file profile truncated/ } @lines) >= 1, 'the file profiles too';
    ok $all >= $min_total, "no sample lost: $all samples in the Pyroscope profiles (>= $min_total)";
    like $lines[0] // '', qr/[\[:]info\]/, 'logged at info';
}

# ---------------------------------------------------------------------------
# nginx
# ---------------------------------------------------------------------------
my $NGX = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name "pyro67 web";
otel_resource_attr service.version 2.4.1;
otel_resource_attr deployment.environment staging;
otel_resource_attr team "core, web";
otel_profiling_rate 1000;
otel_profiling_interval 1s;
otel_profiling_pyroscope %%RECEIVER%%/pyro;
%%SIZE%%
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /alpha/ { spanprof_burn alpha %%MS%%; }
    location /beta/ { spanprof_burn beta %%MS%%; }
}
EOF
my $LABELS = 'service_version=2.4.1,deployment_environment=staging,team=core_ web';

sub ngx_conf {
    my ($size, $ms) = @_;
    (my $c = $NGX) =~ s/%%SIZE%%/$size/;
    $c =~ s/%%MS%%/$ms/g;
    return $c;
}

subtest 'nginx: Pyroscope labels and series labels; files keep trace_id' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1, dirs => ['prof'], conf => ngx_conf('', 40));
    my %sids;
    for my $i (1 .. 6) {
        my $r = http_get($ngx->port, ($i % 2 ? '/alpha/' : '/beta/') . $i);
        is $r->{status}, 200, "request $i" or next;
        $sids{ $r->{headers}{'x-span-id'} } = $r->{headers}{'x-trace-id'};
    }
    $ngx->quit(15);
    check_labels(recv => $recv, dir => $ngx->prefix . '/prof', sids => \%sids,
        app => 'pyro67_web', labels => $LABELS);
    unlike $ngx->error_log, qr/profile truncated/, 'nothing truncated under the defaults';
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx: otel_profiling_max_size 2k, many distinct stacks' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1, dirs => ['prof'],
        conf => ngx_conf('otel_profiling_max_size 2k;', 4));
    my $n = 0;
    for my $i (1 .. 300) {
        my $r = http_get($ngx->port, ($i % 2 ? '/alpha/' : '/beta/') . $i);
        $n++ if $r->{status} == 200;
    }
    is $n, 300, '300 requests of 4 ms CPU each';
    $ngx->quit(15);
    # 1200 ms of CPU at 1000 Hz in the burners alone
    check_bound(recv => $recv, dir => $ngx->prefix . '/prof', log => $ngx->error_log, min_total => 900);
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx -t: bad otel_profiling_max_size' => sub {
    my $srv = "server {\n    listen 127.0.0.1:%%PORT%%;\n    otel_profiling on;\n    location / { return 204; }\n}\n";
    for my $c (['512', qr/between 1024 and 1073741824/], ['2x', qr/invalid value/], ['2048m', qr/between 1024 and 1073741824/]) {
        my ($v, $msg) = @$c;
        my ($rc, $out, $path, $text) = nginx_t("otel_profiling_pyroscope http://127.0.0.1:4040;\notel_profiling_max_size $v;\n$srv");
        isnt $rc, 0, "otel_profiling_max_size $v: nginx -t fails";
        my $line = conf_line($text, qr/otel_profiling_max_size \Q$v\E;/);
        like $out, qr/\Q$path\E:$line\b/, "... at nginx.conf:$line" or diag $out;
        like $out, $msg, "... $msg" or diag $out;
    }
    my ($rc, $out) = nginx_t("otel_profiling_pyroscope http://127.0.0.1:4040;\notel_profiling_max_size 1k;\n$srv");
    is $rc, 0, 'otel_profiling_max_size 1k passes' or diag $out;
};

# otel_profiling_max_samples: $ing Pyroscope ingests, and either $otlp OTLP
# samples (by request seq) or $files pprof files; $log the error log.
my $CAP = 25;
sub check_cap {
    my (%o) = @_;
    my ($ing, $otlp, $files, $log, $min_total) = @o{qw(ing otlp files log min_total)};
    my %by_seq;
    push @{ $by_seq{ $_->{seq} } }, $_ for @{ $otlp || [] };
    my $other = $otlp ? 'OTLP' : 'file';
    my @others = $otlp ? (map { [ "OTLP request $_", $by_seq{$_} ] } sort { $a <=> $b } keys %by_seq)
                       : (map { [ "file $_->{file}", $_->{samples} ] } @$files);
    my @profiles = ((map { [ 'Pyroscope ' . $_->{meta}{time_nanos}, $_->{samples} ] } @$ing), @others);
    ok @$ing >= 1 && @others >= 1, scalar(@$ing) . " Pyroscope ingest(s), " . scalar(@others)
        . " $other profile(s)" or return;
    my %capped;
    for my $pr (@profiles) {
        my ($what, $smp) = @$pr;
        my ($n, $tc) = truncated_count($smp);
        ok @$smp <= $CAP, "$what: " . scalar(@$smp) . " samples <= $CAP";
        ok $n <= 1, "$what: at most one [truncated] sample";
        next unless $n;
        $capped{ (split / /, $what)[0] }++;
        is scalar(@$smp), $CAP, "$what: truncated to exactly $CAP samples ($tc samples merged)";
    }
    ok $capped{Pyroscope}, ($capped{Pyroscope} // 0) . ' Pyroscope profile(s) capped';
    ok $capped{$other}, ($capped{$other} // 0) . " $other profile(s) capped";
    my $pt = total(map { @{ $_->{samples} } } @$ing);
    my $ot = total(map { @{ $_->[1] } } @others);
    ok $pt >= $min_total && $ot >= $min_total, "no sample lost: Pyroscope $pt, $other $ot (>= $min_total)";
    my $what = $otlp ? 'OTLP' : 'pprof file';
    my @lines = grep { /profile truncated to otel_profiling_max_samples $CAP: \d+ of \d+ stacks, \d+ of \d+ samples merged into \[truncated\]/ }
        split /\n/, $log;
    ok scalar(grep { /Pyroscope profile/ } @lines) >= 1 && scalar(grep { /\Q$what\E profile/ } @lines) >= 1,
        'the error log says so for both' or diag join "\n", grep { /truncated/ } split /\n/, $log;
}

my $NGX_OTLP = <<'EOF';
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; compression gzip; interval 100ms; }
otel_service_name cap67;
otel_profiling_rate 1000;
otel_profiling_interval 1s;
otel_profiling_pyroscope %%RECEIVER%%/pyro;
%%LIMITS%%
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /alpha/ { spanprof_burn alpha 4; }
    location /beta/ { spanprof_burn beta 4; }
    location = /api { otel_trace off; otel_profiling off; otel_api; }
}
EOF

sub ngx_burn_300 {
    my ($ngx) = @_;
    my $n = 0;
    for my $i (1 .. 300) {
        my $r = http_get($ngx->port, ($i % 2 ? '/alpha/' : '/beta/') . $i);
        $n++ if $r->{status} == 200;
    }
    is $n, 300, '300 requests of 4 ms CPU each';
}

subtest "nginx: otel_profiling_max_samples $CAP, OTLP and Pyroscope" => sub {
    my $recv = start_receiver();
    (my $conf = $NGX_OTLP) =~ s/%%LIMITS%%/otel_profiling_max_samples $CAP;/;
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => $conf);
    ngx_burn_300($ngx);
    my ($js, $ps) = (0, 0);
    ok wait_until(15, sub { ($js, $ps) = api_counter($ngx->port, '/api', 'profiles_over_max_samples');
                            ($js // 0) >= 2 }),
        'status API: profiles_over_max_samples ' . ($js // 'none') . ' (JSON), ' . ($ps // 'none') . ' (Prometheus)';
    $ngx->quit(15);
    check_cap(ing => [ pyroscope_ingests($recv) ], otlp => [ collect_otlp_samples($recv) ],
        log => $ngx->error_log, min_total => 900);
    $ngx->stop;
    $recv->stop;
};

# OTLP is bounded before the exporter's gzip: each request body the
# receiver gunzipped is within the bound.
subtest 'nginx: otel_profiling_max_size 4k, OTLP bounded before compression' => sub {
    my $recv = start_receiver();
    (my $conf = $NGX_OTLP) =~ s/%%LIMITS%%/otel_profiling_max_size 4k;/;
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => $conf);
    ngx_burn_300($ngx);
    $ngx->quit(15);
    my @req = profile_requests($recv);
    ok @req >= 1, scalar(@req) . ' OTLP requests' or return;
    is scalar(grep { ($_->{raw_encoding} // '') ne 'gzip' } @req), 0, 'all sent gzip\'d';
    is scalar(grep { length($_->{body}) > 4096 } @req), 0, 'every one <= 4096 bytes decompressed: '
        . join(' ', map { length($_->{body}) . ' (gzip ' . length($_->{raw_body} // '') . ')' } @req);
    my @s = collect_otlp_samples($recv);
    my ($n) = truncated_count(\@s);
    ok $n >= 1, "$n OTLP profile(s) with a [truncated] sample";
    ok total(@s) >= 900, 'no sample lost: ' . total(@s);
    like $ngx->error_log, qr/OTLP profile truncated to otel_profiling_max_size 4096 \(\d+ bytes uncompressed\)/,
        'logged';
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx -t: bad otel_profiling_max_samples' => sub {
    my $srv = "server {\n    listen 127.0.0.1:%%PORT%%;\n    otel_profiling on;\n    location / { return 204; }\n}\n";
    for my $c (['0', qr/between 1 and 100000000/], ['many', qr/invalid number/],
               ['100000001', qr/between 1 and 100000000/])
    {
        my ($v, $msg) = @$c;
        my ($rc, $out, $path, $text) = nginx_t("otel_profiling_pyroscope http://127.0.0.1:4040;\notel_profiling_max_samples $v;\n$srv");
        isnt $rc, 0, "otel_profiling_max_samples $v: nginx -t fails";
        my $line = conf_line($text, qr/otel_profiling_max_samples \Q$v\E;/);
        like $out, qr/\Q$path\E:$line\b/, "... at nginx.conf:$line" or diag $out;
        like $out, $msg, "... $msg" or diag $out;
    }
    my ($rc, $out) = nginx_t("otel_profiling_pyroscope http://127.0.0.1:4040;\notel_profiling_max_samples 1;\n$srv");
    is $rc, 0, 'otel_profiling_max_samples 1 passes' or diag $out;
};

# ---------------------------------------------------------------------------
# Apache
# ---------------------------------------------------------------------------
my $AP = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.1
OtelServiceName "pyro67 web"
OtelResourceAttr service.version 2.4.1
OtelResourceAttr deployment.environment staging
OtelResourceAttr team "core, web"
OtelProfilingRate 1000
OtelProfilingInterval 1
OtelProfilingPyroscope %%RECEIVER%%/pyro
OtelTrace On
Header always set X-Span-Id "%{OTEL_SPAN_ID}e"
Header always set X-Trace-Id "%{OTEL_TRACE_ID}e"
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF

# Under each MPM (six short requests: a few seconds each); the size bound
# below runs under event only.
for my $mpm (apache_mpms()) {
subtest "Apache ($mpm): Pyroscope labels and series labels; files keep trace_id" => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => $mpm, conf => $AP, burn => 1, dirs => ['out'], receiver => $recv);
    my %sids;
    for my $i (1 .. 6) {
        my $r = http_get($ap->port, '/burn?fn=' . ($i % 2 ? 'alpha' : 'beta') . "&ms=40&n=$i");
        like $r->{content}, qr/^(alpha|beta) 40 /, "request $i" or next;
        $sids{ $r->{headers}{'x-span-id'} // '' } = $r->{headers}{'x-trace-id'};
    }
    $ap->stop;
    ok !exists $sids{''}, 'X-Span-Id on every answer' or diag explain \%sids;
    check_labels(recv => $recv, dir => $ap->prefix . '/out', sids => \%sids,
        app => 'pyro67_web', labels => $LABELS);
    $recv->stop;
};
}

subtest 'Apache: OtelProfilingMaxSize 2k, many distinct stacks' => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'event', conf => "${AP}OtelProfilingMaxSize 2k\n", burn => 1,
        dirs => ['out'], receiver => $recv);
    my $n = 0;
    for my $i (1 .. 300) {
        my $r = http_get($ap->port, '/burn?fn=' . ($i % 2 ? 'alpha' : 'beta') . "&ms=4&n=$i");
        $n++ if ($r->{content} // '') =~ /^(alpha|beta) 4 /;
    }
    is $n, 300, '300 requests of 4 ms CPU each';
    $ap->stop;
    check_bound(recv => $recv, dir => $ap->prefix . '/out', log => $ap->error_log, min_total => 900);
    $recv->stop;
};

subtest "Apache: OtelProfilingMaxSamples $CAP" => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'event', conf => "${AP}OtelProfilingMaxSamples $CAP\n"
        . "<Location /api>\n    SetHandler spanprof-api\n</Location>\n", burn => 1,
        dirs => ['out'], receiver => $recv);
    my $n = 0;
    for my $i (1 .. 300) {
        my $r = http_get($ap->port, '/burn?fn=' . ($i % 2 ? 'alpha' : 'beta') . "&ms=4&n=$i");
        $n++ if ($r->{content} // '') =~ /^(alpha|beta) 4 /;
    }
    is $n, 300, '300 requests of 4 ms CPU each';
    my ($js, $ps) = (0, 0);
    ok wait_until(15, sub { ($js, $ps) = api_counter($ap->port, '/api', 'profiles_over_max_samples');
                            ($js // 0) >= 2 }),
        'status API: profiles_over_max_samples ' . ($js // 'none') . ' (JSON), ' . ($ps // 'none') . ' (Prometheus)';
    $ap->stop;
    check_cap(ing => [ pyroscope_ingests($recv) ], files => [ file_profiles($ap->prefix . '/out') ],
        log => $ap->error_log, min_total => 900);
    $recv->stop;
};

subtest 'apache2 -t: bad OtelProfilingMaxSize' => sub {
    my $base = "OtelProfilingPyroscope http://127.0.0.1:4040/\n";
    for my $v ('512', '2x', '-1', '2g', 'k') {
        my ($code, $out, $path, $text) = apache_t("${base}OtelProfilingMaxSize $v\n");
        isnt $code, 0, "OtelProfilingMaxSize $v: apache2 -t fails";
        my $line = conf_line($text, qr/OtelProfilingMaxSize \Q$v\E$/);
        like $out, qr/line $line of \Q$path\E/, "... line $line of httpd.conf" or diag $out;
        like $out, qr/OtelProfilingMaxSize: invalid size "\Q$v\E": expected bytes .* from 1k to 1g/, '... the reason'
            or diag $out;
    }
    my ($code, $out) = apache_t("${base}OtelProfilingMaxSize 1k\n");
    is $code, 0, 'OtelProfilingMaxSize 1k passes' or diag $out;
};

subtest 'apache2 -t: bad OtelProfilingMaxSamples' => sub {
    my $base = "OtelProfilingPyroscope http://127.0.0.1:4040/\n";
    for my $v ('0', 'many', '-5', '100000001', '2k') {
        my ($code, $out, $path, $text) = apache_t("${base}OtelProfilingMaxSamples $v\n");
        isnt $code, 0, "OtelProfilingMaxSamples $v: apache2 -t fails";
        my $line = conf_line($text, qr/OtelProfilingMaxSamples \Q$v\E$/);
        like $out, qr/line $line of \Q$path\E/, "... line $line of httpd.conf" or diag $out;
        like $out, qr/OtelProfilingMaxSamples: invalid value "\Q$v\E": expected an integer from 1 to 100000000/,
            '... the reason' or diag $out;
    }
    my ($code, $out) = apache_t("${base}OtelProfilingMaxSamples 1\n");
    is $code, 0, 'OtelProfilingMaxSamples 1 passes' or diag $out;
};

done_testing;
