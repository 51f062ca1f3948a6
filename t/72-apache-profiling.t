#!/usr/bin/perl
# Profiling under apache2, once per MPM, with the file exporter (spans in
# traces.jsonl, gzip'd pprof profiles): the samples of a CPU-burning request
# (t/mod_burn, spanprof_apache_burn_alpha) carry its trace and span (>= 90%)
# and its span carries pyroscope.profile.id; a location with OtelProfiling
# Off leaves its samples unlabelled. Worker and event: concurrent alpha and
# beta burners on different threads of one child never carry each other's
# span. Event: content filters are labelled without spanprof's filter
# when httpd's own modules alone are loaded, and by it, before the
# resource filters, when a request's output is written on an unlabelled
# thread.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $CONF = burn_profiling_conf() . <<'EOF';
OtelServiceName apache-profiling
OtelTrace On
<Location /burn-off>
    SetHandler spanprof-burn
    OtelProfiling Off
</Location>
EOF

sub span_for {
    my ($spans, $query) = @_;
    my @s = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.query'} // '') eq $query } @$spans;
    return $s[0];
}

for my $mpm (apache_mpms()) {
    subtest "$mpm: a burning request's samples carry its span" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'], servers => 1);
        my $r = http_get($ap->port, '/burn?fn=alpha&ms=400&n=1');
        like $r->{content}, qr/^alpha 400 /, 'burned' or diag $r->{content};
        my $off = http_get($ap->port, '/burn-off?fn=beta&ms=200&n=2');
        like $off->{content}, qr/^beta 200 /, 'burned (profiling off)';
        # one keep-alive connection, both requests pipelined: the second
        # (not profiled) must not run with the first one's labels
        my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ap->port,
            Proto => 'tcp', Timeout => 10) or die "connect: $!";
        print $sock "GET /burn?fn=alpha&ms=200&n=3 HTTP/1.1\r\nHost: x\r\n\r\n"
            . "GET /burn-off?fn=beta&ms=200&n=4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        my $both = do { local $/; <$sock> } // '';
        close $sock;
        like $both, qr/alpha 200 .*beta 200 /s, 'pipelined requests answered';
        $ap->stop;
        my $out = $ap->prefix . '/out';
        my @spans = file_spans($out);
        my $s = span_for(\@spans, 'fn=alpha&ms=400&n=1');
        ok $s, 'span of the burning request' or return diag span_summary(@spans);
        is $s->{attrs}{'pyroscope.profile.id'}, $s->{span_id}, 'pyroscope.profile.id = span id';
        my $s3 = span_for(\@spans, 'fn=alpha&ms=200&n=3');
        ok $s3, 'span of the pipelined burning request' or return diag span_summary(@spans);
        my $so = span_for(\@spans, 'fn=beta&ms=200&n=2');
        ok $so && !exists $so->{attrs}{'pyroscope.profile.id'}, 'no pyroscope.profile.id with OtelProfiling Off';

        my @prof = pprof_profiles($out);
        ok @prof, scalar(@prof) . ' profile file(s)' or return diag $ap->error_log_tail(20);
        my @samples = map { @{ $_->{samples} } } @prof;
        my @alpha = grep { stack_has($_, 'spanprof_apache_burn_alpha') } @samples;
        my $n = 0; $n += $_->{count} for @alpha;
        ok $n >= 20, "$n samples in spanprof_apache_burn_alpha" or return diag explain \@samples;
        my %ok = ($s->{span_id} => $s->{trace_id}, $s3->{span_id} => $s3->{trace_id});
        my $own = 0; $own += $_->{count} for grep { $ok{ $_->{labels}{span_id} // '' } } @alpha;
        ok $own >= 0.9 * $n, "$own of $n carry their request's span";
        is scalar(grep { defined $_->{labels}{span_id} && ($ok{ $_->{labels}{span_id} } // '') ne ($_->{labels}{trace_id} // '') } @alpha), 0,
            'and its trace';
        my ($named) = grep { defined $_->{labels}{span_name} } @alpha;
        is $named->{labels}{span_name}, 'GET /burn', 'span_name label' if $named;

        my @beta = grep { stack_has($_, 'spanprof_apache_burn_beta') } @samples;
        my $nb = 0; $nb += $_->{count} for @beta;
        ok $nb >= 20, "$nb samples in spanprof_apache_burn_beta";
        is scalar(grep { defined $_->{labels}{span_id} } @beta), 0,
            'OtelProfiling Off (also right after a profiled request on the connection): no span'
            or diag explain [ grep { defined $_->{labels}{span_id} } @beta ];
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
    };

    next if $mpm eq 'prefork';

    subtest "$mpm: concurrent requests on threads of one child" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'],
            servers => 1, server_limit => 1, threads => 4);
        my (@res, %tids, %pids);
        for my $round (1 .. 3) {
            my @socks;
            for my $fn (qw(alpha beta)) {
                my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ap->port,
                    Proto => 'tcp', Timeout => 10) or die "connect: $!";
                print $sock "GET /burn?fn=$fn&ms=300&r=$round HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
                push @socks, [$fn, $sock];
            }
            for my $p (@socks) {
                my ($fn, $sock) = @$p;
                local $/;
                my $resp = <$sock> // '';
                close $sock;
                my ($pid, $tid) = $resp =~ /\r\n\r\n$fn 300 (\d+) (\d+)/;
                ok $tid, "round $round: $fn answered" or diag $resp;
                push @res, { fn => $fn, round => $round, pid => $pid, tid => $tid };
                $pids{$pid // 0} = 1;
                $tids{$round}{$fn} = $tid;
            }
            isnt $tids{$round}{alpha}, $tids{$round}{beta}, "round $round: different threads";
        }
        is scalar(keys %pids), 1, 'one child served them all';
        $ap->stop;

        my $out = $ap->prefix . '/out';
        my @spans = file_spans($out);
        my (%ids);
        for my $q (@res) {
            my $s = span_for(\@spans, "fn=$q->{fn}&ms=300&r=$q->{round}");
            ok $s, "span of $q->{fn} round $q->{round}" or next;
            $ids{ $q->{fn} }{ $s->{span_id} } = 1;
        }
        my @samples = map { @{ $_->{samples} } } pprof_profiles($out);
        for my $fn (qw(alpha beta)) {
            my $other = $fn eq 'alpha' ? 'beta' : 'alpha';
            my @mine = grep { stack_has($_, "spanprof_apache_burn_$fn") } @samples;
            my ($n, $own, $wrong) = (0, 0, 0);
            for my $x (@mine) {
                $n += $x->{count};
                my $sid = $x->{labels}{span_id} // '';
                $own += $x->{count} if $ids{$fn}{$sid};
                $wrong += $x->{count} if $ids{$other}{$sid};
            }
            ok $n >= 30, "$n samples in spanprof_apache_burn_$fn";
            is $wrong, 0, "none of them carries a span of a $other request";
            ok $own >= 0.9 * $n, "$own of $n carry a span of a $fn request";
        }
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
    };
}

# With httpd's modules known to spanprof alone (no_spawn: no CGI, no
# FastCGI, no burn module), no output filter of ours is added to a profiled
# request: its content filters run in its handler, on the thread the
# handler hook labelled. The samples of mod_deflate compressing a static
# file (in zlib's deflate()) carry the request's span. The child logs
# (debug) which way it decided; a module it does not know (the burn
# module) brings the filter back.
subtest 'event: a content filter of httpd alone, labelled without our filter' => sub {
    srand(29);
    my $body = join '', map { sprintf "%08d %s\n", $_, join('', map { sprintf '%04x', int rand 65536 } 1 .. 12) } 1 .. 100_000;
    my $ap = start_apache(mpm => 'event', no_spawn => 1, modules => ['deflate'], dirs => ['out'],
        loglevel => 'warn spanprof:debug', servers => 1, files => { 'htdocs/big.txt' => $body },
        conf => <<'EOF');
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 1
OtelProfilingRate 1000
OtelServiceName apache-profiling
OtelTrace On
OtelProfiling On
EnableSendfile Off
DeflateCompressionLevel 9
<Location /big.txt>
    SetOutputFilter DEFLATE
</Location>
EOF
    for my $n (1 .. 2) {
        my $r = http_get($ap->port, "/big.txt?n=$n", headers => { 'Accept-Encoding' => 'gzip' }, timeout => 60);
        is $r->{status}, 200, "compressed download $n";
        ok length($r->{content}) < 0.8 * length($body), 'compressed' or diag length $r->{content};
    }
    sleep 1.5;
    $ap->stop;
    like $ap->error_log, qr/spanprof: all loaded modules known to spanprof: .*no output filter/,
        'the child knows every loaded module' or diag $ap->error_log_tail(10);
    my $out = $ap->prefix . '/out';
    my @spans = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.path'} // '') eq '/big.txt' } file_spans($out);
    is scalar(@spans), 2, 'two spans' or return;
    my %ok = map { $_->{span_id} => $_->{trace_id} } @spans;
    my @samples = map { @{ $_->{samples} } } pprof_profiles($out);
    my @z = grep { stack_has($_, 'deflate') } @samples;
    my $n = 0; $n += $_->{count} for @z;
    ok $n >= 20, "$n samples in zlib's deflate()" or return diag explain [ map { $_->{stack} } @samples[0 .. 9] ];
    my $own = 0; $own += $_->{count} for grep { ($ok{ $_->{labels}{span_id} // '' } // '') eq ($_->{labels}{trace_id} // 'x') } @z;
    ok $own >= 0.9 * $n, "$own of $n carry their request's span and trace";

    my $ap2 = start_apache(mpm => 'event', no_spawn => 1, burn => 1, dirs => ['out'],
        loglevel => 'warn spanprof:debug', servers => 1, conf => burn_profiling_conf() . "OtelTrace On\n");
    http_get($ap2->port, '/burn?fn=alpha&ms=1');
    $ap2->stop;
    like $ap2->error_log, qr/spanprof: mod_spanprof_burn\.c is not one of the modules known to spanprof: .*labelled by a filter/,
        'a module it does not know: the filter is added' or diag $ap2->error_log_tail(10);
};

# A request's output written on a thread that did not run its handler (a
# handler that returns SUSPENDED and writes from an MPM callback, as
# mod_dialup's does; Debian's 2.4 build of mod_dialup sends only its first
# pulse, so the burn module's fn=offthread plays that thread: it clears
# the thread's label, otel_thread_ctx_v1, and then writes). With a module
# spanprof does not know loaded (the burn module), spanprof's filter labels
# the output's thread again, and first: before the resource filters
# (SSI's, mod_substitute's, the burn module's SPANPROF_BURN, which burns
# 300 ms in spanprof_apache_burn_filter()), not only before the
# content-set ones.
subtest 'event: output written unlabelled is labelled before every content filter' => sub {
    my $ap = start_apache(mpm => 'event', burn => 1, dirs => ['out'], servers => 1,
        conf => burn_profiling_conf() . <<'EOF');
OtelServiceName apache-profiling
OtelTrace On
<Location /offthread>
    SetHandler spanprof-burn
    SetOutputFilter SPANPROF_BURN
    OtelProfiling On
</Location>
EOF
    my $r = http_get($ap->port, '/offthread?fn=offthread&filterms=300');
    like $r->{content}, qr/^offthread /, 'answered' or diag $r->{content};
    sleep 1.5;
    $ap->stop;
    my $out = $ap->prefix . '/out';
    my @spans = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.path'} // '') eq '/offthread' } file_spans($out);
    is scalar(@spans), 1, 'its span' or return;
    my @samples = grep { stack_has($_, 'spanprof_apache_burn_filter') }
        map { @{ $_->{samples} } } pprof_profiles($out);
    my ($n, $own) = (0, 0);
    for my $x (@samples) {
        $n += $x->{count};
        $own += $x->{count} if ($x->{labels}{span_id} // '') eq $spans[0]{span_id}
            && ($x->{labels}{trace_id} // '') eq $spans[0]{trace_id};
    }
    ok $n >= 20, "$n samples in the resource filter";
    ok $own >= 0.9 * $n, "$own of $n carry the request's span";
    is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
};

done_testing;
