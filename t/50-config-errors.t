#!/usr/bin/perl
# Configuration errors: `nginx -t` exits non-zero and points to
# <conf path>:<line> of the bad directive. Valid configurations using every
# directive pass.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp ();
use POSIX ();
use SpanProf::Test;

need_module();

my $SERVER = <<'EOF';
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / { return 204; }
}
EOF

my @bad = (
    ['otel_trace_context bogus', <<"EOF", qr/otel_trace_context bogus/],
otel_exporter {
    endpoint http://127.0.0.1:4318; protocol http/protobuf;
}
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location / {
        otel_trace_context bogus;
        return 204;
    }
}
EOF
    ['endpoint ftp://x', <<"EOF", qr/endpoint ftp:/],
otel_exporter {
    interval 1s;
    endpoint ftp://x; protocol http/protobuf;
    batch_size 10;
}
$SERVER
EOF
    ['batch_size -1', <<"EOF", qr/batch_size -1/],
otel_exporter {
    endpoint http://127.0.0.1:4318; protocol http/protobuf;
    batch_size -1;
    interval 1s;
}
$SERVER
EOF
    ['interval abc', <<"EOF", qr/interval abc/],
otel_exporter {
    endpoint http://127.0.0.1:4318; protocol http/protobuf;
    interval abc;
}
$SERVER
EOF
    ['compression brotli', <<"EOF", qr/compression brotli/],
otel_exporter {
    endpoint http://127.0.0.1:4318; protocol http/protobuf;
    compression brotli;
}
$SERVER
EOF
    ['protocol http', <<"EOF", qr/protocol http/],
otel_exporter {
    endpoint http://127.0.0.1:4318;
    protocol http;
}
$SERVER
EOF
    ['otel_span_attr with one argument', <<"EOF", qr/otel_span_attr only_a_name/],
otel_exporter {
    endpoint http://127.0.0.1:4318; protocol http/protobuf;
}
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_span_attr app.ok value;
    otel_span_attr only_a_name;
    location / { return 204; }
}
EOF
    ['batch_size x batch_count over 65536', <<"EOF", qr/\} # end of otel_exporter/],
otel_exporter {
    endpoint http://127.0.0.1:4318; protocol http/protobuf;
    batch_size 65536;
    batch_count 2;
} # end of otel_exporter
$SERVER
EOF
    ['too many otel_resource_attr', join('', map { "otel_resource_attr a$_ v;\n" } 1 .. 48)
        . "otel_resource_attr a49 v;\n" . <<"EOF", qr/otel_resource_attr a49 v/],
otel_exporter { endpoint http://127.0.0.1:4318; protocol http/protobuf; }
$SERVER
EOF
    # nginx-otel's endpoint forms are accepted (below); garbage is not.
    ['endpoint host without a port', <<"EOF", qr/endpoint localhost;/, qr/invalid endpoint "localhost": has no port/],
otel_exporter {
    endpoint localhost;
}
$SERVER
EOF
    ['endpoint garbage', <<"EOF", qr/endpoint "not/, qr/invalid endpoint "not an endpoint": must be host:port, http:/],
otel_exporter {
    interval 1s;
    endpoint "not an endpoint";
}
$SERVER
EOF
    ['endpoint bare with a path', <<"EOF", qr/endpoint 127/, qr/invalid endpoint "127.0.0.1:4317\/x": has an invalid port/],
otel_exporter { endpoint 127.0.0.1:4317/x; }
$SERVER
EOF
    # The default protocol is grpc (as nginx-otel's): a path, most likely
    # an OTLP/HTTP base, is refused until the protocol is named.
    ['endpoint with a path under the default grpc', <<"EOF", qr/otel_exporter \{/,
otel_exporter {
    endpoint http://127.0.0.1:4318/base;
}
$SERVER
EOF
        qr{"endpoint" "http://127.0.0.1:4318/base" in "otel_exporter" in \S+ has a path, which OTLP/gRPC \(the default protocol\) does not use: remove it, or add "protocol http/protobuf;"}],
    ['endpoint with a path under protocol grpc', <<"EOF", qr/otel_exporter \{/, qr/has a path, which OTLP\/gRPC/],
otel_exporter { protocol grpc; endpoint https://127.0.0.1:4318/v1/traces; }
$SERVER
EOF
    ['otel_exporter without endpoint', <<"EOF", qr/otel_exporter \{ interval 1s; \}/,
otel_service_name svc;
otel_exporter { interval 1s; }
$SERVER
EOF
        qr/"otel_exporter" in \S+ has no "endpoint" and neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set/],
    # profiling types and their rates (issue 28)
    ['otel_profiling_types bogus', "otel_profiling_types cpu bogus;\n$SERVER",
        qr/otel_profiling_types cpu bogus/, qr/invalid profiling type "bogus" \(cpu, wall, memory\)/],
    ['otel_profiling_types memory memory', "otel_profiling_types cpu memory memory;\n$SERVER",
        qr/otel_profiling_types cpu memory memory/, qr/profiling type "memory" given twice/],
    ['otel_profiling_memory_interval 100', "otel_profiling_memory_interval 100;\n$SERVER",
        qr/otel_profiling_memory_interval 100/, qr/must be between 1024 and 1073741824/],
    ['otel_profiling_types wall wall', "otel_profiling_types wall wall;\n$SERVER",
        qr/otel_profiling_types wall wall/, qr/profiling type "wall" given twice/],
    ['otel_profiling_types twice', "otel_profiling_types cpu;\notel_profiling_types wall;\n$SERVER",
        qr/otel_profiling_types wall/, qr/is duplicate/],
    ['otel_profiling_wall_rate 0', "otel_profiling_wall_rate 0;\n$SERVER",
        qr/otel_profiling_wall_rate 0/, qr/must be between 1 and 1000/],
    ['otel_profiling_wall_rate 5000', "otel_profiling_wall_rate 5000;\n$SERVER",
        qr/otel_profiling_wall_rate 5000/, qr/must be between 1 and 1000/],
    ['otel_profiling_memory_interval abc', "otel_profiling_memory_interval abc;\n$SERVER",
        qr/otel_profiling_memory_interval abc/, qr/invalid value/],
    ['otel_profiling_types in a server', "server { listen 127.0.0.1:%%PORT%%; otel_profiling_types cpu; }\n",
        qr/otel_profiling_types cpu/, qr/directive is not allowed here/],
);

for my $c (@bad) {
    my ($name, $conf, $re, $why) = @$c;
    subtest $name => sub {
        my ($rc, $out, $path, $text) = nginx_t($conf);
        isnt $rc, 0, 'nginx -t fails';
        my $line = conf_line($text, $re);
        ok $line, "the bad directive is on line $line";
        like $out, qr/\Q$path\E:$line\b/, "error points to nginx.conf:$line" or diag $out;
        like $out, $why, 'and says why' if $why;
        unlike $out, qr/test is successful/, 'not successful';
    };
}

# trusted_certificate is read while the configuration is parsed (by the
# master, as root): whatever keeps it from being read is an error at its
# line, with the reason.
{
    my $d = bad_ca_dir();
    my @ca = (
        ['missing', "$d/missing.pem", qr/No such file or directory/],
        ['a directory', $d, qr/not a regular file/],
        ['not PEM', "$d/notpem.txt", qr/no PEM certificate in it/],
        ['over 1 MiB', "$d/big.pem", qr/larger than 1048576 bytes/],
        # opened without blocking: nginx -t must not wait for a writer
        ['a FIFO', "$d/fifo", qr/not a regular file/],
    );
    POSIX::mkfifo("$d/fifo", 0600) or die "mkfifo: $!";
    for my $c (@ca) {
        my ($name, $path, $why) = @$c;
        subtest "trusted_certificate $name" => sub {
            my ($rc, $out, $conf, $text) = nginx_t(<<"CONF");
otel_exporter {
    endpoint https://127.0.0.1:4318; protocol http/protobuf;
    trusted_certificate $path;
}
$SERVER
CONF
            isnt $rc, 0, 'nginx -t fails';
            my $line = conf_line($text, qr/trusted_certificate/);
            like $out, qr/cannot read trusted_certificate "\Q$path\E": $why in \Q$conf\E:$line\b/,
                "the path, the reason and nginx.conf:$line" or diag $out;
        };
    }
    subtest 'trusted_certificate relative to the configuration' => sub {
        my ($rc, $out, $conf) = nginx_t(<<"CONF");
otel_exporter { endpoint https://127.0.0.1:4318; protocol http/protobuf; trusted_certificate rel-ca.pem; }
$SERVER
CONF
        my ($dir) = $conf =~ m{^(.*)/};
        isnt $rc, 0, 'nginx -t fails';
        like $out, qr/cannot read trusted_certificate "\Q$dir\E\/rel-ca.pem": No such file/,
            'named by its full path, next to nginx.conf' or diag $out;
    };
    subtest 'trusted_certificate twice' => sub {
        my $pem = test_ca_pem();
        my ($rc, $out) = nginx_t(<<"CONF");
otel_exporter {
    endpoint https://127.0.0.1:4318; protocol http/protobuf;
    trusted_certificate $pem;
    trusted_certificate $pem;
}
$SERVER
CONF
        isnt $rc, 0, 'nginx -t fails';
        like $out, qr/"trusted_certificate" directive is duplicate/, 'is duplicate' or diag $out;
    };
}

subtest 'otel_trace on without otel_exporter' => sub {
    my ($rc, $out) = nginx_t($SERVER);
    isnt $rc, 0, 'nginx -t fails';
    like $out, qr/otel_exporter/, 'message names otel_exporter' or diag $out;
};

# any PEM: nginx -t does not connect
my $ca = test_ca_pem();

my @good = (
    ['every directive', <<"EOF"],
otel_exporter {
    endpoint https://127.0.0.1:4318; protocol http/protobuf;
    interval 5s;
    batch_size 100;
    batch_count 4;
    header X-Token abc;
    header X-Other "two words";
    trusted_certificate $ca;
    compression gzip;
    timeout 5s;
    connect_timeout 1s;
    shutdown_timeout 2s;
}
otel_service_name my-service;
otel_resource_attr deployment.environment test;
otel_resource_attr team "a team";
map \$arg_trace \$do_trace { default 0; 1 1; }
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace \$do_trace;
    otel_trace_context propagate;
    otel_span_name "\$request_method \$uri";
    otel_span_attr app.user \$arg_user;
    otel_span_attr app.const value;
    location /a/ { otel_trace on; otel_trace_context extract; return 204; }
    location /b/ { otel_trace off; otel_trace_context inject; return 204; }
    location /c/ { otel_trace_context ignore; return 204; }
}
EOF
    ['file endpoint, compression none', <<"EOF"],
otel_exporter { endpoint file://%%PREFIX%%; compression none; }
$SERVER
EOF
    ['endpoint http with a base path', <<"EOF"],
otel_exporter { endpoint http://127.0.0.1:4318/base; protocol http/protobuf; }
$SERVER
EOF
    # nginx-otel's forms: a bare host:port is plaintext OTLP/gRPC.
    (map { ["nginx-otel endpoint $_", "otel_exporter { endpoint $_; }\n$SERVER"] }
        '127.0.0.1:4317', 'localhost:4317', '[::1]:4317', 'http://collector:4317',
        'HTTPS://collector:4317', 'http://127.0.0.1:4317/', 'https://user:pw\@collector:4317'),
    ['profiling types cpu wall, rates, memory interval',
        "otel_profiling_types cpu wall;\notel_profiling_wall_rate 250;\n"
        . "otel_profiling_memory_interval 1m;\notel_exporter { endpoint file://%%PREFIX%%; }\n$SERVER"],
    ['profiling types cpu memory', "otel_profiling_types cpu memory;\notel_profiling_memory_interval 64k;\n"
        . "otel_exporter { endpoint file://%%PREFIX%%; }\n$SERVER"],
    ['profiling types wall only', "otel_profiling_types wall;\notel_exporter { endpoint file://%%PREFIX%%; }\n$SERVER"],
    ['no otel_trace anywhere, no exporter', <<"EOF"],
server { listen 127.0.0.1:%%PORT%%; location / { return 204; } }
EOF
);

for my $c (@good) {
    my ($name, $conf) = @$c;
    subtest "valid: $name" => sub {
        my ($rc, $out) = nginx_t($conf);
        is $rc, 0, 'nginx -t passes' or diag $out;
        like $out, qr/test is successful/, 'successful';
    };
}

done_testing;
