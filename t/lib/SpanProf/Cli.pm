package SpanProf::Cli;

=head1 NAME

SpanProf::Cli - helpers for the spanprof CLI tests (t/8*-cli*.t)

=head1 SYNOPSIS

    use SpanProf::Cli;
    need_cli();
    my $pb = pprof_encode(profile_text(
        time => 1795316400e9, duration => 10e9, period => 1e6,
        functions => [qw(main handler hot)],
        locations => [[1], [2], [3]],           # function ids per location
        samples   => [{ stack => [3, 2, 1], count => 5,
                        labels => { trace_id => $t, span_id => $s } }],
    ));
    write_file("$dir/cpu-1795316400000-1.pb.gz", gzip_bytes($pb));
    my $r = run_cli('folded', $dir);          # {out, err, exit, signal}

=head1 EXPORTS

=over

=item cli_bin(), repo_root()

=item need_cli()

skip_all when build/cli/spanprof is missing (BAIL_OUT under
SPANPROF_REQUIRE_MODULE=1).

=item run_cli(@args), run_cmd(\%env, @argv)

Runs the command with stdin from /dev/null; returns {out, err, exit,
signal}.

=item profile_text(%p)

protoc text format of a perftools.profiles.Profile: string table built
from the names; sample types samples/count and cpu/nanoseconds (a sample's
C<count> and C<count> x C<period>), or C<types> ([[type, unit], ...]) with
each sample's C<values> and C<period_type> ([type, unit]); C<id_offset> shifts function and location ids (as another
writer would number them); a location is an array of function ids (more
than one: inlined, callee first) or a hash {address, lines}.

=item pprof_encode($text), pprof_decode($bytes)

protoc --encode / --decode with the repository's proto/pprof/profile.proto.

=item gzip_bytes, gunzip_bytes, read_file, write_file

=item xml_wellformed($file)

(1, '') when xmllint accepts the file, (0, $why) when it does not, undef
when xmllint is not installed.

=item svg_frames($svg_text)

The frames of a spanprof SVG: list of {name, info, x, y, width}.

=item png_info($file)

Decodes an 8-bit RGB/RGBA PNG (IDAT inflated with Compress::Zlib, scanline
filters undone): {width, height, colours (distinct), non_bg (fraction of
pixels that differ from the most common colour)}.

=item free_port()

=back

=cut

use strict;
use warnings;

use Cwd qw(abs_path);
use Exporter 'import';
use File::Basename qw(dirname);
use File::Temp qw(tempfile);
use IO::Compress::Gzip qw(gzip $GzipError);
use IO::Socket::INET;
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use Compress::Zlib ();
use POSIX ();

our @EXPORT = qw(
    repo_root cli_bin need_cli run_cli run_cmd
    profile_text pprof_encode pprof_decode
    gzip_bytes gunzip_bytes read_file write_file
    xml_wellformed svg_frames png_info free_port
);

my $ROOT = abs_path(dirname(__FILE__) . '/../../..');

sub repo_root { $ROOT }
sub cli_bin   { $ENV{SPANPROF_CLI} || "$ROOT/build/cli/spanprof" }

sub need_cli {
    my $b = cli_bin();
    return 1 if -x $b;
    require Test::Builder;
    my $msg = "spanprof CLI not built: $b (run `make cli`)";
    Test::Builder->new->BAIL_OUT($msg) if $ENV{SPANPROF_REQUIRE_MODULE};
    Test::Builder->new->skip_all($msg);
}

sub read_file {
    my ($path) = @_;
    open my $fh, '<:raw', $path or die "read $path: $!";
    local $/;
    my $d = <$fh>;
    return defined $d ? $d : '';
}

sub write_file {
    my ($path, $data) = @_;
    open my $fh, '>:raw', $path or die "write $path: $!";
    print {$fh} $data;
    close $fh or die "write $path: $!";
}

sub run_cmd {
    my ($env, @argv) = @_;
    my (undef, $out) = tempfile(UNLINK => 1);
    my (undef, $err) = tempfile(UNLINK => 1);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $ENV{$_} = $env->{$_} for keys %{ $env || {} };
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $out or POSIX::_exit(126);
        open STDERR, '>', $err or POSIX::_exit(126);
        exec @argv or POSIX::_exit(127);
    }
    waitpid $pid, 0;
    my $st = $?;
    my %r = (out => read_file($out), err => read_file($err),
             exit => $st >> 8, signal => $st & 127);
    unlink $out, $err;
    return \%r;
}

sub run_cli { run_cmd({}, cli_bin(), @_) }

sub _q {
    my ($s) = @_;
    $s =~ s/(["\\])/\\$1/g;
    return qq("$s");
}

sub profile_text {
    my (%p) = @_;
    my (@strs, %idx);
    my $s = sub {
        my ($v) = @_;
        return $idx{$v} //= do { push @strs, $v; $#strs };
    };
    $s->('');
    my $off = $p{id_offset} || 0;
    my $t = '';
    my @types = @{ $p{types} || [[qw(samples count)], [qw(cpu nanoseconds)]] };
    $t .= "sample_type { type: " . $s->($_->[0]) . " unit: " . $s->($_->[1]) . " }\n" for @types;
    my $period = $p{period} // 1_000_000;
    for my $smp (@{ $p{samples} || [] }) {
        $t .= "sample {\n";
        $t .= "  location_id: " . ($_ + $off) . "\n" for @{ $smp->{stack} };
        if ($smp->{values}) {
            $t .= "  value: $_\n" for @{ $smp->{values} };
        } else {
            $t .= "  value: $smp->{count}\n";
            $t .= "  value: " . ($smp->{count} * $period) . "\n";
        }
        my $l = $smp->{labels} || {};
        for my $k (sort keys %$l) {
            $t .= "  label { key: " . $s->($k) . " str: " . $s->($l->{$k}) . " }\n";
        }
        $t .= "}\n";
    }
    $t .= "mapping { id: " . (1 + $off) . " memory_start: 4096 memory_limit: 1048576"
        . " filename: " . $s->($p{binary} || '/usr/sbin/nginx') . " has_functions: true }\n";
    my $i = 0;
    for my $loc (@{ $p{locations} || [] }) {
        $i++;
        my ($addr, $lines) = ref $loc eq 'HASH'
            ? ($loc->{address}, $loc->{lines} || [])
            : (4096 + 16 * $i, $loc);
        $t .= "location { id: " . ($i + $off) . " mapping_id: " . (1 + $off)
            . " address: $addr";
        $t .= " line { function_id: " . ($_ + $off) . " }" for @$lines;
        $t .= " }\n";
    }
    $i = 0;
    for my $f (@{ $p{functions} || [] }) {
        $i++;
        $t .= "function { id: " . ($i + $off) . " name: " . $s->($f)
            . " system_name: " . $s->($f) . " filename: "
            . $s->($p{binary} || '/usr/sbin/nginx') . " }\n";
    }
    $t .= "time_nanos: " . ($p{time} // 0) . "\n";
    $t .= "duration_nanos: " . ($p{duration} // 0) . "\n";
    my $pt = $p{period_type} || [qw(cpu nanoseconds)];
    $t .= "period_type { type: " . $s->($pt->[0]) . " unit: " . $s->($pt->[1]) . " }\n";
    $t .= "period: $period\n";
    $t .= "string_table: " . _q($_) . "\n" for @strs;
    return $t;
}

sub _protoc {
    my ($mode, $in) = @_;
    my (undef, $i) = tempfile(UNLINK => 1);
    my (undef, $o) = tempfile(UNLINK => 1);
    my (undef, $e) = tempfile(UNLINK => 1);
    write_file($i, $in);
    # protoc complains (and goes on) about strings that are not UTF-8, which
    # some tests use on purpose: its stderr only matters when it fails.
    my $cmd = "protoc --$mode=perftools.profiles.Profile -I '$ROOT/proto'"
            . " '$ROOT/proto/pprof/profile.proto' < '$i' > '$o' 2> '$e'";
    system($cmd) == 0 or die "protoc --$mode failed ($?): " . read_file($e);
    my $r = read_file($o);
    unlink $i, $o, $e;
    return $r;
}

sub pprof_encode { _protoc('encode', $_[0]) }
sub pprof_decode { _protoc('decode', $_[0]) }

sub gzip_bytes {
    my ($d) = @_;
    my $z;
    gzip(\$d => \$z) or die "gzip: $GzipError";
    return $z;
}

sub gunzip_bytes {
    my ($z) = @_;
    my $d;
    gunzip(\$z => \$d) or die "gunzip: $GunzipError";
    return $d;
}

sub xml_wellformed {
    my ($file) = @_;
    my $xmllint = grep { -x "$_/xmllint" } split /:/, ($ENV{PATH} || '');
    return undef unless $xmllint;
    my $r = run_cmd({}, 'xmllint', '--noout', $file);
    return ($r->{exit} == 0 && $r->{err} eq '' ? 1 : 0, $r->{err});
}

sub _unescape {
    my ($s) = @_;
    $s =~ s/&lt;/</g;
    $s =~ s/&gt;/>/g;
    $s =~ s/&quot;/"/g;
    $s =~ s/&apos;/'/g;
    $s =~ s/&amp;/&/g;
    return $s;
}

sub svg_frames {
    my ($svg) = @_;
    my @f;
    while ($svg =~ m{<g class="f"><title>([^<]*)</title><rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"}g) {
        my ($raw, $x, $y, $w) = ($1, $2, $3, $4);
        my $info = _unescape($raw);
        (my $name = $info) =~ s/ \([^()]*\)$//;
        push @f, { info => $info, name => $name, x => $x, y => $y, width => $w };
    }
    return @f;
}

sub png_info {
    my ($file) = @_;
    my $d = read_file($file);
    die "$file: not a PNG" unless substr($d, 0, 8) eq "\x89PNG\r\n\x1a\n";
    my ($pos, $idat, %h) = (8, '');
    while ($pos + 8 <= length $d) {
        my ($len, $type) = unpack 'N a4', substr($d, $pos, 8);
        my $body = substr($d, $pos + 8, $len);
        $pos += 12 + $len;
        if ($type eq 'IHDR') {
            @h{qw(width height depth ctype interlace)} =
                unpack 'N N C C x x C', $body;
        } elsif ($type eq 'IDAT') {
            $idat .= $body;
        } elsif ($type eq 'IEND') {
            last;
        }
    }
    die "$file: only 8-bit RGB/RGBA without interlacing is read"
        unless $h{depth} == 8 && ($h{ctype} == 2 || $h{ctype} == 6)
            && !$h{interlace};
    my $bpp = $h{ctype} == 6 ? 4 : 3;
    my $raw = Compress::Zlib::uncompress($idat);
    die "$file: bad IDAT" unless defined $raw;
    my $stride = $h{width} * $bpp;
    my @prev = (0) x $stride;
    my %colours;
    for my $y (0 .. $h{height} - 1) {
        my $off = $y * ($stride + 1);
        my $ft = ord substr($raw, $off, 1);
        my @cur = unpack 'C*', substr($raw, $off + 1, $stride);
        for my $i (0 .. $stride - 1) {
            my $a = $i >= $bpp ? $cur[$i - $bpp] : 0;
            my $b = $prev[$i];
            my $c = $i >= $bpp ? $prev[$i - $bpp] : 0;
            if ($ft == 1) {
                $cur[$i] = ($cur[$i] + $a) & 255;
            } elsif ($ft == 2) {
                $cur[$i] = ($cur[$i] + $b) & 255;
            } elsif ($ft == 3) {
                $cur[$i] = ($cur[$i] + (($a + $b) >> 1)) & 255;
            } elsif ($ft == 4) {
                my $p = $a + $b - $c;
                my ($pa, $pb, $pc) = (abs($p - $a), abs($p - $b), abs($p - $c));
                my $pr = $pa <= $pb && $pa <= $pc ? $a : $pb <= $pc ? $b : $c;
                $cur[$i] = ($cur[$i] + $pr) & 255;
            }
        }
        for (my $i = 0; $i < $stride; $i += $bpp) {
            $colours{ ($cur[$i] << 16) | ($cur[$i + 1] << 8) | $cur[$i + 2] }++;
        }
        @prev = @cur;
    }
    my ($bg) = sort { $colours{$b} <=> $colours{$a} } keys %colours;
    my $total = $h{width} * $h{height};
    return {
        width => $h{width}, height => $h{height},
        colours => scalar(keys %colours),
        non_bg => $total ? ($total - $colours{$bg}) / $total : 0,
    };
}

my %PORTS_GIVEN;

sub free_port {
    for (1 .. 200) {
        my $s = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
            Listen => 1, ReuseAddr => 0,
        ) or next;
        my $p = $s->sockport;
        close $s;
        next if $PORTS_GIVEN{$p}++;
        return $p;
    }
    die "free_port: no free port found";
}

1;
