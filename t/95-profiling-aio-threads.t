#!/usr/bin/perl
# nginx "aio threads": a large static file read through the worker's
# thread pool. The pool threads are sampled (CPU, and wall while they run a
# task) and their samples carry the labels of the request whose read task
# they run; the pool threads' idle wait on their queue gives no sample.
# A request's first read task is posted by the copy filter's first call,
# before the module can see its context: /single/ reads its whole file in
# one task (its first and only one), on a fresh worker's pool thread (the
# very first request: the thread is registered with the sampler by that
# task) and again once the pool threads are registered.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();

# Our pool-side wrapper: it runs nginx's read task, on a pool thread only.
my $TASK = 'ngx_http_spanprof_task_run';
my $SIZE = 256 * 1024 * 1024;   # sparse: no disk, the kernel zero-fills

my $CONF = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name prof-aio;
otel_profiling_types cpu wall;
otel_profiling_rate 1000;
otel_profiling_wall_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Span-Id $otel_span_id always;
    location /files/ {
        root %%PREFIX%%;
        aio threads;
        sendfile off;
        output_buffers 1 1m;
    }
    location /single/ {
        root %%PREFIX%%;
        aio threads;
        sendfile off;
        output_buffers 1 128m;
    }
}
EOF

my $ngx = start_nginx(dirs => ['prof', 'files', 'single'], conf => $CONF);
my $dir = $ngx->prefix . '/prof';
my $port = $ngx->port;
# two files: each request's reads are cold (page cache filled by them)
for my $f ('big1', 'big2') {
    open(my $fh, '>', $ngx->prefix . "/files/$f") or die $!;
    truncate($fh, $SIZE) or die "truncate: $!";
    close $fh;
}
my $SINGLE = 128 * 1024 * 1024;
for my $f ('one1', 'one2') {
    open(my $fh, '>', $ngx->prefix . "/single/$f") or die $!;
    truncate($fh, $SINGLE) or die "truncate: $!";
    close $fh;
}

sub get_big {
    my ($f, $dir) = @_;
    my $t0 = time;
    $dir //= 'files';
    my $out = `curl -s -o /dev/null -D - --max-time 60 http://127.0.0.1:$port/$dir/$f`;
    my ($sid) = $out =~ /^X-Span-Id:\s*([0-9a-f]{16})/mi;
    my ($len) = $out =~ /^Content-Length:\s*(\d+)/mi;
    my ($st) = $out =~ m{^HTTP/\S+\s+(\d+)};
    return ($st // 0, $sid // '', $len // 0, time - $t0);
}

my ($sts1, $sids1, $lens1, $ts1) = get_big('one1', 'single');
my ($st1, $sid1, $len1, $t1) = get_big('big1');
my ($st2, $sid2, $len2, $t2) = get_big('big2');
my ($sts2, $sids2, $lens2, $ts2) = get_big('one2', 'single');
# idle pool threads: no wall sample while nothing runs
sleep 1;
my $took = $ngx->quit(15);

is $st1, 200, 'first read: 200';
is $st2, 200, 'second read: 200';
is $len1, $SIZE, 'whole file';
is $sts1, 200, 'single-task reads: 200';
is $sts2, 200, 'single-task reads: 200 (2)';
is $lens1, $SINGLE, 'single-task read: whole file';
ok $sids1 =~ /^[0-9a-f]{16}$/ && $sids2 =~ /^[0-9a-f]{16}$/, 'single-task requests: X-Span-Id';
like $sid1, qr/^[0-9a-f]{16}$/, 'first request: X-Span-Id';
like $sid2, qr/^[0-9a-f]{16}$/, 'second request: X-Span-Id';
isnt $sid1, $sid2, 'two spans';

my (@cpu, @wall);
opendir(my $dh, $dir) or die "$dir: $!";
for my $f (sort grep { /^(cpu|wall)-\d+-\d+\.pb\.gz$/ } readdir $dh) {
    my $p = eval { read_pprof_file("$dir/$f") };
    ok $p, "$f decodes as perftools.profiles.Profile" or diag $@;
    next unless $p;
    if ($f =~ /^cpu/) { push @cpu, pprof_samples($p) } else { push @wall, pprof_samples($p) }
}
closedir $dh;
my $diag = stacks_summary([@cpu, @wall], 15);
my $n = sub { my $t = 0; $t += $_->{values}[0] // 0 for @_; $t };
my $sid = sub { $_[0]{labels}{span_id} // '' };
my %ours = map { $_ => 1 } $sid1, $sid2, $sids1, $sids2;

subtest 'CPU samples of the pool threads carry the request of their task' => sub {
    my @pool = grep { has_frame($_, $TASK) } @cpu;
    my @main = grep { has_frame($_, qr/^ngx_http_spanprof_process_events$|^ngx_worker_process_cycle$/) } @pool;
    my @of1 = grep { $sid->($_) eq $sid1 } @pool;
    my @of2 = grep { $sid->($_) eq $sid2 } @pool;
    ok $n->(@pool) >= 20, $n->(@pool) . ' CPU samples on pool threads (>= 20)' or diag $diag;
    is scalar @main, 0, 'none of them on the event loop\'s stack';
    ok $n->(@of1) >= 5, $n->(@of1) . ' on the first request\'s span' or diag $diag;
    ok $n->(@of2) >= 5, $n->(@of2) . ' on the second request\'s span' or diag $diag;
    my $labelled = $n->(grep { $ours{$sid->($_)} } @pool);
    ok $n->(@pool) && $labelled / $n->(@pool) >= 0.9,
        sprintf('%.0f%% of them labelled with their request (>= 90%%)', 100 * $labelled / ($n->(@pool) || 1))
        or diag $diag;
    my @other = grep { $sid->($_) ne '' && !$ours{$sid->($_)} } @pool;
    is scalar @other, 0, 'no other span on them';
};

subtest 'a request\'s first read task carries its request' => sub {
    # one task each: the first one of the worker (its pool thread not yet
    # registered), and one on registered pool threads
    for my $c (['first request of the worker', $sids1], ['later request', $sids2]) {
        my @of = grep { has_frame($_, $TASK) && $sid->($_) eq $c->[1] } @cpu;
        ok $n->(@of) >= 5, "$c->[0]: " . $n->(@of) . ' CPU samples of its only read task on its span (>= 5)' or diag $diag;
    }
    my @unwrapped = grep { !has_frame($_, $TASK)
        && !has_frame($_, qr/^ngx_http_spanprof_process_events$|^ngx_worker_process_cycle$|^ngx_master_process_cycle$|^main$|^sp_exporter_run$/) } @cpu;
    ok $n->(@unwrapped) <= 0.05 * ($n->(@cpu) || 1), $n->(@unwrapped) . ' CPU samples of pool threads outside the module\'s task wrapper (<= 5%)' or diag $diag;
};

subtest 'wall samples of the pool threads: only while they run a task' => sub {
    my @pool = grep { has_frame($_, $TASK) } @wall;
    ok $n->(@pool) >= 1, $n->(@pool) . ' wall samples on pool threads' or diag $diag;
    my @lab = grep { $ours{$sid->($_)} } @pool;
    ok $n->(@pool) && $n->(@lab) / $n->(@pool) >= 0.9, $n->(@lab) . ' of them labelled with their request';
    # the pool threads wait on their queue otherwise (1 s idle at the end,
    # 32 threads): pthread_cond_wait would show here
    my @idle = grep { has_frame($_, qr/pthread_cond_wait|futex_abstimed_wait/) } @wall;
    is $n->(@idle), 0, 'no wall sample in a pool thread\'s idle wait' or diag $diag;
    ok $n->(@pool) * 1e6 <= ($t1 + $t2 + $ts1 + $ts2) * 1e9 * 1.5,
        sprintf('pool wall %.0f ms within the requests\' %.0f ms', $n->(@pool) * 1, ($t1 + $t2 + $ts1 + $ts2) * 1e3);
};

ok $took < 10, "quit in $took s";
is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
is scalar(grep { /\[alert\]/ } split /\n/, $ngx->error_log), 0, 'no alert' or diag $ngx->error_log_tail(20);

done_testing;
