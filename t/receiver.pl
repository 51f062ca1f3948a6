#!/usr/bin/perl
# t/receiver.pl - a fake OTLP/HTTP collector for spanprof's integration tests.
#
#   perl t/receiver.pl --port P --dir D [--script LIST] [--default ENTRY]
#
# A real HTTP/1.1 server on 127.0.0.1:P: one forked child per connection,
# keep-alive (any number of requests per connection), request bodies with
# Content-Length or Transfer-Encoding: chunked, "Expect: 100-continue"
# answered with an interim 100. Every request is stored, before it is
# answered, as D/<%08d global sequence>.req: a JSON object
#   { seq, time, conn, method, path, version, headers: {lc name: value},
#     body_b64, action }
# written atomically (temporary file, then rename). Repeated header lines are
# joined with ", " in the order received.
#
# The response to each request is the next entry of the comma-separated
# --script list, then --default (200 when not given). The global sequence
# and the script position are shared by all children through D/.state,
# locked with flock. Entries:
#   NNN            that status, empty body ("200" is an empty
#                  ExportTraceServiceResponse: Content-Type
#                  application/x-protobuf, no body)
#   retry-after:N  503 with "Retry-After: N"
#   SSS:retry-after:N       status SSS (429, 503 ...) with "Retry-After: N"
#   [SSS:]retry-after-date:N
#                  status SSS (default 503) with Retry-After as an HTTP
#                  date N seconds after the answer (rounded up to the next
#                  whole second)
#   partial:N      200 whose body is ExportTraceServiceResponse{
#                  partial_success{rejected_spans:N,
#                  error_message:"test rejection"}} (the same bytes are
#                  an ExportProfilesServiceResponse with rejected_profiles)
#   hang           read the request, never answer, keep the socket open
#                  until killed (or until the client closes it)
#   garbage        200, Content-Type application/x-protobuf, body
#                  "\xff\xff\xff garbage"
#   json-partial:N 200, Content-Type application/json, body
#                  {"partialSuccess":{"rejectedSpans":"N",
#                  "errorMessage":"test rejection"}} (OTLP/HTTP JSON;
#                  "rejectedProfiles" to POST /v1development/profiles)
#   json-garbage   200, Content-Type application/json, body "{not json"
#
# The receiver puts itself in its own process group; SIGTERM to the receiver
# ends its children too. Children also exit when the receiver is gone.
use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Fcntl qw(:flock O_RDWR O_CREAT);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use Getopt::Long;

my ($port, $dir, $script, $default) = (undef, undef, '', '200');
GetOptions(
    'port=i'    => \$port,
    'dir=s'     => \$dir,
    'script=s'  => \$script,
    'default=s' => \$default,
) or die "usage: $0 --port P --dir D [--script LIST] [--default ENTRY]\n";
die "$0: --port and --dir are required\n" unless $port && defined $dir;
die "$0: $dir is not a directory\n" unless -d $dir;

my @script = grep { length } map { s/^\s+|\s+$//gr } split /,/, $script;
for my $e (@script, $default) {
    die "$0: bad script entry '$e'\n" unless valid_entry($e);
}

sub valid_entry {
    my ($e) = @_;
    return $e =~ /^(?:[1-5]\d\d|(?:[1-5]\d\d:)?retry-after(?:-date)?:\d+|partial:\d+|hang|garbage|json-partial:\d+|json-garbage)$/;
}

my $state_file = "$dir/.state";
{
    sysopen(my $fh, $state_file, O_RDWR | O_CREAT) or die "$0: $state_file: $!";
    close $fh;
}

my %REASON = (
    100 => 'Continue', 200 => 'OK', 202 => 'Accepted', 204 => 'No Content',
    400 => 'Bad Request', 401 => 'Unauthorized', 403 => 'Forbidden',
    404 => 'Not Found', 408 => 'Request Timeout', 413 => 'Payload Too Large',
    415 => 'Unsupported Media Type', 429 => 'Too Many Requests',
    500 => 'Internal Server Error', 501 => 'Not Implemented',
    502 => 'Bad Gateway', 503 => 'Service Unavailable',
    504 => 'Gateway Timeout',
);

my $listen = IO::Socket::INET->new(
    LocalAddr => '127.0.0.1',
    LocalPort => $port,
    Proto     => 'tcp',
    Listen    => 128,
    ReuseAddr => 1,
) or die "$0: cannot listen on 127.0.0.1:$port: $!\n";

setpgrp(0, 0);
my $master = $$;
my %kids;
my $stopping = 0;

$SIG{PIPE} = 'IGNORE';
$SIG{CHLD} = sub {
    while ((my $pid = waitpid(-1, WNOHANG)) > 0) { delete $kids{$pid} }
};
$SIG{TERM} = $SIG{INT} = $SIG{HUP} = sub { $stopping = 1 };

my $conn_no = 0;
while (!$stopping) {
    my $client = $listen->accept;
    unless ($client) {
        next if $!{EINTR} || $!{ECONNABORTED};
        last if $stopping;
        select(undef, undef, undef, 0.05);
        next;
    }
    $conn_no++;
    # SIGCHLD stays blocked until the child is in %kids: a child that ends
    # at once (a port probe that connects and closes) would otherwise be
    # reaped before it was added, and stay in %kids as a ghost that the
    # shutdown below waits for in vain.
    my $old_mask = POSIX::SigSet->new;
    POSIX::sigprocmask(POSIX::SIG_BLOCK, POSIX::SigSet->new(POSIX::SIGCHLD), $old_mask);
    my $pid = fork;
    if (!defined $pid) {
        POSIX::sigprocmask(POSIX::SIG_SETMASK, $old_mask);
        warn "$0: fork: $!\n";
        close $client;
        next;
    }
    if ($pid == 0) {
        POSIX::sigprocmask(POSIX::SIG_SETMASK, $old_mask);
        $SIG{CHLD} = 'DEFAULT';
        $SIG{TERM} = $SIG{INT} = $SIG{HUP} = 'DEFAULT';
        close $listen;
        my $rc = eval { serve($client, "$master-$conn_no"); 1 };
        warn "$0: connection $conn_no: $@" unless $rc;
        POSIX::_exit(0);
    }
    $kids{$pid} = 1;
    POSIX::sigprocmask(POSIX::SIG_SETMASK, $old_mask);
    close $client;
}

close $listen;
kill 'TERM', keys %kids if %kids;
my $deadline = time + 3;
while (%kids && time < $deadline) {
    my $pid;
    while (($pid = waitpid(-1, WNOHANG)) > 0) { delete $kids{$pid} }
    %kids = () if $pid < 0;    # no child left at all
    select(undef, undef, undef, 0.05) if %kids;
}
kill 'KILL', keys %kids if %kids;
exit 0;

# --- one connection ---------------------------------------------------------

sub parent_gone { return getppid() != $master }

# Reads more bytes into $$buf; returns 0 on EOF/error, 1 when data came.
# Waits in short slices so a child notices when the receiver is gone.
sub fill {
    my ($sock, $buf) = @_;
    my $sel = IO::Select->new($sock);
    while (1) {
        POSIX::_exit(0) if parent_gone();
        next unless $sel->can_read(0.5);
        my $n = sysread($sock, my $chunk, 65536);
        return 0 unless $n;
        $$buf .= $chunk;
        return 1;
    }
}

sub serve {
    my ($sock, $conn) = @_;
    binmode $sock;
    my $buf = '';
    while (1) {
        # request line and headers
        my $end;
        while (($end = index($buf, "\r\n\r\n")) < 0) {
            return unless fill($sock, \$buf);
            # tolerate leading empty lines between requests
            $buf =~ s/^(?:\r\n)+//;
            return if length($buf) > 1024 * 1024;
        }
        my $head = substr($buf, 0, $end);
        substr($buf, 0, $end + 4) = '';
        my ($line, @hlines) = split /\r\n/, $head;
        my ($method, $path, $version) = $line =~ m{^(\S+) (\S+) HTTP/(\d\.\d)$}
            or return bad_request($sock);
        my %h;
        for my $l (@hlines) {
            my ($n, $v) = $l =~ /^([^:\s]+):[ \t]*(.*?)[ \t]*$/ or return bad_request($sock);
            $n = lc $n;
            $h{$n} = exists $h{$n} ? "$h{$n}, $v" : $v;
        }

        if (($h{expect} // '') =~ /^100-continue$/i) {
            syswrite($sock, "HTTP/1.1 100 Continue\r\n\r\n");
        }

        # body
        my $body = '';
        if (($h{'transfer-encoding'} // '') =~ /chunked/i) {
            while (1) {
                my $nl;
                while (($nl = index($buf, "\r\n")) < 0) {
                    return unless fill($sock, \$buf);
                }
                my $szline = substr($buf, 0, $nl);
                substr($buf, 0, $nl + 2) = '';
                my ($hex) = $szline =~ /^([0-9a-fA-F]+)/ or return bad_request($sock);
                my $size = hex $hex;
                if ($size == 0) {
                    # trailers until an empty line
                    while (1) {
                        while (($nl = index($buf, "\r\n")) < 0) {
                            return unless fill($sock, \$buf);
                        }
                        my $t = substr($buf, 0, $nl);
                        substr($buf, 0, $nl + 2) = '';
                        last if $t eq '';
                    }
                    last;
                }
                while (length($buf) < $size + 2) {
                    return unless fill($sock, \$buf);
                }
                $body .= substr($buf, 0, $size);
                substr($buf, 0, $size + 2) = '';
            }
        }
        elsif (defined $h{'content-length'}) {
            my ($len) = $h{'content-length'} =~ /^(\d+)$/ or return bad_request($sock);
            while (length($buf) < $len) {
                return unless fill($sock, \$buf);
            }
            $body = substr($buf, 0, $len);
            substr($buf, 0, $len) = '';
        }

        my ($seq, $action) = next_seq_and_action();
        store($seq, {
            seq      => $seq,
            time     => time,
            conn     => $conn,
            method   => $method,
            path     => $path,
            version  => $version,
            headers  => \%h,
            body_b64 => encode_base64($body, ''),
            action   => $action,
        });

        my $close = ($h{connection} // '') =~ /close/i
            || ($version eq '1.0' && ($h{connection} // '') !~ /keep-alive/i);

        if ($action eq 'hang') {
            # never answer; keep the connection until the peer or the
            # receiver goes away
            my $sink = '';
            while (fill($sock, \$sink)) { $sink = '' }
            return;
        }
        respond($sock, $action, $close, $version, $path);
        return if $close;
    }
}

sub next_seq_and_action {
    open(my $fh, '+<', $state_file) or die "$state_file: $!";
    flock($fh, LOCK_EX) or die "flock: $!";
    my $txt = do { local $/; <$fh> } // '';
    my ($seq, $pos) = $txt =~ /^(\d+) (\d+)/ ? ($1, $2) : (0, 0);
    $seq++;
    my $action;
    if ($pos < @script) { $action = $script[$pos]; $pos++ }
    else                { $action = $default }
    seek($fh, 0, 0);
    truncate($fh, 0);
    print $fh "$seq $pos\n";
    close $fh;    # flushes, then unlocks
    return ($seq, $action);
}

sub store {
    my ($seq, $rec) = @_;
    my $json = JSON::PP->new->ascii->canonical->encode($rec);
    my $name = sprintf '%s/%08d.req', $dir, $seq;
    my $tmp  = sprintf '%s/.tmp-%d-%08d', $dir, $$, $seq;
    open(my $fh, '>', $tmp) or die "$tmp: $!";
    binmode $fh;
    print $fh $json, "\n";
    close $fh or die "$tmp: $!";
    rename($tmp, $name) or die "rename $tmp: $!";
}

sub varint {
    my ($n) = @_;
    my $out = '';
    while ($n >= 0x80) { $out .= chr(($n & 0x7f) | 0x80); $n >>= 7 }
    return $out . chr($n);
}

sub respond {
    my ($sock, $action, $close, $version, $path) = @_;
    my ($status, @hdr, $body) = (200);
    $body = '';
    if ($action =~ /^(\d{3})$/) {
        $status = $1;
        push @hdr, 'Content-Type: application/x-protobuf' if $status == 200;
    }
    elsif ($action =~ /^(?:(\d{3}):)?retry-after:(\d+)$/) {
        $status = $1 // 503;
        push @hdr, "Retry-After: $2";
    }
    elsif ($action =~ /^(?:(\d{3}):)?retry-after-date:(\d+)$/) {
        $status = $1 // 503;
        # IMF-fixdate (RFC 9110), never before now + N
        my $at = POSIX::ceil(time) + $2;
        my @t = gmtime $at;
        push @hdr, sprintf('Retry-After: %s, %02d %s %d %02d:%02d:%02d GMT',
            (qw(Sun Mon Tue Wed Thu Fri Sat))[$t[6]], $t[3],
            (qw(Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec))[$t[4]],
            $t[5] + 1900, @t[2, 1, 0]);
    }
    elsif ($action =~ /^partial:(\d+)$/) {
        my $msg = 'test rejection';
        my $ps = "\x08" . varint($1) . "\x12" . varint(length $msg) . $msg;
        $body = "\x0a" . varint(length $ps) . $ps;
        push @hdr, 'Content-Type: application/x-protobuf';
    }
    elsif ($action =~ /^json-partial:(\d+)$/) {
        my $n = $1;
        my $field = ($path // '') =~ m{/v1development/profiles$} ? 'rejectedProfiles' : 'rejectedSpans';
        $body = qq({"partialSuccess":{"$field":"$n","errorMessage":"test rejection"}});
        push @hdr, 'Content-Type: application/json';
    }
    elsif ($action eq 'json-garbage') {
        $body = '{not json';
        push @hdr, 'Content-Type: application/json';
    }
    elsif ($action eq 'garbage') {
        $body = "\xff\xff\xff garbage";
        push @hdr, 'Content-Type: application/x-protobuf';
    }
    my $reason = $REASON{$status} // 'Status';
    my $resp = "HTTP/1.1 $status $reason\r\n"
        . join('', map { "$_\r\n" } @hdr)
        . 'Content-Length: ' . length($body) . "\r\n"
        . ($close ? "Connection: close\r\n" : '')
        . "\r\n" . $body;
    my $off = 0;
    while ($off < length $resp) {
        my $n = syswrite($sock, $resp, length($resp) - $off, $off);
        return unless defined $n && $n > 0;
        $off += $n;
    }
}

sub bad_request {
    my ($sock) = @_;
    syswrite($sock, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return;
}
