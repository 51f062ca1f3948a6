#!/usr/bin/perl
# Concurrent requests on one worker: requests interleave on the event loop
# (CPU burned in 20 ms slices separated by 1 ms timers), over HTTP/1.1
# keep-alive connections and HTTP/2 streams multiplexed on one connection,
# beside proxied requests that wait for a slow upstream. Every CPU sample
# must carry the span of the request whose code ran: a sample in
# spanprof_burn_alpha never carries a /beta or /slow span and vice versa;
# waiting requests get (almost) no samples; samples taken in the event loop
# between handlers carry no span.
#
# Uses the test-only module t/ngx_burn (spanprof_burn, spanprof_wait).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $ALPHA = 'spanprof_burn_alpha';
my $BETA  = 'spanprof_burn_beta';

my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, burn => 1, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name prof-concurrency;
otel_profiling_rate 1000;
otel_profiling_interval 500ms;

server {
    listen 127.0.0.1:%%PORT%%;
    listen 127.0.0.1:%%PORT3%% http2;
    otel_trace on;
    otel_profiling on;
    keepalive_timeout 30s;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /alpha/ { spanprof_burn alpha 300 15; }
    location /beta/  { spanprof_burn beta 300 15; }
    location /slow/  { proxy_pass http://127.0.0.1:%%PORT2%%; }
}

# the slow upstream: traced, not profiled
server {
    listen 127.0.0.1:%%PORT2%%;
    otel_trace on;
    otel_profiling off;
    location / { spanprof_wait 1500; }
}
EOF

my $dir = tempdir('spanprof-61-XXXXXX', TMPDIR => 1, CLEANUP => 1);
pipe(my $bar_r, my $bar_w) or die "pipe: $!";

# A child that waits until the parent closes the barrier, then runs $code.
# Children leave with _exit: the harness's END blocks belong to the parent.
sub spawn {
    my ($name, $code) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    return $pid if $pid;
    close $bar_w;
    my $x = <$bar_r>;
    my $ok = eval { $code->(); 1 };
    unless ($ok) {
        open(my $fh, '>', "$dir/$name.error");
        print $fh $@ if $fh;
    }
    POSIX::_exit(0);
}

sub write_result {
    my ($name, @f) = @_;
    open(my $fh, '>', "$dir/$name.tmp") or die "$dir/$name.tmp: $!";
    print $fh join(' ', map { $_ // '-' } @f), "\n";
    close $fh;
    rename "$dir/$name.tmp", "$dir/$name.res" or die "rename: $!";
}

# One HTTP/1.1 request on a keep-alive connection; the connection stays
# open (idle in nginx's keep-alive state) until the parent says "done".
sub keepalive_client {
    my ($name, $path) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ngx->port,
        Proto => 'tcp', Timeout => 5) or die "connect: $!";
    binmode $s;
    my $lport = $s->sockport;
    syswrite $s, "GET $path HTTP/1.1\r\nHost: localhost\r\nUser-Agent: spanprof-test\r\n\r\n";
    my $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + 15;
    my ($head, $len);
    while (time < $deadline) {
        if (!defined $head && (my $i = index($buf, "\r\n\r\n")) >= 0) {
            $head = substr($buf, 0, $i);
            $buf = substr($buf, $i + 4);
            ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
            $len //= 0;
        }
        last if defined $head && length($buf) >= $len;
        last unless $sel->can_read($deadline - time);
        my $n = sysread($s, my $chunk, 65536);
        last unless $n;
        $buf .= $chunk;
    }
    die "no response to $path\n" unless defined $head;
    my ($status) = $head =~ m{^HTTP/1\.1 (\d+)};
    my ($sid) = $head =~ /^X-Span-Id:\s*(\S+)/mi;
    my ($tid) = $head =~ /^X-Trace-Id:\s*(\S+)/mi;
    my $keep = $head !~ /^Connection:\s*close/mi;
    write_result($name, $status, $sid, $tid, $lport, $keep ? 'keepalive' : 'closed');
    # idle keep-alive until the others are done
    my $until = time + 20;
    sleep 0.05 while !-e "$dir/done" && time < $until;
    close $s;
}

my @kids;
for my $i (1 .. 3) {
    push @kids, spawn("alpha$i", sub { keepalive_client("alpha$i", "/alpha/$i") });
}
# three HTTP/2 streams on one connection (h2c_requests: curl 7.88's
# --parallel with --http2-prior-knowledge fails all but one transfer)
push @kids, spawn('beta', sub {
    my ($r, $lport) = h2c_requests($ngx->port3, [ map { "/beta/$_" } 1 .. 3 ], timeout => 15);
    for my $i (1 .. 3) {
        my $x = $r->[ $i - 1 ];
        # response headers are HPACK/Huffman coded: the ids come from the spans
        write_result("beta$i", $x->{status}, undef, undef, $lport, $x->{body} eq "done\n" ? 'body-ok' : 'body-bad');
    }
});
for my $i (1 .. 4) {
    push @kids, spawn("slow$i", sub {
        my $r = http_get($ngx->port, "/slow/$i", timeout => 15);
        write_result("slow$i", $r->{status}, $r->{headers}{'x-span-id'}, $r->{headers}{'x-trace-id'});
    });
}
close $bar_r;
my $t_go = time;
close $bar_w;    # go

my $all = wait_until(25, sub {
    my @r = glob("$dir/*.res");
    return @r >= 10;
});
my $elapsed = time - $t_go;
if (open(my $fh, ">", "$dir/done")) { close $fh }
for my $k (@kids) {
    my $dl = time + 10;
    sleep 0.02 while waitpid($k, POSIX::WNOHANG()) == 0 && time < $dl;
    if (kill 0, $k) { kill 'KILL', $k; waitpid($k, 0) }
}
note "all clients done in " . sprintf('%.2f', $elapsed) . " s";

# results: name => {status, span, trace, port}
my %res;
for my $f (glob("$dir/*.res")) {
    my ($name) = $f =~ m{/(\w+)\.res$};
    my @v = split ' ', SpanProf::Test::_slurp($f);
    $res{$name} = { status => $v[0], span => $v[1], trace => $v[2], port => $v[3], conn => $v[4] };
}
for my $e (glob("$dir/*.error")) {
    diag "client error $e: " . SpanProf::Test::_slurp($e);
}

my @names = ((map { "alpha$_" } 1 .. 3), (map { "beta$_" } 1 .. 3), (map { "slow$_" } 1 .. 4));
subtest 'all requests answered' => sub {
    for my $k (@names) {
        is $res{$k}{status}, 200, "$k: 200" or diag explain $res{$k};
        like $res{$k}{span} // '', qr/^[0-9a-f]{16}$/, "$k: X-Span-Id" unless $k =~ /^beta/;
        is $res{$k}{conn}, 'body-ok', "$k: body" if $k =~ /^beta/;
    }
    ok $elapsed < 15, sprintf('done in %.2f s', $elapsed);
};

# 14 SERVER spans (10 front, 4 upstream), then quit: the worker writes its
# last profile when it exits.
my @spans = wait_for_spans($recv, 14, 15, filter => sub { $_[0]{kind} eq 'SPAN_KIND_SERVER' });
my $took = $ngx->quit(20);
ok $took < 15, sprintf('quit in %.2f s', $took);
my @samples = collect_otlp_samples($recv);
@spans = server_spans(SpanProf::Test::_dedupe(collect_spans($recv)));

# the /beta span ids (HTTP/2 response headers are not decoded)
for my $i (1 .. 3) {
    my ($b) = by_path("/beta/$i", @spans);
    next unless $b;
    $res{"beta$i"}{span}  = $b->{span_id};
    $res{"beta$i"}{trace} = $b->{trace_id};
}

my %kind;    # span id => alpha|beta|slow|upstream
my %label;   # span id => text for the dumps
for my $k (@names) {
    my $sid = $res{$k}{span} // next;
    ($kind{$sid}) = $k =~ /^([a-z]+)/;
    $label{$sid} = $k;
}
for my $s (@spans) {
    next if $kind{ $s->{span_id} };
    if (($s->{attrs}{'server.port'} // 0) == $ngx->port2) {
        $kind{ $s->{span_id} } = 'upstream';
        $label{ $s->{span_id} } = "upstream $s->{attrs}{'url.path'}";
    }
}
my $dump = stacks_summary(\@samples, 25, names => \%label);

subtest 'spans and connections' => sub {
    is scalar(@spans), 14, '14 SERVER spans (3 alpha, 3 beta, 4 slow, 4 upstream)' or diag span_summary(@spans);
    my %sp = map { $_->{span_id} => $_ } @spans;
    for my $k (@names) {
        ok $sp{ $res{$k}{span} // '' }, "$k: its SERVER span was exported";
    }
    my %aport = map { ($sp{ $res{$_}{span} // '' } || {})->{attrs}{'client.port'} // "?$_" => 1 } map { "alpha$_" } 1 .. 3;
    is scalar(keys %aport), 3, 'the /alpha requests came on 3 connections';
    is $res{"alpha$_"}{conn}, 'keepalive', "alpha$_: connection kept alive" for 1 .. 3;
    my @b = map { $sp{ $res{"beta$_"}{span} // '' } || {} } 1 .. 3;
    is $_->{attrs}{'client.port'}, $res{beta1}{port}, '/beta span: client.port is the h2 connection' for @b;
    is $_->{attrs}{'network.protocol.version'}, '2', '/beta over HTTP/2' for @b;
    my %bport = map { $_->{attrs}{'client.port'} // '?' => 1 } @b;
    is scalar(keys %bport), 1, 'the 3 /beta streams shared one connection' or diag explain [ keys %bport ];
    is scalar(grep { ($kind{$_} // '') eq 'upstream' } keys %kind), 4, '4 upstream SERVER spans';
    # the premise: the requests ran at the same time
    my @a = grep { $_->{start} } map { $sp{ $res{"alpha$_"}{span} // '' } || {} } 1 .. 3;
    my @o = grep { $_->{start} } map { $sp{ $res{$_}{span} // '' } || {} } (map { "beta$_" } 1 .. 3), (map { "slow$_" } 1 .. 4);
    my @apart;
    for my $x (@a) {
        push @apart, "$x->{attrs}{'url.path'} / $_->{attrs}{'url.path'}"
            for grep { !($x->{start} < $_->{end} && $_->{start} < $x->{end}) } @o;
    }
    ok @a == 3 && @o == 7 && !@apart, 'every /alpha span overlaps every /beta and /slow span in time'
        or diag "not overlapping: @apart\n" . span_summary(@spans);
};

# 5. no sample carries the span of another request
subtest 'samples carry the span of the request that ran' => sub {
    ok @samples > 0, scalar(@samples) . ' samples, total weight ' . total(@samples) or return diag $recv->summary;
    for my $c ([$ALPHA, 'alpha'], [$BETA, 'beta']) {
        my ($fn, $own) = @$c;
        my @on = grep { has_frame($_, $fn) } @samples;
        my @wrong = grep { my $s = sample_span($_); $s ne '' && ($kind{$s} // 'unknown') ne $own } @on;
        my @mine = grep { ($kind{ sample_span($_) } // '') eq $own } @on;
        is total(@wrong), 0, "no sample with $fn on the stack carries a span other than a /$own one"
            or diag "offending samples:\n" . stacks_summary(\@wrong, 20, names => \%label) . "all:\n$dump";
        my ($w, $wm) = (total(@on), total(@mine));
        ok $w && $wm / $w >= 0.9, sprintf('%d of %d weight with %s carries a /%s span (>= 90%%)', $wm, $w, $fn, $own)
            or diag $dump;
    }
    my $dumped = 0;
    my $dump_once = sub { return $dumped++ ? '(stacks above)' : $dump };
    for my $k (map { ("alpha$_", "beta$_") } 1 .. 3) {
        my $sid = $res{$k}{span} // next;
        my ($fn) = $k =~ /^alpha/ ? $ALPHA : $BETA;
        my @own = grep { sample_span($_) eq $sid } @samples;
        my $w = total(@own);
        ok $w > 0, "$k: its own samples exist (weight $w)" or diag $dump_once->();
        ok $w >= 100, "$k: weight $w >= 100 (300 ms of CPU)" or diag $dump_once->();
        my @other = grep { !has_frame($_, $fn) } @own;
        ok total(@other) <= 0.1 * $w, "$k: " . total(@other) . " of its weight without $fn on the stack (<= 10%)"
            or diag stacks_summary(\@other, 10, names => \%label);
        my @tr = grep { sample_trace($_) ne $res{$k}{trace} } @own;
        is scalar @tr, 0, "$k: its samples carry its trace id";
    }
    for my $k (map { "slow$_" } 1 .. 4) {
        my $sid = $res{$k}{span} // next;
        my @own = grep { sample_span($_) eq $sid } @samples;
        # one SIGPROF may carry the weight of several periods (the kernel
        # checks CPU timers at its tick): count the signals
        ok signal_count(@own) <= 2, "$k (waits 1.5 s for its upstream): " . signal_count(@own)
            . ' sample(s) <= 2 (weight ' . total(@own) . ')'
            or diag stacks_summary(\@own, 10, names => \%label);
    }
    my @up = grep { ($kind{ sample_span($_) } // '') eq 'upstream' } @samples;
    is total(@up), 0, 'no sample carries a span of the upstream server (otel_profiling off)'
        or diag stacks_summary(\@up, 10, names => \%label);
    my @unknown = grep { my $s = sample_span($_); $s ne '' && !$kind{$s} } @samples;
    is total(@unknown), 0, 'every linked span is one of these requests'
        or diag stacks_summary(\@unknown, 10, names => \%label);
};

# 6. samples taken in the event loop, outside every handler, carry no span
subtest 'event loop samples carry no span' => sub {
    my @unlabelled = grep { sample_span($_) eq '' } @samples;
    note 'unlabelled weight: ' . total(@unlabelled);
    my @labelled = grep { sample_span($_) ne '' } @samples;
    my @epoll = grep { ($_->{stack}[0] // '') =~ /epoll_wait/ } @labelled;
    is total(@epoll), 0, 'no labelled sample has epoll_wait at the leaf'
        or diag stacks_summary(\@epoll, 10, names => \%label);
    # Between handlers: a frame of the event loop (the module's wrapper or
    # nginx's ngx_process_events_and_timers) with no handler-running frame
    # of the wrapper between it and the leaf.
    my @loop;
    for my $s (@labelled) {
        my @st = @{ $s->{stack} };
        my ($i) = grep { $st[$_] =~ /^(?:ngx_http_spanprof_process_events|ngx_process_events_and_timers)$/ } 0 .. $#st;
        next unless defined $i;
        next if grep { /^ngx_http_spanprof_(?:run_event|run_posted|expire_timers)$/ } @st[0 .. $i];
        push @loop, $s;
    }
    is total(@loop), 0, 'no labelled sample is in the event loop outside a handler'
        or diag stacks_summary(\@loop, 10, names => \%label);
};

is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
my @alerts = grep { /\[(?:alert|crit|emerg)\]/ } split /\n/, $ngx->error_log;
is scalar @alerts, 0, 'no alert/crit lines' or diag join "\n", @alerts;

done_testing;
