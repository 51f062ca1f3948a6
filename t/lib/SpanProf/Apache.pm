package SpanProf::Apache;

=head1 NAME

SpanProf::Apache - harness for spanprof's Apache httpd tests (t/7*-apache-*.t)

=head1 SYNOPSIS

    use lib 't/lib';
    use Test::More;
    use SpanProf::Test;                 # receiver, decoding, HTTP clients
    use SpanProf::Apache;

    need_apache_module();               # skip_all (BAIL_OUT under
                                        # SPANPROF_REQUIRE_MODULE=1)
    my $recv = start_receiver();
    for my $mpm (apache_mpms()) {
        my $ap = start_apache(mpm => $mpm, receiver => $recv, conf => <<'EOF');
    OtelExporterEndpoint %%RECEIVER%%
    OtelExporterProtocol http/protobuf
    OtelExporterInterval 0.1
    OtelTrace On
    EOF
        my $res = http_get($ap->port, '/x');
        ...
        $ap->stop;
    }

Real C</usr/sbin/apache2> (Debian) with real child processes, one MPM at a
time, from a self-contained configuration in a fresh temporary directory.
Servers are stopped when the test file ends (also when it dies); when a test
failed by then, the error log tail is printed and the directory kept.
SPANPROF_KEEP=1 keeps every directory.

=head1 EXPORTS

=over

=item apache_module_path(), apache_burn_path()

F<build/apache/mod_spanprof.so> (or SPANPROF_APACHE_MODULE) and the test-only
F<build/apache/mod_spanprof_burn.so>.

=item SPANPROF_SERVER_PRELOAD

Becomes C<LD_PRELOAD> for every apache2 the harness runs (start, C<-t>,
C<-k graceful>, C<-k stop>), as for nginx in SpanProf::Test.

=item need_apache_module()

Call before planning: skip_all when apache2 or the module is missing
(BAIL_OUT under SPANPROF_REQUIRE_MODULE=1).

=item apache_mpms()

('prefork', 'worker', 'event'), or the comma-separated SPANPROF_APACHE_MPMS.

=item start_apache(mpm => $mpm, conf => $text, %opts)

Writes PREFIX/httpd.conf: ServerRoot, PidFile, ErrorLog (PREFIX/error.log,
C<LogLevel warn spanprof:info> unless C<loglevel>), the Debian modules
(mpm_$mpm, authz_core, authz_host, authz_user, authn_core, authn_file,
auth_basic, mime, env, setenvif, headers, alias, rewrite, proxy, proxy_http,
proxy_fcgi, cgi (prefork) or cgid), then C<LoadModule spanprof_module>
(unless C<module =E<gt> 0>) and, with C<burn =E<gt> 1>, the burn module; User
nobody / Group nogroup when run as root; MPM sizes; C<Listen
127.0.0.1:%%PORT%%> (and %%PORT2%%/%%PORT3%% when the text uses them);
DocumentRoot PREFIX/htdocs (granted); then the given text. Placeholders:
%%PORT%% %%PORT2%% %%PORT3%% %%RECEIVER%% %%PREFIX%%.
Options: C<env> (hash ref: environment variables for apache2, e.g. OTEL_*;
the test's own OTEL_* variables never reach it), C<servers> (StartServers; default 3 for prefork, 1 otherwise),
C<threads> (ThreadsPerChild, default 8), C<server_limit>, C<receiver> or
C<receiver_url>, C<port>/C<port2>/C<port3>, C<dirs> (created under PREFIX,
mode 0777), C<files> ({relative path => content}; a path ending in .cgi is
made executable), C<main> (text before the MPM section), C<loglevel>,
C<first> (load mod_spanprof before the other modules, mod_proxy included),
C<modules> (more Debian modules by name, e.g. ['proxy_balancer']),
C<no_spawn> (leave out proxy_fcgi and cgi/cgid, the modules that read the
request's environment).
Starts C<apache2 -f PREFIX/httpd.conf -k start> without APACHE_* in the
environment and waits for the pid file, a child and the port. Returns a
SpanProf::Apache::Server:

    ->mpm ->port ->port2 ->port3 ->prefix ->conf_path ->conf_text
    ->master_pid ->child_pids ->exporter_pids (prefork's spanprof-export)
    ->error_log ->error_log_tail(N) ->access_log
    ->crash_lines ->spanprof_lines
    ->graceful($timeout)   # apache2 -k graceful; waits until the old
                           # children are gone and new ones serve;
                           # returns the new child pids
    ->stop($timeout)       # apache2 -k stop; waits for the parent to exit;
                           # returns the seconds it took

=item apache_t($conf_text, %opts)

Writes the same configuration (same options) and runs C<apache2 -t -f ...>.
Returns ($exit_code, $output, $conf_path, $full_conf_text).

=item pprof_profiles($dir)

Every F<cpu-*.pb.gz> profile the file exporter wrote in $dir, decoded with
protoc (proto/pprof/profile.proto): a list of
{ file, samples => [ { count, labels => {key => value}, stack => [function
names, leaf first] } ] }.

=item file_spans($dir)

The spans in F<$dir/traces.jsonl> (OTLP/JSON), as spans_from_json, deduped.

=item burn_profiling_conf()

The configuration the profiling tests share: the file exporter into
PREFIX/out (spans every 0.2 s, profiles every second), sampling at 200 Hz,
and C<E<lt>Location /burnE<gt>> handled by the burn module (start_apache's
C<burn =E<gt> 1>, C<dirs =E<gt> ['out']>) with OtelProfiling On. Tracing is
left to the test.

=item stack_has($sample, $re)

True when a frame of a pprof_profiles sample's stack matches $re (a string
is matched as a whole word).

=back

=cut

use strict;
use warnings;
use Exporter 'import';
use File::Path qw(make_path remove_tree);
use File::Temp qw(tempdir);
use IO::Socket::INET;
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);
use SpanProf::Test;

our @EXPORT = qw(
    apache_module_path apache_burn_path need_apache_module apache_mpms
    start_apache apache_t pprof_profiles file_spans
    burn_profiling_conf stack_has
);

my $ROOT    = repo_root();
our $APACHE = $ENV{SPANPROF_APACHE} || '/usr/sbin/apache2';
my $MODDIR  = '/usr/lib/apache2/modules';
our %LIVE;

sub apache_module_path { $ENV{SPANPROF_APACHE_MODULE} || "$ROOT/build/apache/mod_spanprof.so" }
sub apache_burn_path   { "$ROOT/build/apache/mod_spanprof_burn.so" }

sub _builder { require Test::Builder; Test::Builder->new }

sub need_apache_module {
    my @missing = grep { !-e $_ } ($APACHE, apache_module_path(), apache_burn_path());
    return 1 unless @missing;
    my $msg = "not found: @missing (run `make apache`)";
    _builder()->BAIL_OUT($msg) if $ENV{SPANPROF_REQUIRE_MODULE};
    _builder()->skip_all($msg);
}

sub apache_mpms {
    return split /,/, $ENV{SPANPROF_APACHE_MPMS} if $ENV{SPANPROF_APACHE_MPMS};
    return qw(prefork worker event);
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
    my ($f, $data, $mode) = @_;
    open(my $fh, '>', $f) or die "$f: $!";
    binmode $fh;
    print $fh $data;
    close $fh or die "$f: $!";
    chmod $mode, $f if defined $mode;
}

# (exit code, stdout + stderr) of a command, without APACHE_* variables.
# It is always apache2: SPANPROF_SERVER_PRELOAD (see SpanProf::Test) is its
# LD_PRELOAD.
sub _run {
    my ($cmd, %o) = @_;
    my $dir = tempdir('spanprof-aprun-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        delete $ENV{$_} for grep { /^(?:APACHE|OTEL)_/ } keys %ENV;
        %ENV = (%ENV, %{ $o{env} || {} });     # the OTEL_* a test gives
        $ENV{LD_PRELOAD} = $ENV{SPANPROF_SERVER_PRELOAD} if $ENV{SPANPROF_SERVER_PRELOAD};
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', "$dir/out") or POSIX::_exit(126);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
        { no warnings q(exec); exec { $cmd->[0] } @$cmd; }
        POSIX::_exit(127);
    }
    my $deadline = time + ($o{timeout} // 60);
    my $rc;
    while (1) {
        my $r = waitpid($pid, WNOHANG);
        if ($r == $pid) { $rc = $?; last }
        if (time > $deadline) { kill 'KILL', $pid; waitpid($pid, 0); $rc = -1; last }
        sleep 0.01;
    }
    my $out = _slurp("$dir/out") // '';
    remove_tree($dir);
    my $code = $rc == -1 ? -1 : ($rc & 127) ? 128 + ($rc & 127) : $rc >> 8;
    return ($code, $out);
}

sub _uid_of {
    my ($pid) = @_;
    my ($uid) = (_slurp("/proc/$pid/status") // '') =~ /^Uid:\s+(\d+)/m;
    return $uid // -1;
}

sub _port_accepts {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp', Timeout => 1) or return 0;
    close $s;
    return 1;
}

sub _prefix {
    my $d = tempdir('spanprof-apache-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    chmod 0777, $d;
    for my $sub (qw(htdocs run logs)) {
        mkdir "$d/$sub";
        chmod 0777, "$d/$sub";
    }
    return $d;
}

sub _build_conf {
    my ($prefix, %o) = @_;
    my $mpm = $o{mpm} or die "start_apache: mpm => prefork|worker|event\n";
    my $text = $o{conf} // '';
    my %port = (
        PORT  => $o{port}  // free_port(),
        PORT2 => $o{port2} // free_port(),
        PORT3 => $o{port3} // free_port(),
    );
    my $recv = $o{receiver_url} // ($o{receiver} ? $o{receiver}->url : 'http://127.0.0.1:9');
    for my $t (\$text, \($o{main} //= '')) {
        $$t =~ s/%%(PORT[23]?)%%/$port{$1}/g;
        $$t =~ s/%%RECEIVER%%/$recv/g;
        $$t =~ s/%%PREFIX%%/$prefix/g;
    }

    my $threaded = $mpm ne 'prefork';
    my $servers = $o{servers} // ($threaded ? 1 : 3);
    my $threads = $o{threads} // 8;
    my $limit = $o{server_limit} // ($threaded ? $servers + 1 : $servers + 2);
    my @mods = (
        [mpm_event_module => 'mod_mpm_event.so'],
        [authz_core_module => 'mod_authz_core.so'],
        [authz_host_module => 'mod_authz_host.so'],
        [authz_user_module => 'mod_authz_user.so'],
        [authn_core_module => 'mod_authn_core.so'],
        [authn_file_module => 'mod_authn_file.so'],
        [auth_basic_module => 'mod_auth_basic.so'],
        [mime_module => 'mod_mime.so'],
        [env_module => 'mod_env.so'],
        [setenvif_module => 'mod_setenvif.so'],
        [headers_module => 'mod_headers.so'],
        [alias_module => 'mod_alias.so'],
        [rewrite_module => 'mod_rewrite.so'],
        [proxy_module => 'mod_proxy.so'],
        [proxy_http_module => 'mod_proxy_http.so'],
        $o{no_spawn} ? () : (
            [proxy_fcgi_module => 'mod_proxy_fcgi.so'],
            $threaded ? [cgid_module => 'mod_cgid.so'] : [cgi_module => 'mod_cgi.so']),
    );
    $mods[0] = ["mpm_${mpm}_module", "mod_mpm_$mpm.so"];
    push @mods, map { [ "${_}_module", "mod_$_.so" ] } @{ $o{modules} || [] };

    my $c = "# generated by SpanProf::Apache ($mpm)\n";
    $c .= "ServerRoot \"$prefix\"\n";
    $c .= "ServerName 127.0.0.1\n";
    $c .= "PidFile $prefix/run/httpd.pid\n";
    $c .= "DefaultRuntimeDir $prefix/run\n";
    $c .= "Mutex file:$prefix/run default\n";
    $c .= "ErrorLog $prefix/error.log\n";
    $c .= "LogLevel " . ($o{loglevel} // 'warn spanprof:info') . "\n";
    my $sp = (defined $o{module} && !$o{module}) ? ''
           : "LoadModule spanprof_module " . apache_module_path() . "\n";
    $c .= $sp if $o{first};
    $c .= "LoadModule $_->[0] $MODDIR/$_->[1]\n" for @mods;
    $c .= $sp unless $o{first};
    $c .= "LoadModule spanprof_burn_module " . apache_burn_path() . "\n" if $o{burn};
    if ($> == 0) {
        $c .= "User nobody\nGroup nogroup\n";
    }
    $c .= "ScriptSock $prefix/run/cgid.sock\n" if $threaded && !$o{no_spawn};
    $c .= $o{main} . "\n" if length $o{main};
    if ($threaded) {
        my $max = $servers * $threads;
        $c .= <<"EOF";
ServerLimit $limit
StartServers $servers
ThreadLimit $threads
ThreadsPerChild $threads
MinSpareThreads 1
MaxSpareThreads $max
MaxRequestWorkers $max
MaxConnectionsPerChild 0
EOF
    } else {
        $c .= <<"EOF";
ServerLimit $limit
StartServers $servers
MinSpareServers $servers
MaxSpareServers $limit
MaxRequestWorkers $limit
MaxConnectionsPerChild 0
EOF
    }
    $c .= <<"EOF";
Timeout 10
KeepAlive On
TypesConfig /etc/mime.types
Listen 127.0.0.1:$port{PORT}
EOF
    $c .= "Listen 127.0.0.1:$port{PORT2}\n" if $text =~ /:$port{PORT2}\b/;
    $c .= "Listen 127.0.0.1:$port{PORT3}\n" if $text =~ /:$port{PORT3}\b/;
    $c .= <<"EOF";
DocumentRoot "$prefix/htdocs"
<Directory />
    AllowOverride None
    Require all denied
</Directory>
<Directory "$prefix/htdocs">
    Options +ExecCGI
    AddHandler cgi-script .cgi
    Require all granted
</Directory>
# --- test configuration ---
EOF
    $c .= $text;
    $c .= "\n" unless $c =~ /\n\z/;
    return ($c, \%port);
}

sub _write {
    my ($prefix, %o) = @_;
    my ($conf, $port) = _build_conf($prefix, %o);
    for my $d (@{ $o{dirs} || [] }) {
        make_path("$prefix/$d");
        chmod 0777, "$prefix/$d";
    }
    for my $f (sort keys %{ $o{files} || {} }) {
        my $path = "$prefix/$f";
        (my $dir = $path) =~ s{/[^/]+$}{};
        make_path($dir);
        chmod 0777, $dir;
        (my $content = $o{files}{$f}) =~ s/%%PREFIX%%/$prefix/g;
        _spew($path, $content, $f =~ /\.cgi$/ ? 0755 : 0644);
    }
    _spew("$prefix/httpd.conf", $conf, 0644);
    return ($conf, $port);
}

sub apache_t {
    my ($text, %o) = @_;
    my $prefix = _prefix();
    my ($conf) = _write($prefix, %o, conf => $text, mpm => $o{mpm} // 'event');
    my ($code, $out) = _run([$APACHE, '-t', '-f', "$prefix/httpd.conf"], timeout => 30, env => $o{env});
    return ($code, $out, "$prefix/httpd.conf", $conf);
}

sub start_apache {
    my %o = @_;
    my $prefix = _prefix();
    my ($conf, $port) = _write($prefix, %o);
    my $self = bless {
        mpm => $o{mpm}, prefix => $prefix, conf_path => "$prefix/httpd.conf",
        conf_text => $conf, port => $port->{PORT}, port2 => $port->{PORT2},
        port3 => $port->{PORT3},
        # apache2 -k stop and graceful read the configuration again: with
        # settings from the environment, the same environment.
        env => $o{env},
    }, 'SpanProf::Apache::Server';
    $LIVE{"$self"} = $self;

    my ($code, $out) = _run([$APACHE, '-f', "$prefix/httpd.conf", '-k', 'start'], timeout => 30, env => $o{env});
    if ($code != 0) {
        my $log = _slurp("$prefix/error.log") // '';
        $self->{failed_start} = 1;
        die "start_apache($o{mpm}): apache2 -k start exited $code: $out\n$log\n";
    }
    # prefork forks its StartServers children one after another: a test
    # that counts them must not see the first alone. Started as root, each
    # of the parent's processes is ready once it has dropped root: a child
    # after child_init, prefork's exporter process after it took its name
    # (before that it looks like a child).
    my $prefork = ($o{mpm} // 'event') eq 'prefork';
    my $want = $prefork ? ($o{servers} // 3) : 1;
    my $ok = SpanProf::Test::wait_until(15, sub {
        my $pid = $self->master_pid or return 0;
        my @kids = $self->child_pids;
        return 0 unless @kids >= $want;
        return 0 if $prefork && $> == 0 && grep { _uid_of($_->[0]) == 0 } $self->_children;
        return _port_accepts($self->{port});
    });
    unless ($ok) {
        my $log = _slurp("$prefix/error.log") // '';
        die "start_apache($o{mpm}): not serving on port $self->{port}\n$log\n";
    }
    $self->{master} = $self->master_pid;
    # apache2 -k start detaches with setsid: the parent leads a group that
    # holds its children and mod_cgid's daemon.
    $self->{pgid} = SpanProf::Test::track_group(
        SpanProf::Test::_pgid_of($self->{master}), "apache2 ($o{mpm}) $prefix");
    return $self;
}

# --- profiles and file spans --------------------------------------------------

sub pprof_profiles {
    my ($dir) = @_;
    opendir(my $dh, $dir) or return ();
    my @files = sort grep { /^cpu-.*\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    my @out;
    for my $f (@files) {
        my $gz = _slurp("$dir/$f") // next;
        my $raw;
        gunzip(\$gz => \$raw) or die "$f: gunzip: $GunzipError\n";
        my $tmp = tempdir('spanprof-pprof-XXXXXX', TMPDIR => 1, CLEANUP => 1);
        _spew("$tmp/p", $raw);
        my $pid = open(my $ph, '-|') // die "fork: $!";
        if ($pid == 0) {
            open(STDIN, '<', "$tmp/p");
            open(STDERR, '>', '/dev/null');
            { no warnings 'exec'; exec 'protoc', '--decode=perftools.profiles.Profile', '-I', "$ROOT/proto",
                "$ROOT/proto/pprof/profile.proto"; }
            POSIX::_exit(127);
        }
        local $/;
        my $text = <$ph>;
        close $ph;
        die "$f: protoc failed\n" if $?;
        my $p = parse_text_format($text);
        my @st = @{ $p->{string_table} || [] };
        my %fn = map { ($_->{id}[0] // 0) => $st[ $_->{name}[0] // 0 ] // '' } @{ $p->{function} || [] };
        my %loc;
        for my $l (@{ $p->{location} || [] }) {
            my @names = map { $fn{ $_->{function_id}[0] // 0 } // '' } @{ $l->{line} || [] };
            $loc{ $l->{id}[0] } = join '|', @names;
        }
        my @samples;
        for my $s (@{ $p->{sample} || [] }) {
            my %lab;
            for my $l (@{ $s->{label} || [] }) {
                $lab{ $st[ $l->{key}[0] // 0 ] // '' } = $st[ $l->{str}[0] // 0 ] // '';
            }
            push @samples, {
                count  => $s->{value}[0] // 0,
                labels => \%lab,
                stack  => [ map { $loc{$_} // '?' } @{ $s->{location_id} || [] } ],
            };
        }
        push @out, { file => $f, samples => \@samples };
    }
    return @out;
}

sub burn_profiling_conf {
    return <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 1
OtelProfilingRate 200
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF
}

sub stack_has {
    my ($sample, $re) = @_;
    $re = qr/\b\Q$re\E\b/ unless ref $re;
    return scalar grep { /$re/ } @{ $sample->{stack} };
}

sub file_spans {
    my ($dir) = @_;
    my %seen;
    return grep { !$seen{ $_->{span_id} }++ }
        map { $_->{json} ? spans_from_json($_->{json}) : () } read_jsonl("$dir/traces.jsonl");
}

sub _stop_all {
    for my $k (keys %LIVE) {
        my $o = delete $LIVE{$k} or next;
        eval { $o->stop; 1 } or warn "cleanup: $@";
    }
}

our @PREFIXES;

END {
    my $status = $?;
    _stop_all();
    if (_builder()->is_passing && !$ENV{SPANPROF_KEEP}) {
        remove_tree($_) for @PREFIXES;
    }
    $? = $status;
}

# ==============================================================================
package SpanProf::Apache::Server;

use strict;
use warnings;
use File::Path qw(remove_tree);
use Time::HiRes qw(time sleep);

sub mpm        { $_[0]{mpm} }
sub port       { $_[0]{port} }
sub port2      { $_[0]{port2} }
sub port3      { $_[0]{port3} }
sub prefix     { $_[0]{prefix} }
sub conf_path  { $_[0]{conf_path} }
sub conf_text  { $_[0]{conf_text} }

sub master_pid {
    my ($self) = @_;
    my $t = SpanProf::Apache::_slurp("$self->{prefix}/run/httpd.pid") // return $self->{master};
    my ($pid) = $t =~ /(\d+)/;
    return $pid // $self->{master};
}

sub _alive {
    my ($pid) = @_;
    return 0 unless $pid;
    my $st = SpanProf::Apache::_slurp("/proc/$pid/stat") // return 0;
    my ($state) = $st =~ /\)\s+(\S)/;
    return defined $state && $state ne 'Z';
}

# The parent's live children: [pid, comm] from /proc/*/stat (not zombies).
sub _children {
    my ($self) = @_;
    my $master = $self->master_pid or return ();
    my @kids;
    opendir(my $dh, '/proc') or return ();
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my $st = SpanProf::Apache::_slurp("/proc/$p/stat") // next;
        my ($comm, $state, $ppid) = $st =~ /\((.*)\)\s+(\S)\s+(\d+)/ or next;
        push @kids, [$p, $comm] if $ppid == $master && $state ne 'Z';
    }
    closedir $dh;
    return sort { $a->[0] <=> $b->[0] } @kids;
}

# Children of the parent that serve requests. With worker and event, only
# the ones with threads: mod_cgid's daemon (a child too) has a single one.
# Never prefork's exporter process (exporter_pids).
sub child_pids {
    my ($self) = @_;
    my @kids;
    for my $k ($self->_children) {
        my ($p, $comm) = @$k;
        next if $comm eq 'spanprof-export';
        if ($self->{mpm} ne 'prefork') {
            my $status = SpanProf::Apache::_slurp("/proc/$p/status") // next;
            my ($threads) = $status =~ /^Threads:\s+(\d+)/m;
            next unless ($threads // 0) > 1;
        }
        push @kids, $p;
    }
    return @kids;
}

# prefork's exporter process (named spanprof-export).
sub exporter_pids {
    my ($self) = @_;
    return map { $_->[0] } grep { $_->[1] eq 'spanprof-export' } $self->_children;
}

sub error_log { SpanProf::Apache::_slurp("$_[0]{prefix}/error.log") // '' }

sub error_log_tail {
    my ($self, $n) = @_;
    my @l = split /\n/, $self->error_log;
    $n //= 40;
    @l = @l[-$n .. -1] if @l > $n;
    return join("\n", @l) . "\n";
}

sub access_log {
    my ($self, $name) = @_;
    return SpanProf::Apache::_slurp("$self->{prefix}/" . ($name // 'access.log')) // '';
}

sub crash_lines {
    my ($self) = @_;
    return grep { /exit signal|Segmentation|Aborted|AH00052|double free|corrupted/ } split /\n/, $self->error_log;
}

sub spanprof_lines {
    my ($self) = @_;
    return grep { /spanprof/ } split /\n/, $self->error_log;
}

sub graceful {
    my ($self, $timeout) = @_;
    my %old = map { $_ => 1 } $self->child_pids;
    my ($code, $out) = SpanProf::Apache::_run([$SpanProf::Apache::APACHE,
        '-f', $self->{conf_path}, '-k', 'graceful'], timeout => 30, env => $self->{env});
    die "apache2 -k graceful exited $code: $out\n" if $code != 0;
    my @new;
    SpanProf::Test::wait_until($timeout // 15, sub {
        return 0 if grep { SpanProf::Apache::Server::_alive($_) } keys %old;
        @new = grep { !$old{$_} } $self->child_pids;
        return @new && SpanProf::Apache::_port_accepts($self->{port});
    });
    return @new;
}

sub stop {
    my ($self, $timeout) = @_;
    return 0 if $self->{stopped}++;
    delete $SpanProf::Apache::LIVE{"$self"};
    my $master = $self->master_pid;
    my $t0 = time;
    my $tb_diag;
    if ($master && _alive($master)) {
        SpanProf::Apache::_run([$SpanProf::Apache::APACHE, '-f', $self->{conf_path}, '-k', 'stop'], timeout => 30,
                               env => $self->{env});
        SpanProf::Test::wait_until($timeout // 15, sub { !_alive($master) });
        if (_alive($master)) {
            # The whole group at once: killing the parent first orphaned
            # its children (child_pids, read after, found none: their
            # parent was 1 by then), and mod_cgid's daemon was never in it.
            $tb_diag = "apache2 -k stop: the parent still ran after "
                . sprintf('%.1f', time - $t0) . " s: killed its process group";
            SpanProf::Test::kill_group($self->{pgid})
                or kill 'KILL', $master, $self->child_pids;
        }
    }
    # Whatever of the group outlived its parent (a child or mod_cgid's
    # daemon that did not exit).
    if ($self->{pgid} && SpanProf::Test::group_members($self->{pgid})
        && !SpanProf::Test::wait_until(5, sub { !SpanProf::Test::group_members($self->{pgid}) }))
    {
        $tb_diag = ($tb_diag ? "$tb_diag; " : '') . "apache2: processes outlived the parent: "
            . join(' ', SpanProf::Test::group_members($self->{pgid}));
        SpanProf::Test::kill_group($self->{pgid});
    }
    my $took = time - $t0;
    SpanProf::Test::save_sanitizer_lines($self->error_log, "apache-$self->{mpm}");
    my $tb = SpanProf::Apache::_builder();
    $tb->diag($tb_diag) if $tb_diag;
    if (!$tb->is_passing || $self->{failed_start}) {
        $tb->diag("apache ($self->{mpm}) error log tail:\n" . $self->error_log_tail(30));
        $tb->diag("kept $self->{prefix}");
    } else {
        # removed at the end, if every test passed (logs are read after
        # a stop)
        push @SpanProf::Apache::PREFIXES, $self->{prefix};
    }
    return $took;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    eval { $self->stop };
}

1;
