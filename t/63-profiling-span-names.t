#!/usr/bin/perl
# In a profiled location the SERVER span is named as anywhere else, although
# the module then takes the name from the samples' labels (made at the
# rewrite phase / fixups) when the request's location and method are still
# those it was made of: a plain request, a method other than GET, an
# internal redirect into another location (error_page / ErrorDocument), a
# named location (no route: the method alone), a route too long for the
# labels (which hold 78 bytes of it: the span keeps all of it), and
# otel_span_name / OtelSpanName. nginx first, then Apache (event MPM).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_module();

my $LONG = '/long-' . ('x' x 90);

# Each case: [method, path, status, expected span name, profiled].
sub send_requests {
    my ($label, $port, @cases) = @_;
    for my $c (@cases) {
        my ($method, $path, $status) = @$c;
        my $r = http_request($method, $port, $path,
            $method eq 'POST' ? (content => 'x') : ());
        is $r->{status}, $status, "$label: $method $path answered $status";
    }
}

sub check_names {
    my ($label, $spans, @cases) = @_;
    for my $c (@cases) {
        my ($method, $path, undef, $name, $profiled) = @$c;
        my @s = grep { ($_->{attrs}{'url.path'} // '') eq $path } server_spans(@$spans);
        is scalar(@s), 1, "$label: one SERVER span for $path" or next;
        is $s[0]{name}, $name, "$label: $method $path is named \"$name\"";
        is exists $s[0]{attrs}{'pyroscope.profile.id'} ? 1 : 0, $profiled,
            "$label: $path " . ($profiled ? 'was' : 'was not') . ' profiled';
    }
}

subtest 'nginx' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, conf => <<"EOF");
otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
otel_profiling_rate 100;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /plain/ { return 200 "plain\\n"; }
    location /err/ { error_page 404 = /landing/x; return 404; }
    location /landing/ { return 200 "landing\\n"; }
    location /named/ { error_page 404 = \@fallback; return 404; }
    location \@fallback { return 200 "fallback\\n"; }
    location $LONG { return 200 "long\\n"; }
    location /custom/ { otel_span_name custom; return 200 "custom\\n"; }
    location /off/ { otel_profiling off; return 200 "off\\n"; }
    location / { return 200 "sync\\n"; }
}
EOF
    my @cases = (
        [GET  => '/plain/a',  200, 'GET /plain/',   1],
        [POST => '/plain/b',  200, 'POST /plain/',  1],
        [GET  => '/err/c',    200, 'GET /landing/', 1],   # error_page
        [GET  => '/named/d',  200, 'GET',           1],   # into @fallback
        [GET  => "$LONG/e",   200, "GET $LONG",     1],
        [GET  => '/custom/f', 200, 'custom',        1],
        [GET  => '/off/x',    200, 'GET /off/',     0],
    );
    send_requests('nginx', $ngx->port, @cases);
    check_names('nginx', [sync_spans($recv, $ngx->port)], @cases);
};

subtest 'apache (event)' => sub {
    plan skip_all => 'apache2 or mod_spanprof.so missing'
        unless -x '/usr/sbin/apache2' && -f apache_module_path();
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'event', receiver => $recv, conf => <<"EOF");
OtelExporterEndpoint %%RECEIVER%%
OtelExporterProtocol http/protobuf
OtelExporterInterval 0.1
OtelProfilingRate 100
OtelTrace On
OtelProfiling On
ErrorDocument 200 "ok"
<Location /plain>
    Redirect 200 /plain
</Location>
<Location /err>
    ErrorDocument 404 /landing/x
</Location>
<Location /landing>
    Redirect 200 /landing
</Location>
<Location $LONG>
    Redirect 200 $LONG
</Location>
<Location /custom>
    OtelSpanName custom
    Redirect 200 /custom
</Location>
<Location /off>
    OtelProfiling Off
    Redirect 200 /off
</Location>
EOF
    my @cases = (
        [GET  => '/plain/a',  200, 'GET /plain',    1],
        [POST => '/plain/b',  200, 'POST /plain',   1],
        [GET  => '/err/c',    404, 'GET /landing',  1],   # ErrorDocument
        [GET  => "$LONG/e",   200, "GET $LONG",     1],
        [GET  => '/custom/f', 200, 'custom',        1],
        [GET  => '/off/x',    200, 'GET /off',      0],
    );
    send_requests('apache', $ap->port, @cases);
    $ap->stop;
    check_names('apache', [collect_spans($recv)], @cases);
};

done_testing;
