#!/usr/bin/perl
# spanprof serve's retention: by age (--retention) and by size (--max-size),
# oldest first, counted in /api/stats; checked within a few seconds (the
# retention pass runs every second).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SpanProf::Test;
use SpanProf::Serve;

plan skip_all => 'spanprof serve not built' unless -x serve_bin();

sub otlp_json {
    my ($service, @spans) = @_;     # [trace hex, span hex, start ns, name]
    my $list = join ',', map {
        sprintf '{"traceId":"%s","spanId":"%s","name":"%s","kind":2,'
            . '"startTimeUnixNano":"%s","endTimeUnixNano":"%s",'
            . '"attributes":[{"key":"http.route","value":{"stringValue":"/r"}},'
            . '{"key":"filler","value":{"stringValue":"%s"}}]}',
            $_->[0], $_->[1], $_->[3], $_->[2], $_->[2] + 1000000, 'x' x 300
    } @spans;
    return qq({"resourceSpans":[{"resource":{"attributes":[{"key":"service.name",)
         . qq("value":{"stringValue":"$service"}}]},"scopeSpans":[{"spans":[$list]}]}]});
}

my $now = int(Time::HiRes::time() * 1e9);
use Time::HiRes ();

subtest 'by age' => sub {
    my $sv = start_serve(extra => [ '--retention', '1h' ]);
    my $old = sprintf '%032x', 1;
    my $new = sprintf '%032x', 2;
    my $r = $sv->post_otlp('/v1/traces', otlp_json('age',
        [ $old, '0000000000000001', $now - 2 * 3600e9, 'old' ],
        [ $new, '0000000000000002', $now, 'new' ]),
        'Content-Type' => 'application/json');
    is $r->{status}, 200, 'posted';
    ok wait_until(5, sub { $sv->get("/api/traces/$old")->{status} == 404 }),
        'the span of two hours ago is deleted';
    is $sv->get("/api/traces/$new")->{status}, 200, 'the new one stays';
    is $sv->api('/api/stats')->{spans_deleted}, 1, 'counted';
};

subtest 'by size, oldest first' => sub {
    my $sv = start_serve(extra => [ '--max-size', '256k', '--retention', '0' ]);
    my $base = $now - 3600e9;
    for my $b (0 .. 9) {
        my @spans = map {
            my $i = $b * 200 + $_;
            [ sprintf('%032x', $i + 1), sprintf('%016x', $i + 1), $base + $i * 1e6, "s$i" ]
        } 0 .. 199;
        my $r = $sv->post_otlp('/v1/traces', otlp_json('size', @spans),
            'Content-Type' => 'application/json');
        is $r->{status}, 200, "batch $b posted" unless $r->{status} == 200;
    }
    ok wait_until(8, sub { $sv->api('/api/stats')->{database_bytes} <= 256 * 1024 }),
        'the database shrinks under 256 KiB';
    my $st = $sv->api('/api/stats');
    cmp_ok $st->{spans_deleted}, '>', 0, "$st->{spans_deleted} spans deleted, counted";
    cmp_ok $st->{spans_deleted}, '<', 2000, 'not all of them';
    is $sv->get('/api/traces/' . sprintf('%032x', 2000))->{status}, 200, 'the newest stays';
    is $sv->get('/api/traces/' . sprintf('%032x', 1))->{status}, 404, 'the oldest went first';
};

done_testing;
