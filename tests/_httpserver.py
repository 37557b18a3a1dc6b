"""A scripted HTTP server standing in for an API server, and a `Cluster` pointed at it.

For faults and answers envtest does not produce (a 429 with or without ``Retry-After``,
a dropped connection, a ``text/plain`` body that parses as JSON). The client under test
is the real one, over real HTTP.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

from mcruntime import Cluster


class Handler(http.server.BaseHTTPRequestHandler):
    """Base of the scripted handlers: `answer()` writes one response; requests are not logged."""

    def answer(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[Handler], name: str) -> Iterator[Cluster]:
    """Serve ``handler`` on a loopback port; yield a `Cluster` ``name`` that talks to it."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, name=f"test-{name}-server", daemon=True)
    t.start()
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "f", "cluster": {"server": f"http://127.0.0.1:{httpd.server_port}"}}],
        "users": [{"name": "f", "user": {}}],
        "contexts": [{"name": "f", "context": {"cluster": "f", "user": "f"}}],
        "current-context": "f",
    }
    cluster = Cluster.from_kubeconfig(kubeconfig, name=name)
    try:
        yield cluster
    finally:
        cluster.stop()
        httpd.shutdown()
        httpd.server_close()
        t.join(5)
