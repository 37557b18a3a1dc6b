"""WatchStream framing: events split across chunks, unframed streams, and server-ended watches.

A tiny HTTP server stands in for the API server so that the byte layout on
the wire is controlled exactly (envtest integration tests cover the rest).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes.client import ApiClient, Configuration

from mcruntime.client import RESTClient

pytestmark = pytest.mark.timeout(20)

EVENTS = [
    b'{"type":"ADDED","object":{"n":%d,"pad":"%s"}}' % (i, b"x" * (i * 700)) for i in range(40)
]
PAYLOAD = b"\n".join(EVENTS) + b"\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if "chunked" in self.path:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(PAYLOAD), 997):  # chunk borders fall inside events
                part = PAYLOAD[i : i + 997]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(PAYLOAD[:-1])  # last event without a trailing newline
            self.wfile.flush()
            self.close_connection = True


@pytest.fixture(scope="module")
def rest() -> Iterator[RESTClient]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, name="test-http", daemon=True)
    t.start()
    cfg = Configuration()
    cfg.host = f"http://127.0.0.1:{srv.server_port}"
    client = RESTClient(ApiClient(cfg), cluster_name="stub")
    yield client
    client.close()
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("path", ["/chunked", "/plain"])
def test_every_event_decoded_once_whatever_the_framing(rest: RESTClient, path: str) -> None:
    events = list(rest.watch(path))
    assert [e["object"]["n"] for e in events] == list(range(40))
    assert all(e["type"] == "ADDED" for e in events)


def test_a_stream_is_iterated_once(rest: RESTClient) -> None:
    stream = rest.watch("/chunked")
    list(stream)
    assert stream.closed
    with pytest.raises(RuntimeError):
        iter(stream)


def test_a_stream_closed_before_iteration_yields_nothing(rest: RESTClient) -> None:
    stream = rest.watch("/chunked")
    stream.close()
    assert list(stream) == []
