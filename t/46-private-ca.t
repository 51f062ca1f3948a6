#!/usr/bin/perl
# A CA bundle from anywhere: trusted_certificate /
# OtelExporterTrustedCertificate is read by the nginx master / httpd parent
# (root) at configuration time and handed to the workers (nobody) as bytes,
# so a CA file under a root-owned 0700 directory (a clone in /root) still
# verifies an https collector. Checked, for nginx and Apache (event MPM),
# against a real TLS receiver (t/https_receiver.py) whose certificate for
# 127.0.0.1 is signed by a CA made here with the openssl CLI: the spans
# arrive (decoded with protoc); with another CA the export fails with a
# logged TLS verification error naming the CA file, and no span arrives.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use SpanProf::Test;
use SpanProf::Apache;

need_module();
plan skip_all => 'needs root (workers run as nobody)' unless $> == 0;
plan skip_all => 'needs the openssl CLI' unless -x '/usr/bin/openssl';
plan skip_all => 'needs /usr/bin/python3' unless -x '/usr/bin/python3';

my $ROOT = repo_root();

# A root-owned 0700 directory, as /root is: nobody cannot search it.
my $private = tempdir('spanprof-ca-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{SPANPROF_KEEP});
chmod 0700, $private or die "chmod $private: $!";
my $nobody = getpwnam('nobody');

sub openssl {
    my ($args) = @_;
    my $out = `/usr/bin/openssl $args 2>&1`;
    die "openssl $args: $out" if $?;
}
# The CA, a server certificate for IP 127.0.0.1 it signs, and another CA.
openssl("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=spanprof-test-ca "
    . "-keyout $private/ca.key -out $private/ca.pem");
openssl("req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 "
    . "-keyout $private/server.key -out $private/server.csr");
{
    open my $fh, '>', "$private/ext.cnf" or die $!;
    print $fh "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n";
    close $fh;
}
openssl("x509 -req -in $private/server.csr -CA $private/ca.pem -CAkey $private/ca.key "
    . "-CAcreateserial -days 2 -extfile $private/ext.cnf -out $private/server.pem");
openssl("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=spanprof-other-ca "
    . "-keyout $private/other.key -out $private/other-ca.pem");

# The HTTPS receiver stores requests as t/receiver.pl does, so
# SpanProf::Test's receiver methods (requests, spans, stop) read them.
sub start_https_receiver {
    my $base = tempdir('spanprof-recv-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    my $dir = "$base/req";
    mkdir $dir or die "$dir: $!";
    my $port = free_port();
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', "$base/receiver.log");
        open(STDERR, '>&', \*STDOUT);
        { no warnings 'exec'; exec '/usr/bin/python3', "$ROOT/t/https_receiver.py", '--port', $port, '--dir', $dir,
            '--cert', "$private/server.pem", '--key', "$private/server.key"; }
        POSIX::_exit(127);
    }
    my $recv = bless { pid => $pid, port => $port, dir => $dir, base => $base,
        cache => {}, decoded => {} }, 'SpanProf::Test::Receiver';
    # Ready when it says so: a probing connection would be a failed
    # handshake in its log.
    wait_until(10, sub { $recv->receiver_log =~ /^listening on/m ? 1 : 0 })
        or die "https receiver did not start: " . $recv->receiver_log;
    return $recv;
}

sub paths { join ' ', sort map { $_->{attrs}{'url.path'} // '?' } @_ }

sub check_spans {
    my ($what, $recv, $port, $log) = @_;
    for my $i (1 .. 3) {
        ok http_get($port, "/r/$i")->{status}, "$what: /r/$i answered";  # a 404 is a span too
    }
    my @s = wait_for_spans($recv, 3, 15,
        filter => sub { ($_[0]{attrs}{'url.path'} // '') =~ m{^/r/\d$} });
    is paths(@s), '/r/1 /r/2 /r/3', "$what: the three spans arrived over https"
        or diag $log->() . "\n" . $recv->receiver_log;
    my @reqs = $recv->requests;
    ok @reqs && $reqs[0]{path} eq '/v1/traces', "$what: POSTed to /v1/traces";
    unlike $log->(), qr/Permission denied|\(13\)|certificate|SSL/,
        "$what: no permission or TLS error in the log";
}

sub check_wrong_ca {
    my ($what, $recv, $port, $log) = @_;
    ok http_get($port, "/r/$_")->{status}, "$what: /r/$_ answered" for 1 .. 2;
    my $err = wait_until(15, sub {
        $log->() =~ /(spanprof: export to https:\S+ failed[^\n]*)/ ? $1 : 0 });
    ok $err, "$what: the export failure is logged" or diag $log->();
    like $err // '', qr/SSL certificate problem: (?:self-signed certificate|unable to get local issuer)/,
        "$what: it is a TLS verification error";
    like $err // '', qr/\(trusted_certificate \Q$private\E\/other-ca\.pem\)/,
        "$what: naming the CA file";
    # The receiver logs the client's alert on its own time: wait for it.
    ok wait_until(5, sub { $recv->receiver_log =~ /handshake failed: .*(?:ALERT_UNKNOWN_CA|unknown ca)/i }),
        "$what: the receiver saw the client reject its certificate"
        or diag $recv->receiver_log;
    is scalar($recv->requests), 0, "$what: no request reached the receiver, no span";
}

# ---------------------------------------------------------------------------
for my $case (['right CA', 'ca.pem'], ['another CA', 'other-ca.pem']) {
    my ($name, $ca) = @$case;
    subtest "nginx, $name under a 0700 root directory" => sub {
        my $recv = start_https_receiver();
        my $url = 'https://127.0.0.1:' . $recv->port;
        my $ngx = start_nginx(conf => <<"CONF");
otel_exporter {
    endpoint $url; protocol http/protobuf;
    trusted_certificate $private/$ca;
    interval 100ms;
    timeout 2s;
}
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location /r/ { return 200 "ok\\n"; }
}
CONF
        my $log = sub { $ngx->error_log };
        if ($ca eq 'ca.pem') {
            check_spans('nginx', $recv, $ngx->port, $log);
        } else {
            check_wrong_ca('nginx', $recv, $ngx->port, $log);
        }
        # after it served requests: just forked, it may not have dropped
        # root yet
        my ($w) = $ngx->worker_pids;
        is((stat "/proc/$w")[4], $nobody, 'the worker runs as nobody');
        $ngx->quit(15);
        is scalar($ngx->crash_lines), 0, 'no crash';
        $recv->stop;
    };
}

for my $case (['right CA', 'ca.pem'], ['another CA', 'other-ca.pem']) {
    my ($name, $ca) = @$case;
    subtest "Apache (event), $name under a 0700 root directory" => sub {
        need_apache_module();
        my $recv = start_https_receiver();
        my $url = 'https://127.0.0.1:' . $recv->port;
        my $ap = start_apache(mpm => 'event', conf => <<"CONF");
OtelExporterEndpoint $url
OtelExporterProtocol http/protobuf
OtelExporterTrustedCertificate $private/$ca
OtelExporterInterval 0.1
OtelExporterTimeout 2
OtelTrace On
CONF
        my $log = sub { $ap->error_log };
        if ($ca eq 'ca.pem') {
            check_spans('Apache', $recv, $ap->port, $log);
        } else {
            check_wrong_ca('Apache', $recv, $ap->port, $log);
        }
        my ($c) = $ap->child_pids;
        is((stat "/proc/$c")[4], $nobody, 'the child runs as nobody');
        $ap->stop(15);
        is scalar($ap->crash_lines), 0, 'no crash';
        $recv->stop;
    };
}

done_testing;
