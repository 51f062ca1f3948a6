#!/usr/bin/perl
# otel_propagation / OtelPropagation (w3c, b3, b3multi) and the Level 2 W3C
# tracestate, in nginx and Apache (event MPM), through a real proxy to a
# recording upstream (t/receiver.pl stores every header it receives):
# B3 single and multi header extraction (64- and 128-bit trace ids, debug,
# "b3: 0" deny), W3C first then the configured order, invalid values falling
# back to the next format, inject writing every configured format, the
# trace headers of other formats (b3, X-B3-*, uber-trace-id, traceparent and
# tracestate without w3c) removed in inject/propagate and left alone in
# ignore/extract, baggage untouched, server-level settings inherited, and
# tracestate with Level 2 keys, OWS, empty members and duplicate keys
# propagated.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_module();

my $T1  = '4bf92f3577b34da6a3ce929d0e0e4736';
my $T2  = '80f198ee56343ba864fe8b2a57d3eff7';
my $T3  = '0af7651916cd43dd8448eb211c80319c';
my $T64 = 'a3ce929d0e0e4736';
my $S1  = '00f067aa0ba902b7';
my $S2  = 'e457b5a2e4d86bd1';
my $S3  = 'b7ad6b7169203331';
my $PAR = '05e3ac9a4f6e3b90';
my $BAGGAGE = 'userId=alice,serverNode=DF%2028';
my $UBER = "$T64:$S1:0:1";

# Every trace header of every format, as sent by a confused client.
my %FOREIGN = (
    'traceparent'       => "00-$T3-$S3-01",
    'tracestate'        => 'rojo=00f067aa0ba902b7',
    'b3'                => "$T2-$S2-1",
    'X-B3-TraceId'      => $T1,
    'X-B3-SpanId'       => $S1,
    'X-B3-ParentSpanId' => $PAR,
    'X-B3-Sampled'      => '1',
    'X-B3-Flags'        => '1',
    'uber-trace-id'     => $UBER,
    'baggage'           => $BAGGAGE,
);
my @TRACE_HEADERS = qw(traceparent tracestate b3 x-b3-traceid x-b3-spanid
                       x-b3-parentspanid x-b3-sampled x-b3-flags uber-trace-id);

# name, location prefix, request headers, expectations:
#   trace  => incoming trace id (32 hex) or 'new'
#   parent => incoming parent span id, or '' (none)
#   sent   => the formats written upstream (ours: ids of the spans)
#   asis   => 1: every header reaches the upstream exactly as sent
#   ts     => the tracestate the upstream gets (with w3c in 'sent')
my @CASES = (
    # B3 single header
    ['b3 128-bit sampled', '/b3-prop/', { b3 => "$T2-$S2-1" },
        trace => $T2, parent => $S2, psampled => 1, sent => ['b3']],
    ['b3 64-bit, left-padded', '/b3-prop/', { b3 => "$T64-$S2-1" },
        trace => ('0' x 16) . $T64, parent => $S2, psampled => 1, sent => ['b3']],
    ['b3 with debug and parent span id', '/b3-prop/', { b3 => "$T2-$S2-d-$PAR" },
        trace => $T2, parent => $S2, psampled => 1, sent => ['b3']],
    ['b3 ids only (defer)', '/b3-prop/', { b3 => "$T2-$S2" },
        trace => $T2, parent => $S2, psampled => 0, sent => ['b3']],
    ['b3: 0 (deny): a new trace', '/b3-prop/', { b3 => '0' },
        trace => 'new', parent => '', sent => ['b3']],
    ['b3 invalid (uppercase): a new trace', '/b3-prop/', { b3 => uc("$T2-$S2-1") },
        trace => 'new', parent => '', sent => ['b3']],
    ['b3 not configured: not read', '/w3c-prop/', { b3 => "$T2-$S2-1" },
        trace => 'new', parent => '', sent => ['w3c']],

    # B3 multiple headers
    ['b3multi 128-bit', '/b3m-prop/',
        { 'X-B3-TraceId' => $T2, 'X-B3-SpanId' => $S2, 'X-B3-Sampled' => '1',
          'X-B3-ParentSpanId' => $PAR, 'X-B3-Flags' => '1' },
        trace => $T2, parent => $S2, psampled => 1, sent => ['b3multi']],
    ['b3multi 64-bit', '/b3m-prop/',
        { 'X-B3-TraceId' => $T64, 'X-B3-SpanId' => $S2, 'X-B3-Sampled' => '0' },
        trace => ('0' x 16) . $T64, parent => $S2, psampled => 0, sent => ['b3multi']],
    ['b3multi without span id: a new trace', '/b3m-prop/',
        { 'X-B3-TraceId' => $T2, 'X-B3-Sampled' => '1' },
        trace => 'new', parent => '', sent => ['b3multi']],

    # order: w3c first, then as configured
    ['w3c first although configured last', '/all-prop/',
        { traceparent => "00-$T1-$S1-01", b3 => "$T2-$S2-1",
          'X-B3-TraceId' => $T3, 'X-B3-SpanId' => $S3 },
        trace => $T1, parent => $S1, psampled => 1, sent => [qw(w3c b3 b3multi)]],
    ['invalid traceparent: falls back to b3', '/all-prop/',
        { traceparent => "00-$T1-" . ('0' x 16) . '-01', b3 => "$T2-$S2-1",
          'X-B3-TraceId' => $T3, 'X-B3-SpanId' => $S3 },
        trace => $T2, parent => $S2, psampled => 1, sent => [qw(w3c b3 b3multi)]],
    ['b3 before b3multi as configured', '/all-prop/',
        { b3 => "$T2-$S2-1", 'X-B3-TraceId' => $T3, 'X-B3-SpanId' => $S3 },
        trace => $T2, parent => $S2, psampled => 1, sent => [qw(w3c b3 b3multi)]],
    ['b3multi before b3 as configured', '/b3m-b3-prop/',
        { b3 => "$T2-$S2-1", 'X-B3-TraceId' => $T3, 'X-B3-SpanId' => $S3 },
        trace => $T3, parent => $S3, psampled => 0, sent => [qw(b3multi b3)]],
    ['invalid b3multi: falls back to b3', '/b3m-b3-prop/',
        { b3 => "$T2-$S2-1", 'X-B3-TraceId' => $T3, 'X-B3-SpanId' => 'zz' },
        trace => $T2, parent => $S2, psampled => 1, sent => [qw(b3multi b3)]],

    # inject writes every configured format; foreign headers removed
    ['inject: every configured format', '/all-inject/', {},
        trace => 'new', parent => '', sent => [qw(w3c b3 b3multi)]],
    ['inject b3: every other trace header removed, baggage kept', '/b3-inject/', {%FOREIGN},
        trace => 'new', parent => '', sent => ['b3']],
    ['propagate w3c: b3, X-B3-*, uber-trace-id removed, baggage kept', '/w3c-prop/', {%FOREIGN},
        trace => $T3, parent => $S3, psampled => 1, sent => ['w3c'], ts => 'rojo=00f067aa0ba902b7'],
    ['propagate b3multi: traceparent, tracestate, b3 removed', '/b3m-prop/', {%FOREIGN},
        trace => $T1, parent => $S1, psampled => 1, sent => ['b3multi']],
    ['extract: every header left alone', '/b3-extract/', {%FOREIGN},
        trace => $T2, parent => $S2, psampled => 1, asis => 1],
    ['ignore: every header left alone', '/b3-ignore/', {%FOREIGN},
        trace => 'new', parent => '', asis => 1],
    ['server-level otel_propagation inherited', 'PORT3:/inherit/',
        { 'X-B3-TraceId' => $T2, 'X-B3-SpanId' => $S2, 'X-B3-Sampled' => '1' },
        trace => $T2, parent => $S2, psampled => 1, sent => [qw(b3 b3multi)]],

    # Level 2 tracestate
    ['tracestate: key starting with a digit', '/w3c-prop/',
        { traceparent => "00-$T1-$S1-01", tracestate => '1vendor=a,rojo=b' },
        trace => $T1, parent => $S1, psampled => 1, sent => ['w3c'], ts => '1vendor=a,rojo=b'],
    ['tracestate: "@" keys without tenant/system limits', '/w3c-prop/',
        { traceparent => "00-$T1-$S1-01", tracestate => 'tenant@vendor@x=a,t@averyveryverylongsystem=b' },
        trace => $T1, parent => $S1, psampled => 1, sent => ['w3c'],
        ts => 'tenant@vendor@x=a,t@averyveryverylongsystem=b'],
    ['tracestate: duplicate keys still propagated', '/w3c-prop/',
        { traceparent => "00-$T1-$S1-01", tracestate => 'congo=a,rojo=b,congo=c' },
        trace => $T1, parent => $S1, psampled => 1, sent => ['w3c'], ts => 'congo=a,rojo=b,congo=c'],
    ['tracestate: OWS and empty members dropped', '/w3c-prop/',
        { traceparent => "00-$T1-$S1-01", tracestate => ["congo=a \t, ,", " rojo=b"] },
        trace => $T1, parent => $S1, psampled => 1, sent => ['w3c'], ts => 'congo=a,rojo=b'],
    ['tracestate: invalid key still drops it', '/w3c-prop/',
        { traceparent => "00-$T1-$S1-01", tracestate => 'Congo=a' },
        trace => $T1, parent => $S1, psampled => 1, sent => ['w3c'], ts => undef],
);

my $recv = start_receiver();
my $up   = start_receiver();    # the upstream: records what it receives
my $UP   = $up->port;

my $NGX = <<"EOF";
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_service_name propagation-formats;

server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;

    location /w3c-prop/    { otel_trace_context propagate; proxy_pass http://127.0.0.1:$UP; }
    location /b3-prop/     { otel_trace_context propagate; otel_propagation b3; proxy_pass http://127.0.0.1:$UP; }
    location /b3m-prop/    { otel_trace_context propagate; otel_propagation b3multi; proxy_pass http://127.0.0.1:$UP; }
    location /all-prop/    { otel_trace_context propagate; otel_propagation b3 b3multi w3c; proxy_pass http://127.0.0.1:$UP; }
    location /b3m-b3-prop/ { otel_trace_context propagate; otel_propagation b3multi b3; proxy_pass http://127.0.0.1:$UP; }
    location /all-inject/  { otel_trace_context inject; otel_propagation w3c b3 b3multi; proxy_pass http://127.0.0.1:$UP; }
    location /b3-inject/   { otel_trace_context inject; otel_propagation b3; proxy_pass http://127.0.0.1:$UP; }
    location /b3-extract/  { otel_trace_context extract; otel_propagation b3; proxy_pass http://127.0.0.1:$UP; }
    location /b3-ignore/   { otel_trace_context ignore; otel_propagation b3; proxy_pass http://127.0.0.1:$UP; }
}

server {
    listen 127.0.0.1:%%PORT3%%;
    otel_trace on;
    otel_trace_context propagate;
    otel_propagation b3 b3multi;
    location / { proxy_pass http://127.0.0.1:$UP; }
}
EOF

my $APACHE = <<"EOF";
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
OtelServiceName propagation-formats

<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTrace On
    <Location /w3c-prop/>
        OtelTraceContext propagate
        ProxyPass http://127.0.0.1:$UP/w3c-prop/
    </Location>
    <Location /b3-prop/>
        OtelTraceContext propagate
        OtelPropagation b3
        ProxyPass http://127.0.0.1:$UP/b3-prop/
    </Location>
    <Location /b3m-prop/>
        OtelTraceContext propagate
        OtelPropagation b3multi
        ProxyPass http://127.0.0.1:$UP/b3m-prop/
    </Location>
    <Location /all-prop/>
        OtelTraceContext propagate
        OtelPropagation b3 b3multi w3c
        ProxyPass http://127.0.0.1:$UP/all-prop/
    </Location>
    <Location /b3m-b3-prop/>
        OtelTraceContext propagate
        OtelPropagation b3multi b3
        ProxyPass http://127.0.0.1:$UP/b3m-b3-prop/
    </Location>
    <Location /all-inject/>
        OtelTraceContext inject
        OtelPropagation w3c b3 b3multi
        ProxyPass http://127.0.0.1:$UP/all-inject/
    </Location>
    <Location /b3-inject/>
        OtelTraceContext inject
        OtelPropagation b3
        ProxyPass http://127.0.0.1:$UP/b3-inject/
    </Location>
    <Location /b3-extract/>
        OtelTraceContext extract
        OtelPropagation b3
        ProxyPass http://127.0.0.1:$UP/b3-extract/
    </Location>
    <Location /b3-ignore/>
        OtelTraceContext ignore
        OtelPropagation b3
        ProxyPass http://127.0.0.1:$UP/b3-ignore/
    </Location>
</VirtualHost>

<VirtualHost 127.0.0.1:%%PORT3%%>
    OtelTrace On
    OtelTraceContext propagate
    OtelPropagation b3 b3multi
    ProxyPass / http://127.0.0.1:$UP/
</VirtualHost>
EOF

sub run_server {
    my ($server, $srv) = @_;
    my $n = 0;
    my @sent;
    for my $c (@CASES) {
        my ($name, $where, $hdrs, %want) = @$c;
        my ($port, $prefix) = $where =~ /^PORT3:(.*)$/ ? ($srv->port3, $1) : ($srv->port, $where);
        my $path = sprintf '%s%s-%d-%d', $prefix, $server, $$, ++$n;
        my $r = http_get($port, $path, headers => $hdrs);
        push @sent, { name => $name, path => $path, res => $r, hdrs => $hdrs, %want };
    }
    my $last = $sent[-1]{path};
    my @all = wait_for_spans($recv, 1, 15, filter => sub { ($_[0]{attrs}{'url.path'} // '') eq $last });
    @all = collect_spans($recv);
    for my $c (@sent) {
        subtest "$server: $c->{name}" => sub { check_case($c, \@all) };
    }
    is scalar($srv->crash_lines), 0, "$server: no crash" or diag join "\n", $srv->crash_lines;
}

sub upstream_request {
    my ($path) = @_;
    my ($u) = grep { $_->{path} eq $path } $up->requests;
    return $u;
}

sub check_case {
    my ($c, $all) = @_;
    is $c->{res}{status}, 200, "GET $c->{path}: 200" or diag $c->{res}{content};
    my $u = upstream_request($c->{path});
    ok $u, 'the upstream got the request' or return;
    my $h = $u->{headers};

    my ($s) = by_path($c->{path}, @$all);
    ok $s, 'SERVER span' or return diag span_summary(@$all);
    my ($cl) = grep { $_->{parent_span_id} eq $s->{span_id} } client_spans(@$all);
    ok $cl, 'CLIENT span' or return diag span_summary(@$all);
    my $tid = $s->{trace_id};

    if ($c->{trace} eq 'new') {
        my %in = map { $_ => 1 } ($T1, $T2, $T3, ('0' x 16) . $T64);
        ok !$in{$tid}, "a new trace id ($tid)";
        is $s->{parent_span_id}, '', 'no parent';
    } else {
        is $tid, $c->{trace}, 'trace id from the request';
        is $s->{parent_span_id}, $c->{parent}, 'parent span id from the request';
    }

    # baggage always reaches the upstream as sent
    if (exists $c->{hdrs}{baggage}) {
        is $h->{baggage}, $c->{hdrs}{baggage}, 'baggage untouched';
    }

    if ($c->{asis}) {
        for my $k (keys %{ $c->{hdrs} }) {
            is $h->{lc $k}, $c->{hdrs}{$k}, "$k left as sent";
        }
        return;
    }

    my %sent = map { $_ => 1 } @{ $c->{sent} };
    my $cid = $cl->{span_id};
    my %want;
    if ($sent{w3c}) {
        like $h->{traceparent} // '', qr/^00-\Q$tid\E-\Q$cid\E-0[13]$/,
            'traceparent: the trace and the CLIENT span, sampled';
        $want{traceparent} = $h->{traceparent};
        $want{tracestate} = $c->{ts};
    }
    if ($sent{b3}) {
        $want{b3} = "$tid-$cid-1";
    }
    if ($sent{b3multi}) {
        $want{'x-b3-traceid'} = $tid;
        $want{'x-b3-spanid'}  = $cid;
        $want{'x-b3-sampled'} = '1';
    }
    # Everything else a trace header: absent (one context only).
    for my $k (@TRACE_HEADERS) {
        is $h->{$k}, $want{$k}, defined $want{$k} ? "$k: $want{$k}" : "no $k";
    }
}

# Configuration errors name the directive and the value.
subtest 'configuration errors' => sub {
    my @ngx = (
        ['otel_propagation jaeger;', qr/invalid format "jaeger" in "otel_propagation": expected w3c, b3 or b3multi/],
        ['otel_propagation b3 w3c B3;', qr/format "B3" given twice in "otel_propagation"/],
        ["otel_propagation b3;\n    otel_propagation w3c;", qr/"otel_propagation" directive is duplicate/],
        ['otel_propagation;', qr/invalid number of arguments in "otel_propagation"/],
    );
    for my $c (@ngx) {
        my ($rc, $out) = nginx_t("server {\n    listen 127.0.0.1:%%PORT%%;\n    $c->[0]\n}\n");
        isnt $rc, 0, "nginx -t fails: " . ($c->[0] =~ s/\n\s*/ /r);
        like $out, $c->[1], 'and says why' or diag $out;
    }
    my ($rc, $out) = nginx_t("otel_propagation b3multi b3 w3c;\nserver {\n    listen 127.0.0.1:%%PORT%%;\n"
        . "    location / { otel_propagation W3C; }\n}\n");
    is $rc, 0, 'nginx -t: every format, any letter case, http and location level' or diag $out;

    return if !-e apache_module_path();
    for my $c (['OtelPropagation jaeger', qr/OtelPropagation: invalid format "jaeger": expected w3c, b3 or b3multi/],
               ['OtelPropagation b3 b3', qr/OtelPropagation: format "b3" given twice/],
               ['OtelPropagation', qr/OtelPropagation: expects one or more of w3c, b3 or b3multi/]) {
        my ($arc, $aout) = apache_t("<Location />\n    $c->[0]\n</Location>\n");
        isnt $arc, 0, "apache2 -t fails: $c->[0]";
        like $aout, $c->[1], 'and says why' or diag $aout;
    }
    ($rc, $out) = apache_t("OtelPropagation b3multi b3 w3c\n<Location />\n    OtelPropagation W3C\n</Location>\n");
    is $rc, 0, 'apache2 -t: server and section level' or diag $out;
};

subtest nginx => sub {
    my $ngx = start_nginx(receiver => $recv, conf => $NGX);
    run_server('nginx', $ngx);
    $ngx->stop;
};

subtest apache => sub {
    if (!-e apache_module_path()) {
        plan skip_all => 'mod_spanprof not built';
    }
    my $ap = start_apache(mpm => 'event', receiver => $recv, conf => $APACHE);
    run_server('apache', $ap);
    $ap->stop;
};

done_testing;
