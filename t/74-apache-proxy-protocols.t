#!/usr/bin/perl
# Propagation into mod_proxy_fcgi and mod_proxy_ajp backends. mod_spanprof
# edits r->headers_in, so protocols other than HTTP carry the same
# traceparent: FastCGI as the HTTP_TRACEPARENT parameter, AJP13 as a
# request header. Real (minimal) protocol backends in t/backends/
# (fcgi-echo.pl, ajp-echo.pl) answer "tp=<traceparent> ts=<tracestate>".
# Under OtelTraceContext propagate and inject the backend must see the
# CLIENT span (trace id of the SERVER span, parent id = CLIENT span id);
# under extract and ignore the client's traceparent untouched. Event MPM,
# and prefork (or SPANPROF_APACHE_MPMS).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep);
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $T  = '0af7651916cd43dd8448eb211c80319c';
my $P  = 'b7ad6b7169203331';
my $TS = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';

my $ROOT = repo_root();
my %BACKEND_PID;

sub start_backend {
    my ($script) = @_;
    my $port = free_port();
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open(STDIN, '<', '/dev/null');
        { no warnings 'exec'; exec $^X, "$ROOT/t/backends/$script", $port; }
        POSIX::_exit(127);
    }
    $BACKEND_PID{$pid} = $script;
    my $ok = wait_until(10, sub {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
            Proto => 'tcp', Timeout => 1) or return 0;
        close $s;
        return 1;
    });
    die "$script did not listen on $port\n" unless $ok;
    return $port;
}

END {
    my $st = $?;
    for my $pid (keys %BACKEND_PID) {
        kill 'TERM', $pid;
        waitpid($pid, 0);
    }
    $? = $st;
}

my $FCGI = start_backend('fcgi-echo.pl');
my $AJP  = start_backend('ajp-echo.pl');

my @MODES = qw(default ignore extract inject propagate);

my $CONF = "OtelExporterEndpoint %%RECEIVER%%\nOtelExporterProtocol http/protobuf\n"
         . "OtelExporterInterval 0.1\n"
         . "OtelServiceName apache-proxy-protocols\n"
         . "<VirtualHost 127.0.0.1:%%PORT%%>\n"
         . "    OtelTrace On\n";
for my $mode (@MODES) {
    my $tc = $mode eq 'default' ? '' : "OtelTraceContext $mode";
    $CONF .= "    <Location /fcgi/$mode/>\n        $tc\n        ProxyPass fcgi://127.0.0.1:$FCGI/\n    </Location>\n"
           . "    <Location /ajp/$mode/>\n        $tc\n        ProxyPass ajp://127.0.0.1:$AJP/\n    </Location>\n";
}
$CONF .= "</VirtualHost>\n";

my $recv = start_receiver();
my @mpms = $ENV{SPANPROF_APACHE_MPMS} ? apache_mpms() : qw(event prefork);

for my $mpm (@mpms) {
    subtest $mpm => sub {
        my $ap = start_apache(mpm => $mpm, receiver => $recv, conf => $CONF,
            modules => ['proxy_ajp']);
        my %req;
        my $n = 0;
        for my $proto (qw(fcgi ajp)) {
            for my $mode (@MODES) {
                for my $with (qw(none tp)) {
                    my $path = "/$proto/$mode/$mpm-$with-" . ++$n;
                    my %h = $with eq 'tp' ? (traceparent => "00-$T-$P-01", tracestate => $TS) : ();
                    my $r = http_get($ap->port, $path, headers => \%h);
                    $req{"$proto/$mode/$with"} = { path => $path, res => $r,
                        echo => [ parse_echo($r->{content}) ] };
                }
            }
        }
        my %want = map { $_->{path} => 1 } values %req;
        my @srv = wait_for_spans($recv, scalar(keys %want), 15,
            filter => sub { $_[0]{kind} eq 'SPAN_KIND_SERVER' && $want{ $_[0]{attrs}{'url.path'} // '' } });
        is scalar @srv, scalar(keys %want), 'a SERVER span for every request' or diag $recv->summary;
        sleep 0.3;     # the CLIENT spans are exported with their SERVER span
        my @all = collect_spans($recv);

        for my $proto (qw(fcgi ajp)) {
            my $bport = $proto eq 'fcgi' ? $FCGI : $AJP;
            for my $mode (@MODES) {
                subtest "$proto, $mode" => sub {
                    for my $with (qw(none tp)) {
                        my $q = $req{"$proto/$mode/$with"};
                        is $q->{res}{status}, 200, "$with: proxied, 200" or diag explain $q->{res};
                        my ($up_tp, $up_ts) = @{ $q->{echo} };
                        ok defined $up_tp, "$with: the backend answered tp=... ts=..."
                            or diag $q->{res}{content};
                        my @s = grep { $_->{kind} eq 'SPAN_KIND_SERVER' } by_path($q->{path}, @all);
                        is scalar @s, 1, "$with: one SERVER span" or next;
                        my $s = $s[0];
                        my @cl = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
                        is scalar @cl, 1, "$with: one CLIENT span, child of the SERVER span"
                            or do { diag span_summary(@all); next };
                        my $cl = $cl[0];
                        is $cl->{trace_id}, $s->{trace_id}, "$with: CLIENT span in the same trace";
                        is $cl->{attrs}{'server.address'}, '127.0.0.1', "$with: CLIENT server.address";
                        is $cl->{attrs}{'server.port'}, $bport, "$with: CLIENT server.port (the $proto backend)";
                        is $cl->{attrs}{'http.response.status_code'}, 200, "$with: CLIENT status 200";
                        is $cl->{status_code}, '', "$with: CLIENT not an error";
                        ok $cl->{start} >= $s->{start} && $cl->{end} <= $s->{end}, "$with: CLIENT within SERVER";
                        my $extracts = $mode eq 'extract' || $mode eq 'propagate';
                        my $injects  = $mode eq 'inject'  || $mode eq 'propagate';
                        if ($with eq 'tp' && $extracts) {
                            is $s->{trace_id}, $T, "$with: trace continued";
                            is $s->{parent_span_id}, $P, "$with: SERVER parent = the client's span";
                        } else {
                            isnt $s->{trace_id}, $T, "$with: new trace";
                            is $s->{parent_span_id}, '', "$with: SERVER span has no parent";
                        }
                        my $flags = ($with eq 'tp' && $extracts) ? '01' : '03';
                        if ($injects) {
                            is $up_tp, "00-$s->{trace_id}-$cl->{span_id}-$flags",
                                "$with: $proto backend sees a traceparent naming the CLIENT span";
                            my ($t, $pid) = ($up_tp // '') =~ /^00-([0-9a-f]{32})-([0-9a-f]{16})-/;
                            is $t, $s->{trace_id}, "$with: backend's trace id = SERVER span's";
                            is $pid, $cl->{span_id}, "$with: backend's parent id = CLIENT span id";
                            my $kept = $with eq 'tp' && $mode eq 'propagate';
                            is $up_ts, ($kept ? $TS : ''), "$with: tracestate " . ($kept ? 'kept' : 'not sent');
                        } else {
                            is $up_tp, ($with eq 'tp' ? "00-$T-$P-01" : ''),
                                "$with: $proto backend sees the client's traceparent (or none)";
                            is $up_ts, ($with eq 'tp' ? $TS : ''), "$with: tracestate unchanged";
                        }
                    }
                };
            }
        }
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
        $ap->stop;
    };
}

done_testing;
