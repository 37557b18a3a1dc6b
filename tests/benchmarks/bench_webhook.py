"""Admission requests/s (and latency) through mcruntime's webhook server, beside a bare stdlib
HTTPS server that only does the ``json`` round trip of the same review (measured in the same run).

Both servers use the same TLS setup (a generated certificate) and answer over
keep-alive connections from ``clients`` threads, each sending its share of the
requests one after another. mcruntime's side runs a defaulter that sets a label,
so every answer carries a JSON patch; the baseline answers "allowed".
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mcruntime.webhook import (
    AdmissionRequest,
    DefaultingHandler,
    WebhookServer,
    WebhookServerOptions,
    generate_certificates,
)
from tests.benchmarks._common import Row, best_rate, table

QUICK_M = 300
FULL_M = 3_000
CLIENTS = 4

REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "operation": "CREATE",
            "name": "w",
            "namespace": "default",
            "kind": {"group": "example.mcruntime.io", "version": "v1", "kind": "Widget"},
            "resource": {"group": "example.mcruntime.io", "version": "v1", "resource": "widgets"},
            "object": {
                "apiVersion": "example.mcruntime.io/v1",
                "kind": "Widget",
                "metadata": {"name": "w", "namespace": "default", "labels": {"app": "bench"}},
                "spec": {"size": "small", "items": [{"name": f"i{i}"} for i in range(10)]},
            },
        },
    }
).encode()


def _default(request: AdmissionRequest, obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"]["cluster"] = request.cluster_name or "local"


class _Bare(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:  # noqa: N802
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": True},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _drive(port: int, path: str, ca: bytes, m: int, clients: int) -> float:
    """Seconds for ``clients`` keep-alive clients to get ``m`` answers in total."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    share = [m // clients + (1 if i < m % clients else 0) for i in range(clients)]
    conns = [http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30) for _ in share]
    for c in conns:
        c.connect()
    start = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def client(conn: http.client.HTTPSConnection, n: int) -> None:
        start.wait()
        try:
            for _ in range(n):
                conn.request(
                    "POST", path, body=REVIEW, headers={"Content-Type": "application/json"}
                )
                resp = conn.getresponse()
                if resp.status != 200 or b'"allowed":true' not in resp.read().replace(b" ", b""):
                    raise RuntimeError("unexpected answer")
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=client, args=(c, n), name=f"mcruntime/bench/webhook-client-{i}")
        for i, (c, n) in enumerate(zip(conns, share, strict=True))
    ]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    for c in conns:
        c.close()
    if errors:
        raise errors[0]
    return elapsed


def run(quick: bool = False, m: int | None = None, clients: int = CLIENTS) -> list[Row]:
    """Measure both servers with 1 and ``clients`` clients; returns the table rows."""
    m = m or (QUICK_M if quick else FULL_M)
    runs = 1 if quick else 3
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
    server.register("/mutate", DefaultingHandler("example.mcruntime.io/v1/Widget", _default))
    server.start()
    with tempfile.TemporaryDirectory(prefix="mcruntime-bench-") as tmp:
        certs = generate_certificates(["127.0.0.1"])
        certs.write(tmp)
        bare = ThreadingHTTPServer(("127.0.0.1", 0), _Bare)
        bare.daemon_threads = True
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key"))
        bare.socket = tls.wrap_socket(bare.socket, server_side=True)
        serving = threading.Thread(target=bare.serve_forever, name="mcruntime/bench/bare-webhook")
        serving.start()
        try:
            rows = []
            for n in (1, clients):
                ours = best_rate(
                    m,
                    runs,
                    lambda n=n: _drive(server.port, "/clusters/c1/mutate", server.ca_bundle, m, n),
                )
                base = best_rate(
                    m, runs, lambda n=n: _drive(bare.server_address[1], "/", certs.ca_pem, m, n)
                )
                rows.append(
                    Row(
                        f"webhook admission, {n} client{'s' if n > 1 else ''}",
                        "requests",
                        ours,
                        "stdlib HTTPS + json round trip",
                        base,
                    )
                )
            return rows
        finally:
            bare.shutdown()
            bare.server_close()
            serving.join()
            server.stop()


def latency_lines(rows: list[Row]) -> list[str]:
    """Latency per request of the single-client rows (1 / rate)."""
    return [
        f"{r.name}: {1e3 / r.value:.2f} ms per request (baseline {1e3 / r.baseline:.2f} ms)"
        for r in rows
        if r.name.startswith("webhook") and r.name.endswith("1 client")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_webhook", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_M} requests, one run")
    parser.add_argument("-m", type=int, default=None, help="requests per run")
    parser.add_argument("--clients", type=int, default=CLIENTS, help="concurrent clients")
    args = parser.parse_args(argv)
    rows = run(args.quick, args.m, args.clients)
    print(table(rows))
    print("\n" + "\n".join(latency_lines(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
