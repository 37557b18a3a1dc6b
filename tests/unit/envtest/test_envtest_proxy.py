"""`Proxy`: forwards to its server; ``latency`` slows only the path through it."""

from __future__ import annotations

import time

import pytest
from kubernetes import client, config

from mcruntime.envtest import APIServer, Proxy

pytestmark = pytest.mark.timeout(30)


def _version_seconds(api: client.VersionApi) -> float:
    began = time.monotonic()
    api.get_code()
    return time.monotonic() - began


def test_proxy_latency_delays_requests_through_it_and_not_the_direct_path() -> None:
    with APIServer("proxied") as server, Proxy(server, latency=0.2) as proxy:
        direct = client.VersionApi(config.new_client_from_config_dict(server.kubeconfig()))
        slow = client.VersionApi(config.new_client_from_config_dict(proxy.kubeconfig()))
        _version_seconds(slow)  # TLS handshake and connection set-up out of the way
        # a request and its answer each wait at least once
        assert _version_seconds(slow) >= 0.4
        assert _version_seconds(direct) < 0.4
        proxy.latency = 0.0  # settable while running
        assert _version_seconds(slow) < 0.4


def test_proxy_rejects_a_negative_latency() -> None:
    with APIServer("neg") as server, pytest.raises(ValueError, match="latency"):
        Proxy(server, latency=-1)
