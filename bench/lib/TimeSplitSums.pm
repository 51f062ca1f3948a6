package TimeSplitSums;
# bench/time_split's samples.tsv summed by kind of code (report.pl's
# "user space" against issue 29's targets). A row is
#   CONFIG  ROUND  REQUESTS  SAMPLES  "DSO [k|.] SYMBOL"
# from `perf record -F 2000`: a sample is 500 us of CPU, so a row is
# SAMPLES * 500000 / REQUESTS ns a request in that round.
use strict;
use warnings;
use Exporter 'import';

our @EXPORT_OK = qw(kind_of ns_by_kind pair_sums USER_KINDS);

# Spanprof's own user space: the module, its transport, its clock reads and
# the libc it calls; the server's code and the kernel are kept apart.
use constant USER_KINDS => qw(module transport clock libc);

sub kind_of {
    my ($what) = @_;
    my ($dso) = split / /, $what;
    # the module with what it calls for itself: ld.so's TLS look-ups from a
    # loaded module, libunwind in the sampler
    return 'module' if $dso =~ /^(mod_spanprof|ngx_http_spanprof_module)\.so$|^ld-linux|^libunwind/;
    return 'transport' if $dso =~ /^(libcurl|libnghttp2|libz)\./;
    return 'clock' if $dso eq '[vdso]' || $what =~ /^libc\S* \S+ clock_gettime/;
    # the event MPM's queue and nginx's waits: their locks and futex calls
    # (spanprof takes no lock on the request path) count with the server
    return 'server' if $what =~ /^libc\S* \S+ \S*(futex|lll_lock|pthread_mutex|pthread_cond|asynccancel)/;
    return 'libc' if $dso =~ /^libc\.so/;
    return $dso eq '[kernel.kallsyms]' ? 'kernel' : 'server';
}

# { CONFIG => { KIND => ns a request, total => ns } }: each round's rows
# per its own request count, then the mean of the rounds. Rows with no
# request count are skipped. undef when the file cannot be read.
sub ns_by_kind {
    my ($path) = @_;
    open(my $fh, '<', $path) or return;
    my (%ns, %rounds);
    while (<$fh>) {
        chomp;
        my ($c, $round, $n, $samples, $what) = split /\t/;
        next unless $n;
        $rounds{$c}{$round} = 1;
        my $v = $samples * 500000 / $n;
        $ns{$c}{ kind_of($what) } += $v;
        $ns{$c}{total} += $v;
    }
    close $fh;
    for my $c (keys %ns) {
        my $k = keys %{ $rounds{$c} };
        $ns{$c}{$_} /= $k for keys %{ $ns{$c} };
    }
    return \%ns;
}

# Y against X: { KIND => Y - X } for every kind and total, plus user (the
# sum over USER_KINDS). undef unless both were sampled.
sub pair_sums {
    my ($ns, $y, $x) = @_;
    return unless $ns->{$x} && $ns->{$y};
    my %d;
    for my $k (USER_KINDS, qw(server kernel total)) {
        $d{$k} = ($ns->{$y}{$k} // 0) - ($ns->{$x}{$k} // 0);
    }
    $d{user} = 0;
    $d{user} += $d{$_} for USER_KINDS;
    return \%d;
}

1;
