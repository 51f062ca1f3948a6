#!/usr/bin/perl
# OTLP/gRPC export (`protocol grpc;` / OtelExporterProtocol grpc), with no
# gRPC library in the module, against a real gRPC server
# (t/grpc_receiver.py, python3-grpcio), the spans decoded with protoc:
# unary TraceService/Export calls over h2c and over TLS (ALPN h2), the
# `header` entries as metadata, compression gzip as grpc-encoding, one
# connection per worker for spans and profiles (h2c too, and a connection
# the collector closed when idle replaced with no call lost, also with
# libcurl before 8.0, whose h2c reuse needs care: curl/curl#10634),
# UNAVAILABLE retried after
# RetryInfo's delay, RESOURCE_EXHAUSTED without RetryInfo and
# INVALID_ARGUMENT dropped, counted and logged with the code and message,
# partial success counted, OTLP profiles over ProfilesService/Export, and
# a collector that is down or answers garbage leaving the worker
# responsive. nginx, and Apache (event MPM).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;
use SpanProf::Profile;
use SpanProf::GrpcReceiver;

need_module();
plan skip_all => 'needs /usr/bin/python3 with grpc'
    unless -x '/usr/bin/python3' && system('/usr/bin/python3 -c "import grpc" 2>/dev/null') == 0;

# libcurl before 8.0.0 breaks a reused prior-knowledge h2c connection
# (curl/curl#10634): the exporter then reuses it with plain HTTP/2 and,
# when it died, re-sends the call at once on a new one (counted in
# export_h2c_reconnects). With 8.0 and later nothing is re-sent.
my ($LIBCURL) = `curl --version` =~ m{libcurl/(\d+)\.};
my $H2C_RESEND = ($LIBCURL // 0) < 8;

# A CA and a server certificate for 127.0.0.1 it signs (openssl CLI).
my %TLS;
sub tls_files {
    return \%TLS if %TLS;
    my $d = SpanProf::Test::_tempdir('gca');
    my $run = sub { my $o = `/usr/bin/openssl $_[0] 2>&1`; die "openssl $_[0]: $o" if $? };
    $run->("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=spanprof-grpc-ca -keyout $d/ca.key -out $d/ca.pem");
    $run->("req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout $d/server.key -out $d/server.csr");
    open my $fh, '>', "$d/ext.cnf" or die $!;
    print $fh "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n";
    close $fh;
    $run->("x509 -req -in $d/server.csr -CA $d/ca.pem -CAkey $d/ca.key -CAcreateserial -days 2 "
        . "-extfile $d/ext.cnf -out $d/server.pem");
    chmod 0644, "$d/ca.pem";
    %TLS = (ca => "$d/ca.pem", cert => "$d/server.pem", key => "$d/server.key");
    return \%TLS;
}

my $TRACE_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
my $PROF_PATH  = '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export';

sub paths_of { join ' ', sort map { $_->{attrs}{'url.path'} // '?' } @_ }
sub prefix_is { my $p = shift; return sub { ($_[0]{attrs}{'url.path'} // '') =~ /^\Q$p\E/ } }

sub nginx_conf {
    my (%o) = @_;
    my $extra = $o{exporter} // '';
    my $api = $o{api} ? '    location = /api { otel_trace off; otel_api; }' : '';
    return <<"EOF";
otel_exporter {
    endpoint %%RECEIVER%%;
    protocol grpc;
    interval 100ms;
$extra
}
otel_service_name grpc-test;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\\n"; }
$api
}
EOF
}

sub no_crash {
    my ($ngx) = @_;
    is scalar($ngx->crash_lines), 0, 'no crash in the error log' or diag join "\n", $ngx->crash_lines;
}

subtest 'nginx: h2c, metadata, no compression, one connection' => sub {
    my $recv = start_grpc_receiver();
    my $ngx = start_nginx(receiver => $recv, conf => nginx_conf(exporter => <<'EOF'));
    batch_size 3;
    header X-Token abc;
    header Authorization "Bearer two words";
    compression none;
EOF
    is http_get($ngx->port, "/h/$_")->{status}, 200, "request $_" for 1 .. 7;
    my @s = wait_for_spans($recv, 7, 15, filter => prefix_is('/h/'));
    is paths_of(@s), join(' ', sort map { "/h/$_" } 1 .. 7), 'the 7 spans arrived, decoded by protoc'
        or diag $recv->summary . $ngx->error_log_tail(20);
    is $s[0]{resource}{'service.name'}, 'grpc-test', 'service.name';
    my @reqs = grpc_requests($recv, 'traces');
    ok @reqs >= 3, scalar(@reqs) . ' Export calls for 7 spans in batches of 3';
    for my $q (@reqs) {
        my $d = "call #$q->{seq}";
        is $q->{path}, $TRACE_PATH, "$d: TraceService/Export";
        is $q->{headers}{'x-token'}, 'abc', "$d: header X-Token as metadata x-token";
        is $q->{headers}{authorization}, 'Bearer two words', "$d: authorization metadata";
        is $q->{grpc_encoding}, 'identity', "$d: not compressed";
        like $q->{headers}{'user-agent'} // '', qr/^spanprof/, "$d: user-agent";
    }
    my %conns = map { $_->{conn} => 1 } @reqs;
    is scalar(keys %conns), 1, "all calls on one HTTP/2 connection (libcurl $LIBCURL)";
    like $ngx->error_log, qr/./, 'error log readable';
    unlike $ngx->error_log, qr/spanprof: (?:export to|collector at)/, 'no export error logged';
    no_crash($ngx);
};

subtest 'nginx: h2c, the collector closes the idle connection: the next call re-sent, nothing lost' => sub {
    my $recv = start_grpc_receiver(max_idle_ms => 300);
    my $ngx = start_nginx(receiver => $recv, conf => nginx_conf(api => 1, exporter => "    batch_size 1;"));
    my @round;
    for my $r (1, 2) {
        # Two calls in a row, then an idle connection, closed by the
        # collector (GOAWAY) after 300 ms.
        is http_get($ngx->port, "/idle/$r/$_")->{status}, 200, "round $r: request $_" for 1 .. 2;
        my @s = wait_for_spans($recv, 2, 10, accepted_only => 1, filter => prefix_is("/idle/$r/"));
        is paths_of(@s), "/idle/$r/1 /idle/$r/2", "round $r: its 2 spans accepted"
            or diag $recv->summary . $ngx->error_log_tail(20);
        $round[$r] = [ grep { my $q = $_;
            grep { ($_->{attrs}{'url.path'} // '') =~ m{^/idle/$r/} } SpanProf::Test::_request_spans($recv, $q)
        } grpc_requests($recv, 'traces') ];
        sleep 1 if $r == 1;
    }
    my %c1 = map { $_->{conn} => 1 } @{ $round[1] };
    my %c2 = map { $_->{conn} => 1 } @{ $round[2] };
    is scalar(keys %c1), 1, 'round 1: its calls on one connection';
    is scalar(keys %c2), 1, 'round 2: its calls on one connection';
    ok !grep({ $c1{$_} } keys %c2), 'round 2 on a new connection (the first one closed)';
    is scalar(grpc_requests($recv, 'traces')), 4, 'one call per span: none failed at the collector';
    # The counters are published every 250 ms.
    my $want = $H2C_RESEND ? 1 : 0;
    my ($json, $prom);
    wait_until(5, sub { ($json, $prom) = api_counter($ngx->port, '/api', 'export_h2c_reconnects');
                        ($json // -1) == $want && ($prom // -1) == $want });
    is $json, $want, "export_h2c_reconnects $want in the API's JSON (libcurl $LIBCURL)";
    is $prom, $want, 'and in its Prometheus text';
    my ($retried) = api_counter($ngx->port, '/api', 'export_requests_retried');
    is $retried, 0, 'the re-sent call is not an export retry';
    unlike $ngx->error_log, qr/spanprof: (?:export to|collector at)/, 'no export error logged'
        or diag $ngx->error_log_tail(10);
    $ngx->quit(15);
    like $ngx->error_log, qr/exporter stopped: 4 spans exported, 0 dropped \(queue full\), 0 dropped \(export failed\)/,
        'the 4 spans exported, none dropped' or diag $ngx->error_log_tail(5);
    no_crash($ngx);
};

subtest 'nginx: compression gzip is grpc-encoding gzip' => sub {
    my $recv = start_grpc_receiver();
    my $ngx = start_nginx(receiver => $recv, conf => nginx_conf(exporter => "    compression gzip;"));
    is http_get($ngx->port, "/gz/$_")->{status}, 200, "request $_" for 1 .. 3;
    my @s = wait_for_spans($recv, 3, 15, filter => prefix_is('/gz/'));
    is paths_of(@s), '/gz/1 /gz/2 /gz/3', 'the spans arrived (gunzipped, decoded)'
        or diag $recv->summary . $ngx->error_log_tail(20);
    my @reqs = grpc_requests($recv, 'traces');
    ok @reqs >= 1, 'Export calls made';
    is $_->{grpc_encoding}, 'gzip', "call #$_->{seq}: a gzip'd message" for @reqs;
    no_crash($ngx);
};

subtest 'nginx: https with ALPN h2 and trusted_certificate' => sub {
    plan skip_all => 'needs the openssl CLI' unless -x '/usr/bin/openssl';
    my $t = tls_files();
    my $recv = start_grpc_receiver(tls => $t);
    like $recv->url, qr{^https://}, 'an https endpoint';
    my $ngx = start_nginx(receiver => $recv,
        conf => nginx_conf(exporter => "    trusted_certificate $t->{ca};\n    batch_size 2;"));
    is http_get($ngx->port, "/tls/$_")->{status}, 200, "request $_" for 1 .. 5;
    my @s = wait_for_spans($recv, 5, 15, filter => prefix_is('/tls/'));
    is paths_of(@s), join(' ', map { "/tls/$_" } 1 .. 5), 'the spans arrived over TLS'
        or diag $recv->summary . $recv->receiver_log . $ngx->error_log_tail(20);
    my @reqs = grpc_requests($recv, 'traces');
    ok @reqs >= 3, scalar(@reqs) . ' calls';
    my %conns = map { $_->{conn} => 1 } @reqs;
    is scalar(keys %conns), 1, 'all on one HTTP/2 connection';
    unlike $ngx->error_log, qr/spanprof: export to/, 'no export error';
    no_crash($ngx);
};

subtest 'nginx: UNAVAILABLE with RetryInfo is retried after its delay' => sub {
    my $recv = start_grpc_receiver(script => ['UNAVAILABLE:retry:1500']);
    my $ngx = start_nginx(receiver => $recv, conf => nginx_conf());
    is http_get($ngx->port, "/ra/$_")->{status}, 200, "request $_" for 1 .. 3;
    my @s = wait_for_spans($recv, 3, 15, accepted_only => 1, filter => prefix_is('/ra/'));
    is paths_of(@s), '/ra/1 /ra/2 /ra/3', 'all spans accepted in the end'
        or diag $recv->summary . $ngx->error_log_tail(20);
    my @reqs = grpc_requests($recv, 'traces');
    is $reqs[0]{action}, 'UNAVAILABLE:retry:1500', 'the first call was refused';
    ok @reqs >= 2, 'and retried';
    my $gap = @reqs >= 2 ? $reqs[1]{time} - $reqs[0]{time} : 0;
    ok $gap >= 1.45 && $gap < 5, sprintf('the retry came %.3f s later (RetryInfo: 1.5 s)', $gap);
    like $ngx->error_log, qr/spanprof: collector at http\S+TraceService\/Export answered gRPC status 14 UNAVAILABLE: test UNAVAILABLE; retrying in 1500 ms/,
        'the refusal is logged with the code, the message and the delay';
    no_crash($ngx);
};

subtest 'nginx: non-retryable codes drop the batch, counted and logged' => sub {
    my $recv = start_grpc_receiver(script => ['INVALID_ARGUMENT', 'RESOURCE_EXHAUSTED']);
    my $ngx = start_nginx(receiver => $recv, conf => nginx_conf(exporter => "    batch_size 2;"));
    is http_get($ngx->port, "/na/1")->{status}, 200, 'request 1';
    ok wait_until(10, sub { grpc_requests($recv, 'traces') >= 1 }), 'first call made';
    is http_get($ngx->port, "/na/2")->{status}, 200, 'request 2';
    ok wait_until(10, sub { grpc_requests($recv, 'traces') >= 2 }), 'second call made';
    my @later = map { http_get($ngx->port, "/na/ok$_")->{status} } 1 .. 2;
    is "@later", '200 200', 'the worker still serves';
    my @s = wait_for_spans($recv, 2, 10, accepted_only => 1, filter => prefix_is('/na/ok'));
    is scalar @s, 2, 'later spans are accepted';
    my @reqs = grpc_requests($recv, 'traces');
    is_deeply [ map { $_->{action} } @reqs[0, 1] ], ['INVALID_ARGUMENT', 'RESOURCE_EXHAUSTED'],
        'the first two calls were refused';
    my @first = map { $_->{attrs}{'url.path'} } SpanProf::Test::_request_spans($recv, $reqs[0]);
    my $retried = grep { my $r = $_; grep { $_->{attrs}{'url.path'} eq '/na/1' }
                         SpanProf::Test::_request_spans($recv, $r) } @reqs[1 .. $#reqs];
    is $retried, 0, 'the refused spans were not sent again (no retry)';
    my $log = $ngx->error_log;
    like $log, qr/spanprof: collector at \S+ answered gRPC status 3 INVALID_ARGUMENT: test INVALID_ARGUMENT after 1 attempts; dropping 1 spans/,
        'INVALID_ARGUMENT logged with its code and message';
    like $log, qr/answered gRPC status 8 RESOURCE_EXHAUSTED: test RESOURCE_EXHAUSTED after 1 attempts; dropping 1 spans/,
        'RESOURCE_EXHAUSTED without RetryInfo: not retried';
    $ngx->quit(15);
    like $ngx->error_log, qr/exporter stopped: \d+ spans exported, 0 dropped \(queue full\), 2 dropped \(export failed\)/,
        'the 2 dropped spans are counted';
};

subtest 'nginx: partial success is counted' => sub {
    my $recv = start_grpc_receiver(script => ['partial:2']);
    my $ngx = start_nginx(receiver => $recv, conf => nginx_conf(exporter => "    batch_size 3;"));
    is http_get($ngx->port, "/ps/$_")->{status}, 200, "request $_" for 1 .. 3;
    ok wait_until(10, sub { $ngx->error_log =~ /collector rejected/ }), 'rejection logged';
    like $ngx->error_log, qr/spanprof: collector rejected 2 of 3 spans: test rejection/,
        'the rejected count and message from the ExportTraceServiceResponse';
    no_crash($ngx);
};

subtest 'nginx: profiles over ProfilesService/Export (TLS), on the spans\' connection, partial success' => sub {
    need_burn_module();
    plan skip_all => 'needs the openssl CLI' unless -x '/usr/bin/openssl';
    my $t = tls_files();
    # The first profile is answered with a partial success rejecting it.
    my $recv = start_grpc_receiver(tls => $t, profiles_script => ['partial:1']);
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => <<"EOF");
otel_exporter {
    endpoint %%RECEIVER%%;
    protocol grpc;
    interval 100ms;
    trusted_certificate $t->{ca};
}
otel_service_name grpc-prof;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /alpha { spanprof_burn alpha 300; }
    location = /api { otel_trace off; otel_profiling off; otel_api; }
}
EOF
    http_get($ngx->port, '/alpha') for 1 .. 2;
    my @samples;
    ok wait_until(15, sub {
        http_get($ngx->port, '/alpha');
        @samples = map { otlp_samples(decode_otlp_profiles($_->{body})) } grpc_requests($recv, 'profiles');
        return scalar grep { grep { /spanprof_burn_alpha/ } @{ $_->{stack} } } @samples;
    }), 'an OTLP profile with the burn function arrived, decoded by protoc'
        or diag $recv->summary . $ngx->error_log_tail(20);
    my @p = grpc_requests($recv, 'profiles');
    is $p[0]{path}, $PROF_PATH, 'ProfilesService/Export' if @p;
    is $samples[0]{resource}{'service.name'}, 'grpc-prof', 'resource service.name' if @samples;
    my @t = wait_for_spans($recv, 1, 10, filter => prefix_is('/alpha'));
    ok @t, 'spans too';
    my %conns = map { $_->{conn} => 1 } $recv->requests;
    is scalar(keys %conns), 1, 'spans and profiles multiplexed on one TLS connection'
        or diag $recv->summary;
    is $p[0]{action}, 'partial:1', 'the first profile got a partial success' if @p;
    ok wait_until(5, sub { grep { /collector rejected 1 of 1 profiles: test rejection/ } $ngx->spanprof_lines }),
        'logged with the ExportProfilesServiceResponse\'s message' or diag $ngx->error_log_tail(20);
    my ($json, $prom);
    ok wait_until(5, sub { ($json, $prom) = api_counter($ngx->port, '/api', 'profiles_rejected');
                           ($json // 0) == 1 && ($prom // 0) == 1 }),
        'profiles_rejected 1 in the API\'s JSON (' . ($json // 'none') . ') and Prometheus text ('
        . ($prom // 'none') . ')';
    no_crash($ngx);
};

sub garbage_server {
    my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 5,
        Proto => 'tcp', ReuseAddr => 1) or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        while (my $c = $srv->accept) {
            $c->syswrite("HTTP/1.1 200 OK\r\n\xff\xfe garbage \x00\x01\x02" x 20);
            sleep 0.2;
            close $c;
        }
        POSIX::_exit(0);
    }
    my $port = $srv->sockport;
    close $srv;
    return ($pid, $port);
}

subtest 'nginx: a collector that is down or answers garbage' => sub {
    my ($gpid, $gport) = garbage_server();
    for my $case (['down', dead_port()], ['garbage', $gport]) {
        my ($what, $port) = @$case;
        my $ngx = start_nginx(receiver_url => "http://127.0.0.1:$port",
            conf => nginx_conf(exporter => "    timeout 1s;"));
        my $t0 = time;
        my $n = 0;
        for my $i (1 .. 40) {
            $n++ if http_get($ngx->port, "/$what/$i")->{status} == 200;
        }
        is $n, 40, "$what: all requests answered";
        ok time - $t0 < 10, sprintf('%s: in %.2f s', $what, time - $t0);
        ok wait_until(10, sub { $ngx->error_log =~ /spanprof: export to http\S+ failed/ }),
            "$what: the failure is logged" or diag $ngx->error_log_tail(10);
        my $took = $ngx->quit(15);
        ok $took < 8, sprintf('%s: the worker stops within its bound (%.2f s)', $what, $took);
        no_crash($ngx);
    }
    kill 'KILL', $gpid;
    waitpid $gpid, 0;
};

# --- Apache, event MPM ------------------------------------------------------------
SKIP: {
    skip 'no Apache module built', 1 unless -e apache_module_path();
    subtest 'apache event: spans, gzip, metadata, RetryInfo' => sub {
        my $recv = start_grpc_receiver(script => ['UNAVAILABLE:retry:1200']);
        my $ap = start_apache(mpm => 'event', receiver => $recv, servers => 1, conf => <<'EOF',
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol grpc
OtelExporterCompression gzip
OtelExporterHeader X-Tenant t1
OtelExporterInterval 0.1
OtelTrace On
AliasMatch ^/ok %%PREFIX%%/htdocs/ok.txt
EOF
            files => { 'htdocs/ok.txt' => "ok\n" });
        is http_get($ap->port, "/ok/$_")->{status}, 200, "request $_" for 1 .. 4;
        my @s = wait_for_spans($recv, 4, 20, accepted_only => 1, filter => prefix_is('/ok/'));
        is scalar @s, 4, 'the 4 spans accepted, decoded by protoc' or diag $recv->summary . $ap->error_log_tail(20);
        my @reqs = grpc_requests($recv, 'traces');
        is $reqs[0]{action}, 'UNAVAILABLE:retry:1200', 'the first call was refused';
        my $gap = @reqs >= 2 ? $reqs[1]{time} - $reqs[0]{time} : 0;
        ok $gap >= 1.15 && $gap < 5, sprintf('retried %.3f s later (RetryInfo: 1.2 s)', $gap);
        is $_->{grpc_encoding}, 'gzip', "call #$_->{seq}: gzip" for @reqs;
        is $_->{headers}{'x-tenant'}, 't1', "call #$_->{seq}: x-tenant metadata" for @reqs;
        is scalar($ap->crash_lines), 0, 'no crash';
        $ap->stop;
    };
}

done_testing;
