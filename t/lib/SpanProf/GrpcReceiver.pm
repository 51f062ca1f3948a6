package SpanProf::GrpcReceiver;
# Starts t/grpc_receiver.py, a real OTLP/gRPC collector (python3-grpcio),
# for tests of the grpc export protocol.
#
#   use SpanProf::GrpcReceiver;
#   my $recv = start_grpc_receiver(
#       script   => [ 'UNAVAILABLE:retry:1500', 'ok' ],   # optional
#       default  => 'ok',                                 # optional
#       profiles_script => [...], profiles_default => 'ok',
#       tls      => { cert => $pem, key => $key },        # optional: https
#       max_idle_ms => 500,      # optional: idle connections closed
#   );
#   $recv->url       # http://127.0.0.1:P (https:// with tls), the endpoint
#
# The result is a SpanProf::Test::Receiver: requests, collect_spans,
# wait_for_spans, sync_spans and stop work as with t/receiver.pl. Each
# stored request also has grpc_encoding ("gzip" or "identity"), peer and
# conn (the client connection's number); headers are the call's metadata.
# See t/grpc_receiver.py for the script entries.
use strict;
use warnings;
use Exporter 'import';
use POSIX ();
use SpanProf::Test qw(free_port wait_until repo_root);

our @EXPORT = qw(start_grpc_receiver grpc_requests);

sub start_grpc_receiver {
    my %o = @_;
    my $base = SpanProf::Test::_tempdir('grecv');
    my $dir  = "$base/req";
    mkdir $dir or die "$dir: $!";
    my $port = $o{port} // free_port();
    my @cmd = ('/usr/bin/python3', repo_root() . '/t/grpc_receiver.py',
               '--port', $port, '--dir', $dir);
    for my $k (qw(script profiles_script)) {
        next unless defined $o{$k};
        my $s = ref $o{$k} ? join(',', @{ $o{$k} }) : $o{$k};
        (my $opt = "--$k") =~ tr/_/-/;
        push @cmd, $opt, $s if length $s;
    }
    for my $k (qw(default profiles_default)) {
        next unless defined $o{$k};
        (my $opt = "--$k") =~ tr/_/-/;
        push @cmd, $opt, $o{$k};
    }
    push @cmd, '--cert', $o{tls}{cert}, '--key', $o{tls}{key} if $o{tls};
    push @cmd, '--max-idle-ms', $o{max_idle_ms} if defined $o{max_idle_ms};

    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', "$base/receiver.log");
        open(STDERR, '>&', \*STDOUT);
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        POSIX::_exit(127);
    }
    my $self = bless {
        pid => $pid, port => $port, dir => $dir, base => $base,
        cache => {}, decoded => {},
    }, 'SpanProf::Test::Receiver';
    $self->{url} = ($o{tls} ? 'https' : 'http') . "://127.0.0.1:$port";
    SpanProf::Test::track_group($pid, "grpc receiver on port $port");
    # Ready when it says so (a probing connection would be a failed
    # handshake or a broken HTTP/2 preface in its log).
    my $ok = wait_until(15, sub {
        return -1 if waitpid($pid, POSIX::WNOHANG()) == $pid;
        return $self->receiver_log =~ /^listening on/m ? 1 : 0;
    });
    if (!$ok || $ok == -1) {
        my $log = $self->receiver_log;
        $self->{pid} = undef if $ok && $ok == -1;
        $self->stop;
        die "grpc receiver did not start on port $port: $log";
    }
    return $self;
}

# The stored calls of one service: 'traces' or 'profiles'.
sub grpc_requests {
    my ($recv, $what) = @_;
    my $re = $what eq 'profiles' ? qr/ProfilesService\/Export$/
                                 : qr/TraceService\/Export$/;
    return grep { $_->{path} =~ $re } $recv->requests;
}

1;
