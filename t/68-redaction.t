#!/usr/bin/perl
# Sanitized data (issue 20 section 4), against real nginx and apache2:
# - otel_profiling_redact / OtelProfilingRedact: a function whose name
#   contains a pattern (case-insensitive) is "[REDACTED]" in OTLP profiles
#   (decoded with protoc), pprof files and Pyroscope uploads, and its name is
#   nowhere in the bytes; other functions keep their names;
# - url.query: the values of AWSAccessKeyId, Signature, sig and
#   X-Goog-Signature are REDACTED by default, otel_span_redact_query /
#   OtelSpanRedactQuery add names (a location adds to its server's), other
#   parameters are untouched;
# - credentials in an endpoint URL (user:password@), a Pyroscope URL or an
#   exporter header never reach the error log: not in the export errors of a
#   collector that is down, not in configuration errors; the control API
#   (JSON and Prometheus) of that server shows the endpoint without its
#   userinfo and only counts the header.
#
# Uses the test-only burn modules (t/ngx_burn, t/mod_burn): the pattern
# "Burn_Alpha" matches spanprof_burn_alpha / spanprof_apache_burn_alpha.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use JSON::PP ();
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use SpanProf::Test;
use SpanProf::Profile;
use SpanProf::Apache;

need_module();
need_burn_module();

my $ALPHA = 'spanprof_burn_alpha';
my $BETA  = 'spanprof_burn_beta';

# The query of every request under test, and what url.query must be.
my $Q_DEFAULTS = 'color=blue&sig=S1g&AWSAccessKeyId=AKIAX&Signature=S1gnature'
    . '&X-Goog-Signature=G00g&keep=1&sig&&signature=lower';
my $Q_DEFAULTS_WANT = 'color=blue&sig=REDACTED&AWSAccessKeyId=REDACTED&Signature=REDACTED'
    . '&X-Goog-Signature=REDACTED&keep=1&sig&&signature=lower';
my $Q_ADDED = 'token=T0ken&session=Sess10n&user=bob&%73ig=enc0ded';
my $Q_ADDED_SERVER = 'token=REDACTED&session=Sess10n&user=bob&%73ig=REDACTED';    # server level only
my $Q_ADDED_LOC    = 'token=REDACTED&session=REDACTED&user=bob&%73ig=REDACTED';   # + location's
my @Q_SECRETS = qw(S1g AKIAX S1gnature G00g T0ken enc0ded);

my $SERVER = <<'EOF';
otel_service_name redact;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
otel_profiling_redact Burn_Alpha credential;
otel_profiling_redact password;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    otel_span_redact_query token;
    add_header X-Span-Id $otel_span_id always;
    location /alpha { spanprof_burn alpha 300; }
    location /beta  { spanprof_burn beta 200; }
    location /q     { return 200 "q\n"; }
    location /q2    { return 200 "q2\n"; }
    location /loc   { otel_span_redact_query session; return 200 "loc\n"; }
    location /tick  { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF

sub query_of {
    my ($spans, $path) = @_;
    my ($s) = grep { ($_->{attrs}{'url.path'} // '') eq $path } server_spans(@$spans);
    return $s ? $s->{attrs}{'url.query'} : undef;
}

sub check_queries {
    my ($spans, $what) = @_;
    is query_of($spans, '/q'), $Q_DEFAULTS_WANT, "$what: the semantic conventions' names are REDACTED"
        or diag span_summary(@$spans);
    is query_of($spans, '/q2'), $Q_ADDED_SERVER, "$what: a name added at the server level (and an encoded key)";
    is query_of($spans, '/loc'), $Q_ADDED_LOC, "$what: a location adds its names to its server's";
}

# ---------------------------------------------------------------------------
# nginx: OTLP profiles and spans
# ---------------------------------------------------------------------------
subtest 'nginx: OTLP profiles redacted, url.query redacted' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(receiver => $recv, burn => 1,
        conf => "otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }\n$SERVER");
    my $ra = http_get($ngx->port, '/alpha');
    my $rb = http_get($ngx->port, '/beta');
    is $ra->{status}, 200, '/alpha answered';
    is $rb->{status}, 200, '/beta answered';
    is http_get($ngx->port, "/q?$Q_DEFAULTS")->{status}, 200, '/q answered';
    is http_get($ngx->port, "/q2?$Q_ADDED")->{status}, 200, '/q2 answered';
    is http_get($ngx->port, "/loc?$Q_ADDED")->{status}, 200, '/loc answered';
    my $t_end = time;
    my ($covered, @samples) = wait_otlp_covering($recv, $t_end, 15,
        poke => sub { http_get($ngx->port, '/tick') });
    ok $covered, 'an OTLP profile covering the requests arrived' or diag $recv->summary;

    my @red  = grep { has_frame($_, '[REDACTED]') } @samples;
    my @leak = grep { has_frame($_, qr/burn_alpha/i) } @samples;
    my @beta = grep { has_frame($_, $BETA) } @samples;
    ok total(@red) >= 50, 'samples with a [REDACTED] frame: weight ' . total(@red)
        or diag stacks_summary(\@samples, 15);
    is scalar @leak, 0, "no sample names $ALPHA" or diag stacks_summary(\@leak, 5);
    ok total(@beta) >= 50, "$BETA keeps its name (weight " . total(@beta) . ')';
    my ($sid) = $ra->{headers}{'x-span-id'} // '';
    my @red_alpha = grep { sample_span($_) eq $sid } @red;
    ok total(@red_alpha) >= 0.8 * total(@red), "the [REDACTED] samples are /alpha's, still linked to its span";
    my @bodies = map { $_->{body} } profile_requests($recv);
    ok @bodies >= 1, scalar(@bodies) . ' profile request(s)';
    is scalar(grep { /burn_alpha/i } @bodies), 0, "no profile request has \"$ALPHA\" in its bytes";

    my @spans = sync_spans($recv, $ngx->port);
    check_queries(\@spans, 'nginx');
    my @spans_raw = map { $_->{body} } grep { $_->{path} =~ m{/v1/traces$} } $recv->requests;
    my @leaked = grep { my $s = $_; grep { index($s, $_) >= 0 } @Q_SECRETS } @spans_raw;
    is scalar @leaked, 0, 'no secret query value in any trace request';
    is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
    $ngx->stop;
};

# ---------------------------------------------------------------------------
# nginx: pprof files and Pyroscope
# ---------------------------------------------------------------------------
subtest 'nginx: pprof files and Pyroscope uploads redacted' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(burn => 1, dirs => ['prof'], receiver => $recv,
        conf => "otel_exporter { endpoint file://%%PREFIX%%/prof; interval 100ms; }\n"
              . "otel_profiling_pyroscope %%RECEIVER%%/pyro;\n$SERVER");
    my $dir = $ngx->prefix . '/prof';
    is http_get($ngx->port, '/alpha')->{status}, 200, '/alpha answered';
    is http_get($ngx->port, '/beta')->{status}, 200, '/beta answered';
    wait_until(8, sub { grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests });
    $ngx->quit(15);

    my (%fns, $raw_leak);
    my @files = pprof_files($dir);
    ok @files >= 1, scalar(@files) . ' pprof file(s)' or return;
    for my $f (@files) {
        my $p = eval { read_pprof_file($f) };
        ok $p, "$f decodes" or diag $@;
        $fns{$_}++ for @{ pprof_meta($p)->{functions} };
        my ($gz, $plain) = (SpanProf::Test::_slurp($f));
        gunzip(\$gz => \$plain) or die $GunzipError;
        $raw_leak++ if $plain =~ /burn_alpha/i;
    }
    ok $fns{'[REDACTED]'}, 'pprof files: a function [REDACTED]' or diag join ', ', sort keys %fns;
    ok !(grep { /burn_alpha/i } keys %fns), "pprof files: no function $ALPHA";
    ok $fns{$BETA}, "pprof files: $BETA keeps its name";
    ok !$raw_leak, "pprof files: \"$ALPHA\" is nowhere in the bytes";

    my @ingest = grep { $_->{path} =~ m{^/pyro/ingest\?} } $recv->requests;
    ok @ingest >= 1, scalar(@ingest) . ' Pyroscope upload(s)' or return diag $recv->summary;
    my (%pfns, $pleak);
    for my $q (@ingest) {
        my ($b) = ($q->{headers}{'content-type'} // '') =~ /boundary="?([^";]+)"?/;
        my ($part) = grep { ($_->{name} // '') eq 'profile' } multipart_parts($q->{body}, $b // '');
        next unless $part;
        my $plain;
        gunzip(\$part->{content} => \$plain) or next;
        $pleak++ if $plain =~ /burn_alpha/i;
        my $p = eval { decode_pprof($plain) } or next;
        $pfns{$_}++ for @{ pprof_meta($p)->{functions} };
    }
    ok $pfns{'[REDACTED]'}, 'Pyroscope: a function [REDACTED]' or diag join ', ', sort keys %pfns;
    ok !$pleak, "Pyroscope: \"$ALPHA\" is nowhere in the bytes";
    is scalar($ngx->crash_lines), 0, 'no crash' or diag join "\n", $ngx->crash_lines;
};

# ---------------------------------------------------------------------------
# nginx: credentials never logged
# ---------------------------------------------------------------------------
my @CRED = qw(hunter2pw s3cr3tHdr pyr0pw cfgpw hdrCfgPw);

# The control API on a port of its own (not traced, not profiled).
my $API_SERVER = <<'EOF';
server {
    listen 127.0.0.1:%%PORT2%%;
    otel_trace off;
    otel_profiling off;
    location = /api { otel_api; }
}
EOF

# The errors of a collector (or Pyroscope) that is down, until each URL
# has been logged; a profile export error is logged at most every 5 s, so
# Pyroscope gets a server of its own.
sub logged_masked {
    my ($srv, $poke, $re, $before_stop) = @_;
    my $poked = time;
    my $ok = wait_until(12, sub {
        ($poked = time) && $poke->() if time - $poked > 0.5;
        return $srv->error_log =~ $re;
    });
    $before_stop->() if $before_stop;
    # nginx: quit keeps the prefix (stop removes it when all passed);
    # Apache keeps it until the end
    $srv->can('quit') ? $srv->quit(15) : $srv->stop(15);
    return ($ok, $srv->error_log);
}

sub no_credentials {
    my ($log) = @_;
    unlike $log, qr/\Q$_\E/, "\"$_\" is not in the error log" for @CRED;
}

# The control API of a server whose exporter (endpoint with user:password@,
# an Authorization header) has been failing: GET's JSON shows the endpoint
# in its public form (no userinfo) and the header only counted; neither the
# JSON nor the Prometheus text holds a secret or the user name.
sub api_no_credentials {
    my ($port, $path, $dead) = @_;
    my $r = http_get($port, $path);
    is $r->{status}, 200, "GET $path: 200" or return diag $r->{content};
    my $j = eval { JSON::PP::decode_json($r->{content}) } || {};
    is $j->{config}{endpoint}, "http://127.0.0.1:$dead", 'API: the endpoint without its userinfo'
        or diag $r->{content};
    is $j->{config}{headers}, 1, 'API: the exporter header is counted, not shown';
    my $p = http_get($port, "$path?format=prometheus");
    is $p->{status}, 200, 'GET ?format=prometheus: 200';
    like $p->{content}, qr/^spanprof_info\{/m, 'Prometheus text';
    for my $c (@CRED, 'spanuser', 'Bearer') {
        unlike $r->{content}, qr/\Q$c\E/, "\"$c\" is not in the API's JSON";
        unlike $p->{content}, qr/\Q$c\E/, "\"$c\" is not in the API's Prometheus text";
    }
}

subtest 'nginx: credentials of a down collector are not logged' => sub {
    my ($dead, $dead2) = (dead_port(), dead_port());
    my $ngx = start_nginx(burn => 1, conf => <<"EOF" . $SERVER . $API_SERVER);
otel_exporter {
    endpoint http://spanuser:hunter2pw\@127.0.0.1:$dead; protocol http/protobuf;
    header Authorization "Bearer s3cr3tHdr";
    interval 100ms;
    timeout 1s;
}
EOF
    my ($ok, $log) = logged_masked($ngx, sub { http_get($ngx->port, '/beta') },
        qr{spanprof: export to .*spanprof: profile export to|spanprof: profile export to .*spanprof: export to}s,
        sub { api_no_credentials($ngx->port2, '/api', $dead) });
    ok $ok, 'span and profile export errors were logged' or diag $ngx->error_log_tail(20);
    like $log, qr{export to http://spanuser:\*\*\*\@127\.0\.0\.1:$dead/v1/traces failed},
        'the endpoint shows as user:***@';
    like $log, qr{profile export to http://spanuser:\*\*\*\@127\.0\.0\.1:$dead/v1development/profiles failed},
        '... in profile export errors too';
    no_credentials($log);

    my $pyro = start_nginx(burn => 1, conf => <<"EOF");
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
otel_profiling_pyroscope http://pyuser:pyr0pw\@127.0.0.1:$dead2/;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_profiling on;
    location /beta { spanprof_burn beta 50; }
}
EOF
    ($ok, $log) = logged_masked($pyro, sub { http_get($pyro->port, '/beta') },
        qr{profile export to \S+ failed});
    ok $ok, 'a Pyroscope export error was logged' or diag $pyro->error_log_tail(20);
    like $log, qr{profile export to http://pyuser:\*\*\*\@127\.0\.0\.1:$dead2 failed},
        'the Pyroscope URL shows as user:***@';
    no_credentials($log);
};

subtest 'nginx: credentials not in configuration errors' => sub {
    my $hdr = "otel_exporter { endpoint http://127.0.0.1:4318; protocol http/protobuf; header X-Api-Key \"hdrCfgPw\\n\"; }\n$SERVER";
    my ($rc, $out) = nginx_t($hdr, burn => 1);
    isnt $rc, 0, 'a header value with a newline is refused';
    like $out, qr/invalid value of header "X-Api-Key"/, '... naming the header' or diag $out;
    unlike $out, qr/hdrCfgPw/, '... not its value';

    ($rc, $out) = nginx_t("otel_exporter { endpoint ftp://u:cfgpw\@h/; protocol http/protobuf; }\n$SERVER", burn => 1);
    isnt $rc, 0, 'an ftp endpoint is refused';
    like $out, qr{invalid endpoint "ftp://u:\*\*\*\@h/"}, '... shown masked' or diag $out;
    unlike $out, qr/cfgpw/, '... without its password';

    ($rc, $out) = nginx_t("otel_profiling_pyroscope ftp://u:cfgpw\@h/;\n$SERVER", burn => 1);
    isnt $rc, 0, 'an ftp Pyroscope URL is refused';
    unlike $out, qr/cfgpw/, '... without its password' or diag $out;

    ($rc, $out) = nginx_t("otel_exporter { endpoint http://127.0.0.1:4318; protocol http/protobuf; }\n"
        . "server { listen 127.0.0.1:%%PORT%%; otel_span_redact_query a=b; }\n");
    isnt $rc, 0, 'otel_span_redact_query refuses a name with "="';
    like $out, qr/invalid query parameter name "a=b"/, '... saying so' or diag $out;
};

# ---------------------------------------------------------------------------
# Apache
# ---------------------------------------------------------------------------
SKIP: {
    skip 'apache2 or mod_spanprof missing', 4
        unless -x $SpanProf::Apache::APACHE && -f apache_module_path() && -f apache_burn_path();
    my ($mpm) = grep { $_ eq 'event' } apache_mpms();
    $mpm //= (apache_mpms())[0];

    my $conf = burn_profiling_conf() . <<'EOF';
OtelServiceName apache-redact
OtelTrace On
OtelProfilingRedact Burn_Alpha credential
OtelSpanRedactQuery token
<Location /loc>
    OtelSpanRedactQuery session
</Location>
EOF

    # Under each MPM (a few seconds each); the credentials under event.
    for my $m (apache_mpms()) {
    subtest "apache ($m): profiles and url.query redacted" => sub {
        my $ap = start_apache(mpm => $m, conf => $conf, burn => 1, dirs => ['out'], servers => 1,
            files => { 'htdocs/q' => "q\n", 'htdocs/q2' => "q2\n", 'htdocs/loc' => "loc\n" });
        like http_get($ap->port, '/burn?fn=alpha&ms=300&n=1')->{content}, qr/^alpha 300 /, 'alpha burned';
        like http_get($ap->port, '/burn?fn=beta&ms=200&n=2')->{content}, qr/^beta 200 /, 'beta burned';
        is http_get($ap->port, "/q?$Q_DEFAULTS")->{status}, 200, '/q answered';
        is http_get($ap->port, "/q2?$Q_ADDED")->{status}, 200, '/q2 answered';
        is http_get($ap->port, "/loc?$Q_ADDED")->{status}, 200, '/loc answered';
        $ap->stop;
        my $out = $ap->prefix . '/out';

        my @prof = pprof_profiles($out);
        ok @prof, scalar(@prof) . ' profile file(s)' or return diag $ap->error_log_tail(20);
        my @samples = map { @{ $_->{samples} } } @prof;
        my $red = 0; $red += $_->{count} for grep { stack_has($_, qr/^\[REDACTED\]$/) } @samples;
        my $beta = 0; $beta += $_->{count} for grep { stack_has($_, 'spanprof_apache_burn_beta') } @samples;
        ok $red >= 20, "$red samples with a [REDACTED] frame";
        is scalar(grep { stack_has($_, qr/burn_alpha/i) } @samples), 0, 'no sample names spanprof_apache_burn_alpha';
        ok $beta >= 20, "spanprof_apache_burn_beta keeps its name ($beta samples)";
        my $leak = 0;
        opendir(my $dh, $out);
        for my $f (grep { /^cpu-.*\.pb\.gz$/ } readdir $dh) {
            my ($gz, $plain) = (SpanProf::Test::_slurp("$out/$f"));
            gunzip(\$gz => \$plain) or die $GunzipError;
            $leak++ if $plain =~ /burn_alpha/i;
        }
        closedir $dh;
        is $leak, 0, 'the name is nowhere in the files\' bytes';

        my @spans = file_spans($out);
        check_queries(\@spans, 'apache');
        my $jsonl = SpanProf::Test::_slurp("$out/traces.jsonl") // '';
        is scalar(grep { index($jsonl, $_) >= 0 } @Q_SECRETS), 0, 'no secret query value in traces.jsonl';
        is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
    };
    }

    subtest "apache ($mpm): credentials of a down collector are not logged" => sub {
        my ($dead, $dead2) = (dead_port(), dead_port());
        my $ap = start_apache(mpm => $mpm, burn => 1, servers => 1, conf => <<"EOF");
OtelExporterEndpoint http://spanuser:hunter2pw\@127.0.0.1:$dead
OtelExporterProtocol http/protobuf
OtelExporterHeader Authorization "Bearer s3cr3tHdr"
OtelExporterInterval 0.1
OtelExporterTimeout 1
OtelProfilingInterval 0.3
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
<Location /api>
    OtelTrace Off
    SetHandler spanprof-api
</Location>
EOF
        my ($ok, $log) = logged_masked($ap, sub { http_get($ap->port, '/burn?fn=beta&ms=50&n=1') },
            qr{spanprof: export to .*spanprof: profile export to|spanprof: profile export to .*spanprof: export to}s,
            sub { api_no_credentials($ap->port, '/api', $dead) });
        ok $ok, 'span and profile export errors were logged' or diag $ap->error_log_tail(20);
        like $log, qr{export to http://spanuser:\*\*\*\@127\.0\.0\.1:$dead/v1/traces failed},
            'the endpoint shows as user:***@';
        no_credentials($log);

        my $pyro = start_apache(mpm => $mpm, burn => 1, servers => 1, conf => <<"EOF");
OtelProfilingPyroscope http://pyuser:pyr0pw\@127.0.0.1:$dead2/
OtelProfilingInterval 0.3
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF
        ($ok, $log) = logged_masked($pyro, sub { http_get($pyro->port, '/burn?fn=beta&ms=50&n=2') },
            qr{profile export to \S+ failed});
        ok $ok, 'a Pyroscope export error was logged' or diag $pyro->error_log_tail(20);
        like $log, qr{profile export to http://pyuser:\*\*\*\@127\.0\.0\.1:$dead2 failed},
            'the Pyroscope URL shows as user:***@';
        no_credentials($log);
    };

    subtest 'apache: credentials not in configuration errors' => sub {
        my ($rc, $out) = apache_t("OtelExporterEndpoint ftp://u:cfgpw\@h/\nOtelTrace On\n");
        isnt $rc, 0, 'an ftp endpoint is refused';
        like $out, qr{invalid endpoint "ftp://u:\*\*\*\@h/"}, '... shown masked' or diag $out;
        unlike $out, qr/cfgpw/, '... without its password';
        ($rc, $out) = apache_t("OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelProfilingPyroscope ftp://u:cfgpw\@h/\n");
        isnt $rc, 0, 'an ftp Pyroscope URL is refused';
        unlike $out, qr/cfgpw/, '... without its password' or diag $out;
        ($rc, $out) = apache_t("OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelSpanRedactQuery a&b\n");
        isnt $rc, 0, 'OtelSpanRedactQuery refuses a name with "&"';
        like $out, qr/invalid query parameter name "a&b"/, '... saying so' or diag $out;
    };
}

done_testing;
