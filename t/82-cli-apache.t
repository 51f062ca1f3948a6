#!/usr/bin/perl
# The CLI on what Apache httpd's mod_spanprof writes with the file exporter:
# a CPU-burning request (t/mod_burn) is the slowest trace, its span has the
# samples, and its flame graph's hot function is the burner.

use strict;
use warnings;

use Test::More;

use lib 't/lib';
use SpanProf::Test;
use SpanProf::Apache;
use SpanProf::Cli;

need_cli();
need_apache_module();
if (!-f apache_burn_path()) {
    my $msg = 'test module not built: ' . apache_burn_path() . ' (run `make apache`)';
    BAIL_OUT($msg) if $ENV{SPANPROF_REQUIRE_MODULE};
    plan skip_all => $msg;
}

my ($mpm) = grep { $_ eq 'event' } apache_mpms();
$mpm //= (apache_mpms())[0];

my $ap = start_apache(mpm => $mpm, conf => burn_profiling_conf() . <<'EOF', burn => 1, dirs => ['out'], servers => 1);
OtelServiceName apache-cli
OtelTrace On
EOF
like http_get($ap->port, '/burn?fn=alpha&ms=300')->{content}, qr/^alpha 300 /, 'slow request served';
like http_get($ap->port, '/burn?fn=beta&ms=20')->{content}, qr/^beta 20 /, 'fast request served';
my $dir = $ap->prefix . '/out';
$ap->stop;

my $r = run_cli('traces', $dir, '--slowest', 2);
is $r->{exit}, 0, "traces ($mpm): exit 0" or diag $r->{err};
is $r->{err}, '', 'no warnings';
my ($slowest) = $r->{out} =~ /^TRACE (\w{32})  ([\d.]+) ms/m;
like $r->{out}, qr{^TRACE $slowest  \d{3}\.\d\d ms  \S+  1 span  \d+ CPU samples  service apache-cli$}m,
    'slowest trace: the 300 ms request, with samples';
my ($n) = $r->{out} =~ m{^  \w{16}  SERVER .*  200\s+(\d+)  GET\b.*/burn$}m;
cmp_ok $n // 0, '>=', 20, 'its SERVER span has the samples' or diag $r->{out};

$r = run_cli('folded', $dir, '--trace', $slowest);
my %self;
for (split /\n/, $r->{out}) {
    my ($stack, $c) = /^(.*) (\d+)$/ or next;
    $self{ (split /;/, $stack)[-1] } += $c;
}
my ($top) = sort { $self{$b} <=> $self{$a} } keys %self;
is $top, 'spanprof_apache_burn_alpha', 'folded: the burner is the hot function';
ok !exists $self{spanprof_apache_burn_beta}, 'folded: nothing of the other request';

$r = run_cli('flamegraph', $dir, '--trace', $slowest, '-o', $ap->prefix . '/t.svg');
is $r->{exit}, 0, 'flamegraph: exit 0' or diag $r->{err};
my $svg = read_file($ap->prefix . '/t.svg');
like $svg, qr{<text id="title"[^>]*>GET[^<]*  \d+\.\d\d ms  ·  trace $slowest</text>}, 'flamegraph: title';
like $svg, qr{>spanprof_apache_burn_alpha</text>}, 'flamegraph: names the burner';

done_testing;
