#!/usr/bin/perl
# Profiling over the workers' life: two workers sampling at 1000 Hz under
# concurrent load, a reload in the middle (old workers flush their last
# profile when they exit, new ones start their own sampler), then quit; no
# request fails (SIGPROF interrupting system calls), nothing alarming in the
# error log, memory bounded. Pyroscope export (multipart pprof to
# {URL}/ingest). Configuration errors of the otel_profiling* directives.
#
# Uses the test-only module t/ngx_burn (spanprof_burn).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use POSIX ();
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $ALPHA = 'spanprof_burn_alpha';

sub url_decode { my $s = shift; $s =~ tr/+/ /; $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge; return $s }

# error log lines that tell of trouble; the master's notices about the
# signals it is sent (reload, quit, SIGCHLD) are normal
sub alarming_lines {
    my ($ngx) = @_;
    return grep {
        /exited on|\[(?:alert|crit|emerg)\]/
            || (/signal/ && !/\[notice\] \d+#\d+: (?:signal \d+ \(SIG\w+\) received|signal process started)/)
    } split /\n/, $ngx->error_log;
}

# ---------------------------------------------------------------------------
# 7. load + reload + quit
# ---------------------------------------------------------------------------
subtest 'two workers under load, reload, quit' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, burn => 1, workers => 2, conf => <<'EOF');
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name prof-lifecycle;
otel_profiling_rate 1000;
otel_profiling_interval 500ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /alpha/ { spanprof_burn alpha 2; }
    location /plain/ { return 200 "plain\n"; }
}
EOF
    my @old = $ngx->worker_pids;
    is scalar @old, 2, 'two workers: ' . join(' ', @old);

    my $dir = tempdir('spanprof-62-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    pipe(my $bar_r, my $bar_w) or die "pipe: $!";
    my $port = $ngx->port;
    my @kids;
    my $total = 300;
    for my $c (1 .. 8) {
        my $n = int($total / 8) + ($c <= $total % 8 ? 1 : 0);
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if (!$pid) {
            close $bar_w;
            my $x = <$bar_r>;
            my $ok = eval {
                open(my $out, '>', "$dir/c$c.res") or die "$dir/c$c.res: $!";
                $out->autoflush(1);
                for my $k (1 .. $n) {
                    if ($k == int($n / 2) + 1) {
                        # half done: the parent reloads while we go on
                        if (open(my $h, '>', "$dir/half$c")) { close $h }
                        my $until = time + 30;
                        sleep 0.01 while !-e "$dir/reloading" && time < $until;
                    }
                    if ($k == int(3 * $n / 4) + 1) {
                        # the last quarter once the new workers are up, so
                        # they serve some (the second quarter can finish
                        # before the old workers even get the signal)
                        my $until = time + 30;
                        sleep 0.01 while !-e "$dir/reloaded" && time < $until;
                    }
                    my $path = $k % 2 ? "/alpha/$c-$k" : "/plain/$c-$k";
                    my $r = http_get($port, $path, timeout => 10);
                    my $err = $r->{status} == 599 ? ' ' . ($r->{content} =~ s/\s+/ /gr) : '';
                    print $out "$r->{status} $path$err\n";
                }
                close $out;
                1;
            };
            if (!$ok && open(my $e, '>', "$dir/c$c.error")) { print $e $@; close $e }
            POSIX::_exit(0);
        }
        push @kids, $pid;
    }
    close $bar_r;
    my $t0 = time;
    close $bar_w;
    my $half = wait_until(30, sub { 8 == grep { -e "$dir/half$_" } 1 .. 8 });
    ok $half, 'all clients half done';
    if (open(my $h, '>', "$dir/reloading")) { close $h }
    my @new = eval { $ngx->reload };
    ok @new >= 2, 'reload: new workers ' . join(' ', @new) or diag $@;
    if (open(my $h, '>', "$dir/reloaded")) { close $h }
    for my $k (@kids) {
        my $dl = time + 60;
        sleep 0.02 while waitpid($k, POSIX::WNOHANG()) == 0 && time < $dl;
        if (kill 0, $k) { kill 'KILL', $k; waitpid($k, 0) }
    }
    note sprintf('%d requests in %.2f s', $total, time - $t0);
    diag "client error: " . SpanProf::Test::_slurp($_) for glob("$dir/c*.error");

    my @lines = map { split /\n/, SpanProf::Test::_slurp($_) // '' } glob("$dir/c*.res");
    is scalar @lines, $total, "$total requests made";
    my @failed = grep { !/^200 / } @lines;
    is scalar @failed, 0, 'all answered 200' or diag join "\n", @failed[0 .. ($#failed < 19 ? $#failed : 19)];

    # the old workers are gone, the new ones are small
    my $gone = wait_until(15, sub { !grep { kill 0, $_ } @old });
    ok $gone, 'the old workers exited after the reload';
    for my $w ($ngx->worker_pids) {
        my $rss = $ngx->rss_kb($w);
        ok defined $rss && $rss < 128 * 1024, "worker $w: VmRSS " . ($rss // '?') . ' kB < 128 MB';
    }
    # spans of the requests, before quit
    my @spans = wait_for_spans($recv, $total, 20,
        filter => sub { $_[0]{kind} eq 'SPAN_KIND_SERVER' && ($_[0]{attrs}{'url.path'} // '') =~ m{^/(?:alpha|plain)/} });
    is scalar @spans, $total, "$total SERVER spans received";

    my $took = $ngx->quit(30);
    ok $took < 20, sprintf('quit in %.2f s', $took);

    my @samples = collect_otlp_samples($recv);
    my %by_pid;
    $by_pid{ $_->{resource}{'process.pid'} // '?' } += $_->{count} for @samples;
    my %is_old = map { $_ => 1 } @old;
    my %is_new = map { $_ => 1 } @new;
    my @old_seen = grep { $is_old{$_} } keys %by_pid;
    my @new_seen = grep { $is_new{$_} } keys %by_pid;
    my $pids = join(', ', map { "$_: $by_pid{$_}" . ($is_old{$_} ? ' (old)' : $is_new{$_} ? ' (new)' : ' (?)') } sort keys %by_pid);
    ok @old_seen >= 1, "profiles from old workers (weight by process.pid: $pids)";
    ok @new_seen >= 1, 'profiles from new workers';
    my @stranger = grep { !$is_old{$_} && !$is_new{$_} } keys %by_pid;
    is scalar @stranger, 0, 'every process.pid is a worker of this nginx' or diag $pids;

    my %sid = map { $_->{span_id} => $_ } @spans;
    my @unknown = grep { sample_span($_) ne '' && !$sid{ sample_span($_) } } @samples;
    is total(@unknown), 0, 'every linked span is a SERVER span received'
        or diag stacks_summary(\@unknown, 10);
    my @alpha = grep { has_frame($_, $ALPHA) } @samples;
    my @alpha_ok = grep { (($sid{ sample_span($_) } || {})->{attrs}{'url.path'} // '') =~ m{^/alpha/} } @alpha;
    ok total(@alpha) > 0 && total(@alpha_ok) / total(@alpha) >= 0.9,
        sprintf('%d of %d weight with %s carries an /alpha span (>= 90%%)', total(@alpha_ok), total(@alpha), $ALPHA)
        or diag stacks_summary(\@samples, 15);
    my @plain_alpha = grep { (($sid{ sample_span($_) } || {})->{attrs}{'url.path'} // '') =~ m{^/plain/} } @alpha;
    is total(@plain_alpha), 0, "no sample with $ALPHA carries a /plain span"
        or diag stacks_summary(\@plain_alpha, 10);

    my @bad = alarming_lines($ngx);
    is scalar @bad, 0, 'no "signal", "exited on", alert, crit lines in the error log'
        or diag join "\n", @bad;
    my @eintr = grep { /Interrupted system call/ } split /\n/, $ngx->error_log;
    is scalar @eintr, 0, 'no "Interrupted system call" in the error log'
        or diag join "\n", @eintr[0 .. ($#eintr < 9 ? $#eintr : 9)];
    my @stopped = grep { /spanprof: exporter stopped/ } split /\n/, $ngx->error_log;
    ok @stopped >= 4, scalar(@stopped) . ' workers (2 old, 2 new) logged their exporter stop';
    diag join "\n", @stopped unless Test::More->builder->is_passing;
    $ngx->stop;
    $recv->stop;
};

# ---------------------------------------------------------------------------
# 8. Pyroscope
# ---------------------------------------------------------------------------
sub pyroscope_check {
    my ($with_exporter) = @_;
    my $recv = start_receiver();
    my $exporter = $with_exporter ? "otel_exporter { endpoint %%RECEIVER%%/otlp; protocol http/protobuf; interval 100ms; }\n" : '';
    my $conf = $exporter . <<'EOF';
otel_service_name pyro-svc;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
otel_profiling_pyroscope %%RECEIVER%%/pyro/;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    add_header X-Trace-Id $otel_trace_id always;
    add_header X-Span-Id $otel_span_id always;
    location /alpha/ { spanprof_burn alpha 200; }
}
EOF
    # otel_trace needs otel_exporter
    $conf =~ s/^\s*otel_trace on;\n//m unless $with_exporter;
    my $ngx = start_nginx(receiver => $recv, burn => 1, conf => $conf);
    my $t0 = time;
    my $r = http_get($ngx->port, '/alpha/p');
    is $r->{status}, 200, '/alpha answered 200';
    my $sid = $r->{headers}{'x-span-id'} // '';
    like $sid, qr/^[0-9a-f]{16}$/, 'X-Span-Id';

    my @ingest;
    my $got = wait_until(8, sub {
        @ingest = grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests;
        return @ingest > 0;
    });
    my @sp = $ngx->spanprof_lines;
    ok !grep({ /\[(?:alert|crit|emerg)\]/ } @sp), 'no alert from the module' or diag join "\n", @sp;
    ok $got, 'a request to {URL}/ingest arrived' or return diag $recv->summary;
    # the rest of the samples: the interval's end
    $ngx->quit(15);
    @ingest = grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests;
    my @other = grep { $_->{path} !~ m{^/pyro/ingest\?} } $recv->requests;
    if ($with_exporter) {
        my ($span) = grep { $_->{span_id} eq $sid } collect_spans($recv);
        ok $span, 'the span arrived at {endpoint}/v1/traces' or diag $recv->summary;
        is $span->{attrs}{'pyroscope.profile.id'}, $sid, '... with pyroscope.profile.id' if $span;
        ok scalar(grep { $_->{path} eq '/otlp/v1development/profiles' } @other), 'OTLP profiles too';
    } else {
        is scalar @other, 0, 'nothing else was sent (no otel_exporter)' or diag $recv->summary;
    }

    my (@samples, $boundary_seen);
    for my $q (@ingest) {
        my $d = "request #$q->{seq}";
        is $q->{method}, 'POST', "$d: POST";
        my ($query) = $q->{path} =~ /\?(.*)$/;
        my %qp = map { my ($k, $v) = split /=/, $_, 2; (url_decode($k) => url_decode($v // '')) } split /&/, $query;
        like $qp{name} // '', qr/pyro-svc/, "$d: name= holds the service name ($qp{name})";
        is $qp{name}, 'pyro-svc{}', "$d: name=<service>{} (no series labels configured; Pyroscope adds service_name)";
        like $qp{from} // '', qr/^\d+$/, "$d: from= is a number";
        like $qp{until} // '', qr/^\d+$/, "$d: until= is a number";
        ok $qp{from} <= $qp{until}, "$d: from <= until";
        ok $qp{from} >= int($t0) - 5 && $qp{until} <= time + 5, "$d: from/until are unix seconds of the test";
        is $qp{format}, 'pprof', "$d: format=pprof";
        is $qp{spyName}, 'spanprof', "$d: spyName=spanprof";
        my $ct = $q->{headers}{'content-type'} // '';
        my ($b) = $ct =~ m{^multipart/form-data;\s*boundary="?([^";]+)"?$}i;
        ok $b, "$d: Content-Type multipart/form-data with a boundary ($ct)" or next;
        ok !$q->{raw_encoding}, "$d: no Content-Encoding on the form";
        my @parts = multipart_parts($q->{body}, $b);
        my @errs = grep { $_->{error} } @parts;
        is scalar @errs, 0, "$d: well-formed multipart body" or diag explain \@errs;
        my @prof = grep { ($_->{name} // '') eq 'profile' } @parts;
        is scalar @prof, 1, "$d: one part named \"profile\"" or next;
        my $bytes = $prof[0]{content};
        is substr($bytes, 0, 2), "\x1f\x8b", "$d: the part is gzip'd";
        my $plain;
        ok gunzip(\$bytes => \$plain), "$d: it gunzips" or diag $GunzipError;
        my $p = eval { decode_pprof($plain) };
        ok $p, "$d: and decodes as perftools.profiles.Profile" or diag $@;
        push @samples, pprof_samples($p) if $p;
    }
    my @alpha = grep { has_frame($_, $ALPHA) } @samples;
    ok total(@alpha) >= 50, "weight with $ALPHA: " . total(@alpha) . ' (>= 50 for 200 ms)'
        or diag stacks_summary(\@samples, 15);
    my @lab = grep { ($_->{labels}{span_id} // '') eq $sid
        && ($_->{labels}{span_name} // '') eq 'GET /alpha/' } @alpha;
    ok total(@alpha) && total(@lab) / total(@alpha) >= 0.9,
        total(@lab) . ' of ' . total(@alpha) . ' carry the labels span_id, span_name "GET /alpha/" (>= 90%)'
        or diag stacks_summary(\@samples, 15);
    # Pyroscope makes every sample label but span_id a series label
    my @tid = grep { exists $_->{labels}{trace_id} } @samples;
    is scalar @tid, 0, 'no sample carries trace_id (one series per trace in Pyroscope)';
    is scalar(alarming_lines($ngx)), 0, 'no alarming error log lines' or diag join "\n", alarming_lines($ngx);
    $ngx->stop;
    $recv->stop;
}

subtest 'Pyroscope beside otel_exporter: multipart pprof to {URL}/ingest' => sub { pyroscope_check(1) };
subtest 'Pyroscope only (no otel_exporter)' => sub { pyroscope_check(0) };

# ---------------------------------------------------------------------------
# 9. configuration errors
# ---------------------------------------------------------------------------
my $EXPORTER = "otel_exporter { endpoint http://127.0.0.1:4318; protocol http/protobuf; }\n";
my $SERVER = <<'EOF';
server {
    listen 127.0.0.1:%%PORT%%;
    otel_profiling on;
    location / { return 204; }
}
EOF
my @bad = (
    ['otel_profiling_rate 0',        "${EXPORTER}otel_profiling_rate 0;\n$SERVER",        qr/otel_profiling_rate 0;/, qr/between 1 and 1000/],
    ['otel_profiling_rate 5000',     "${EXPORTER}otel_profiling_rate 5000;\n$SERVER",     qr/otel_profiling_rate 5000;/, qr/between 1 and 1000/],
    ['otel_profiling_max_depth 0',   "${EXPORTER}otel_profiling_max_depth 0;\n$SERVER",   qr/otel_profiling_max_depth 0;/, qr/between 1 and \d+/],
    ['otel_profiling_interval abc',  "${EXPORTER}otel_profiling_interval abc;\n$SERVER",  qr/otel_profiling_interval abc;/, qr/otel_profiling_interval/],
    ['otel_profiling_pyroscope ftp', "${EXPORTER}otel_profiling_pyroscope ftp://x;\n$SERVER", qr/otel_profiling_pyroscope ftp:/, qr{ftp://x}],
    ['otel_profiling maybe', $EXPORTER . <<'EOF', qr/otel_profiling maybe;/, qr/maybe|"on" or "off"/],
server {
    listen 127.0.0.1:%%PORT%%;
    location / {
        otel_profiling maybe;
        return 204;
    }
}
EOF
);
for my $c (@bad) {
    my ($name, $conf, $re, $msg) = @$c;
    subtest "config error: $name" => sub {
        my ($rc, $out, $path, $text) = nginx_t($conf);
        isnt $rc, 0, 'nginx -t fails';
        my $line = conf_line($text, $re);
        ok $line, "the bad directive is on line " . ($line // '?');
        like $out, qr/\Q$path\E:$line\b/, "error points to nginx.conf:$line" or diag $out;
        like $out, $msg, "the message says what is wrong ($msg)" or diag $out;
        unlike $out, qr/test is successful/, 'not successful';
    };
}
subtest 'config error: otel_profiling on without otel_exporter or otel_profiling_pyroscope' => sub {
    my ($rc, $out) = nginx_t($SERVER);
    isnt $rc, 0, 'nginx -t fails';
    like $out, qr/otel_profiling/, 'the message names otel_profiling' or diag $out;
    unlike $out, qr/test is successful/, 'not successful';
};
subtest 'valid: the bounds of the profiling directives' => sub {
    for my $v (['otel_profiling_rate 1;', 'otel_profiling_max_depth 1;', 'otel_profiling_interval 100ms;'],
               ['otel_profiling_rate 1000;', 'otel_profiling_max_depth 64;', 'otel_profiling_interval 1m;',
                'otel_profiling_pyroscope https://pyroscope.example:4040/;'])
    {
        my ($rc, $out) = nginx_t($EXPORTER . join("\n", @$v) . "\n$SERVER");
        is $rc, 0, join(' ', @$v) . ': nginx -t passes' or diag $out;
    }
    my ($rc, $out) = nginx_t("otel_profiling_pyroscope http://127.0.0.1:4040;\n$SERVER");
    is $rc, 0, 'otel_profiling_pyroscope alone (no otel_exporter) passes' or diag $out;
};

done_testing;
