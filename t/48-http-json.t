#!/usr/bin/perl
# OTLP/HTTP JSON (`protocol http/json;` in otel_exporter, Apache
# `OtelExporterProtocol http/json`): spans POSTed to /v1/traces and CPU
# profiles to /v1development/profiles with Content-Type application/json,
# plain and with `compression gzip` (Content-Encoding: gzip), under nginx
# and apache2 (event and prefork). What arrives is decoded by protobuf's own
# JSON parser (google.protobuf.json_format.Parse, t/otlp_json_decode.py,
# into classes protoc generates from proto/ here), serialized and decoded
# again by protoc --decode as the other tests do: the span continues the
# traceparent sent (trace id, parent, the span id the server answered
# with), carries its attributes; samples of a profiled request link to its
# trace and span. The raw JSON has the ids in lowercase hex, kinds as
# integers, 64-bit times as strings. A JSON partial success is counted and
# logged; an answer that is not JSON is a warning, its spans still count
# as exported.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;
use SpanProf::Apache;

need_module();
need_burn_module();

# --- the real OTLP/JSON decoder ------------------------------------------------
my $ROOT = repo_root();
my $GEN  = tempdir('spanprof-pyotlp-XXXXXX', TMPDIR => 1, CLEANUP => 1);
{
    my @protos = map { s{^\./}{}r } split /\n/, `cd $ROOT/proto && find . -name '*.proto'`;
    system('protoc', "-I$ROOT/proto", "--python_out=$GEN", @protos) == 0
        or BAIL_OUT("protoc --python_out failed");
}

my %decoded;    # "$dir/$seq" => decoded protobuf message (text format tree)
sub json_decode_request {
    my ($recv, $req, $kind) = @_;
    my $key = $recv->dir . "/$req->{seq}";
    return $decoded{$key} if exists $decoded{$key};
    my $in = "$GEN/req.json";
    open(my $fh, '>', $in) or die "$in: $!";
    binmode $fh;
    print $fh $req->{body};
    close $fh;
    my $pb = `/usr/bin/python3 $ROOT/t/otlp_json_decode.py $GEN $kind < $in 2>$GEN/err`;
    if ($? != 0) {
        diag "request #$req->{seq}: " . `cat $GEN/err`;
        return $decoded{$key} = undef;
    }
    return $decoded{$key} = $kind eq 'traces' ? decode_traces($pb) : decode_otlp_profiles($pb);
}

sub trace_requests   { grep { $_->{path} eq '/v1/traces' } $_[0]->requests }
sub profile_reqs     { grep { $_->{path} eq '/v1development/profiles' } $_[0]->requests }

sub json_spans {
    my ($recv) = @_;
    my @s;
    for my $q (trace_requests($recv)) {
        my $d = json_decode_request($recv, $q, 'traces') or next;
        push @s, map { +{ %$_, seq => $q->{seq} } } spans_from_request($d);
    }
    return @s;
}

sub json_samples {
    my ($recv) = @_;
    my @s;
    for my $q (profile_reqs($recv)) {
        my $d = json_decode_request($recv, $q, 'profiles') or next;
        push @s, otlp_samples($d);
    }
    return @s;
}

# Sends /json with a traceparent and a CPU-burning request with another,
# then checks what the receiver got. $poke: a cheap request that gives the
# profile exporter samples to send.
sub check_export {
    my (%a) = @_;
    my ($recv, $port, $gzip) = @a{qw(recv port gzip)};
    my ($tid, $psid) = (rand_hex(32), rand_hex(16));
    my ($btid, $bpsid) = (rand_hex(32), rand_hex(16));

    my $r = http_get($port, '/json?q=1', headers => { traceparent => "00-$tid-$psid-01" });
    is $r->{status}, 200, '/json answered';
    my $sid = $r->{headers}{'x-span-id'} // '';
    like $sid, qr/^[0-9a-f]{16}$/, "the server's span id ($sid)";
    my $b = http_get($port, $a{burn}, headers => { traceparent => "00-$btid-$bpsid-01" });
    is $b->{status}, 200, 'the burning request answered';
    my $bsid = $b->{headers}{'x-span-id'} // '';

    my ($span, @linked);
    my $poked = 0;
    ok wait_until(20, sub {
        ($span) = grep { $_->{trace_id} eq $tid } json_spans($recv);
        return 0 unless $span;
        @linked = grep { ($_->{link}{trace_id} // '') eq $btid } json_samples($recv);
        return 1 if @linked;
        if (time - $poked > 0.3) {
            $a{poke}->();
            $poked = time;
        }
        return 0;
    }), 'the span and linked samples arrived' or diag $recv->summary;

    my @tq = trace_requests($recv);
    my @pq = profile_reqs($recv);
    ok @tq >= 1 && @pq >= 1, scalar(@tq) . ' trace and ' . scalar(@pq) . ' profile request(s)';
    for my $q (@tq, @pq) {
        is $q->{method}, 'POST', "#$q->{seq} $q->{path}: POST";
        like $q->{headers}{'content-type'} // '', qr{^application/json$}i,
            "#$q->{seq}: Content-Type application/json";
        if ($gzip) {
            is $q->{raw_encoding} // '', 'gzip', "#$q->{seq}: gzip'd on the wire";
            is $q->{headers}{'content-encoding'} // '', 'gzip', "#$q->{seq}: Content-Encoding gzip";
        } else {
            ok !defined $q->{headers}{'content-encoding'}, "#$q->{seq}: not compressed";
        }
        ok defined json_decode_request($recv, $q, $q->{path} =~ /profiles/ ? 'profiles' : 'traces'),
            "#$q->{seq}: protobuf's JSON parser reads it";
    }

    ok $span, 'the /json span decoded' or return;
    is $span->{kind}, 'SPAN_KIND_SERVER', 'kind SERVER';
    is $span->{parent_span_id}, $psid, 'parent: the traceparent\'s span id';
    is $span->{span_id}, $sid, 'span id: the one the server answered with';
    is $span->{attrs}{'url.path'}, '/json', 'url.path';
    is $span->{attrs}{'http.request.method'}, 'GET', 'http.request.method';
    is $span->{attrs}{'http.response.status_code'}, 200, 'http.response.status_code';
    is $span->{attr_types}{'http.response.status_code'}, 'int', '... an int';
    ok $span->{start} > 1.6e18 && $span->{end} >= $span->{start}, 'times in ns';

    my ($raw) = map { $_->{body} } grep { $_->{seq} == $span->{seq} } @tq;
    like $raw, qr/"traceId":"$tid"/, 'raw JSON: traceId in lowercase hex';
    like $raw, qr/"spanId":"$sid"/, 'raw JSON: spanId in hex';
    like $raw, qr/"parentSpanId":"$psid"/, 'raw JSON: parentSpanId in hex';
    like $raw, qr/"kind":2[,}]/, 'raw JSON: kind SERVER as the integer 2';
    unlike $raw, qr/"kind":"|SPAN_KIND_/, 'raw JSON: no enum names';
    like $raw, qr/"startTimeUnixNano":"\d{19}"/, 'raw JSON: 64-bit start time as a string';
    like $raw, qr/"endTimeUnixNano":"\d{19}"/, 'raw JSON: 64-bit end time as a string';
    like $raw, qr/"intValue":"200"/, 'raw JSON: int attribute as a string';
    unlike $raw, qr/"(?:resource_spans|start_time_unix_nano|trace_id)"/, 'raw JSON: lowerCamelCase names only';

    ok @linked >= 1, scalar(@linked) . ' samples link to the burning request';
    is $linked[0]{link}{span_id}, $bsid, "... to its span ($bsid)" if @linked;
    ok((grep { $_->{count} > 0 && @{ $_->{stack} } } @linked), 'with counts and stacks');
    my ($praw) = map { $_->{body} } grep { $_->{body} =~ /"traceId":"$btid"/ } @pq;
    like $praw // '', qr/"profileId":"[0-9a-f]{32}"/, 'raw JSON: profileId in hex';
    like $praw // '', qr/"timeUnixNano":"\d{19}"/, 'raw JSON: profile time as a string';
    like $praw // '', qr/"spanId":"$bsid"/, 'raw JSON: the link\'s spanId in hex';
}

# --- nginx -------------------------------------------------------------------------
sub ngx_conf {
    my ($extra) = @_;
    return <<"EOF";
otel_service_name json-nginx;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
otel_exporter { endpoint %%RECEIVER%%; protocol http/json; interval 100ms; $extra }
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_trace_context extract;
    add_header X-Span-Id \$otel_span_id always;
    location /json  { return 200 "ok\\n"; }
    location /alpha { otel_profiling on; spanprof_burn alpha 300; }
    location /tick  { otel_trace off; otel_profiling on; spanprof_burn beta 3; }
}
EOF
}

for my $gzip (0, 1) {
    subtest 'nginx: http/json' . ($gzip ? ' with gzip' : '') => sub {
        my $recv = start_receiver();
        my $ngx  = start_nginx(receiver => $recv, burn => 1,
            conf => ngx_conf($gzip ? 'compression gzip;' : ''));
        check_export(recv => $recv, port => $ngx->port, gzip => $gzip, burn => '/alpha',
            poke => sub { http_get($ngx->port, '/tick') });
        is scalar($ngx->crash_lines), 0, 'no crash';
    };
}

subtest 'nginx: JSON partial success counted, a body that is not JSON a warning' => sub {
    my $recv = start_receiver(script => 'json-partial:1,json-garbage');
    my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/json; interval 100ms; }
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\n"; }
}
EOF
    http_get($ngx->port, "/part/$_") for 1 .. 3;
    ok wait_until(10, sub { trace_requests($recv) >= 1 }), 'first batch sent';
    ok wait_until(5, sub { grep { /collector rejected 1 of \d+ spans: test rejection/ } $ngx->spanprof_lines }),
        'error log: "rejected 1 of N spans: test rejection"' or diag $ngx->error_log_tail(20);
    http_get($ngx->port, '/garbage/1');
    ok wait_until(10, sub { trace_requests($recv) >= 2 }), 'second batch sent';
    ok wait_until(5, sub { grep { /answered 200 with a body that is not an ExportTraceServiceResponse/ } $ngx->spanprof_lines }),
        'warning: the answer is not a response' or diag $ngx->error_log_tail(20);
    http_get($ngx->port, '/after/1');
    ok wait_until(10, sub { trace_requests($recv) >= 3 }), 'exporting goes on';
    $ngx->quit(15);     # flushes the rest
    my $sent = () = json_spans($recv);
    my @reqs = trace_requests($recv);
    is_deeply [ map { $_->{action} } @reqs[0 .. 2] ], [ 'json-partial:1', 'json-garbage', '200' ],
        'answers as scripted';
    is $sent, 5, 'the 5 spans arrived once each';
    my ($exported) = $ngx->error_log =~ /exporter stopped: (\d+) spans exported/;
    is $exported, $sent - 1, "$sent spans sent, 1 rejected: " . ($exported // 'none') . ' exported'
        or diag $ngx->error_log_tail(20);
    is scalar($ngx->crash_lines), 0, 'no crash';
};

subtest 'nginx: a JSON partial success rejecting a profile is counted and logged' => sub {
    # Every answer rejects what it got: rejectedProfiles to the profiles.
    my $recv = start_receiver(default => 'json-partial:1');
    my $ngx  = start_nginx(receiver => $recv, burn => 1, conf => <<'EOF');
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
otel_exporter { endpoint %%RECEIVER%%; protocol http/json; interval 100ms; }
server {
    listen 127.0.0.1:%%PORT%%;
    location /tick { otel_profiling on; spanprof_burn beta 20; }
    location = /api { otel_profiling off; otel_api; }
}
EOF
    my $logged;
    ok wait_until(10, sub {
        http_get($ngx->port, '/tick');
        $logged = grep { /collector rejected 1 of 1 profiles: test rejection/ } $ngx->spanprof_lines;
    }), 'error log: "rejected 1 of 1 profiles: test rejection"' or diag $recv->summary . $ngx->error_log_tail(20);
    my @pq = profile_reqs($recv);
    ok @pq >= 1, scalar(@pq) . ' profile request(s), answered ' . ($pq[0]{action} // 'none');
    like $pq[0]{headers}{'content-type'} // '', qr{^application/json}, 'the profile was sent as JSON' if @pq;
    my ($json, $prom);
    ok wait_until(5, sub { ($json, $prom) = api_counter($ngx->port, '/api', 'profiles_rejected');
                           ($json // 0) >= 1 && ($json // 0) == ($prom // -1) }),
        'profiles_rejected in the API\'s JSON (' . ($json // 'none') . ') and Prometheus text ('
        . ($prom // 'none') . ')';
    my ($exported) = api_counter($ngx->port, '/api', 'profiles_exported');
    is $exported, 0, 'a rejected profile is not counted as exported';
    is scalar(trace_requests($recv)), 0, 'no spans (tracing off)';
    is scalar($ngx->crash_lines), 0, 'no crash';
};

# --- apache2 -----------------------------------------------------------------------
SKIP: {
    unless (-f apache_module_path()) {
        fail 'mod_spanprof is built' if $ENV{SPANPROF_REQUIRE_MODULE};
        skip 'mod_spanprof not built', 1;
    }
    for my $mpm (grep { $_ eq 'event' || $_ eq 'prefork' } apache_mpms()) {
        for my $gzip (0, 1) {
            subtest "apache $mpm: http/json" . ($gzip ? ' with gzip' : '') => sub {
                my $recv = start_receiver();
                my $ap = start_apache(mpm => $mpm, receiver => $recv, burn => 1, servers => 1,
                    files => { 'htdocs/ok.txt' => "ok\n" }, conf => <<"EOF");
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/json
OtelExporterInterval 0.1
@{[ $gzip ? 'OtelExporterCompression gzip' : '' ]}
OtelServiceName json-apache
OtelProfilingInterval 1
OtelProfilingRate 200
OtelTrace On
OtelTraceContext extract
Header always set X-Span-Id "%{OTEL_SPAN_ID}e"
AliasMatch ^/json %%PREFIX%%/htdocs/ok.txt
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF
                check_export(recv => $recv, port => $ap->port, gzip => $gzip,
                    burn => '/burn?fn=alpha&ms=300&n=1',
                    poke => sub { http_get($ap->port, '/burn?fn=beta&ms=5&n=1') });
                is scalar($ap->crash_lines), 0, 'no crash';
            };
        }
    }
}

done_testing();
