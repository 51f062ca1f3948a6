#!/usr/bin/perl
# Configuration errors: `apache2 -t` exits non-zero and names the file, the
# line and the reason of each bad mod_spanprof directive; cross-directive
# errors name the file and line of the OtelTrace that needs an exporter. A
# configuration using every directive passes, under each MPM.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;
use File::Temp ();

need_apache_module();

my $OK = "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelTrace On\n";

# CA files OtelExporterTrustedCertificate cannot use: it is read while the
# configuration is parsed (by the parent, as root).
my $CAD = bad_ca_dir();

# [name, configuration, line regex (the bad line), reason regex]
my @bad = (
    ['OtelTraceContext bogus', "$OK<Location />\n    OtelTraceContext bogus\n</Location>\n",
        qr/OtelTraceContext bogus/, qr/OtelTraceContext: invalid mode "bogus"/],
    ['endpoint ftp://', "OtelExporterEndpoint ftp://x\nOtelExporterProtocol http/protobuf\nOtelTrace On\n",
        qr/OtelExporterEndpoint ftp/, qr/OtelExporterEndpoint: invalid endpoint "ftp:\/\/x"/],
    ['batch size -1', "${OK}OtelExporterBatchSize -1\n",
        qr/BatchSize -1/, qr/OtelExporterBatchSize: invalid value "-1": expected an integer from 1 to 65536/],
    ['batch size abc', "${OK}OtelExporterBatchSize abc\n", qr/BatchSize abc/, qr/invalid value "abc"/],
    ['batch count 0', "${OK}OtelExporterBatchCount 0\n", qr/BatchCount 0/, qr/invalid value "0"/],
    ['interval abc', "${OK}OtelExporterInterval abc\n",
        qr/Interval abc/, qr/OtelExporterInterval: invalid time "abc": expected seconds/],
    ['interval -1', "${OK}OtelExporterInterval -1\n", qr/Interval -1/, qr/invalid time "-1"/],
    ['interval 0', "${OK}OtelExporterInterval 0\n", qr/Interval 0/, qr/invalid time "0"/],
    ['interval 5s', "${OK}OtelExporterInterval 5s\n", qr/Interval 5s/, qr/invalid time "5s"/],
    ['timeout 1e9', "${OK}OtelExporterTimeout 1e9\n", qr/Timeout 1e9/, qr/invalid time "1e9"/],
    ['shutdown timeout x', "${OK}OtelExporterShutdownTimeout x\n", qr/ShutdownTimeout x/, qr/invalid time "x"/],
    ['compression brotli', "${OK}OtelExporterCompression brotli\n",
        qr/Compression brotli/, qr/expected none or gzip/],
    ['protocol http', "OtelExporterEndpoint http://127.0.0.1:4318\nOtelTrace On\nOtelExporterProtocol http\n",
        qr/Protocol http$/, qr/expected grpc, http\/protobuf or http\/json/],
    ['header name with a colon', "${OK}OtelExporterHeader Bad:Name v\n",
        qr/OtelExporterHeader/, qr/invalid header name "Bad:Name"/],
    ['profiling rate 0', "${OK}OtelProfilingRate 0\n", qr/ProfilingRate 0/, qr/from 1 to 1000/],
    ['profiling rate 2000', "${OK}OtelProfilingRate 2000\n", qr/ProfilingRate 2000/, qr/from 1 to 1000/],
    ['profiling interval abc', "${OK}OtelProfilingInterval abc\n", qr/ProfilingInterval abc/, qr/invalid time/],
    ['max depth 300', "${OK}OtelProfilingMaxDepth 300\n", qr/MaxDepth 300/, qr/from 1 to 256/],
    ['pyroscope ftp', "${OK}OtelProfilingPyroscope ftp://p\n",
        qr/Pyroscope ftp/, qr/must start with http:\/\/ or https:\/\//],
    ['span name expression', "$OK<Location />\n    OtelSpanName \"%{\"\n</Location>\n",
        qr/OtelSpanName/, qr/OtelSpanName: cannot parse/],
    ['span attr expression', "$OK<Location />\n    OtelSpanAttr a \"%{HTTP:\"\n</Location>\n",
        qr/OtelSpanAttr/, qr/OtelSpanAttr: cannot parse/],
    ['OtelTrace maybe', "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelTrace maybe\n",
        qr/OtelTrace maybe/, qr/OtelTrace: not On, Off or a valid expression: /],
    ['OtelTrace expression', "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelTrace \"%{HTTP:X-A} ==\"\n",
        qr/OtelTrace "%\{HTTP/, qr/OtelTrace: not On, Off or a valid expression: /],
    ['otel_ratio above 1', "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\n<Location />\n    OtelTrace \"otel_ratio('1.5') == '1'\"\n</Location>\n",
        qr/otel_ratio\('1.5'\)/, qr/otel_ratio: "1.5" is not a number from 0 to 1/],
    ['otel_ratio not a number', "OtelExporterEndpoint http://127.0.0.1:4318\nOtelExporterProtocol http/protobuf\nOtelTrace \"otel_ratio('1/2') == '1'\"\n",
        qr/otel_ratio\('1\/2'\)/, qr/otel_ratio: "1\/2" is not a number from 0 to 1/],
    ['exporter in a VirtualHost', "OtelTrace On\nOtelExporterEndpoint http://127.0.0.1:4318\n"
        . "<VirtualHost 127.0.0.1:%%PORT%%>\n    OtelExporterEndpoint http://127.0.0.1:4319\n</VirtualHost>\n",
        qr/4319/, qr/cannot occur within <VirtualHost> section/],
    ['CA file missing', "${OK}OtelExporterTrustedCertificate $CAD/missing.pem\n",
        qr/TrustedCertificate/,
        qr/OtelExporterTrustedCertificate: cannot read "\Q$CAD\E\/missing.pem": No such file or directory/],
    ['CA file a directory', "${OK}OtelExporterTrustedCertificate $CAD\n",
        qr/TrustedCertificate/, qr/cannot read "\Q$CAD\E": not a regular file/],
    ['CA file not PEM', "${OK}OtelExporterTrustedCertificate $CAD/notpem.txt\n",
        qr/TrustedCertificate/, qr/cannot read "\Q$CAD\E\/notpem.txt": no PEM certificate in it/],
    ['CA file over 1 MiB', "${OK}OtelExporterTrustedCertificate $CAD/big.pem\n",
        qr/TrustedCertificate/, qr/cannot read "\Q$CAD\E\/big.pem": larger than 1048576 bytes/],
    # nginx-otel's endpoint forms are accepted (below); garbage is not.
    ['endpoint host without a port', "OtelExporterEndpoint localhost\nOtelTrace On\n",
        qr/OtelExporterEndpoint localhost/, qr/invalid endpoint "localhost": has no port/],
    ['endpoint garbage', "OtelExporterEndpoint \"not an endpoint\"\nOtelTrace On\n",
        qr/OtelExporterEndpoint "not/, qr/invalid endpoint "not an endpoint": must be host:port, http:/],
    ['endpoint bad port', "OtelExporterEndpoint http://127.0.0.1:99999\nOtelTrace On\n",
        qr/OtelExporterEndpoint http/, qr/invalid endpoint "http:\/\/127.0.0.1:99999": has an invalid port/],
    ['service name in a Location', "$OK<Location />\n    OtelServiceName x\n</Location>\n",
        qr/OtelServiceName x/, qr/OtelServiceName not allowed in <Location> context/],
    # profiling types and their rates (issue 28)
    ['OtelProfilingTypes bogus', "${OK}OtelProfilingTypes cpu bogus\n",
        qr/OtelProfilingTypes cpu bogus/, qr/OtelProfilingTypes: invalid profiling type "bogus" \(cpu, wall, memory\)/],
    ['OtelProfilingTypes memory memory', "${OK}OtelProfilingTypes cpu memory memory\n",
        qr/OtelProfilingTypes cpu memory memory/, qr/profiling type "memory" given twice/],
    ['OtelProfilingMemoryInterval 100', "${OK}OtelProfilingMemoryInterval 100\n",
        qr/MemoryInterval 100/, qr/invalid size "100": expected bytes \(k, m or g after the number\) from 1k to 1g/],
    ['OtelProfilingTypes wall wall', "${OK}OtelProfilingTypes wall wall\n",
        qr/OtelProfilingTypes wall wall/, qr/profiling type "wall" given twice/],
    ['OtelProfilingWallRate 0', "${OK}OtelProfilingWallRate 0\n", qr/WallRate 0/, qr/from 1 to 1000/],
    ['OtelProfilingWallRate 5000', "${OK}OtelProfilingWallRate 5000\n", qr/WallRate 5000/, qr/from 1 to 1000/],
    ['OtelProfilingMemoryInterval abc', "${OK}OtelProfilingMemoryInterval abc\n",
        qr/MemoryInterval abc/, qr/OtelProfilingMemoryInterval: invalid size "abc"/],
    ['OtelProfilingMemoryInterval 0', "${OK}OtelProfilingMemoryInterval 0\n",
        qr/MemoryInterval 0/, qr/invalid size "0"/],
);

for my $c (@bad) {
    my ($name, $conf, $line_re, $why) = @$c;
    subtest $name => sub {
        my ($code, $out, $path, $full) = apache_t($conf);
        isnt $code, 0, 'apache2 -t fails';
        my $line = conf_line($full, $line_re);
        like $out, qr/Syntax error on line \Q$line\E of \Q$path\E/, "file and line ($line)";
        like $out, $why, 'reason';
    };
}

subtest 'OtelTrace On without an exporter' => sub {
    my ($code, $out, $path, $full) = apache_t("<Location /x>\n    OtelTrace On\n</Location>\n");
    isnt $code, 0, 'apache2 -t fails';
    my $line = conf_line($full, qr/OtelTrace On/);
    like $out, qr/OtelTrace On in \Q$path\E:\Q$line\E but no OtelExporterEndpoint/, 'file:line and reason';
};

subtest 'OtelTrace with an expression without an exporter' => sub {
    my ($code, $out, $path, $full) = apache_t("OtelTrace \"%{OTEL_PARENT_SAMPLED} == '1'\"\n");
    isnt $code, 0, 'apache2 -t fails';
    my $line = conf_line($full, qr/OtelTrace "/);
    like $out, qr/OtelTrace %\{OTEL_PARENT_SAMPLED\} == '1' in \Q$path\E:\Q$line\E but no OtelExporterEndpoint/, 'file:line and reason';
};

subtest 'OtelProfiling On without an exporter or Pyroscope' => sub {
    my ($code, $out) = apache_t("OtelProfiling On\n");
    isnt $code, 0, 'apache2 -t fails';
    like $out, qr/OtelProfiling is On but neither OtelExporterEndpoint nor OtelProfilingPyroscope/, 'reason';
};

# The default protocol is grpc (as nginx-otel's): a path in the endpoint,
# most likely an OTLP/HTTP base, is refused until the protocol is named.
subtest 'endpoint with a path under the default grpc' => sub {
    my ($code, $out, $path, $full) = apache_t("OtelExporterEndpoint http://127.0.0.1:4318/base\nOtelTrace On\n");
    isnt $code, 0, 'apache2 -t fails';
    my $line = conf_line($full, qr/OtelExporterEndpoint/);
    like $out, qr{OtelExporterEndpoint "http://127.0.0.1:4318/base" in \Q$path\E:\Q$line\E has a path, which OTLP/gRPC \(the default protocol\) does not use: remove it, or add "OtelExporterProtocol http/protobuf"},
        'file:line and reason' or diag $out;
    ($code, $out) = apache_t("OtelExporterEndpoint http://127.0.0.1:4318/base\nOtelExporterProtocol grpc\nOtelTrace On\n");
    isnt $code, 0, 'the same with OtelExporterProtocol grpc';
    ($code, $out) = apache_t("OtelExporterEndpoint http://127.0.0.1:4318/base\nOtelExporterProtocol http/json\nOtelTrace On\n");
    is $code, 0, 'a base path is fine over OTLP/HTTP' or diag $out;
};

for my $ep ('127.0.0.1:4317', 'localhost:4317', '[::1]:4317', 'http://collector:4317',
            'HTTPS://collector:4317', 'http://127.0.0.1:4317/') {
    subtest "nginx-otel endpoint form $ep" => sub {
        my ($code, $out) = apache_t("OtelExporterEndpoint $ep\nOtelTrace On\n");
        is $code, 0, 'apache2 -t passes' or diag $out;
    };
}

subtest 'queue too large' => sub {
    my ($code, $out) = apache_t("${OK}OtelExporterBatchSize 65536\nOtelExporterBatchCount 2\n");
    isnt $code, 0, 'apache2 -t fails';
    like $out, qr/more than 65536 spans/, 'reason';
};

my $ALL = <<'EOF';
OtelExporterEndpoint http://127.0.0.1:4318/base
OtelExporterProtocol http/protobuf
OtelExporterHeader X-Api-Key secret
OtelExporterHeader Authorization "Bearer x y"
OtelExporterTrustedCertificate %%TESTCA%%
OtelExporterInterval 0.5
OtelExporterBatchSize 128
OtelExporterBatchCount 8
OtelExporterCompression gzip
OtelExporterTimeout 5
OtelExporterConnectTimeout 1.5
OtelExporterShutdownTimeout 2
OtelServiceName shop
OtelResourceAttr deployment.environment test
OtelProfilingRate 99
OtelProfilingInterval 10
OtelProfilingMaxDepth 128
OtelProfilingMaxSize 4m
OtelProfilingTypes cpu wall
OtelProfilingWallRate 250
OtelProfilingMemoryInterval 1m
OtelProfilingPyroscope http://127.0.0.1:4040/
OtelTrace On
OtelTraceContext propagate
<VirtualHost 127.0.0.1:%%PORT%%>
    OtelTraceContext extract
    OtelSpanAttr vhost "%{SERVER_NAME}"
    <Location /api/>
        OtelSpanName "api %{REQUEST_METHOD}"
        OtelSpanAttr app.tenant "%{HTTP:X-Tenant}"
        OtelProfiling On
    </Location>
    <Location /sampled/>
        OtelTrace "%{OTEL_PARENT_SAMPLED} == '1' || otel_ratio('0.1') == '1'"
    </Location>
    <Directory /tmp>
        OtelTrace Off
        OtelTraceContext ignore
        OtelProfiling Off
    </Directory>
</VirtualHost>
EOF

for my $mpm (apache_mpms()) {
    subtest "every directive ($mpm)" => sub {
        (my $all = $ALL) =~ s/%%TESTCA%%/test_ca_pem()/e;
        my ($code, $out) = apache_t($all, mpm => $mpm);
        is $code, 0, 'apache2 -t passes' or diag $out;
        like $out, qr/Syntax OK/, 'Syntax OK';
    };
}

subtest 'loaded but unused' => sub {
    my ($code, $out) = apache_t("");
    is $code, 0, 'no directive at all: fine' or diag $out;
};

done_testing;
