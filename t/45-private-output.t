#!/usr/bin/perl
# Output and symbols from anywhere: the file exporter's directory, its
# traces.jsonl and the mapped ELF files are opened by the nginx master /
# httpd parent (root) and inherited by the workers (nobody), so a clone in
# /root (mode 0700) works: here the output directory and copies of the
# modules sit under a root-owned 0700 directory the workers cannot search.
# Checked: spans arrive, profiles are written, the burn modules' functions
# (static ones too, from .symtab) are named; the directory the master
# creates belongs to the worker user; a traces.jsonl renamed under load and
# reopened (nginx -s reopen, apache2 -k graceful) loses and repeats no span.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Copy qw(copy);
use File::Temp qw(tempdir);
use POSIX qw(_exit);
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;
use SpanProf::Apache;

need_module();
need_burn_module();
plan skip_all => 'needs root (workers run as nobody)' unless $> == 0;

# A root-owned 0700 directory, as /root is: nobody cannot search it.
my $private = tempdir('spanprof-private-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{SPANPROF_KEEP});
chmod 0700, $private or die "chmod $private: $!";
mkdir "$private/modules" or die $!;
sub private_copy {
    my ($from) = @_;
    my ($base) = $from =~ m{([^/]+)$};
    my $to = "$private/modules/$base";
    copy($from, $to) or die "copy $from: $!";
    return $to;
}
my $nobody = getpwnam('nobody');

# The spans of requests /r/<n> in one traces.jsonl, one entry per line
# record (no dedupe: a span written twice must show).
sub request_numbers {
    my ($path) = @_;
    my @n;
    for my $rec (read_jsonl($path)) {
        next unless $rec->{json};
        for my $s (spans_from_json($rec->{json})) {
            my ($n) = ($s->{attrs}{'url.path'} // '') =~ m{^/r/(\d+)$} or next;
            push @n, $n;
        }
    }
    return @n;
}

# Requests /r/0 .. for $seconds in a child; returns its pid and the file
# where it writes how many it sent.
sub load_in_background {
    my ($port, $seconds, $countfile) = @_;
    my $pid = fork // die "fork: $!";
    return $pid if $pid;
    my ($n, $end) = (0, time + $seconds);
    while (time < $end) {
        my $r = eval { http_get($port, "/r/$n") };
        $n++ if $r && $r->{status};   # a 404 is a span too
    }
    open my $fh, '>', $countfile or _exit(1);
    print $fh "$n\n";
    close $fh;
    _exit(0);
}

sub check_rotation {
    my ($what, $dir, $sent) = @_;
    my @old = request_numbers("$dir/traces.jsonl.1");
    my @new = request_numbers("$dir/traces.jsonl");
    my %seen;
    $seen{$_}++ for @old, @new;
    my @missing = grep { !$seen{$_} } 0 .. $sent - 1;
    my @twice = grep { $seen{$_} > 1 } sort { $a <=> $b } keys %seen;
    ok $sent >= 50, "$what: $sent requests sent under load";
    is scalar(@missing), 0, "$what: every request's span is in one of the two files"
        or diag 'missing: ' . join(' ', @missing[0 .. ($#missing < 20 ? $#missing : 19)]);
    is scalar(@twice), 0, "$what: no span is in both files, nor twice in one"
        or diag 'twice: ' . join(' ', @twice[0 .. ($#twice < 20 ? $#twice : 19)]);
    ok @old > 0, "$what: the renamed file holds the spans before the reopen (" . scalar(@old) . ')';
    ok @new > 0, "$what: the new traces.jsonl holds the spans after it (" . scalar(@new) . ')';
    my @st = stat "$dir/traces.jsonl";
    is $st[4], $nobody, "$what: the new traces.jsonl belongs to the worker user, as nginx's logs do";
}

# ---------------------------------------------------------------------------
subtest 'nginx: output, profiles and symbols under a 0700 root directory' => sub {
    my $dir = "$private/ngx-out";
    my $ngx = start_nginx(
        module => 0,
        # the burn module first, as start_nginx(burn => 1) loads it
        extra_modules => [ private_copy(burn_module_path()), private_copy(module_path()) ],
        burn => 0,
        conf => <<"EOF");
otel_exporter { endpoint file://$dir; interval 100ms; }
otel_service_name private-ngx;
otel_profiling_rate 1000;
otel_profiling_interval 300ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    location /alpha { otel_profiling on; spanprof_burn alpha 300; }
    location /r/ { return 200 "ok\\n"; }
}
EOF
    my @st = stat $dir;
    ok @st, "the master created $dir";
    is $st[4], $nobody, 'owned by the worker user, as ngx_create_paths makes temp paths';
    is $st[2] & 07777, 0700, 'mode 0700';

    my $r = http_get($ngx->port, '/alpha');
    is $r->{status}, 200, '/alpha answered';

    # rotation under load: rename, reopen, keep going
    my $count = "$private/ngx-count";
    my $loader = load_in_background($ngx->port, 2.5, $count);
    sleep 0.8;
    rename "$dir/traces.jsonl", "$dir/traces.jsonl.1" or die "rename: $!";
    sleep 0.3;
    $ngx->signal('USR1');
    waitpid $loader, 0;
    my $sent = do { open my $fh, '<', $count or die "$count: $!"; 0 + <$fh> };
    $ngx->quit(15);

    check_rotation('nginx -s reopen', $dir, $sent);

    my @files = pprof_files($dir);
    ok @files >= 1, scalar(@files) . ' pprof file(s) written by the worker' or diag `ls -la $dir`;
    my %fn;
    for my $f (@files) {
        my $p = eval { read_pprof_file($f) } or next;
        $fn{$_}++ for @{ pprof_meta($p)->{functions} };
    }
    ok $fn{spanprof_burn_alpha}, 'spanprof_burn_alpha named (the module under the 0700 directory)'
        or diag join ', ', grep { /burn|\.so\+/ } sort keys %fn;
    ok $fn{ngx_http_spanprof_burn_step}, 'ngx_http_spanprof_burn_step named (static, .symtab)';
    unlike $ngx->error_log, qr/Permission denied|failed \(13/, 'no permission error in the log'
        or diag $ngx->error_log_tail(20);
    is scalar($ngx->crash_lines), 0, 'no crash';
};

# ---------------------------------------------------------------------------
subtest 'Apache: output, profiles and symbols under a 0700 root directory' => sub {
    need_apache_module();
    my $dir = "$private/ap-out";
    my $mod = private_copy(apache_module_path());
    my $burn = private_copy(apache_burn_path());
    my $ap = start_apache(
        mpm => 'event', module => 0,
        main => "LoadModule spanprof_module $mod\nLoadModule spanprof_burn_module $burn",
        conf => <<"EOF");
OtelExporterEndpoint file://$dir
OtelExporterInterval 0.1
OtelServiceName private-apache
OtelProfilingInterval 1
OtelProfilingRate 200
OtelTrace On
<Location /burn>
    SetHandler spanprof-burn
    OtelProfiling On
</Location>
EOF

    my @st = stat $dir;
    ok @st, "the parent created $dir";
    is $st[4], $nobody, 'owned by the User';

    my $r = http_get($ap->port, '/burn?fn=alpha&ms=400&n=1');
    is $r->{status}, 200, '/burn answered';

    my $count = "$private/ap-count";
    my $loader = load_in_background($ap->port, 2.5, $count);
    sleep 0.8;
    rename "$dir/traces.jsonl", "$dir/traces.jsonl.1" or die "rename: $!";
    $ap->graceful(15);
    waitpid $loader, 0;
    my $sent = do { open my $fh, '<', $count or die "$count: $!"; 0 + <$fh> };
    $ap->stop(15);

    check_rotation('apache2 -k graceful', $dir, $sent);

    my @profiles = pprof_profiles($dir);
    ok @profiles >= 1, scalar(@profiles) . ' pprof file(s) written by the children' or diag `ls -la $dir`;
    my @samples = map { @{ $_->{samples} } } @profiles;
    my $alpha = 0;
    $alpha += $_->{count} for grep { stack_has($_, 'spanprof_apache_burn_alpha') } @samples;
    ok $alpha >= 20, "$alpha samples in spanprof_apache_burn_alpha (the module under the 0700 directory)"
        or diag join ', ', map { $_->{stack}[0] } @samples;
    my @static = grep { stack_has($_, 'spanprof_burn_handler') } @samples;
    ok @static, 'spanprof_burn_handler named (static, .symtab)';
    unlike $ap->error_log, qr/Permission denied|\(13\)/, 'no permission error in the log'
        or diag $ap->error_log_tail(20);
    is scalar($ap->crash_lines), 0, 'no crash';
};

done_testing;
