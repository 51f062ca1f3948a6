#!/usr/bin/perl
# spanprof serve against a real nginx (and Apache) with the module exporting to it over
# OTLP/HTTP: spans and CPU samples are stored and read back through the
# JSON API (search, a trace with CPU per span, a span's flame graph, a
# route's, a diff of two routes, a worker's whole profile with the samples
# of no request); bad input (garbage, oversize, wrong type) is answered
# 400/413/415 and counted; names are escaped; a non-loopback --ui needs
# --token; a kill -9 keeps what was committed and the database opens again.
# Profile types: an nginx exporting cpu and wall (otel_profiling_types cpu
# wall) and a request blocking its worker: its wall and off-CPU flame
# graphs, diff and pprof by type=, its span's off-CPU time; in-use memory
# profiles (made with protoc --encode, as the modules do not export them
# yet) per worker over time and as a flame graph of the latest snapshot.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Serve;
use SpanProf::Profile;
use File::Temp qw(tempdir);

need_module();
need_burn_module();
plan skip_all => 'spanprof serve not built: ' . serve_bin() unless -x serve_bin();

my $sv = start_serve();

my $ngx = start_nginx(burn => 1, receiver_url => $sv->otlp_url, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name serve-test;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /slow { spanprof_burn alpha 300; }
    location /fast { spanprof_burn beta 30; }
    location /named { otel_span_name $http_x_name; return 200 "named\n"; }
    location /tick { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF

my $slow = http_get($ngx->port, '/slow');
my @fast = map { http_get($ngx->port, '/fast') } 1 .. 3;
my $evil = '<script>window.pwned=1</script>';
my $named = http_get($ngx->port, '/named', headers => { 'X-Name' => $evil });
my $tid = $slow->{headers}{'x-trace-id'};
my $sid = $slow->{headers}{'x-span-id'};
ok $tid && $sid, "the /slow request's ids: $tid $sid";

# Spans arrive within 100 ms; profiles every 300 ms (the /tick requests make
# sure the interval holding the requests' end has samples to export).
my $trace;
wait_until(20, sub {
    http_get($ngx->port, '/tick');
    my $r = $sv->get("/api/traces/$tid");
    return 0 unless $r->{status} == 200;
    $trace = JSON::PP::decode_json($r->{content});
    my ($s) = grep { $_->{span_id} eq $sid } @{ $trace->{spans} };
    return 0 unless $s && $s->{cpu_samples} >= 100;
    return 0 unless @{ $sv->api('/api/traces', service => 'serve-test') } >= 5;
    # the /fast requests' samples too, and some outside any request
    for my $f (@fast) {
        my $ft = $sv->get('/api/traces/' . $f->{headers}{'x-trace-id'});
        return 0 unless $ft->{status} == 200
            && JSON::PP::decode_json($ft->{content})->{spans}[0]{cpu_samples} > 0;
    }
    my ($w) = grep { $_->{pid} == ($ngx->worker_pids)[0] } @{ $sv->api('/api/workers') };
    return $w && $w->{cpu_ns} > $w->{in_requests_ns};
});

subtest 'search' => sub {
    my $svcs = $sv->api('/api/services');
    ok((grep { $_ eq 'serve-test' } @$svcs), 'service listed') or diag explain $svcs;
    my $tr = $sv->api('/api/traces', order => 'slowest', service => 'serve-test');
    ok @$tr >= 5, scalar(@$tr) . ' traces';
    is $tr->[0]{trace_id}, $tid, 'the slowest trace is /slow';
    is $tr->[0]{route}, '/slow', 'its route';
    is $tr->[0]{http_status}, 200, 'its status';
    my $min = $sv->api('/api/traces', min_duration => '200ms');
    is_deeply [ map { $_->{trace_id} } @$min ], [$tid], 'min_duration=200ms: only /slow';
    my $f = $sv->api('/api/traces', route => '/fast');
    is scalar(@$f), 3, 'route=/fast: its 3 traces';
    my $none = $sv->api('/api/traces', status => 404);
    is scalar(@$none), 0, 'status=404: none';
    my $future = $sv->api('/api/traces', since => '+1h');
    is scalar(@$future), 0, 'since in the future: none';
    is $sv->get('/api/traces', status => 'abc')->{status}, 400, 'status=abc: 400';
    is $sv->get('/api/traces', min_duration => 'soon')->{status}, 400, 'min_duration=soon: 400';
};

subtest 'a trace: CPU beside wall time' => sub {
    ok $trace, 'the trace with its samples arrived' or return;
    my ($s) = grep { $_->{span_id} eq $sid } @{ $trace->{spans} };
    ok $s, 'the SERVER span';
    cmp_ok $s->{duration_ns}, '>=', 300e6, 'wall >= 300 ms';
    # 1000 Hz: a sample is 1 ms of CPU; the burn is 300 ms of CPU.
    cmp_ok $s->{cpu_ns}, '>=', 150e6, "CPU $s->{cpu_ns} ns >= 150 ms";
    cmp_ok $s->{cpu_ns}, '<=', 400e6, 'CPU <= 400 ms';
    is $s->{attributes}{'http.route'}, '/slow', 'attributes kept';
    is $sv->get('/api/traces/' . ('0' x 31) . '1')->{status}, 404, 'unknown trace: 404';
    is $sv->get('/api/traces/xyz')->{status}, 400, 'bad id: 400';
};

sub frames {
    my ($n, $out, $path) = @_;
    $out //= {};
    my $name = $n->{n};
    $out->{$name} += $n->{t}[0] if defined $path;
    frames($_, $out, 1) for @{ $n->{c} || [] };
    return $out;
}

subtest 'the flame graph of exactly one span' => sub {
    my $f = $sv->api('/api/flame', trace => $tid, span => $sid);
    my $fr = frames($f->{tree});
    my $total = $f->{tree}{t}[0];
    cmp_ok $total, '>=', 150e6, 'its CPU';
    cmp_ok $fr->{spanprof_burn_alpha} // 0, '>=', 0.8 * $total,
        'spanprof_burn_alpha holds >= 80% of it';
    ok !exists $fr->{spanprof_burn_beta}, 'no frame of the /fast requests';
    is $sv->get('/api/flame', trace => $tid)->{status}, 400, 'trace without span: 400';
};

subtest 'the span as a pprof download' => sub {
    my $r = $sv->get('/api/pprof', trace => $tid, span => $sid);
    is $r->{status}, 200, 'answered 200';
    like $r->{headers}{'content-disposition'} // '', qr/attachment; filename="spanprof\.pb\.gz"/, 'an attachment';
    my $p = decode_pprof($r->{content});           # protoc --decode
    my @s = pprof_samples($p);
    my ($cpu, $alpha) = (0, 0);
    for my $x (@s) {
        $cpu += $x->{values}[1];
        $alpha += $x->{values}[1] if grep { $_ eq 'spanprof_burn_alpha' } @{ $x->{stack} };
    }
    my $f = $sv->api('/api/flame', trace => $tid, span => $sid);
    is $cpu, $f->{tree}{t}[0], 'its cpu/nanoseconds total is the flame graph\'s';
    cmp_ok $alpha, '>=', 0.8 * $cpu, 'the burn function holds most of it';
    my $dir = tempdir(CLEANUP => 1);
    open(my $fh, '>:raw', "$dir/span.pb.gz") or die; print $fh $r->{content}; close $fh;
    my ($rc, $out) = go_pprof_raw("$dir/span.pb.gz");
    SKIP: {
        skip 'go not installed', 1 unless defined $rc;
        is $rc, 0, 'go tool pprof reads it' or diag $out;
    }
};

subtest 'a route, a diff, a worker' => sub {
    my $r = $sv->api('/api/flame', service => 'serve-test', route => '/fast');
    my $fr = frames($r->{tree});
    ok $fr->{spanprof_burn_beta}, 'route /fast: its burn frame';
    ok !$fr->{spanprof_burn_alpha}, 'route /fast: not /slow\'s';
    my $d = $sv->api('/api/diff', service => 'serve-test', route => '/slow',
        base_service => 'serve-test', base_route => '/fast');
    my (%a, %b);
    my $walk; $walk = sub {
        my $n = shift;
        $a{$n->{n}} += $n->{t}[0]; $b{$n->{n}} += $n->{t}[1];
        $walk->($_) for @{ $n->{c} || [] };
    };
    $walk->($d->{tree});
    ok $a{spanprof_burn_alpha} > 0 && !$b{spanprof_burn_alpha}, 'diff: alpha on the compared side only';
    ok $b{spanprof_burn_beta} > 0 && !$a{spanprof_burn_beta}, 'diff: beta on the base side only';
    my $ws = $sv->api('/api/workers');
    my ($wk) = grep { $_->{pid} == ($ngx->worker_pids)[0] } @$ws;
    ok $wk, 'the worker is listed' or diag explain $ws;
    cmp_ok $wk->{in_requests_ns}, '>', 0, 'with CPU in requests';
    cmp_ok $wk->{cpu_ns}, '>', $wk->{in_requests_ns}, 'and outside them';
    my $w = $sv->api('/api/flame', pid => ($ngx->worker_pids)[0]);
    my %top = map { $_->{n} => $_->{t}[0] } @{ $w->{tree}{c} || [] };
    ok $top{'[no request]'}, 'the worker profile shows the samples of no request as such'
        or diag explain [ keys %top ];
    cmp_ok $w->{tree}{t}[0], '>', $top{'[no request]'} // 0, 'and those of requests';
};

subtest 'names are data, not markup' => sub {
    my $r = $sv->api('/api/traces', route => '/named');
    is $r->[0]{name}, $evil, 'the span name round-trips';
    my $raw = $sv->get('/api/traces', route => '/named')->{content};
    unlike $raw, qr/<script>/, 'the JSON carries no raw < or > (\\u003c escapes)';
    like $raw, qr/\\u003cscript\\u003e/, 'escaped';
};

subtest 'OTLP/JSON, as the OTLP specification writes it' => sub {
    # The shape of the specification's example (hex ids, integer enums,
    # 64-bit integers as strings, lowerCamelCase names).
    my $t = '5b8efff798038103d269b633813fc60c';
    my $json = <<"EOJ";
{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"json-svc"}}]},
 "scopeSpans":[{"scope":{"name":"x"},"spans":[{"traceId":"$t","spanId":"eee19b7ec3c1b174",
  "parentSpanId":"eee19b7ec3c1b173","name":"GET /json","kind":2,
  "startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
  "attributes":[{"key":"http.route","value":{"stringValue":"/json"}},
                {"key":"http.response.status_code","value":{"intValue":"503"}}],
  "status":{"code":2}}]}]}]}
EOJ
    my $r = $sv->post_otlp('/v1/traces', $json, 'Content-Type' => 'application/json');
    is $r->{status}, 200, 'answered 200';
    like $r->{headers}{'content-type'}, qr{application/json}, 'answered in JSON';
    my $tr = $sv->api("/api/traces/$t");
    my ($s) = @{ $tr->{spans} };
    is $s->{span_id}, 'eee19b7ec3c1b174', 'span id from hex';
    is $s->{parent_id}, 'eee19b7ec3c1b173', 'parent id from hex';
    is $s->{service}, 'json-svc', 'resource';
    is $s->{kind}, 2, 'kind';
    is $s->{http_status}, 503, 'intValue as a string';
    ok $s->{error}, 'status code 2: error';
    is $s->{duration_ns}, 1e9, 'times as strings';
    my $bad = $sv->post_otlp('/v1/traces', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}',
        'Content-Type' => 'application/json');
    is $bad->{status}, 400, 'a non-hex id: 400';
    like $bad->{content}, qr/trace_id/, 'naming the field';
    is $sv->post_otlp('/v1/traces', '{"resourceSpans":', 'Content-Type' => 'application/json')->{status},
        400, 'truncated JSON: 400';
    my $part = $sv->post_otlp('/v1/traces', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00","spanId":"00"}]}]}]}',
        'Content-Type' => 'application/json');
    is $part->{status}, 200, 'a span with short ids: 200';
    like $part->{content}, qr/"partialSuccess":\{"rejectedSpans":"1"/, 'with partial success';
};

subtest 'bad input is answered and counted' => sub {
    my $before = $sv->api('/api/stats');
    is $sv->post_otlp('/v1/traces', "\x0a\xff\xff\xff\xff\x0f")->{status}, 400, 'malformed protobuf: 400';
    is $sv->post_otlp('/v1/traces', 'x', 'Content-Encoding' => 'gzip')->{status}, 400, 'bad gzip: 400';
    is $sv->post_otlp('/v1/traces', 'x' x (17 * 1024 * 1024))->{status}, 413, 'over 16 MiB: 413';
    is $sv->post_otlp('/v1/traces', '{}', 'Content-Type' => 'text/plain')->{status}, 415, 'text/plain: 415';
    is $sv->post_otlp('/v1/logs', '')->{status}, 404, '/v1/logs: 404';
    my $after = $sv->api('/api/stats');
    is $after->{otlp_bad_requests} - $before->{otlp_bad_requests}, 2, 'two bad requests counted';
    is $after->{otlp_too_large} - $before->{otlp_too_large}, 1, 'one oversize counted';
    cmp_ok $after->{otlp_unsupported} - $before->{otlp_unsupported}, '>=', 2, 'unsupported counted';
    ok kill(0, $sv->pid), 'still running';
};

subtest 'token' => sub {
    my $out = `@{[serve_bin()]} serve --ui 0.0.0.0:1 --data /nonexistent 2>&1`;
    isnt $? >> 8, 0, 'a non-loopback --ui without --token is refused';
    like $out, qr/--token/, 'saying why';
    my $t = start_serve(token => 's3cret');
    is $t->get('/api/services')->{status}, 401, 'no token: 401';
    is $t->get('/api/services', token => 's3cret')->{status}, 200, '?token=: 200';
    $t->stop;
};

subtest 'Apache exports to it too' => sub {
    my @mpms = eval { require SpanProf::Apache; SpanProf::Apache::apache_mpms() };
    unless (@mpms && -f SpanProf::Apache::apache_module_path()) {
        plan skip_all => 'the Apache module is not built';
    }
    my $ap = SpanProf::Apache::start_apache(mpm => 'event', burn => 1, servers => 1,
        receiver_url => $sv->otlp_url, conf => <<'EOC');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.2
OtelServiceName apache-serve
OtelProfilingInterval 0.3
OtelProfilingRate 1000
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOC
    my $r = SpanProf::Test::http_get($ap->port, '/burn?fn=alpha&ms=300&n=1');
    like $r->{content}, qr/^alpha 300 /, 'burned';
    my $tr;
    ok wait_until(20, sub {
        SpanProf::Test::http_get($ap->port, '/burn?fn=beta&ms=5&n=2');
        my $l = $sv->api('/api/traces', service => 'apache-serve', order => 'slowest', limit => 1);
        return 0 unless @$l;
        $tr = $sv->api('/api/traces/' . $l->[0]{trace_id});
        return $tr->{spans}[0]{cpu_samples} >= 100;
    }), 'the Apache span and its samples arrived';
    my $s = $tr->{spans}[0];
    like $s->{target} // '', qr{^/burn}, 'the /burn span';
    my $f = $sv->api('/api/flame', trace => $s->{trace_id}, span => $s->{span_id});
    my $fr = frames($f->{tree});
    ok((grep { /alpha/ } keys %$fr), 'its flame graph holds the alpha burn')
        or diag explain [ sort keys %$fr ];
    $ap->stop;
};

subtest '--import what the file exporter wrote' => sub {
    my $dir = tempdir('spanprof-import-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $fngx = start_nginx(burn => 1, conf => <<"EOC");
otel_exporter { endpoint file://$dir; interval 100ms; }
otel_service_name import-test;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id \$otel_trace_id always;
    add_header X-Span-Id \$otel_span_id always;
    location /slow { spanprof_burn alpha 200; }
}
EOC
    my $r = http_get($fngx->port, '/slow');
    $fngx->stop;        # flushes spans and the last profile
    my $im = start_serve(extra => [ '--import', $dir ]);
    like $im->log, qr/imported .*: [1-9]\d* spans .* [1-9]\d* samples from [1-9]\d* profiles/,
        'the import is reported' or diag $im->log;
    my $t = $im->api('/api/traces/' . $r->{headers}{'x-trace-id'});
    my ($s) = grep { $_->{span_id} eq $r->{headers}{'x-span-id'} } @{ $t->{spans} };
    is $s->{service}, 'import-test', 'the span, with its resource';
    cmp_ok $s->{cpu_samples}, '>=', 100, 'its samples';
    my $f = $im->api('/api/flame', trace => $r->{headers}{'x-trace-id'}, span => $s->{span_id});
    ok frames($f->{tree})->{spanprof_burn_alpha}, 'its flame graph';
    $im->stop;
};

# protoc --encode of an ExportProfilesServiceRequest in text format.
sub encode_profiles {
    my ($text) = @_;
    my $dir = tempdir(CLEANUP => 1);
    open(my $fh, '>', "$dir/msg") or die; print $fh $text; close $fh;
    my $root = repo_root();
    my ($rc, $out, $err) = SpanProf::Test::_run(['protoc',
        '--encode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest',
        '-I', "$root/proto",
        "$root/proto/opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"],
        stdin => "$dir/msg");
    die "protoc --encode failed: $err" if $rc != 0;
    return $out;
}

subtest 'profile types: wall-clock and off-CPU from nginx' => sub {
    is_deeply $sv->api('/api/memory'), [], 'no memory profile yet: /api/memory is empty';
    my $wngx = start_nginx(burn => 1, receiver_url => $sv->otlp_url, conf => <<'EOC');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name serve-wall;
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
    location /spin  { spanprof_burn beta 50; }
    location /tick  { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOC
    my $b = http_get($wngx->port, '/block');
    http_get($wngx->port, '/spin');
    my ($btid, $bsid) = ($b->{headers}{'x-trace-id'}, $b->{headers}{'x-span-id'});
    my %sel = (trace => $btid, span => $bsid);
    my %types;
    ok wait_until(20, sub {
        http_get($wngx->port, '/tick');
        my $r = $sv->get('/api/types', %sel);
        return 0 unless $r->{status} == 200;
        %types = map { $_->{type} => $_ } @{ JSON::PP::decode_json($r->{content}) };
        return ($types{off_cpu}{value} // 0) >= 180e6 && ($types{wall}{value} // 0) >= 180e6;
    }), 'the /block span\'s wall and off-CPU samples arrived' or diag explain \%types;
    is $types{off_cpu}{unit}, 'nanoseconds', '/api/types: off_cpu in nanoseconds';
    ok !$types{inuse_space}, 'no memory type for a span';

    my $block = 'spanprof_burn_block_on_pipe';
    my $off = $sv->api('/api/flame', %sel, type => 'off_cpu');
    is $off->{type}, 'off_cpu', 'type=off_cpu: the answer says so';
    my $fo = frames($off->{tree});
    cmp_ok $fo->{$block} // 0, '>=', 180e6, sprintf('off-CPU flame graph: %s holds %.1f ms (>= 180)',
        $block, ($fo->{$block} // 0) / 1e6) or diag explain [ sort keys %$fo ];
    my $wall = $sv->api('/api/flame', %sel, type => 'wall');
    cmp_ok frames($wall->{tree})->{$block} // 0, '>=', 180e6, 'wall flame graph: the blocking stack';
    my $cpu = $sv->api('/api/flame', %sel);
    is $cpu->{type}, 'cpu', 'no type: cpu';
    cmp_ok frames($cpu->{tree})->{$block} // 0, '<', 50e6, 'the CPU flame graph: little CPU where it blocked';
    my $none = $sv->api('/api/flame', %sel, type => 'nosuch');
    is $none->{tree}{t}[0], 0, 'a type no sample has: an empty graph';

    my $t = $sv->api("/api/traces/$btid");
    my ($s) = grep { $_->{span_id} eq $bsid } @{ $t->{spans} };
    cmp_ok $s->{off_cpu_ns} // 0, '>=', 180e6, "the span's off-CPU time: $s->{off_cpu_ns}";
    cmp_ok $s->{wall_ns} // 0, '>=', 180e6, "its wall time: $s->{wall_ns}";
    cmp_ok $s->{cpu_ns}, '<', $s->{off_cpu_ns} // 0, 'its CPU less than its off-CPU';

    my $d = $sv->api('/api/diff', type => 'off_cpu', service => 'serve-wall', route => '/block',
        base_service => 'serve-wall', base_route => '/spin');
    my (%a, %bs);
    my $walk; $walk = sub {
        my $n = shift;
        $a{$n->{n}} += $n->{t}[0]; $bs{$n->{n}} += $n->{t}[1];
        $walk->($_) for @{ $n->{c} || [] };
    };
    $walk->($d->{tree});
    cmp_ok $a{$block} // 0, '>=', 180e6, 'off-CPU diff: the blocking stack on the compared side';
    ok !$bs{$block}, 'and not on the base side';

    my $pp = $sv->get('/api/pprof', %sel, type => 'off_cpu');
    is $pp->{status}, 200, 'pprof of type=off_cpu';
    my $m = pprof_meta(decode_pprof($pp->{content}));
    is_deeply $m->{sample_types}, ['samples/count', 'off_cpu/nanoseconds'], 'valued off_cpu/nanoseconds';
    my $vt = 0; $vt += $_->{values}[1] for pprof_samples(decode_pprof($pp->{content}));
    is $vt, $off->{tree}{t}[0], 'its total is the flame graph\'s';
    $wngx->stop;
};

subtest 'profile types: in-use memory per worker' => sub {
    my $t0 = int(time() * 1e9) - 5e9;
    my $profile = sub {
        my ($ts, $v1, $v2) = @_;
        return "profiles { sample_type { type_strindex: 1 unit_strindex: 2 }"
            . " time_unix_nano: $ts samples { stack_index: 1 values: $v1 }"
            . " samples { stack_index: 2 values: $v2 } }";
    };
    my $text = 'resource_profiles { resource {'
        . ' attributes { key: "service.name" value { string_value: "mem-svc" } }'
        . ' attributes { key: "process.pid" value { int_value: 4242 } } }'
        . ' scope_profiles { ' . $profile->($t0, 1000000, 24000) . ' '
        . $profile->($t0 + 1e9, 3000000, 48000) . ' '
        . 'profiles { sample_type { type_strindex: 6 unit_strindex: 7 }'
        . " time_unix_nano: $t0 samples { stack_index: 1 values: 5 } } } }"
        . ' dictionary { string_table: "" string_table: "inuse_space" string_table: "bytes"'
        . ' string_table: "main" string_table: "big_alloc" string_table: "small_alloc"'
        . ' string_table: "goroutines" string_table: "count"'
        . ' function_table { } function_table { name_strindex: 3 }'
        . ' function_table { name_strindex: 4 } function_table { name_strindex: 5 }'
        . ' location_table { } location_table { lines { function_index: 1 } }'
        . ' location_table { lines { function_index: 2 } } location_table { lines { function_index: 3 } }'
        . ' stack_table { } stack_table { location_indices: [2, 1] } stack_table { location_indices: [3, 1] } }';
    my $r = $sv->post_otlp('/v1development/profiles', encode_profiles($text));
    is $r->{status}, 200, 'inuse_space (and an unknown type) profiles posted';
    my $mem = $sv->api('/api/memory');
    my ($w) = grep { $_->{pid} == 4242 } @$mem;
    ok $w, 'the worker\'s in-use memory' or return diag explain $mem;
    is $w->{service}, 'mem-svc', 'with its service';
    is_deeply $w->{points}, [ [ $t0, 1024000 ], [ $t0 + 1e9, 3048000 ] ], 'by snapshot, over time';
    my $f = $sv->api('/api/flame', pid => 4242, type => 'inuse_space');
    is $f->{unit}, 'bytes', 'its flame graph in bytes';
    my $fr = frames($f->{tree});
    is $fr->{big_alloc}, 3000000, 'by stack, of the latest snapshot (not the sum of both)';
    is $fr->{small_alloc}, 48000, 'every stack of it';
    my %ty = map { $_->{type} => $_ } @{ $sv->api('/api/types', pid => 4242) };
    ok $ty{inuse_space} && $ty{inuse_space}{gauge}, 'inuse_space listed for the worker, as snapshots';
    is $ty{goroutines}{value}, 5, 'a type serve does not know is stored too';
};

subtest 'kill -9 keeps what was committed' => sub {
    # Batches are committed together within 250 ms: once the exports have
    # stopped and that time has passed, everything is committed.
    $ngx->stop;
    sleep 0.6;
    my $n = scalar @{ $sv->api('/api/traces', limit => 1000) };
    $sv->kill9;
    $sv->restart;
    my $m = scalar @{ $sv->api('/api/traces', limit => 1000) };
    is $m, $n, "the $n traces are there after kill -9 and a restart";
};

done_testing;
