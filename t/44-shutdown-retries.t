#!/usr/bin/perl
# Retries at shutdown follow the OTLP exporter specification: with a
# collector answering 503 or 429, a stopping worker (nginx -s quit, spans
# queued) keeps the exponential backoff and honours Retry-After (seconds and
# HTTP-date), within shutdown_timeout; a retry that would come after it is
# not made. What is not sent is dropped and said in one log line (also when
# a hanging collector makes the bound end the flush). Measured
# from the receiver's own timestamps of the POSTs it stored.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;

need_module();

# 100 spans in batches of 4: 25 batches behind the first, failing one
# (without backoff at shutdown they went out some 150 times in 0.2 s).
my $SPANS = 100;

sub run_quit {
    my (%o) = @_;
    my $recv = start_receiver(default => $o{answer});
    my $ngx  = start_nginx(receiver => $recv, conf => <<"EOF");
otel_exporter {
    endpoint %%RECEIVER%%; protocol http/protobuf;
    interval 60s;
    batch_size 4;
    batch_count 32;
    shutdown_timeout $o{shutdown};
}
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 200 "ok\\n"; }
}
EOF
    my $ok = grep { http_get($ngx->port, "/s/$_")->{status} == 200 } 1 .. $SPANS;
    is $ok, $SPANS, "$SPANS requests served";
    ok wait_until(5, sub { $recv->requests >= 1 }), 'the first full batch was posted (and refused)';
    my $t_quit = time;
    my $took = $ngx->quit(15);
    my @posts = map { $_->{time} } grep { $_->{path} eq '/v1/traces' } $recv->requests;
    my @gaps  = map { $posts[$_] - $posts[$_ - 1] } 1 .. $#posts;
    my @drops = grep { /spanprof: dropped/ } split /\n/, $ngx->error_log;
    note sprintf('%s: %d POSTs, gaps %s; quit took %.2f s; %s', $o{answer},
        scalar @posts, join(' ', map { sprintf '%.3f', $_ } @gaps), $took,
        join(' | ', @drops));
    is scalar($ngx->crash_lines), 0, 'no crash';
    return { recv => $recv, ngx => $ngx, posts => \@posts, gaps => \@gaps,
             took => $took, drops => \@drops, t_quit => $t_quit };
}

# Exactly one line, naming every span (none was accepted).
sub one_drop_line {
    my ($r, $why) = @_;
    is scalar @{ $r->{drops} }, 1, 'one "dropped" line in the log'
        or diag join("\n", @{ $r->{drops} });
    like $r->{drops}[0] // '', qr/spanprof: dropped $SPANS spans at shutdown: $why/,
        "it counts the $SPANS spans";
}

subtest '503 without Retry-After: exponential backoff with jitter until shutdown_timeout' => sub {
    my $r = run_quit(answer => '503', shutdown => '1s');
    my @g = @{ $r->{gaps} };
    ok @{ $r->{posts} } >= 2 && @{ $r->{posts} } <= 6,
        scalar(@{ $r->{posts} }) . ' POSTs in all (2 to 6)';
    # Retry n waits a random time between half and all of 250 << (n-1) ms.
    my (@early, @late);
    for my $i (0 .. $#g) {
        my $base = 0.25 * 2**$i;
        my $what = sprintf('retry %d after %.3f s, backoff %.3f-%.3f', $i + 1, $g[$i], $base / 2, $base);
        push @early, $what if $g[$i] < $base / 2 - 0.01;
        push @late, $what if $g[$i] > $base + 0.4;    # a busy machine is late
    }
    is_deeply \@early, [], 'no retry before its backoff (half of 250, 500, 1000 ms at least)';
    is_deeply \@late, [], 'none much after it';
    ok $r->{posts}[-1] <= $r->{t_quit} + 1.05, 'no POST after shutdown_timeout';
    ok $r->{took} < 2.5, sprintf('quit took %.2f s', $r->{took});
    # the bound came first, or the next retry was known to come after it
    one_drop_line($r, qr/(?:not sent within|the collector's next retry was due after) the shutdown timeout \(1000 ms\)/);
};

subtest '503 with Retry-After: 1 (seconds): honoured at shutdown too' => sub {
    my $r = run_quit(answer => 'retry-after:1', shutdown => '1500ms');
    my @p = @{ $r->{posts} };
    my $after = grep { $_ > $r->{t_quit} } @p;
    ok $after >= 1 && $after <= 2, "$after POSTs after the quit (1 or 2 in 1.5 s)";
    ok !(grep { $_ < 0.98 } @{ $r->{gaps} }), 'each one at least 1 s after the one before';
    # the retry that Retry-After puts past the deadline is not made, and
    # the quit does not wait for the deadline once it knows
    ok $p[-1] + 1 > $r->{t_quit} + 1.5, 'the next retry was due after the deadline';
    ok $r->{took} < 1.5 + 0.5, sprintf('quit took %.2f s', $r->{took});
    one_drop_line($r, qr/the collector's next retry was due after the shutdown timeout \(1500 ms\)/);
};

subtest '429 with Retry-After: 30: no retry at shutdown, no wait for the deadline' => sub {
    my $r = run_quit(answer => '429:retry-after:30', shutdown => '2s');
    is scalar @{ $r->{posts} }, 1, 'one POST: the one before the quit';
    ok $r->{took} < 1, sprintf('quit took %.2f s (< 1: the retry was beyond the 2 s bound)', $r->{took});
    one_drop_line($r, qr/the collector's next retry was due after the shutdown timeout \(2000 ms\)/);
};

subtest '429 with Retry-After as an HTTP-date' => sub {
    # The date is 1 to 2 s after each answer (whole seconds, rounded up).
    my $r = run_quit(answer => '429:retry-after-date:1', shutdown => '2500ms');
    my @p = @{ $r->{posts} };
    my $after = grep { $_ > $r->{t_quit} } @p;
    ok $after >= 1 && $after <= 3, "$after POSTs after the quit (1 to 3 in 2.5 s)";
    ok !(grep { $_ < 0.98 || $_ > 2.4 } @{ $r->{gaps} }), 'each one at the date: 1 to 2 s after the one before';
    ok $r->{took} < 2.5 + 0.5, sprintf('quit took %.2f s', $r->{took});
    one_drop_line($r, qr/(?:not sent within|the collector's next retry was due after) the shutdown timeout \(2500 ms\)/);
};

subtest 'a collector that hangs: the bound ends the flush, one line still' => sub {
    my $r = run_quit(answer => 'hang', shutdown => '1s');
    is scalar @{ $r->{posts} }, 1, 'one POST, never answered';
    ok $r->{took} >= 0.9 && $r->{took} < 2.5, sprintf('quit took %.2f s (the 1 s bound)', $r->{took});
    one_drop_line($r, qr/not sent within the shutdown timeout \(1000 ms\)/);
};

done_testing;
