#!/usr/bin/perl
# Event MPM, write completion: 40 MB static files served to a client that
# reads slowly (small receive buffer, 64 KB reads with pauses, ~2 s each).
# With sendfile, or with EnableMMAP Off + EnableSendfile Off, the core
# output filter sets the file bucket aside: the handler returns long before
# the last byte is written, and the rest of the response (and the request's
# log_transaction, where its SERVER span ends) is written by whichever
# worker thread the listener hands the writable connection to
# (process_socket -> ap_core_output_filter). mod_spanprof labels such a
# thread with the connection's unfinished request (resume_connection) and
# detaches it when the connection goes back to the listener. (With mmap,
# the default, the mapped data counts as buffered memory and the handler's
# thread writes it all, blocking.)
#
# Meanwhile CPU-burning requests (t/mod_burn) run on other threads of the
# same child. With OtelProfiling On at 1000 Hz and the file exporter:
#   - each download's SERVER span: status 200, http.response.body.size =
#     the file size, ended when the client had the last byte;
#   - every labelled sample names a request of this test (a download, a
#     burner) with its trace id;
#   - no sample in a burner (or reading a new request) carries a download's
#     span; no sample labelled with a burner's span is in a download's write
#     path (a file bucket read or sent by the core output filter), and every
#     sample there carries the download's span; most of a download's
#     samples are in the write path;
#   - samples in write completion are labelled (bounded: after the EOR
#     bucket the filter runs unlabelled for a few microseconds).
# The CPU timer fires on kernel ticks, so a sample's weight (1 + overrun)
# may include CPU time from just before the stack it shows. How many
# samples land in write completion depends on the machine (a loopback write
# is cheap); the counts are printed with note() (typically 20-30 in write
# completion, 15-30 in a download's file reads/sends).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_RCVBUF);
use Time::HiRes qw(time sleep);
use SpanProf::Test;
use SpanProf::Apache;

need_apache_module();

my $SIZE = 40 * 1024 * 1024;

my $CONF = <<'EOF';
OtelExporterEndpoint file://%%PREFIX%%/out
OtelExporterInterval 0.2
OtelProfilingInterval 1
OtelProfilingRate 1000
OtelServiceName apache-write-completion
OtelTrace On
OtelProfiling On
# A small send buffer: the last write is done when at most ~128 KiB are
# still in flight, not megabytes of autotuned buffer the slow client
# drains after the span ended (the end checks below compare with it).
SendBufferSize 65536
<Location /burn>
    SetHandler spanprof-burn
</Location>
<Location /sf/>
    EnableSendfile On
</Location>
<Location /rw/>
    EnableMMAP Off
    EnableSendfile Off
</Location>
EOF

# Reads a response slowly: small receive buffer, small reads with pauses,
# bounded by $budget seconds (after that it reads as fast as it can).
# Returns (header text, body length).
sub slow_get {
    my ($port, $path, $budget) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp', Timeout => 10) or die "connect: $!";
    setsockopt($s, SOL_SOCKET, SO_RCVBUF, pack('i', 64 * 1024));
    binmode $s;
    print $s "GET $path HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    my ($buf, $head, $n) = ('', undef, 0);
    my $t0 = time;
    my $deadline = $t0 + $budget + 20;
    while (time < $deadline) {
        my $r = sysread($s, $buf, 64 * 1024, length $buf);
        last unless $r;
        if (!defined $head) {
            my $i = index($buf, "\r\n\r\n");
            next if $i < 0;
            $head = substr($buf, 0, $i + 4);
            $n += length($buf) - $i - 4;
        } else {
            $n += $r;
        }
        $buf = '';
        sleep 0.002 if time - $t0 < $budget;
    }
    close $s;
    return ($head // '', $n);
}

# Started without OtelProfiling, which takes the module's connection
# hooks out of httpd's lists (spanprof_unhook_profiling), then restarted
# gracefully with it: httpd registers every module's hooks again, and
# resume_connection, which labels write completion, must be back.
(my $conf0 = $CONF) =~ s/^OtelProfiling On$/# OtelProfiling On: after the graceful restart/m
    or die 'no OtelProfiling line';
my $ap = start_apache(mpm => 'event', conf => $conf0, burn => 1, dirs => [qw(out htdocs/sf htdocs/rw)],
    servers => 1, server_limit => 1, threads => 6);
{
    my $path = $ap->conf_path;
    open(my $in, '<', $path) or die "$path: $!";
    my $text = do { local $/; <$in> };
    close $in;
    $text =~ s/^# OtelProfiling On: after the graceful restart$/OtelProfiling On/m
        or die "$path: no OtelProfiling line";
    open(my $out, '>', $path) or die "$path: $!";
    print $out $text;
    close $out;
    my @new = $ap->graceful(20);
    ok @new, 'graceful restart into OtelProfiling On: new child ' . join(',', @new);
}
for my $f (qw(htdocs/big.bin htdocs/sf/big.bin htdocs/rw/big.bin)) {
    open(my $fh, '>', $ap->prefix . "/$f") or die "$f: $!";
    binmode $fh;
    my $chunk = join('', map { chr(($_ * 7) % 251) } 0 .. 65535);
    print $fh $chunk for 1 .. $SIZE / 65536;
    close $fh;
}

# the downloads, each with burners running alongside on other threads:
# mmap + writev (mostly written by the handler's thread: mmap'd data counts
# as buffered memory, so the core output filter blocks), sendfile and
# read + writev (EnableMMAP Off, EnableSendfile Off) twice: the file buckets
# are set aside and written in write completion.
my @DOWNLOADS = qw(/big.bin /sf/big.bin /rw/big.bin /rw/big.bin?2);
my %dl;
for my $path (@DOWNLOADS) {
    my $tag = $path =~ m{^/(\w+)/} ? $1 : 'mm';
    $tag .= '2' if $path =~ /\?2$/;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        # burners: sequential, while the parent downloads
        for my $i (1 .. 4) {
            my $fn = $i % 2 ? 'alpha' : 'beta';
            http_get($ap->port, "/burn?fn=$fn&ms=150&dl=$tag&i=$i");
        }
        POSIX::_exit(0);
    }
    my $t0 = time;
    my ($head, $n) = slow_get($ap->port, $path, 2.5);
    my $t1 = time;
    waitpid($pid, 0);
    like $head, qr{^HTTP/1\.1 200 }, "$path: 200";
    is $n, $SIZE, "$path: the whole file";
    note sprintf "%s: read in %.2f s", $path, $t1 - $t0;
    $dl{$path} = $t1;
}
is scalar($ap->crash_lines), 0, 'no crash' or diag join "\n", $ap->crash_lines;
$ap->stop;

my $out = $ap->prefix . '/out';
my @spans = file_spans($out);
my (%span_of, %known);
for my $path (@DOWNLOADS) {
    (my $p = $path) =~ s/\?.*//;
    my $q = $path =~ /\?(.*)/ ? $1 : undef;
    my @s = grep { $_->{kind} eq 'SPAN_KIND_SERVER' && ($_->{attrs}{'url.path'} // '') eq $p
                   && ($_->{attrs}{'url.query'} // '') eq ($q // '') } @spans;
    is scalar @s, 1, "$path: one SERVER span" or do { diag span_summary(@spans); next };
    my $s = $s[0];
    is $s->{attrs}{'http.response.status_code'}, 200, "$path: status 200";
    is $s->{attrs}{'http.response.body.size'}, $SIZE, "$path: http.response.body.size = file size";
    is $s->{status_code}, '', "$path: not an error";
    # the span ends in log_transaction, when the last bytes are written
    # (both clocks are CLOCK_REALTIME; 0.2 s of slack)
    ok $s->{end} / 1e9 > $dl{$path} - 0.2, sprintf("$path: the span lasts until the last byte (%.2f s; ended %.3f s before the client had it all)",
        ($s->{end} - $s->{start}) / 1e9, $dl{$path} - $s->{end} / 1e9);
    $span_of{$path} = $s;
    $known{ $s->{span_id} } = { trace => $s->{trace_id}, what => "download $path" };
}
my @burn_spans = grep { ($_->{attrs}{'url.path'} // '') eq '/burn' } @spans;
is scalar @burn_spans, 4 * @DOWNLOADS, 'the burners\' spans';
$known{ $_->{span_id} } = { trace => $_->{trace_id}, what => 'burn ' . ($_->{attrs}{'url.query'} // '') }
    for @burn_spans;

my @prof = pprof_profiles($out);
ok @prof, scalar(@prof) . ' profile file(s)' or diag $ap->error_log_tail(20);
my @samples = map { @{ $_->{samples} } } @prof;

# stack classes (leaf first)
my $BURN  = qr/spanprof_apache_burn_/;
my $WRITE = qr/^(?:writev|sendfile|apr_socket_send|apr_socket_sendv|apr_socket_sendfile|ap_core_output_filter|ap_pass_brigade|ap_filter_output_pending|ap_run_output_pending|apr_file_read|read|pread|mmap|munmap|apr_mmap_\w+|memcpy|__memcpy\w*)$/;
my $FOREIGN = qr/^(?:spanprof_apache_burn_\w+|spanprof_burn_handler|ap_read_request)$/;
# the download's own handler (mod_rewrite, the default handler) before
# its write path: its code too
my $HANDLER = qr/^(?:ap_invoke_handler|ap_run_handler)$/;
# the download's own write path: a file bucket read or sent by the core
# output filter (no burner response has one). Only named I/O frames: an
# unnamed libaprutil frame is any bucket's code (a burner's heap bucket
# being destroyed after its writev looks the same), so it proves nothing.
my $FILEIO = qr/^(?:apr_file_read|read|pread|sendfile|apr_socket_sendfile|mmap|munmap|apr_mmap_\w+)$/;
# memory being allocated or freed (a pool or bucket allocator mapping or
# unmapping pages): not file I/O, though it may end in mmap or munmap
my $ALLOC = qr/^(?:apr_pool_\w+|apr_palloc|apr_pcalloc|apr_allocator_\w+|apr_bucket_alloc\w*|apr_bucket_free|malloc|calloc|realloc|free|cfree|__libc_free|_int_free|munmap_chunk)$/;

sub frames { @{ $_[0]{stack} } }
sub has { my ($x, $re) = @_; scalar grep { $_ =~ $re } frames($x) }
# write completion: the core output filter called by the MPM itself
# (process_socket, static in mod_mpm_event.so; ap_run_output_pending)
sub in_wc {
    my ($x) = @_;
    my @f = frames($x);
    for my $i (0 .. $#f - 1) {
        next unless $f[$i] eq 'ap_core_output_filter' || $f[$i] eq 'ap_filter_output_pending';
        return 1 if $f[$i + 1] =~ /^mod_mpm_event\.so\+|output_pending|process_socket/;
    }
    return 0;
}
sub in_file_write {
    my ($x) = @_;
    my @f = frames($x);
    my ($cof) = grep { $f[$_] eq 'ap_core_output_filter' } 0 .. $#f;
    return 0 unless defined $cof;
    my @below = @f[0 .. $cof - 1];
    # any request's response header can allocate there (seen: a burner's
    # ap_http_header_filter -> ap_core_output_filter -> apr_pool_create_ex
    # -> mmap)
    return 0 if grep { $_ =~ $ALLOC } @below;
    return scalar grep { $_ =~ $FILEIO } @below;
}

my (%n, %unknown, @bad_dl, @bad_burn);
my %dl_ids = map { $_->{span_id} => 1 } values %span_of;
for my $x (@samples) {
    my $c = $x->{count};
    my $sid = $x->{labels}{span_id};
    my $wc = in_wc($x);
    my $fw = in_file_write($x);
    $n{total} += $c;
    $n{wc} += $c if $wc;
    $n{file_write} += $c if $fw;
    if (!defined $sid) {
        $n{unlabelled} += $c;
        $n{unlabelled_wc} += $c if $wc;
        $n{unlabelled_file_write} += $c if $fw;
        next;
    }
    my $k = $known{$sid};
    if (!$k) { $unknown{$sid} += $c; next }
    $n{wrong_trace} += $c if ($x->{labels}{trace_id} // '') ne $k->{trace};
    if ($dl_ids{$sid}) {
        $n{dl} += $c;
        $n{dl_write} += $c if has($x, $WRITE) || has($x, $HANDLER);
        $n{dl_wc} += $c if $wc;
        $n{dl_file_write} += $c if $fw;
        $n{dl_file_write_wc} += $c if $fw && $wc;
        $n{dl_in_burn} += $c if has($x, $BURN);
        # another request's code under the download's label: a burner, or
        # a new request being read on the thread (not the download's own
        # post_read_request hook, which labels it and runs inside
        # ap_read_request)
        push @bad_dl, $x if has($x, $FOREIGN) && !has($x, qr/^spanprof_post_read_request$/);
    } else {
        $n{burn} += $c;
        $n{burn_in_burn} += $c if has($x, $BURN);
        $n{burn_wc} += $c if $wc;
        $n{burn_file_write} += $c if $fw;
        push @bad_burn, $x if $fw;
    }
}
$n{$_} //= 0 for qw(total wc file_write unlabelled unlabelled_wc unlabelled_file_write wrong_trace
    dl dl_write dl_wc dl_file_write dl_file_write_wc dl_in_burn burn burn_in_burn burn_wc burn_file_write);
note 'samples (weights): ' . join ', ', map { "$_=$n{$_}" } sort keys %n;

sub show { map { "$_->{count} [" . ($known{ $_->{labels}{span_id} // '' }{what} // $_->{labels}{span_id} // '-') . '] '
    . join(' < ', frames($_)) } @_ }

is_deeply \%unknown, {}, 'every labelled sample names a request of this test';
is $n{wrong_trace}, 0, 'with its trace id';
ok $n{burn_in_burn} >= 100, "$n{burn_in_burn} samples in the burners carry a burner's span";
is $n{dl_in_burn}, 0, 'no sample in a burner carries a download\'s span';
is $n{burn_file_write}, 0, 'no sample labelled with a burner\'s span is in a download\'s write path (file read/sent by the core output filter)'
    or diag join "\n", show(@bad_burn);
is $n{unlabelled_file_write}, 0, 'every sample in a download\'s write path is labelled';
is $n{dl_file_write}, $n{file_write}, 'with the download\'s span';
# after its EOR bucket (log_transaction) the filter runs unlabelled for a
# few microseconds: only a bound here
ok $n{unlabelled_wc} <= 2 + 0.1 * $n{wc}, "$n{unlabelled_wc} of $n{wc} samples in write completion unlabelled"
    or diag join "\n", show(grep { !defined $_->{labels}{span_id} && in_wc($_) } @samples);
ok $n{dl} > 0, "$n{dl} samples carry a download's span";
is scalar(@bad_dl), 0, 'none of them in another request\'s code' or diag join "\n", show(@bad_dl);
ok $n{dl_write} >= 0.8 * $n{dl}, "$n{dl_write} of them in the write path or the download's handler"
    or diag join "\n", show(grep { my $s = $_->{labels}{span_id}; defined $s && $dl_ids{$s} && !has($_, $WRITE) && !has($_, $HANDLER) } @samples);
if ($n{dl_file_write_wc}) {
    pass "$n{dl_file_write_wc} samples of a download's write completion observed, all with its span";
} else {
    note 'no sample of a download\'s write completion this time (too little CPU)';
}

if ($ENV{SPANPROF_DUMP}) {
    diag join "\n", show(@samples);
}

done_testing;
