#!/usr/bin/perl
# demo/run.sh when its default ports are taken (a second clone's demo while
# the first one's spanprof serve is still up): it picks free ones, says so,
# prints the URL it uses, and that URL serves the UI; a re-run with the same
# demo directory (the same clone) stops its own earlier spanprof serve and
# starts again.
# The default ports (18080-18083, 16686) are held here by listeners of the
# test's own when free, so the result does not depend on what else runs.
use strict;
use warnings;
use lib 't/lib';
use File::Temp qw(tempdir);
use IO::Socket::INET;
use Test::More;
use SpanProf::Cli;
use SpanProf::Test qw(http_request);

my $root = repo_root();
need_cli();
for my $f ("$root/build/nginx/ngx_http_spanprof_module.so",
           "$root/build/demo-nginx/ngx_http_demo_backend_module.so") {
    next if -e $f;
    BAIL_OUT("missing: $f") if $ENV{SPANPROF_REQUIRE_MODULE};
    plan skip_all => "missing: $f";
}

my @held = grep { defined } map {
    IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $_, Listen => 1, ReuseAddr => 1)
} 18080 .. 18083, 16686;
note scalar(@held) . ' default ports held by the test, the others by someone else';

my $tmp = tempdir(CLEANUP => !$ENV{SPANPROF_KEEP});
chmod 0755, $tmp;
my %pids;
END { kill 'TERM', $_ for grep { $_ } values %pids }

sub demo {
    my ($dir) = @_;
    my $r = run_cmd({ SPANPROF_DEMO_NO_BUILD => 1, SPANPROF_DEMO_DIR => $dir },
                    'timeout', '120', 'bash', "$root/demo/run.sh");
    my $pid = -f "$dir/serve.pid" ? read_file("$dir/serve.pid") : undef;
    chomp $pid if defined $pid;
    $pids{$dir} = $pid;
    my ($url, $port) = $r->{out} =~ m{^Open (http://127\.0\.0\.1:(\d+)/) }m;
    return ($r, $url, $port, $pid);
}

my ($r1, $url1, $port1, $pid1) = demo("$tmp/a");
is $r1->{exit}, 0, 'the demo runs with its default ports taken' or diag "$r1->{out}\n$r1->{err}";
ok $url1, "it prints the UI's URL: " . ($url1 // 'none');
isnt $port1, 16686, 'not the taken default';
like $r1->{err}, qr/127\.0\.0\.1:16686 \(web UI\) is in use .*: using 127\.0\.0\.1:$port1/,
    'and says why';
my $ui = $port1 ? http_request('GET', $port1, '/') : { status => 0 };
is $ui->{status}, 200, 'that URL serves the UI';
like $ui->{content} // '', qr/<html/i, 'a page';
my $traces = $port1 ? http_request('GET', $port1, '/api/traces') : { content => '' };
like $traces->{content}, qr{/api/report}, 'with the demo\'s traces';

my ($r3, $url3, $port3, $pid3) = demo("$tmp/a");
is $r3->{exit}, 0, 'a re-run with the first demo directory' or diag "$r3->{out}\n$r3->{err}";
ok !kill(0, $pid1), 'stopped its own earlier serve';
isnt $pid3, $pid1, 'a new process';
ok $pid3 && kill(0, $pid3), 'and started a new one';
is $port3 ? http_request('GET', $port3, '/')->{status} : 0, 200, 'which serves the UI';

done_testing;
