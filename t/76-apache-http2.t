#!/usr/bin/perl
# mod_http2 (h2c, prior knowledge) under the worker and event MPMs: streams
# multiplexed on one connection run on mod_http2's own worker threads, on
# secondary connections. Each stream still gets its SERVER span (protocol
# 2, the connection's client port), a traceparent sent on one stream is
# that stream's parent, a proxied stream passes its CLIENT span on to the
# backend, and the CPU samples of concurrent streams carry their own
# stream's span, never a sibling's.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $CONF = burn_profiling_conf() . <<'EOF';
OtelTrace On
OtelTraceContext propagate
Protocols h2c http/1.1
<Location /front>
    ProxyPass http://127.0.0.1:%%PORT2%%/burn
</Location>
EOF

my $TRACE  = '0af7651916cd43dd8448eb211c80319c';
my $PARENT = 'b7ad6b7169203331';

sub by_query {
    my ($spans, $kind, $query) = @_;
    my @s = grep { $_->{kind} eq $kind && ($_->{attrs}{'url.query'} // '') eq $query } @$spans;
    return $s[0];
}

for my $mpm (grep { $_ ne 'prefork' } apache_mpms()) {
    subtest "$mpm: h2c streams" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'],
            modules => ['http2'], servers => 1, server_limit => 1);
        my @streams = (
            [ 'alpha', 'fn=alpha&ms=300&n=1' ],
            [ 'beta',  'fn=beta&ms=300&n=2', [ traceparent => "00-$TRACE-$PARENT-01" ] ],
            [ 'alpha', 'fn=alpha&ms=300&n=3' ],
        );
        my ($r, $lport) = h2c_requests($ap->port,
            [ (map { [ "/burn?$_->[1]", @$_[ 2 .. $#$_ ] ] } @streams), '/front?fn=beta&ms=50&n=4' ],
            timeout => 15);
        my %tid;
        for my $i (0 .. $#streams) {
            my ($fn, $q) = @{ $streams[$i] };
            is $r->[$i]{status}, 200, "stream $q: 200";
            my ($tid) = $r->[$i]{body} =~ /^$fn 300 \d+ (\d+)$/m;
            ok $tid, "stream $q: burned" or diag explain $r->[$i];
            $tid{ $tid // '?' } = 1;
        }
        is $r->[3]{status}, 200, 'proxied stream: 200' or diag explain $r->[3], $ap->error_log_tail(10);
        like $r->[3]{body}, qr/^beta 50 /, 'proxied stream: the backend burned';
        # the premise: the streams ran at once, on more than one thread
        ok keys(%tid) >= 2, 'the streams ran on ' . keys(%tid) . ' threads';
        my $h1 = http_get($ap->port, '/burn?fn=alpha&ms=1&n=5');
        is $h1->{status}, 200, 'HTTP/1.1 on the same port';
        $ap->stop;

        my $out = $ap->prefix . '/out';
        my @spans = file_spans($out);
        my @s = map { by_query(\@spans, 'SPAN_KIND_SERVER', $_->[1]) } @streams;
        ok $s[$_], "SERVER span of stream $streams[$_][1]" or return diag span_summary(@spans) for 0 .. $#s;
        for my $x (@s) {
            is $x->{attrs}{'network.protocol.version'}, '2', "$x->{attrs}{'url.query'}: protocol 2";
            is $x->{attrs}{'client.port'}, $lport, "$x->{attrs}{'url.query'}: the h2 connection's port";
            is $x->{attrs}{'http.response.status_code'}, 200, "$x->{attrs}{'url.query'}: status";
            is $x->{attrs}{'pyroscope.profile.id'}, $x->{span_id}, "$x->{attrs}{'url.query'}: pyroscope.profile.id";
        }
        is $s[1]{trace_id}, $TRACE, "the stream's traceparent: its trace";
        is $s[1]{parent_span_id}, $PARENT, '... and its parent';
        isnt $s[0]{trace_id}, $TRACE, 'streams without traceparent start their own trace';
        isnt $s[0]{trace_id}, $s[2]{trace_id}, '... one each';
        my $h1s = by_query(\@spans, 'SPAN_KIND_SERVER', 'fn=alpha&ms=1&n=5');
        is $h1s && $h1s->{attrs}{'network.protocol.version'}, '1.1', 'the HTTP/1.1 request: protocol 1.1';

        my ($front) = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && $_->{attrs}{'url.path'} eq '/front' } @spans;
        my ($client) = grep { $_->{kind} eq 'SPAN_KIND_CLIENT' } @spans;
        my ($back) = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && $_->{attrs}{'url.path'} eq '/burn'
                            && ($_->{attrs}{'url.query'} // '') eq 'fn=beta&ms=50&n=4' } @spans;
        ok $front && $client && $back, 'proxied stream: front SERVER, CLIENT and backend SERVER spans'
            or return diag span_summary(@spans);
        is $front->{attrs}{'network.protocol.version'}, '2', 'front span: protocol 2';
        is $client->{parent_span_id}, $front->{span_id}, 'CLIENT span: child of the stream';
        is $back->{parent_span_id}, $client->{span_id}, 'backend: child of the CLIENT span (traceparent sent)';
        is $back->{trace_id}, $front->{trace_id}, 'backend: same trace';

        my @samples = map { @{ $_->{samples} } } pprof_profiles($out);
        # the HTTP/1.1 request burns alpha too (1 ms: now and then sampled)
        my %mine = (alpha => { map { $_->{span_id} => $_->{trace_id} } @s[0, 2], grep { defined } $h1s },
                    beta  => { $s[1]{span_id} => $s[1]{trace_id},
                               $back->{span_id} => $back->{trace_id} });
        for my $fn (qw(alpha beta)) {
            my ($n, $own, $wrong) = (0, 0, 0);
            for my $x (grep { stack_has($_, "spanprof_apache_burn_$fn") } @samples) {
                my $sid = $x->{labels}{span_id} // '';
                $n += $x->{count};
                if (exists $mine{$fn}{$sid} && $mine{$fn}{$sid} eq ($x->{labels}{trace_id} // '')) {
                    $own += $x->{count};
                } elsif ($sid ne '') {
                    $wrong += $x->{count};
                    my ($whose) = grep { $_->{span_id} eq $sid } @spans;
                    diag "$fn sample labelled " . ($whose ? "$whose->{kind} $whose->{name} ?"
                        . ($whose->{attrs}{'url.query'} // '') : "span $sid") . ': '
                        . join(' < ', @{ $x->{stack} }[0 .. ($#{ $x->{stack} } < 12 ? $#{ $x->{stack} } : 12)]);
                }
            }
            ok $n >= 30, "$n samples in spanprof_apache_burn_$fn";
            ok $own >= 0.9 * $n, "$fn: $own of $n carry their own stream's span";
            is $wrong, 0, "$fn: none carries another request's span";
        }
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
    };
}

# The labels of h2 workers when their streams' pools are destroyed on the
# primary connection's thread: many short streams sampled at the highest
# rate, on workers that go idle and exit between rounds, then the child's
# shutdown. A worker left pointing at a freed request's record crashed the
# child in its SIGPROF handler here (before records were kept in never-freed
# memory, see common/profile/record_pool.h).
(my $STRESS = burn_profiling_conf() . <<'EOF') =~ s/OtelProfilingRate 200/OtelProfilingRate 1000/;
OtelTrace On
Protocols h2c http/1.1
H2MinWorkers 1
H2MaxWorkers 24
H2MaxWorkerIdleSeconds 1
EOF
subtest 'event: many short h2 streams, workers exiting between rounds' => sub {
    my $ap = start_apache(mpm => 'event', conf => $STRESS, burn => 1, dirs => ['out'],
        modules => ['http2'], servers => 1, server_limit => 1);
    for my $round (1 .. 3) {
        my @paths = map { "/burn?fn=alpha&ms=2&n=$round.$_" } 1 .. 40;
        my ($r) = h2c_requests($ap->port, \@paths, timeout => 15);
        is scalar(grep { $_->{status} == 200 } @$r), 40, "round $round: 40 streams served";
        sleep 1.5 if $round < 3;
    }
    $ap->stop;
    is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
};

done_testing;
