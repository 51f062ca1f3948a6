#!/usr/bin/perl
# The control and status API in nginx (otel_api), two workers: GET gives
# JSON (module version, configuration in force without credentials, one
# entry per worker with its counters, which move with traffic) or the
# Prometheus text format (parsed by python3-prometheus-client's parser);
# POST/PUT turn profiling off in every worker within a second (no more
# samples or profiles) and change the rate (every slot shows it, and the
# pprof files' period follows); DELETE turns profiling off; write=off
# refuses writes with 403; bad bodies get 400, other methods 405; a reload
# brings the configured state back.
#
# Uses the test-only module t/ngx_burn (spanprof_burn).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use JSON::PP;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $PY = '/usr/bin/python3';

my $ngx = start_nginx(burn => 1, workers => 2, dirs => ['out'], conf => <<'EOF');
otel_exporter {
    endpoint file://%%PREFIX%%/out;
    interval 100ms;
    header X-Api-Key s3cr3t-h3ader;
}
otel_service_name api-test;
otel_profiling_rate 100;
otel_profiling_interval 300ms;
# the counters of the other profiling features are in the API too
otel_profiling_redact burn_alpha;
otel_profiling_keep slow=10s;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    otel_trace on;
    otel_profiling on;
    location /burn { spanprof_burn alpha 15; }
    location = /api { otel_trace off; otel_profiling off; otel_api write=on; }
    location = /ro  { otel_trace off; otel_profiling off; otel_api; }
    location = /ro2 { otel_trace off; otel_profiling off; otel_api write=off; }
}
EOF
my $port = $ngx->port;
my $out  = $ngx->prefix . '/out';
my @workers = sort { $a <=> $b } $ngx->worker_pids;
is scalar @workers, 2, 'two workers';

sub api {
    my ($method, $path, %o) = @_;
    my $r = http_request($method, $port, $path, %o);
    my $j = eval { decode_json($r->{content}) };
    return ($r, $j);
}

sub status_json {
    my ($r, $j) = api('GET', '/api');
    die "GET /api: $r->{status} $r->{content}" unless $r->{status} == 200 && $j;
    return $j;
}

sub slots { my $j = shift; return { map { $_->{pid} => $_ } @{ $j->{workers} } } }

# every one of the given workers has a slot that matches, within $timeout s
sub wait_slots {
    my ($timeout, $want, $cond) = @_;
    my $j;
    my $ok = wait_until($timeout, sub {
        $j = status_json();
        my $s = slots($j);
        return 0 if grep { !$s->{$_} } @$want;
        return !grep { !$cond->($s->{$_}) } @$want;
    });
    return ($ok, $j);
}

sub burn { my $n = shift; http_get($port, '/burn') for 1 .. $n }

sub sum_counter {
    my ($j, $name) = @_;
    my $t = 0;
    $t += $_->{counters}{$name} for @{ $j->{workers} };
    return $t;
}

sub worker_of { my ($j, $pid) = @_; my ($w) = grep { $_->{pid} == $pid } @{ $j->{workers} }; return $w }

# ---------------------------------------------------------------------------
subtest 'GET: JSON status' => sub {
    my ($r, $j) = api('GET', '/api');
    is $r->{status}, 200, 'status 200';
    like $r->{headers}{'content-type'}, qr{^application/json}, 'application/json';
    ok $j, 'parses as JSON' or return diag $r->{content};
    is $j->{module}, 'spanprof', 'module';
    like $j->{version}, qr/^\d+\.\d+\.\d+/, "version $j->{version}";
    is $j->{server}, 'nginx', 'server';
    is $j->{config}{endpoint}, "file://$out", 'endpoint in force';
    is $j->{config}{service_name}, 'api-test', 'service name';
    ok $j->{config}{profiling}, 'profiling configured';
    is $j->{config}{profiling_rate}, 100, 'configured rate';
    is $j->{config}{headers}, 1, 'one exporter header, counted';
    unlike $r->{content}, qr/s3cr3t/, 'no header value in the answer';
    ok $j->{control}{profiling}, 'control: profiling on';
    is $j->{control}{rate}, 100, 'control: rate 100';
    my ($ok, $j2) = wait_slots(5, \@workers, sub { $_[0]{counters}{applied_generation} >= 1 });
    ok $ok, 'a slot per worker, published' or diag explain $j2;
    is scalar @{ $j2->{workers} }, 2, 'two workers listed';
    for my $w (@{ $j2->{workers} }) {
        ok $w->{profiling}, "worker $w->{pid}: profiling on";
        is $w->{rate}, 100, "worker $w->{pid}: rate 100";
        for my $c (qw(spans_started spans_exported spans_dropped_queue_full
                      spans_dropped_export_failed export_requests_ok export_requests_failed
                      export_requests_retried export_h2c_reconnects queue_depth queue_rewinds samples_taken
                      samples_dropped_ring_full samples_unwound_partially samples_reentered
                      profile_builder_dropped profiles_exported profiles_failed profiles_rejected
                      profile_bytes_exported profile_bytes_failed
                      samples_kept samples_unlabelled_by_keep_rules keep_verdicts_dropped
                      samples_undecided_forced samples_pending profiles_truncated profiles_over_max_samples
                      samples_truncated profiles_oversized functions_redacted
                      shed_rate_decreases shed_rate_increases shed_pauses shed_resumes
                      shed_cpu_percent))
        {
            ok exists $w->{counters}{$c}, "worker $w->{pid}: counter $c";
        }
    }
};

subtest 'counters move with traffic' => sub {
    my $before = status_json();
    burn(40);
    my ($ok, $j) = wait_slots(5, \@workers, sub {
        $_[0]{counters}{samples_taken} > 0 && $_[0]{counters}{profiles_exported} > 0 });
    ok $ok, 'every worker took samples and exported profiles' or diag explain $j;
    ok wait_until(5, sub { $j = status_json(); sum_counter($j, 'spans_exported') >= 40 }),
        'spans_exported >= 40: ' . sum_counter($j, 'spans_exported');
    ok sum_counter($j, 'spans_started') >= sum_counter($j, 'spans_exported'),
        'spans_started >= spans_exported';
    ok sum_counter($j, 'export_requests_ok') > sum_counter($before, 'export_requests_ok'),
        'export_requests_ok grew';
    # otel_profiling_redact: the burn function's name; keep slow=10s: no
    # 15 ms burn is kept, so its samples lose their labels
    ok wait_until(5, sub { $j = status_json(); sum_counter($j, 'functions_redacted') > 0
                           && sum_counter($j, 'samples_unlabelled_by_keep_rules') > 0 }),
        'functions_redacted: ' . sum_counter($j, 'functions_redacted')
        . ', samples_unlabelled_by_keep_rules: ' . sum_counter($j, 'samples_unlabelled_by_keep_rules');
    is sum_counter($j, 'samples_kept'), 0, 'samples_kept: 0 (no request is slow)';
    ok sum_counter($j, 'profile_bytes_exported') > 0, 'profile_bytes_exported: '
        . sum_counter($j, 'profile_bytes_exported');
    # the files are written as the counter grows: once both rest, they agree
    my ($bytes, $counted) = (0, -1);
    wait_until(5, sub {
        my $b1 = 0;
        $b1 += -s $_ for pprof_files($out);
        $counted = sum_counter(status_json(), 'profile_bytes_exported');
        $bytes = 0;
        $bytes += -s $_ for pprof_files($out);
        return $b1 == $bytes && $counted == $bytes;
    });
    is $counted, $bytes, "profile_bytes_exported = the pprof files' size ($bytes)";
};

subtest 'Prometheus text, parsed by prometheus_client' => sub {
    my $r = http_get($port, '/api?format=prometheus');
    is $r->{status}, 200, '?format=prometheus: 200';
    like $r->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4}, 'text/plain; version=0.0.4';
    my $r2 = http_get($port, '/api', headers => { Accept => 'text/plain' });
    like $r2->{headers}{'content-type'}, qr{^text/plain}, 'Accept: text/plain gives text too';
    my $tmp = $ngx->prefix . '/metrics.txt';
    open(my $fh, '>', $tmp) or die "$tmp: $!";
    print $fh $r->{content};
    close $fh;
    my $json = `$PY -c '
import json, sys
from prometheus_client.parser import text_string_to_metric_families
fams = []
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    fams.append({"name": f.name, "type": f.type, "doc": f.documentation,
                 "samples": [[s.name, s.labels, s.value] for s in f.samples]})
print(json.dumps(fams))
' $tmp 2>&1`;
    is $?, 0, 'the parser accepts it' or return diag $json;
    my $fams = decode_json($json);
    my %f = map { $_->{name} => $_ } @$fams;
    my $j = status_json();
    for my $c (qw(spans_exported samples_taken profiles_exported profile_bytes_exported
                  export_requests_ok spans_dropped_queue_full samples_dropped_ring_full))
    {
        my $fam = $f{"spanprof_$c"};
        ok $fam, "family spanprof_$c" or next;
        is $fam->{type}, 'counter', "spanprof_$c is a counter";
        ok length $fam->{doc}, "spanprof_$c has HELP";
        my %by = map { $_->[1]{worker} => $_ } @{ $fam->{samples} };
        is_deeply [sort { $a <=> $b } keys %by], \@workers, "spanprof_${c}_total: one sample per worker";
        for my $w (@workers) {
            is $by{$w}[0], "spanprof_${c}_total", "sample name ${c}_total";
            is_deeply [keys %{ $by{$w}[1] }], ['worker'], 'one label: worker';
            my $js = worker_of($j, $w);
            ok $by{$w}[2] <= $js->{counters}{$c}, "worker $w $c: $by{$w}[2] (JSON later: $js->{counters}{$c})";
        }
    }
    ok $f{spanprof_samples_taken}{samples}[0][2] > 0, 'samples_taken > 0 in the text too';
    is $f{spanprof_queue_depth}{type}, 'gauge', 'queue_depth is a gauge';
    is $f{spanprof_rate_hz}{type}, 'gauge', 'rate_hz is a gauge';
    ok $f{spanprof_info}, 'spanprof_info';
};

subtest 'POST profiling off: every worker within a second, no samples, no profiles' => sub {
    my ($r, $j) = api('POST', '/api', content => '{"profiling": false}',
                      headers => { 'Content-Type' => 'application/json' });
    is $r->{status}, 200, 'POST: 200' or diag $r->{content};
    ok $j && !$j->{control}{profiling}, 'control: profiling off';
    my $t0 = time;
    my ($ok, $js) = wait_slots(1.5, \@workers, sub { !$_[0]{profiling} });
    my $took = time - $t0;
    ok $ok && $took <= 1.2, sprintf('every worker slot shows profiling off (%.2f s)', $took)
        or diag explain $js;
    # the interval under way when it stopped may still be written
    sleep 0.8;
    my %files = map { $_ => 1 } pprof_files($out);
    my $before = status_json();
    burn(30);
    sleep 1;
    my $after = status_json();
    for my $w (@workers) {
        my ($b, $a) = (worker_of($before, $w), worker_of($after, $w));
        is $a->{counters}{samples_taken}, $b->{counters}{samples_taken}, "worker $w: no new samples";
        is $a->{counters}{profiles_exported}, $b->{counters}{profiles_exported}, "worker $w: no new profiles";
    }
    my @new = grep { !$files{$_} } pprof_files($out);
    is scalar @new, 0, 'no new pprof file' or diag "@new";
    ok sum_counter($after, 'spans_exported') > sum_counter($before, 'spans_exported'),
        'spans still exported';

    ($r, $j) = api('PUT', '/api', content => '{"profiling": true}');
    is $r->{status}, 200, 'PUT profiling on: 200';
    ($ok, $js) = wait_slots(1.5, \@workers, sub { $_[0]{profiling} });
    ok $ok, 'every worker profiles again';
    burn(20);
    ok wait_until(3, sub { sum_counter(status_json(), 'samples_taken') > sum_counter($after, 'samples_taken') }),
        'samples taken again';
};

subtest 'rate change: every slot, and the pprof period' => sub {
    my ($r, $j) = api('POST', '/api', content => '{"rate": 250}');
    is $r->{status}, 200, 'POST rate 250: 200';
    is $j->{control}{rate}, 250, 'control: rate 250';
    my ($ok, $js) = wait_slots(1.5, \@workers, sub { $_[0]{rate} == 250 });
    ok $ok, 'every worker slot shows rate 250' or diag explain $js;
    my $t = time;
    my @files;
    ok wait_until(10, sub {
        burn(5);
        @files = grep { my ($ms) = m{/cpu-(\d+)-\d+\.pb\.gz$}; $ms / 1000 > $t + 0.05 } pprof_files($out);
        @files >= 1 }), 'profiles begun after the change: ' . scalar @files;
    for my $f (@files) {
        my $m = pprof_meta(read_pprof_file($f));
        is $m->{period}, 4_000_000, "$f: period 4 ms (250 Hz)";
    }
};

subtest 'DELETE, write=off, bad input, other methods' => sub {
    my ($r, $j) = api('DELETE', '/api');
    is $r->{status}, 200, 'DELETE: 200';
    ok $j && !$j->{control}{profiling}, 'DELETE: profiling off';
    my ($ok) = wait_slots(1.5, \@workers, sub { !$_[0]{profiling} });
    ok $ok, 'DELETE: every worker off';
    api('POST', '/api', content => '{"profiling": true}');

    for my $p ('/ro', '/ro2') {
        my $gen = status_json()->{control}{generation};
        for my $m (qw(POST PUT DELETE)) {
            ($r, $j) = api($m, $p, content => '{"profiling": false}');
            is $r->{status}, 403, "$p $m: 403";
            ok $j && $j->{error}, "$p $m: JSON error" or diag $r->{content};
        }
        is status_json()->{control}{generation}, $gen, "$p: nothing changed";
        ($r, $j) = api('GET', $p);
        is $r->{status}, 200, "$p GET: 200";
        ok !$j->{config}{api_write}, "$p: api_write false";
    }
    my $gen = status_json()->{control}{generation};
    for my $body ('', 'nope', '[1]', '{"profiling": "no"}', '{"rate": 0}', '{"rate": 1001}',
                  '{"rate": 2.5}', '{"colour": 1}', '{}', '{"rate": 10' . ('0' x 5000) . '}')
    {
        ($r, $j) = api('POST', '/api', content => $body);
        is $r->{status}, 400, 'POST ' . substr($body, 0, 30) . ': 400';
        ok $j && $j->{error}, 'JSON error: ' . ($j ? $j->{error} : $r->{content});
    }
    is status_json()->{control}{generation}, $gen, 'bad input changed nothing';
    ($r, $j) = api('PATCH', '/api', content => '{}');
    is $r->{status}, 405, 'PATCH: 405';
    like $r->{headers}{allow} // '', qr/GET.*POST.*DELETE/, 'Allow header';
    ($r) = api('HEAD', '/api');
    is $r->{status}, 200, 'HEAD: 200';
};

subtest 'reload: the configured state again' => sub {
    my ($r, $j) = api('POST', '/api', content => '{"profiling": false, "rate": 50}');
    is $r->{status}, 200, 'POST off, 50 Hz';
    my ($ok) = wait_slots(1.5, \@workers, sub { !$_[0]{profiling} && $_[0]{rate} == 50 });
    ok $ok, 'applied';
    my @new = sort { $a <=> $b } $ngx->reload;
    is scalar @new, 2, 'reload: two new workers';
    $j = status_json();
    ok $j->{control}{profiling}, 'control: profiling on again';
    is $j->{control}{rate}, 100, 'control: rate 100 again';
    ($ok, $j) = wait_slots(3, \@new, sub { $_[0]{profiling} && $_[0]{rate} == 100 });
    ok $ok, 'the new workers profile at 100 Hz' or diag explain $j;
};

is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
$ngx->stop;

# nginx -t: otel_api's parameter
my ($rc, $outp) = nginx_t("server { listen 127.0.0.1:%%PORT%%; location /a { otel_api write=maybe; } }");
isnt $rc, 0, 'otel_api write=maybe: nginx -t fails';
like $outp, qr/invalid parameter "write=maybe"/, 'with the reason';

done_testing;
