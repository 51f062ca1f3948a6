package SpanProf::Test;

=head1 NAME

SpanProf::Test - harness for spanprof's nginx integration tests (t/*.t)

=head1 SYNOPSIS

    use lib 't/lib';
    use Test::More;
    use SpanProf::Test;

    need_module();                      # skip_all when the .so is not built
    my $recv = start_receiver();        # fake OTLP/HTTP collector
    my $ngx  = start_nginx(receiver => $recv, conf => <<'EOF');
    otel_exporter { endpoint %%RECEIVER%%; protocol http/protobuf; interval 100ms; }
    server {
        listen 127.0.0.1:%%PORT%%;
        otel_trace on;
        location /api/ { return 200 "ok\n"; }
    }
    EOF
    my $res   = http_get($ngx->port, '/api/x?a=1');
    my @spans = wait_for_spans($recv, 1, 10,
                    filter => sub { $_[0]{attrs}{'url.path'} eq '/api/x' });
    is $spans[0]{name}, 'GET /api/';
    $ngx->stop; $recv->stop;            # also done by END / DESTROY

Everything listed under L</EXPORTS> is exported by default. Servers bind to
free 127.0.0.1 ports, live in fresh temporary directories and are stopped
when the test file ends (END block, DESTROY), also when it dies, or by an
explicit ->stop. When a test has failed by the time an object is stopped,
the nginx error log tail and a summary of what the receiver stored are
printed as diagnostics and the temporary directories are kept (their paths
are printed). Set SPANPROF_KEEP=1 to keep
them always.

=head1 ENVIRONMENT

=over

=item SPANPROF_NGX_MODULE

Path of the module to load (default: F<build/nginx/ngx_http_spanprof_module.so>
in the repository), or C<static> for an nginx built with C<--add-module>.

=item SPANPROF_NGINX

nginx binary (default F</usr/sbin/nginx>). Another nginx (built from
nginx.org's sources, docs/compatibility.md) needs the modules built in its
own tree: SPANPROF_NGX_MODULE and SPANPROF_NGX_BURN_MODULE.

=item SPANPROF_NGX_BURN_MODULE

Path of the test-only burn module (default: burn_module_path() below).

=item SPANPROF_SERVER_PRELOAD

Set as C<LD_PRELOAD> for the servers only: every nginx (and apache2, see
SpanProf::Apache) the harness runs, to start, test, reload or stop them, and
for no other program (perl, protoc, curl). C<make test-sanitize> puts
Debian's libasan and libubsan there, for the modules built with the
sanitizers.

=item SPANPROF_SANITIZER_LOGS

A directory: when a server is stopped, the sanitizer lines of its error log
(UBSan's reports, which reach the servers' stderr) are saved there by
save_sanitizer_lines(). Used by C<make test-sanitize>.

=item SPANPROF_REQUIRE_MODULE=1

need_module() fails (BAIL_OUT) instead of skipping when the module is missing.

=item SPANPROF_KEEP=1

Keep every temporary directory.

=item SPANPROF_TEST_STRIP_OTEL=1

Harness self-check only: start_nginx() and nginx_t() drop the load_module
line, every otel_* directive and replace $otel_* variables by "-", so the
suite's nginx configurations (backends, subrequests, HTTP/2 ...) can be run
against plain nginx. All span assertions then fail, of course.

=back

=head1 EXPORTS

=head2 Paths and ports

=over

=item repo_root()

Absolute path of the repository (derived from this file's location).

=item module_path()

The module .so that start_nginx() loads.

=item need_module()

Call before planning: C<plan skip_all> when module_path() does not exist
(BAIL_OUT under SPANPROF_REQUIRE_MODULE=1).

=item nginx_version(), nginx_version_at_least($v)

The version of the nginx under test (C<nginx -v>, e.g. "1.22.1"), and
whether it is at least $v: for tests that see what nginx itself changed
between versions (repeated headers joined in 1.23, upstream HTTP/1.1 by
default in 1.29.7), never for the module's own behaviour.

=item burn_module_path(), need_burn_module()

The test-only module built by C<make nginx> from t/ngx_burn
(F<build/nginx/ngx_http_spanprof_burn_module.so>) and the same skip/BAIL_OUT
check as need_module() for it.

=item test_ca_pem()

The path of a self-signed CA certificate (PEM) made with the openssl CLI in
a temporary directory, once per test process: for configurations that name
a CA bundle without connecting, so no test depends on the system's store
(a fresh Debian has none without ca-certificates).

=item bad_ca_dir()

A temporary directory holding CA files no server may accept: F<notpem.txt>
(no PEM certificate in it) and F<big.pem> (over 1 MiB); F<missing.pem> is
not there. For the configuration-error tests of both servers.

=item free_port()

A free TCP port on 127.0.0.1 (never one handed out before by this process).

=item dead_port()

A TCP port on 127.0.0.1 that refuses connections until the test ends: kept
bound by a socket that never listens (a dead upstream peer, a collector
that is down).

=back

=head2 Receiver

=over

=item start_receiver(%opts)

Runs C<perl t/receiver.pl --port P --dir D> and waits until it accepts.
Options: C<script> (string "503,503" or array ref), C<default> (entry,
default 200), C<port>. Returns a SpanProf::Test::Receiver:

    ->port  ->dir  ->url               # "http://127.0.0.1:P"
    ->requests                         # list, by arrival
    ->receiver_log                     # its stdout/stderr
    ->stop

Each request is a hash: C<seq>, C<time> (epoch seconds, float), C<conn>
(connection id), C<method>, C<path>, C<version>, C<headers> ({lc name =>
value}, repeated lines joined with ", "), C<body> (decoded bytes: gunzipped
when Content-Encoding is gzip, then C<raw_encoding> is 'gzip' and
C<raw_body> holds the wire bytes), C<action> (the scripted answer).

=back

=head2 nginx

=over

=item start_nginx(conf => $http_block_text, %opts)

Writes PREFIX/nginx.conf (load_module, worker_processes, error_log
PREFIX/error.log info, pid, events, and an http block with access_log and
all temp paths under PREFIX, then the given text) with the placeholders
%%PORT%% %%PORT2%% %%PORT3%% %%RECEIVER%% %%PREFIX%% replaced, starts
C</usr/sbin/nginx -p PREFIX/ -c PREFIX/nginx.conf -e PREFIX/error.log> and
waits for the pid file, the workers and until %%PORT%% accepts.
Options: C<workers> (default 1), C<receiver> (object, for %%RECEIVER%%) or
C<receiver_url>, C<port>/C<port2>/C<port3> (default: free ports),
C<env> (hash ref: environment variables for nginx, e.g. OTEL_*; the
test's own OTEL_* variables never reach the server),
C<dirs> (array ref of directories to create under PREFIX, mode 0777, e.g.
for the file exporter), C<main> (extra text for the main context),
C<module> (0: no load_module line), C<burn> (1: also load the test-only
module t/ngx_burn, burn_module_path(): directives C<spanprof_burn> and
C<spanprof_wait>), C<extra_modules> (array ref of more .so paths to load;
these lines are kept under SPANPROF_TEST_STRIP_OTEL). Returns a
SpanProf::Test::Nginx:

    ->port ->port2 ->port3 ->prefix ->conf_path ->conf_text
    ->master_pid
    ->worker_pids        # children of the master (/proc/*/stat), sorted
    ->error_log          # whole text
    ->error_log_tail(N)  # last N lines (default 40)
    ->crash_lines        # error log lines telling of a crashed worker
    ->spanprof_lines     # error log lines that mention spanprof
    ->log_convention_violations  # of those, the ones whose message does
                         # not start with "spanprof: "
    ->signal('HUP')
    ->reload             # nginx -s reload, waits for a new set of workers;
                         # returns the new worker pids
    ->quit($timeout)     # QUIT to the master; seconds until it is gone
    ->stop               # QUIT, then TERM/KILL after 10 s; removes PREFIX
    ->rss_kb($pid)       # VmRSS of a process in kB

=item nginx_t($conf_text, %opts)

Builds the same full configuration (same options as start_nginx) in a fresh
prefix and runs C<nginx -t>. Returns C<($exit_code, $output, $conf_path,
$full_conf_text)>; the output is stdout and stderr together.

=item conf_line($full_conf_text, $regex)

1-based number of the first line of the text matching the regex (undef when
none).

=back

=head2 HTTP clients

=over

=item http_get($port, $path, headers => {...})

=item http_request($method, $port, $path, headers => {...}, content => $body)

HTTP::Tiny against 127.0.0.1 (10 s timeout, Connection: close, agent
"spanprof-test/1.0" unless a user-agent header is given). A header value may
be an array ref for repeated header lines. Returns {status, reason, headers
(lc names; repeated ones as array refs), content}.

=item raw_request($port, $bytes, %opts)

Writes the bytes on a new socket and returns everything read until the
server closes or C<timeout> (default 3 s) passes. In list context also
returns the client's local port.

=item curl_h2($port, $path, @headers)

C<curl -s --http2-prior-knowledge -D - http://127.0.0.1:$port$path -H ...>;
returns {status, headers (lc names), content, raw, exit, version}.

=item h2c_requests($port, [$path, ...], timeout => 15)

A minimal HTTP/2 client written for the profiling tests (curl 7.88's
--parallel with --http2-prior-knowledge fails all but one transfer): one
cleartext connection with prior knowledge, every path a GET on its own
stream, all sent at once; an entry may instead be [$path, [$name, $value],
...] to send more request headers on that stream. Returns (in list context also the client's local
port) an array ref, in path order, of {path, stream, status (decoded from
the HPACK :status, -1 when not decodable), body (DATA bytes), done, rst
(RST_STREAM error code, when reset)}. Response headers other than :status
are not decoded (nginx Huffman-codes them).

=back

=head2 OTLP decoding

=over

=item decode_traces($body)

Runs C<protoc --decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest>
with the repository's proto/ directory and parses protoc's text format
(parse_text_format) into nested hashes: every message is a hash ref
C<< { field_name => [ value, ... ] } >> (each field an array ref, whether
repeated or not), a value is a hash ref (message) or a scalar (strings with
their escapes decoded to bytes, numbers and enum names as printed). Dies when
protoc fails or the text does not parse.

=item encode_traces($text [, $message_type])

protoc --encode of a text-format message (default type
ExportTraceServiceRequest; any message of trace_service.proto and its
imports): hand-made bodies for self-tests.

=item parse_text_format($text)

The recursive-descent parser used by decode_traces.

=item spans_from_request($decoded)

Flattens a decoded request into span hashes:

    trace_id (32 hex) span_id (16 hex) parent_span_id (16 hex or '')
    trace_state name kind ('SPAN_KIND_SERVER', ...) flags (int)
    start end (ns) attrs {key => value} attr_types {key => 'string'|'int'|
    'bool'|'double'|'array'|'kvlist'|'bytes'} attr_keys [keys in order]
    events [{name, time, attrs, attr_types}]
    status_code ('STATUS_CODE_ERROR', 'STATUS_CODE_OK' or '')
    status_message resource {key => value} resource_types {...}
    scope {name, version} dropped_attributes_count dropped_events_count

=item collect_spans($receiver, accepted_only => 0)

Decodes every POST .../v1/traces the receiver stored (cached per request) and
returns all spans in arrival order, duplicates included; each span also has
C<seq> (the stored request it came in). With C<accepted_only>, only requests
the receiver answered with a 2xx status (200, partial:N) count.

=item request_spans($receiver, $request)

The spans of one stored request.

=item wait_for_spans($receiver, $n, $timeout, filter => sub { ... }, accepted_only => 0)

Polls until at least $n distinct (by span_id) spans matching the filter (it
gets the span hash as $_[0]) arrived or $timeout seconds passed; returns the
matching distinct spans (first occurrence, arrival order); the filter also
sees the span as $_. With
C<accepted_only>, spans only count when they came in an accepted request.

=item sync_spans($receiver, $port, %opts)

Sends GET PREFIX__spanprof_sync_<random> to nginx (C<prefix> defaults to
"/") and waits (C<timeout>, default 10 s) for its span. With one worker the
spans of every request answered before are then at the receiver too, so
tests can assert that something did B<not> produce a span. Returns all
distinct spans collected so far; dies if the sync span never arrives.

=item read_jsonl($path)

Lines of an OTLP/JSON file: list of {raw => line, json => decoded}.

=item spans_from_json($decoded_line)

The span hashes (as spans_from_request) of one OTLP/JSON object; kind and
status code integers are mapped to the enum names.

=back

=head2 Assertion helpers

=over

=item span_summary(@spans)

A text dump of spans, one per line, for diag().

=item server_spans(@spans), client_spans(@spans)

Spans of that kind.

=item by_path($path, @spans)

SERVER spans whose url.path is $path.

=item rand_hex($n)

$n random lowercase hex characters, not all zero.

=item parse_echo($content)

($traceparent, $tracestate) from the body of the echo backend used by the
tests, C<return 200 "tp=$http_traceparent ts=$http_tracestate\n">; empty
list when the body has another form.

=item save_sanitizer_lines($error_log_text, $tag)

Under SPANPROF_SANITIZER_LOGS, writes the lines of the text that a
sanitizer printed (C<runtime error:>, C<...Sanitizer...>, stack frames) to a
new file in that directory; returns how many. Both harnesses call it when
they stop a server.

=item wait_until($timeout, sub { ... })

Polls the sub every 50 ms until it returns true or the time is up; returns
its last value.

=back

=cut

use strict;
use warnings;
use Exporter 'import';
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path qw(remove_tree);
use File::Temp qw(tempdir);
use IO::Socket::INET;
use IO::Select;
use HTTP::Tiny;
use JSON::PP;
use MIME::Base64 qw(decode_base64);
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);

our @EXPORT = qw(
    repo_root module_path need_module free_port dead_port burn_module_path need_burn_module
    start_receiver start_nginx nginx_t conf_line
    http_get http_request raw_request curl_h2 h2c_requests
    decode_traces encode_traces parse_text_format spans_from_request collect_spans
    request_spans
    wait_for_spans sync_spans read_jsonl spans_from_json
    span_summary server_spans client_spans by_path wait_until
    rand_hex parse_echo save_sanitizer_lines test_ca_pem bad_ca_dir api_counter
    tsc_clock_expected
);

my $ROOT = abs_path(dirname(abs_path(__FILE__)) . '/../../..');
my $NGINX = $ENV{SPANPROF_NGINX} || '/usr/sbin/nginx';
my $STRIP = $ENV{SPANPROF_TEST_STRIP_OTEL} ? 1 : 0;
my %LIVE;           # "ref addr" => object, stopped at END
my %PORTS_GIVEN;

sub repo_root   { $ROOT }
sub module_path { $ENV{SPANPROF_NGX_MODULE} || "$ROOT/build/nginx/ngx_http_spanprof_module.so" }
sub burn_module_path { $ENV{SPANPROF_NGX_BURN_MODULE} || "$ROOT/build/nginx/ngx_http_spanprof_burn_module.so" }

# The version of the nginx under test ("1.22.1"), and whether it is at least
# $v: for what nginx itself changed between versions (not the module).
my $NGINX_VERSION;
sub nginx_version {
    ($NGINX_VERSION) = `$NGINX -v 2>&1` =~ m{nginx/(\d+\.\d+\.\d+)} unless defined $NGINX_VERSION;
    return $NGINX_VERSION // '0.0.0';
}
sub nginx_version_at_least {
    my @have = split /\./, nginx_version();
    my @want = split /\./, shift;
    for my $i (0 .. 2) {
        return $have[$i] > $want[$i] if $have[$i] != $want[$i];
    }
    return 1;
}
push @EXPORT, qw(nginx_version nginx_version_at_least);

sub need_burn_module {
    my $m = burn_module_path();
    return 1 if -f $m;
    my $msg = "test module not built: $m (run `make nginx`)";
    if ($ENV{SPANPROF_REQUIRE_MODULE}) {
        _builder()->BAIL_OUT($msg);
    }
    _builder()->skip_all($msg);
}

sub _builder { require Test::Builder; Test::Builder->new }

sub _failing {
    my $tb = _builder();
    return !$tb->is_passing;
}

sub need_module {
    return 1 if $STRIP || module_path() eq 'static';
    my $m = module_path();
    return 1 if -f $m;
    my $msg = "module not built: $m (run `make nginx`)";
    if ($ENV{SPANPROF_REQUIRE_MODULE}) {
        _builder()->BAIL_OUT($msg);
    }
    _builder()->skip_all($msg);
}

my $TEST_CA;
sub test_ca_pem {
    return $TEST_CA if $TEST_CA;
    my $d = tempdir('spanprof-testca-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $out = `/usr/bin/openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=spanprof-test-ca -keyout $d/ca.key -out $d/ca.pem 2>&1`;
    die "openssl req: $out" if $? || !-s "$d/ca.pem";
    return $TEST_CA = "$d/ca.pem";
}

sub bad_ca_dir {
    my $d = tempdir('spanprof-badca-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    _spew("$d/notpem.txt", "not a certificate\n");
    _spew("$d/big.pem", "-----BEGIN CERTIFICATE-----\n" . ('A' x (1024 * 1024)) . "\n");
    return $d;
}

sub free_port {
    for (1 .. 200) {
        my $s = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
            Listen => 1, ReuseAddr => 0,
        ) or next;
        my $p = $s->sockport;
        close $s;
        next if $PORTS_GIVEN{$p}++;
        return $p;
    }
    die "free_port: no free port found";
}

# A port where connections are refused for the rest of the test: bound by a
# socket that never listens, so no other process (a parallel test, a
# benchmark) can start listening there meanwhile, as it could on a port
# free_port() found free a moment ago.
my @DEAD_SOCKETS;
sub dead_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp')
        or die "dead_port: $!";
    push @DEAD_SOCKETS, $s;
    return $s->sockport;
}

# A counter of the status API at $path (nginx otel_api, Apache
# spanprof-api) summed over the workers: (from the JSON, from the
# Prometheus text's spanprof_NAME_total lines); undef when GET fails.
sub api_counter {
    my ($port, $path, $name) = @_;
    my $r = http_get($port, $path);
    my $j = $r->{status} == 200 ? eval { JSON::PP::decode_json($r->{content}) } : undef;
    return unless $j;
    my $js = 0;
    $js += $_->{counters}{$name} // 0 for @{ $j->{workers} || [] };
    my $p = http_get($port, "$path?format=prometheus");
    return ($js, undef) unless $p->{status} == 200;
    my $ps = 0;
    $ps += $1 while $p->{content} =~ /^spanprof_\Q$name\E_total\{worker="\d+"\} (\d+)$/mg;
    return ($js, $ps);
}

# Whether the module's clock should read the time-stamp counter here
# (common/base/clock.h): x86-64, an invariant counter, and the kernel's
# clocksource "tsc".
sub tsc_clock_expected {
    return 0 unless `uname -m` =~ /^x86_64/;
    open(my $cs, '<', '/sys/devices/system/clocksource/clocksource0/current_clocksource') or return 0;
    my $name = <$cs> // '';
    return 0 unless $name =~ /^tsc\s*$/;
    open(my $ci, '<', '/proc/cpuinfo') or return 0;
    local $/;
    my $flags = <$ci> // '';
    return $flags =~ /\bconstant_tsc\b/ && $flags =~ /\bnonstop_tsc\b/ ? 1 : 0;
}

sub wait_until {
    my ($timeout, $cb) = @_;
    my $deadline = time + $timeout;
    my $v;
    while (1) {
        $v = $cb->();
        return $v if $v || time >= $deadline;
        sleep 0.05;
    }
}

sub _port_accepts {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp', Timeout => 1);
    return 0 unless $s;
    close $s;
    return 1;
}

sub _slurp {
    my ($f) = @_;
    open(my $fh, '<', $f) or return undef;
    binmode $fh;
    local $/;
    my $t = <$fh>;
    return $t // '';
}

sub _spew {
    my ($f, $data) = @_;
    open(my $fh, '>', $f) or die "$f: $!";
    binmode $fh;
    print $fh $data;
    close $fh or die "$f: $!";
}

# Under SPANPROF_SANITIZER_LOGS=DIR: the sanitizer lines of a server's error
# log (its stderr), saved as DIR/errlog.<tag>.<test pid>.<n>. UBSan writes
# there, not to UBSAN_OPTIONS' log_path: when libasan is loaded first, its
# exported __sanitizer_set_report_path takes libubsan's call, so the path
# is set for ASan only. Returns the number of lines saved.
my $SANITIZER_LOG_NO = 0;
sub save_sanitizer_lines {
    my ($text, $tag) = @_;
    my $dir = $ENV{SPANPROF_SANITIZER_LOGS} or return 0;
    my @l = grep { /runtime error:|Sanitizer|^\s+#\d+ 0x[0-9a-f]+ / } split /\n/, $text // '';
    return 0 unless @l;
    my $f = sprintf '%s/errlog.%s.%d.%d', $dir, $tag, $$, ++$SANITIZER_LOG_NO;
    _spew($f, join("\n", @l) . "\n");
    return scalar @l;
}

# Runs a command without a shell: (exit code, stdout, stderr). stdin from a
# file when given. A time limit (default 60 s) kills it. With server => 1
# (nginx itself) the command gets SPANPROF_SERVER_PRELOAD as LD_PRELOAD.
sub _run {
    my ($cmd, %o) = @_;
    my $dir = tempdir('spanprof-run-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    my ($out, $err) = ("$dir/out", "$dir/err");
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        open(STDIN, '<', $o{stdin} // '/dev/null') or POSIX::_exit(126);
        open(STDOUT, '>', $out) or POSIX::_exit(126);
        open(STDERR, '>', $err) or POSIX::_exit(126);
        $ENV{LD_PRELOAD} = $ENV{SPANPROF_SERVER_PRELOAD}
            if $o{server} && $ENV{SPANPROF_SERVER_PRELOAD};
        # The server sees only the OTEL_* variables a test gives it.
        if ($o{server}) {
            delete $ENV{$_} for grep { /^OTEL_/ } keys %ENV;
            %ENV = (%ENV, %{ $o{env} || {} });
        }
        { no warnings q(exec); exec { $cmd->[0] } @$cmd; }
        POSIX::_exit(127);
    }
    my $deadline = time + ($o{timeout} // 60);
    my $rc;
    while (1) {
        my $r = waitpid($pid, WNOHANG);
        if ($r == $pid) { $rc = $?; last }
        if (time > $deadline) {
            kill 'KILL', $pid;
            waitpid($pid, 0);
            $rc = -1;
            last;
        }
        sleep 0.01;
    }
    my ($so, $se) = (_slurp($out) // '', _slurp($err) // '');
    remove_tree($dir);
    my $code = $rc == -1 ? -1 : ($rc & 127) ? 128 + ($rc & 127) : $rc >> 8;
    return ($code, $so, $se);
}

sub _tempdir {
    my ($tag) = @_;
    my $d = tempdir("spanprof-$tag-XXXXXX", TMPDIR => 1, CLEANUP => 0);
    chmod 0777, $d;
    return $d;
}

# --- receiver -----------------------------------------------------------------

sub start_receiver {
    my %o = @_;
    my $base = _tempdir('recv');
    my $dir  = "$base/req";
    mkdir $dir or die "$dir: $!";
    my $port = $o{port} // free_port();
    my @cmd = ($^X, "$ROOT/t/receiver.pl", '--port', $port, '--dir', $dir);
    if (defined $o{script}) {
        my $s = ref $o{script} ? join(',', @{ $o{script} }) : $o{script};
        push @cmd, '--script', $s if length $s;
    }
    push @cmd, '--default', $o{default} if defined $o{default};

    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        setpgrp(0, 0);
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', "$base/receiver.log");
        open(STDERR, '>&', \*STDOUT);
        { no warnings q(exec); exec { $cmd[0] } @cmd; }
        POSIX::_exit(127);
    }
    my $self = bless {
        pid => $pid, port => $port, dir => $dir, base => $base,
        cache => {}, decoded => {},
    }, 'SpanProf::Test::Receiver';
    $LIVE{"$self"} = $self;
    track_group($pid, "receiver on port $port");
    my $ok = wait_until(10, sub {
        return -1 if waitpid($pid, WNOHANG) == $pid;
        return _port_accepts($port);
    });
    if (!$ok || $ok == -1) {
        my $log = _slurp("$base/receiver.log") // '';
        $self->{pid} = undef if $ok && $ok == -1;
        $self->stop;
        die "receiver did not start on port $port: $log";
    }
    return $self;
}

# --- nginx ----------------------------------------------------------------------

sub _strip_otel {
    my ($t) = @_;
    $t =~ s/^\s*load_module\s+[^;]*spanprof[^;]*;\s*\n//mg;
    $t =~ s/\$otel_\w+/-/g;
    $t =~ s/\$\{otel_\w+\}/-/g;
    $t =~ s/(?<![\$\w])otel_exporter\s*\{[^{}]*\}//g;
    $t =~ s/(?<![\$\w])otel_\w+(?:\s[^;{}]*)?;//g;
    return $t;
}

sub _build_conf {
    my ($self, %o) = @_;
    my $p = $self->{prefix};
    # SPANPROF_NGX_MODULE=static: the nginx under test has it built in.
    my $module = ((exists $o{module} && !$o{module}) || module_path() eq 'static') ? ''
               : 'load_module ' . module_path() . ";\n";
    my $workers = $o{workers} // 1;
    my $main = $o{main} // '';
    my $http = $o{conf} // die "start_nginx: conf => text is required";
    my %ph = (
        PORT => $self->{port}, PORT2 => $self->{port2}, PORT3 => $self->{port3},
        PREFIX => $p,
    );
    if ($http =~ /%%RECEIVER%%/) {
        my $url = $o{receiver_url} // ($o{receiver} ? $o{receiver}->url : undef);
        die "conf uses %%RECEIVER%% but no receiver given" unless defined $url;
        $ph{RECEIVER} = $url;
    }
    $http =~ s/%%(PORT|PORT2|PORT3|RECEIVER|PREFIX)%%/$ph{$1}/g;
    $main =~ s/%%(PORT|PORT2|PORT3|RECEIVER|PREFIX)%%/$ph{$1} \/\/ "%%$1%%"/ge;
    $http =~ s/^/    /mg;
    my $conf = <<"EOF";
${module}worker_processes $workers;
error_log $p/error.log info;
pid $p/nginx.pid;
$main
events { worker_connections 1024; }
http {
    access_log $p/access.log;
    client_body_temp_path $p/tmp/body;
    proxy_temp_path $p/tmp/proxy;
    fastcgi_temp_path $p/tmp/fastcgi;
    uwsgi_temp_path $p/tmp/uwsgi;
    scgi_temp_path $p/tmp/scgi;
$http
}
EOF
    $conf = _strip_otel($conf) if $STRIP;
    # Test-only modules, added after the stripping (which would drop any
    # load_module line naming spanprof).
    my @extra = @{ $o{extra_modules} || [] };
    unshift @extra, burn_module_path() if $o{burn};
    $conf = join('', map { "load_module $_;\n" } @extra) . $conf;
    return $conf;
}

sub _new_nginx {
    my (%o) = @_;
    my $prefix = _tempdir('ngx');
    mkdir "$prefix/tmp" or die "$prefix/tmp: $!";
    chmod 0777, "$prefix/tmp";
    for my $d (@{ $o{dirs} || [] }) {
        my $path = "$prefix/$d";
        mkdir $path or die "$path: $!";
        chmod 0777, $path;
    }
    my $self = bless {
        prefix  => $prefix,
        port    => $o{port}  // free_port(),
        port2   => $o{port2} // free_port(),
        port3   => $o{port3} // free_port(),
        workers => $o{workers} // 1,
    }, 'SpanProf::Test::Nginx';
    $self->{conf_path} = "$prefix/nginx.conf";
    $self->{conf_text} = _build_conf($self, %o);
    _spew($self->{conf_path}, $self->{conf_text});
    return $self;
}

sub start_nginx {
    my (%o) = @_;
    my $self = _new_nginx(%o);
    my $p = $self->{prefix};
    $LIVE{"$self"} = $self;
    my ($rc, $out, $err) = _run([$NGINX, '-p', "$p/", '-c', $self->{conf_path}, '-e', "$p/error.log"], server => 1, env => $o{env});
    if ($rc != 0) {
        my $log = $self->error_log_tail(30);
        $self->{failed_start} = 1;
        $self->stop;
        die "nginx failed to start (exit $rc):\n$out$err\n--- error.log:\n$log\n--- conf:\n$self->{conf_text}";
    }
    my $pid = wait_until(10, sub {
        my $t = _slurp("$p/nginx.pid") // '';
        return ($t =~ /^(\d+)/ && -d "/proc/$1") ? $1 : 0;
    });
    unless ($pid) {
        $self->stop;
        die "nginx: no pid file in $p\n" . $self->error_log_tail(30);
    }
    $self->{master_pid} = $pid;
    # The master's session and group (nginx's daemon mode calls setsid).
    $self->{pgid} = track_group(_pgid_of($pid), "nginx $p");
    my $workers_ok = wait_until(10, sub { $self->worker_pids >= $self->{workers} });
    my $port_ok = wait_until(10, sub { _port_accepts($self->{port}) });
    unless ($workers_ok && $port_ok) {
        my $log = $self->error_log_tail(30);
        $self->stop;
        die "nginx did not come up (workers: " . ($workers_ok ? 'ok' : 'missing')
            . ", port $self->{port}: " . ($port_ok ? 'ok' : 'closed') . ")\n$log";
    }
    $self->{initial_workers} = [ $self->worker_pids ];
    return $self;
}

sub nginx_t {
    my ($conf, %o) = @_;
    my $self = _new_nginx(%o, conf => $conf);
    my $p = $self->{prefix};
    my ($rc, $out, $err) = _run([$NGINX, '-t', '-p', "$p/", '-c', $self->{conf_path}, '-e', "$p/error.log"], server => 1, env => $o{env});
    my @r = ($rc, $out . $err, $self->{conf_path}, $self->{conf_text});
    remove_tree($p) unless $ENV{SPANPROF_KEEP};
    return @r;
}

sub conf_line {
    my ($text, $re) = @_;
    my $n = 0;
    for my $l (split /\n/, $text) {
        $n++;
        return $n if $l =~ $re;
    }
    return undef;
}

# --- HTTP clients -------------------------------------------------------------------

sub http_get {
    my ($port, $path, %o) = @_;
    return http_request('GET', $port, $path, %o);
}

sub http_request {
    my ($method, $port, $path, %o) = @_;
    my %h = %{ $o{headers} || {} };
    my $agent = 'spanprof-test/1.0';
    my $ht = HTTP::Tiny->new(timeout => $o{timeout} // 10, keep_alive => 0,
        agent => $agent, max_redirect => 0);
    my %args = (headers => \%h);
    $args{content} = $o{content} if defined $o{content};
    my $r = $ht->request($method, "http://127.0.0.1:$port$path", \%args);
    return {
        status  => $r->{status},
        reason  => $r->{reason},
        headers => $r->{headers} || {},
        content => $r->{content} // '',
    };
}

sub raw_request {
    my ($port, $bytes, %o) = @_;
    my $timeout = $o{timeout} // 3;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp', Timeout => 5) or die "raw_request: connect $port: $!";
    binmode $s;
    my $lport = $s->sockport;
    my $off = 0;
    while ($off < length $bytes) {
        my $n = syswrite($s, $bytes, length($bytes) - $off, $off);
        last unless $n;
        $off += $n;
    }
    my $sel = IO::Select->new($s);
    my $resp = '';
    my $deadline = time + $timeout;
    while ((my $left = $deadline - time) > 0) {
        last unless $sel->can_read($left);
        my $n = sysread($s, my $chunk, 65536);
        last unless $n;
        $resp .= $chunk;
    }
    close $s;
    return wantarray ? ($resp, $lport) : $resp;
}

sub curl_h2 {
    my ($port, $path, @headers) = @_;
    my @cmd = ('curl', '-s', '--http2-prior-knowledge', '-D', '-',
        '--max-time', '10', "http://127.0.0.1:$port$path");
    push @cmd, map { ('-H', $_) } @headers;
    my ($rc, $out, $err) = _run(\@cmd, timeout => 20);
    my %r = (exit => $rc, raw => $out, stderr => $err, headers => {},
        content => '', status => 0, version => '');
    my $end = index($out, "\r\n\r\n");
    if ($end >= 0) {
        my ($sl, @h) = split /\r\n/, substr($out, 0, $end);
        @r{qw(version status)} = $sl =~ m{^HTTP/(\S+)\s+(\d+)} if defined $sl;
        for (@h) {
            my ($n, $v) = /^([^:]+):\s*(.*)$/ or next;
            $r{headers}{lc $n} = $v;
        }
        $r{content} = substr($out, $end + 4);
    }
    return \%r;
}

# A minimal HTTP/2 client (prior knowledge, cleartext): all requests as
# concurrent streams of one connection. Request headers are HPACK literals
# without Huffman; of the response only :status (nginx never Huffman-codes
# it) and the DATA bytes are decoded.
my %H2_STATUS = (0x88 => 200, 0x89 => 204, 0x8a => 206, 0x8b => 304,
    0x8c => 400, 0x8d => 404, 0x8e => 500);

sub _hpack_int {
    my ($first, $bits, $v) = @_;
    my $max = (1 << $bits) - 1;
    return chr($first | $v) if $v < $max;
    my $o = chr($first | $max);
    $v -= $max;
    while ($v >= 128) { $o .= chr(($v & 0x7f) | 0x80); $v >>= 7 }
    return $o . chr($v);
}

sub _hpack_lit {
    my ($name_index, $value) = @_;
    return _hpack_int(0x00, 4, $name_index) . _hpack_int(0x00, 7, length $value) . $value;
}

sub _h2_frame {
    my ($type, $flags, $stream, $payload) = @_;
    my $len = length $payload;
    return pack('CnCCN', $len >> 16, $len & 0xffff, $type, $flags, $stream & 0x7fffffff) . $payload;
}

sub h2c_requests {
    my ($port, $paths, %o) = @_;
    my $timeout = $o{timeout} // 15;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp', Timeout => 5) or die "h2c_requests: connect $port: $!";
    binmode $s;
    my $lport = $s->sockport;
    my $out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" . _h2_frame(4, 0, 0, '');
    my (%st, @order);
    my $id = 1;
    for my $e (@$paths) {
        # a path, or [path, [name, value], ...] with more request headers
        my ($p, @hdr) = ref $e ? @$e : ($e);
        my $block = "\x82\x86" . _hpack_lit(4, $p) . _hpack_lit(1, "127.0.0.1:$port")
            . _hpack_lit(58, $o{agent} // 'spanprof-test/1.0');
        # literal without indexing, new name (RFC 7541 6.2.2)
        $block .= "\x00" . _hpack_int(0x00, 7, length $_->[0]) . $_->[0]
            . _hpack_int(0x00, 7, length $_->[1]) . $_->[1] for @hdr;
        $out .= _h2_frame(1, 0x5, $id, $block);    # END_STREAM | END_HEADERS
        $st{$id} = { path => $p, stream => $id, status => 0, body => '', done => 0 };
        push @order, $id;
        $id += 2;
    }
    my $send = sub {
        my ($b) = @_;
        my $off = 0;
        while ($off < length $b) {
            my $n = syswrite($s, $b, length($b) - $off, $off);
            die "h2c_requests: write: $!" unless $n;
            $off += $n;
        }
    };
    $send->($out);
    my $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + $timeout;
    my $goaway;
    while (grep { !$st{$_}{done} } @order) {
        while (length $buf >= 9) {
            my ($l1, $l2, $type, $flags, $sid) = unpack('CnCCN', $buf);
            my $len = ($l1 << 16) | $l2;
            last if length $buf < 9 + $len;
            my $pl = substr($buf, 9, $len);
            substr($buf, 0, 9 + $len) = '';
            $sid &= 0x7fffffff;
            if ($type == 4 && !($flags & 1)) {        # SETTINGS: ack
                $send->(_h2_frame(4, 1, 0, ''));
            } elsif ($type == 6 && !($flags & 1)) {   # PING: answer
                $send->(_h2_frame(6, 1, 0, $pl));
            } elsif ($type == 7) {                    # GOAWAY
                $goaway = 1;
            } elsif (my $x = $st{$sid}) {
                if ($type == 1) {
                    my $pad = ($flags & 0x8) ? ord(substr($pl, 0, 1)) : 0;
                    my $hb = substr($pl, ($flags & 0x8 ? 1 : 0) + ($flags & 0x20 ? 5 : 0));
                    $hb = substr($hb, 0, length($hb) - $pad) if $pad;
                    my $b0 = ord $hb;
                    # nginx may first emit a dynamic table size update (001xxxxx)
                    while (($b0 & 0xe0) == 0x20) { $hb = substr($hb, 1); $b0 = ord $hb }
                    if ($H2_STATUS{$b0}) { $x->{status} = $H2_STATUS{$b0} }
                    elsif ($hb =~ /^[\x48\x08\x18]\x03(\d{3})/) { $x->{status} = 0 + $1 }
                    else { $x->{status} = -1 }
                } elsif ($type == 0) {
                    my $pad = ($flags & 0x8) ? ord(substr($pl, 0, 1)) : 0;
                    my $d = substr($pl, $flags & 0x8 ? 1 : 0);
                    $d = substr($d, 0, length($d) - $pad) if $pad;
                    $x->{body} .= $d;
                } elsif ($type == 3) {
                    $x->{rst} = unpack('N', $pl);
                    $x->{done} = 1;
                }
                $x->{done} = 1 if ($type == 0 || $type == 1) && ($flags & 1);
            }
        }
        last if $goaway || !grep { !$st{$_}{done} } @order;
        my $left = $deadline - time;
        last if $left <= 0 || !$sel->can_read($left);
        my $n = sysread($s, my $chunk, 65536);
        last unless $n;
        $buf .= $chunk;
    }
    close $s;
    my @r = map { $st{$_} } @order;
    return wantarray ? (\@r, $lport) : \@r;
}

# --- protobuf text format ---------------------------------------------------------------

my %ESC = (n => "\n", r => "\r", t => "\t", '"' => '"', "'" => "'",
    '\\' => '\\', a => "\a", b => "\b", f => "\f", v => "\x0b", '?' => '?');

sub _unescape {
    my ($s, $where) = @_;
    $s =~ s{\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))}{
        defined $1 ? chr(oct($1) & 0xff)
      : defined $2 ? chr(hex $2)
      : exists $ESC{$3} ? $ESC{$3}
      : die "text format: unknown escape \\$3 $where\n"
    }gse;
    return $s;
}

sub _tf_where {
    my ($t) = @_;
    my $pos = pos($$t) // 0;
    my $line = 1 + (substr($$t, 0, $pos) =~ tr/\n//);
    my $ctx = substr($$t, $pos, 40);
    $ctx =~ s/\n/\\n/g;
    return "at line $line near '$ctx'";
}

sub _tf_ws {
    my ($t) = @_;
    $$t =~ /\G(?:\s+|#[^\n]*)*/gc;
}

sub _tf_message {
    my ($t, $close) = @_;
    my %m;
    while (1) {
        _tf_ws($t);
        if ((pos($$t) // 0) >= length $$t) {
            die "text format: unexpected end, expected '$close' " . _tf_where($t) . "\n"
                if defined $close;
            return \%m;
        }
        if (defined $close && $$t =~ /\G\Q$close\E/gc) {
            return \%m;
        }
        my $name;
        if ($$t =~ /\G([A-Za-z_][A-Za-z0-9_]*|\d+)/gc) { $name = $1 }
        elsif ($$t =~ /\G\[([^\]]*)\]/gc)            { $name = "[$1]" }
        else { die "text format: expected a field name " . _tf_where($t) . "\n" }
        _tf_ws($t);
        my $colon = $$t =~ /\G:/gc;
        _tf_ws($t);
        my @vals;
        if ($$t =~ /\G([{<])/gc) {
            push @vals, _tf_message($t, $1 eq '{' ? '}' : '>');
        }
        elsif (!$colon) {
            die "text format: expected ':' or '{' after '$name' " . _tf_where($t) . "\n";
        }
        elsif ($$t =~ /\G\[/gc) {
            while (1) {
                _tf_ws($t);
                last if $$t =~ /\G\]/gc;
                if ($$t =~ /\G([{<])/gc) { push @vals, _tf_message($t, $1 eq '{' ? '}' : '>') }
                else                     { push @vals, _tf_scalar($t) }
                _tf_ws($t);
                $$t =~ /\G,/gc;
            }
        }
        else {
            push @vals, _tf_scalar($t);
        }
        push @{ $m{$name} }, @vals;
        _tf_ws($t);
        $$t =~ /\G[;,]/gc;
    }
}

sub _tf_scalar {
    my ($t) = @_;
    if ($$t =~ /\G(?=["'])/gc) {
        my $s = '';
        while (1) {
            if    ($$t =~ /\G"((?:[^"\\\n]|\\.)*)"/gc) { $s .= _unescape($1, _tf_where($t)) }
            elsif ($$t =~ /\G'((?:[^'\\\n]|\\.)*)'/gc) { $s .= _unescape($1, _tf_where($t)) }
            else { die "text format: unterminated string " . _tf_where($t) . "\n" }
            _tf_ws($t);
            last unless $$t =~ /\G(?=["'])/gc;
        }
        return $s;
    }
    return $1 if $$t =~ /\G(-?[A-Za-z0-9_][A-Za-z0-9_.+\-]*)/gc;
    die "text format: expected a value " . _tf_where($t) . "\n";
}

sub parse_text_format {
    my ($text) = @_;
    my $t = \"$text";
    pos($$t) = 0;
    return _tf_message($t, undef);
}

sub decode_traces {
    my ($body) = @_;
    my $dir = tempdir('spanprof-pb-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    _spew("$dir/body", $body);
    my ($rc, $out, $err) = _run(['protoc',
        '--decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
        '-I', "$ROOT/proto",
        "$ROOT/proto/opentelemetry/proto/collector/trace/v1/trace_service.proto"],
        stdin => "$dir/body");
    remove_tree($dir);
    if ($rc != 0) {
        my $hex = unpack('H*', substr($body, 0, 64));
        die "decode_traces: protoc failed (exit $rc): $err (body "
            . length($body) . " bytes, starts $hex)\n";
    }
    return parse_text_format($out);
}

# Text format -> protobuf bytes (for self-tests and hand-made bodies).
sub encode_traces {
    my ($text, $type) = @_;
    $type //= 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest';
    my $dir = tempdir('spanprof-pb-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    _spew("$dir/msg", $text);
    my ($rc, $out, $err) = _run(['protoc', "--encode=$type", '-I', "$ROOT/proto",
        "$ROOT/proto/opentelemetry/proto/collector/trace/v1/trace_service.proto"],
        stdin => "$dir/msg");
    remove_tree($dir);
    die "encode_traces: protoc failed (exit $rc): $err\n" if $rc != 0;
    return $out;
}

sub _one {
    my ($m, $f) = @_;
    return undef unless $m && ref $m eq 'HASH' && $m->{$f};
    return $m->{$f}[-1];
}

sub _num {
    my ($v) = @_;
    return undef unless defined $v;
    return 9**9**9 if $v =~ /^(?:inf|infinity)$/i;
    return -9**9**9 if $v =~ /^-(?:inf|infinity)$/i;
    return $v if $v =~ /^-?nan$/i;
    return hex($v) if $v =~ /^0x/i;
    return 0 + $v;
}

# AnyValue (decoded text-format hash) -> (value, type)
sub _any_value {
    my ($av) = @_;
    return (undef, 'none') unless $av && ref $av eq 'HASH';
    return (_one($av, 'string_value'), 'string') if exists $av->{string_value};
    return (_num(_one($av, 'int_value')), 'int')  if exists $av->{int_value};
    if (exists $av->{bool_value}) {
        my $b = _one($av, 'bool_value');
        return (($b eq 'true' || $b eq '1') ? 1 : 0, 'bool');
    }
    return (_num(_one($av, 'double_value')), 'double') if exists $av->{double_value};
    return (_one($av, 'bytes_value'), 'bytes') if exists $av->{bytes_value};
    if (exists $av->{array_value}) {
        my $arr = _one($av, 'array_value');
        return ([ map { (_any_value($_))[0] } @{ $arr->{values} || [] } ], 'array');
    }
    if (exists $av->{kvlist_value}) {
        my $kv = _one($av, 'kvlist_value');
        my ($h) = _kv_list($kv->{values});
        return ($h, 'kvlist');
    }
    return (undef, 'none');
}

sub _kv_list {
    my ($list) = @_;
    my (%v, %t, @k);
    for my $kv (@{ $list || [] }) {
        my $k = _one($kv, 'key') // '';
        my ($val, $type) = _any_value(_one($kv, 'value'));
        push @k, $k;
        $v{$k} = $val;
        $t{$k} = $type;
    }
    return (\%v, \%t, \@k);
}

sub _hex { my $b = shift; return defined $b ? unpack('H*', $b) : '' }

sub spans_from_request {
    my ($req) = @_;
    my @out;
    for my $rs (@{ $req->{resource_spans} || [] }) {
        my ($res, $rtypes) = _kv_list((_one($rs, 'resource') || {})->{attributes});
        for my $ss (@{ $rs->{scope_spans} || [] }) {
            my $scope = _one($ss, 'scope') || {};
            my %sc = (name => _one($scope, 'name') // '', version => _one($scope, 'version') // '');
            for my $sp (@{ $ss->{spans} || [] }) {
                my ($attrs, $types, $keys) = _kv_list($sp->{attributes});
                my @events;
                for my $ev (@{ $sp->{events} || [] }) {
                    my ($ea, $et) = _kv_list($ev->{attributes});
                    push @events, {
                        name => _one($ev, 'name') // '',
                        time => _num(_one($ev, 'time_unix_nano')) // 0,
                        attrs => $ea, attr_types => $et,
                    };
                }
                my $status = _one($sp, 'status') || {};
                my $code = _one($status, 'code') // '';
                $code = '' if $code eq 'STATUS_CODE_UNSET' || $code eq '0';
                $code = 'STATUS_CODE_OK' if $code eq '1';
                $code = 'STATUS_CODE_ERROR' if $code eq '2';
                push @out, {
                    trace_id       => _hex(_one($sp, 'trace_id')),
                    span_id        => _hex(_one($sp, 'span_id')),
                    parent_span_id => _hex(_one($sp, 'parent_span_id')),
                    trace_state    => _one($sp, 'trace_state') // '',
                    name           => _one($sp, 'name') // '',
                    kind           => _one($sp, 'kind') // 'SPAN_KIND_UNSPECIFIED',
                    flags          => _num(_one($sp, 'flags')) // 0,
                    start          => _num(_one($sp, 'start_time_unix_nano')) // 0,
                    end            => _num(_one($sp, 'end_time_unix_nano')) // 0,
                    attrs          => $attrs,
                    attr_types     => $types,
                    attr_keys      => $keys,
                    events         => \@events,
                    status_code    => $code,
                    status_message => _one($status, 'message') // '',
                    resource       => $res,
                    resource_types => $rtypes,
                    scope          => \%sc,
                    dropped_attributes_count => _num(_one($sp, 'dropped_attributes_count')) // 0,
                    dropped_events_count     => _num(_one($sp, 'dropped_events_count')) // 0,
                };
            }
        }
    }
    return @out;
}

# Decoded spans of one stored request (cached).
sub request_spans { _request_spans(@_) }
sub _request_spans {
    my ($recv, $req) = @_;
    my $c = $recv->{decoded}{ $req->{seq} };
    return @$c if $c;
    my @spans = spans_from_request(decode_traces($req->{body}));
    $_->{seq} = $req->{seq} for @spans;
    $recv->{decoded}{ $req->{seq} } = \@spans;
    return @spans;
}

sub _accepted {
    my ($req) = @_;
    return $req->{action} =~ /^(?:2\d\d|partial:\d+)$/;
}

sub collect_spans {
    my ($recv, %o) = @_;
    my @all;
    for my $req ($recv->requests) {
        next unless $req->{method} eq 'POST' && $req->{path} =~ m{/v1/traces$|TraceService/Export$};
        next if $o{accepted_only} && !_accepted($req);
        push @all, _request_spans($recv, $req);
    }
    return @all;
}

sub _dedupe {
    my %seen;
    return grep { !$seen{ $_->{span_id} }++ } @_;
}

sub wait_for_spans {
    my ($recv, $n, $timeout, %o) = @_;
    my $filter = $o{filter} || sub { 1 };
    my @m;
    my $deadline = time + ($timeout // 10);
    while (1) {
        @m = grep { $filter->($_) } _dedupe(collect_spans($recv, accepted_only => $o{accepted_only}));
        last if @m >= $n || time >= $deadline;
        sleep 0.05;
    }
    return @m;
}

my $SYNC_NO = 0;
sub sync_spans {
    my ($recv, $port, %o) = @_;
    my $path = ($o{prefix} // '/') . sprintf('__spanprof_sync_%d_%d_%d', $$, ++$SYNC_NO, int rand 1e9);
    my $r = http_get($port, $path);
    my @s = wait_for_spans($recv, 1, $o{timeout} // 10,
        filter => sub { ($_[0]{attrs}{'url.path'} // '') eq $path });
    die "sync_spans: the span of GET $path (status $r->{status}) did not arrive\n" unless @s;
    return _dedupe(collect_spans($recv));
}

# --- OTLP/JSON (file exporter) ------------------------------------------------------

sub read_jsonl {
    my ($path) = @_;
    my $t = _slurp($path) // return ();
    my @out;
    for my $line (split /\n/, $t) {
        next if $line eq '';
        my $j = eval { JSON::PP->new->utf8->decode($line) };
        push @out, { raw => $line, json => $j, error => $@ };
    }
    return @out;
}

my %KIND = (0 => 'SPAN_KIND_UNSPECIFIED', 1 => 'SPAN_KIND_INTERNAL', 2 => 'SPAN_KIND_SERVER',
    3 => 'SPAN_KIND_CLIENT', 4 => 'SPAN_KIND_PRODUCER', 5 => 'SPAN_KIND_CONSUMER');
my %STATUS = (0 => '', 1 => 'STATUS_CODE_OK', 2 => 'STATUS_CODE_ERROR');

sub _json_any {
    my ($v) = @_;
    return (undef, 'none') unless ref $v eq 'HASH';
    return ($v->{stringValue}, 'string') if exists $v->{stringValue};
    return (0 + $v->{intValue}, 'int') if exists $v->{intValue};
    return ($v->{boolValue} ? 1 : 0, 'bool') if exists $v->{boolValue};
    return ($v->{doubleValue}, 'double') if exists $v->{doubleValue};
    return ($v->{bytesValue}, 'bytes') if exists $v->{bytesValue};
    return ([ map { (_json_any($_))[0] } @{ $v->{arrayValue}{values} || [] } ], 'array')
        if exists $v->{arrayValue};
    return ((_json_kv($v->{kvlistValue}{values}))[0], 'kvlist') if exists $v->{kvlistValue};
    return (undef, 'none');
}

sub _json_kv {
    my ($list) = @_;
    my (%v, %t, @k);
    for my $kv (@{ $list || [] }) {
        my ($val, $type) = _json_any($kv->{value});
        push @k, $kv->{key};
        $v{ $kv->{key} } = $val;
        $t{ $kv->{key} } = $type;
    }
    return (\%v, \%t, \@k);
}

sub spans_from_json {
    my ($obj) = @_;
    my @out;
    for my $rs (@{ $obj->{resourceSpans} || [] }) {
        my ($res, $rtypes) = _json_kv(($rs->{resource} || {})->{attributes});
        for my $ss (@{ $rs->{scopeSpans} || [] }) {
            my $scope = $ss->{scope} || {};
            for my $sp (@{ $ss->{spans} || [] }) {
                my ($attrs, $types, $keys) = _json_kv($sp->{attributes});
                my @events = map {
                    my ($ea, $et) = _json_kv($_->{attributes});
                    { name => $_->{name} // '', time => 0 + ($_->{timeUnixNano} // 0),
                      attrs => $ea, attr_types => $et }
                } @{ $sp->{events} || [] };
                my $st = $sp->{status} || {};
                push @out, {
                    trace_id       => $sp->{traceId} // '',
                    span_id        => $sp->{spanId} // '',
                    parent_span_id => $sp->{parentSpanId} // '',
                    trace_state    => $sp->{traceState} // '',
                    name           => $sp->{name} // '',
                    kind           => $KIND{ $sp->{kind} // 0 } // "kind:$sp->{kind}",
                    flags          => 0 + ($sp->{flags} // 0),
                    start          => 0 + ($sp->{startTimeUnixNano} // 0),
                    end            => 0 + ($sp->{endTimeUnixNano} // 0),
                    attrs          => $attrs,
                    attr_types     => $types,
                    attr_keys      => $keys,
                    events         => \@events,
                    status_code    => $STATUS{ $st->{code} // 0 } // "code:$st->{code}",
                    status_message => $st->{message} // '',
                    resource       => $res,
                    resource_types => $rtypes,
                    scope          => { name => $scope->{name} // '', version => $scope->{version} // '' },
                };
            }
        }
    }
    return @out;
}

# --- assertion helpers ------------------------------------------------------------

sub rand_hex {
    my ($chars) = @_;
    my $h;
    do { $h = join '', map { sprintf '%x', int rand 16 } 1 .. $chars } while $h =~ /^0+$/;
    return $h;
}

# Body of the echo backend "tp=$http_traceparent ts=$http_tracestate\n".
sub parse_echo {
    my ($content) = @_;
    my ($tp, $ts) = ($content // '') =~ /^tp=(.*?) ts=(.*)\n\z/ or return;
    return ($tp, $ts);
}

sub server_spans { grep { $_->{kind} eq 'SPAN_KIND_SERVER' } @_ }
sub client_spans { grep { $_->{kind} eq 'SPAN_KIND_CLIENT' } @_ }

sub by_path {
    my ($path, @spans) = @_;
    return grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.path'} // '') eq $path } @spans;
}

sub span_summary {
    my @l;
    for my $s (@_) {
        my $a = $s->{attrs} || {};
        my $attrs = join ' ', map {
            my $v = $a->{$_};
            $v = ref $v eq 'ARRAY' ? '[' . join(',', @$v) . ']' : ref $v ? '{...}' : $v // 'undef';
            "$_=$v"
        } @{ $s->{attr_keys} || [ sort keys %$a ] };
        my $ev = join ' ', map {
            my $e = $_;
            "<$e->{name} " . join(' ', map { "$_=" . ($e->{attrs}{$_} // 'undef') } sort keys %{ $e->{attrs} }) . '>'
        } @{ $s->{events} || [] };
        (my $k = $s->{kind}) =~ s/^SPAN_KIND_//;
        push @l, sprintf('%s "%s" trace=%s span=%s parent=%s flags=0x%x status=%s%s%s [%s]%s%s',
            $k, $s->{name}, $s->{trace_id}, $s->{span_id}, $s->{parent_span_id} || '-',
            $s->{flags} // 0, $s->{status_code} || 'unset',
            $s->{status_message} ? "($s->{status_message})" : '',
            length($s->{trace_state} // '') ? " ts=$s->{trace_state}" : '',
            $attrs, $ev ? " events: $ev" : '',
            defined $s->{seq} ? " (req $s->{seq})" : '');
    }
    return join("\n", @l) . "\n";
}

# --- cleanup ----------------------------------------------------------------------

sub _stop_all {
    for my $k (keys %LIVE) {
        my $o = delete $LIVE{$k} or next;
        eval { $o->stop; 1 } or warn "cleanup: $@";
    }
}

for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} = sub { _stop_all(); POSIX::_exit(1) } unless $SIG{$sig};
}

# --- processes left behind -----------------------------------------------------
# Every server and receiver runs in a process group of its own (nginx and
# apache2 make one when they daemonize; the receivers and spanprof serve
# are started with setpgrp): a stop that has to fall back to SIGKILL kills
# the whole group, and at the end of the test file a group still holding a
# live process fails the file (after killing it), so a test run leaves
# nothing running.

my %GROUPS;         # pgid => [what it is, pid of the test process that started it]

sub _pgid_of {
    my ($pid) = @_;
    my $t = _slurp("/proc/$pid/stat") // return;
    my ($state, $pgid) = $t =~ /^\d+ \(.*\) (\S) \d+ (\d+)/s or return;
    return $state eq 'Z' || $state eq 'X' ? undef : $pgid;
}

# The live (not zombie) processes of group pgid.
sub group_members {
    my ($pgid) = @_;
    opendir(my $dh, '/proc') or return ();
    my @m = grep { /^\d+$/ && (_pgid_of($_) // 0) == $pgid } readdir $dh;
    closedir $dh;
    return @m;
}

# pgid: a group a test started (never the test's own, never init's).
sub track_group {
    my ($pgid, $what) = @_;
    return unless $pgid && $pgid > 1 && $pgid != getpgrp();
    $GROUPS{$pgid} = [$what, $$];
    return $pgid;
}

sub kill_group {
    my ($pgid, $sig) = @_;
    return 0 unless $pgid && $GROUPS{$pgid};
    return kill($sig // 'KILL', -$pgid);
}

sub _left_behind {
    my @left;
    # Only in the process that started them: a forked child of a test
    # ending (and running END) must not kill its parent's servers.
    for my $g (sort { $a <=> $b } grep { $GROUPS{$_}[1] == $$ } keys %GROUPS) {
        next unless group_members($g);
        # A process just SIGKILLed by a stop takes a moment to go.
        wait_until(3, sub { !group_members($g) }) and next;
        my @m = group_members($g) or next;
        push @left, "$GROUPS{$g}[0] (process group $g): " . join(', ', map {
            my $c = _slurp("/proc/$_/cmdline") // ''; $c =~ tr/\0/ /; "$_ [$c]"
        } @m);
        kill 'KILL', -$g;
    }
    return @left;
}

END {
    my $status = $?;
    _stop_all();
    if (my @left = _left_behind()) {
        _builder()->diag("processes left running at the end of the test (killed now):\n  "
            . join("\n  ", @left));
        $status ||= 1;
    }
    $? = $status;
}

# ====================================================================================
package SpanProf::Test::Receiver;

use strict;
use warnings;
use File::Path qw(remove_tree);
use JSON::PP;
use MIME::Base64 qw(decode_base64);
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);

sub port { $_[0]{port} }
sub dir  { $_[0]{dir} }
sub url  { $_[0]{url} // "http://127.0.0.1:$_[0]{port}" }   # {url}: GrpcReceiver.pm
sub receiver_log { SpanProf::Test::_slurp("$_[0]{base}/receiver.log") // "" }

sub requests {
    my ($self) = @_;
    opendir(my $dh, $self->{dir}) or return ();
    my @files = sort grep { /^\d+\.req$/ } readdir $dh;
    closedir $dh;
    my @out;
    for my $f (@files) {
        my $r = $self->{cache}{$f};
        unless ($r) {
            my $txt = SpanProf::Test::_slurp("$self->{dir}/$f");
            next unless defined $txt;
            my $j = JSON::PP->new->decode($txt);
            my $body = decode_base64($j->{body_b64} // '');
            delete $j->{body_b64};
            $j->{body} = $body;
            if (($j->{headers}{'content-encoding'} // '') =~ /^\s*gzip\s*$/i) {
                $j->{raw_encoding} = 'gzip';
                $j->{raw_body} = $body;
                my $plain;
                gunzip(\$body => \$plain)
                    or die "receiver request $f: gunzip failed: $GunzipError\n";
                $j->{body} = $plain;
            }
            $r = $self->{cache}{$f} = $j;
        }
        push @out, $r;
    }
    return @out;
}

sub summary {
    my ($self) = @_;
    my @l;
    for my $r ($self->requests) {
        my $n = '';
        if ($r->{path} eq '/v1/traces') {
            my @s = eval { SpanProf::Test::_request_spans($self, $r) };
            $n = $@ ? " (undecodable: $@)" : ' ' . scalar(@s) . ' spans: '
                . join(', ', map { "$_->{name}" . ($_->{attrs}{'url.path'} ? " $_->{attrs}{'url.path'}" : '') } @s);
        }
        push @l, sprintf('#%d %.3f %s %s -> %s%s', $r->{seq}, $r->{time}, $r->{method}, $r->{path}, $r->{action}, $n);
    }
    return join("\n", @l) . "\n";
}

sub stop {
    my ($self) = @_;
    return if $self->{stopped}++;
    delete $LIVE{"$self"};
    if (my $pid = $self->{pid}) {
        kill 'TERM', -$pid;
        kill 'TERM', $pid;
        my $deadline = time + 5;
        while (time < $deadline) {
            last if waitpid($pid, WNOHANG) == $pid;
            sleep 0.02;
        }
        if (kill 0, $pid) {
            kill 'KILL', -$pid;
            kill 'KILL', $pid;
            waitpid($pid, 0);
        }
        # children left in the group (a hanging connection)
        kill 'KILL', -$pid;
    }
    if (SpanProf::Test::_failing()) {
        my $s = eval { $self->summary } // "summary failed: $@";
        SpanProf::Test::_builder()->diag("receiver on port $self->{port} stored:\n$s"
            . "(kept in $self->{base})");
        return;
    }
    remove_tree($self->{base}) unless $ENV{SPANPROF_KEEP};
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->stop unless $self->{stopped};
}

# ====================================================================================
package SpanProf::Test::Nginx;

use strict;
use warnings;
use File::Path qw(remove_tree);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);

sub port       { $_[0]{port} }
sub port2      { $_[0]{port2} }
sub port3      { $_[0]{port3} }
sub prefix     { $_[0]{prefix} }
sub conf_path  { $_[0]{conf_path} }
sub conf_text  { $_[0]{conf_text} }
sub master_pid { $_[0]{master_pid} }

sub _proc_stat {
    my ($pid) = @_;
    my $t = SpanProf::Test::_slurp("/proc/$pid/stat") // return;
    my ($state, $ppid) = $t =~ /^\d+ \(.*\) (\S) (\d+)/s or return;
    return ($state, $ppid);
}

sub _alive {
    my ($pid) = @_;
    return 0 unless $pid && kill(0, $pid);
    my ($state) = _proc_stat($pid);
    return 0 if !defined $state || $state eq 'Z' || $state eq 'X';
    return 1;
}

sub worker_pids {
    my ($self) = @_;
    my $m = $self->{master_pid} or return ();
    opendir(my $dh, '/proc') or return ();
    my @pids;
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my ($state, $ppid) = _proc_stat($p);
        next unless defined $ppid && $ppid == $m && $state ne 'Z' && $state ne 'X';
        push @pids, $p;
    }
    closedir $dh;
    @pids = sort { $a <=> $b } @pids;
    return wantarray ? @pids : scalar @pids;
}

sub rss_kb {
    my ($self, $pid) = @_;
    my $t = SpanProf::Test::_slurp("/proc/$pid/status") // return undef;
    return $t =~ /^VmRSS:\s+(\d+)\s+kB/m ? $1 : undef;
}

sub error_log {
    my ($self) = @_;
    return SpanProf::Test::_slurp("$self->{prefix}/error.log") // '';
}

sub error_log_tail {
    my ($self, $n) = @_;
    $n //= 40;
    my @l = split /\n/, $self->error_log;
    splice(@l, 0, @l - $n) if @l > $n;
    return join("\n", @l) . "\n";
}

sub crash_lines {
    my ($self) = @_;
    return grep { /exited on signal|core dumped|segmentation fault|assertion .*failed/i }
        split /\n/, $self->error_log;
}

sub spanprof_lines {
    my ($self) = @_;
    return grep { /spanprof/ } split /\n/, $self->error_log;
}

# Error log lines that mention spanprof but whose message does not start
# with "spanprof: " (the module's convention).
sub log_convention_violations {
    my ($self) = @_;
    return grep {
        !/ngx_http_spanprof_module\.so/
            && !/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[\w+\] \d+#\d+: (?:\*\d+ )?spanprof: /
    } $self->spanprof_lines;
}

sub signal {
    my ($self, $sig) = @_;
    kill $sig, $self->{master_pid} or die "kill $sig $self->{master_pid}: $!";
}

sub reload {
    my ($self, %o) = @_;
    my %old = map { $_ => 1 } $self->worker_pids;
    my $p = $self->{prefix};
    my ($rc, $out, $err) = SpanProf::Test::_run([$NGINX, '-p', "$p/", '-c', $self->{conf_path},
        '-e', "$p/error.log", '-s', 'reload'], server => 1);
    die "nginx -s reload failed (exit $rc): $out$err\n" if $rc != 0;
    my @new;
    my $ok = SpanProf::Test::wait_until($o{timeout} // 10, sub {
        @new = grep { !$old{$_} } $self->worker_pids;
        return @new >= $self->{workers};
    });
    die "reload: no new workers appeared\n" . $self->error_log_tail(20) unless $ok;
    return @new;
}

sub quit {
    my ($self, $timeout) = @_;
    $timeout //= 30;
    my $pid = $self->{master_pid};
    my $t0 = time;
    return 0 unless _alive($pid);
    $self->{last_workers} = [ $self->worker_pids ];
    kill 'QUIT', $pid;
    SpanProf::Test::wait_until($timeout, sub { !_alive($pid) });
    return time - $t0;
}

sub stop {
    my ($self) = @_;
    return if $self->{stopped}++;
    delete $LIVE{"$self"};
    my $pid = $self->{master_pid};
    if ($pid && _alive($pid)) {
        my @workers = $self->worker_pids;
        kill 'QUIT', $pid;
        unless (SpanProf::Test::wait_until(10, sub { !_alive($pid) })) {
            kill 'TERM', $pid;
            unless (SpanProf::Test::wait_until(2, sub { !_alive($pid) })) {
                # The whole group: a SIGKILLed master's workers would be
                # orphaned, and workers it forked since @workers was read.
                SpanProf::Test::kill_group($self->{pgid}) or kill 'KILL', $pid;
            }
        }
        for my $w (@workers, @{ $self->{last_workers} || [] }) {
            kill 'KILL', $w if _alive($w);
        }
    }
    SpanProf::Test::save_sanitizer_lines($self->error_log, 'nginx');
    if (SpanProf::Test::_failing() || $self->{failed_start}) {
        SpanProf::Test::_builder()->diag("nginx error.log tail ($self->{prefix}):\n"
            . $self->error_log_tail(40)) unless $self->{failed_start};
        return;
    }
    remove_tree($self->{prefix}) unless $ENV{SPANPROF_KEEP};
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->stop unless $self->{stopped};
}

1;
