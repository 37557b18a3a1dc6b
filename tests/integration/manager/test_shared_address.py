"""Metrics and probes share one server only when given the same address with a port:
two ``":0"`` addresses are two free ports (as for the debug pages), so probes stay plain
HTTP when metrics are served over TLS."""

from __future__ import annotations

import socket
import ssl
import urllib.request

import pytest

import mcruntime
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider
from tests.integration.manager._http import get

pytestmark = pytest.mark.timeout(20)

INSECURE = ssl._create_unverified_context()  # noqa: S323


def test_two_port_zero_addresses_are_two_servers_probes_over_plain_http() -> None:
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="127.0.0.1:0",
            metrics_secure=True,
        ),
    )
    with mgr:
        assert mgr.metrics_address is not None and mgr.health_probe_address is not None
        assert mgr.metrics_address[1] != mgr.health_probe_address[1]
        assert get(mgr.health_probe_address, "/healthz") == (200, "ok")
        url = f"https://127.0.0.1:{mgr.metrics_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5, context=INSECURE) as resp:
            assert resp.status == 200


def test_one_address_with_a_port_is_one_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(
            metrics_bind_address=f"127.0.0.1:{port}", health_probe_bind_address=f"127.0.0.1:{port}"
        ),
    )
    with mgr:
        assert mgr.metrics_address == mgr.health_probe_address == ("127.0.0.1", port)
        assert get(mgr.health_probe_address, "/healthz") == (200, "ok")
        assert get(mgr.metrics_address, "/metrics")[0] == 200
