#!/usr/bin/perl
# bench/lib/TimeSplitSums.pm, which BENCHMARKS.md's "user space" sums of
# issue 29 come from: each perf row goes to its kind of code (the module
# with ld.so and libunwind, the transport, the clock, libc but its lock
# calls, the server, the kernel), a round's rows count per that round's
# requests, rounds are averaged, and a pair's user space is the module,
# transport, clock and libc differences and nothing else. Sums from a
# samples.tsv made here, whose values are known.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../bench/lib";
use File::Temp qw(tempdir);
use Test::More;
use TimeSplitSums qw(kind_of ns_by_kind pair_sums);

my %kinds = (
    'ngx_http_spanprof_module.so [.] ngx_http_spanprof_server_span' => 'module',
    'mod_spanprof.so [.] spanprof_post_read_request'                => 'module',
    'ld-linux-x86-64.so.2 [.] __tls_get_addr'                       => 'module',
    'libunwind.so.8.0.1 [.] _ULx86_64_step'                         => 'module',
    'libcurl.so.4.8.0 [.] curl_multi_perform'                       => 'transport',
    'libnghttp2.so.14.24.1 [.] nghttp2_session_send'                => 'transport',
    'libz.so.1.2.13 [.] deflate'                                    => 'transport',
    '[vdso] [.] __vdso_clock_gettime'                               => 'clock',
    'libc.so.6 [.] clock_gettime@@GLIBC_2.17'                       => 'clock',
    'libc.so.6 [.] __memmove_avx512_unaligned_erms'                 => 'libc',
    'libc.so.6 [.] _int_free'                                       => 'libc',
    'libc.so.6 [.] __lll_lock_wait'                                 => 'server',
    'libc.so.6 [.] __futex_abstimed_wait_common'                    => 'server',
    'libc.so.6 [.] pthread_cond_wait@@GLIBC_2.3.2'                  => 'server',
    'libc.so.6 [.] __pthread_disable_asynccancel'                   => 'server',
    'nginx [.] ngx_http_core_run_phases'                            => 'server',
    'apache2 [.] ap_process_request'                                => 'server',
    'libapr-1.so.0.7.2 [.] apr_palloc'                              => 'server',
    '[kernel.kallsyms] [k] tcp_sendmsg_locked'                      => 'kernel',
);
is kind_of($_), $kinds{$_}, "$kinds{$_}: $_" for sort keys %kinds;

# A: 1,000 and 2,000 requests in its two rounds; C: 1,000 in each. A sample
# is 500 us: 2 samples over 1,000 requests are 1,000 ns a request.
my $dir = tempdir(CLEANUP => 1);
my $tsv = "$dir/samples.tsv";
open(my $fh, '>', $tsv) or die "$tsv: $!";
print $fh join("\t", @$_), "\n" for
    [A => 1, 1000, 2, 'nginx [.] ngx_http_core_run_phases'],
    [A => 2, 2000, 4, 'nginx [.] ngx_http_core_run_phases'],        # server 1000
    [A => 1, 1000, 4, '[kernel.kallsyms] [k] tcp_sendmsg_locked'],
    [A => 2, 2000, 4, '[kernel.kallsyms] [k] tcp_sendmsg_locked'],  # kernel (2000 + 1000) / 2
    [A => 1, 1000, 1, 'libc.so.6 [.] _int_free'],
    [A => 2, 2000, 2, 'libc.so.6 [.] _int_free'],                   # libc 500
    [C => 1, 1000, 2, 'nginx [.] ngx_http_core_run_phases'],
    [C => 2, 1000, 2, 'nginx [.] ngx_http_core_run_phases'],        # server 1000
    [C => 1, 1000, 4, '[kernel.kallsyms] [k] tcp_sendmsg_locked'],
    [C => 2, 1000, 8, '[kernel.kallsyms] [k] tcp_sendmsg_locked'],  # kernel 3000
    [C => 1, 1000, 1, 'ngx_http_spanprof_module.so [.] ngx_http_spanprof_export'],
    [C => 2, 1000, 1, 'ld-linux-x86-64.so.2 [.] __tls_get_addr'],   # module 500
    [C => 1, 1000, 1, 'libcurl.so.4.8.0 [.] curl_multi_perform'],   # transport 250
    [C => 2, 1000, 1, '[vdso] [.] __vdso_clock_gettime'],           # clock 250
    [C => 1, 1000, 2, 'libc.so.6 [.] _int_free'],
    [C => 2, 1000, 2, 'libc.so.6 [.] __lll_lock_wait'],             # libc 500, server +500
    [C => 1, 0, 9, 'nginx [.] skipped: no request count'];
close $fh;

my $ns = ns_by_kind($tsv);
ok $ns, 'samples.tsv read';
is_deeply $ns->{A}, { server => 1000, kernel => 1500, libc => 500, total => 3000 },
    'A: each round per its own requests, the mean of the rounds';
is_deeply $ns->{C}, { server => 1500, kernel => 3000, module => 500, transport => 250,
                      clock => 250, libc => 500, total => 6000 },
    "C: a lock call in libc is the server's, ld.so is the module's";

my $d = pair_sums($ns, 'C', 'A');
is_deeply $d, { module => 500, transport => 250, clock => 250, libc => 0,
                server => 500, kernel => 1500, total => 3000, user => 1000 },
    'C - A: user space is module + transport + clock + libc only';
is pair_sums($ns, 'D', 'C'), undef, 'no pair without both configurations';
is ns_by_kind("$dir/none.tsv"), undef, 'no sums without a file';

done_testing;
