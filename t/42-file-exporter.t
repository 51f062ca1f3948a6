#!/usr/bin/perl
# endpoint file:///dir appends one OTLP/JSON object per line to
# dir/traces.jsonl: top key "resourceSpans", ids as lowercase hex, 64-bit
# integers as strings, enums as integers; spans queued at quit are flushed.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time);
use SpanProf::Test;

need_module();

my $CONF = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/otel; interval %%INTERVAL%%; }
otel_service_name file-test;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /f/   { return 200 "file\n"; }
    location /err/ { return 500; }
}
EOF

sub file_spans {
    my ($file) = @_;
    return map { spans_from_json($_->{json} || {}) } read_jsonl($file);
}

subtest 'OTLP/JSON lines' => sub {
    (my $conf = $CONF) =~ s/%%INTERVAL%%/100ms/;
    my $ngx = start_nginx(conf => $conf, dirs => ['otel']);
    my $file = $ngx->prefix . '/otel/traces.jsonl';
    my %res = (
        f1  => http_get($ngx->port, '/f/1'),
        f2  => http_get($ngx->port, '/f/2?q=x'),
        err => http_get($ngx->port, '/err/e'),
    );
    my $got = wait_until(10, sub { scalar(server_spans(file_spans($file))) >= 3 });
    ok $got, 'three spans written to traces.jsonl' or return diag($ngx->error_log_tail(20));

    my $text = SpanProf::Test::_slurp($file);
    like $text, qr/\n\z/, 'file ends with a newline';
    my @lines = read_jsonl($file);
    for my $l (@lines) {
        ok !$l->{error} && ref $l->{json} eq 'HASH', 'line is a JSON object' or diag "$l->{error}: $l->{raw}";
        ok ref $l->{json}{resourceSpans} eq 'ARRAY', 'top key resourceSpans';
        unlike $l->{raw}, qr/"(?:startTimeUnixNano|endTimeUnixNano|timeUnixNano)"\s*:\s*\d/, '64-bit times are strings';
        unlike $l->{raw}, qr/"intValue"\s*:\s*-?\d/, 'intValue is a string';
        unlike $l->{raw}, qr/"resource_spans"|"trace_id"/, 'lowerCamelCase field names';
    }
    my $raw = join "\n", map { $_->{raw} } @lines;
    like $raw, qr/"startTimeUnixNano"\s*:\s*"\d{19}"/, 'startTimeUnixNano as a decimal string';
    like $raw, qr/"intValue"\s*:\s*"200"/, 'int attribute as {"intValue":"200"}';
    like $raw, qr/"kind"\s*:\s*2\b/, 'kind as an integer';

    my @spans = server_spans(file_spans($file));
    for my $k (sort keys %res) {
        my $r = $res{$k};
        my @m = grep { $_->{trace_id} eq ($r->{headers}{'x-trace-id'} // '') } @spans;
        is scalar @m, 1, "$k: one span with its trace id" or next;
        my $s = $m[0];
        like $s->{trace_id}, qr/^[0-9a-f]{32}$/, "$k: traceId lowercase hex";
        like $s->{span_id}, qr/^[0-9a-f]{16}$/, "$k: spanId lowercase hex";
        is $s->{span_id}, $r->{headers}{'x-span-id'}, "$k: spanId = \$otel_span_id";
        is $s->{parent_span_id}, '', "$k: no parent";
        ok $s->{start} > 1e18 && $s->{start} <= $s->{end}, "$k: timestamps";
        is $s->{resource}{'service.name'}, 'file-test', "$k: resource service.name";
        is $s->{scope}{name}, 'spanprof', "$k: scope name";
        ok $s->{flags} & 0x100, "$k: flags";
    }
    my ($f2) = by_path('/f/2', @spans);
    is $f2->{name}, 'GET /f/', 'name';
    is $f2->{attrs}{'url.query'}, 'q=x', 'url.query';
    is $f2->{attrs}{'http.response.status_code'}, 200, 'status code';
    is $f2->{attr_types}{'http.response.status_code'}, 'int', 'status code is an int';
    my ($e) = by_path('/err/e', @spans);
    is $e->{status_code}, 'STATUS_CODE_ERROR', 'status code 2 on 500';
    is $e->{attrs}{'error.type'}, '500', 'error.type';
    is scalar($ngx->crash_lines), 0, 'no crash';
};

subtest 'flushed at quit' => sub {
    (my $conf = $CONF) =~ s/%%INTERVAL%%/60s/;
    my $ngx = start_nginx(conf => $conf, dirs => ['otel']);
    my $file = $ngx->prefix . '/otel/traces.jsonl';
    http_get($ngx->port, "/f/q$_") for 1 .. 3;
    my $took = $ngx->quit(15);
    ok $took < 10, "quit in $took s";
    my @spans = server_spans(file_spans($file));
    is scalar(grep { ($_->{attrs}{'url.path'} // '') =~ m{^/f/q\d$} } @spans), 3, 'the 3 queued spans were written'
        or diag $ngx->error_log_tail(20);
};

# The span clock (common/base/clock.h): the time-stamp counter where the
# kernel keeps time with it, clock_gettime with SPANPROF_CLOCK=clock_gettime
# (or elsewhere). Either way a span lies within the requests' wall-clock
# window, as the status API says which clock it was.
for my $mode ('default', 'clock_gettime') {
    subtest "span times against the wall clock: $mode" => sub {
        my $want = $mode eq 'clock_gettime' ? 0 : tsc_clock_expected();
        (my $conf = $CONF) =~ s/%%INTERVAL%%/100ms/;
        $conf =~ s/(    location \/f\/)/    location = \/api { otel_trace off; otel_api; }\n$1/;
        my $ngx = start_nginx(conf => $conf, dirs => ['otel'],
                              env => $mode eq 'default' ? {} : { SPANPROF_CLOCK => $mode });
        my $file = $ngx->prefix . '/otel/traces.jsonl';
        my $before = time;
        http_get($ngx->port, "/f/$_") for 1 .. 20;
        my $after = time;
        my @spans;
        ok wait_until(10, sub { @spans = server_spans(file_spans($file)); @spans >= 20 }),
            '20 spans' or return diag($ngx->error_log_tail(20));
        # Time::HiRes's float is good to a microsecond; 1 ms of slack
        my ($lo, $hi) = (($before - 0.001) * 1e9, ($after + 0.001) * 1e9);
        my @bad = grep { $_->{start} < $lo || $_->{end} > $hi || $_->{end} < $_->{start} } @spans;
        is scalar(@bad), 0, "every span within the requests' window ("
            . sprintf('%.6f-%.6f', $before, $after) . ')'
            or diag join "\n", map { "$_->{start} $_->{end}" } @bad;
        my ($tsc) = api_counter($ngx->port, '/api', 'clock_tsc');
        is $tsc, $want, "status: clock_tsc $want";
        my ($shared) = api_counter($ngx->port, '/api', 'clock_shared');
        is $shared, $want, "status: clock_shared $want (mapped by the master)";
        # published at the worker's next status tick
        my $rebases;
        wait_until($want ? 3 : 0.5, sub { ($rebases) = api_counter($ngx->port, '/api', 'clock_rebases');
                            $want ? $rebases > 0 : 0 });
        ok $want ? $rebases > 0 : $rebases == 0, "status: clock_rebases $rebases";
        my ($resets) = api_counter($ngx->port, '/api', 'clock_rate_resets');
        is $resets, 0, 'status: no rate thrown away';
        # A reload's new workers share the same scale (mapped once).
        $ngx->reload;
        ok wait_until(5, sub { my ($s) = api_counter($ngx->port, '/api', 'clock_shared');
                               defined $s && $s == $want }),
            "after a reload: clock_shared $want";
        $ngx->stop;
    };
}

done_testing;
