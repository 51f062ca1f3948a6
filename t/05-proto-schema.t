#!/usr/bin/perl
# Our proto/ files must describe the same wire format as the official
# schemas: every message of ours has the same fields (names, numbers, types,
# labels) as upstream's. Compared through protoc's own descriptors. Needs
# ../shared/proto-upstream (the developers' reference copy); skipped
# without it, since nothing in the repository may depend on it.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use File::Temp qw(tempdir);
use SpanProf::Test;

my $root = repo_root();
my $up = "$root/../shared/proto-upstream";
plan skip_all => "no $up (reference schemas)" unless -d $up;
my $desc = '/usr/include/google/protobuf/descriptor.proto';
plan skip_all => "no $desc" unless -f $desc;

my @files = (
    'opentelemetry/proto/collector/trace/v1/trace_service.proto',
    'opentelemetry/proto/collector/profiles/v1development/profiles_service.proto',
    'opentelemetry/proto/processcontext/v1development/process_context.proto',
    'pprof/profile.proto',
);

my $tmp = tempdir(CLEANUP => 1);

# message full name => { field name => "number type label type_name" }
sub fields_of {
    my ($inc, $file, $tag) = @_;
    my $set = "$tmp/$tag.pb";
    system('protoc', "-I$inc", '--include_imports', "--descriptor_set_out=$set", $file) == 0
        or die "protoc failed on $inc/$file";
    my $text = `protoc --decode=google.protobuf.FileDescriptorSet -I/usr/include $desc < $set`;
    die "decode failed" if $?;
    my $tree = parse_text_format($text);
    my %out;
    for my $f (@{ $tree->{file} || [] }) {
        my $pkg = $f->{package}[0] // '';
        my @todo = map { ["$pkg", $_] } @{ $f->{message_type} || [] };
        while (my $t = shift @todo) {
            my ($prefix, $m) = @$t;
            my $name = "$prefix." . $m->{name}[0];
            for my $fld (@{ $m->{field} || [] }) {
                $out{$name}{ $fld->{name}[0] } = join ' ',
                    map { $fld->{$_}[0] // '' } qw(number type label type_name oneof_index);
            }
            $out{$name} //= {};
            push @todo, map { [$name, $_] } @{ $m->{nested_type} || [] };
        }
    }
    return \%out;
}

for my $file (@files) {
    my $ours = fields_of("$root/proto", $file, 'ours');
    my $theirs = fields_of($up, $file, 'theirs');
    for my $msg (sort keys %$ours) {
        ok exists $theirs->{$msg}, "$msg exists upstream" or next;
        is_deeply $ours->{$msg}, $theirs->{$msg}, "$msg: same fields";
    }
}

done_testing();
