#!/usr/bin/perl
# HTTP/2: the work an nginx worker does for the connection (reading and
# parsing the frames of all its streams, HPACK) is not labelled with a
# stream's span, whichever stream ran last; each stream's own handlers
# carry its span. One cleartext HTTP/2 connection carries, in one write,
# a stream that burns in spanprof_burn_alpha, ~2000 streams that wait
# (event-driven, 300 ms: they stay open after their handlers return, and
# their labels used to stay bound over the next frames) with 240 header
# fields each (HPACK work between their handlers), a stream that burns in
# spanprof_burn_beta, and ~2000 more waiting ones. A second, fresh
# connection carries waiting streams only, written while the worker is
# blocked (spanprof_block): its first read (preface and megabytes of frames
# queued in the socket's 8 MB receive buffer, parsed inside the handler
# that makes the connection HTTP/2, ngx_http_v2_init) has no response
# header to go by. A third one sends a request body that nginx feeds to the
# body filters from DATA frames, where a test filter burns CPU.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Profile;
use POSIX ();

need_module();
need_burn_module();

my $CONF = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name prof-h2;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%% http2 rcvbuf=4m;
    keepalive_requests 100000;
    http2_max_concurrent_streams 5000;
    http2_max_header_size 64k;
    otel_trace on;
    otel_profiling on;
    location /a { spanprof_burn alpha 60; }
    location /b { spanprof_burn beta 60; }
    location /x { spanprof_wait 300; }
    location /block { spanprof_block 600; }
    location /body {
        client_body_buffer_size 16k;
        client_max_body_size 100m;
        spanprof_burn_body 2;
    }
}
EOF

my $ngx = start_nginx(burn => 1, dirs => ['prof'], conf => $CONF);
my $dir = $ngx->prefix . '/prof';

my @hdr = map { ["x-field-$_", "value-$_-" . ('v' x 24)] } 1 .. 240;
my @paths = (['/a'], (map { ['/x', @hdr] } 1 .. 2000), ['/b'], (map { ['/x', @hdr] } 1 .. 2000));
my $res = h2c_requests($ngx->port, \@paths, timeout => 60);
my $port = $ngx->port;
my $blocker = fork // die "fork: $!";
if (!$blocker) {
    exec('curl', '-s', '--http2-prior-knowledge', '-o', '/dev/null', '--max-time', '30',
         "http://127.0.0.1:$port/block") or POSIX::_exit(1);
}
select(undef, undef, undef, 0.2);
my $res2 = h2c_requests($port, [map { ['/x', @hdr] } 1 .. 3000], timeout => 60);
waitpid($blocker, 0);
my $blocked_ok = $? == 0;
my $body = $ngx->prefix . '/body.bin';
{
    open(my $fh, '>', $body) or die $!;
    print $fh 'b' x (2 * 1024 * 1024);
    close $fh;
}
my $body_status = `curl -s --http2-prior-knowledge -o /dev/null -w '%{http_code} %{http_version}' --max-time 30 --data-binary \@$body http://127.0.0.1:$port/body`;
my $took = $ngx->quit(15);

my %by = (a => 0, b => 0, x => 0);
for my $r (@$res) {
    my ($k) = $r->{path} =~ m{^/(\w)};
    $by{$k}++ if $r->{status} == 200;
}
is $by{a}, 1, '/a answered 200';
is $by{b}, 1, '/b answered 200';
is $by{x}, 4000, 'the 4000 waiting streams answered 200';
is scalar(grep { $_->{status} == 200 } @$res2), 3000, 'fresh connection: the 3000 waiting streams answered 200';
ok $blocked_ok, 'the request that blocked the worker ended';
is $body_status, '200 2', 'request body over HTTP/2: 200';

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

# A stream's own code is below one of nginx's (exported) request entry
# points or our filters; the connection's frame parsing calls them for a
# stream's HEADERS, and a stream's request body filters for its DATA
# (spanprof_burn_request_body is spanprof_burn_\w+). Everything else on the connection's read path is the
# connection's.
my $REQ = qr/^(?:ngx_http_process_request|ngx_http_process_request_header|ngx_http_handler|ngx_http_core_run_phases|ngx_http_finalize_request|ngx_http_free_request|ngx_http_run_posted_requests|ngx_http_send_header|ngx_http_output_filter|ngx_http_v2_close_stream|ngx_http_request_body_save_filter|ngx_http_spanprof_request_body_filter|spanprof_burn_\w+)$/;

subtest 'the connection\'s frame parsing carries no stream\'s span' => sub {
    # (the request body's connection: its stream's own events, copying the
    # body from nginx's static handlers, are checked below)
    my @conn = grep { has_frame($_, 'ngx_http_spanprof_run_event') && !has_frame($_, $REQ)
        && $name->($_) ne 'POST /body'
        && !has_frame($_, qr/^(?:ngx_http_spanprof_expire_timers|sp_exporter_run)$/) } @s;
    my @labelled = grep { $name->($_) ne '' } @conn;
    my @hooked = grep { has_frame($_, 'ngx_http_spanprof_h2_state') } @conn;
    my @hooked_labelled = grep { $name->($_) ne '' } @hooked;
    ok $n->(@conn) >= 20, $n->(@conn) . ' samples in the connection\'s own work (>= 20)' or diag $diag;
    ok $n->(@hooked) >= 10, $n->(@hooked) . ' of them in frame parsing stepped by the module (>= 10)';
    diag stacks_summary(\@hooked_labelled, 10) if $ENV{SPANPROF_T96_DIAG};
    ok $n->(@hooked_labelled) <= 0.03 * $n->(@hooked),
        $n->(@hooked_labelled) . ' of those labelled with a stream (<= 3%)' or diag stacks_summary(\@hooked_labelled, 10);
    # the connections' first reads (parsed inside the handler that makes
    # them HTTP/2) are stepped too (not stepped: 10 to 42 samples here)
    ok $n->(@labelled) <= 0.01 * $n->(@conn),
        $n->(@labelled) . ' of all connection samples labelled with a stream (<= 1%)' or diag stacks_summary(\@labelled, 10);
};

subtest 'request body filters run from DATA frames carry the stream\'s span' => sub {
    my @body = grep { has_frame($_, 'spanprof_burn_request_body') } @s;
    my @on = grep { $name->($_) eq 'POST /body' } @body;
    ok $n->(@body) >= 50, $n->(@body) . ' samples in the request body filter (>= 50)' or diag $diag;
    ok $n->(@on) >= 0.97 * $n->(@body), $n->(@on) . ' of them on POST /body (>= 97%)' or diag $diag;
};

ok $took < 10, "quit in $took s";
is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
is scalar(grep { /\[alert\]/ } split /\n/, $ngx->error_log), 0, 'no alert' or diag $ngx->error_log_tail(20);

done_testing;
