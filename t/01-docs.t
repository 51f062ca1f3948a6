#!/usr/bin/perl
# The manual against the code, so that it cannot drift from it:
# - every nginx directive of the module's ngx_command_t tables (otel_* and
#   the otel_exporter { } sub-directives) has exactly one reference entry,
#   in docs/nginx.md ("### name" and a "Syntax:" line), with the contexts
#   of its command flags;
# - every Apache directive of the command_rec table (AP_INIT_*) has exactly
#   one in docs/apache.md, with a context matching its RSRC_CONF/ACCESS_CONF;
# - every counter and gauge of common/control/status_fields.h has exactly
#   one row in docs/api.md, with its Prometheus name and type;
# - every spanprof command and option (cli/main.c) and every spanprof serve
#   flag (cli/serve/serve_main.c) has exactly one entry in docs/cli.md;
# - no reference entry names something the code does not have;
# - every relative link of README.md and docs/*.md reaches a file, and its
#   #anchor a heading of that file;
# - README's Quick start holds its two commands, and README stays short.
# No server is started: this runs in well under a second.
use strict;
use warnings;
use FindBin;
use File::Basename qw(dirname);
use File::Spec;
use Test::More;

my $root = File::Spec->rel2abs("$FindBin::Bin/..");

sub slurp {
    my ($path) = @_;
    open my $fh, '<', "$root/$path" or die "$root/$path: $!";
    local $/;
    return scalar <$fh>;
}

sub glob_rel { map { s{^\Q$root\E/}{}r } sort glob("$root/$_[0]") }

my @pages = glob_rel('docs/*.md');
my %text = map { $_ => slurp($_) } 'README.md', @pages;

# Markdown without its fenced code blocks (a "### x" in a shell example is
# not a heading).
sub prose {
    my ($t) = @_;
    my ($in, @out) = (0);
    for my $l (split /\n/, $t, -1) {
        if ($l =~ /^\s*```/) { $in = !$in; push @out, ''; next }
        push @out, $in ? '' : $l;
    }
    return join "\n", @out;
}
my %prose = map { $_ => prose($text{$_}) } keys %text;

# Level-3 headings over every page: "### name" -> [pages]
my %h3;
for my $p (@pages) {
    push @{ $h3{$1} }, $p while $prose{$p} =~ /^### +(.+?)\s*$/mg;
}

# --- nginx ---------------------------------------------------------------

my %ngx;    # name -> contexts as the manual writes them
for my $file (glob_rel('ngx_module/*.c')) {
    my $src = slurp($file);
    while ($src =~ /ngx_command_t\s+\w+\[\]\s*=\s*\{(.*?)ngx_null_command/sg) {
        my $table = $1;
        while ($table =~ /\{\s*ngx_string\("([^"]+)"\)\s*,\s*([^,]+?)\s*,/sg) {
            my ($name, $flags) = ($1, $2);
            my @ctx;
            push @ctx, 'http' if $flags =~ /NGX_HTTP_MAIN_CONF/;
            push @ctx, 'server' if $flags =~ /NGX_HTTP_SRV_CONF/;
            push @ctx, 'if in server' if $flags =~ /NGX_HTTP_SIF_CONF/;
            push @ctx, 'location' if $flags =~ /NGX_HTTP_LOC_CONF/;
            push @ctx, 'if in location' if $flags =~ /NGX_HTTP_LIF_CONF/;
            push @ctx, 'limit_except' if $flags =~ /NGX_HTTP_LMT_CONF/;
            # not registered with nginx: read inside otel_exporter { }
            @ctx = ('otel_exporter') unless @ctx;
            $ngx{$name} = join ', ', @ctx;
        }
    }
}
cmp_ok scalar(keys %ngx), '>=', 20, 'nginx command tables parsed ('
    . scalar(keys %ngx) . ' directives)';

# "### name" then an indented block "Syntax:  name ...", "Context: ..."
sub reference_entries {
    my ($t) = @_;
    my %e;
    while ($t =~ /^### +(\S+)[^\n]*\n\n((?: {4}\S[^\n]*\n)+)/mg) {
        my ($name, $block) = ($1, $2);
        next unless $block =~ /^ {4}Syntax:/m;
        my ($ctx) = $block =~ /^ {4}Context: +(.*?)\s*$/m;
        my @syntax = $block =~ /^ {4}Syntax: +(\S+)/mg;
        push @{ $e{$name} }, { context => $ctx, syntax => \@syntax,
                               default => scalar($block =~ /^ {4}Default:/m) };
    }
    return \%e;
}

my $ngx_doc = reference_entries($prose{'docs/nginx.md'});
for my $name (sort keys %ngx) {
    my $e = $ngx_doc->{$name} || [];
    is scalar(@$e), 1, "nginx directive $name: one entry in docs/nginx.md"
        or next;
    is_deeply $e->[0]{syntax}, [$name], "  $name: its Syntax line";
    ok $e->[0]{default}, "  $name: a Default line";
    is $e->[0]{context}, $ngx{$name}, "  $name: Context as in its flags";
    is scalar(@{ $h3{$name} || [] }), 1,
        "  $name: the only '### $name' of the manual";
}
ok 0, "docs/nginx.md: $_ is a directive of the code"
    for grep { !exists $ngx{$_} } sort keys %$ngx_doc;

# --- Apache --------------------------------------------------------------

my %apache;    # name -> 'global' | 'dir'
{
    my $src = join "\n", map { slurp($_) } glob_rel('apache_module/*.c');
    while ($src =~ /AP_INIT_\w+\(\s*"(\w+)"\s*,\s*\w+\s*,\s*[^,]+?\s*,\s*([^,]+?)\s*,/sg) {
        my ($name, $where) = ($1, $2);
        $apache{$name} = $where =~ /ACCESS_CONF|SPANPROF_DIR|OR_/ ? 'dir'
                                                                   : 'global';
    }
}
cmp_ok scalar(keys %apache), '>=', 20, 'Apache command_rec parsed ('
    . scalar(keys %apache) . ' directives)';

my $apache_doc = reference_entries($prose{'docs/apache.md'});
for my $name (sort keys %apache) {
    my $e = $apache_doc->{$name} || [];
    is scalar(@$e), 1, "Apache directive $name: one entry in docs/apache.md"
        or next;
    is_deeply $e->[0]{syntax}, [$name], "  $name: its Syntax line";
    ok $e->[0]{default}, "  $name: a Default line";
    if ($apache{$name} eq 'dir') {
        like $e->[0]{context}, qr/virtual host.*directory/,
            "  $name: Context includes virtual host and directory";
    } else {
        is $e->[0]{context}, 'server config', "  $name: Context server config";
    }
    is scalar(@{ $h3{$name} || [] }), 1,
        "  $name: the only '### $name' of the manual";
}
ok 0, "docs/apache.md: $_ is a directive of the code"
    for grep { !exists $apache{$_} && $_ ne 'SetHandler' } sort keys %$apache_doc;

# --- counters ------------------------------------------------------------

my @fields;
{
    my $src = slurp('common/control/status_fields.h');
    push @fields, [$1, lc $2] while $src =~ /X\((\w+),\s*(GAUGE|COUNTER)\b/g;
}
cmp_ok scalar(@fields), '>=', 20, 'status_fields.h parsed ('
    . scalar(@fields) . ' values)';
my %field = map { $_->[0] => 1 } @fields;
for my $f (@fields) {
    my ($name, $kind) = @$f;
    my $prom = "spanprof_$name" . ($kind eq 'counter' ? '_total' : '');
    my @rows = $prose{'docs/api.md'} =~ /^\| *`\Q$name\E` *\|([^\n]*)$/mg;
    is scalar(@rows), 1, "counter $name: one row in docs/api.md" or next;
    like $rows[0], qr/^ *`\Q$prom\E` *\| *$kind *\| *\S/,
        "  $name: Prometheus name $prom, type $kind and a meaning";
    my $elsewhere = grep { $_ ne 'docs/api.md'
                           && $prose{$_} =~ /^\| *`\Q$name\E` *\| *`spanprof_/m }
                    @pages;
    is $elsewhere, 0, "  $name: not defined on another page";
}
{
    my @rows = $prose{'docs/api.md'} =~ /^\| *`(\w+)` *\| *`spanprof_\w+` *\|/mg;
    ok $field{$_}, "docs/api.md: $_ is in status_fields.h" for @rows;
}

# --- spanprof and spanprof serve -------------------------------------------

my (@commands, @options);
{
    my $src = slurp('cli/main.c');
    push @commands, $1 while $src =~ /\{\s*"(\w+)",\s*cmd_\w+/g;
    push @commands, $1 while $src =~ /strcmp\(argv\[1\],\s*"(\w+)"\)/g;
    push @options, $1 while $src =~ /\{\s*"(-[\w-]+)",\s*O_\w+,\s*[01]\s*\}/g;
    push @options, $1 while $src =~ /strcmp\(argv\[1\],\s*"(--[\w-]+)"\)/g;
    push @options, '-h', '--help' if $src =~ /"-h"/ && $src =~ /"--help"/;
    my $serve = slurp('cli/serve/serve_main.c');
    push @options, $1 while $serve =~ /IS\("(--[\w-]+)"\)/g;
}
my %seen;
@options = grep { !$seen{$_}++ } @options;

# The commands' own --help must know them too (its text is what
# "spanprof help" prints).
{
    my $help = '';
    for my $file ('cli/main.c', 'cli/serve/serve_main.c') {
        my $src = slurp($file);
        $help .= $1 while $src =~ /^"((?:[^"\\]|\\.)*)";?$/mg;
    }
    $help =~ s/\\n/\n/g;
    for my $o (@options) {
        ok $help =~ /(?<![\w-])\Q$o\E(?![\w-])/, "option $o: in spanprof's --help text";
    }
    for my $c (@commands) {
        ok $help =~ /^  \Q$c\E\s/m, "command $c: in spanprof's --help command list";
    }
}
cmp_ok scalar(@commands), '>=', 6, "spanprof commands parsed (@commands)";
cmp_ok scalar(@options), '>=', 20, 'spanprof options parsed ('
    . scalar(@options) . ')';

my $cli = $prose{'docs/cli.md'};
my %cmd_heading;
$cmd_heading{$1}++ while $cli =~ /^#{2,3} +`?spanprof (\w+)`?\s*$/mg;
for my $c (@commands) {
    is $cmd_heading{$c} // 0, 1, "command spanprof $c: one heading in docs/cli.md";
}
for my $c (sort keys %cmd_heading) {
    ok +(grep { $_ eq $c } @commands) ? 1 : 0,
        "docs/cli.md: spanprof $c is a command of cli/main.c";
}

# An option's entry: a table row whose first cell names it in backticks.
my %opt_rows;
while ($cli =~ /^\|([^|\n]*)\|/mg) {
    my $cell = $1;
    $opt_rows{$1}++ while $cell =~ /`(-{1,2}[a-z][\w-]*)/g;
}
for my $o (@options) {
    is $opt_rows{$o} // 0, 1, "option $o: one table row in docs/cli.md";
}
my %opt = map { $_ => 1 } @options;
ok $opt{$_} ? 1 : 0, "docs/cli.md: option $_ exists in the code"
    for sort keys %opt_rows;

# --- links ---------------------------------------------------------------

# GitHub's heading anchors: lowercase, punctuation other than - and _
# removed, spaces to -, repeats suffixed -1, -2 ...
my %anchors;
sub anchors_of {
    my ($page) = @_;
    return $anchors{$page} if $anchors{$page};
    my (%a, %n);
    if (exists $prose{$page}) {
        while ($prose{$page} =~ /^#{1,6} +(.+?)\s*#*\s*$/mg) {
            my $s = lc $1;
            $s =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;
            $s =~ s/[^\w\- ]//g;
            $s =~ s/ /-/g;
            my $k = $n{$s}++ ? "$s-" . ($n{$s} - 1) : $s;
            $a{$k} = 1;
        }
    }
    return $anchors{$page} = \%a;
}

for my $page ('README.md', @pages) {
    my $t = $prose{$page};
    $t =~ s/`[^`\n]*`//g;    # [x](y) inside code is not a link
    while ($t =~ /\[[^\]]*\]\(([^)\s]+)\)/g) {
        my $link = $1;
        next if $link =~ m{^(?:https?|mailto):};
        my ($path, $anchor) = split /#/, $link, 2;
        my $target = $path eq '' ? $page
                   : File::Spec->abs2rel(File::Spec->rel2abs($path, "$root/" . dirname($page)), $root);
        $target =~ s{/$}{};
        ok -e "$root/$target", "$page: link $link reaches a file";
        next unless defined $anchor && -e "$root/$target";
        ok anchors_of($target)->{$anchor},
            "$page: link $link reaches a heading of $target";
    }
}

# --- README ----------------------------------------------------------------

{
    my $readme = $text{'README.md'};
    like $readme, qr/^## Quick start\n\n```bash\nbash demo\/run\.sh\nmake test\n```\n/m,
        "README's Quick start: the demo and make test, the two commands";
    my $lines = () = $readme =~ /\n/g;
    cmp_ok $lines, '<=', 200, "README.md stays short ($lines lines)";
    ok -e "$root/docs/index.md", 'docs/index.md, the table of contents';
    for my $p (@pages) {
        next if $p eq 'docs/index.md';
        my $name = $p =~ s{^docs/}{}r;
        like $prose{'docs/index.md'}, qr/\]\(\Q$name\E[#)]/,
            "docs/index.md links to $name";
    }
}

done_testing;
