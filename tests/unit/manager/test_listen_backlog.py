"""The library's servers listen with the kernel's backlog (``SOMAXCONN``), as Go's
``net.Listen`` does: a burst of connections is queued while the accepting thread is busy,
not dropped (socketserver's backlog of 5 dropped the rest, each retried after 1 s, a
kubelet probe's whole timeout)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from mcruntime.manager._http import ProbeServer
from mcruntime.webhook import WebhookServer, WebhookServerOptions

pytestmark = pytest.mark.timeout(30)

#: connections made while nothing accepts (socketserver's backlog of 5 holds about 6)
BURST = 64


def connect_all(port: int) -> int:
    """How many of `BURST` connections to ``port`` complete while nobody accepts them."""
    done = 0
    with contextlib.ExitStack() as stack:
        for _ in range(BURST):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
            except OSError:
                break
            stack.enter_context(sock)
            done += 1
    return done


@pytest.fixture
def probes() -> Iterator[ProbeServer]:
    server = ProbeServer(("127.0.0.1", 0), name="probes", option="health_probe_bind_address")
    try:
        yield server  # bound and listening; not started: nothing accepts
    finally:
        server.stop()


def test_a_burst_of_connections_to_the_probe_server_is_queued_not_dropped(
    probes: ProbeServer,
) -> None:
    assert connect_all(probes.address[1]) == BURST


def test_a_burst_of_connections_to_the_webhook_server_is_queued_not_dropped() -> None:
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
    try:
        server.bind()  # listening; not started: nothing accepts
        assert connect_all(server.port) == BURST
    finally:
        server.stop()
