#!/usr/bin/perl
# The thread-local storage of the built modules, read from the ELF files:
#   - otel_thread_ctx_v1 is an exported TLS symbol, reached through TLSDESC
#     relocations (what OTEP 4947 asks of writers; external profilers find
#     it by name);
#   - the module's whole TLS block fits glibc's surplus static TLS for
#     dlopen()ed objects (rtld.optional_static_tls, 512 bytes by default).
#     Then glibc places the block in static TLS at load time and every
#     TLSDESC access resolves to _dl_tlsdesc_return (a load) instead of a
#     call into _dl_tlsdesc_dynamic (~35 instructions; Apache binds and
#     reads its labels about ten times per request). A large thread-local
#     (the span scratch once was 7.6 kB) silently loses that. (glibc does
#     not refund the budget on dlclose(): after about five loads into one
#     process, e.g. apache2's start and three graceful restarts, the block
#     is dynamic again; correct, only slower.)
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Apache;

my $STATIC_TLS_SURPLUS = 512;

chomp(my $arch = `uname -m`);
plan skip_all => "TLSDESC is checked on x86_64 only (this is $arch)" unless $arch eq 'x86_64';
plan skip_all => 'readelf missing' unless `readelf --version 2>/dev/null`;

my @modules = grep { -f $_ } (module_path(), apache_module_path());
if (!@modules) {
    BAIL_OUT('no module built') if $ENV{SPANPROF_REQUIRE_MODULE};
    plan skip_all => 'no module built';
}

for my $so (@modules) {
    (my $name = $so) =~ s{.*/}{};
    my @tls = grep { /^\s*TLS\s/ } split /\n/, `readelf -lW $so`;
    is scalar @tls, 1, "$name: one PT_TLS segment";
    my (undef, $memsz) = ($tls[0] // '') =~ /^\s*TLS\s+\S+\s+\S+\s+\S+\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)/;
    $memsz = defined $memsz ? hex $memsz : -1;
    ok $memsz > 0 && $memsz <= $STATIC_TLS_SURPLUS,
        "$name: TLS block of $memsz bytes fits the $STATIC_TLS_SURPLUS bytes of surplus static TLS"
        or diag `readelf -sW $so | grep ' TLS '`;

    my ($sym) = grep { /\sotel_thread_ctx_v1$/ } split /\n/, `readelf --dyn-syms -W $so`;
    like $sym // '', qr/\s8\s+TLS\s+GLOBAL\s+DEFAULT\s/, "$name: otel_thread_ctx_v1 is an exported 8-byte TLS symbol";

    my @relocs = grep { /\sotel_thread_ctx_v1\b/ } split /\n/, `readelf -rW $so`;
    ok @relocs > 0, "$name: otel_thread_ctx_v1 is relocated";
    is scalar(grep { !/R_X86_64_TLSDESC/ } @relocs), 0, "$name: only through TLSDESC"
        or diag join "\n", @relocs;
}

done_testing;
