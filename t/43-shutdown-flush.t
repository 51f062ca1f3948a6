#!/usr/bin/perl
# Shutdown: with interval 60s, spans still queued are exported when nginx
# quits (QUIT) and by the old worker on reload; with a collector that never
# answers, shutdown_timeout bounds the quit.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;

need_module();

my $CONF = <<'EOF';
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; %%EXPORTER%% }
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\n"; }
}
EOF

sub conf {
    my ($exp) = @_;
    (my $c = $CONF) =~ s/%%EXPORTER%%/$exp/;
    return $c;
}

sub prefix_filter {
    my ($prefix) = @_;
    return sub { ($_[0]{attrs}{'url.path'} // '') =~ /^\Q$prefix\E/ };
}

subtest 'queued spans exported at quit' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, conf => conf('interval 60s;'));
    my ($worker) = $ngx->worker_pids;
    is http_get($ngx->port, "/q/$_")->{status}, 200, "request $_" for 1 .. 5;
    sleep 1;
    is scalar(collect_spans($recv)), 0, 'nothing exported before quit (interval 60s)'
        or diag $recv->summary;
    my $took = $ngx->quit(15);
    ok $took < 10, sprintf('quit took %.2f s', $took);
    my @s = wait_for_spans($recv, 5, 5, accepted_only => 1, filter => prefix_filter('/q/'));
    is scalar @s, 5, 'the 5 spans arrived during shutdown' or diag $recv->summary;
    is_deeply [ sort map { $_->{attrs}{'url.path'} } @s ], [ map { "/q/$_" } 1 .. 5 ], 'all of them';
    is $s[0]{resource}{'process.pid'}, $worker, 'sent by the worker';
    is scalar($ngx->crash_lines), 0, 'no crash';
};

subtest 'reload: the old worker flushes' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, conf => conf('interval 60s;'));
    my ($old) = $ngx->worker_pids;
    is http_get($ngx->port, "/r/$_")->{status}, 200, "request $_" for 1 .. 5;
    sleep 0.5;
    is scalar(collect_spans($recv)), 0, 'nothing exported before reload';
    my ($new) = $ngx->reload;
    ok $new && $new != $old, "new worker $new";
    my @s = wait_for_spans($recv, 5, 10, accepted_only => 1, filter => prefix_filter('/r/'));
    is scalar @s, 5, 'the 5 spans of the old worker arrived' or diag $recv->summary;
    is_deeply [ sort map { $_->{resource}{'process.pid'} } @s ], [ ($old) x 5 ], 'sent by the old worker';
    is http_get($ngx->port, '/after/1')->{status}, 200, 'new worker serves';
    my $took = $ngx->quit(15);
    ok $took < 10, sprintf('quit took %.2f s', $took);
    my @a = wait_for_spans($recv, 1, 5, accepted_only => 1, filter => prefix_filter('/after/'));
    is scalar @a, 1, 'the new worker flushed at quit' or diag $recv->summary;
    is $a[0]{resource}{'process.pid'}, $new, 'sent by the new worker' if @a;
    is scalar($ngx->crash_lines), 0, 'no crash';
};

subtest 'hanging collector: shutdown_timeout bounds the quit' => sub {
    my $recv = start_receiver(script => 'hang', default => 'hang');
    my $ngx  = start_nginx(receiver => $recv,
        conf => conf('interval 100ms; shutdown_timeout 1s; timeout 30s;'));
    is http_get($ngx->port, "/h/$_")->{status}, 200, "request $_" for 1 .. 5;
    ok wait_until(10, sub { $recv->requests >= 1 }), 'exporter is stuck in a request';
    my $took = $ngx->quit(20);
    ok $took < 6, sprintf('quit took %.2f s (< 6)', $took) or diag $ngx->error_log_tail(20);
    ok !SpanProf::Test::Nginx::_alive($ngx->master_pid), 'master gone';
    is scalar($ngx->crash_lines), 0, 'no crash';
};

done_testing;
