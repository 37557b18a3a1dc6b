"""Health checkers that send ``HEAD`` (load balancers, uptime checkers, blackbox exporter's
``method: HEAD``, ``curl -I``) get the probe's status, as from controller-runtime: its
healthz handlers (pkg/healthz/healthz.go) and promhttp never look at the method, and Go's
net/http sends a HEAD answer's headers without the body."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest

import mcruntime
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def mgr() -> Iterator[mcruntime.Manager]:
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"
        ),
    )
    with mgr:
        yield mgr


def ask(mgr: mcruntime.Manager, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    address = mgr.metrics_address if path == "/metrics" else mgr.health_probe_address
    assert address is not None
    conn = http.client.HTTPConnection("127.0.0.1", address[1], timeout=5)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_head_answers_the_get_status_and_headers_without_a_body(
    mgr: mcruntime.Manager, path: str
) -> None:
    status, headers, body = ask(mgr, "HEAD", path)
    get_status, get_headers, _ = ask(mgr, "GET", path)
    assert (status, body) == (get_status, b"")
    assert status == 200
    assert headers["Content-Type"] == get_headers["Content-Type"]


def test_other_methods_are_answered_as_get(mgr: mcruntime.Manager) -> None:
    status, _, body = ask(mgr, "POST", "/healthz")
    assert (status, body) == (200, b"ok")
