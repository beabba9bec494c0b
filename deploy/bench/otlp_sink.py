"""A tiny OTLP/HTTP collector for the benches: accepts every POST (protobuf `/v1/traces`), answers
200 with an empty body, and prints one line per export with the number of spans in it and the
running total, so a run can check that every span arrived (none dropped).

Usage: python3 otlp_sink.py PORT  (listens on 127.0.0.1:PORT until killed)
"""

import http.server
import sys

total = 0


def varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def fields(data):
    """(field number, bytes) of each length-delimited field of a protobuf message."""
    at = 0
    while at < len(data):
        key, at = varint(data, at)
        kind = key & 7
        if kind == 0:
            _, at = varint(data, at)
        elif kind == 1:
            at += 8
        elif kind == 5:
            at += 4
        elif kind == 2:
            size, at = varint(data, at)
            yield key >> 3, data[at:at + size]
            at += size
        else:
            raise ValueError(f"wire type {kind}")


def count_spans(body):
    """ExportTraceServiceRequest.resource_spans(1) -> ResourceSpans.scope_spans(2) -> ScopeSpans.spans(2)."""
    return sum(1 for number, resource in fields(body) if number == 1
               for number2, scope in fields(resource) if number2 == 2
               for number3, _ in fields(scope) if number3 == 2)


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real collector

    def do_POST(self):
        global total
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        spans = count_spans(body)
        total += spans
        print(f"{self.path} {len(body)} bytes {spans} spans, {total} in all", flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
