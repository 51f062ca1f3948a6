#!/usr/bin/perl
# A minimal AJP13 responder for the tests (core modules only):
#   perl t/backends/ajp-echo.pl PORT
# Listens on 127.0.0.1:PORT, one forked child per connection. Packets from
# the web server: 0x12 0x34, 2-byte length, payload. For a Forward Request
# (prefix 2) it decodes method, protocol, req_uri, remote_addr, remote_host,
# server_name, server_port, is_ssl and the headers (0xA0xx codes or
# strings), skips the attributes, and answers (packets 'A' 'B', 2-byte
# length, payload) SEND_HEADERS 200 "OK" with Content-Type text/plain,
# SEND_BODY_CHUNK "tp=<traceparent> ts=<tracestate>\n" and END_RESPONSE
# (reuse 0: the web server closes the connection). A request body
# (Content-Length > 0) is drained first (GET_BODY_CHUNK when needed). CPING
# (prefix 10) gets CPONG. Each request's headers are appended to
# $ENV{AJP_ECHO_LOG} ("name: value" lines, the URI first, then a blank line)
# when that is set.
use strict;
use warnings;
use IO::Socket::INET;
use POSIX ();

my $port = shift or die "usage: $0 PORT\n";
my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
    Listen => 64, ReuseAddr => 1, Proto => 'tcp') or die "listen $port: $!\n";
$SIG{CHLD} = 'IGNORE';
$SIG{TERM} = sub { exit 0 };

my %REQ_HEADER = (
    0xA001 => 'accept', 0xA002 => 'accept-charset', 0xA003 => 'accept-encoding',
    0xA004 => 'accept-language', 0xA005 => 'authorization', 0xA006 => 'connection',
    0xA007 => 'content-type', 0xA008 => 'content-length', 0xA009 => 'cookie',
    0xA00A => 'cookie2', 0xA00B => 'host', 0xA00C => 'pragma', 0xA00D => 'referer',
    0xA00E => 'user-agent',
);

while (1) {
    my $c = $srv->accept or next;
    my $pid = fork;
    if (!defined $pid) { close $c; next }
    if ($pid == 0) {
        close $srv;
        serve($c);
        POSIX::_exit(0);
    }
    close $c;
}

sub read_n {
    my ($c, $n) = @_;
    my $buf = '';
    while (length $buf < $n) {
        my $r = sysread($c, $buf, $n - length $buf, length $buf);
        return undef unless $r;
    }
    return $buf;
}

sub write_all {
    my ($c, $data) = @_;
    while (length $data) {
        my $w = syswrite($c, $data) or return;
        substr($data, 0, $w, '');
    }
}

sub read_packet {
    my ($c) = @_;
    my $h = read_n($c, 4) // return undef;
    my ($magic, $len) = unpack('nn', $h);
    die "bad magic " . sprintf('%04x', $magic) . "\n" unless $magic == 0x1234;
    return $len ? read_n($c, $len) : '';
}

sub packet { my ($payload) = @_; return 'AB' . pack('n', length $payload) . $payload }

sub astr { my ($s) = @_; return pack('n', length $s) . $s . "\0" }

# AJP string at $$pos: 2-byte length (0xFFFF: null), bytes, NUL
sub get_str {
    my ($p, $pos) = @_;
    my $l = unpack('n', substr($$p, $$pos, 2));
    $$pos += 2;
    return undef if $l == 0xFFFF;
    my $s = substr($$p, $$pos, $l);
    $$pos += $l + 1;
    return $s;
}

sub get_int { my ($p, $pos) = @_; my $v = unpack('n', substr($$p, $$pos, 2)); $$pos += 2; return $v }
sub get_byte { my ($p, $pos) = @_; my $v = ord substr($$p, $$pos, 1); $$pos += 1; return $v }

sub serve {
    my ($c) = @_;
    binmode $c;
    while (defined(my $p = read_packet($c))) {
        next unless length $p;
        my $pos = 0;
        my $prefix = get_byte(\$p, \$pos);
        if ($prefix == 10) {            # CPING
            write_all($c, packet(chr 9));
            next;
        }
        next unless $prefix == 2;       # stray body packets
        my %r;
        $r{method}      = get_byte(\$p, \$pos);
        $r{protocol}    = get_str(\$p, \$pos);
        $r{req_uri}     = get_str(\$p, \$pos);
        $r{remote_addr} = get_str(\$p, \$pos);
        $r{remote_host} = get_str(\$p, \$pos);
        $r{server_name} = get_str(\$p, \$pos);
        $r{server_port} = get_int(\$p, \$pos);
        $r{is_ssl}      = get_byte(\$p, \$pos);
        my $n = get_int(\$p, \$pos);
        my %h;
        my @order;
        for (1 .. $n) {
            my $name;
            if (ord(substr($p, $pos, 1)) == 0xA0) {
                my $code = get_int(\$p, \$pos);
                $name = $REQ_HEADER{$code} // sprintf('x-ajp-code-%04x', $code);
            } else {
                $name = lc get_str(\$p, \$pos);
            }
            my $v = get_str(\$p, \$pos) // '';
            push @order, $name;
            $h{$name} = exists $h{$name} ? "$h{$name}, $v" : $v;
        }
        # attributes up to 0xFF are not needed

        # drain a request body: the web server sends the first chunk
        # unasked, then one per GET_BODY_CHUNK
        my $left = $h{'content-length'} // 0;
        my $first = 1;
        while ($left > 0) {
            write_all($c, packet(chr(6) . pack('n', 8186))) unless $first;
            $first = 0;
            my $b = read_packet($c) // return;
            last unless length $b >= 2;
            my $l = unpack('n', $b);
            last unless $l;
            $left -= $l;
        }

        if (my $log = $ENV{AJP_ECHO_LOG}) {
            if (open(my $fh, '>>', $log)) {
                print $fh "$r{req_uri}\n";
                print $fh "$_: $h{$_}\n" for @order;
                print $fh "\n";
                close $fh;
            }
        }
        my $body = 'tp=' . ($h{traceparent} // '') . ' ts=' . ($h{tracestate} // '') . "\n";
        write_all($c, packet(chr(4) . pack('n', 200) . astr('OK') . pack('n', 2)
                . astr('Content-Type') . astr('text/plain')
                . astr('Content-Length') . astr(length $body))
            . packet(chr(3) . pack('n', length $body) . $body . "\0")
            . packet(chr(5) . chr(0)));
    }
}
