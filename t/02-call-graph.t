#!/usr/bin/perl
# The glue and the core are trees, not circles (DESIGN.md, issue 29): read
# from the built objects which file uses a symbol another file defines
# (nm: functions and data alike, header inlines included, as they are
# compiled into their callers), then check that
#   - no files of one part call each other round a circle (common/, the
#     nginx glue, the Apache glue);
#   - in each glue, nothing calls up into the module file: it registers the
#     directives and hooks and calls down; the module structure itself is
#     the one thing every file may name (ngx_http_get_module_ctx and
#     ap_get_module_config need it), as in nginx's own multi-file modules.
use strict;
use warnings;
use File::Basename qw(basename dirname);
use Cwd qw(abs_path);
use Test::More;

my $ROOT  = abs_path(dirname(__FILE__) . '/..');
my $BUILD = $ENV{BUILD} || "$ROOT/build";

my %parts = (
    'common/'        => [glob("$BUILD/unit/obj/common/*/*.o")],
    'nginx glue'     => [glob("$BUILD/nginx/addon/ngx_module/*.o")],
    'Apache glue'    => [glob("$BUILD/apache/obj/apache_module/*.o")],
);
my %top = (
    'nginx glue'  => ['ngx_http_spanprof_module.o', 'ngx_http_spanprof_module'],
    'Apache glue' => ['mod_spanprof.o', 'spanprof_module'],
);

sub name_of {
    my ($part, $o) = @_;
    return $part eq 'common/' ? ($o =~ m{/obj/(common/.*)\.o$})[0] : basename($o);
}

for my $part (sort keys %parts) {
    my @objs = @{$parts{$part}};
    if (!@objs) {
        fail("$part: objects built (make all)");
        next;
    }
    my (%defined_by, %uses);
    for my $o (@objs) {
        my $n = name_of($part, $o);
        for (`nm -g --defined-only '$o'`) {
            my ($sym) = /\s[A-Z]\s+(\S+)$/ or next;
            $defined_by{$sym} = $n;
        }
        $uses{$n} = [map { /\sU\s+(\S+)$/ ? $1 : () } `nm -u '$o'`];
    }
    my (%edge, %why);
    for my $n (keys %uses) {
        for my $sym (@{$uses{$n}}) {
            my $d = $defined_by{$sym};
            next if !defined $d || $d eq $n;
            next if $top{$part} && $sym eq $top{$part}[1];   # the module struct
            $edge{$n}{$d} = 1;
            push @{$why{"$n -> $d"}}, $sym;
        }
    }

    # Circles: Tarjan's strongly connected components.
    my ($index, @stack, %on, %idx, %low, @circles) = (0);
    my $visit;
    $visit = sub {
        my ($v) = @_;
        $idx{$v} = $low{$v} = $index++;
        push @stack, $v;
        $on{$v} = 1;
        for my $w (sort keys %{$edge{$v} || {}}) {
            if (!exists $idx{$w}) {
                $visit->($w);
                $low{$v} = $low{$w} if $low{$w} < $low{$v};
            } elsif ($on{$w}) {
                $low{$v} = $idx{$w} if $idx{$w} < $low{$v};
            }
        }
        if ($low{$v} == $idx{$v}) {
            my @c;
            while (1) {
                my $w = pop @stack;
                delete $on{$w};
                push @c, $w;
                last if $w eq $v;
            }
            push @circles, [sort @c] if @c > 1;
        }
    };
    $visit->($_) for sort keys %uses;

    my @lines;
    for my $c (@circles) {
        my %in = map { $_ => 1 } @$c;
        push @lines, join(', ', @$c) . ":";
        for my $a (@$c) {
            for my $b (sort keys %{$edge{$a} || {}}) {
                push @lines, "  $a -> $b (" . join(' ', @{$why{"$a -> $b"}}) . ")"
                    if $in{$b};
            }
        }
    }
    ok(!@circles, "$part: no files call each other round a circle ("
       . scalar(@objs) . " files)") or diag(join("\n", @lines));

    next if !$top{$part};
    my $mod = $top{$part}[0];
    my @up = grep { $edge{$_}{$mod} } sort keys %edge;
    ok(!@up, "$part: nothing calls up into $mod")
        or diag(join("\n", map { "$_ -> $mod (" . join(' ', @{$why{"$_ -> $mod"}}) . ")" } @up));
}

done_testing();
