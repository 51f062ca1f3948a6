package SpanProf::Profile;

=head1 NAME

SpanProf::Profile - decode the CPU profiles spanprof exports (t/6*.t)

=head1 SYNOPSIS

    use SpanProf::Test;
    use SpanProf::Profile;

    # pprof (file exporter, Pyroscope): gzip'd or plain bytes
    my $p  = decode_pprof($bytes);
    my @s  = pprof_samples($p);
    # OTLP ExportProfilesServiceRequest (POST .../v1development/profiles)
    my @o  = otlp_samples(decode_otlp_profiles($body));
    my @all = collect_otlp_samples($recv);     # every profiles POST stored
    diag stacks_summary(\@all, 15);

Both decoders run the real protoc (C<--decode>) on the repository's
proto/ files and parse its text format with SpanProf::Test's
parse_text_format; nothing is decoded by hand.

=head1 EXPORTS

=over

=item decode_pprof($bytes)

gunzips the bytes when they start with the gzip magic, then
C<protoc --decode=perftools.profiles.Profile>. Returns the parsed message
(fields as array refs, see SpanProf::Test). Dies on failure.

=item pprof_samples($decoded)

A list of samples:

    { count    => samples/count value (the weight),
      cpu_ns   => cpu/nanoseconds value,
      values   => [all values],
      labels   => { key => string value },     # trace_id, span_id, span_name
      stack    => [function names, leaf first (inlined callees first)],
      addrs    => [location addresses, leaf first] }

A location without lines is named "?0x<address>".

=item pprof_meta($decoded)

{ sample_types => ["samples/count", "cpu/nanoseconds"], period_type =>
"cpu/nanoseconds", period, time_nanos, duration_nanos, functions => [names],
mappings => [{filename, build_id, start, limit}] }.

=item decode_otlp_profiles($body)

C<protoc --decode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest>.

=item otlp_samples($decoded)

A list of samples of every profile in the request:

    { count      => weight in samples: sum of values / period for a
                    cpu/nanoseconds profile (exact while the rate did
                    not change), sum of values for samples/count,
      cpu_ns     => CPU nanoseconds: sum of values (cpu/nanoseconds),
                    or sum * period (samples/count),
      values     => [...],
      timestamps => [timestamps_unix_nano],
      link       => { trace_id => 32 hex, span_id => 16 hex } or undef
                    (link_index 0),
      attrs      => { key => value }   # from attribute_indices (span.name)
      stack      => [function names, leaf first],
      resource   => { resource attributes },   # process.pid, service.name
      profile    => { sample_type, period_type, period, time_unix_nano,
                      duration_nano, profile_id (hex) } }

=item collect_otlp_samples($receiver)

Decodes every POST whose path ends in /v1development/profiles the receiver
stored (cached) and returns all their samples; each also has C<seq>.

=item profile_requests($receiver)

The stored requests whose path ends in /v1development/profiles.

=item wait_otlp_covering($receiver, $epoch_seconds, $timeout, poke => sub {...})

Waits until a profile received ends (time_unix_nano + duration_nano) at or
after the given wall-clock time, so every sample taken before it has
arrived. A profile is only sent for an interval with samples: the poke
callback (called every 0.4 s while waiting) should make the worker use
some CPU. Returns ($covered, all samples).

=item read_pprof_file($path)

decode_pprof of a file's bytes.

=item pprof_files($dir)

Sorted full paths of the cpu-*.pb.gz files in $dir.

=item has_frame($sample, $name_or_regex)

True when a frame of the sample's stack is the name (string: exact) or
matches the regex.

=item frame_below($sample, $name, @callers)

True when $name is on the stack and one of @callers appears later (closer
to the root) than it.

=item sample_span($sample)

The span id a sample carries: pprof label span_id or the OTLP link's
span_id; '' when none.

=item sample_trace($sample)

Same for the trace id.

=item total(@samples)

Sum of the counts.

=item signal_count(@samples)

How many times the sampler fired: the number of timestamps of the OTLP
samples (one per SIGPROF; its overruns are added to the weight), or the
weight for samples without timestamps (pprof).

=item stacks_summary(\@samples, $n, names => {span id => text}, depth => 14)

The $n heaviest distinct (span, stack) combinations as text, one per line,
with their weight/signals, span id (with its text from names) and name and
the stack (leaf first, " <- ", the first depth frames), for diag().

=item multipart_parts($body, $boundary)

The parts of a multipart/form-data body: list of {headers => {lc name =>
value}, name, filename (from Content-Disposition), content (bytes)}; a part
{error => text} ends the list when the body is malformed.

=item go_pprof_raw($file)

Runs C<go tool pprof -raw $file> when C<go> is on PATH; returns
($exit, $output), or the empty list when go is not available.

=back

=cut

use strict;
use warnings;
use Exporter 'import';
use File::Path qw(remove_tree);
use File::Temp qw(tempdir);
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use Time::HiRes ();
use SpanProf::Test ();

our @EXPORT = qw(
    decode_pprof pprof_samples pprof_meta
    decode_otlp_profiles otlp_samples collect_otlp_samples profile_requests
    wait_otlp_covering read_pprof_file
    pprof_files has_frame frame_below sample_span sample_trace total signal_count
    stacks_summary go_pprof_raw multipart_parts
);

my $ROOT = SpanProf::Test::repo_root();

sub _protoc_decode {
    my ($type, $proto, $bytes, $what) = @_;
    my $dir = tempdir('spanprof-prof-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    SpanProf::Test::_spew("$dir/body", $bytes);
    my ($rc, $out, $err) = SpanProf::Test::_run(['protoc', "--decode=$type",
        '-I', "$ROOT/proto", "$ROOT/proto/$proto"], stdin => "$dir/body");
    remove_tree($dir);
    if ($rc != 0) {
        my $hex = unpack('H*', substr($bytes, 0, 48));
        die "$what: protoc failed (exit $rc): $err (" . length($bytes)
            . " bytes, starts $hex)\n";
    }
    return SpanProf::Test::parse_text_format($out);
}

sub _one {
    my ($m, $f) = @_;
    return undef unless $m && ref $m eq 'HASH' && $m->{$f};
    return $m->{$f}[-1];
}

sub _n { my $v = shift; return defined $v ? 0 + $v : 0 }

sub _hex { my $b = shift; return defined $b ? unpack('H*', $b) : '' }

# --- pprof ---------------------------------------------------------------------

sub decode_pprof {
    my ($bytes) = @_;
    if (substr($bytes, 0, 2) eq "\x1f\x8b") {
        my $plain;
        gunzip(\$bytes => \$plain) or die "decode_pprof: gunzip failed: $GunzipError\n";
        $bytes = $plain;
    }
    return _protoc_decode('perftools.profiles.Profile', 'pprof/profile.proto',
        $bytes, 'decode_pprof');
}

sub _pprof_tables {
    my ($p) = @_;
    my @str = @{ $p->{string_table} || [] };
    my $s = sub { my $i = _n(shift); return $str[$i] // "<bad string index $i>" };
    my %fn  = map { _n(_one($_, 'id')) => $_ } @{ $p->{function} || [] };
    my %loc = map { _n(_one($_, 'id')) => $_ } @{ $p->{location} || [] };
    return ($s, \%fn, \%loc);
}

sub pprof_samples {
    my ($p) = @_;
    my ($s, $fn, $loc) = _pprof_tables($p);
    my @out;
    for my $smp (@{ $p->{sample} || [] }) {
        my (@stack, @addrs);
        for my $lid (@{ $smp->{location_id} || [] }) {
            my $l = $loc->{ _n($lid) };
            unless ($l) { push @stack, "<bad location id $lid>"; push @addrs, 0; next }
            my $addr = _n(_one($l, 'address'));
            push @addrs, $addr;
            my @lines = @{ $l->{line} || [] };
            unless (@lines) { push @stack, sprintf('?0x%x', $addr); next }
            for my $ln (@lines) {
                my $fid = _n(_one($ln, 'function_id'));
                my $f = $fn->{$fid};
                push @stack, $f ? $s->(_one($f, 'name')) : "<bad function id $fid>";
            }
        }
        my %labels;
        for my $lb (@{ $smp->{label} || [] }) {
            my $k = $s->(_one($lb, 'key'));
            $labels{$k} = defined _one($lb, 'str') ? $s->(_one($lb, 'str')) : _n(_one($lb, 'num'));
        }
        my @v = map { _n($_) } @{ $smp->{value} || [] };
        push @out, { count => $v[0] // 0, cpu_ns => $v[1] // 0, values => \@v,
            labels => \%labels, stack => \@stack, addrs => \@addrs };
    }
    return @out;
}

sub pprof_meta {
    my ($p) = @_;
    my ($s) = _pprof_tables($p);
    my $vt = sub { my $t = shift or return ''; $s->(_one($t, 'type')) . '/' . $s->(_one($t, 'unit')) };
    return {
        sample_types   => [ map { $vt->($_) } @{ $p->{sample_type} || [] } ],
        period_type    => $vt->(_one($p, 'period_type')),
        period         => _n(_one($p, 'period')),
        time_nanos     => _n(_one($p, 'time_nanos')),
        duration_nanos => _n(_one($p, 'duration_nanos')),
        functions      => [ map { $s->(_one($_, 'name')) } @{ $p->{function} || [] } ],
        mappings       => [ map { {
            filename => $s->(_one($_, 'filename')), build_id => $s->(_one($_, 'build_id')),
            start => _n(_one($_, 'memory_start')), limit => _n(_one($_, 'memory_limit')),
        } } @{ $p->{mapping} || [] } ],
    };
}

# --- OTLP profiles ---------------------------------------------------------------

sub decode_otlp_profiles {
    my ($body) = @_;
    return _protoc_decode(
        'opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest',
        'opentelemetry/proto/collector/profiles/v1development/profiles_service.proto',
        $body, 'decode_otlp_profiles');
}

sub otlp_samples {
    my ($req) = @_;
    my $d = _one($req, 'dictionary') || {};
    my @str   = @{ $d->{string_table} || [] };
    my @stk   = @{ $d->{stack_table} || [] };
    my @loc   = @{ $d->{location_table} || [] };
    my @fn    = @{ $d->{function_table} || [] };
    my @link  = @{ $d->{link_table} || [] };
    my @attr  = @{ $d->{attribute_table} || [] };
    my $s = sub { my $i = _n(shift); return $str[$i] // "<bad string index $i>" };
    my $vt = sub { my $t = shift or return ''; $s->(_one($t, 'type_strindex')) . '/' . $s->(_one($t, 'unit_strindex')) };
    my @out;
    for my $rp (@{ $req->{resource_profiles} || [] }) {
        my ($res) = SpanProf::Test::_kv_list((_one($rp, 'resource') || {})->{attributes});
        for my $sp (@{ $rp->{scope_profiles} || [] }) {
            for my $prof (@{ $sp->{profiles} || [] }) {
                my %pm = (
                    sample_type => $vt->(_one($prof, 'sample_type')),
                    period_type => $vt->(_one($prof, 'period_type')),
                    period => _n(_one($prof, 'period')),
                    time_unix_nano => _n(_one($prof, 'time_unix_nano')),
                    duration_nano => _n(_one($prof, 'duration_nano')),
                    profile_id => _hex(_one($prof, 'profile_id')),
                    scope => (_one(_one($sp, 'scope') || {}, 'name') // ''),
                );
                for my $smp (@{ $prof->{samples} || [] }) {
                    my $si = _n(_one($smp, 'stack_index'));
                    my $st = $stk[$si];
                    my @stack;
                    if (!$st) { push @stack, "<bad stack index $si>" }
                    for my $li (@{ ($st || {})->{location_indices} || [] }) {
                        my $l = $loc[ _n($li) ];
                        unless ($l) { push @stack, "<bad location index $li>"; next }
                        my @lines = @{ $l->{lines} || [] };
                        unless (@lines) { push @stack, sprintf('?0x%x', _n(_one($l, 'address'))); next }
                        for my $ln (@lines) {
                            my $fi = _n(_one($ln, 'function_index'));
                            my $f = $fn[$fi];
                            push @stack, $f ? $s->(_one($f, 'name_strindex')) : "<bad function index $fi>";
                        }
                    }
                    my $lk;
                    my $li = _n(_one($smp, 'link_index'));
                    if ($li) {
                        my $l = $link[$li];
                        $lk = $l ? { trace_id => _hex(_one($l, 'trace_id')), span_id => _hex(_one($l, 'span_id')) }
                                 : { trace_id => "<bad link index $li>", span_id => "<bad link index $li>" };
                    }
                    my %attrs;
                    for my $ai (@{ $smp->{attribute_indices} || [] }) {
                        my $kv = $attr[ _n($ai) ] or next;
                        my ($v) = SpanProf::Test::_any_value(_one($kv, 'value'));
                        $attrs{ $s->(_one($kv, 'key_strindex')) } = $v;
                    }
                    my @v = map { _n($_) } @{ $smp->{values} || [] };
                    my $sum = 0;
                    $sum += $_ for @v;
                    # cpu/nanoseconds values: count in periods of the
                    # profile (exact at one rate); samples/count: the sum
                    my ($c, $cpu) = $pm{sample_type} eq 'cpu/nanoseconds'
                        ? ($pm{period} ? int($sum / $pm{period} + 0.5) : 0, $sum)
                        : ($sum, $sum * ($pm{period} || 0));
                    push @out, {
                        count => $c, cpu_ns => $cpu, values => \@v,
                        timestamps => [ map { _n($_) } @{ $smp->{timestamps_unix_nano} || [] } ],
                        link => $lk, link_index => $li, attrs => \%attrs, stack => \@stack,
                        resource => $res, profile => \%pm,
                    };
                }
            }
        }
    }
    return @out;
}

sub profile_requests {
    my ($recv) = @_;
    return grep { $_->{method} eq 'POST' && $_->{path} =~ m{/v1development/profiles$} } $recv->requests;
}

sub collect_otlp_samples {
    my ($recv) = @_;
    my @all;
    for my $req (profile_requests($recv)) {
        my $c = $recv->{prof_decoded}{ $req->{seq} } ||= do {
            my @s = otlp_samples(decode_otlp_profiles($req->{body}));
            $_->{seq} = $req->{seq} for @s;
            \@s;
        };
        push @all, @$c;
    }
    return @all;
}

sub wait_otlp_covering {
    my ($recv, $t, $timeout, %o) = @_;
    my $poke = $o{poke};
    my $last = 0;
    my $ok = SpanProf::Test::wait_until($timeout // 10, sub {
        my @s = collect_otlp_samples($recv);
        return 1 if grep {
            ($_->{profile}{time_unix_nano} + $_->{profile}{duration_nano}) / 1e9 >= $t
        } @s;
        if ($poke && Time::HiRes::time() - $last > 0.4) {
            $poke->();
            $last = Time::HiRes::time();
        }
        return 0;
    });
    return ($ok ? 1 : 0, collect_otlp_samples($recv));
}

sub read_pprof_file {
    my ($f) = @_;
    my $b = SpanProf::Test::_slurp($f);
    die "read_pprof_file: cannot read $f\n" unless defined $b;
    return decode_pprof($b);
}

sub pprof_files {
    my ($dir) = @_;
    opendir(my $dh, $dir) or return ();
    my @f = sort grep { /^cpu-\d+-\d+\.pb\.gz$/ } readdir $dh;
    closedir $dh;
    return map { "$dir/$_" } @f;
}

# --- helpers -------------------------------------------------------------------------

sub has_frame {
    my ($smp, $want) = @_;
    for my $f (@{ $smp->{stack} }) {
        return 1 if ref $want ? $f =~ $want : $f eq $want;
    }
    return 0;
}

sub frame_below {
    my ($smp, $name, @callers) = @_;
    my @st = @{ $smp->{stack} };
    for my $i (0 .. $#st) {
        next unless $st[$i] eq $name;
        for my $j ($i + 1 .. $#st) {
            return 1 if grep { $st[$j] eq $_ } @callers;
        }
    }
    return 0;
}

sub sample_span {
    my ($smp) = @_;
    return $smp->{link}{span_id} // '' if exists $smp->{link};
    return $smp->{labels}{span_id} // '';
}

sub sample_trace {
    my ($smp) = @_;
    return $smp->{link}{trace_id} // '' if exists $smp->{link};
    return $smp->{labels}{trace_id} // '';
}

sub total {
    my $t = 0;
    $t += $_->{count} for @_;
    return $t;
}

sub multipart_parts {
    my ($body, $boundary) = @_;
    my @parts;
    my $delim = "--$boundary";
    my $pos = index($body, $delim);
    return () if $pos < 0;
    while (1) {
        $pos += length $delim;
        last if substr($body, $pos, 2) eq '--';    # close delimiter
        return (@parts, { error => 'no CRLF after a delimiter' }) if substr($body, $pos, 2) ne "\r\n";
        $pos += 2;
        my $hend = index($body, "\r\n\r\n", $pos);
        return (@parts, { error => 'part without a header end' }) if $hend < 0;
        my %h;
        for my $line (split /\r\n/, substr($body, $pos, $hend - $pos)) {
            my ($k, $v) = $line =~ /^([^:]+):\s*(.*)$/ or next;
            $h{ lc $k } = $v;
        }
        my $next = index($body, "\r\n$delim", $hend + 4);
        return (@parts, { error => 'part without a closing delimiter' }) if $next < 0;
        my $cd = $h{'content-disposition'} // '';
        my ($name) = $cd =~ /\bname="([^"]*)"/;
        my ($file) = $cd =~ /\bfilename="([^"]*)"/;
        push @parts, { headers => \%h, name => $name, filename => $file,
            content => substr($body, $hend + 4, $next - $hend - 4) };
        $pos = $next + 2;
    }
    return @parts;
}

sub signal_count {
    my $n = 0;
    $n += @{ $_->{timestamps} || [] } ? scalar @{ $_->{timestamps} } : $_->{count} for @_;
    return $n;
}

sub stacks_summary {
    my ($samples, $n, %o) = @_;
    $n //= 15;
    my $names = $o{names} || {};    # span id => label for the dump
    my $depth = $o{depth} // 14;    # frames shown, from the leaf
    my (%w, %sig);
    for my $s (@$samples) {
        my $span = sample_span($s);
        my $label = $span eq '' ? '-' : $span;
        $label .= " ($names->{$span})" if $span ne '' && $names->{$span};
        my $sn = $s->{labels}{span_name} // $s->{attrs}{'span.name'};
        $label .= " \"$sn\"" if defined $sn;
        my @st = @{ $s->{stack} };
        my $more = @st > $depth ? ' <- ... (' . (@st - $depth) . ' more)' : '';
        splice(@st, $depth) if @st > $depth;
        my $k = $label . "\t" . join(' <- ', @st) . $more;
        $w{$k} += $s->{count};
        $sig{$k} += signal_count($s);
    }
    my @k = sort { $w{$b} <=> $w{$a} || $a cmp $b } keys %w;
    splice(@k, $n) if @k > $n;
    my @l = sprintf('%d samples, total weight %d (%d signals), %d distinct (span, stack); heaviest (weight/signals):',
        scalar @$samples, total(@$samples), signal_count(@$samples), scalar keys %w);
    for my $k (@k) {
        my ($label, $stack) = split /\t/, $k, 2;
        push @l, sprintf('  %5d/%-4d span=%s: %s', $w{$k}, $sig{$k}, $label, $stack);
    }
    return join("\n", @l) . "\n";
}

sub go_pprof_raw {
    my ($file) = @_;
    my $go;
    for my $d (split /:/, $ENV{PATH} // '') {
        if (-x "$d/go") { $go = "$d/go"; last }
    }
    return () unless $go;
    my $home = tempdir('spanprof-go-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    local $ENV{HOME} = $ENV{HOME} // $home;
    local $ENV{GOCACHE} = $ENV{GOCACHE} // "$home/cache";
    my ($rc, $out, $err) = SpanProf::Test::_run([$go, 'tool', 'pprof', '-raw', $file], timeout => 120);
    remove_tree($home);
    return ($rc, $out . $err);
}

1;
