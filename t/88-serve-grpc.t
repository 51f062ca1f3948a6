#!/usr/bin/perl
# spanprof serve receives OTLP/gRPC (--otlp-grpc): a python3-grpcio client
# (t/grpc_client.py) exports spans and profiles, gzip'd or not, and serve's
# API shows them; bad calls get the gRPC status codes a client acts on
# (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNIMPLEMENTED) and are counted;
# bytes that are no HTTP/2 close only their own connection. Then nginx and
# Apache with their DEFAULT exporter protocol (gRPC, as nginx-otel's) and
# profiling on export to serve's gRPC port: their spans and samples arrive.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use JSON::PP;
use SpanProf::Test;
use SpanProf::Serve;

plan skip_all => 'spanprof serve not built: ' . serve_bin() unless -x serve_bin();

my $root = repo_root();
my $sv = start_serve();
like $sv->log, qr{OTLP/gRPC on http://127\.0\.0\.1:${\ $sv->grpc_port}}, 'serve says where it takes gRPC';

sub grpc_calls {
    my @calls = @_;
    my $out = `/usr/bin/python3 $root/t/grpc_client.py --port @{[$sv->grpc_port]} @calls 2>&1`;
    my @r = map { decode_json($_) } grep { /^\{/ } split /\n/, $out;
    diag $out unless @r == @calls;
    return @r;
}

sub hexid { join '', map { sprintf '%02x', int rand 256 } 1 .. $_[0] }

subtest 'a grpcio client exports spans and profiles' => sub {
    my $tid = hexid(16);
    my ($s1, $s2) = (hexid(8), hexid(8));
    my @r = grpc_calls("traces:$tid:$s1:/plain", "traces:$tid:$s2:/zipped,gzip",
                       "profiles:$tid:$s1:grpc_plain_fn", "profiles:$tid:$s2:grpc_gzip_fn,gzip");
    is_deeply [ map { $_->{code} } @r ], [ ('OK') x 4 ], 'four calls: OK'
        or diag explain \@r;
    is $r[0]{response}, '', 'an empty ExportTraceServiceResponse';
    my $t;
    ok wait_until(10, sub {
        my $g = $sv->get("/api/traces/$tid");
        return 0 unless $g->{status} == 200;
        $t = decode_json($g->{content});
        return @{ $t->{spans} } == 2 && !grep { !$_->{cpu_samples} } @{ $t->{spans} };
    }), 'both spans stored, with their samples' or diag explain $t;
    my %by = map { $_->{span_id} => $_ } @{ $t->{spans} || [] };
    is $by{$s1}{service}, 'grpc-client', 'the resource\'s service';
    is $by{$s2}{attributes}{'http.route'}, '/zipped', 'the gzip\'d span';
    is $by{$s1}{cpu_samples}, 10, 'the plain profile\'s 10 samples on its span';
    is $by{$s2}{cpu_samples}, 10, 'the gzip\'d profile\'s on its';
    my $f = $sv->api('/api/flame', trace => $tid, span => $s2);
    my $tree = JSON::PP->new->canonical->encode($f->{tree});
    like $tree, qr/"n":"grpc_gzip_fn"/, 'the gzip\'d profile\'s frames in the flame graph';
    is $f->{tree}{t}[0], 10e6, 'its 10 ms of CPU';
};

subtest 'bad calls: gRPC status codes, counted' => sub {
    my $before = $sv->api('/api/stats');
    my $tid = hexid(16);
    my @r = grpc_calls('garbage', 'garbage,gzip', 'garbage,service=profiles',
        "traces:$tid:" . hexid(8) . ':/x,method=/opentelemetry.proto.collector.logs.v1.LogsService/Export',
        'big:' . (17 * 1024 * 1024), 'badspan');
    is $r[0]{code}, 'INVALID_ARGUMENT', 'not protobuf: INVALID_ARGUMENT';
    like $r[0]{details}, qr/not an ExportTraceServiceRequest/, 'saying why';
    is $r[1]{code}, 'INVALID_ARGUMENT', 'the same, gzip\'d';
    is $r[2]{code}, 'INVALID_ARGUMENT', 'to ProfilesService';
    like $r[2]{details}, qr/ExportProfilesServiceRequest/, 'naming its message';
    is $r[3]{code}, 'UNIMPLEMENTED', 'LogsService: UNIMPLEMENTED';
    is $r[4]{code}, 'RESOURCE_EXHAUSTED', 'over 16 MiB: RESOURCE_EXHAUSTED';
    is $r[5]{code}, 'OK', 'a span with a short trace id: OK';
    like pack('H*', $r[5]{response} // ''), qr/16-byte trace id/, 'with a partial success saying why';
    my $after = $sv->api('/api/stats');
    my %d = map { $_ => $after->{$_} - $before->{$_} } grep { /^grpc_|^spans_rejected/ } keys %$after;
    is $d{grpc_requests}, 5, 'five Export calls reached their message';
    is $d{grpc_bad_requests}, 3, 'three bad ones';
    is $d{grpc_too_large}, 1, 'one too large';
    is $d{grpc_unsupported}, 1, 'one unknown method';
    is $d{spans_rejected}, 1, 'one span rejected';
    ok kill(0, $sv->pid), 'still running';
};

subtest 'bytes that are no HTTP/2, a silent client' => sub {
    my $before = $sv->api('/api/stats');
    # A silent connection stays open while others are served.
    my $idle = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $sv->grpc_port)
        or die "connect: $!";
    my $bad = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $sv->grpc_port)
        or die "connect: $!";
    print $bad "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    $bad->blocking(0);
    my $closed = wait_until(5, sub { my $n = sysread($bad, my $b, 4096); defined $n && $n == 0 });
    ok $closed, 'an HTTP/1.1 request: serve closes that connection';
    my $tid = hexid(16);
    my @r = grpc_calls("traces:$tid:" . hexid(8) . ':/after');
    is $r[0]{code}, 'OK', 'another client is served meanwhile';
    my $after = $sv->api('/api/stats');
    is $after->{grpc_protocol_errors} - $before->{grpc_protocol_errors}, 1, 'one protocol error counted';
    cmp_ok $after->{grpc_connections} - $before->{grpc_connections}, '>=', 3, 'connections counted';
    close $idle;
    ok kill(0, $sv->pid), 'still running';
};

subtest 'the port in use; --otlp-grpc off' => sub {
    my $busy = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "listen: $!";
    my $p = $busy->sockport;
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my $out = `@{[serve_bin()]} serve --otlp 127.0.0.1:@{[free_port()]} --ui 127.0.0.1:@{[free_port()]} --otlp-grpc 127.0.0.1:$p --data $dir/d 2>&1`;
    isnt $? >> 8, 0, 'a --otlp-grpc port in use: serve does not start';
    like $out, qr/cannot listen on 127\.0\.0\.1:$p \(in use/, 'saying so' or diag $out;
    my $off = start_serve(extra => [ '--otlp-grpc', 'off' ]);
    like $off->log, qr{OTLP/gRPC on off}, '--otlp-grpc off: said';
    ok !IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $off->grpc_port),
        'and nothing listens';
    $off->stop;
};

subtest 'nginx, with its default protocol (gRPC)' => sub {
    eval { need_module(); need_burn_module(); 1 } or plan skip_all => 'the nginx module is not built';
    my $ngx = start_nginx(burn => 1, receiver_url => '127.0.0.1:' . $sv->grpc_port, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; interval 100ms; }
otel_service_name serve-grpc-nginx;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /slow { spanprof_burn alpha 200; }
    location /tick { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF
    my $r = http_get($ngx->port, '/slow');
    my ($tid, $sid) = ($r->{headers}{'x-trace-id'}, $r->{headers}{'x-span-id'});
    my $s;
    ok wait_until(20, sub {
        http_get($ngx->port, '/tick');
        my $g = $sv->get("/api/traces/$tid");
        return 0 unless $g->{status} == 200;
        ($s) = grep { $_->{span_id} eq $sid } @{ decode_json($g->{content})->{spans} };
        return $s && $s->{cpu_samples} >= 50;
    }), 'the span and its CPU samples arrived over gRPC' or diag explain $s;
    is $s->{service}, 'serve-grpc-nginx', 'its service';
    is $s->{route}, '/slow', 'its route';
    my $f = $sv->api('/api/flame', trace => $tid, span => $sid);
    my $tree = JSON::PP->new->encode($f->{tree});
    like $tree, qr/spanprof_burn_alpha/, 'its flame graph holds the burn';
    unlike $ngx->error_log, qr/\[(?:error|alert|crit)\].*export/i, 'no failed export logged';
    $ngx->stop;
};

subtest 'Apache, with its default protocol (gRPC)' => sub {
    my @mpms = eval { require SpanProf::Apache; SpanProf::Apache::apache_mpms() };
    unless (@mpms && -f SpanProf::Apache::apache_module_path()) {
        plan skip_all => 'the Apache module is not built';
    }
    my $ap = SpanProf::Apache::start_apache(mpm => 'event', burn => 1, servers => 1,
        receiver_url => '127.0.0.1:' . $sv->grpc_port, conf => <<'EOC');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterInterval 0.2
OtelServiceName apache-serve-grpc
OtelProfilingInterval 0.3
OtelProfilingRate 1000
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOC
    my $r = SpanProf::Test::http_get($ap->port, '/burn?fn=alpha&ms=200&n=1');
    like $r->{content}, qr/^alpha 200 /, 'burned';
    my $tr;
    ok wait_until(20, sub {
        SpanProf::Test::http_get($ap->port, '/burn?fn=beta&ms=5&n=2');
        my $l = $sv->api('/api/traces', service => 'apache-serve-grpc', order => 'slowest', limit => 1);
        return 0 unless @$l;
        $tr = $sv->api('/api/traces/' . $l->[0]{trace_id});
        return $tr->{spans}[0]{cpu_samples} >= 50;
    }), 'the Apache span and its samples arrived over gRPC' or diag explain $tr;
    $ap->stop;
};

done_testing;
