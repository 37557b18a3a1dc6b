"""Why a check fails (an API server's address, an error's text) is shown to callers on
loopback only (``kubectl port-forward``, ``kubectl exec ... curl localhost``); anyone
reaching the pod's address, the kubelet included, reads ``failed: reason withheld``, as
from controller-runtime's health endpoints (pkg/healthz: "don't include the error since
this endpoint is public"). Status codes and check names are the same for both."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

import mcruntime
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider
from tests.integration.manager._http import get

pytestmark = pytest.mark.timeout(20)

SECRET = "cannot reach 10.1.2.3:6443: connection refused"


def _own_address() -> str | None:
    """This machine's address on its default route (not loopback), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # (no packet is sent: only a route is chosen)
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") else address


OWN = _own_address()


@pytest.fixture
def port() -> Iterator[int]:
    mgr = mcruntime.Manager(
        provider=Provider(), options=ManagerOptions(health_probe_bind_address=":0")
    )

    def broken() -> None:
        raise RuntimeError(SECRET)

    mgr.add_readyz_check("cluster-api", broken)
    with mgr:
        assert mgr.health_probe_address is not None
        yield mgr.health_probe_address[1]


def ask(host: str, port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.skipif(OWN is None, reason="this machine has no address but loopback")
@pytest.mark.parametrize("path", ["/readyz", "/readyz?verbose", "/readyz/cluster-api"])
def test_a_caller_off_loopback_reads_reason_withheld(port: int, path: str) -> None:
    assert OWN is not None
    status, body = ask(OWN, port, path)
    assert status == 500
    assert "[-]cluster-api failed: reason withheld" in body.splitlines()
    assert SECRET not in body


def test_a_caller_on_loopback_reads_the_reason(port: int) -> None:
    status, body = get(("127.0.0.1", port), "/readyz?verbose")
    assert status == 500
    assert f"[-]cluster-api failed: {SECRET}" in body.splitlines()


def test_a_provider_clusters_line_withholds_its_reason_and_fails_nothing() -> None:
    from mcruntime.healthz import CheckResult, Checks

    line = CheckResult("cluster/eu-1", False, f"not answering for 5s: {SECRET}", informational=True)
    status, body = Checks.render([line], "readyz", True, reasons=False)
    assert status == 200
    assert body.splitlines()[0] == "[!]cluster/eu-1 failed: reason withheld (does not fail readyz)"
