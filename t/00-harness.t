#!/usr/bin/perl
# Self-test of the test harness (t/lib/SpanProf/Test.pm, t/receiver.pl),
# without the spanprof module: the fake collector, the protobuf text-format
# parser on hand-made OTLP bodies, and plain nginx driven by the harness.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use HTTP::Tiny;
use IO::Compress::Gzip qw(gzip $GzipError);
use Time::HiRes qw(time sleep);
use SpanProf::Test;

# --- text-format parser ------------------------------------------------------------
{
    my $m = parse_text_format(<<'EOF');
a: 1
s: "q\"\\\n\t\r\'\001\377\x41\x7a" 'single' "concat"
nested {
  x: -5
  inner < y: SPAN_KIND_SERVER >
  d: 1.5e+10
}
nested { x: 7 }
list: [1, 2, 3]
42: 0x1f
flag: true
EOF
    is_deeply $m->{a}, [1], 'scalar field';
    is $m->{s}[0], "q\"\\\n\t\r'\x01\xffAzsingleconcat", 'string escapes and concatenation';
    is scalar @{ $m->{nested} }, 2, 'repeated message';
    is $m->{nested}[0]{x}[0], -5, 'negative number';
    is $m->{nested}[0]{inner}[0]{y}[0], 'SPAN_KIND_SERVER', 'enum and <> message';
    is $m->{nested}[0]{d}[0], '1.5e+10', 'float token';
    is $m->{nested}[1]{x}[0], 7, 'second repeated message';
    is_deeply $m->{list}, [1, 2, 3], 'list syntax';
    is $m->{42}[0], '0x1f', 'unknown field by number';
    is $m->{flag}[0], 'true', 'bool';
    for my $bad ('a {', 'a: "x', 'a: "\q"', 'a b', '}', 'a: ') {
        ok !eval { parse_text_format($bad); 1 }, "parse error dies: '$bad'" or diag explain parse_text_format($bad);
    }
}

# --- hand-made OTLP body through protoc -----------------------------------------------
my $msg = <<'EOF';
resource_spans {
  resource {
    attributes { key: "service.name" value { string_value: "svc \"x\" caf\303\251" } }
    attributes { key: "process.pid" value { int_value: 4242 } }
  }
  scope_spans {
    scope { name: "spanprof" version: "0.1.0" }
    spans {
      trace_id: "\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c"
      span_id: "\xb7\xad\x6b\x71\x69\x20\x33\x31"
      parent_span_id: "\x00\x22\x5c\x0a\x22\x5c\x0d\x00"
      trace_state: "congo=t61rcWkgMzE"
      flags: 769
      name: "GET /api/"
      kind: SPAN_KIND_SERVER
      start_time_unix_nano: 1700000000123456789
      end_time_unix_nano: 1700000000223456789
      attributes { key: "http.response.status_code" value { int_value: 503 } }
      attributes { key: "url.path" value { string_value: "/api/\n\"x\"" } }
      attributes { key: "ok" value { bool_value: true } }
      attributes { key: "ratio" value { double_value: 0.25 } }
      attributes { key: "arr" value { array_value { values { string_value: "a" } values { int_value: 2 } } } }
      events {
        time_unix_nano: 1700000000200000000
        name: "upstream.attempt"
        attributes { key: "server.port" value { int_value: 8080 } }
      }
      status { message: "boom" code: STATUS_CODE_ERROR }
    }
    spans {
      trace_id: "\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c"
      span_id: "\x01\x02\x03\x04\x05\x06\x07\x08"
      parent_span_id: "\xb7\xad\x6b\x71\x69\x20\x33\x31"
      name: "GET"
      kind: SPAN_KIND_CLIENT
      start_time_unix_nano: 1
      end_time_unix_nano: 2
    }
  }
}
EOF
my $body = encode_traces($msg);
ok length($body) > 100, 'protoc --encode made a body';
{
    my @spans = spans_from_request(decode_traces($body));
    is scalar @spans, 2, 'two spans decoded';
    my ($s, $c) = @spans;
    is $s->{trace_id}, '0af7651916cd43dd8448eb211c80319c', 'trace_id as hex';
    is $s->{span_id}, 'b7ad6b7169203331', 'span_id as hex';
    is $s->{parent_span_id}, '00225c0a225c0d00', 'bytes with escapes (\\0 " \\\\ \\n \\r)';
    is $s->{trace_state}, 'congo=t61rcWkgMzE', 'trace_state';
    is $s->{flags}, 769, 'flags';
    is $s->{name}, 'GET /api/', 'name';
    is $s->{kind}, 'SPAN_KIND_SERVER', 'kind enum name';
    is $s->{start}, 1700000000123456789, 'start ns (64-bit)';
    is $s->{end} - $s->{start}, 100000000, 'end ns';
    is $s->{attrs}{'http.response.status_code'}, 503, 'int attribute';
    is $s->{attr_types}{'http.response.status_code'}, 'int', 'int attribute type';
    is $s->{attrs}{'url.path'}, "/api/\n\"x\"", 'string attribute with escapes';
    is $s->{attrs}{ok}, 1, 'bool attribute';
    is $s->{attrs}{ratio}, 0.25, 'double attribute';
    is_deeply $s->{attrs}{arr}, ['a', 2], 'array attribute';
    is_deeply $s->{attr_keys}, ['http.response.status_code', 'url.path', 'ok', 'ratio', 'arr'], 'attribute order';
    is scalar @{ $s->{events} }, 1, 'one event';
    is $s->{events}[0]{name}, 'upstream.attempt', 'event name';
    is $s->{events}[0]{time}, 1700000000200000000, 'event time';
    is $s->{events}[0]{attrs}{'server.port'}, 8080, 'event attribute';
    is $s->{status_code}, 'STATUS_CODE_ERROR', 'status code';
    is $s->{status_message}, 'boom', 'status message';
    is $s->{resource}{'service.name'}, "svc \"x\" caf\xc3\xa9", 'resource string (UTF-8 bytes)';
    is $s->{resource}{'process.pid'}, 4242, 'resource int';
    is $s->{resource_types}{'process.pid'}, 'int', 'resource int type';
    is_deeply $s->{scope}, { name => 'spanprof', version => '0.1.0' }, 'scope';
    is $c->{kind}, 'SPAN_KIND_CLIENT', 'second span kind';
    is $c->{parent_span_id}, $s->{span_id}, 'second span parent';
    is $c->{status_code}, '', 'unset status is empty';
    is $c->{flags}, 0, 'absent flags are 0';
    is $c->{trace_state}, '', 'absent trace_state is empty';
    my $root = (spans_from_request(decode_traces(encode_traces(
        'resource_spans { scope_spans { spans { trace_id: "\001\001\001\001\001\001\001\001\001\001\001\001\001\001\001\001" span_id: "\002\002\002\002\002\002\002\002" name: "x" } } }'))))[0];
    is $root->{parent_span_id}, '', 'root span: empty parent';
    is $root->{kind}, 'SPAN_KIND_UNSPECIFIED', 'absent kind';
    ok !eval { decode_traces("\xff\xff\xff garbage"); 1 }, 'undecodable body dies';
}

# --- receiver ----------------------------------------------------------------------------
{
    my $r = start_receiver(script => '503,retry-after:2,partial:3,garbage,400');
    like $r->url, qr{^http://127\.0\.0\.1:\d+$}, 'receiver url';
    my $ht = HTTP::Tiny->new(keep_alive => 1, timeout => 5);
    my @res;
    for my $i (1 .. 6) {
        push @res, $ht->post($r->url . '/v1/traces', {
            content => $body,
            headers => { 'content-type' => 'application/x-protobuf', 'x-token' => "abc$i" },
        });
    }
    is_deeply [ map { $_->{status} } @res ], [503, 503, 200, 200, 400, 200], 'scripted statuses, then default 200';
    ok !defined $res[0]{headers}{'retry-after'}, 'plain 503 has no Retry-After';
    is $res[1]{headers}{'retry-after'}, 2, 'retry-after:2';
    is $res[2]{headers}{'content-type'}, 'application/x-protobuf', 'partial: content type';
    my $pr = parse_text_format(decode_partial($res[2]{content}));
    is $pr->{partial_success}[0]{rejected_spans}[0], 3, 'partial: rejected_spans 3';
    is $pr->{partial_success}[0]{error_message}[0], 'test rejection', 'partial: error_message';
    is $res[3]{content}, "\xff\xff\xff garbage", 'garbage body';
    is $res[5]{headers}{'content-type'}, 'application/x-protobuf', '200: protobuf content type';
    is $res[5]{content}, '', '200: empty body';

    # chunked and gzip bodies, Expect: 100-continue, on fresh connections
    gzip(\$body => \my $gz) or die $GzipError;
    my $chunked = '';
    for (my $o = 0; $o < length $gz; $o += 50) {
        my $c = substr($gz, $o, 50);
        $chunked .= sprintf("%x\r\n", length $c) . $c . "\r\n";
    }
    $chunked .= "0\r\nX-Trailer: 1\r\n\r\n";
    my $t0 = time;
    my $resp = raw_request($r->port, "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
        . "Content-Type: application/x-protobuf\r\nContent-Encoding: gzip\r\n"
        . "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n$chunked");
    like $resp, qr{^HTTP/1\.1 100 Continue\r\n\r\nHTTP/1\.1 200 OK\r\n}, 'chunked gzip request answered (after 100 Continue)';
    ok time - $t0 < 2, 'connection closed on Connection: close';

    my @reqs = $r->requests;
    is scalar @reqs, 7, 'seven requests stored';
    is_deeply [ map { $_->{seq} } @reqs ], [1 .. 7], 'sorted by arrival';
    is_deeply [ map { $_->{action} } @reqs ], ['503', 'retry-after:2', 'partial:3', 'garbage', '400', '200', '200'], 'actions recorded';
    is $reqs[0]{method}, 'POST', 'method';
    is $reqs[0]{path}, '/v1/traces', 'path';
    is $reqs[0]{headers}{'x-token'}, 'abc1', 'header stored (lower-case name)';
    is $reqs[0]{headers}{'content-type'}, 'application/x-protobuf', 'content-type stored';
    is $reqs[0]{body}, $body, 'body stored';
    is $reqs[0]{conn}, $reqs[5]{conn}, 'keep-alive: first six on one connection';
    isnt $reqs[6]{conn}, $reqs[0]{conn}, 'raw request on another connection';
    is $reqs[6]{raw_encoding}, 'gzip', 'gzip noted';
    is $reqs[6]{body}, $body, 'chunked gzip body decoded';
    is $reqs[6]{raw_body}, $gz, 'raw gzip body kept';

    my @all = collect_spans($r);
    is scalar @all, 14, 'collect_spans: 7 requests x 2 spans (duplicates kept)';
    my @d = wait_for_spans($r, 2, 1);
    is scalar @d, 2, 'wait_for_spans dedupes by span id';
    my $t1 = time;
    my @none = wait_for_spans($r, 3, 0.5);
    ok time - $t1 >= 0.45 && time - $t1 < 3, 'wait_for_spans gives up after its timeout';
    is scalar(@none), 2, '... returning what matched';
    my @f = wait_for_spans($r, 1, 1, filter => sub { $_[0]{kind} eq 'SPAN_KIND_CLIENT' });
    is scalar @f, 1, 'filter';
    is $f[0]{span_id}, '0102030405060708', 'filtered span';
    like span_summary(@f), qr/CLIENT "GET" trace=0af7/, 'span_summary';

    # a second run of the script does not restart: state is per receiver
    my $dir = $r->dir;
    $r->stop;
    ok !-d $dir, 'receiver dir removed on stop';
    ok !eval { HTTP::Tiny->new(timeout => 2)->get($r->url . '/')->{status} == 200 }, 'receiver gone';
}

# --- receiver: hang --------------------------------------------------------------------
{
    my $r = start_receiver(script => 'hang');
    my $t0 = time;
    my $resp = raw_request($r->port, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", timeout => 1);
    is $resp, '', 'hang: no answer';
    ok time - $t0 >= 0.9, 'hang: connection kept open';
    my @reqs = $r->requests;
    is scalar @reqs, 1, 'hang: request stored before (not) answering';
    is $reqs[0]{body}, 'abc', 'hang: body stored';
    my $res = HTTP::Tiny->new(timeout => 5)->post($r->url . '/v1/traces', { content => 'x' });
    is $res->{status}, 200, 'next request: default 200';
    # a hanging connection left open does not keep stop() waiting
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $r->port);
    print $s "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\ny";
    $r = start_receiver(script => 'hang', default => 'hang');
    $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $r->port);
    print $s "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\ny";
    wait_until(5, sub { $r->requests == 1 });
    my $t1 = time;
    $r->stop;
    ok time - $t1 < 3, 'stop with a hanging connection is quick';
    ok !eval { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $r->port) or die; 1 }, 'port closed';

    # Connections that end at once (port probes): a child reaped before the
    # receiver recorded it once stayed a ghost that stop() waited 3 s for
    # (about 1 stop in 100 under load; 40 probes make it likely).
    $r = start_receiver();
    for (1 .. 40) {
        my $p = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $r->port);
        close $p if $p;
    }
    $t1 = time;
    $r->stop;
    ok time - $t1 < 2, 'stop after 40 connections closed at once is quick';
}

# --- plain nginx through the harness -------------------------------------------------------
{
    my $n = start_nginx(module => 0, dirs => ['otel'], conf => <<'EOF');
server {
    listen 127.0.0.1:%%PORT%%;
    listen 127.0.0.1:%%PORT3%% http2;
    location / { proxy_pass http://127.0.0.1:%%PORT2%%; }
    location = /prefix { return 200 "%%PREFIX%%\n"; }
}
server {
    listen 127.0.0.1:%%PORT2%%;
    location / { return 200 "tp=$http_traceparent ts=$http_tracestate ua=$http_user_agent proto=$server_protocol\n"; }
}
EOF
    ok $n->master_pid, 'master pid ' . $n->master_pid;
    my @w = $n->worker_pids;
    is scalar @w, 1, 'one worker';
    ok -d $n->prefix . '/otel' && ((stat $n->prefix . '/otel')[2] & 0777) == 0777, 'dirs created with mode 0777';
    ok $n->port != $n->port2 && $n->port2 != $n->port3 && $n->port != $n->port3, 'three distinct ports';
    # Upstream requests: nginx 1.29.7 made HTTP/1.1 proxy_http_version's default.
    my $up = nginx_version_at_least('1.29.7') ? 'HTTP/1.1' : 'HTTP/1.0';
    my $r = http_get($n->port, '/x', headers => { traceparent => 'abc', tracestate => 'k=v' });
    is $r->{status}, 200, 'proxied GET';
    is $r->{content}, "tp=abc ts=k=v ua=spanprof-test/1.0 proto=$up\n", 'echo backend';
    is http_get($n->port, '/prefix')->{content}, $n->prefix . "\n", '%%PREFIX%% replaced';
    my $p = http_request('POST', $n->port, '/post', content => 'hello');
    is $p->{status}, 200, 'POST with body';
    my ($raw, $lport) = raw_request($n->port, "GET /\r\n");
    is $raw, "tp= ts= ua= proto=$up\n", 'HTTP/0.9 request: body only';
    ok $lport > 0, 'raw_request returns the local port';
    my $h2 = curl_h2($n->port3, '/h2?x=1', 'traceparent: t2', 'user-agent: ua2');
    is $h2->{exit}, 0, 'curl exit 0';
    is $h2->{version}, '2', 'HTTP/2 response';
    is $h2->{status}, 200, 'h2 status';
    is $h2->{content}, "tp=t2 ts= ua=ua2 proto=$up\n", 'h2 body';
    like $n->error_log, qr/start worker process/, 'error log readable';
    is scalar($n->crash_lines), 0, 'no crash lines';
    ok $n->rss_kb($w[0]) > 0, 'rss_kb';

    my @new = $n->reload;
    is scalar @new, 1, 'reload: one new worker';
    isnt $new[0], $w[0], 'reload: new worker pid';
    is http_get($n->port, '/x')->{status}, 200, 'serves after reload';

    my @before = $n->worker_pids;
    $n->signal('HUP');
    ok wait_until(10, sub { grep { my $p = $_; !grep { $_ == $p } @before } $n->worker_pids }),
        'signal HUP: a new worker appears';

    my $took = $n->quit(10);
    ok $took < 5, "quit took $took s";
    ok !kill(0, $n->master_pid) || ((SpanProf::Test::_slurp('/proc/' . $n->master_pid . '/stat') // '') =~ /\) Z /),
        'master gone';
    like $n->error_log, qr/signal 3 \(SIGQUIT\) received/, 'error log still readable after quit';
    my $prefix = $n->prefix;
    $n->stop;
    ok !-d $prefix, 'prefix removed on stop';
}

# --- nginx -t through the harness ------------------------------------------------------------
{
    my ($rc, $out, $path, $text) = nginx_t("server {\n    listen 127.0.0.1:%%PORT%%;\n    bogus_directive 1;\n}\n", module => 0);
    isnt $rc, 0, 'nginx -t fails on a bad directive';
    my $line = conf_line($text, qr/bogus_directive/);
    like $out, qr/\Q$path\E:$line\b/, "error points to $path:$line";
    ($rc, $out) = nginx_t("server { listen 127.0.0.1:%%PORT%%; location / { return 204; } }\n", module => 0);
    is $rc, 0, 'nginx -t passes on a valid config' or diag $out;
}

done_testing;

# ExportTraceServiceResponse bytes -> text format
sub decode_partial {
    my ($bytes) = @_;
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    open(my $fh, '>', "$dir/b") or die;
    binmode $fh;
    print $fh $bytes;
    close $fh;
    my $root = repo_root();
    my $out = `protoc --decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse -I $root/proto $root/proto/opentelemetry/proto/collector/trace/v1/trace_service.proto < $dir/b`;
    die "protoc failed" if $?;
    return $out;
}
