package SpanProf::Serve;
# Starts `spanprof serve` for a test: on free 127.0.0.1 ports, with its
# database in a temporary directory, stopped at the end of the test.
#   my $sv = start_serve(%opts);       # extra => [ '--retention', '1h' ]
#   $sv->otlp_url                      # http://127.0.0.1:P (an endpoint)
#   $sv->grpc_port                     # its OTLP/gRPC port
#   $sv->api('/api/traces', order => 'slowest')  # decoded JSON, dies on non-2xx
#   $sv->get('/api/x')                 # {status, headers, content}
#   $sv->stop; $sv->kill9; $sv->restart
use strict;
use warnings;
use Exporter 'import';
use File::Temp qw(tempdir);
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(sleep time);
use SpanProf::Test qw(free_port http_request wait_until repo_root);

our @EXPORT = qw(start_serve serve_bin);

my %LIVE;

sub serve_bin { $ENV{SPANPROF_CLI} || repo_root() . '/build/cli/spanprof' }

sub start_serve {
    my (%o) = @_;
    my $self = bless {
        otlp_port => free_port(), ui_port => free_port(),
        grpc_port => free_port(),
        dir => $o{dir} // tempdir('spanprof-serve-XXXXXX', TMPDIR => 1,
                                  CLEANUP => !$ENV{SPANPROF_KEEP}),
        extra => $o{extra} || [], token => $o{token},
    }, __PACKAGE__;
    $self->_spawn;
    $LIVE{"$self"} = $self;
    return $self;
}

sub _spawn {
    my ($self) = @_;
    my @cmd = (serve_bin(), 'serve', '--otlp', "127.0.0.1:$self->{otlp_port}",
        '--otlp-grpc', "127.0.0.1:$self->{grpc_port}",
        '--ui', "127.0.0.1:$self->{ui_port}", '--data', "$self->{dir}/data",
        (defined $self->{token} ? ('--token', $self->{token}) : ()),
        @{ $self->{extra} });
    # The log is appended to across restarts: wait for a new "UI on".
    my $from = length $self->log;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);      # its own group: SpanProf::Test's end check
        open STDOUT, '>>', "$self->{dir}/serve.log";
        open STDERR, '>&', \*STDOUT;
        exec @cmd or POSIX::_exit(127);
    }
    $self->{pid} = $pid;
    SpanProf::Test::track_group($pid, "spanprof serve $self->{dir}");
    my $up = wait_until(10, sub {
        return substr($self->log, $from) =~ /UI on/
            || waitpid($pid, POSIX::WNOHANG()) != 0 ? 1 : 0;
    });
    die "spanprof serve did not start:\n" . $self->log
        unless substr($self->log, $from) =~ /UI on/;
}

sub log {
    my ($self) = @_;
    open(my $fh, '<', "$self->{dir}/serve.log") or return '';
    local $/;
    return <$fh> // '';
}

sub otlp_url { "http://127.0.0.1:$_[0]{otlp_port}" }
sub ui_url   { "http://127.0.0.1:$_[0]{ui_port}" }
sub grpc_port { $_[0]{grpc_port} }
sub dir      { $_[0]{dir} }
sub pid      { $_[0]{pid} }

sub get {
    my ($self, $path, %q) = @_;
    my $qs = join '&', map { _enc($_) . '=' . _enc($q{$_}) } sort keys %q;
    return http_request('GET', $self->{ui_port}, $path . ($qs ? "?$qs" : ''));
}

sub api {
    my ($self, $path, %q) = @_;
    my $r = $self->get($path, %q);
    die "GET $path: $r->{status} $r->{content}" unless $r->{status} == 200;
    return JSON::PP::decode_json($r->{content});
}

sub post_otlp {
    my ($self, $path, $body, %h) = @_;
    return http_request('POST', $self->{otlp_port}, $path, content => $body,
        headers => { 'Content-Type' => 'application/x-protobuf', %h });
}

sub _enc { my $s = shift; $s =~ s/([^A-Za-z0-9._~-])/sprintf('%%%02X', ord $1)/ge; $s }

sub _reap {
    my ($self, $sig) = @_;
    return unless $self->{pid};
    kill $sig, $self->{pid};
    my $t = time + 10;
    while (time < $t) {
        last if waitpid($self->{pid}, POSIX::WNOHANG()) != 0;
        sleep 0.05;
    }
    if (kill 0, $self->{pid}) {         # still running after 10 s
        kill 'KILL', -$self->{pid};
        waitpid($self->{pid}, 0);
    }
    delete $self->{pid};
}

sub stop    { $_[0]->_reap('TERM') }
sub kill9   { $_[0]->_reap('KILL') }
sub restart { my $s = shift; $s->stop; $s->_spawn; $s }

END { $_->stop for values %LIVE }

1;
