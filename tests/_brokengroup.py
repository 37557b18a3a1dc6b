"""A proxy in front of a plain-HTTP envtest server whose cluster has one broken aggregated
API, as a cluster with a dead metrics-server has: ``/apis`` lists `GROUP`/v1beta1, and that
group's requests answer 503 ``service unavailable`` (what kube-apiserver answers for an
unavailable APIService) or hang until the proxy is closed. Everything else, watches
included, is forwarded."""

from __future__ import annotations

import http.client
import http.server
import json
import threading
from typing import Any

__all__ = ["GROUP", "BrokenGroupProxy"]

#: the broken aggregated group
GROUP = "metrics.k8s.io"


class BrokenGroupProxy:
    """Serve on a loopback port in front of ``upstream`` (an envtest ``APIServer``'s
    ``(host, port)``); ``mode`` is ``"503"`` or ``"hang"``; ``hits`` counts the broken
    group's requests. `close` ends hung requests and stops serving."""

    def __init__(self, upstream: tuple[str, int], mode: str = "503") -> None:
        self.mode = mode
        self.hits = 0
        self.stopped = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                path = self.path.split("?")[0]
                if path.startswith(f"/apis/{GROUP}"):
                    proxy.hits += 1
                    if proxy.mode == "hang":
                        proxy.stopped.wait()
                    self._send(503, b"service unavailable\n", "text/plain; charset=utf-8")
                    return
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection(*upstream, timeout=60)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                streamed = r.chunked or r.getheader("Content-Length") is None
                if not streamed:
                    data = r.read()
                    if path.rstrip("/") == "/apis" and r.status == 200:
                        doc = json.loads(data)
                        gv = {"groupVersion": f"{GROUP}/v1beta1", "version": "v1beta1"}
                        doc["groups"].append(
                            {"name": GROUP, "versions": [gv], "preferredVersion": gv}
                        )
                        data = json.dumps(doc).encode()
                    self._send(r.status, data, r.getheader("Content-Type") or "")
                    conn.close()
                    return
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while not proxy.stopped.is_set():
                        chunk = r.read1(65536)
                        if not chunk:
                            break
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (OSError, http.client.HTTPException):
                    pass  # either side closed the stream (a watch ended, a test's teardown)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="test/broken-group-proxy", daemon=True
        )
        self._thread.start()

    def kubeconfig(self, server: Any) -> dict[str, Any]:
        """``server``'s kubeconfig, pointed at the proxy."""
        kc: dict[str, Any] = server.kubeconfig()
        kc["clusters"][0]["cluster"]["server"] = self.url
        return kc

    def close(self) -> None:
        self.stopped.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
