#!/usr/bin/perl
# t/grpc_receiver.py --count, bench/run's gRPC collector for G: it counts
# each TraceService request's spans with protobuf's parser on a skeleton of
# the message (spans kept as bytes) and parses the first request and every
# --full-every'th whole with the classes protoc generates from proto/.
# Calls from a python3-grpcio client; messages encoded by `protoc --encode`
# (and one by hand whose span is no Span). Checks the counts against what
# was sent, that an undecodable span is found in a request parsed whole
# and counted from the structure in one that is not (the skeleton), and
# that bytes that are no message at all are bad in either.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use SpanProf::Test qw(free_port wait_until repo_root);

plan skip_all => 'no python3-grpcio'
    unless system("/usr/bin/python3 -c 'import grpc' 2>/dev/null") == 0;

my $root = repo_root();
my $dir  = tempdir('spanprof-grpc-count-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $port = free_port();
my $count = "$dir/count.txt";

my $pid = fork // die "fork: $!";
if ($pid == 0) {
    open(STDIN, '<', '/dev/null');
    open(STDOUT, '>', "$dir/receiver.log");
    open(STDERR, '>&', \*STDOUT);
    { no warnings 'exec'; exec '/usr/bin/python3', "$root/t/grpc_receiver.py", '--port', $port,
        '--count', $count, '--full-every', 3; }
    POSIX::_exit(127);
}
END { if ($pid) { kill 'TERM', $pid; waitpid $pid, 0; } }
ok wait_until(20, sub { -s "$dir/receiver.log" && `cat $dir/receiver.log` =~ /listening on/ }),
    'receiver listens' or BAIL_OUT(`cat $dir/receiver.log`);

sub encode {     # a request with ($resources x $spans) spans, by protoc
    my ($name, $resources, $spans) = @_;
    my $span = 'spans { trace_id: "0123456789abcdef" span_id: "01234567" name: "GET /x" kind: SPAN_KIND_SERVER'
             . ' attributes { key: "http.response.status_code" value { int_value: 200 } } }';
    my $text = join ' ', ("resource_spans { scope_spans { " . ($span x $spans) . " } }") x $resources;
    open(my $p, '|-', "protoc --encode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
         . " -I $root/proto $root/proto/opentelemetry/proto/collector/trace/v1/trace_service.proto"
         . " > $dir/$name.bin") or die "protoc: $!";
    print $p $text;
    close $p or die "protoc --encode failed";
    return "$dir/$name.bin";
}

sub raw {
    my ($name, $bytes) = @_;
    open(my $f, '>:raw', "$dir/$name.bin") or die $!;
    print $f $bytes;
    close $f;
    return "$dir/$name.bin";
}

# resource_spans { scope_spans { spans: 0xff 0xff } }: the structure is
# sound, the span is not (a varint that never ends).
my $bad_span = raw('badspan', "\x0a\x06\x12\x04\x12\x02\xff\xff");
my $garbage  = raw('garbage', "\x0a\xff\xff\xff\x0f");   # length past the end

sub call {       # one unary Export call per file, in order
    my @files = @_;
    my $py = <<'PY';
import sys, grpc
ch = grpc.insecure_channel('127.0.0.1:' + sys.argv[1])
m = ch.unary_unary('/opentelemetry.proto.collector.trace.v1.TraceService/Export')
for f in sys.argv[2:]:
    m(open(f, 'rb').read(), timeout=10)
print('sent', len(sys.argv) - 2)
PY
    open(my $f, '>', "$dir/client.py") or die $!;
    print $f $py;
    close $f;
    my $out = `/usr/bin/python3 $dir/client.py $port @files 2>&1`;
    like $out, qr/^sent ${\ scalar @files}$/m, "sent @{[scalar @files]} calls" or diag $out;
}

sub counts {
    my $want = shift;
    my %c;
    wait_until(10, sub {
        %c = map { split /=/ } split ' ', (`cat $count 2>/dev/null` || '');
        ($c{requests} // -1) == $want;
    });
    return \%c;
}

# Requests 0, 3, 6 ... (--full-every 3) are parsed whole too.
call(encode('a', 2, 3), encode('b', 1, 5), $bad_span);
my $c = counts(3);
is $c->{spans}, 6 + 5 + 1, 'spans counted: 2 x 3, 5, and the undecodable one of a request not parsed whole';
is $c->{bad}, 0, 'no bad request: the third was counted from its structure only';
is $c->{traces}, 3, 'three TraceService requests';

call($bad_span);       # request 3: parsed whole
$c = counts(4);
is $c->{bad}, 1, 'the same request parsed whole (the 4th) is bad';
is $c->{spans}, 12, 'and counts no span';

call($garbage, encode('c', 1, 4));     # 4: not a message at all; 5: 4 spans
$c = counts(6);
is $c->{bad}, 2, 'bytes that are no message are bad without a whole parse';
is $c->{spans}, 12 + 4, 'and count no span; the next request counts its 4';
cmp_ok $c->{bytes}, '>', 0, 'bytes counted';

done_testing();
