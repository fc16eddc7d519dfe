"""A minimal OTLP/HTTP trace receiver for tests.

Usage: otlp_receiver.py SPANS_FILE

Listens on a free loopback port, prints `listening PORT` on stdout once it accepts requests, and
appends every span of every protobuf POST to /v1/traces to SPANS_FILE as one JSON line. The
response is sent only after the spans are written, so an exporter that saw it succeed can read
them at once. Exits with status 3 and says what to install when the OTLP stubs are missing.
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
except ImportError as err:
    print(f"missing Python package opentelemetry-proto ({err})", file=sys.stderr)
    sys.exit(3)


def text(value):
    """An OTLP AnyValue as a string; arrays and maps as JSON."""
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if kind == "array_value":
        return json.dumps([text(v) for v in value.array_value.values])
    if kind == "kvlist_value":
        return json.dumps(flatten(value.kvlist_value.values))
    return str(getattr(value, kind))


def flatten(attributes):
    return {kv.key: text(kv.value) for kv in attributes}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/traces":
            self.send_error(404, "only /v1/traces is served")
            return
        if not self.headers.get("Content-Type", "").startswith("application/x-protobuf"):
            self.send_error(415, "only application/x-protobuf is accepted")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = flatten(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "status_code": span.status.code,
                        "scope": scope_spans.scope.name,
                        "attributes": flatten(span.attributes),
                        "resource": resource,
                    }) + "\n")
        with LOCK, open(SPANS_FILE, "a", encoding="utf-8") as out:
            out.writelines(lines)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format, *args):
        pass


if __name__ == "__main__":
    SPANS_FILE = sys.argv[1]
    LOCK = threading.Lock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()
