#!/usr/bin/perl
# nginx-otel's documented example configuration (nginx.org's
# ngx_otel_module page, "Example Configuration"), verbatim but for its
# load_module line: `endpoint localhost:4317` is OTLP/gRPC as under
# nginx-otel, so the spans reach a real gRPC collector (t/grpc_receiver.py,
# python3-grpcio) on port 4317; `otel_trace_context inject` puts a
# traceparent on the request to `backend`. The example's fixed ports (4317,
# 8080, and 80 for backend) and the name `backend` are kept: the test runs
# nginx in a mount namespace of its own where /etc/hosts maps backend to
# 127.0.0.2, and needs root and those ports free.
use strict;
use warnings;
use lib 't/lib';
use File::Temp qw(tempdir);
use IO::Socket::INET;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);
use SpanProf::Test;
use SpanProf::GrpcReceiver;

need_module();
plan skip_all => 'needs root (a mount namespace for /etc/hosts)' if $> != 0;
for my $p ([ '127.0.0.1', 4317 ], [ '127.0.0.1', 8080 ], [ '127.0.0.2', 80 ]) {
    my $s = IO::Socket::INET->new(LocalAddr => $p->[0], LocalPort => $p->[1],
        Proto => 'tcp', Listen => 1, ReuseAddr => 1);
    plan skip_all => "port $p->[0]:$p->[1] is in use" unless $s;
    close $s;
}
system('unshare -m true 2>/dev/null') == 0
    or plan skip_all => 'unshare -m is not permitted here';

my $module = module_path();
# The example, as published; only load_module names our module.
my $example = <<'EOF';
load_module modules/ngx_otel_module.so;

events {
}

http {

    otel_exporter {
        endpoint localhost:4317;
    }

    server {
        listen 127.0.0.1:8080;

        location / {
            otel_trace         on;
            otel_trace_context inject;

            proxy_pass http://backend;
        }
    }
}
EOF
(my $conf = $example) =~ s{^load_module modules/ngx_otel_module\.so;$}{load_module $module;}m
    or die 'the load_module line';
is scalar(() = $conf =~ /\n/g), scalar(() = $example =~ /\n/g), 'only the load_module line changed';

my $dir = tempdir('spanprof-t49-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{SPANPROF_KEEP});
chmod 0755, $dir;
mkdir "$dir/logs";
open(my $fh, '>', "$dir/nginx.conf") or die; print $fh $conf; close $fh;
open(my $in, '<', '/etc/hosts') or die;
my $hosts = do { local $/; <$in> };
close $in;
open($fh, '>', "$dir/hosts") or die; print $fh $hosts, "\n127.0.0.2 backend\n"; close $fh;

# The backend (port 80, as `proxy_pass http://backend;` says): answers and
# records the traceparent it was sent.
my $bpid = fork // die;
if ($bpid == 0) {
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.2', LocalPort => 80,
        Proto => 'tcp', Listen => 8, ReuseAddr => 1) or POSIX::_exit(1);
    while (my $c = $l->accept) {
        my $head = '';
        while (defined(my $line = <$c>)) { $head .= $line; last if $line =~ /^\r?\n$/ }
        my ($tp) = $head =~ /^traceparent:\s*(\S+)/mi;
        open(my $o, '>>', "$dir/backend.log"); print $o ($tp // '-'), "\n"; close $o;
        print $c "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nbackend\n";
        close $c;
    }
    POSIX::_exit(0);
}

my $recv = start_grpc_receiver(port => 4317);
my $master;
END {
    # Also when the test dies half way: no nginx left on the example's port.
    local $?;
    if ($master) { kill 'QUIT', $master; wait_until(10, sub { !kill(0, $master) }) }
    if ($bpid) { kill 'TERM', $bpid; waitpid($bpid, 0) }
}

# nginx as its example has it: daemon, its own master; -p/-e/-g only say
# where its pid and logs go.
my $rc = system('unshare', '-m', 'sh', '-c',
    'mount --bind "$0/hosts" /etc/hosts && exec "$1" -p "$0/" -c "$0/nginx.conf" -e "$0/error.log" -g "pid $0/nginx.pid;"',
    $dir, $ENV{SPANPROF_NGINX} || '/usr/sbin/nginx');
is $rc, 0, 'nginx starts with the example configuration' or diag `cat $dir/error.log`;
$master = wait_until(10, sub { my $t = `cat $dir/nginx.pid 2>/dev/null`; $t =~ /(\d+)/ ? $1 : 0 });

my $r = http_get(8080, '/example?x=1');
is $r->{status}, 200, 'proxied to backend';
is $r->{content}, "backend\n", 'backend answered';

my @spans = wait_for_spans($recv, 2, 15);
my ($server) = grep { $_->{kind} eq 'SPAN_KIND_SERVER' } @spans;
my ($client) = grep { $_->{kind} eq 'SPAN_KIND_CLIENT' } @spans;
ok $server, 'the SERVER span arrived over gRPC' or diag span_summary(@spans);
ok $client, 'and the CLIENT span';
my @calls = $recv->requests;
like $calls[0]{path} // '', qr{^/opentelemetry\.proto\.collector\.trace\.v1\.TraceService/Export$},
    'as a TraceService/Export call';
my $tp = `cat $dir/backend.log 2>/dev/null`;
# flags: sampled, and the Level 2 "random trace id" bit for ids made here
like $tp, qr/^00-\Q$server->{trace_id}\E-\Q$client->{span_id}\E-0[13]$/m,
    'backend got a traceparent with the trace id and the CLIENT span as parent';

done_testing;
