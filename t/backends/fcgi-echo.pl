#!/usr/bin/perl
# A minimal FastCGI responder for the tests (core modules only):
#   perl t/backends/fcgi-echo.pl PORT
# Listens on 127.0.0.1:PORT, one forked child per connection. For every
# request (FCGI_BEGIN_REQUEST, FCGI_PARAMS until an empty record, FCGI_STDIN
# until an empty record) it answers FCGI_STDOUT
#   "Content-Type: text/plain\r\n\r\ntp=<HTTP_TRACEPARENT> ts=<HTTP_TRACESTATE>\n"
# then an empty FCGI_STDOUT and FCGI_END_REQUEST; the connection is closed
# unless the web server set FCGI_KEEP_CONN. The parameters of each request
# are appended to $ENV{FCGI_ECHO_LOG} (one line "NAME=VALUE" each, then a
# blank line) when that is set.
use strict;
use warnings;
use IO::Socket::INET;
use POSIX ();

my $port = shift or die "usage: $0 PORT\n";
my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
    Listen => 64, ReuseAddr => 1, Proto => 'tcp') or die "listen $port: $!\n";
$SIG{CHLD} = 'IGNORE';
$SIG{TERM} = sub { exit 0 };

use constant { BEGIN_REQUEST => 1, ABORT_REQUEST => 2, END_REQUEST => 3,
    PARAMS => 4, FCGI_STDIN => 5, FCGI_STDOUT => 6, GET_VALUES => 9, GET_VALUES_RESULT => 10,
    UNKNOWN_TYPE => 11 };

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

sub record {
    my ($type, $id, $content) = @_;
    my $len = length $content;
    my $pad = (8 - $len % 8) % 8;
    return pack('CCnnCC', 1, $type, $id, $len, $pad, 0) . $content . ("\0" x $pad);
}

sub write_all {
    my ($c, $data) = @_;
    while (length $data) {
        my $w = syswrite($c, $data) or return;
        substr($data, 0, $w, '');
    }
}

sub nv_len {
    my ($s, $pos) = @_;
    my $b = ord substr($$s, $$pos, 1);
    if ($b & 0x80) {
        my $l = unpack('N', substr($$s, $$pos, 4)) & 0x7fffffff;
        $$pos += 4;
        return $l;
    }
    $$pos += 1;
    return $b;
}

sub parse_params {
    my ($s) = @_;
    my (%p, $pos);
    $pos = 0;
    while ($pos < length $s) {
        my $nl = nv_len(\$s, \$pos);
        my $vl = nv_len(\$s, \$pos);
        my $n = substr($s, $pos, $nl); $pos += $nl;
        my $v = substr($s, $pos, $vl); $pos += $vl;
        $p{$n} = $v;
    }
    return \%p;
}

sub serve {
    my ($c) = @_;
    binmode $c;
    my %req;    # id => {keep, params, stdin, params_done}
    while (1) {
        my $h = read_n($c, 8) // return;
        my ($ver, $type, $id, $len, $pad) = unpack('CCnnC', $h);
        my $body = $len ? (read_n($c, $len) // return) : '';
        read_n($c, $pad) // return if $pad;
        if ($type == BEGIN_REQUEST) {
            my ($role, $flags) = unpack('nC', $body);
            $req{$id} = { keep => $flags & 1, params => '', stdin => '' };
        } elsif ($type == PARAMS) {
            my $q = $req{$id} or next;
            if ($len) { $q->{params} .= $body } else { $q->{params_done} = 1 }
        } elsif ($type == FCGI_STDIN) {
            my $q = $req{$id} or next;
            if ($len) { $q->{stdin} .= $body; next }
            my $p = parse_params($q->{params});
            if (my $log = $ENV{FCGI_ECHO_LOG}) {
                if (open(my $fh, '>>', $log)) {
                    print $fh "$_=$p->{$_}\n" for sort keys %$p;
                    print $fh "\n";
                    close $fh;
                }
            }
            my $out = "Content-Type: text/plain\r\n\r\n"
                . 'tp=' . ($p->{HTTP_TRACEPARENT} // '') . ' ts=' . ($p->{HTTP_TRACESTATE} // '') . "\n";
            write_all($c, record(FCGI_STDOUT, $id, $out) . record(FCGI_STDOUT, $id, '')
                . record(END_REQUEST, $id, pack('NCCCC', 0, 0, 0, 0, 0)));
            my $keep = $q->{keep};
            delete $req{$id};
            return unless $keep;
        } elsif ($type == ABORT_REQUEST) {
            write_all($c, record(END_REQUEST, $id, pack('NCCCC', 0, 0, 0, 0, 0)));
            delete $req{$id};
        } elsif ($type == GET_VALUES) {
            write_all($c, record(GET_VALUES_RESULT, 0, ''));
        } else {
            write_all($c, record(UNKNOWN_TYPE, 0, pack('CCCCCCCC', $type, 0, 0, 0, 0, 0, 0, 0)));
        }
    }
}
