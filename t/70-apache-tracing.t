#!/usr/bin/perl
# mod_spanprof under the real apache2, once per MPM (prefork, worker,
# event): OtelTraceContext modes through mod_proxy to an echo backend (a CGI
# in a second VirtualHost of the same server) and the CLIENT span the
# backend's traceparent names; invalid traceparent forms; tracestate kept
# and dropped; propagation after an internal redirect; early 403/401 traced;
# the OTEL_* environment in the access log, mod_headers and CGI; span name,
# attributes and status like nginx's; no extra spans for internal redirects.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $T  = '0af7651916cd43dd8448eb211c80319c';
my $P  = 'b7ad6b7169203331';
my $T2 = '4bf92f3577b34da6a3ce929d0e0e4736';
my $P2 = '00f067aa0ba902b7';
my $TS = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';

my $DEAD = dead_port();

my $ECHO = <<'EOF';
#!/bin/sh
printf 'Content-Type: text/plain\r\n\r\n'
printf 'tp=%s ts=%s\n' "$HTTP_TRACEPARENT" "$HTTP_TRACESTATE"
EOF

my $ENVCGI = <<'EOF';
#!/bin/sh
printf 'Content-Type: text/plain\r\n\r\n'
printf 'trace=%s span=%s parent=%s tp=%s\n' "$OTEL_TRACE_ID" "$OTEL_SPAN_ID" "$OTEL_PARENT_ID" "$OTEL_TRACEPARENT"
EOF

my $CONF = <<"EOF";
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
OtelServiceName apache-tracing
LogFormat "%U %>s %{OTEL_TRACE_ID}e %{OTEL_SPAN_ID}e [%{OTEL_PARENT_ID}e] %{OTEL_TRACEPARENT}e" otel
CustomLog %%PREFIX%%/access.log otel

<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    Header always set X-Trace-Id "%{OTEL_TRACE_ID}e"
    Header always set X-Span-Id "%{OTEL_SPAN_ID}e"
    Header always set X-Parent-Id "%{OTEL_PARENT_ID}e"
    Header always set X-Traceparent "%{OTEL_TRACEPARENT}e"

    <Location /default/>
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /ignore/>
        OtelTraceContext ignore
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /extract/>
        OtelTraceContext extract
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /inject/>
        OtelTraceContext inject
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /propagate/>
        OtelTraceContext propagate
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /p/>
        OtelTraceContext propagate
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /e/>
        OtelTraceContext extract
        ProxyPass http://127.0.0.1:%%PORT2%%/echo.cgi/
    </Location>
    <Location /dead/>
        OtelTraceContext propagate
        ProxyPass http://127.0.0.1:$DEAD/
    </Location>
    # an internal redirect into a propagating location
    <Location /redir/>
        ErrorDocument 404 /propagate/from-redirect
    </Location>

    <Location /denied/>
        Require all denied
    </Location>
    <Location /auth/>
        AuthType Basic
        AuthName "spanprof test"
        AuthUserFile %%PREFIX%%/htpasswd
        Require valid-user
    </Location>

    <Location /api/>
        OtelSpanAttr app.tenant "%{HTTP:X-Tenant}"
        OtelSpanAttr app.const fixed
    </Location>
    <Location /api/inner/>
        OtelSpanAttr app.only inner
    </Location>
    <Location /named/>
        OtelSpanName "custom %{REQUEST_METHOD} %{REQUEST_URI}"
    </Location>
    <LocationMatch "^/re/">
        OtelSpanAttr app.re yes
    </LocationMatch>
    <Location /err/>
        RewriteEngine On
        RewriteRule ^ - [R=503]
    </Location>
    <Location /off/>
        OtelTrace Off
    </Location>
    ErrorDocument 410 /errdoc.html
    <Location /gone/>
        Redirect gone
    </Location>
</VirtualHost>

# the echo backend, not traced
<VirtualHost 127.0.0.1:%%PORT2%%>
    OtelTrace Off
</VirtualHost>
EOF

my $recv = start_receiver();

for my $mpm (apache_mpms()) {
    subtest $mpm => sub { run_mpm($mpm) };
}

# Loaded before mod_proxy: the CLIENT span still comes (from mod_proxy's
# request_status hook and r->filename).
subtest 'mod_spanprof loaded before mod_proxy' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv, first => 1,
        files => { 'htdocs/echo.cgi' => $ECHO }, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    OtelTraceContext propagate
    ProxyPass /first/ http://127.0.0.1:%%PORT2%%/echo.cgi/
</VirtualHost>
<VirtualHost 127.0.0.1:%%PORT2%%>
</VirtualHost>
EOF
    my $r = http_get($ap->port, '/first/x');
    my ($tp) = parse_echo($r->{content});
    my @s = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq '/first/x' });
    my ($sv) = @s;
    ok $sv, 'SERVER span' or return diag $recv->summary;
    my ($cl) = grep { $_->{parent_span_id} eq $sv->{span_id} } client_spans(collect_spans($recv));
    ok $cl, 'CLIENT span' or return;
    is $tp, "00-$sv->{trace_id}-$cl->{span_id}-03", 'the backend saw the CLIENT span as parent';
    is $cl->{attrs}{'server.port'}, $ap->port2, 'server.port';
    is $cl->{attrs}{'http.response.status_code'}, 200, 'status';
    ok $cl->{start} > $sv->{start} && $cl->{end} <= $sv->{end}, 'timed within the SERVER span';
    $ap->stop;
};

# Sections and hosts that neither trace, propagate nor profile leave their
# requests alone: no environment, no span, the request headers as sent.
subtest 'untraced sections and virtual hosts' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv,
        files => { 'htdocs/env.cgi' => $ENVCGI, 'htdocs/echo.cgi' => $ECHO }, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    <Location /env.cgi/quiet/>
        OtelTrace Off
    </Location>
    <Location /env.cgi/propagating/>
        OtelTrace Off
        OtelTraceContext propagate
    </Location>
</VirtualHost>
<VirtualHost 127.0.0.1:%%PORT2%%>
    OtelTrace Off
</VirtualHost>
EOF
    my $tp_in = "00-$T2-$P2-01";
    my %r = (
        quiet       => http_get($ap->port, '/env.cgi/quiet/q'),
        propagating => http_get($ap->port, '/env.cgi/propagating/p', headers => { traceparent => $tp_in }),
        traced      => http_get($ap->port, '/env.cgi/traced/t'),
        host        => http_get($ap->port2, '/env.cgi/host/h'),
        host_echo   => http_get($ap->port2, '/echo.cgi/host/e', headers => { traceparent => $tp_in, tracestate => $TS }),
    );
    my $env = sub { my %e = $_[0]{content} =~ /(\w+)=(\S*)/g; \%e };
    my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq '/env.cgi/traced/t' });
    ok $sv, 'a traced section: SERVER span' or return diag $recv->summary;
    is $env->($r{traced})->{trace}, $sv->{trace_id}, 'a traced section: OTEL_TRACE_ID';
    is $env->($r{quiet})->{trace}, '', 'an untraced section: no OTEL_TRACE_ID';
    is $env->($r{quiet})->{tp}, '', 'an untraced section: no OTEL_TRACEPARENT';
    my $pe = $env->($r{propagating});
    is $pe->{trace}, $T2, 'an untraced but propagating section: the incoming trace id';
    is $pe->{parent}, $P2, 'and its parent id';
    is $env->($r{host})->{trace}, '', 'a virtual host where nothing traces: no OTEL_TRACE_ID';
    my ($tp, $ts) = parse_echo($r{host_echo}{content});
    is $tp, $tp_in, 'a virtual host where nothing traces: traceparent as sent';
    is $ts, $TS, 'and tracestate';
    sleep 0.3;
    my @other = grep { ($_->{attrs}{'url.path'} // '') =~ m{^/(env|echo)\.cgi/(quiet|propagating|host)/} }
        collect_spans($recv);
    is scalar @other, 0, "no span for the others" or diag join " ", map { $_->{attrs}{"url.path"} } @other;
    $ap->stop;
};

# Before fixups the variables are set only when a directive names one,
# in any case (apr's tables ignore it): here only a LogFormat does, in
# lower case, and the requests end before fixups (Redirect, 403).
subtest 'environment before fixups: named in lower case' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
LogFormat "%U %>s %{otel_trace_id}e %{Otel_Span_Id}e" lower
CustomLog %%PREFIX%%/access.log lower
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    Redirect gone /early/gone
    <Location /early/denied>
        Require all denied
    </Location>
</VirtualHost>
EOF
    is http_get($ap->port, '/early/gone')->{status}, 410, 'Redirect gone';
    is http_get($ap->port, '/early/denied')->{status}, 403, 'denied';
    for my $path (qw(/early/gone /early/denied)) {
        my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq $path });
        ok $sv, "$path: SERVER span" or next;
        my $log = $ap->access_log;
        like $log, qr{^\Q$path\E \d+ $sv->{trace_id} $sv->{span_id}$}m, "$path: both ids in the log"
            or diag $log;
    }
    $ap->stop;
};

# url.scheme is ap_http_scheme()'s answer; without mod_ssl (no module but
# http_core hooks it) the module gives http_core's answer itself: "https"
# for a host whose ServerName says https://. With mod_ssl loaded (its hook
# declines on a host without SSLEngine) the hook is asked: the same.
for my $mods ([], ['ssl']) {
    subtest 'url.scheme from ServerName' . (@$mods ? ' (mod_ssl loaded)' : '') => sub {
        my $ap = start_apache(mpm => 'event', receiver => $recv, modules => $mods, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<VirtualHost 127.0.0.1:%%PORT%%>
    ServerName https://secure.test
    OtelTrace On
</VirtualHost>
<VirtualHost 127.0.0.1:%%PORT2%%>
    OtelTrace On
</VirtualHost>
EOF
        my $tag = @$mods ? 'ssl' : 'plain';
        http_get($ap->port, "/scheme/$tag/https");
        http_get($ap->port2, "/scheme/$tag/http");
        for my $want (qw(https http)) {
            my ($sv) = wait_for_spans($recv, 1, 10,
                filter => sub { ($_[0]{attrs}{'url.path'} // '') eq "/scheme/$tag/$want" });
            ok $sv, "$want host: SERVER span" or next;
            is $sv->{attrs}{'url.scheme'}, $want, "$want host: url.scheme";
        }
        $ap->stop;
    };
}

# A main-server <Location> with nothing of ours is merged per request as
# a copy of its host's settings with its route, made ahead once per host
# (spanprof_premerge): each host's request must get its own host's
# settings, and a <Directory> of ours under it (another base) too.
subtest 'a route-only <Location> shared by virtual hosts' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv,
        files => { map { ("htdocs/shared/$_" => "x\n") } qw(one two dir/x) }, conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<Location /shared/>
</Location>
<Directory %%PREFIX%%/htdocs/shared/dir>
    OtelSpanAttr app.host dir
</Directory>
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    OtelSpanAttr app.host one
</VirtualHost>
<VirtualHost 127.0.0.1:%%PORT2%%>
    OtelTrace On
    OtelSpanAttr app.host two
</VirtualHost>
EOF
    my %want = ('/shared/one' => 'one', '/shared/two' => 'two', '/shared/dir/x' => 'dir');
    http_get($ap->port, '/shared/one');
    http_get($ap->port2, '/shared/two');
    http_get($ap->port2, '/shared/dir/x');
    for my $path (sort keys %want) {
        my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq $path });
        ok $sv, "$path: SERVER span" or next;
        is $sv->{attrs}{'app.host'}, $want{$path}, "$path: its host's (or directory's) OtelSpanAttr";
        is $sv->{attrs}{'http.route'}, '/shared/', "$path: http.route";
        is $sv->{name}, 'GET /shared/', "$path: name";
    }
    $ap->stop;
};

# A <Location> of the main server applies to virtual hosts that set
# nothing themselves: they are not taken for untraced.
subtest 'a main-server section traces in a virtual host' => sub {
    (my $conf = <<'EOF') =~ s/LONGROUTE/'r' x 520/e;
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<Location /env.cgi/global/>
    OtelTrace On
</Location>
<VirtualHost 127.0.0.1:%%PORT%%>
    <Location /env.cgi/LONGROUTE/>
        OtelTrace On
    </Location>
</VirtualHost>
EOF
    my $ap = start_apache(mpm => 'event', receiver => $recv,
        files => { 'htdocs/env.cgi' => $ENVCGI }, conf => $conf);
    my $r = http_get($ap->port, '/env.cgi/global/g');
    # A route longer than a span keeps (512 bytes) leaves the name to the
    # method alone, as in nginx.
    my $long = 'r' x 520;
    http_get($ap->port, "/env.cgi/$long/x");
    # (url.path is cut at 512 bytes too)
    my ($lv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') =~ m{^/env\.cgi/rrrr} });
    ok $lv, 'span under a long route' or return diag $recv->summary;
    is $lv->{name}, 'GET', 'a route over 512 bytes: the name is the method alone';
    my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq '/env.cgi/global/g' });
    ok $sv, 'SERVER span' or return diag $recv->summary;
    my %e = $r->{content} =~ /(\w+)=(\S*)/g;
    is $e{trace}, $sv->{trace_id}, 'OTEL_TRACE_ID';
    is $sv->{attrs}{'http.route'}, '/env.cgi/global/', 'route of the main server\'s Location';
    $ap->stop;
};

# mod_include: subrequests add no span and see the main request's ids.
# Without mod_cgid and mod_proxy_fcgi (no_spawn), and no directive naming
# an OTEL_* variable: mod_include alone must get them set at fixups.
subtest 'SSI subrequests' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv, modules => ['include'], no_spawn => 1,
        files => { 'htdocs/page.shtml' => qq{<!--#include virtual="/inc.txt" -->}
                       . qq{<!--#include virtual="/inc.txt" -->trace=<!--#echo var="OTEL_TRACE_ID" -->\n},
                   'htdocs/inc.txt' => "inc\n" },
        conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    <Location /page.shtml>
        Options +Includes
        SetOutputFilter INCLUDES
    </Location>
</VirtualHost>
EOF
    my $r = http_get($ap->port, '/page.shtml');
    like $r->{content}, qr/^inc\ninc\ntrace=([0-9a-f]{32})$/, 'two includes' or diag $r->{content};
    my ($tid) = $r->{content} =~ /trace=([0-9a-f]{32})/;
    my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq '/page.shtml' });
    ok $sv, 'SERVER span' or return;
    is $tid, $sv->{trace_id}, 'OTEL_TRACE_ID in SSI';
    sleep 0.5;
    is scalar(grep { ($_->{attrs}{'url.path'} // '') eq '/inc.txt' } collect_spans($recv)), 0,
        'no span for the subrequests';
    is scalar(grep { $_->{trace_id} eq $sv->{trace_id} } collect_spans($recv)), 1, 'one span in the trace';
    $ap->stop;
};

# A .htaccess file is read per request, after the configuration was
# searched for OTEL_* names: an AllowOverride that lets one in counts as
# naming them (no_spawn: no module that reads them anyway).
subtest '.htaccess naming OTEL_TRACE_ID' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv, no_spawn => 1,
        files => { 'htdocs/ht/.htaccess' => qq{Header set X-Trace-Id "%{OTEL_TRACE_ID}e"\n},
                   'htdocs/ht/a.txt' => "a\n" },
        conf => <<'EOF');
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<Directory %%PREFIX%%/htdocs/ht>
    AllowOverride FileInfo
</Directory>
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
</VirtualHost>
EOF
    my $r = http_get($ap->port, '/ht/a.txt');
    is $r->{status}, 200, 'GET /ht/a.txt';
    my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq '/ht/a.txt' });
    ok $sv, 'SERVER span' or return;
    is $r->{headers}{'x-trace-id'}, $sv->{trace_id}, 'the .htaccess Header read OTEL_TRACE_ID';
    $ap->stop;
};

# A balancer whose first member is down: one CLIENT span, two attempts.
subtest 'balancer failover: upstream.attempt events' => sub {
    my $ap = start_apache(mpm => 'event', receiver => $recv,
        modules => [qw(slotmem_shm proxy_balancer lbmethod_byrequests)],
        files => { 'htdocs/echo.cgi' => $ECHO }, conf => <<"EOF");
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
<Proxy "balancer://pool">
    BalancerMember http://127.0.0.1:$DEAD
    BalancerMember http://127.0.0.1:%%PORT2%%
    ProxySet lbmethod=byrequests
</Proxy>
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    OtelTraceContext inject
    ProxyPass /lb/ balancer://pool/echo.cgi/
</VirtualHost>
<VirtualHost 127.0.0.1:%%PORT2%%>
</VirtualHost>
EOF
    my $r = http_get($ap->port, '/lb/1');
    is $r->{status}, 200, 'answered by the live member' or diag $r->{content};
    my ($sv) = wait_for_spans($recv, 1, 10, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq '/lb/1' });
    ok $sv, 'SERVER span' or return diag $recv->summary;
    my ($cl) = grep { $_->{parent_span_id} eq $sv->{span_id} } client_spans(collect_spans($recv));
    ok $cl, 'CLIENT span' or return;
    is $cl->{attrs}{'server.port'}, $ap->port2, 'the member that answered';
    is $cl->{attrs}{'http.response.status_code'}, 200, 'its status';
    is $cl->{status_code}, '', 'not an error';
    is $cl->{attrs}{'http.request.resend_count'}, 1, 'resend count';
    my @ev = @{ $cl->{events} };
    is scalar @ev, 2, 'two upstream.attempt events' or return diag span_summary($cl);
    is $ev[0]{name}, 'upstream.attempt', 'event name';
    is $ev[0]{attrs}{'server.port'}, $DEAD, 'first attempt: the dead member';
    is $ev[0]{attrs}{'error.type'}, 'connection_failed', 'first attempt: connection_failed';
    is $ev[1]{attrs}{'server.port'}, $ap->port2, 'second attempt: the live member';
    is $ev[1]{attrs}{'http.response.status_code'}, 200, 'second attempt: 200';
    my ($tp) = parse_echo($r->{content});
    is $tp, "00-$sv->{trace_id}-$cl->{span_id}-03", 'the member saw the CLIENT span as parent';
    $ap->stop;
};

done_testing;


sub run_mpm {
    my ($mpm) = @_;
    my $ap = start_apache(mpm => $mpm, receiver => $recv, conf => $CONF,
        files => { 'htdocs/echo.cgi' => $ECHO, 'htdocs/env.cgi' => $ENVCGI,
                   'htpasswd' => '', 'htdocs/errdoc.html' => "gone\n" });
    my $port = $ap->port;
    my $n = 0;
    my $uniq = sub { my ($p) = @_; return "$p$mpm-" . ++$n };

    # ---- requests ------------------------------------------------------------
    my %req;
    my $get = sub {
        my ($key, $path, %h) = @_;
        my $r = http_get($port, $path, headers => \%h);
        $req{$key} = { path => $path, res => $r, echo => [ parse_echo($r->{content}) ] };
        return $r;
    };

    for my $mode (qw(default ignore extract inject propagate)) {
        $get->("$mode/none", $uniq->("/$mode/"));
        $get->("$mode/tp", $uniq->("/$mode/"), traceparent => "00-$T-$P-01", tracestate => $TS);
    }
    $get->('propagate/badts', $uniq->('/propagate/'), traceparent => "00-$T-$P-01",
        tracestate => 'Bad Key=1');
    $get->('propagate/unsampled', $uniq->('/propagate/'), traceparent => "00-$T-$P-00");
    $get->('dead', $uniq->('/dead/'));
    $get->('redir', $uniq->('/redir/'), traceparent => "00-$T-$P-01");
    $get->('denied', $uniq->('/denied/'));
    $get->('auth', $uniq->('/auth/'));
    $get->('api', $uniq->('/api/') . '?a=1&b=2', 'X-Tenant' => 'acme', 'User-Agent' => 'ua-test/2');
    $get->('inner', $uniq->('/api/inner/'));
    $get->('named', $uniq->('/named/'));
    $get->('re', $uniq->('/re/'));
    $get->('err', $uniq->('/err/'));
    $get->('off', $uniq->('/off/'));
    $get->('gone', $uniq->('/gone/'));
    $get->('cgi', '/env.cgi?' . $uniq->('x'), traceparent => "00-$T-$P-01");
    $get->('other', $uniq->('/other/'));
    my $pp = $uniq->('/api/post-');
    $req{post} = { path => $pp, res => http_request('POST', $port, $pp, content => 'x' x 100) };
    my $pu = $uniq->('/api/purge-');
    $req{purge} = { path => $pu, res => http_request('PURGE', $port, $pu) };
    # server.port comes from the Host header's port, else the connection's
    # (HTTP::Tiny writes Host itself, so these go out raw)
    for my $h (['host/port', '127.0.0.1:8443'], ['host/v6', '[::1]:9443'],
               ['host/none', '127.0.0.1'], ['host/bad', '127.0.0.1:84x3'],
               ['host/big', '127.0.0.1:65536'])
    {
        my $path = $uniq->('/api/host-');
        raw_request($port, "GET $path HTTP/1.1\r\nHost: $h->[1]\r\nConnection: close\r\n\r\n");
        $req{ $h->[0] } = { path => $path };
    }
    # The three headers the span reads, named in other cases, after
    # others (spanprof_span.c finds them by apr's checksums of the names)
    {
        my $path = $uniq->('/api/case-');
        raw_request($port, "POST $path HTTP/1.1\r\nAccept: */*\r\nX-Other: 1\r\n"
            . "hOsT: 127.0.0.1:8444\r\nuser-AGENT: case/1\r\ncontent-length: 3\r\n"
            . "Connection: close\r\n\r\nabc");
        $req{'hdr/case'} = { path => $path };
    }

    # Five requests pipelined on one keep-alive connection: the client's
    # and the server's attributes are encoded once and kept with it, the
    # client's again when the protocol changes, the server's when the Host
    # header does (spanprof_span.c).
    my @ka = map { $uniq->("/api/ka$_-") } 1 .. 5;
    my @ka_v = qw(1.1 1.1 1.1 1.0 1.1);
    my @ka_host = (("127.0.0.1:$port") x 2, '127.0.0.1:8443', "localhost:$port", "127.0.0.1:$port");
    my $ka_bytes = '';
    for my $k (0 .. 4) {
        $ka_bytes .= "GET $ka[$k] HTTP/$ka_v[$k]\r\nHost: $ka_host[$k]\r\nConnection: "
                   . ($k == 4 ? 'close' : 'keep-alive') . "\r\n\r\n";
    }
    my (undef, $ka_port) = raw_request($port, $ka_bytes);
    $req{"ka$_"} = { path => $ka[$_ - 1] } for 1 .. 5;

    my @inv = invalid_forms();
    my $i = 0;
    for my $c (@inv) {
        for my $mode ('p', 'e') {
            my $path = "/$mode/inv-$mpm-" . ++$i;
            my $r = http_get($port, $path, headers => { traceparent => $c->[1], tracestate => 'congo=t61rcWkgMzE' });
            $c->[2]{$mode} = { path => $path, res => $r, echo => [ parse_echo($r->{content}) ] };
        }
    }

    # prefork has several children, each with its own exporter
    my @all = wait_all($recv, \%req, \@inv);

    my $span = sub {
        my ($key) = @_;
        my $path = $req{$key}{path};
        (my $p = $path) =~ s/\?.*//;
        my @s = by_path($p, @all);
        return @s;
    };

    # ---- modes ------------------------------------------------------------------
    for my $mode (qw(default ignore extract inject propagate)) {
        subtest "mode $mode" => sub {
            for my $with (qw(none tp)) {
                my $q = $req{"$mode/$with"};
                is $q->{res}{status}, 200, "$with: proxied, 200" or diag $q->{res}{content};
                my @s = $span->("$mode/$with");
                is scalar @s, 1, "$with: one SERVER span" or return diag span_summary(@all);
                my $s = $s[0];
                my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
                ok $cl, "$with: a CLIENT span child of the SERVER span" or return diag span_summary(@all);
                is $cl->{trace_id}, $s->{trace_id}, "$with: CLIENT span in the same trace";
                is $cl->{name}, 'GET', "$with: CLIENT span name";
                is $cl->{attrs}{'server.address'}, '127.0.0.1', "$with: CLIENT server.address";
                is $cl->{attrs}{'server.port'}, $ap->port2, "$with: CLIENT server.port";
                is $cl->{attrs}{'http.response.status_code'}, 200, "$with: CLIENT status";
                ok $cl->{start} >= $s->{start} && $cl->{end} <= $s->{end}, "$with: CLIENT within SERVER";
                is $s->{name}, "GET /$mode/", "$with: SERVER span name";
                is $q->{res}{headers}{'x-trace-id'}, $s->{trace_id}, "$with: OTEL_TRACE_ID via mod_headers";
                is $q->{res}{headers}{'x-span-id'}, $s->{span_id}, "$with: OTEL_SPAN_ID via mod_headers";
                my $flags = ($with eq 'tp' && ($mode eq 'extract' || $mode eq 'propagate')) ? '01' : '03';
                is $q->{res}{headers}{'x-traceparent'} // '', "00-$s->{trace_id}-$cl->{span_id}-$flags",
                    "$with: OTEL_TRACEPARENT names the CLIENT span";
                my ($up_tp, $up_ts) = @{ $q->{echo} };
                my $extracts = $mode eq 'extract' || $mode eq 'propagate';
                my $injects = $mode eq 'inject' || $mode eq 'propagate';
                if ($with eq 'tp' && $extracts) {
                    is $s->{trace_id}, $T, "$with: trace continued";
                    is $s->{parent_span_id}, $P, "$with: parent is the client's span";
                    ok $s->{flags} & 0x200, "$with: remote parent flag";
                    is $s->{trace_state}, $TS, "$with: tracestate on the span";
                    is $q->{res}{headers}{'x-parent-id'} // '', $P, "$with: OTEL_PARENT_ID";
                } else {
                    isnt $s->{trace_id}, $T, "$with: new trace";
                    is $s->{parent_span_id}, '', "$with: no parent";
                    is $s->{trace_state}, '', "$with: no tracestate";
                    is $q->{res}{headers}{'x-parent-id'} // '', '', "$with: OTEL_PARENT_ID empty";
                }
                if ($injects) {
                    is $up_tp, "00-$s->{trace_id}-$cl->{span_id}-$flags", "$with: backend sees our traceparent";
                    is $up_ts, ($with eq 'tp' && $mode eq 'propagate' ? $TS : ''),
                        "$with: tracestate " . ($mode eq 'propagate' && $with eq 'tp' ? 'kept' : 'removed');
                } else {
                    is $up_tp, ($with eq 'tp' ? "00-$T-$P-01" : ''), "$with: backend sees the client's traceparent";
                    is $up_ts, ($with eq 'tp' ? $TS : ''), "$with: tracestate unchanged";
                }
            }
        };
    }

    subtest 'propagate: invalid tracestate dropped, unsampled parent' => sub {
        my ($s) = $span->('propagate/badts');
        ok $s, 'span' or return;
        is $s->{trace_id}, $T, 'trace continued';
        is $s->{trace_state}, '', 'invalid tracestate not on the span';
        is $req{'propagate/badts'}{echo}[1], '', 'and not forwarded';
        my ($u) = $span->('propagate/unsampled');
        ok $u, 'unsampled parent: still traced (OtelTrace On decides)' or return;
        is $u->{trace_id}, $T, 'trace continued';
        is $u->{flags} & 0xff, 0x01, 'sampled flag set, random flag copied (off)';
    };

    subtest 'backend down' => sub {
        my $q = $req{dead};
        is $q->{res}{status}, 503, 'mod_proxy answers 503';
        my ($s) = $span->('dead');
        ok $s, 'SERVER span' or return;
        is $s->{status_code}, 'STATUS_CODE_ERROR', 'SERVER span ERROR';
        is $s->{attrs}{'error.type'}, '503', 'error.type 503';
        my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
        ok $cl, 'CLIENT span' or return diag span_summary(@all);
        is $cl->{status_code}, 'STATUS_CODE_ERROR', 'CLIENT span ERROR';
        is $cl->{attrs}{'error.type'}, 'connection_failed', 'error.type connection_failed';
        is $cl->{attrs}{'server.port'}, $DEAD, 'the backend port';
        ok !exists $cl->{attrs}{'http.response.status_code'}, 'no backend status';
    };

    subtest 'internal redirect into a propagating location' => sub {
        my $q = $req{redir};
        my @s = $span->('redir');
        is scalar @s, 1, 'one SERVER span for the redirected request' or return diag span_summary(@all);
        my $s = $s[0];
        isnt $s->{trace_id}, $T, 'context decided in the first location (ignore)';
        my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
        ok $cl, 'CLIENT span' or return diag span_summary(@all);
        is $q->{echo}[0], "00-$s->{trace_id}-$cl->{span_id}-03", 'backend sees our traceparent after the redirect';
        is scalar(grep { ($_->{attrs}{'url.path'} // '') eq '/propagate/from-redirect' } @all), 0,
            'no span for the redirect target';
    };

    subtest 'early rejections' => sub {
        is $req{denied}{res}{status}, 403, 'Require all denied: 403';
        my ($d) = $span->('denied');
        ok $d, '403 traced' or return diag span_summary(@all);
        is $d->{attrs}{'http.response.status_code'}, 403, 'status 403';
        is $d->{name}, 'GET /denied/', 'name';
        is $d->{status_code}, '', 'status unset for 4xx';
        is $req{denied}{res}{headers}{'x-trace-id'}, $d->{trace_id}, 'OTEL_TRACE_ID on the error response';
        is $req{auth}{res}{status}, 401, 'AuthType Basic without credentials: 401';
        my ($a) = $span->('auth');
        ok $a, '401 traced' or return;
        is $a->{attrs}{'http.response.status_code'}, 401, 'status 401';
        is $a->{name}, 'GET /auth/', 'name';
    };

    subtest 'client and server attributes on a keep-alive connection' => sub {
        my @s = map { ($span->("ka$_"))[0] } 1 .. 5;
        for my $k (0 .. 4) {
            my ($s, $n) = ($s[$k], $k + 1);
            ok $s, "request $n: span" or next;
            is $s->{attrs}{'client.address'}, '127.0.0.1', "request $n: client.address";
            is $s->{attrs}{'client.port'}, $ka_port, "request $n: client.port is the connection's";
            is $s->{attr_types}{'client.port'}, 'int', "request $n: client.port is an int";
            is $s->{attrs}{'network.protocol.version'}, $ka_v[$k], "request $n: HTTP/$ka_v[$k]";
            my ($host, $hport) = split /:/, $ka_host[$k];
            is $s->{attrs}{'server.address'}, $host, "request $n: server.address $host";
            is $s->{attrs}{'server.port'}, $hport, "request $n: server.port $hport";
            is_deeply $s->{attr_keys}, $s[0]{attr_keys}, "request $n: the first one's attributes, in order"
                if $s[0];
        }
    };

    subtest 'server.port from the Host header' => sub {
        my %want = ('host/port' => 8443, 'host/v6' => 9443, 'host/none' => $port,
                    'host/bad' => $port, 'host/big' => $port);
        for my $key (sort keys %want) {
            my ($s) = $span->($key);
            ok $s, "$key: span" or next;
            is $s->{attrs}{'server.port'}, $want{$key}, "$key: server.port";
        }
    };

    subtest 'request headers named in any case' => sub {
        my ($s) = $span->('hdr/case');
        ok $s, 'span' or return;
        is $s->{attrs}{'server.port'}, 8444, 'server.port from hOsT';
        is $s->{attrs}{'user_agent.original'}, 'case/1', 'user_agent.original from user-AGENT';
        is $s->{attrs}{'http.request.body.size'}, 3, 'http.request.body.size from content-length';
    };

    subtest 'span name and attributes' => sub {
        my ($s) = $span->('api');
        ok $s, 'span' or return;
        is $s->{name}, 'GET /api/', 'name {method} {route}';
        is $s->{attrs}{'http.route'}, '/api/', 'http.route';
        is $s->{attrs}{'http.request.method'}, 'GET', 'method';
        like $req{api}{path}, qr/^\Q$s->{attrs}{'url.path'}\E\?/, 'url.path';
        is $s->{attrs}{'url.query'}, 'a=1&b=2', 'url.query';
        is $s->{attrs}{'url.scheme'}, 'http', 'url.scheme';
        is $s->{attrs}{'http.response.status_code'}, 404, 'status';
        is $s->{attrs}{'server.address'}, '127.0.0.1', 'server.address';
        is $s->{attrs}{'server.port'}, $port, 'server.port';
        is $s->{attrs}{'client.address'}, '127.0.0.1', 'client.address';
        like $s->{attrs}{'client.port'}, qr/^\d+$/, 'client.port';
        is $s->{attr_types}{'client.port'}, 'int', 'client.port is an int';
        is $s->{attrs}{'network.protocol.version'}, '1.1', 'protocol';
        is $s->{attrs}{'user_agent.original'}, 'ua-test/2', 'user agent';
        ok $s->{attrs}{'http.response.body.size'} > 0, 'response body size';
        is $s->{attrs}{'app.tenant'}, 'acme', 'OtelSpanAttr with an expression';
        is $s->{attrs}{'app.const'}, 'fixed', 'OtelSpanAttr constant';
        is $s->{kind}, 'SPAN_KIND_SERVER', 'kind';
        is $s->{resource}{'service.name'}, 'apache-tracing', 'service.name';
        ok grep({ $_ == $s->{resource}{'process.pid'} } $ap->child_pids) || $mpm eq 'prefork',
            'process.pid is a child';
        is $s->{scope}{name}, 'spanprof', 'scope';
        ok $s->{end} >= $s->{start} && $s->{start} > 0, 'times';

        my ($in) = $span->('inner');
        is $in->{name}, 'GET /api/inner/', 'nested location route';
        is $in->{attrs}{'app.only'}, 'inner', 'own OtelSpanAttr';
        ok !exists $in->{attrs}{'app.const'}, 'inherited list replaced';

        my ($nm) = $span->('named');
        is $nm->{name}, "custom GET $req{named}{path}", 'OtelSpanName expression';
        my ($re) = $span->('re');
        is $re->{name}, 'GET', 'no route for a LocationMatch';
        ok !exists $re->{attrs}{'http.route'}, 'no http.route';
        is $re->{attrs}{'app.re'}, 'yes', 'LocationMatch settings apply';
        my ($o) = $span->('other');
        is $o->{name}, 'GET', 'no route outside any Location';

        my ($e) = $span->('err');
        is $req{err}{res}{status}, 503, 'status 503';
        is $e->{status_code}, 'STATUS_CODE_ERROR', '5xx: ERROR';
        is $e->{attrs}{'error.type'}, '503', 'error.type';

        my @off = $span->('off');
        is scalar @off, 0, 'OtelTrace Off in a Location: no span';
        unlike $req{off}{res}{headers}{'x-trace-id'} // '', qr/[0-9a-f]{32}/,
            'no OTEL_* environment where nothing traces, propagates or profiles';

        my @g = $span->('gone');
        is scalar @g, 1, 'ErrorDocument (internal redirect): one span';
        my $g = $g[0];
        is $g->{attrs}{'http.response.status_code'}, 410, 'with the status sent';
        is scalar(grep { ($_->{attrs}{'url.path'} // '') eq '/errdoc.html' } @all), 0, 'no span for the error document';

        my ($p) = $span->('post');
        ok $p, 'POST span' or return;
        is $p->{name}, 'POST /api/', 'POST name';
        is $p->{attrs}{'http.request.body.size'}, 100, 'request body size';

        # The module's attributes are written as one row: each once, in
        # this order (the user's OtelSpanAttr after them).
        is_deeply $s->{attr_keys}, [qw(http.request.method url.path url.query
            url.scheme http.route http.response.status_code server.address
            server.port client.address client.port network.protocol.version
            user_agent.original http.response.body.size app.tenant app.const)],
            'GET: every attribute once, in order';
        is_deeply $p->{attr_keys}, [qw(http.request.method url.path url.scheme
            http.route http.response.status_code server.address server.port
            client.address client.port network.protocol.version
            user_agent.original http.request.body.size
            http.response.body.size app.tenant app.const)],
            'POST: every attribute once, in order';

        # A method that is none of the standard ones: "_OTHER" and the
        # method as sent, before the row.
        my ($u) = $span->('purge');
        ok $u, 'PURGE span' or return;
        is $u->{name}, 'HTTP /api/', 'PURGE: named HTTP {route}';
        is $u->{attrs}{'http.request.method'}, '_OTHER', 'PURGE: method _OTHER';
        is $u->{attrs}{'http.request.method_original'}, 'PURGE', 'PURGE: method_original';
        is_deeply [ @{ $u->{attr_keys} }[0 .. 4] ], [qw(http.request.method
            http.request.method_original url.path url.scheme http.route)],
            'PURGE: the method attributes first, then the row';
    };

    subtest 'environment: access log and CGI' => sub {
        my %log;
        for my $l (split /\n/, $ap->access_log) {
            my ($path, $st, $t, $sid, $par, $tp) = $l =~ /^(\S+) (\d+) (\S+) (\S+) \[(.*?)\] (\S+)$/ or next;
            $log{$path} = { trace => $t, span => $sid, parent => $par, tp => $tp, status => $st };
        }
        my $checked = 0;
        for my $key (qw(api denied auth propagate/tp inject/none)) {
            my ($s) = $span->($key);
            (my $p = $req{$key}{path}) =~ s/\?.*//;
            my $l = $log{$p};
            ok $l, "$key: logged" or next;
            is $l->{trace}, $s->{trace_id}, "$key: %{OTEL_TRACE_ID}e";
            is $l->{span}, $s->{span_id}, "$key: %{OTEL_SPAN_ID}e";
            is $l->{parent}, $s->{parent_span_id}, "$key: %{OTEL_PARENT_ID}e";
            like $l->{tp}, qr/^00-$s->{trace_id}-[0-9a-f]{16}-0[0-3]$/, "$key: %{OTEL_TRACEPARENT}e";
            $checked++;
        }
        is $checked, 5, 'all logged';
        my ($c) = grep { ($_->{attrs}{'url.path'} // '') eq '/env.cgi' && ($_->{attrs}{'url.query'} // '') eq ($req{cgi}{path} =~ s/.*\?//r) } server_spans(@all);
        ok $c, 'CGI span' or return;
        like $req{cgi}{res}{content}, qr/^trace=$c->{trace_id} span=$c->{span_id} parent= tp=00-$c->{trace_id}-[0-9a-f]{16}-03$/,
            'CGI environment (default mode: the client parent is not extracted)';
    };

    subtest 'invalid traceparent forms' => sub {
        for my $c (@inv) {
            my ($name, $tp, $res, $valid) = @$c;
            for my $mode ('p', 'e') {
                my $q = $res->{$mode};
                my @s = by_path($q->{path}, @all);
                is scalar @s, 1, "$mode $name: one span" or next;
                my $s = $s[0];
                my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@all);
                if ($valid) {
                    is $s->{trace_id}, $T, "$mode $name: continued";
                } else {
                    ok $s->{trace_id} ne $T && $s->{trace_id} ne $T2 && $s->{trace_id} =~ /^[0-9a-f]{32}$/,
                        "$mode $name: new trace";
                    is $s->{parent_span_id}, '', "$mode $name: no parent";
                }
                my ($up_tp, $up_ts) = @{ $q->{echo} };
                if ($mode eq 'p') {
                    is $up_tp, "00-$s->{trace_id}-" . ($cl ? $cl->{span_id} : '?') . '-0' . ($valid ? 1 : 3),
                        "$mode $name: our traceparent sent";
                    is $up_ts, $valid ? 'congo=t61rcWkgMzE' : '', "$mode $name: tracestate " . ($valid ? 'kept' : 'dropped');
                } else {
                    is $up_tp, ref $tp ? join(', ', @$tp) : $tp, "$mode $name: client's traceparent passed";
                }
            }
        }
    };

    is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
    $ap->stop;
}

# Waits until the span of every request made arrived (each prefork child
# exports on its own).
sub wait_all {
    my ($recv, $req, $inv) = @_;
    my %want;
    for my $q (values %$req) {
        next unless defined $q->{path};
        next if $q->{path} =~ m{^/off/};
        (my $p = $q->{path}) =~ s/\?.*//;
        $want{$p} = 1;
    }
    for my $c (@$inv) {
        $want{ $c->[2]{$_}{path} } = 1 for keys %{ $c->[2] };
    }
    my @all;
    SpanProf::Test::wait_until(10, sub {
        @all = dedupe(collect_spans($recv));
        my %have = map { ($_->{attrs}{'url.path'} // '') => 1 } server_spans(@all);
        return !grep { !$have{$_} } keys %want;
    });
    sleep 0.3;
    return dedupe(collect_spans($recv));
}

sub dedupe {
    my %seen;
    return grep { !$seen{ $_->{span_id} }++ } @_;
}

sub invalid_forms {
    my @inv = (
        ['version ff'                 => "ff-$T-$P-01"],
        ['uppercase trace id'         => '00-' . uc($T) . "-$P-01"],
        ['uppercase flags'            => "00-$T-$P-0A"],
        ['short version'              => "0-$T-$P-01"],
        ['trace id too short'         => '00-' . substr($T, 1) . "-$P-01"],
        ['parent id too long'         => "00-$T-${P}a-01"],
        ['flags too long'             => "00-$T-$P-011"],
        ['all-zero trace id'          => '00-' . ('0' x 32) . "-$P-01"],
        ['all-zero parent id'         => "00-$T-" . ('0' x 16) . '-01'],
        ['bad separator _'            => "00_$T-$P-01"],
        ['non-hex character'          => '00-' . substr($T, 0, 31) . "g-$P-01"],
        ['version 00 with extra data' => "00-$T-$P-01-extra"],
        ['garbage'                    => 'not a traceparent'],
        ['empty'                      => ''],
        ['two traceparent headers'    => ["00-$T-$P-01", "00-$T2-$P2-01"]],
        # httpd joins the lines with ", ": invalid as in nginx, which counts them.
        ['two traceparent headers, a future version first' => ["cc-$T-$P-01-x", "00-$T2-$P2-01"]],
        ['two traceparent values joined on one line'       => "cc-$T-$P-01-x, 00-$T2-$P2-01"],
    );
    my @valid = (
        ['valid version 00'                 => "00-$T-$P-01"],
        ['future version with extra fields' => "cc-$T-$P-01-what-the-future-will-be-like"],
    );
    return ((map { [ $_->[0], $_->[1], {}, 0 ] } @inv), (map { [ $_->[0], $_->[1], {}, 1 ] } @valid));
}
