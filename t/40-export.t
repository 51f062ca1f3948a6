#!/usr/bin/perl
# OTLP/HTTP export on the happy path: POST {endpoint}/v1/traces with
# Content-Type application/x-protobuf, configured headers on every request,
# batch_size respected, one ResourceSpans/ScopeSpans per request, every span
# delivered exactly once; compression gzip; an endpoint with a base path;
# the default service name; export (spans and profiles) on the worker's own
# event loop, the worker keeping a single thread (also with a debug log).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;

need_module();

sub check_log_convention {
    my ($ngx) = @_;
    my @bad = $ngx->log_convention_violations;
    is scalar @bad, 0, 'module error log lines start with "spanprof: "' or diag join "\n", @bad;
    is scalar($ngx->crash_lines), 0, 'no crash in the error log' or diag join "\n", $ngx->crash_lines;
}

subtest 'headers, batches, no compression' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter {
    endpoint %%RECEIVER%%; protocol http/protobuf;
    interval 100ms;
    batch_size 5;
    header X-Token abc;
    header X-Second "two words";
    compression none;
}
otel_service_name export-a;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\n"; }
}
EOF
    my %tids;
    for my $i (1 .. 12) {
        my $r = http_get($ngx->port, "/a/$i");
        is $r->{status}, 200, "request $i";
    }
    my @spans = wait_for_spans($recv, 12, 15, filter => sub { ($_[0]{attrs}{'url.path'} // '') =~ m{^/a/\d+$} });
    is scalar @spans, 12, 'all 12 spans arrived' or diag span_summary(collect_spans($recv));
    is_deeply [ sort { $a <=> $b } map { $_->{attrs}{'url.path'} =~ m{(\d+)$} } @spans ], [1 .. 12], 'one per request';
    is $_->{resource}{'service.name'}, 'export-a', 'service.name' for $spans[0];

    my @reqs = $recv->requests;
    ok @reqs >= 3, 'at least 3 export requests for 12 spans with batch_size 5: ' . scalar @reqs;
    my %count;
    for my $q (@reqs) {
        my $d = "request #$q->{seq}";
        is $q->{method}, 'POST', "$d: POST";
        is $q->{path}, '/v1/traces', "$d: path /v1/traces";
        like $q->{headers}{'content-type'} // '', qr{^application/x-protobuf$}i, "$d: Content-Type";
        is $q->{headers}{'x-token'}, 'abc', "$d: X-Token header";
        is $q->{headers}{'x-second'}, 'two words', "$d: header with a space";
        ok !$q->{raw_encoding} && ($q->{headers}{'content-encoding'} // 'identity') eq 'identity',
            "$d: not compressed";
        my $dec = decode_traces($q->{body});
        is scalar @{ $dec->{resource_spans} || [] }, 1, "$d: one ResourceSpans";
        is scalar @{ $dec->{resource_spans}[0]{scope_spans} || [] }, 1, "$d: one ScopeSpans";
        my @s = spans_from_request($dec);
        ok @s >= 1 && @s <= 5, "$d: 1..5 spans (batch_size 5): " . scalar @s;
        is $s[0]{scope}{name}, 'spanprof', "$d: scope name";
        like $s[0]{scope}{version}, qr/\S/, "$d: scope version";
        $count{ $_->{span_id} }++ for @s;
    }
    my @twice = grep { $count{$_} > 1 } keys %count;
    is scalar @twice, 0, 'no span sent twice';
    check_log_convention($ngx);
};

subtest 'gzip, base path, default service name' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter {
    endpoint %%RECEIVER%%/otlp; protocol http/protobuf;
    interval 100ms;
    compression gzip;
    header X-Token abc;
}
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\n"; }
}
EOF
    http_get($ngx->port, "/g/$_") for 1 .. 5;
    my @spans = wait_for_spans($recv, 5, 15, filter => sub { ($_[0]{attrs}{'url.path'} // '') =~ m{^/g/} });
    is scalar @spans, 5, 'all 5 spans arrived (gunzipped and decoded)' or diag $recv->summary;
    is $spans[0]{resource}{'service.name'}, 'unknown_service:nginx', 'default service.name';
    my @reqs = $recv->requests;
    ok @reqs >= 1, 'export requests';
    for my $q (@reqs) {
        my $d = "request #$q->{seq}";
        is $q->{path}, '/otlp/v1/traces', "$d: path {endpoint}/v1/traces";
        is $q->{headers}{'content-encoding'}, 'gzip', "$d: Content-Encoding gzip";
        is $q->{raw_encoding}, 'gzip', "$d: body was gzip";
        isnt $q->{raw_body}, $q->{body}, "$d: compressed bytes differ";
        like $q->{headers}{'content-type'} // '', qr{^application/x-protobuf$}i, "$d: Content-Type";
        is $q->{headers}{'x-token'}, 'abc', "$d: X-Token header";
    }
    check_log_convention($ngx);
};

subtest 'the worker keeps a single thread while exporting' => sub {
    plan skip_all => 'needs the burn test module' unless -f burn_module_path();
    my $recv = start_receiver();
    # nginx's debug log reads a connection's fd from every timer's data.
    my $ngx  = start_nginx(receiver => $recv, burn => 1,
        main => 'error_log %%PREFIX%%/debug.log debug;', conf => <<'EOF');
otel_exporter {
    endpoint %%RECEIVER%%; protocol http/protobuf;
    interval 100ms;
    batch_size 3;
}
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /burn { spanprof_burn alpha 30; }
    location / { return 200 "ok\n"; }
}
EOF
    http_get($ngx->port, "/t/$_") for 1 .. 7;
    http_get($ngx->port, '/burn') for 1 .. 3;
    my @spans = wait_for_spans($recv, 10, 15);
    is scalar @spans, 10, 'all 10 spans arrived' or diag $recv->summary;
    my $profiles = wait_until(15, sub {
        http_get($ngx->port, '/burn');
        scalar grep { $_->{path} eq '/v1development/profiles' } $recv->requests;
    });
    ok $profiles, 'an OTLP profile arrived too';
    my ($worker) = $ngx->worker_pids;
    opendir(my $d, "/proc/$worker/task") or die "/proc/$worker/task: $!";
    my @tasks = grep { /^\d+$/ } readdir $d;
    is scalar @tasks, 1, "worker $worker has one thread (no exporter thread)";
    my $debug = SpanProf::Test::_slurp($ngx->prefix . '/debug.log') // '';
    like $debug, qr/spanprof: profile built, encoded and handed over in \d+ us/,
        'debug log: the time the profile took from the event loop';
    check_log_convention($ngx);
};

done_testing;
