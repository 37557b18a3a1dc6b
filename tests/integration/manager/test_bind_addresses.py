"""The manager's servers listen where Go's ``net.Listen("tcp", address)`` would, which
controller-runtime's metrics and probe servers call with their ``BindAddress``: ``":8081"``
and ``"[::]:8081"`` on every address, IPv4 and IPv6 ("if the host in the address parameter
is empty or a literal unspecified IP address, Listen listens on all available unicast and
anycast IP addresses of the local system", net/dial.go), ``"[::1]:8081"`` on IPv6 loopback.

On an IPv6 single-stack cluster the kubelet probes the pod's IPv6 address: a probe server
on IPv4 only is never reached, and the pod is restarted for ever.
"""

from __future__ import annotations

import urllib.request

import pytest

import mcruntime
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider
from tests._ipv6 import needs_ipv6_loopback

pytestmark = [pytest.mark.timeout(10), needs_ipv6_loopback]


def healthz(host: str, port: int) -> int:
    with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5) as resp:
        return int(resp.status)


@pytest.mark.parametrize("address", [":0", "[::]:0"])
def test_an_empty_or_unspecified_host_serves_ipv4_and_ipv6(address: str) -> None:
    mgr = mcruntime.Manager(
        provider=Provider(), options=ManagerOptions(health_probe_bind_address=address)
    )
    with mgr:
        assert mgr.health_probe_address is not None
        port = mgr.health_probe_address[1]
        assert healthz("127.0.0.1", port) == 200
        assert healthz("[::1]", port) == 200


def test_a_bracketed_ipv6_literal_is_listened_on() -> None:
    mgr = mcruntime.Manager(
        provider=Provider(), options=ManagerOptions(metrics_bind_address="[::1]:0")
    )
    with mgr:
        assert mgr.metrics_address is not None
        host, port = mgr.metrics_address
        assert host == "::1"
        with urllib.request.urlopen(f"http://[::1]:{port}/metrics", timeout=5) as resp:
            assert resp.status == 200
