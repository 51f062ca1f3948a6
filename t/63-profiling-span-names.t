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

sub check_names {
    my ($label, $spans, %want) = @_;
    for my $path (sort keys %want) {
        my @s = grep { ($_->{attrs}{'url.path'} // '') eq $path } server_spans(@$spans);
        is scalar(@s), 1, "$label: one SERVER span for $path" or next;
        is $s[0]{name}, $want{$path}, "$label: $path is named \"$want{$path}\"";
        ok exists $s[0]{attrs}{'pyroscope.profile.id'}, "$label: $path was profiled"
            unless $want{$path} eq 'custom' || $path eq '/off/x';
    }
}

subtest 'nginx' => sub {
    my $recv = start_receiver();
    my $ngx  = start_nginx(receiver => $recv, conf => <<"EOF");
otel_exporter { endpoint %%RECEIVER%%; interval 100ms; }
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
    my $P = $ngx->port;
    is http_get($P, '/plain/a')->{status}, 200, 'GET /plain/a';
    is http_request('POST', $P, '/plain/b', content => 'x')->{status}, 200, 'POST /plain/b';
    is http_get($P, '/err/c')->{status}, 200, 'GET /err/c (error_page into /landing/)';
    is http_get($P, '/named/d')->{status}, 200, 'GET /named/d (error_page into @fallback)';
    is http_get($P, "$LONG/e")->{status}, 200, 'GET of the long location';
    is http_get($P, '/custom/f')->{status}, 200, 'GET /custom/f';
    is http_get($P, '/off/x')->{status}, 200, 'GET /off/x';
    my @spans = sync_spans($recv, $P);
    check_names('nginx', \@spans,
        '/plain/a' => 'GET /plain/',
        '/plain/b' => 'POST /plain/',
        '/err/c'   => 'GET /landing/',
        '/named/d' => 'GET',
        "$LONG/e"  => "GET $LONG",
        '/custom/f' => 'custom',
        '/off/x'   => 'GET /off/');
};

subtest 'apache (event)' => sub {
    plan skip_all => 'apache2 or mod_spanprof.so missing'
        unless -x '/usr/sbin/apache2' && -f apache_module_path();
    my $recv = start_receiver();
    my $ap = start_apache(mpm => 'event', receiver => $recv, conf => <<"EOF");
OtelExporterEndpoint %%RECEIVER%%
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
    my $P = $ap->port;
    is http_get($P, '/plain/a')->{status}, 200, 'GET /plain/a';
    is http_request('POST', $P, '/plain/b', content => 'x')->{status}, 200, 'POST /plain/b';
    is http_get($P, '/err/c')->{status}, 404, 'GET /err/c (ErrorDocument into /landing: 404 kept)';
    is http_get($P, "$LONG/e")->{status}, 200, 'GET of the long location';
    is http_get($P, '/custom/f')->{status}, 200, 'GET /custom/f';
    is http_get($P, '/off/x')->{status}, 200, 'GET /off/x';
    $ap->stop;
    my @spans = collect_spans($recv);
    check_names('apache', \@spans,
        '/plain/a' => 'GET /plain',
        '/plain/b' => 'POST /plain',
        '/err/c'   => 'GET /landing',
        "$LONG/e"  => "GET $LONG",
        '/custom/f' => 'custom',
        '/off/x'   => 'GET /off');
};

done_testing;
