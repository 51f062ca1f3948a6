#!/usr/bin/python3
"""t/otlp_json_decode.py - OTLP/JSON request body -> protobuf bytes, through
protobuf's own JSON parser (google.protobuf.json_format.Parse), for the
http/json tests (t/48-http-json.t).

    /usr/bin/python3 t/otlp_json_decode.py GEN_DIR traces|profiles < body.json > body.pb

GEN_DIR holds the Python classes generated from the repository's proto/
(protoc -I proto --python_out=GEN_DIR ...). The JSON is read as OTLP/JSON:
the one deviation from protobuf's JSON mapping, hex-encoded traceId, spanId,
parentSpanId and profileId (the Collector's profiles reader takes profileId
as hex too), is undone first; a hex id that is not lowercase hex of the
right length fails. Then Parse, which rejects unknown field names, wrong
types, enum names or numbers it does not know ... Exit 1 with the reason on
stderr when the body does not parse; the bytes are the message serialized,
to be decoded by protoc --decode as the other tests do.
"""
import base64
import json
import os
import re
import sys

gen, kind = sys.argv[1], sys.argv[2]
# Plain packages in GEN_DIR, so no installed "opentelemetry" can shadow them.
for d, _, files in os.walk(os.path.join(gen, 'opentelemetry')):
    if '__init__.py' not in files:
        open(os.path.join(d, '__init__.py'), 'a').close()
sys.path.insert(0, gen)

from google.protobuf import json_format  # noqa: E402

if kind == 'traces':
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as svc
    msg = svc.ExportTraceServiceRequest()
elif kind == 'profiles':
    from opentelemetry.proto.collector.profiles.v1development import \
        profiles_service_pb2 as svc
    msg = svc.ExportProfilesServiceRequest()
else:
    sys.exit('usage: otlp_json_decode.py GEN_DIR traces|profiles')

HEX_IDS = {'traceId': 16, 'spanId': 8, 'parentSpanId': 8, 'profileId': 16}


def hex_to_b64(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in HEX_IDS and isinstance(x, str):
                if not re.fullmatch('(?:[0-9a-f]{2})*', x) \
                        or len(x) not in (0, 2 * HEX_IDS[k]):
                    sys.exit('%s is not %d bytes in lowercase hex: %r'
                             % (k, HEX_IDS[k], x))
                v[k] = base64.b64encode(bytes.fromhex(x)).decode()
            else:
                hex_to_b64(x)
    elif isinstance(v, list):
        for x in v:
            hex_to_b64(x)


try:
    doc = json.loads(sys.stdin.buffer.read())
    hex_to_b64(doc)
    json_format.Parse(json.dumps(doc), msg)
except (ValueError, json_format.ParseError) as e:
    sys.exit('not an OTLP/JSON %s request: %s' % (kind, e))
sys.stdout.buffer.write(msg.SerializeToString())
