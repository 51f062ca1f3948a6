#!/usr/bin/python3
# t/grpc_receiver.py - an OTLP/gRPC collector for spanprof's tests: a real
# gRPC server (Debian's python3-grpcio; generic handlers passing the
# messages through as bytes, so no generated code), never a hand-made
# HTTP/2 parser.
#
#   /usr/bin/python3 t/grpc_receiver.py --port P --dir D
#       [--cert C --key K] [--script LIST] [--default ENTRY]
#       [--profiles-script LIST] [--profiles-default ENTRY]
#       [--max-idle-ms MS]
#   /usr/bin/python3 t/grpc_receiver.py --port P --count FILE [--full-every N] [...]
#
# Serves opentelemetry.proto.collector.trace.v1.TraceService/Export and
# opentelemetry.proto.collector.profiles.v1development.ProfilesService/
# Export on 127.0.0.1:P: h2c (prior knowledge), or TLS (ALPN h2) with the
# server certificate C (PEM, with its chain) and key K. Prints "listening
# on P" once it accepts calls. --max-idle-ms: the server closes a
# connection (GOAWAY) that had no call for MS ms (grpc's
# grpc.max_connection_idle_ms), as collectors configured so do.
#
# Every call is stored, before it is answered, as D/<%08d seq>.req, a JSON
# object in the format t/receiver.pl uses (so SpanProf::Test's receiver
# methods read it):
#   { seq, time, conn, method: "POST", path: "/<service>/Export",
#     version: "HTTP/2", headers: {metadata name: value},
#     body_b64: the request message (decompressed), action,
#     grpc_encoding: "gzip" | "identity", peer }
# written to a temporary file then renamed. conn numbers the client's
# connections (by peer address), so calls on one connection share it.
# Message decompression is turned off in the server, so the receiver sees
# what the client sent: a gzip message (grpc-encoding gzip) is recorded as
# such and gunzipped here.
#
# Each TraceService call is answered with the next entry of --script
# (comma-separated), then --default (default "ok"); ProfilesService calls
# with --profiles-script / --profiles-default. Entries:
#   ok                 OK, an empty Export*ServiceResponse
#   partial:N          OK, partial_success { rejected_spans (profiles:
#                      rejected_profiles) N, error_message "test rejection" }
#   delay:MS           wait MS ms, then OK
#   CODE               that status (UNAVAILABLE, INVALID_ARGUMENT,
#                      RESOURCE_EXHAUSTED ...) with message "test CODE"
#   CODE:retry:MS      the same with grpc-status-details-bin: a
#                      google.rpc.Status whose details hold a
#                      google.rpc.RetryInfo { retry_delay MS ms }
# The stored action is "200" for ok and delay, "partial:N", or the entry.
#
# --count FILE (bench/run's gRPC collector, instead of --dir): nothing is
# stored; each TraceService request's spans are counted by protobuf's own
# parser, and FILE is rewritten (temporary file, rename) after every call
# with one line in bench/receiver's /stats format:
#   requests=N traces=N spans=N profiles=N bytes=N bad=N
# (bytes: the request messages, decompressed; bad: undecodable requests).
# Counting parses each request with a skeleton of
# ExportTraceServiceRequest (resource_spans -> scope_spans -> spans, the
# field numbers read from the classes protoc generates from the
# repository's proto/ at start) whose spans are kept as bytes: a full
# parse costs ~5 us of CPU per span (protobuf 3.21's cpp backend, a
# DynamicMessage per attribute), which on bench/run's CPU 0 took half of
# wrk's time and halved G's request rate. The first request and every
# --full-every'th (default 64) are also parsed whole with the generated
# classes; a request that fails that, or whose span count differs, is bad.
# SIGTERM ends it.
import argparse
import gzip
import json
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import any_pb2, duration_pb2

TRACES = 'opentelemetry.proto.collector.trace.v1.TraceService'
PROFILES = 'opentelemetry.proto.collector.profiles.v1development.ProfilesService'

ap = argparse.ArgumentParser()
ap.add_argument('--port', type=int, required=True)
ap.add_argument('--dir')
ap.add_argument('--count')
ap.add_argument('--cert')
ap.add_argument('--key')
ap.add_argument('--script', default='')
ap.add_argument('--default', default='ok')
ap.add_argument('--profiles-script', default='')
ap.add_argument('--profiles-default', default='ok')
ap.add_argument('--max-idle-ms', type=int)
ap.add_argument('--full-every', type=int, default=64)
args = ap.parse_args()
if (args.dir is None) == (args.count is None):
    ap.error('one of --dir and --count is required')

lock = threading.Lock()
state = {'seq': 0, 'conns': {}}
scripts = {
    TRACES: [e.strip() for e in args.script.split(',') if e.strip()],
    PROFILES: [e.strip() for e in args.profiles_script.split(',') if e.strip()],
}
defaults = {TRACES: args.default, PROFILES: args.profiles_default}


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def partial(n):
    # Export{Trace,Profiles}ServiceResponse { partial_success = 1 {
    #   rejected_{spans,profiles} = 1; error_message = 2 } }
    ps = varint(1 << 3) + varint(n) + ld(2, b'test rejection')
    return ld(1, ps)


def status_details(code, message, retry_ms):
    # google.rpc.Status { code = 1; message = 2; details = 3 (Any) },
    # the Any holding google.rpc.RetryInfo { retry_delay = 1 (Duration) }.
    d = duration_pb2.Duration(seconds=retry_ms // 1000,
                              nanos=(retry_ms % 1000) * 1000000)
    retry_info = ld(1, d.SerializeToString())
    a = any_pb2.Any(type_url='type.googleapis.com/google.rpc.RetryInfo',
                    value=retry_info)
    return (varint(1 << 3) + varint(code) + ld(2, message.encode())
            + ld(3, a.SerializeToString()))


counts = {'requests': 0, 'traces': 0, 'spans': 0, 'profiles': 0,
          'bytes': 0, 'bad': 0}
trace_request = None
trace_skeleton = None


def load_trace_request():
    # protoc's Python classes for the repository's proto/, in a temporary
    # directory (plain packages, so no installed module shadows them).
    import atexit
    import shutil
    import subprocess
    import tempfile
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    proto = os.path.join(root, 'proto')
    gen = tempfile.mkdtemp(prefix='spanprof-grpc-count-')
    atexit.register(shutil.rmtree, gen, True)
    protos = []
    for d, _, files in os.walk(proto):
        protos += [os.path.relpath(os.path.join(d, f), proto)
                   for f in files if f.endswith('.proto')]
    subprocess.run(['protoc', '-I', proto, '--python_out=' + gen] + protos,
                   check=True)
    for d, _, files in os.walk(os.path.join(gen, 'opentelemetry')):
        open(os.path.join(d, '__init__.py'), 'a').close()
    sys.path.insert(0, gen)
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    return trace_service_pb2.ExportTraceServiceRequest


def skeleton_of(full):
    # ExportTraceServiceRequest with only the path to the spans, each span
    # a bytes field (same wire type as a message), built with protobuf's
    # descriptor pool from the generated classes' own field numbers.
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf import message_factory
    F = descriptor_pb2.FieldDescriptorProto
    rs = full.DESCRIPTOR.fields_by_name['resource_spans']
    ss = rs.message_type.fields_by_name['scope_spans']
    sp = ss.message_type.fields_by_name['spans']
    fd = descriptor_pb2.FileDescriptorProto(
        name='spanprof_count.proto', package='spanprof_count',
        syntax='proto3')
    for name, field, typ, child in (('Request', rs, F.TYPE_MESSAGE, 'RS'),
                                    ('RS', ss, F.TYPE_MESSAGE, 'SS'),
                                    ('SS', sp, F.TYPE_BYTES, None)):
        f = fd.message_type.add(name=name).field.add(
            name=field.name, number=field.number, type=typ,
            label=F.LABEL_REPEATED)
        if child:
            f.type_name = '.spanprof_count.' + child
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName('spanprof_count.Request'))


def span_count(cls, request):
    req = cls.FromString(request)
    return sum(len(ss.spans) for rs in req.resource_spans
               for ss in rs.scope_spans)


def count(service, request):
    n, bad = 0, 0
    if request[:2] == b'\x1f\x8b':
        request = gzip.decompress(request)
    if service == TRACES:
        with lock:
            seq = counts['traces']
            counts['traces'] += 1
        try:
            n = span_count(trace_skeleton, request)
            if seq % args.full_every == 0 and \
                    span_count(trace_request, request) != n:
                raise ValueError('span counts differ')
        except Exception:
            n, bad = 0, 1
    with lock:
        counts['requests'] += 1
        if service != TRACES:
            counts['profiles'] += 1
        counts['spans'] += n
        counts['bytes'] += len(request)
        counts['bad'] += bad
        line = ' '.join('%s=%d' % (k, counts[k]) for k in
                        ('requests', 'traces', 'spans', 'profiles', 'bytes',
                         'bad'))
        tmp = args.count + '.tmp'
        with open(tmp, 'w') as f:
            f.write(line + '\n')
        os.rename(tmp, args.count)


def store(service, request, context, action):
    if args.count:
        count(service, request)
        return
    now = time.time()
    md = {}
    for k, v in context.invocation_metadata():
        md[k] = v if isinstance(v, str) else v.decode('latin-1')
    enc = 'identity'
    if request[:2] == b'\x1f\x8b':
        enc = 'gzip'
        request = gzip.decompress(request)
    peer = context.peer()
    with lock:
        state['seq'] += 1
        seq = state['seq']
        conn = state['conns'].setdefault(peer, len(state['conns']) + 1)
    rec = {
        'seq': seq, 'time': now, 'conn': conn, 'method': 'POST',
        'path': '/%s/Export' % service, 'version': 'HTTP/2',
        'headers': md, 'body_b64': __import__('base64').b64encode(request).decode(),
        'action': action, 'grpc_encoding': enc, 'peer': peer,
    }
    tmp = os.path.join(args.dir, '.%08d.tmp' % seq)
    with open(tmp, 'w') as f:
        json.dump(rec, f)
    os.rename(tmp, os.path.join(args.dir, '%08d.req' % seq))


def next_entry(service):
    with lock:
        s = scripts[service]
        return s.pop(0) if s else defaults[service]


def handler(service):
    def export(request, context):
        entry = next_entry(service)
        parts = entry.split(':')
        if parts[0] == 'ok':
            store(service, request, context, '200')
            return b''
        if parts[0] == 'delay':
            store(service, request, context, '200')
            time.sleep(int(parts[1]) / 1000.0)
            return b''
        if parts[0] == 'partial':
            store(service, request, context, entry)
            return partial(int(parts[1]))
        code = getattr(grpc.StatusCode, parts[0])
        store(service, request, context, entry)
        msg = 'test %s' % parts[0]
        if len(parts) == 3 and parts[1] == 'retry':
            context.set_trailing_metadata((
                ('grpc-status-details-bin',
                 status_details(code.value[0], msg, int(parts[2]))),
            ))
        context.abort(code, msg)
    return grpc.method_handlers_generic_handler(service, {
        'Export': grpc.unary_unary_rpc_method_handler(export),
    })


if args.count:
    trace_request = load_trace_request()
    trace_skeleton = skeleton_of(trace_request)
    with open(args.count, 'w') as f:
        f.write('requests=0 traces=0 spans=0 profiles=0 bytes=0 bad=0\n')

options = [('grpc.per_message_decompression', 0),
           ('grpc.max_receive_message_length', 64 * 1024 * 1024)]
if args.max_idle_ms is not None:
    options.append(('grpc.max_connection_idle_ms', args.max_idle_ms))
server = grpc.server(
    futures.ThreadPoolExecutor(max_workers=16),
    handlers=[handler(TRACES), handler(PROFILES)],
    options=options)
addr = '127.0.0.1:%d' % args.port
if args.cert:
    with open(args.cert, 'rb') as f:
        cert = f.read()
    with open(args.key, 'rb') as f:
        key = f.read()
    server.add_secure_port(addr, grpc.ssl_server_credentials([(key, cert)]))
else:
    server.add_insecure_port(addr)
server.start()
print('listening on %d' % args.port, flush=True)


def stop(*_):
    server.stop(0)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server.wait_for_termination()
