#!/usr/bin/perl
# The control and status API under apache2, once per MPM (prefork, worker,
# event): SetHandler spanprof-api in a <Location>, OtelApiWrite On|Off.
# GET gives JSON (configuration in force without credentials, one entry
# per child with its counters, which move with traffic) or Prometheus text
# (parsed by python3-prometheus-client's parser); POST turns profiling off
# in every child within a second (no more samples or profiles), and the
# rate changes (every slot, and the pprof period); DELETE; 403 without
# OtelApiWrite; 400 on bad input, 405 for other methods; a graceful restart
# brings the configured state back.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use JSON::PP;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;
use SpanProf::Profile qw(read_pprof_file pprof_meta pprof_files);

need_apache_module();

my $PY = '/usr/bin/python3';

my $CONF = burn_profiling_conf() . <<'EOF';
OtelServiceName apache-api
OtelTrace On
OtelExporterHeader X-Api-Key s3cr3t-h3ader
<Location /api>
    SetHandler spanprof-api
    OtelApiWrite On
    OtelTrace Off
</Location>
<Location /ro>
    SetHandler spanprof-api
    OtelTrace Off
</Location>
EOF

sub prom_families {
    my ($text, $tmp) = @_;
    open(my $fh, '>', $tmp) or die "$tmp: $!";
    print $fh $text;
    close $fh;
    my $json = `$PY -c '
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([{"name": f.name, "type": f.type, "doc": f.documentation,
    "samples": [[s.name, s.labels, s.value] for s in f.samples]}
    for f in text_string_to_metric_families(open(sys.argv[1]).read())]))
' $tmp 2>&1`;
    return ($? == 0 ? decode_json($json) : undef, $json);
}

for my $mpm (apache_mpms()) {
    subtest "$mpm: control and status API" => sub {
        my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'], servers => 2);
        my $port = $ap->port;
        my $out = $ap->prefix . '/out';

        my $api = sub {
            my ($method, $path, %o) = @_;
            my $r = http_request($method, $port, $path, %o);
            return ($r, scalar eval { decode_json($r->{content}) });
        };
        my $status = sub {
            my ($r, $j) = $api->('GET', '/api');
            die "GET /api: $r->{status} $r->{content}\n" unless $r->{status} == 200 && $j;
            return $j;
        };
        # every child listed now, and every child's slot listed, match
        # (prefork's exporter process has a slot of its own: it serves and
        # profiles nothing)
        my $children = sub { grep { !$_->{counters}{exporter_process} } @{ $_[0]{workers} } };
        my $wait = sub {
            my ($timeout, $cond) = @_;
            my $j;
            my $ok = wait_until($timeout, sub {
                $j = $status->();
                my %s = map { $_->{pid} => $_ } @{ $j->{workers} };
                my @kids = $ap->child_pids;
                return 0 if !@kids || grep { !$s{$_} } @kids;
                return !grep { !$cond->($_) } $children->($j);
            });
            return ($ok, $j);
        };
        my $sum = sub { my ($j, $c) = @_; my $t = 0; $t += $_->{counters}{$c} for @{ $j->{workers} }; $t };
        my $burn = sub { http_get($port, "/burn?fn=alpha&ms=20&n=$_") for 1 .. shift };

        my ($r, $j) = $api->('GET', '/api');
        is $r->{status}, 200, 'GET: 200';
        like $r->{headers}{'content-type'} // '', qr{^application/json}, 'application/json';
        ok $j, 'JSON' or return diag $r->{content};
        is $j->{server}, 'apache', 'server apache';
        is $j->{config}{endpoint}, "file://$out", 'endpoint in force';
        is $j->{config}{profiling_rate}, 200, 'configured rate';
        unlike $r->{content}, qr/s3cr3t/, 'no header value';
        my ($ok, $js) = $wait->(5, sub { $_[0]{profiling} && $_[0]{rate} == 200 });
        ok $ok, 'a slot per child, profiling at 200 Hz' or diag explain $js;

        $burn->(20);
        ($ok, $js) = $wait->(5, sub { 1 });
        ok wait_until(5, sub { $js = $status->(); $sum->($js, 'spans_exported') >= 20
                                && $sum->($js, 'samples_taken') > 0 && $sum->($js, 'profiles_exported') > 0 }),
            sprintf('counters moved: %d spans exported, %d samples, %d profiles',
                    map { $sum->($js, $_) } qw(spans_exported samples_taken profiles_exported));
        # prefork: one exporter process sends every child's spans; the
        # children count what they queued.
        my @ex = grep { $_->{counters}{exporter_process} } @{ $js->{workers} };
        if ($mpm eq 'prefork') {
            my @xp = $ap->exporter_pids;
            is scalar(@xp), 1, 'one exporter process (spanprof-export): ' . join(',', @xp);
            is join(',', map { $_->{pid} } @ex), join(',', @xp), 'its status slot, exporter_process 1';
            ok @ex && $ex[0]{counters}{spans_exported} >= 20, 'it exported the spans: '
                . (@ex ? $ex[0]{counters}{spans_exported} : 'none');
            is $sum->({ workers => [ $children->($js) ] }, 'spans_exported'), 0, 'the children none';
            # What the children queued, counted in the slots it reads.
            ok @ex && $ex[0]{counters}{spans_started} >= 20, 'the children\'s spans counted by it: '
                . (@ex ? $ex[0]{counters}{spans_started} : 'none');
            is $sum->({ workers => [ $children->($js) ] }, 'spans_started'), 0, 'not by the children';
            is $ex[0]{counters}{spans_dropped_process_killed}, 0, 'none lost with a killed child' if @ex;
        } else {
            is scalar(@ex), 0, 'no exporter process';
        }
        # Each child that profiled a request made its label records, a slab at a time.
        my $lr = $sum->($js, 'label_records');
        ok $lr >= 64 && $lr % 64 == 0, "label_records $lr: slabs of 64 made by the profiling children";
        is $sum->($js, 'label_records_failed'), 0, 'label_records_failed 0';
        # The span clock, chosen in the parent (common/base/clock.h): every
        # child reads the time-stamp counter where the kernel does, on the
        # scale the parent shared before the fork.
        my $tsc = tsc_clock_expected();
        is $_->{counters}{clock_tsc}, $tsc, "child $_->{pid}: clock_tsc $tsc" for @{ $js->{workers} };
        is $_->{counters}{clock_shared}, $tsc, "child $_->{pid}: clock_shared $tsc" for @{ $js->{workers} };
        ok $tsc ? $sum->($js, 'clock_rebases') > 0 : $sum->($js, 'clock_rebases') == 0,
            'clock_rebases ' . $sum->($js, 'clock_rebases');
        is $sum->($js, 'clock_rate_resets'), 0, 'clock_rate_resets 0';

        $r = http_get($port, '/api?format=prometheus');
        like $r->{headers}{'content-type'} // '', qr{^text/plain; version=0\.0\.4}, 'Prometheus content type';
        my ($fams, $err) = prom_families($r->{content}, $ap->prefix . '/metrics.txt');
        ok $fams, 'prometheus_client parses it' or diag $err;
        my %f = map { $_->{name} => $_ } @{ $fams || [] };
        is $f{spanprof_spans_exported}{type}, 'counter', 'spanprof_spans_exported counter';
        my $n = 0; $n += $_->[2] for @{ $f{spanprof_spans_exported}{samples} || [] };
        ok $n >= 20, "spanprof_spans_exported_total sums to $n";
        ok !grep({ keys %{ $_->[1] } != 1 || !$_->[1]{worker} } @{ $f{spanprof_samples_taken}{samples} || [] }),
            'one worker label per sample';

        # profiling off
        ($r, $j) = $api->('POST', '/api', content => '{"profiling": false}');
        is $r->{status}, 200, 'POST off: 200' or diag $r->{content};
        my $t0 = time;
        ($ok, $js) = $wait->(1.5, sub { !$_[0]{profiling} });
        ok $ok && time - $t0 <= 1.2, sprintf('every child off (%.2f s)', time - $t0) or diag explain $js;
        sleep 1.5;     # the profile under way may still be written
        my %files = map { $_ => 1 } pprof_files($out);
        my $before = $status->();
        $burn->(20);
        sleep 1.5;
        my $after = $status->();
        is $sum->($after, 'samples_taken'), $sum->($before, 'samples_taken'), 'no new samples';
        is $sum->($after, 'profiles_exported'), $sum->($before, 'profiles_exported'), 'no new profiles';
        is scalar(grep { !$files{$_} } pprof_files($out)), 0, 'no new pprof file';
        ok $sum->($after, 'spans_exported') > $sum->($before, 'spans_exported'), 'spans still exported';

        # back on, at 250 Hz
        ($r, $j) = $api->('PUT', '/api', content => '{"profiling": true, "rate": 250}');
        is $r->{status}, 200, 'PUT on, 250 Hz: 200';
        ($ok, $js) = $wait->(1.5, sub { $_[0]{profiling} && $_[0]{rate} == 250 });
        ok $ok, 'every child profiles at 250 Hz' or diag explain $js;
        my $t = time;
        my @new;
        ok wait_until(10, sub {
            $burn->(5);
            @new = grep { my ($ms) = m{/cpu-(\d+)-\d+\.pb\.gz$}; $ms / 1000 > $t + 0.05 } pprof_files($out);
            @new }), 'a profile begun after the change';
        is pprof_meta(read_pprof_file($_))->{period}, 4_000_000, "$_: period 4 ms" for @new;

        ($r, $j) = $api->('DELETE', '/api');
        is $r->{status}, 200, 'DELETE: 200';
        ($ok) = $wait->(1.5, sub { !$_[0]{profiling} });
        ok $ok, 'DELETE: every child off';

        my $gen = $status->()->{control}{generation};
        for my $m (qw(POST PUT DELETE)) {
            ($r, $j) = $api->($m, '/ro', content => '{"profiling": true}');
            is $r->{status}, 403, "/ro $m: 403";
            ok $j && $j->{error}, 'JSON error';
        }
        for my $body ('', '{', '{"rate": 0}', '{"profiling": 1}', '{"x": true}', '{"rate": 1' . ('0' x 5000) . '}') {
            ($r, $j) = $api->('POST', '/api', content => $body);
            is $r->{status}, 400, 'POST ' . substr($body, 0, 20) . ': 400';
            ok $j && $j->{error}, 'JSON error: ' . ($j ? $j->{error} : $r->{content});
        }
        is $status->()->{control}{generation}, $gen, 'refused writes changed nothing';
        ($r) = $api->('PATCH', '/api', content => '{}');
        is $r->{status}, 405, 'PATCH: 405';
        like $r->{headers}{allow} // '', qr/GET.*DELETE/, 'Allow';

        # graceful restart: configured state
        my @kids = $ap->graceful(20);
        ok @kids, 'graceful: new children ' . join(' ', @kids);
        $j = $status->();
        ok $j->{control}{profiling} && $j->{control}{rate} == 200, 'control back to on, 200 Hz';
        ($ok, $js) = $wait->(5, sub { $_[0]{profiling} && $_[0]{rate} == 200 });
        ok $ok, 'the new children profile at 200 Hz' or diag explain $js;
        # The parent let the old shared scale go with the old module, and
        # mapped a new one for the new children.
        $burn->(4);
        ($ok, $js) = $wait->(5, sub { $_[0]{counters}{clock_shared} == $tsc });
        ok $ok, "graceful: every new child clock_shared $tsc" or diag explain $js;

        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
        $ap->stop;
    };
}

done_testing;
