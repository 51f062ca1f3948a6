#!/usr/bin/perl
# prefork: one exporter process (spanprof-export) sends every child's
# spans (apache_module/spanprof_relay.c, docs/exporting.md "Apache prefork:
# one exporter process"). Spans of several children arrive once each,
# under the parent's pid, from a process that runs as User; a child killed
# in a request leaves nothing stuck; the exporter process killed is started
# again by the parent and sends what the children queued meanwhile; a
# graceful restart replaces it (one at a time); a collector that is down
# fills the children's queues: the drops are counted (status API) and
# logged; after -k stop no exporter process is left. At a graceful restart
# or a restart the parent does not wait for the old exporter process's
# flush, and the new one takes the queues at once.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();
plan skip_all => 'prefork not tested' unless grep { $_ eq 'prefork' } apache_mpms();

my $CONF = <<'EOF';
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
OtelTrace On
AliasMatch ^/ok %%PREFIX%%/htdocs/ok.txt
<Location /api>
    SetHandler spanprof-api
    OtelTrace Off
</Location>
EOF
my %FILES = ('htdocs/ok.txt' => "ok\n");

sub prefix_is {
    my ($p) = @_;
    return sub { ($_[0]{attrs}{'url.path'} // '') =~ /^\Q$p\E/ };
}

sub uid_of {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/status") or return -1;
    local $/;
    my ($uid) = <$fh> =~ /^Uid:\s+(\d+)/m;
    return $uid // -1;
}

# Seconds since the process started.
sub age_of {
    my ($pid) = @_;
    my $st = SpanProf::Apache::_slurp("/proc/$pid/stat") // return 0;
    my ($start) = (split ' ', ($st =~ /\)\s+(.*)/s)[0])[19];
    my ($up) = split ' ', SpanProf::Apache::_slurp('/proc/uptime') // '0';
    return $up - $start / POSIX::sysconf(POSIX::_SC_CLK_TCK());
}

sub status {
    my ($ap) = @_;
    my $r = http_get($ap->port, '/api');
    return $r->{status} == 200 ? eval { decode_json($r->{content}) } : undef;
}

subtest 'spans of several children, once each, through one exporter process' => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, conf => $CONF, files => \%FILES, servers => 3);
    my @xp = $ap->exporter_pids;
    is scalar(@xp), 1, 'one spanprof-export process: ' . join(',', @xp);
    my @kids = $ap->child_pids;
    ok @kids >= 3, 'children: ' . join(',', @kids);
    # Each drops root after its fork (as root, the test's User is not root).
    my ($xu, $ku) = (-1, -1);
    ok @xp && @kids && wait_until(5, sub {
        ($xu, $ku) = (uid_of($xp[0]), uid_of($kids[0]));
        $xu == $ku && ($> != 0 ? 1 : $xu != 0) }),
        "it runs as the children's user (uid $xu, theirs $ku)";
    # Concurrent clients: several children serve.
    my @pids;
    for my $c (1 .. 4) {
        my $pid = fork;
        if (!$pid) {
            http_get($ap->port, "/ok/many/$c/$_") for 1 .. 50;
            POSIX::_exit(0);    # no END or DESTROY: the server is the parent's
        }
        push @pids, $pid;
    }
    waitpid($_, 0) for @pids;
    my @s = wait_for_spans($recv, 200, 20, accepted_only => 1, filter => prefix_is('/ok/many/'));
    is scalar(@s), 200, 'the 200 spans arrived' or diag $recv->summary;
    my @raw = grep { prefix_is('/ok/many/')->($_) } collect_spans($recv, accepted_only => 1);
    is scalar(@raw), 200, 'each once';
    my %pids = map { ($_->{resource}{'process.pid'} // '') => 1 } @s;
    is join(',', keys %pids), $ap->master_pid, 'process.pid: the parent\'s';
    # The span counters are the exporter process's, for every child.
    my ($ex, @kid_rows);
    ok wait_until(5, sub {
        my $j = status($ap) or return 0;
        ($ex) = grep { $_->{counters}{exporter_process} } @{ $j->{workers} || [] };
        @kid_rows = grep { !$_->{counters}{exporter_process} } @{ $j->{workers} || [] };
        $ex && $ex->{counters}{spans_started} >= 200 && $ex->{counters}{spans_exported} >= 200;
    }), 'status: the exporter process counts 200 started and exported: '
        . ($ex ? "$ex->{counters}{spans_started}, $ex->{counters}{spans_exported}" : 'no entry');
    ok $ex && @xp && $ex->{pid} == $xp[0], 'its status slot (exporter_process 1)';
    is scalar(grep { $_->{counters}{spans_started} || $_->{counters}{spans_exported} } @kid_rows), 0,
        'the children\'s entries count none (' . scalar(@kid_rows) . ' children)';
    is scalar($ap->crash_lines), 0, 'no crash';
    $ap->stop;
    ok wait_until(5, sub { !grep { uid_of($_) >= 0 } @xp }), 'no exporter process after -k stop';
    $recv->stop;
};

subtest 'a child killed in a request, the exporter process killed' => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, conf => $CONF, files => \%FILES, servers => 2,
                          burn => 1, main => "<Location /burn>\n    SetHandler spanprof-burn\n</Location>\n");
    is http_get($ap->port, "/ok/before/$_")->{status}, 200, "request $_" for 1 .. 5;
    # A child busy in a slow request, killed.
    my $pid = fork;
    if (!$pid) { http_get($ap->port, '/burn?fn=alpha&ms=3000&n=1'); POSIX::_exit(0); }
    # The child that burns: the one whose CPU time grows by 0.1 s in 0.3 s
    # (one in state R may be another finishing its request's log phase).
    my $busy;
    my $cpu = sub {
        my $st = SpanProf::Apache::_slurp("/proc/$_[0]/stat") // return 0;
        my @f = split ' ', ($st =~ /\)\s+(.*)/s)[0];
        return $f[11] + $f[12];
    };
    ok wait_until(8, sub {
        my %t0 = map { $_ => $cpu->($_) } $ap->child_pids;
        sleep 0.3;
        for my $k (keys %t0) {
            if ($cpu->($k) - $t0{$k} >= POSIX::sysconf(POSIX::_SC_CLK_TCK()) / 10) { $busy = $k; return 1 }
        }
        0 }), 'a child burns CPU in a request' . ($busy ? " ($busy)" : '');
    kill 'KILL', $busy if $busy;
    waitpid($pid, 0);
    is http_get($ap->port, "/ok/after-child/$_")->{status}, 200, "request $_ after" for 1 .. 10;
    my @s = wait_for_spans($recv, 15, 10, accepted_only => 1, filter => sub {
        prefix_is('/ok/before/')->($_[0]) || prefix_is('/ok/after-child/')->($_[0]) });
    is scalar(@s), 15, 'every span before and after arrived' or diag $recv->summary;

    # The exporter process killed: the parent starts another; what the
    # children queued meanwhile is sent by it. Older than 3 s: at once, not
    # at the monitor pass (the next subtest).
    my ($x1) = $ap->exporter_pids;
    my $age = age_of($x1);
    sleep 3.5 - $age if $age < 3.5;
    kill 'KILL', $x1;
    is http_get($ap->port, "/ok/while/$_")->{status}, 200, "request $_ while it is down" for 1 .. 10;
    my $x2;
    ok wait_until(10, sub { ($x2) = $ap->exporter_pids; $x2 && $x2 != $x1 }),
        "started again: $x1 -> " . ($x2 // 'none');
    @s = wait_for_spans($recv, 10, 10, accepted_only => 1, filter => prefix_is('/ok/while/'));
    is scalar(@s), 10, 'the 10 spans queued while it was down arrived' or diag $recv->summary;
    ok scalar(grep { /the exporter process exited .*starting it again/ } $ap->spanprof_lines),
        'its death logged' or diag $ap->error_log_tail(10);
    my $j = status($ap);
    my $killed = 0;
    $killed += $_->{counters}{spans_dropped_process_killed} // 0 for @{ $j->{workers} || [] };
    is $killed, 0, 'spans_dropped_process_killed 0 (the child was killed in its handler, not in a span)';
    is scalar(grep { !/exit signal Killed/ } $ap->crash_lines), 0, 'no other crash'
        or diag join "\n", $ap->crash_lines;
    $ap->stop;
    $recv->stop;
};

# An exporter process that dies within 3 s of its start is not
# forked again at once (a process that cannot run would make the parent fork
# without pause): httpd's monitor hook, about every ten seconds, starts it.
# Each new one is killed as soon as it shows until the parent says it waits.
subtest 'an exporter process dead at its start: started again by the monitor pass' => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, conf => $CONF, files => \%FILES, servers => 1);
    my (%killed, $waits);
    my $until = time + 20;
    while (time < $until && keys(%killed) < 10) {
        for my $x ($ap->exporter_pids) {
            next if $killed{$x};
            kill 'KILL', $x;
            $killed{$x} = 1;
        }
        last if $waits = grep { /within 3 s of its start: starting it again at the next monitor pass/ }
            $ap->spanprof_lines;
        sleep 0.005;
    }
    ok $waits, 'the parent waits for its monitor pass (' . scalar(keys %killed) . ' killed)'
        or diag $ap->error_log_tail(20);
    # Nothing but the monitor pass starts it now.
    is http_get($ap->port, "/ok/down/$_")->{status}, 200, "request $_ while there is none" for 1 .. 5;
    my $x;
    ok wait_until(25, sub { ($x) = grep { !$killed{$_} } $ap->exporter_pids; $x }),
        'a new exporter process: ' . ($x // 'none');
    ok scalar(grep { /starting the exporter process again/ } $ap->spanprof_lines), 'started by the monitor pass'
        or diag $ap->error_log_tail(20);
    my @s = wait_for_spans($recv, 5, 10, accepted_only => 1, filter => prefix_is('/ok/down/'));
    is scalar(@s), 5, 'the spans queued meanwhile arrived' or diag $recv->summary;
    is scalar(grep { !/exit signal Killed/ } $ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
    $ap->stop;
    $recv->stop;
};

subtest 'graceful restart: one exporter process at a time' => sub {
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, conf => $CONF, files => \%FILES, servers => 2);
    my ($x1) = $ap->exporter_pids;
    is http_get($ap->port, "/ok/g1/$_")->{status}, 200, "request $_" for 1 .. 5;
    my @new = $ap->graceful(20);
    ok @new, 'new children: ' . join(',', @new);
    my @xp;
    ok wait_until(10, sub { @xp = $ap->exporter_pids; @xp == 1 && $xp[0] != $x1 }),
        "one new exporter process: $x1 -> " . join(',', @xp);
    is http_get($ap->port, "/ok/g2/$_")->{status}, 200, "request $_ after" for 1 .. 5;
    my @s = wait_for_spans($recv, 10, 10, accepted_only => 1, filter => prefix_is('/ok/g'));
    is scalar(@s), 10, 'spans of both generations' or diag $recv->summary;
    is scalar(grep { /long lost child/ } split /\n/, $ap->error_log), 0,
        'the old one reaped as a process of the MPM\'s (no "long lost child")';
    is scalar($ap->crash_lines), 0, 'no crash';
    $ap->stop;
    $recv->stop;
};

# A graceful restart (logrotate's, every night) stops prefork's listening
# until the new generation's children run: the parent must not spend that
# time waiting for the old exporter process's flush. With a collector that
# hangs, that flush takes the whole shutdown timeout (5 s here); the old
# process is left to finish it, reaped by the new generation, while the new
# one takes the children's queues.
subtest 'graceful restart, collector hanging: serving again at once, the old exporter process flushes alone' => sub {
    my $recv = start_receiver(script => 'hang', default => 'hang');
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, files => \%FILES, servers => 2,
                          conf => $CONF . "OtelExporterShutdownTimeout 5\nOtelExporterTimeout 30\n");
    my ($x1) = $ap->exporter_pids;
    ok $x1, 'an exporter process: ' . ($x1 // 'none');
    is http_get($ap->port, "/ok/h1/$_")->{status}, 200, "request $_" for 1 .. 5;
    ok wait_until(5, sub { $recv->summary =~ /POST/ }), 'its post hangs at the collector';
    my $t0 = time;
    my ($code, $out) = SpanProf::Apache::_run([$SpanProf::Apache::APACHE, '-f', $ap->{conf_path}, '-k', 'graceful'],
                                              timeout => 30, env => $ap->{env});
    is $code, 0, 'apache2 -k graceful' or diag $out;
    # The parent stops nothing else for the old process: new children serve
    # long before its 5 s flush ends.
    my $served;
    ok wait_until(20, sub { my $r = http_get($ap->port, '/ok/h2/first'); ($r->{status} // 0) == 200 && ($served = time) }),
        'a request after the graceful restart';
    ok $served && $served - $t0 < 2.5, sprintf('served %.2f s after the graceful restart (the old flush lasts 5 s)',
                                                ($served // $t0 + 99) - $t0);
    my @xp;
    ok wait_until(5, sub { @xp = $ap->exporter_pids; grep { $_ != $x1 } @xp }),
        "a new exporter process beside the old one: $x1 -> " . join(',', @xp);
    # The old one let the children's queues go at once: the new one sends
    # (to the same hanging collector) while the old one still flushes.
    ok wait_until(3, sub { $recv->summary =~ m{/ok/h2/first} }), 'the new one sent the first span after it'
        or diag $recv->summary;
    # The queues' counts are the new one's (the old one's status entry is
    # the old generation's, and it counts only what it still holds).
    my ($rows, $started) = (0, -1);
    ok wait_until(3, sub {
        my $j = status($ap) or return 0;
        my @ex = grep { $_->{counters}{exporter_process} } @{ $j->{workers} || [] };
        $rows = @ex;
        $started = 0;
        $started += $_->{counters}{spans_started} // 0 for @{ $j->{workers} || [] };
        $started == 6 }), "status: 6 spans started in all ($started, $rows exporter entries)";
    ok SpanProf::Apache::Server::_alive($x1), 'meanwhile the old one is still flushing' if $served && time - $t0 < 4.5;
    ok wait_until(12, sub { !grep { $_ == $x1 } $ap->exporter_pids }), 'the old one gone within its shutdown timeout';
    is scalar(grep { /long lost child/ } split /\n/, $ap->error_log), 0,
        'reaped by the new generation (no "long lost child")' or diag $ap->error_log_tail(20);
    is scalar(grep { /did not stop in time/ } split /\n/, $ap->error_log), 0, 'not killed: it kept to its deadline';
    is scalar($ap->crash_lines), 0, 'no crash';
    my $took = $ap->stop;
    ok $took < 10, sprintf('stopped in %.2f s', $took);
    ok wait_until(5, sub { !grep { uid_of($_) >= 0 } ($x1, @xp) }), 'no exporter process after -k stop';
    $recv->stop;
};

# `apache2 -k restart` signals the whole process group (SIGHUP): the old
# exporter process hands the queues over at once then too, instead of
# holding them while it waits for the children and flushes.
subtest '-k restart, collector hanging: the new exporter process takes the queues at once' => sub {
    my $recv = start_receiver(script => 'hang', default => 'hang');
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, files => \%FILES, servers => 1,
                          conf => $CONF . "OtelExporterShutdownTimeout 5\nOtelExporterTimeout 30\n");
    my ($x1) = $ap->exporter_pids;
    ok $x1, 'an exporter process: ' . ($x1 // 'none');
    is http_get($ap->port, "/ok/r1/$_")->{status}, 200, "request $_" for 1 .. 3;
    ok wait_until(5, sub { $recv->summary =~ /POST/ }), 'its post hangs at the collector';
    my $t0 = time;
    my ($code, $out) = SpanProf::Apache::_run([$SpanProf::Apache::APACHE, '-f', $ap->{conf_path}, '-k', 'restart'],
                                              timeout => 30, env => $ap->{env});
    is $code, 0, 'apache2 -k restart' or diag $out;
    ok wait_until(20, sub { (http_get($ap->port, '/ok/r2/first')->{status} // 0) == 200 }),
        'a request after the restart';
    ok wait_until(3, sub { $recv->summary =~ m{/ok/r2/first} }), 'the new one sent its span'
        or diag $recv->summary;
    ok SpanProf::Apache::Server::_alive($x1), 'meanwhile the old one is still flushing' if time - $t0 < 4.5;
    ok wait_until(12, sub { !grep { $_ == $x1 } $ap->exporter_pids }), 'the old one gone within its shutdown timeout';
    is scalar(grep { /long lost child|did not stop in time/ } split /\n/, $ap->error_log), 0,
        'reaped by the new generation, not killed' or diag $ap->error_log_tail(20);
    is scalar($ap->crash_lines), 0, 'no crash';
    $ap->stop;
    $recv->stop;
};

subtest 'graceful restart then stop at once: the old exporter process waited for too' => sub {
    my $recv = start_receiver(script => 'hang', default => 'hang');
    my $ap = start_apache(mpm => 'prefork', receiver => $recv, files => \%FILES, servers => 1,
                          conf => $CONF . "OtelExporterShutdownTimeout 2\nOtelExporterTimeout 30\n");
    my ($x1) = $ap->exporter_pids;
    is http_get($ap->port, "/ok/s1/$_")->{status}, 200, "request $_" for 1 .. 3;
    ok wait_until(5, sub { $recv->summary =~ /POST/ }), 'its post hangs at the collector';
    my @new = $ap->graceful(10);
    ok @new, 'new children: ' . join(',', @new);
    my ($x2) = grep { $_ != $x1 } $ap->exporter_pids;
    ok $x2 && SpanProf::Apache::Server::_alive($x1), 'the old and the new exporter process: ' . ($x2 // 'none');
    my $took = $ap->stop;
    ok $took < 8, sprintf('stopped in %.2f s', $took);
    ok !grep({ uid_of($_) >= 0 } grep { defined } $x1, $x2), 'neither is left after -k stop';
    is scalar(grep { /long lost child|did not stop in time/ } split /\n/, $ap->error_log), 0,
        'both waited for, neither killed' or diag $ap->error_log_tail(20);
    $recv->stop;
};

subtest 'a collector that is down: the children\'s queues fill, counted and logged' => sub {
    my $dead = dead_port();
    my $ap = start_apache(mpm => 'prefork', receiver_url => "http://127.0.0.1:$dead", files => \%FILES,
        conf => $CONF . "OtelExporterTimeout 1\nOtelExporterBatchSize 16\nOtelExporterBatchCount 1\n",
        servers => 1);
    my $ok = 0;
    for my $i (1 .. 1500) {
        $ok++ if http_get($ap->port, "/ok/down/$i")->{status} == 200;
    }
    is $ok, 1500, 'all 1,500 requests answered 200 (a 256 KiB queue holds about 600)';
    my ($dropped, $prom);
    ok wait_until(5, sub { ($dropped, $prom) = api_counter($ap->port, '/api', 'spans_dropped_queue_full');
                           ($dropped // 0) > 0 && $dropped == ($prom // -1) }),
        'spans_dropped_queue_full ' . ($dropped // 'none') . ' (JSON and Prometheus)';
    ok wait_until(5, sub { grep { /spanprof: dropped [1-9]\d* spans \(queue full\)/ } $ap->spanprof_lines }),
        'the exporter process logs the drops' or diag $ap->error_log_tail(10);
    is scalar($ap->crash_lines), 0, 'no crash';
    my $took = $ap->stop;
    ok $took < 10, sprintf('stopped in %.2f s', $took);
};

done_testing;
