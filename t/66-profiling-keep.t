#!/usr/bin/perl
# Conditional retention of profile labels (otel_profiling_keep /
# OtelProfilingKeep) and a per-request choice of profiling (otel_profiling
# $variable / OtelProfiling expr=), against a real nginx (OTLP profiles) and
# a real Apache under each MPM (pprof files):
#   - with `keep slow=100ms`, a slow burning request's samples carry its
#     span and its SERVER span has pyroscope.profile.id; fast burning
#     requests' samples are in the profile WITHOUT labels (the CPU picture
#     stays complete) and their spans have no pyroscope.profile.id;
#   - `errors` keeps a 500 and not a 200; `cpu=` keeps a CPU-heavy request
#     and not a light one;
#   - `$http_x_profile` (`expr=%{HTTP:X-Profile}`) chooses the profiled
#     requests: "1" is, "0", "off" and none are not;
#   - a request running across interval ends is labelled in a profile
#     exported after it ended, none exported while it ran holds its samples;
#   - bad values are refused by nginx -t / apache2 -t at file:line.
# Uses the burn modules t/ngx_burn and t/mod_burn.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;
use SpanProf::Apache;

need_module();
need_burn_module();

my $ALPHA = 'spanprof_burn_alpha';
my $BETA  = 'spanprof_burn_beta';

my $SERVER = <<'EOF';
otel_service_name prof-keep;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    otel_profiling_keep slow=100ms;
    add_header X-Span-Id $otel_span_id always;
    location /slow    { spanprof_burn alpha 250; }
    location /fast    { spanprof_burn beta 8; }
    location /err     { otel_profiling_keep errors; spanprof_burn alpha 40; spanprof_burn_status 500; }
    location /err-ok  { otel_profiling_keep errors; spanprof_burn beta 40; }
    location /cpu     { otel_profiling_keep cpu=50ms; spanprof_burn alpha 120 6; }
    location /cpu-low { otel_profiling_keep cpu=50ms; spanprof_burn beta 20; }
    location /hdr     { otel_profiling $http_x_profile; otel_profiling_keep all; spanprof_burn alpha 60; }
    location /long    { spanprof_burn alpha 900 45; }
    location /slow-nt { otel_trace off; spanprof_burn alpha 250; }
    location /tick    { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
    location /        { return 404; }
}
EOF

sub linked { my ($samples, $sid) = @_; return grep { sample_span($_) eq $sid } @$samples }

# ---------------------------------------------------------------------------
# nginx, OTLP profiles
# ---------------------------------------------------------------------------
my $recv = start_receiver();
my $ngx  = start_nginx(receiver => $recv, burn => 1,
    conf => "otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }\n$SERVER");

my %r;
$r{slow}    = http_get($ngx->port, '/slow');
$r{"fast$_"} = http_get($ngx->port, '/fast') for 1 .. 4;
$r{err}     = http_get($ngx->port, '/err');
$r{err_ok}  = http_get($ngx->port, '/err-ok');
$r{cpu}     = http_get($ngx->port, '/cpu');
$r{cpu_low} = http_get($ngx->port, '/cpu-low');
$r{hdr1}    = http_get($ngx->port, '/hdr', headers => { 'X-Profile' => '1' });
$r{hdr0}    = http_get($ngx->port, '/hdr', headers => { 'X-Profile' => '0' });
$r{hdroff}  = http_get($ngx->port, '/hdr', headers => { 'X-Profile' => 'off' });
$r{hdrnone} = http_get($ngx->port, '/hdr');
$r{long}    = http_get($ngx->port, '/long');
my $slow_nt = http_get($ngx->port, '/slow-nt');     # not traced: no span
my $t_end = time;
my ($covered, @samples) = wait_otlp_covering($recv, $t_end, 15,
    poke => sub { http_get($ngx->port, '/tick') });
my @spans = server_spans(sync_spans($recv, $ngx->port));
my %span = map { $_->{span_id} => $_ } @spans;
my %sid = map { $_ => ($r{$_}{headers}{'x-span-id'} // '') } keys %r;
my %names = map { $_->{span_id} => "$_->{name} $_->{attrs}{'url.path'}" } @spans;
my $diag = sub { stacks_summary(\@samples, 20, names => \%names) };

subtest 'nginx: requests answered, profiles arrived' => sub {
    is $r{err}{status}, 500, '/err answered 500';
    is $r{$_}{status}, 200, "$_ answered 200" for grep { $_ ne 'err' } sort keys %r;
    ok $covered, 'an OTLP profile covering the end of the requests arrived' or diag $recv->summary;
    ok $span{ $sid{$_} }, "SERVER span of $_" for sort keys %r;
};

# kept: its samples carry its span, the span names its profile
sub kept {
    my ($k, $min) = @_;
    my $s = $span{ $sid{$k} } or return fail("no span for $k");
    my $w = total(linked(\@samples, $sid{$k}));
    ok $w >= $min, "$k: $w samples carry its span (>= $min)" or diag $diag->();
    is $s->{attrs}{'pyroscope.profile.id'}, $sid{$k}, "$k: its span has pyroscope.profile.id";
}

# not kept: no sample carries its span, no profile id
sub not_kept {
    my ($k) = @_;
    my $s = $span{ $sid{$k} } or return fail("no span for $k");
    my $w = total(linked(\@samples, $sid{$k}));
    is $w, 0, "$k: no sample carries its span" or diag $diag->();
    ok !exists $s->{attrs}{'pyroscope.profile.id'}, "$k: no pyroscope.profile.id"
        or diag span_summary($s);
}

# The rule is the span's own wall duration: on a loaded machine a "fast"
# request may well last 100 ms; it must then be kept.
sub ms { my ($s) = @_; return ($s->{end} - $s->{start}) / 1e6 }

# A request that is not traced ends with the kernel tick's time, not the
# precise clock (keep_rules.h); nginx's cached time would not have moved
# while its handler burnt 250 ms, and the request would not be kept.
subtest 'nginx: keep slow=100ms, a request that is not traced' => sub {
    is $slow_nt->{status}, 200, '/slow-nt answered 200';
    my $id = $slow_nt->{headers}{'x-span-id'} // '';
    like $id, qr/^[0-9a-f]{16}$/, "its span id ($id)";
    ok !$span{$id}, 'no span of it was exported';
    my $w = total(linked(\@samples, $id));
    ok $w >= 80, "its samples keep their labels: $w (>= 80 of its 250 ms)" or diag $diag->();
};

subtest 'nginx: keep slow=100ms' => sub {
    kept('slow', 80);
    my (%slow_fast, $fast);
    for my $k (map { "fast$_" } 1 .. 4) {
        my $s = $span{ $sid{$k} } or next;
        if (ms($s) >= 100) {
            note sprintf '%s lasted %.1f ms: kept', $k, ms($s);
            kept($k, 1);
            $slow_fast{ $sid{$k} } = 1;
        } else {
            not_kept($k);
            $fast++;
        }
    }
    ok $fast >= 2, ($fast // 0) . ' of the 4 fast requests lasted under 100 ms (>= 2)';
    # the fast requests' CPU is in the profile, unlabelled
    my @beta = grep { has_frame($_, $BETA) } @samples;
    my @beta_labelled = grep { sample_span($_) ne '' && !$slow_fast{ sample_span($_) } } @beta;
    ok total(@beta) >= 50, 'samples with ' . $BETA . ' on the stack: ' . total(@beta)
        . ' (>= 50 of ~92 ms)' or diag $diag->();
    is total(@beta_labelled), 0, 'none of them carries a span (fast, or not an error, or light)'
        or diag stacks_summary(\@beta_labelled, 10, names => \%names);
};

subtest 'nginx: keep errors, keep cpu=50ms' => sub {
    kept('err', 10);
    not_kept('err_ok');
    kept('cpu', 40);
    not_kept('cpu_low');
};

subtest 'nginx: otel_profiling $http_x_profile' => sub {
    kept('hdr1', 20);
    not_kept($_) for qw(hdr0 hdroff hdrnone);
    my @alpha_unlabelled = grep { has_frame($_, $ALPHA) && sample_span($_) eq '' } @samples;
    ok total(@alpha_unlabelled) >= 60, 'the unprofiled requests burned unlabelled: '
        . total(@alpha_unlabelled) . ' samples (>= 60 of ~180 ms)' or diag $diag->();
};

subtest 'nginx: a request across interval ends is labelled in a later profile' => sub {
    my $s = $span{ $sid{long} } or return fail('no span of /long');
    kept('long', 400);
    # interval ends passed while it ran (300 ms each, 900 ms of CPU): its
    # samples waited for its end, then went out together
    my @l = linked(\@samples, $sid{long});
    my @early = grep { $_->{profile}{time_unix_nano} < $s->{start} + 300e6 } @l;
    is total(@early), 0, 'no sample of /long is in a profile that started before an interval '
        . 'end passed it' or diag join ' ', map { "$_->{profile}{time_unix_nano}" } @early;
    my @late = grep { my $st = $_->{profile}{time_unix_nano};
                      grep { $_ < $st } @{ $_->{timestamps} } } linked(\@samples, $sid{long});
    ok total(@late) >= 200, total(@late) . ' samples of /long taken in an earlier interval went '
        . 'out labelled in a later profile (>= 200)' or diag $diag->();
    my @ts = map { @{ $_->{timestamps} } } linked(\@samples, $sid{long});
    my @outside = grep { $_ < $s->{start} - 2e6 || $_ > $s->{end} + 2e6 } @ts;
    is scalar @outside, 0, 'their timestamps lie inside the span';
};

is scalar($ngx->crash_lines), 0, 'nginx: no crash' or diag join "\n", $ngx->crash_lines;
$ngx->stop;
$recv->stop;

# ---------------------------------------------------------------------------
# nginx -t
# ---------------------------------------------------------------------------
my $EXP = "otel_exporter { endpoint http://127.0.0.1:4318; protocol http/protobuf; }\n";
for my $c (
    ['otel_profiling_keep slow=abc', qr/invalid time in "slow=abc"/],
    ['otel_profiling_keep all errors', qr/"all" cannot be combined/],
    ['otel_profiling_keep errors errors', qr/"errors" is given twice/],
    ['otel_profiling_keep fast', qr/unknown condition "fast"/],
    ['otel_profiling_keep cpu=10q', qr/invalid time in "cpu=10q"/],
    ['otel_profiling maybe', qr/takes "on", "off" or a value with variables/],
) {
    my ($d, $why) = @$c;
    subtest "nginx -t: $d" => sub {
        my ($rc, $out, $path, $text) = nginx_t("$EXP server {\n    listen 127.0.0.1:%%PORT%%;\n"
            . "    otel_profiling on;\n    location / {\n        $d;\n        return 204;\n    }\n}\n");
        isnt $rc, 0, 'nginx -t fails';
        my $line = conf_line($text, qr/\Q$d\E;/);
        like $out, qr/\Q$path\E:$line\b/, "error points to nginx.conf:$line" or diag $out;
        like $out, $why, 'reason' or diag $out;
    };
}
{
    my ($rc, $out) = nginx_t("$EXP server {\n    listen 127.0.0.1:%%PORT%%;\n    otel_profiling \$http_x_profile;\n"
        . "    otel_profiling_keep slow=100ms errors cpu=20ms;\n    location / { otel_profiling_keep all; return 204; }\n}\n");
    is $rc, 0, 'nginx -t: valid otel_profiling $var and otel_profiling_keep pass' or diag $out;
}

# ---------------------------------------------------------------------------
# Apache, pprof files, each MPM
# ---------------------------------------------------------------------------
SKIP: {
    skip 'the Apache module is not built', 1 unless -f apache_module_path() || $ENV{SPANPROF_REQUIRE_MODULE};
    need_apache_module();

    my $CONF = burn_profiling_conf() . <<'EOF';
OtelServiceName apache-keep
OtelTrace On
OtelProfilingKeep slow=100ms
<Location /errs>
    SetHandler spanprof-burn
    OtelProfiling On
    OtelProfilingKeep errors
</Location>
<Location /cpu>
    SetHandler spanprof-burn
    OtelProfiling On
    OtelProfilingKeep cpu=50ms
</Location>
<Location /hdr>
    SetHandler spanprof-burn
    OtelProfiling expr=%{HTTP:X-Profile}
    OtelProfilingKeep all
</Location>
EOF
    my @req = (
        [slow  => '/burn?fn=alpha&ms=250&n=1', 1, 40],
        (map { ["fast$_" => "/burn?fn=beta&ms=8&n=f$_", 0] } 1 .. 4),
        [err   => '/errs?fn=alpha&ms=40&status=500&n=e', 1, 4],
        [errok => '/errs?fn=beta&ms=40&n=eok', 0],
        [cpu   => '/cpu?fn=alpha&ms=150&n=c', 1, 20],
        [cpulo => '/cpu?fn=beta&ms=15&n=clo', 0],
        [hdr1  => '/hdr?fn=alpha&ms=60&n=h1', 1, 6, { 'X-Profile' => '1' }],
        [hdr0  => '/hdr?fn=alpha&ms=60&n=h0', 0, 0, { 'X-Profile' => '0' }],
        [hdrno => '/hdr?fn=alpha&ms=60&n=hno', 0],
    );
    for my $mpm (apache_mpms()) {
        subtest "Apache $mpm: keep rules and OtelProfiling expr=" => sub {
            my $ap = start_apache(mpm => $mpm, conf => $CONF, burn => 1, dirs => ['out'], servers => 1);
            for my $q (@req) {
                my $res = http_get($ap->port, $q->[1], headers => $q->[4] || {});
                like $res->{content}, qr/^(?:alpha|beta) \d+ /, "$q->[0] burned" or diag $res->{content};
            }
            $ap->stop;
            my $out = $ap->prefix . '/out';
            my @sp = grep { $_->{kind} eq 'SPAN_KIND_SERVER' } file_spans($out);
            my @prof = pprof_profiles($out);
            ok @prof, scalar(@prof) . ' profile file(s)' or return diag $ap->error_log_tail(20);
            my @smp = map { @{ $_->{samples} } } @prof;
            my ($fast, %slow_fast) = (0);
            for my $q (@req) {
                my ($k, $path, $keep, $min) = @$q;
                (my $query = $path) =~ s/^[^?]*\?//;
                my ($s) = grep { ($_->{attrs}{'url.query'} // '') eq $query } @sp;
                ok $s, "$k: its span" or next;
                if ($k =~ /^fast/) {
                    # the rule is its own wall duration (a loaded machine)
                    ($keep, $min) = ms($s) >= 100 ? (1, 1) : (0);
                    $fast++ unless $keep;
                    $slow_fast{ $s->{span_id} } = 1 if $keep;
                    note sprintf '%s lasted %.1f ms: kept', $k, ms($s) if $keep;
                }
                my $w = 0;
                $w += $_->{count} for grep { ($_->{labels}{span_id} // '') eq $s->{span_id} } @smp;
                if ($keep) {
                    ok $w >= $min, "$k: kept, $w samples carry its span (>= $min)";
                    is $s->{attrs}{'pyroscope.profile.id'}, $s->{span_id}, "$k: pyroscope.profile.id";
                } else {
                    is $w, 0, "$k: no sample carries its span"
                        or diag sprintf('its span lasted %.1f ms', ($s->{end} - $s->{start}) / 1e6);
                    ok !exists $s->{attrs}{'pyroscope.profile.id'}, "$k: no pyroscope.profile.id";
                }
            }
            ok $fast >= 2, "$fast of the 4 fast requests lasted under 100 ms (>= 2)";
            my @beta = grep { stack_has($_, 'spanprof_apache_burn_beta') } @smp;
            my $nb = 0; $nb += $_->{count} for @beta;
            ok $nb >= 10, "$nb samples in spanprof_apache_burn_beta (unkept requests' CPU is there)";
            is scalar(grep { defined $_->{labels}{span_id} && !$slow_fast{ $_->{labels}{span_id} } } @beta), 0,
                '... none labelled';
            is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
        };
    }

    for my $c (
        ['OtelProfilingKeep slow=abc', qr/OtelProfilingKeep: invalid time in "slow=abc"/],
        ['OtelProfilingKeep all cpu=1s', qr/OtelProfilingKeep: "all" cannot be combined/],
        ['OtelProfiling maybe', qr/OtelProfiling: takes On, Off or expr=EXPRESSION/],
        ['OtelProfiling "expr=%{HTTP:"', qr/OtelProfiling: not a valid expression/],
    ) {
        my ($d, $why) = @$c;
        subtest "apache2 -t: $d" => sub {
            my ($code, $out, $path, $full) = apache_t("OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\n"
                . "<Location />\n    $d\n</Location>\n");
            isnt $code, 0, 'apache2 -t fails';
            my $line = conf_line($full, qr/\Q$d\E/);
            like $out, qr/Syntax error on line \Q$line\E of \Q$path\E/, "file and line ($line)" or diag $out;
            like $out, $why, 'reason' or diag $out;
        };
    }
}

done_testing();
