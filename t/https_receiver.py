#!/usr/bin/python3
# t/https_receiver.py - a minimal OTLP/HTTP collector over TLS, for tests
# of the exporter's https (t/46-private-ca.t).
#
#   /usr/bin/python3 t/https_receiver.py --port P --dir D --cert C --key K
#
# HTTP/1.1 over TLS (keep-alive, one thread per connection) on 127.0.0.1:P
# with the server certificate C (PEM, with its chain) and key K. Every POST
# is stored before it is answered, as t/receiver.pl stores them (so
# SpanProf::Test's receiver methods read them): D/<%08d seq>.req, a JSON
# object { seq, time, conn, method, path, version, headers: {lc name:
# value}, body_b64, action }, written to a temporary file then renamed.
# Every POST is answered 200 with an empty ExportTraceServiceResponse.
# Failed TLS handshakes are logged to stderr ("handshake failed: ...").
import argparse
import base64
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument('--port', type=int, required=True)
ap.add_argument('--dir', required=True)
ap.add_argument('--cert', required=True)
ap.add_argument('--key', required=True)
args = ap.parse_args()

lock = threading.Lock()
state = {'seq': 0, 'conn': 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def setup(self):
        super().setup()
        with lock:
            state['conn'] += 1
            self.conn_no = state['conn']

    def log_message(self, fmt, *a):
        sys.stderr.write('%s\n' % (fmt % a))

    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n) if n > 0 else b''
        with lock:
            state['seq'] += 1
            seq = state['seq']
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = headers[k] + ', ' + v if k in headers else v
        rec = {
            'seq': seq, 'time': time.time(), 'conn': self.conn_no,
            'method': 'POST', 'path': self.path,
            'version': self.request_version, 'headers': headers,
            'body_b64': base64.b64encode(body).decode('ascii'),
            'action': '200',
        }
        tmp = os.path.join(args.dir, '.%08d.tmp' % seq)
        with open(tmp, 'w') as f:
            json.dump(rec, f)
        os.rename(tmp, os.path.join(args.dir, '%08d.req' % seq))
        self.send_response(200)
        self.send_header('Content-Type', 'application/x-protobuf')
        self.send_header('Content-Length', '0')
        self.end_headers()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        # The handshake in the connection's thread, not the accepting one.
        sock, addr = self.socket.accept()
        return ctx.wrap_socket(sock, server_side=True,
                               do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            sys.stderr.write('handshake failed: %s\n' % e)
            return
        super().finish_request(request, client_address)


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(args.cert, args.key)
srv = Server(('127.0.0.1', args.port), Handler)
sys.stderr.write('listening on 127.0.0.1:%d\n' % args.port)
sys.stderr.flush()
srv.serve_forever()
