#!/usr/bin/perl
# Restarts under load with every profile type on (cpu wall memory, at high
# rates): the allocation hooks (GOT slots of every loaded object), the
# wall-clock timers and the CPU timers must survive `nginx -s reload` and
# `-s reopen`, and Apache's graceful restart, which unloads and reloads the
# module in the parent (prefork, worker, event), while clients keep
# sending: new connections, keep-alive connections, HTTP/2 (nginx) and a
# large file read by nginx's "aio threads" pool. Checked: no request fails
# (a keep-alive connection that the server closes between two requests is
# reopened and its request sent again, as every HTTP client does; that is
# not a failure), no worker or child crashes, no alert, no thread left in
# the hooks; after each restart the new workers/children export CPU, wall
# and allocation profiles whose samples carry request labels; the status
# API's memory counters are sane (objects hooked, no patch failure, no
# uninstall timeout, nothing pinned, the live table within its bound).
# Under `make test-sanitize` the same runs with the ASan/UBSan modules and
# libasan preloaded: ASan then owns malloc, and the hooks wrap it.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use POSIX ();
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep);
use File::Temp qw(tempdir);
use SpanProf::Test;
use SpanProf::Apache;
use SpanProf::Profile;

need_module();
need_burn_module();
need_apache_module();

my $STOP_DIR = tempdir('spanprof-98-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $nstop = 0;

# --- load clients -------------------------------------------------------------
# Each client is a child process that loops until its stop file exists,
# then prints "ok bad retried first-failure" on its pipe.

# One HTTP/1.1 request on a keep-alive socket: (status, body) or
# ('closed') when the server closed the connection before answering.
sub ka_request {
    my ($s, $path) = @_;
    my $req = "GET $path HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: spanprof-test/1.0\r\n\r\n";
    return ('closed') unless defined syswrite($s, $req);
    my $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + 20;
    my ($hlen, $clen, $close);
    while (1) {
        if (!defined $hlen && (my $i = index($buf, "\r\n\r\n")) >= 0) {
            $hlen = $i + 4;
            my $head = substr($buf, 0, $i);
            ($clen) = $head =~ /^Content-Length:\s*(\d+)/mi;
            $close = $head =~ /^Connection:\s*close/mi;
            return ('bad-head', $head) unless defined $clen;
        }
        last if defined $hlen && length($buf) >= $hlen + $clen;
        my $left = $deadline - time;
        return ('timeout') if $left <= 0 || !$sel->can_read($left);
        my $n = sysread($s, my $chunk, 1 << 20);
        if (!$n) {
            return ('closed') if $buf eq '';
            return ('short');
        }
        $buf .= $chunk;
    }
    my ($status) = $buf =~ m{^HTTP/1\.1 (\d+)};
    return ($status // 0, substr($buf, $hlen, $clen), $close);
}

sub start_client {
    my ($kind, $port, $paths, $check) = @_;
    my $stop = "$STOP_DIR/stop" . $nstop;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid) {
        return { fh => $fh, pid => $pid, kind => $kind, stop => $stop };
    }
    # a write on a connection the server closed: EPIPE, not a signal
    local $SIG{PIPE} = 'IGNORE';
    my ($ok, $bad, $retried, $first) = (0, 0, 0, '');
    my $fail = sub { $bad++; $first ||= "@_" };
    my $i = 0;
    my ($s, $reused);
    while (!-e $stop) {
        my $path = $paths->[$i++ % @$paths];
        if ($kind eq 'new') {
            my $r = http_get($port, $path);
            ($r->{status} == 200 && $check->($path, $r->{content}))
                ? $ok++ : $fail->("$path: $r->{status} " . substr($r->{content}, 0, 80));
        } elsif ($kind eq 'keepalive') {
            my ($st, $body, $close);
            for my $try (1, 2) {
                if (!$s) {
                    $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                        Proto => 'tcp', Timeout => 5);
                    $reused = 0;
                    if (!$s) { $st = "connect: $!"; last }
                    binmode $s;
                }
                ($st, $body, $close) = ka_request($s, $path);
                last unless $st eq 'closed' && $reused && $try == 1;
                # closed between two requests (a worker that exits, a
                # keep-alive limit): a new connection, the request again
                $retried++;
                close $s;
                undef $s;
            }
            if ($st eq '200' && $check->($path, $body)) {
                $ok++;
            } else {
                $fail->("$path: $st");
                close $s if $s;
                undef $s;
                next;
            }
            if ($close) { close $s; undef $s } else { $reused = 1 }
        } elsif ($kind eq 'h2') {
            my $res = eval { h2c_requests($port, $paths, timeout => 20) } || [];
            $fail->("h2 connect: $@") unless @$res;
            for my $r (@$res) {
                ($r->{status} == 200 && $check->($r->{path}, $r->{body}))
                    ? $ok++ : $fail->("h2 $r->{path}: status $r->{status} done $r->{done}"
                        . (defined $r->{rst} ? " rst $r->{rst}" : ''));
            }
        }
    }
    print "$ok $bad $retried $first\n";
    close STDOUT;
    POSIX::_exit(0);
}

sub stop_clients {
    my @c = @_;
    for my $c (@c) {
        open(my $t, '>', $c->{stop}) or die "$c->{stop}: $!";
        close $t;
    }
    my %tot = (ok => 0, bad => 0, retried => 0, first => '');
    for my $c (@c) {
        my $line = readline($c->{fh}) // "0 1 0 no report from the $c->{kind} client";
        close $c->{fh};
        chomp $line;
        my ($ok, $bad, $retried, $first) = split ' ', $line, 4;
        $tot{ok} += $ok;
        $tot{bad} += $bad;
        $tot{retried} += $retried;
        $tot{"ok_$c->{kind}"} += $ok;
        $tot{first} ||= $first ? "$c->{kind}: $first" : '';
    }
    return \%tot;
}

# --- profile checks -------------------------------------------------------------

sub files_by_pid {
    my ($dir) = @_;
    my %by;
    opendir(my $dh, $dir) or return {};
    for (sort readdir $dh) {
        my ($type, $pid) = /^(cpu|wall|alloc|inuse)-\d+-(\d+)\.pb\.gz$/ or next;
        push @{ $by{$pid}{$type} }, "$dir/$_";
    }
    closedir $dh;
    return \%by;
}

# For a set of processes (one generation: the workers after a restart):
# each of cpu, wall, alloc has a file from one of them whose samples carry
# a span_id label.
sub labelled_types {
    my ($dir, $pids) = @_;
    my $by = files_by_pid($dir);
    my %ok;
    for my $type ('cpu', 'wall', 'alloc') {
        FILE: for my $pid (@$pids) {
            # the newest files first: one with labels is enough
            for my $f (reverse @{ $by->{$pid}{$type} || [] }) {
                my $p = eval { read_pprof_file($f) } or next;
                if (grep { ($_->{labels}{span_id} // '') =~ /^[0-9a-f]{16}$/ } pprof_samples($p)) {
                    $ok{$type} = 1;
                    last FILE;
                }
            }
        }
    }
    return join ' ', sort keys %ok;
}

# Waits (up to $timeout s) until a generation of workers/children (every
# process $pids_cb lists that no earlier generation had) has exported cpu,
# wall and alloc profiles with span labels: [types found, pids].
sub wait_generation {
    my ($dir, $seen, $timeout, $pids_cb) = @_;
    my %gen;
    my $types = '';
    my $t_end = time + $timeout;
    sleep 0.3;
    while (1) {
        $gen{$_} = 1 for grep { !$seen->{$_} } $pids_cb->();
        $types = labelled_types($dir, [ keys %gen ]);
        last if $types eq 'alloc cpu wall' || time >= $t_end;
        sleep 0.2;
    }
    $seen->{$_} = 1 for keys %gen;
    return [ $types, [ sort { $a <=> $b } keys %gen ] ];
}

# The status API summed over the workers/children; waits (up to 5 s) until
# the current ones have published samples of each type (a child started
# by the last restart publishes its counters at its exporter's tick).
sub counters_sum {
    my ($port, $path) = @_;
    my $c;
    wait_until(5, sub {
        $c = counters_once($port, $path);
        return ($c->{memory_samples} // 0) > 0 && ($c->{wall_samples_taken} // 0) > 0
            && ($c->{samples_taken} // 1) > 0;
    });
    return $c;
}

sub counters_once {
    my ($port, $path) = @_;
    my $r = http_get($port, $path);
    my $j = $r->{status} == 200 ? eval { JSON::PP::decode_json($r->{content}) } : undef;
    return {} unless $j;
    my %c;
    for my $w (@{ $j->{workers} || [] }) {
        $c{$_} += $w->{counters}{$_} // 0 for keys %{ $w->{counters} || {} };
        $c{workers}++;
    }
    return \%c;
}

sub check_counters {
    my ($c, $what) = @_;
    ok(($c->{workers} // 0) >= 1, "$what: status API answers ($c->{workers} worker(s))")
        or return;
    ok $c->{memory_hooked_objects} >= 3 * $c->{memory_profiling} && $c->{memory_profiling} >= 1,
        "$what: memory profiling on in $c->{memory_profiling}, $c->{memory_hooked_objects} objects hooked";
    is $c->{memory_patch_failures}, 0, "$what: memory_patch_failures 0";
    is $c->{memory_uninstall_timeouts}, 0, "$what: memory_uninstall_timeouts 0";
    is $c->{memory_pinned}, 0, "$what: memory_pinned 0";
    ok $c->{memory_samples} > 0, "$what: memory_samples $c->{memory_samples}";
    ok $c->{memory_live} <= 16384 * $c->{workers}, "$what: memory_live $c->{memory_live} within the table";
    ok $c->{wall_profiling} >= 1 && $c->{wall_samples_taken} > 0,
        "$what: wall profiling on, wall_samples_taken $c->{wall_samples_taken}";
    ok $c->{samples_taken} > 0, "$what: samples_taken $c->{samples_taken}" if exists $c->{samples_taken};
}

my $BODY_ALLOC = sub { $_[1] =~ /\S/ };

# --- nginx ----------------------------------------------------------------------
my $NGX_FILE = 2 * 1024 * 1024;

my $NGX_CONF = <<'EOF';
otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }
otel_service_name prof-restarts;
otel_profiling_types cpu wall memory;
otel_profiling_rate 1000;
otel_profiling_wall_rate 1000;
otel_profiling_memory_interval 4k;
otel_profiling_interval 300ms;
keepalive_requests 1000000;
server {
    listen 127.0.0.1:%%PORT%%;
    listen 127.0.0.1:%%PORT2%% http2;
    otel_trace on;
    otel_profiling on;
    location /alloc { spanprof_alloc 256; }
    location /block { spanprof_block 5; }
    location /burn  { spanprof_burn alpha 5; }
    location /files/ {
        root %%PREFIX%%;
        aio threads;
        sendfile off;
        output_buffers 1 256k;
    }
    location = /api { otel_trace off; otel_profiling off; otel_api; }
}
EOF

subtest 'nginx: reloads and a reopen under load, cpu wall memory' => sub {
    my $ngx = start_nginx(burn => 1, workers => 2, dirs => ['prof', 'files'], conf => $NGX_CONF);
    my $port = $ngx->port;
    my $dir = $ngx->prefix . '/prof';
    open(my $fh, '>', $ngx->prefix . '/files/big') or die $!;
    truncate($fh, $NGX_FILE) or die "truncate: $!";
    close $fh;
    my $check = sub {
        my ($path, $body) = @_;
        return length($body) == $NGX_FILE if $path =~ m{^/files/};
        return length $body;
    };
    $nstop++;
    my @clients = (
        start_client('new', $port, ['/alloc', '/block', '/burn', '/files/big'], $check),
        start_client('keepalive', $port, ['/alloc', '/files/big', '/block', '/burn'], $check),
        start_client('keepalive', $port, ['/block', '/alloc'], $check),
        start_client('h2', $ngx->port2, [('/alloc', '/block', '/burn') x 3], $check),
    );
    my %seen;
    my $workers = sub { $ngx->worker_pids };
    my @gens = (wait_generation($dir, \%seen, 8, $workers));
    my $reloads = 0;
    for my $n (1 .. 4) {
        my @new = eval { $ngx->reload(timeout => 15) };
        diag "reload $n: $@" unless @new;
        $reloads++ if @new;
        # the new workers serve and export before the next reload
        push @gens, wait_generation($dir, \%seen, 8, sub { @new });
        if ($n == 2) {
            my ($rc, $out, $err) = SpanProf::Test::_run(['/usr/sbin/nginx', '-p', $ngx->prefix . '/',
                '-c', $ngx->conf_path, '-e', $ngx->prefix . '/error.log', '-s', 'reopen'], server => 1);
            is $rc, 0, 'nginx -s reopen' or diag "$out$err";
        }
    }
    my $c = counters_sum($port, '/api');
    my $tot = stop_clients(@clients);
    is $reloads, 4, '4 reloads, new workers each time';
    ok $tot->{ok} > 40, "$tot->{ok} requests answered during the reloads (new connections "
        . ($tot->{ok_new} // 0) . ", keep-alive " . ($tot->{ok_keepalive} // 0) . ", HTTP/2 "
        . ($tot->{ok_h2} // 0) . "; keep-alive reopened $tot->{retried} times)";
    ok $tot->{ok_h2} && $tot->{ok_keepalive} && $tot->{ok_new}, 'every kind of client was answered';
    is $tot->{bad}, 0, 'no request failed' or diag $tot->{first};
    check_counters($c, 'nginx');
    if (($ENV{SPANPROF_SERVER_PRELOAD} // '') =~ /libasan/) {
        # make test-sanitize: ASan's malloc is the process's, and the hooks
        # are installed over it (sampling, not refusing)
        my ($w) = $ngx->worker_pids;
        open(my $m, '<', "/proc/$w/maps") or die "/proc/$w/maps: $!";
        my $maps = do { local $/; <$m> };
        ok $maps =~ /libasan\.so/ && $c->{memory_hooked_objects} > 0 && $c->{memory_samples} > 0,
            'ASan in the workers, and the allocation hooks sample over its malloc';
    }

    my $took = $ngx->quit(15);
    ok $took < 10, "quit in $took s";
    is scalar($ngx->crash_lines), 0, 'no worker crashed' or diag join "\n", $ngx->crash_lines;
    my @bad = grep { /\[(alert|emerg|crit)\]|stayed in the allocation hooks|caught SIG(?:SEGV|BUS|ABRT|ILL|FPE)|AddressSanitizer|runtime error/ }
        split /\n/, $ngx->error_log;
    is scalar @bad, 0, 'no alert, no thread left in the hooks' or diag join "\n", @bad;
    my $g = 0;
    for my $gen (@gens) {
        my $what = $g ? "after reload $g" : 'first workers';
        $g++;
        is $gen->[0], 'alloc cpu wall',
            "$what (@{ $gen->[1] }): cpu, wall and alloc profiles with span labels";
    }
};

# --- Apache: graceful restarts, each MPM -----------------------------------------
my $AP_CONF = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 0.3
OtelProfilingTypes cpu wall memory
OtelProfilingRate 1000
OtelProfilingWallRate 1000
OtelProfilingMemoryInterval 4k
OtelServiceName apache-restarts
OtelTrace On
MaxKeepAliveRequests 0
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
<Location /api>
    SetHandler spanprof-api
</Location>
EOF

for my $mpm (apache_mpms()) {
    subtest "$mpm: graceful restarts under load, cpu wall memory" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $AP_CONF, burn => 1, dirs => ['out'],
            servers => $mpm eq 'prefork' ? 4 : 2);
        my $port = $ap->port;
        my @paths = ('/burn?fn=alloc&kb=256', '/burn?fn=wait&ms=5', '/burn?fn=alpha&ms=5');
        my $check = sub { length $_[1] };
        $nstop++;
        my @clients = (
            start_client('new', $port, \@paths, $check),
            start_client('keepalive', $port, \@paths, $check),
            start_client('keepalive', $port, [reverse @paths], $check),
        );
        # a generation: every child seen between two restarts (prefork
        # starts more as the load needs them)
        my %seen;
        my $out = $ap->prefix . '/out';
        my $children = sub { $ap->child_pids };
        my @gens = (wait_generation($out, \%seen, 8, $children));
        my $restarts = 0;
        for (1 .. 3) {
            my @new = eval { $ap->graceful(20) };
            diag "graceful: $@" unless @new;
            $restarts++ if @new;
            push @gens, wait_generation($out, \%seen, 8, $children);
        }
        my $c = counters_sum($port, '/api');
        my $tot = stop_clients(@clients);
        is $restarts, 3, '3 graceful restarts, new children each time';
        ok $tot->{ok} > 30, "$tot->{ok} requests answered during the restarts (new connections "
            . ($tot->{ok_new} // 0) . ", keep-alive " . ($tot->{ok_keepalive} // 0)
            . "; keep-alive reopened $tot->{retried} times)";
        is $tot->{bad}, 0, 'no request failed' or diag $tot->{first};
        check_counters($c, $mpm);
        $ap->stop;
        is scalar($ap->crash_lines), 0, 'no child crashed' or diag join "\n", $ap->crash_lines;
        my @bad = grep { /\[[\w:]*(?:alert|emerg|crit)\]|stayed in the allocation hooks|caught SIG(?:SEGV|BUS|ABRT|ILL|FPE)|AddressSanitizer|runtime error/ }
            split /\n/, $ap->error_log;
        is scalar @bad, 0, 'no alert, no thread left in the hooks' or diag join "\n", @bad;
        my $g = 0;
        for my $gen (@gens) {
            my $what = $g ? "after restart $g" : 'first children';
            $g++;
            is $gen->[0], 'alloc cpu wall',
                "$what (@{ $gen->[1] }): cpu, wall and alloc profiles with span labels";
        }
    };
}

done_testing;
