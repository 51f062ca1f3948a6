#!/usr/bin/perl
# HTTP/3 (nginx >= 1.25 built --with-http_v3_module): the QUIC connection's
# own work (reading datagrams, decrypting, parsing the frames of all the
# streams, flow control, acknowledgements) runs from the UDP listener's read
# event and carries no request's span; each request stream's handlers and
# its own sending carry its span. One QUIC connection (ngtcp2's gtlsclient,
# Debian package ngtcp2-client) carries a stream that burns in
# spanprof_burn_alpha, 450 streams that wait (event-driven), a stream that
# burns in spanprof_burn_beta and 450 more waiting ones.
#
# Debian 12's nginx (1.22) has no HTTP/3: this file skips there and runs
# against an nginx.org build (docs/compatibility.md: SPANPROF_NGINX,
# SPANPROF_NGX_MODULE, SPANPROF_NGX_BURN_MODULE).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use SpanProf::Test;
use SpanProf::Profile;

my $nginx = $ENV{SPANPROF_NGINX} || '/usr/sbin/nginx';
plan skip_all => "$nginx has no HTTP/3 (built without --with-http_v3_module; Debian 12's 1.22 cannot have it)"
    unless `$nginx -V 2>&1` =~ /--with-http_v3_module/;
chomp(my $client = `command -v gtlsclient 2>/dev/null`);
plan skip_all => 'no HTTP/3 client: gtlsclient (Debian package ngtcp2-client)' unless $client;
need_module();
need_burn_module();

my $WAITERS = 450;    # gtlsclient makes at most 1000 requests on a connection
my $keys = tempdir(CLEANUP => 1);
system('openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost'
       . " -keyout $keys/key.pem -out $keys/cert.pem >/dev/null 2>&1") == 0
    or BAIL_OUT('openssl req failed');

my $CONF = <<"EOF2";
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name prof-h3;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%% quic reuseport;
    listen 127.0.0.1:%%PORT%% ssl;
    ssl_certificate $keys/cert.pem;
    ssl_certificate_key $keys/key.pem;
    http3_max_concurrent_streams 2000;
    otel_trace on;
    otel_profiling on;
    location /a { spanprof_burn alpha 60; }
    location /b { spanprof_burn beta 60; }
    location /x { spanprof_wait 300; }
}
EOF2

my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => $CONF);
my $dir = $ngx->prefix . '/prof';
my $base = 'https://127.0.0.1:' . $ngx->port;
my @uris = map { "$base$_" } ('/a', (('/x') x $WAITERS), '/b', (('/x') x $WAITERS));
my $rc = system("timeout 60 $client --exit-on-all-streams-close -q 127.0.0.1 "
                . $ngx->port . " @uris >/dev/null 2>&1");
is $rc, 0, 'gtlsclient made its ' . scalar(@uris) . ' requests on one connection';
wait_until(5, sub { -s "$dir/traces.jsonl" });
my $took = $ngx->quit(15);

my @js = server_spans(map { spans_from_json($_->{json} || {}) } read_jsonl("$dir/traces.jsonl"));
my %paths;
for my $s (@js) {
    $paths{$s->{name}}++;
    $paths{'h3'}++ if ($s->{attrs}{'network.protocol.version'} // '') eq '3';
}
is $paths{'GET /x'} // 0, 2 * $WAITERS, 'a SERVER span for each waiting stream';
is $paths{'GET /a'} // 0, 1, 'a SERVER span for /a';
is $paths{'GET /b'} // 0, 1, 'a SERVER span for /b';
is $paths{'h3'} // 0, scalar(@uris), 'every span says network.protocol.version 3';

my @s;
opendir(my $dh, $dir) or die "$dir: $!";
for my $f (sort grep { /^cpu-\d+-\d+\.pb\.gz$/ } readdir $dh) {
    my $p = eval { read_pprof_file("$dir/$f") };
    ok $p, "$f decodes as perftools.profiles.Profile" or diag $@;
    push @s, pprof_samples($p) if $p;
}
closedir $dh;
my $diag = stacks_summary(\@s, 20);
my $n = sub { my $t = 0; $t += $_->{values}[0] // 0 for @_; $t };
my $name = sub { $_[0]{labels}{span_name} // '' };

subtest 'each stream\'s handlers carry its span' => sub {
    my @alpha = grep { has_frame($_, 'spanprof_burn_alpha') } @s;
    my @beta = grep { has_frame($_, 'spanprof_burn_beta') } @s;
    ok $n->(@alpha) >= 20, $n->(@alpha) . ' samples at spanprof_burn_alpha' or diag $diag;
    ok $n->(@beta) >= 20, $n->(@beta) . ' samples at spanprof_burn_beta' or diag $diag;
    is $n->(grep { $name->($_) ne 'GET /a' } @alpha), 0, 'all of alpha\'s on GET /a' or diag $diag;
    is $n->(grep { $name->($_) ne 'GET /b' } @beta), 0, 'all of beta\'s on GET /b' or diag $diag;
};

# The connection's packets are read and parsed below the UDP listener's
# read handler (ngx_quic_recvmsg, ngx_quic_input_handler); a stream's own
# sending goes through its filters (ngx_http_*_filter -> ngx_quic_stream_send_chain).
subtest 'the QUIC connection\'s packet work carries no stream\'s span' => sub {
    my @conn = grep { has_frame($_, qr/^ngx_quic_(?:recvmsg|input_handler|handle_datagram)$/) } @s;
    my @labelled = grep { $name->($_) ne '' } @conn;
    ok @s > 0, scalar(@s) . ' samples in all';
    is $n->(@labelled), 0, $n->(@labelled) . ' of the ' . $n->(@conn)
        . ' samples in the connection\'s packet handling labelled' or diag stacks_summary(\@labelled, 10);
};

ok $took < 10, "quit in $took s";
is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
done_testing;
