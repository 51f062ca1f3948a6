#!/usr/bin/perl
# The harness leaves nothing running: a server's stop kills its whole
# process group when it has to fall back to SIGKILL or when its parent is
# already gone (apache2's children and mod_cgid's daemon were orphaned so),
# and a test file that leaves a process of a group it started fails.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

# apache2 (worker): the parent killed under the harness, as the old
# fallback did; the stop still ends its child and mod_cgid's daemon.
{
    my $ap = start_apache(mpm => 'worker', conf => '');
    my $pgid = $ap->{pgid};
    ok $pgid && $pgid == $ap->master_pid, 'apache2 leads its own process group';
    my @group = SpanProf::Test::group_members($pgid);
    cmp_ok scalar(@group), '>=', 3, 'the parent, a child and mod_cgid\'s daemon are in it'
        or diag "@group";
    kill 'KILL', $ap->master_pid;
    ok wait_until(5, sub { !SpanProf::Apache::Server::_alive($ap->master_pid) }), 'the parent is gone';
    ok scalar(SpanProf::Test::group_members($pgid)), 'its children outlived it';
    $ap->stop;
    ok wait_until(5, sub { !SpanProf::Test::group_members($pgid) }),
        'the stop ended them all' or diag join ' ', SpanProf::Test::group_members($pgid);
}

# A test file that leaves a receiver running fails, and the receiver is
# killed.
{
    my $out = `$^X -I t/lib -e 'use SpanProf::Test; my \$r = start_receiver(); \$r->{stopped} = 1; print "pid \$r->{pid}\\n"' 2>&1`;
    my $rc = $? >> 8;
    my ($pid) = $out =~ /^pid (\d+)/m;
    isnt $rc, 0, 'a test file leaving a process running exits non-zero';
    like $out, qr/processes left running at the end of the test \(killed now\):.*receiver on port/s,
        'and says which';
    ok $pid && wait_until(5, sub { !kill(0, $pid) || (SpanProf::Test::_pgid_of($pid) // 0) == 0 }),
        'the receiver is killed';
}

done_testing;
