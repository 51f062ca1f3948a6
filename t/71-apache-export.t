#!/usr/bin/perl
# mod_spanprof's exporter in apache2 child processes, once per MPM: a
# collector that is down (requests still served, the drop logged), 503s
# then 200 (nothing lost), spans queued with a 60 s interval flushed by the
# old children on `apachectl -k graceful` and by every child on `-k stop`,
# and a collector that hangs: OtelExporterShutdownTimeout bounds the stop.
# Once (event MPM): a profile rejected in a partial success is counted
# (profiles_rejected in the status API) and logged with the message.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

sub conf {
    my ($extra) = @_;
    return <<"EOF";
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
$extra
OtelTrace On
AliasMatch ^/ok %%PREFIX%%/htdocs/ok.txt
EOF
}

my %FILES = ('htdocs/ok.txt' => "ok\n");

sub prefix_is {
    my ($p) = @_;
    return sub { ($_[0]{attrs}{'url.path'} // '') =~ /^\Q$p\E/ };
}

for my $mpm (apache_mpms()) {
    subtest "$mpm: collector down" => sub {
        my $dead = dead_port();
        my $ap = start_apache(mpm => $mpm, receiver_url => "http://127.0.0.1:$dead",
            conf => conf("OtelExporterInterval 0.1\nOtelExporterTimeout 1\nOtelExporterBatchCount 1\nOtelExporterBatchSize 16"),
            files => \%FILES);
        my $ok = 0;
        for my $i (1 .. 100) {
            $ok++ if http_get($ap->port, "/ok?down=$i")->{status} == 200;
        }
        is $ok, 100, 'all 100 requests answered 200';
        my $took = $ap->stop;
        ok $took < 10, sprintf('stopped in %.2f s', $took);
        my @l = $ap->spanprof_lines;
        ok scalar(grep { /spanprof: dropped \d+ spans/ || /spanprof: exporter stopped: 0 spans exported/ } @l),
            'the drop is logged' or diag $ap->error_log_tail(20);
        ok scalar(grep { /\[spanprof:error\].*spanprof: / } @l), 'export errors logged at error level'
            or diag $ap->error_log_tail(20);
        is scalar($ap->crash_lines), 0, 'no crash';
    };

    subtest "$mpm: 503, 503, then 200: every span arrives" => sub {
        my $recv = start_receiver(script => '503,503');
        my $ap = start_apache(mpm => $mpm, receiver => $recv, conf => conf('OtelExporterInterval 0.1'),
            files => \%FILES, servers => 1);
        is http_get($ap->port, "/ok/r$_")->{status}, 200, "request $_" for 1 .. 10;
        my @s = wait_for_spans($recv, 10, 20, accepted_only => 1, filter => prefix_is('/ok/r'));
        is scalar @s, 10, 'all 10 spans accepted in the end' or diag $recv->summary;
        my @reqs = $recv->requests;
        is_deeply [ map { $_->{action} } @reqs[0, 1] ], ['503', '503'], 'the first two exports were refused';
        is scalar($ap->crash_lines), 0, 'no crash';
        $ap->stop;
        $recv->stop;
    };

    subtest "$mpm: graceful restart flushes the old children's queues" => sub {
        my $recv = start_receiver();
        my $ap = start_apache(mpm => $mpm, receiver => $recv, conf => conf('OtelExporterInterval 60'),
            files => \%FILES);
        is http_get($ap->port, "/ok/g$_")->{status}, 200, "request $_" for 1 .. 6;
        sleep 0.5;
        is scalar(collect_spans($recv)), 0, 'nothing exported yet (interval 60 s)';
        # Taken now: prefork may have spawned spare children since start.
        my @old = $ap->child_pids;
        my $t0 = time;
        my @new = $ap->graceful(20);
        ok @new, 'new children after -k graceful: ' . join(',', @new);
        my @s = wait_for_spans($recv, 6, 10, accepted_only => 1, filter => prefix_is('/ok/g'));
        is scalar @s, 6, sprintf('the 6 queued spans arrived (%.2f s)', time - $t0) or diag $recv->summary;
        my %old = map { $_ => 1 } @old;
        # prefork: the exporter process sends them under the server's own
        # resource (the parent's pid).
        %old = ($ap->master_pid => 1) if $mpm eq 'prefork';
        is scalar(grep { !$old{ $_->{resource}{'process.pid'} } } @s), 0,
            $mpm eq 'prefork' ? 'sent for the server (the parent\'s pid)' : 'sent by the old children';

        is http_get($ap->port, '/ok/after')->{status}, 200, 'the new generation serves';
        my $took = $ap->stop;
        ok $took < 10, sprintf('-k stop took %.2f s', $took);
        my @a = wait_for_spans($recv, 1, 5, accepted_only => 1, filter => prefix_is('/ok/after'));
        is scalar @a, 1, 'the new child flushed at stop' or diag $recv->summary;
        if ($mpm eq 'prefork') {
            is $a[0]{resource}{'process.pid'}, $ap->master_pid, 'sent for the server' if @a;
        } else {
            ok !$old{ $a[0]{resource}{'process.pid'} }, 'sent by a new child' if @a;
        }
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
        $recv->stop;
    };

    subtest "$mpm: a hanging collector does not hold the stop" => sub {
        my $recv = start_receiver(script => 'hang', default => 'hang');
        my $ap = start_apache(mpm => $mpm, receiver => $recv,
            conf => conf("OtelExporterInterval 0.1\nOtelExporterShutdownTimeout 1\nOtelExporterTimeout 30"),
            files => \%FILES, servers => 1);
        is http_get($ap->port, "/ok/h$_")->{status}, 200, "request $_" for 1 .. 5;
        ok wait_until(10, sub { $recv->requests >= 1 }), 'the exporter is stuck in a request';
        my $took = $ap->stop(20);
        ok $took < 6, sprintf('-k stop took %.2f s (< 6)', $took) or diag $ap->error_log_tail(20);
        is scalar($ap->crash_lines), 0, 'no crash';
        $recv->stop;
    };
}

subtest 'event: a profile rejected in a partial success (http/protobuf)' => sub {
    my ($mpm) = grep { $_ eq 'event' } apache_mpms();
    plan skip_all => 'event MPM not tested' unless $mpm;
    # Every answer is an ExportProfilesServiceResponse rejecting 1.
    my $recv = start_receiver(default => 'partial:1');
    my $ap = start_apache(mpm => $mpm, receiver => $recv, burn => 1, servers => 1, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
OtelProfilingInterval 0.3
OtelProfilingRate 500
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
<Location /api>
    SetHandler spanprof-api
</Location>
EOF
    ok wait_until(10, sub {
        http_get($ap->port, '/burn?fn=beta&ms=20&n=1');
        grep { /collector rejected 1 of 1 profiles: test rejection/ } $ap->spanprof_lines;
    }), 'error log: "rejected 1 of 1 profiles: test rejection"' or diag $recv->summary . $ap->error_log_tail(20);
    my @pq = grep { $_->{path} eq '/v1development/profiles' } $recv->requests;
    ok @pq >= 1, scalar(@pq) . ' profile request(s), answered ' . ($pq[0]{action} // 'none');
    my ($json, $prom);
    ok wait_until(5, sub { ($json, $prom) = api_counter($ap->port, '/api', 'profiles_rejected');
                           ($json // 0) >= 1 && ($json // 0) == ($prom // -1) }),
        'profiles_rejected in the API\'s JSON (' . ($json // 'none') . ') and Prometheus text ('
        . ($prom // 'none') . ')';
    my ($exported) = api_counter($ap->port, '/api', 'profiles_exported');
    is $exported, 0, 'a rejected profile is not counted as exported';
    is scalar($ap->crash_lines), 0, 'no crash';
    $ap->stop;
    $recv->stop;
};

done_testing;
