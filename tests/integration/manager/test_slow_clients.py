"""Slow clients cannot hold the probe server: a request must be read within a deadline
however its bytes are paced (controller-runtime's ``ReadHeaderTimeout``), and open
connections are bounded, the oldest still reading closed to make room, so a kubelet probe
is answered while many slow connections are open.

The deadline (32 s) and the bound (256) are lowered through `mcruntime._serving`'s
module constants, read when used.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

import mcruntime
import mcruntime._serving
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider
from tests._slow_client import closed_by_server, trickle_until_closed

pytestmark = pytest.mark.timeout(30)

READ_TIMEOUT = 0.5
CAP = 8


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(mcruntime._serving, "READ_TIMEOUT", READ_TIMEOUT)
    monkeypatch.setattr(mcruntime._serving, "MAX_CONNECTIONS", CAP)
    mgr = mcruntime.Manager(
        provider=Provider(), options=ManagerOptions(health_probe_bind_address="127.0.0.1:0")
    )
    with mgr:
        assert mgr.health_probe_address is not None
        yield mgr.health_probe_address[1]


def connection_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.endswith("probes-connection"))


def test_a_request_trickled_a_byte_at_a_time_is_cut_at_the_read_deadline(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert trickle_until_closed(sock, 5) < 5 * READ_TIMEOUT


def test_a_probe_is_answered_within_a_second_while_many_slow_connections_are_open(
    port: int,
) -> None:
    slow = []
    try:
        for _ in range(3 * CAP):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
            slow.append(sock)
        wait_for(lambda: connection_threads() <= CAP, 5, f"at most {CAP} connection threads")
        started = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
            assert resp.status == 200
        assert time.monotonic() - started < 1
        # and the slow ones are all closed by the deadline, their threads gone
        wait_for(lambda: all(closed_by_server(s) for s in slow), 5, "slow connections closed")
        wait_for(lambda: connection_threads() == 0, 5, "connection threads ended")
    finally:
        for sock in slow:
            sock.close()
