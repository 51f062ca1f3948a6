#!/usr/bin/perl
# Export failures: 503s then success (retried, nothing lost), Retry-After
# honoured, 400 (logged, not retried), partial success (rejected count
# logged), an undecodable 200 answer, a collector that hangs past the
# request timeout (retried), a collector that never answers (requests are
# not held up: the export runs on the worker's event loop), and a collector
# that is down (requests still served, errors logged, bounded memory).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;

need_module();

my $CONF = <<'EOF';
otel_exporter {
    endpoint %%RECEIVER%%; protocol http/protobuf;
    interval 100ms;
    %%EXTRA%%
}
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\n"; }
}
EOF

sub conf {
    my ($extra) = @_;
    (my $c = $CONF) =~ s/%%EXTRA%%/$extra \/\/ ''/e;
    return $c;
}

sub path_is {
    my ($p) = @_;
    return sub { ($_[0]{attrs}{'url.path'} // '') eq $p };
}

sub healthy {
    my ($ngx, $workers) = @_;
    is scalar($ngx->crash_lines), 0, 'no crash in the error log' or diag join "\n", $ngx->crash_lines;
    is_deeply [ $ngx->worker_pids ], $workers, 'same worker';
    my @bad = $ngx->log_convention_violations;
    is scalar @bad, 0, 'module error log lines start with "spanprof: "' or diag join "\n", @bad;
}

subtest '503, 503, then 200: retried, every span arrives' => sub {
    my $recv = start_receiver(script => '503,503');
    my $ngx  = start_nginx(receiver => $recv, conf => conf());
    my @w = $ngx->worker_pids;
    is http_get($ngx->port, "/r/$_")->{status}, 200, "request $_" for 1 .. 10;
    my @s = wait_for_spans($recv, 10, 30, accepted_only => 1,
        filter => sub { ($_[0]{attrs}{'url.path'} // '') =~ m{^/r/} });
    is scalar @s, 10, 'all 10 spans arrived' or diag $recv->summary;
    my @reqs = $recv->requests;
    ok @reqs >= 3, 'at least 3 export requests';
    is_deeply [ map { $_->{action} } @reqs[0, 1] ], ['503', '503'], 'first two answered 503';
    my @first = request_spans($recv, $reqs[0]);
    my %ok_ids;
    for my $q (grep { $_->{action} eq '200' } @reqs) {
        $ok_ids{ $_->{span_id} } = 1 for request_spans($recv, $q);
    }
    is scalar(grep { !$ok_ids{ $_->{span_id} } } @first), 0,
        'the spans of the refused batch were sent again and accepted';
    healthy($ngx, \@w);
};

subtest 'Retry-After honoured' => sub {
    my $recv = start_receiver(script => 'retry-after:2');
    my $ngx  = start_nginx(receiver => $recv, conf => conf());
    my @w = $ngx->worker_pids;
    http_get($ngx->port, '/ra/1');
    my @s = wait_for_spans($recv, 1, 15, accepted_only => 1, filter => path_is('/ra/1'));
    is scalar @s, 1, 'span arrived' or diag $recv->summary;
    my @reqs = $recv->requests;
    ok @reqs >= 2, 'retried';
    if (@reqs >= 2) {
        my $gap = $reqs[1]{time} - $reqs[0]{time};
        ok $gap >= 1.8, sprintf('retry waited for Retry-After: 2 (%.2f s)', $gap);
    }
    healthy($ngx, \@w);
};

subtest '400: logged, not retried' => sub {
    my $recv = start_receiver(script => '400');
    my $ngx  = start_nginx(receiver => $recv, conf => conf());
    my @w = $ngx->worker_pids;
    http_get($ngx->port, '/bad/1');
    ok wait_until(10, sub { $recv->requests >= 1 }), 'export attempted';
    my ($first) = $recv->requests;
    is $first->{action}, '400', 'answered 400';
    my @ids = map { $_->{span_id} } request_spans($recv, $first);
    ok @ids, 'the refused batch held spans';
    sleep 2;    # time for a (wrong) retry
    http_get($ngx->port, '/bad/2');
    my @s = wait_for_spans($recv, 1, 10, accepted_only => 1, filter => path_is('/bad/2'));
    is scalar @s, 1, 'later spans exported' or diag $recv->summary;
    my %idset = map { $_ => 1 } @ids;
    my @holding = grep {
        my $q = $_;
        grep { $idset{ $_->{span_id} } } request_spans($recv, $q)
    } $recv->requests;
    is scalar @holding, 1, 'the refused batch was sent exactly once' or diag $recv->summary;
    my $logged = wait_until(5, sub { grep { /spanprof: / && /\b400\b/ } $ngx->spanprof_lines });
    ok $logged, 'error log: spanprof line mentioning 400' or diag $ngx->error_log_tail(20);
    healthy($ngx, \@w);
};

subtest 'partial success: rejected count logged' => sub {
    my $recv = start_receiver(script => 'partial:2');
    my $ngx  = start_nginx(receiver => $recv, conf => conf());
    my @w = $ngx->worker_pids;
    http_get($ngx->port, "/part/$_") for 1 .. 3;
    ok wait_until(10, sub { $recv->requests >= 1 }), 'exported';
    my $logged = wait_until(5, sub { grep { /spanprof: .*rejected 2\b/ } $ngx->spanprof_lines });
    ok $logged, 'error log: "rejected 2"' or diag $ngx->error_log_tail(20);
    healthy($ngx, \@w);
};

subtest 'partial success rejecting more spans than were sent' => sub {
    my $recv = start_receiver(script => 'partial:1000');
    my $ngx  = start_nginx(receiver => $recv, conf => conf());
    my @w = $ngx->worker_pids;
    http_get($ngx->port, '/over/1');
    ok wait_until(10, sub { $recv->requests >= 1 }), 'exported';
    wait_until(5, sub { grep { /rejected/ } $ngx->spanprof_lines });
    my ($line) = grep { /rejected/ } $ngx->spanprof_lines;
    like $line // '', qr/rejected (\d+) of \1 spans/, 'the rejection is capped at the spans sent'
        or diag $ngx->error_log_tail(20);
    healthy($ngx, \@w);
    $ngx->quit(15);
    my ($exported) = $ngx->error_log =~ /exporter stopped: (\d+) spans exported/;
    ok defined $exported && $exported < 1000, 'spans exported stays a count, not a wrapped one ('
        . ($exported // 'none') . ')';
};

subtest 'undecodable 200 answer' => sub {
    my $recv = start_receiver(script => 'garbage');
    my $ngx  = start_nginx(receiver => $recv, conf => conf());
    my @w = $ngx->worker_pids;
    http_get($ngx->port, '/garbage/1');
    ok wait_until(10, sub { $recv->requests >= 1 }), 'exported';
    http_get($ngx->port, '/garbage/2');
    my @s = wait_for_spans($recv, 1, 10, accepted_only => 1, filter => path_is('/garbage/2'));
    is scalar @s, 1, 'exporting goes on' or diag $recv->summary;
    is http_get($ngx->port, '/garbage/3')->{status}, 200, 'requests served';
    healthy($ngx, \@w);
};

subtest 'collector hangs past the request timeout: retried' => sub {
    my $recv = start_receiver(script => 'hang');
    my $ngx  = start_nginx(receiver => $recv, conf => conf('timeout 500ms;'));
    my @w = $ngx->worker_pids;
    http_get($ngx->port, '/hang/1');
    my $t0 = time;
    my @s = wait_for_spans($recv, 1, 15, accepted_only => 1, filter => path_is('/hang/1'));
    ok wait_until(15, sub { grep { $_->{action} eq '200' } $recv->requests }), 'a later attempt was answered';
    my @reqs = $recv->requests;
    is $reqs[0]{action}, 'hang', 'first attempt hung';
    my ($acc) = grep { $_->{action} eq '200' } @reqs;
    ok $acc && grep({ ($_->{attrs}{'url.path'} // '') eq '/hang/1' } request_spans($recv, $acc)),
        'the span arrived in an accepted request' or diag $recv->summary;
    ok $acc && $acc->{time} - $reqs[0]{time} >= 0.4, 'retried after the 500ms timeout';
    healthy($ngx, \@w);
};

subtest 'a collector that never answers does not hold up requests' => sub {
    my $recv = start_receiver(script => 'hang', default => 'hang');
    my $ngx  = start_nginx(receiver => $recv, conf => conf('timeout 30s;'));
    my @w = $ngx->worker_pids;
    http_get($ngx->port, "/stall/$_") for 1 .. 3;
    ok wait_until(10, sub { $recv->requests >= 1 }), 'an export request is hanging';
    my ($ok, $t0) = (0, time);
    for my $i (1 .. 100) {
        $ok++ if http_get($ngx->port, "/during/$i")->{status} == 200;
    }
    my $took = time - $t0;
    is $ok, 100, 'all 100 requests answered 200';
    # A worker waiting on the collector would take the 30 s timeout.
    ok $took < 10, sprintf('in %.2f s, while the export hangs', $took);
    is scalar(grep { $_->{action} eq 'hang' } $recv->requests), scalar($recv->requests),
        'no export request was answered meanwhile';
    healthy($ngx, \@w);
};

subtest 'collector down' => sub {
    my $dead = dead_port();
    my $ngx = start_nginx(receiver_url => "http://127.0.0.1:$dead", conf => conf());
    my @w = $ngx->worker_pids;
    my $ok = 0;
    for my $i (1 .. 300) {
        $ok++ if http_get($ngx->port, "/down/$i")->{status} == 200;
    }
    is $ok, 300, 'all 300 requests answered 200';
    my $reported = wait_until(10, sub {
        my @l = $ngx->spanprof_lines;
        grep { /spanprof: dropped/ || /\[(?:warn|error|crit|alert|emerg)\].*spanprof: / } @l;
    });
    ok $reported, 'error log reports the export failure' or diag $ngx->error_log_tail(20);
    for my $pid ($ngx->worker_pids) {
        my $rss = $ngx->rss_kb($pid);
        ok defined $rss && $rss < 64 * 1024, "worker $pid VmRSS " . ($rss // '?') . ' kB < 64 MB';
    }
    is http_get($ngx->port, '/down/after')->{status}, 200, 'still serving';
    healthy($ngx, \@w);
};

subtest 'collector down: one encoded batch at a time, the rest waits in the queue' => sub {
    my $dead = dead_port();
    my $ngx = start_nginx(receiver_url => "http://127.0.0.1:$dead",
        main => 'error_log %%PREFIX%%/debug.log debug;',
        conf => conf('batch_size 4; batch_count 8;'));
    my @w = $ngx->worker_pids;
    # 0.8 s of requests: the first batch fails at once and waits 250 ms,
    # then 500 ms, for its retries while spans keep coming.
    my ($n, $t0) = (0, time);
    while (time - $t0 < 0.8) {
        http_get($ngx->port, '/q/' . ++$n);
    }
    ok $n > 40, "$n requests";
    my $debug = SpanProf::Test::_slurp($ngx->prefix . '/debug.log') // '';
    my @pending = $debug =~ /spanprof: \d+ spans encoded, (\d+) batches pending/g;
    ok @pending >= 1, scalar(@pending) . ' batch(es) encoded' or diag $ngx->error_log_tail(20);
    my ($max) = sort { $b <=> $a } @pending;
    ok defined $max && $max <= 2,
        'at most 2 batches pending while posts fail, not batch_count (8): ' . ($max // '?');
    healthy($ngx, \@w);
};

done_testing;
