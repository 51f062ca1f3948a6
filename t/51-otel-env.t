#!/usr/bin/perl
# OTEL_* environment variables (the OpenTelemetry SDK's), read by nginx's
# master and Apache's parent at configuration time as defaults that the
# directives override: spans reach a collector configured only through
# them ({base}/v1/traces for OTEL_EXPORTER_OTLP_ENDPOINT, the URL as is for
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), with their service name, resource
# attributes (percent-decoded), headers and compression; a directive wins
# over its variable; a malformed variable is a configuration error naming
# it; no endpoint anywhere is an error. The API says the protocol in force.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use JSON::PP qw(decode_json);
use SpanProf::Test;
use SpanProf::Apache;

need_module();

my %ENV_HTTP = (OTEL_EXPORTER_OTLP_PROTOCOL => 'http/protobuf');

sub traces_requests {
    my ($recv, $path) = @_;
    return grep { $_->{method} eq 'POST' && $_->{path} eq $path } $recv->requests;
}

# The spans of the requests to $path, waited for (at least one).
sub spans_at {
    my ($recv, $path, $timeout) = @_;
    my @s;
    wait_until($timeout // 10, sub {
        @s = map { request_spans($recv, $_) } traces_requests($recv, $path);
        return scalar @s;
    });
    return @s;
}

my $SERVER = <<'EOF';
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 204; }
    location = /api { otel_trace off; otel_api; }
}
EOF

# The same with a block that only shortens the flush interval (5 s by
# default), for the cases that are not about having no block.
my $SERVER_FAST = "otel_exporter { interval 100ms; }\n$SERVER";

subtest 'nginx: no otel_exporter block, everything from variables' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(conf => $SERVER, env => {
        %ENV_HTTP,
        OTEL_EXPORTER_OTLP_ENDPOINT => $recv->url . '/base/',
        OTEL_SERVICE_NAME           => 'env-svc',
        OTEL_RESOURCE_ATTRIBUTES    => 'deployment.environment=env%20test, team = a%2Cb ,x=%E2%82%AC',
        OTEL_EXPORTER_OTLP_HEADERS  => 'x-api-key=s%3Dcr%20t,X-Tenant=t1',
        OTEL_EXPORTER_OTLP_COMPRESSION => 'gzip',
    });
    is http_get($ngx->port, '/env')->{status}, 204, 'request served';
    my @s = spans_at($recv, '/base/v1/traces');
    ok @s, 'spans at {OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces' or diag $recv->summary;
    my ($req) = traces_requests($recv, '/base/v1/traces');
    SKIP: {
        skip 'no request', 8 unless $req;
        is $s[0]{resource}{'service.name'}, 'env-svc', 'OTEL_SERVICE_NAME';
        is $s[0]{resource}{'deployment.environment'}, 'env test', 'OTEL_RESOURCE_ATTRIBUTES, percent-decoded';
        is $s[0]{resource}{team}, 'a,b', 'an encoded comma, blanks trimmed';
        is $s[0]{resource}{x}, "\xe2\x82\xac", 'UTF-8 bytes';
        is $req->{headers}{'x-api-key'}, 's=cr t', 'OTEL_EXPORTER_OTLP_HEADERS reach the collector, decoded';
        is $req->{headers}{'x-tenant'}, 't1', 'the second header';
        is $req->{raw_encoding}, 'gzip', 'OTEL_EXPORTER_OTLP_COMPRESSION=gzip';
        is $req->{headers}{'content-type'}, 'application/x-protobuf', 'OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf';
    }
    my $api = http_get($ngx->port, '/api');
    my $j = eval { decode_json($api->{content}) } || {};
    is $j->{config}{protocol}, 'http/protobuf', 'API: the protocol in force';
    is $j->{config}{endpoint}, $recv->url . '/base/', 'API: the endpoint from the variable';
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx: directives win over variables' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(conf => <<"EOF" . $SERVER, env => {
otel_exporter { interval 100ms; header X-Tenant from-directive; }
otel_service_name dir-svc;
otel_resource_attr team dir-team;
EOF
        %ENV_HTTP,
        OTEL_EXPORTER_OTLP_ENDPOINT => $recv->url,
        OTEL_SERVICE_NAME           => 'env-svc',
        OTEL_RESOURCE_ATTRIBUTES    => 'team=env-team,region=env-region',
        OTEL_EXPORTER_OTLP_HEADERS  => 'x-tenant=from-env,x-other=o',
    });
    is http_get($ngx->port, '/d')->{status}, 204, 'request served';
    my @s = spans_at($recv, '/v1/traces');
    ok @s, 'spans from a block without endpoint, the variable giving it' or diag $recv->summary;
    my ($req) = traces_requests($recv, '/v1/traces');
    is $s[0] && $s[0]{resource}{'service.name'}, 'dir-svc', 'otel_service_name wins';
    is $s[0] && $s[0]{resource}{team}, 'dir-team', 'otel_resource_attr wins for its key';
    is $s[0] && $s[0]{resource}{region}, 'env-region', 'the other variable attributes stay';
    is $req && $req->{headers}{'x-tenant'}, 'from-directive', 'the header directive wins (names are case-insensitive)';
    is $req && $req->{headers}{'x-other'}, 'o', 'the other variable headers stay';
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(conf => $SERVER_FAST, env => {
        %ENV_HTTP,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT => $recv->url . '/custom/traces',
        OTEL_EXPORTER_OTLP_ENDPOINT        => 'http://127.0.0.1:1/unused',
    });
    is http_get($ngx->port, '/t')->{status}, 204, 'request served';
    ok spans_at($recv, '/custom/traces'), 'spans at the traces URL, nothing appended'
        or diag $recv->summary;
    my $j = eval { decode_json(http_get($ngx->port, '/api')->{content}) } || {};
    is $j->{config}{traces_url}, $recv->url . '/custom/traces', 'API: the traces URL';
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx: env NAME=value in nginx.conf counts as the variable' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(conf => $SERVER_FAST,
        main => "env OTEL_SERVICE_NAME=from-env-directive;\nenv OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf;",
        env  => { OTEL_EXPORTER_OTLP_ENDPOINT => $recv->url, OTEL_SERVICE_NAME => 'from-environment' });
    http_get($ngx->port, '/e');
    my @s = spans_at($recv, '/v1/traces');
    is $s[0] && $s[0]{resource}{'service.name'}, 'from-env-directive', 'env OTEL_SERVICE_NAME=... wins over the environment'
        or diag $recv->summary;
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx: a reload reads the master environment again (unchanged)' => sub {
    my $recv = start_receiver();
    my $ngx = start_nginx(conf => $SERVER_FAST, env => {
        %ENV_HTTP, OTEL_EXPORTER_OTLP_ENDPOINT => $recv->url, OTEL_SERVICE_NAME => 'before-reload',
    });
    my @new = $ngx->reload;
    ok @new, 'new workers';
    http_get($ngx->port, '/after-reload');
    my @s;
    wait_until(10, sub {
        @s = grep { ($_->{attrs}{'url.path'} // '') eq '/after-reload' } collect_spans($recv);
        return scalar @s;
    });
    is $s[0] && $s[0]{resource}{'service.name'}, 'before-reload',
        'the new workers export with the variables the master was started with' or diag $recv->summary;
    $ngx->stop;
    $recv->stop;
};

subtest 'nginx: nginx-otel configuration, default protocol' => sub {
    my $port = free_port();
    my $ngx = start_nginx(conf => "otel_exporter { endpoint 127.0.0.1:$port; }\n" . $SERVER);
    my $j = eval { decode_json(http_get($ngx->port, '/api')->{content}) } || {};
    is $j->{config}{protocol}, 'grpc', 'API: grpc is the default protocol';
    is $j->{config}{endpoint}, "http://127.0.0.1:$port", 'API: a bare host:port is plaintext';
    $ngx->stop;
};

my @bad = (
    [OTEL_EXPORTER_OTLP_TIMEOUT => '10s', qr/expected milliseconds/],
    [OTEL_EXPORTER_OTLP_PROTOCOL => 'http', qr/invalid value "http"/],
    [OTEL_EXPORTER_OTLP_COMPRESSION => 'br', qr/expected gzip or none/],
    [OTEL_RESOURCE_ATTRIBUTES => 'a=%zz', qr/invalid percent-encoding/],
    [OTEL_EXPORTER_OTLP_HEADERS => 'no-equals-sign', qr/not key=value/],
    [OTEL_EXPORTER_OTLP_ENDPOINT => 'ftp://collector', qr/invalid endpoint/],
    [OTEL_EXPORTER_OTLP_TRACES_ENDPOINT => 'collector', qr/has no port/],
);
for my $b (@bad) {
    my ($var, $val, $why) = @$b;
    subtest "nginx: malformed $var" => sub {
        my ($rc, $out) = nginx_t($SERVER, env => { OTEL_EXPORTER_OTLP_ENDPOINT => 'http://127.0.0.1:4318', $var => $val });
        isnt $rc, 0, 'nginx -t fails';
        like $out, qr/invalid environment variable \Q$var\E: /, 'the error names the variable' or diag $out;
        like $out, $why, 'and says what is wrong';
    };
}

subtest 'nginx: a path in OTEL_EXPORTER_OTLP_ENDPOINT under grpc' => sub {
    my ($rc, $out) = nginx_t($SERVER, env => { OTEL_EXPORTER_OTLP_ENDPOINT => 'http://127.0.0.1:4318/base' });
    isnt $rc, 0, 'nginx -t fails';
    like $out, qr{OTEL_EXPORTER_OTLP_ENDPOINT "http://127.0.0.1:4318/base" has a path, which OTLP/gRPC does not use}, 'says why' or diag $out;
};

subtest 'nginx: no endpoint anywhere' => sub {
    my ($rc, $out, $path, $text) = nginx_t($SERVER, env => { OTEL_SERVICE_NAME => 'x' });
    isnt $rc, 0, 'nginx -t fails';
    my $line = conf_line($text, qr/otel_trace on/);
    like $out, qr/"otel_trace" is enabled in \Q$path\E:$line but no "otel_exporter" is configured and neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set/,
        'file:line of otel_trace, and the variables named' or diag $out;
    ($rc, $out) = nginx_t($SERVER, env => { OTEL_EXPORTER_OTLP_ENDPOINT => 'http://127.0.0.1:4318' });
    is $rc, 0, 'the same configuration passes with the variable' or diag $out;
};

# --- Apache -------------------------------------------------------------------

SKIP: {
    skip 'Apache module not built', 1 unless -x '/usr/sbin/apache2' && -f apache_module_path();

    my $AP = "OtelTrace On\nOtelExporterInterval 0.1\nAliasMatch ^/ok %%PREFIX%%/htdocs/ok.txt\n";
    my %FILES = ('htdocs/ok.txt' => "ok\n");

    subtest 'apache: everything from variables, directives win' => sub {
        my $recv = start_receiver();
        my $ap = start_apache(mpm => 'event', files => \%FILES,
            conf => "OtelServiceName dir-svc\nOtelExporterHeader X-Tenant from-directive\n$AP",
            env => {
                %ENV_HTTP,
                OTEL_EXPORTER_OTLP_ENDPOINT => $recv->url . '/base',
                OTEL_SERVICE_NAME           => 'env-svc',
                OTEL_RESOURCE_ATTRIBUTES    => 'region=eu%2Dwest,team=t',
                OTEL_EXPORTER_OTLP_HEADERS  => 'x-api-key=k%20ey,x-tenant=from-env',
            });
        is http_get($ap->port, '/ok')->{status}, 200, 'request served';
        my @s = spans_at($recv, '/base/v1/traces');
        ok @s, 'spans at {OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces' or diag $recv->summary;
        my ($req) = traces_requests($recv, '/base/v1/traces');
        is $s[0] && $s[0]{resource}{'service.name'}, 'dir-svc', 'OtelServiceName wins';
        is $s[0] && $s[0]{resource}{region}, 'eu-west', 'OTEL_RESOURCE_ATTRIBUTES, decoded';
        is $req && $req->{headers}{'x-api-key'}, 'k ey', 'OTEL_EXPORTER_OTLP_HEADERS reach the collector';
        is $req && $req->{headers}{'x-tenant'}, 'from-directive', 'OtelExporterHeader wins';
        $ap->stop;
        $recv->stop;
    };

    subtest 'apache: service name from OTEL_SERVICE_NAME, traces URL as is' => sub {
        my $recv = start_receiver();
        my $ap = start_apache(mpm => 'event', files => \%FILES, conf => $AP, env => {
            %ENV_HTTP,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT => $recv->url . '/custom/traces',
            OTEL_SERVICE_NAME => 'env-svc',
        });
        http_get($ap->port, '/ok');
        my @s = spans_at($recv, '/custom/traces');
        ok @s, 'spans at OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' or diag $recv->summary;
        is $s[0] && $s[0]{resource}{'service.name'}, 'env-svc', 'OTEL_SERVICE_NAME';
        $ap->stop;
        $recv->stop;
    };

    subtest 'apache: malformed variable' => sub {
        my ($code, $out) = apache_t($AP, env => { OTEL_EXPORTER_OTLP_ENDPOINT => 'http://127.0.0.1:4318',
                                                  OTEL_EXPORTER_OTLP_TIMEOUT => 'soon' });
        isnt $code, 0, 'apache2 -t fails';
        like $out, qr/invalid environment variable OTEL_EXPORTER_OTLP_TIMEOUT: invalid value "soon"/, 'names the variable' or diag $out;
    };

    subtest 'apache: no endpoint anywhere' => sub {
        my ($code, $out, $path, $full) = apache_t($AP);
        isnt $code, 0, 'apache2 -t fails';
        my $line = conf_line($full, qr/OtelTrace On/);
        like $out, qr/OtelTrace On in \Q$path\E:$line but no OtelExporterEndpoint is configured and neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set/,
            'file:line and the variables named' or diag $out;
        ($code, $out) = apache_t($AP, env => { OTEL_EXPORTER_OTLP_ENDPOINT => 'collector:4317' });
        is $code, 0, 'passes with the variable (nginx-otel form, grpc)' or diag $out;
    };
}

done_testing;
