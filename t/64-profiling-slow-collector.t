#!/usr/bin/perl
# A profile that falls due while the post of the one before it is still
# under way (a slow collector, or a request that kept nginx's event loop
# from driving the post) waits for that post and keeps gathering samples;
# it is not dropped. Here the Pyroscope receiver holds the first profile's
# post until the exporter's 1 s timeout, while a request burns CPU: its
# samples arrive with the next post.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Profile;

need_module();
need_burn_module();

my $ALPHA = 'spanprof_burn_alpha';

# The first post hangs (until the client gives up), the others succeed.
my $pyro = start_receiver(script => ['hang']);
my $ngx = start_nginx(burn => 1, dirs => ['out'], conf => <<"EOF");
otel_exporter { endpoint file://%%PREFIX%%/out; interval 100ms; timeout 1s; }
otel_profiling_pyroscope ${\ $pyro->url };
otel_profiling_rate 1000;
otel_profiling_interval 200ms;
server {
    listen 127.0.0.1:%%PORT%%;
    otel_trace on;
    otel_profiling on;
    location /alpha { spanprof_burn alpha 300; }
    location /tick  { otel_trace off; otel_profiling off; spanprof_burn beta 3; }
}
EOF

sub ingests { grep { $_->{path} =~ m{/ingest\?} } $pyro->requests }

# A first profile, whose post the receiver holds.
my $held = wait_until(10, sub { http_get($ngx->port, '/tick'); scalar ingests() >= 1 });
ok $held, 'the first profile was posted (and is held by the receiver)' or diag $pyro->summary;

# While it is held, a request burns 300 ms of CPU.
my $r = http_get($ngx->port, '/alpha');
is $r->{status}, 200, '/alpha answered while the post was held';

my $more = wait_until(15, sub { http_get($ngx->port, '/tick'); scalar ingests() >= 2 });
ok $more, 'the next profile was posted after the held one timed out' or diag $pyro->summary;
sleep 0.5;

my @samples;
for my $q ((ingests())[1 .. $#{ [ ingests() ] }]) {
    my ($b) = ($q->{headers}{'content-type'} // '') =~ m{boundary="?([^";]+)"?}i or next;
    my ($part) = grep { ($_->{name} // '') eq 'profile' } multipart_parts($q->{body}, $b);
    my $plain;
    next unless $part && gunzip(\$part->{content} => \$plain);
    my $p = eval { decode_pprof($plain) } or next;
    push @samples, pprof_samples($p);
}
my $w = total(grep { has_frame($_, $ALPHA) } @samples);
ok $w >= 150, "the burn's samples arrived in a later post: weight $w with $ALPHA (>= 150 of ~300)"
    or diag stacks_summary(\@samples, 10);

$ngx->quit(15);
my @skipped = grep { /skipped|still being sent/ && !/\[debug\]/ } split /\n/, $ngx->error_log;
is scalar(@skipped), 0, 'no profile skipped for the slow post' or diag join "\n", @skipped;
like $ngx->error_log, qr/exporter stopped: .* 1 failed/, 'the held post itself counts as failed (its timeout)'
    or diag $ngx->error_log_tail(10);
is scalar($ngx->crash_lines), 0, 'no crash';

done_testing;
