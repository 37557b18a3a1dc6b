"""Connections whose server vanished without closing them (half-open TCP).

An API server's replica gone behind a load balancer, or a NAT entry lost, leaves the
client's connections open with nobody at the other end: no FIN, no RST. client-go notices
with its HTTP/2 health check (a ping after 30 s of silence, 15 s to answer) and TCP
keepalive; mcruntime's connections are HTTP/1.1, so TCP keepalive is what notices. Without
it a watch on such a connection stayed silent until its timeoutSeconds + 60 s (6 to 11
minutes, while the cluster answered every new connection and its health check saw nothing
wrong), and a call sent on an idle pooled one waited its whole deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcruntime import _kubeconfig
from mcruntime.client import _rest
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cluster(make_envtest_server: Callable[..., APIServer]) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(make_envtest_server("half-open").kubeconfig(), name="half-open")
    yield c
    c.stop()


def _keepalive(sock: socket.socket) -> tuple[int, ...]:
    """SO_KEEPALIVE and, where the platform has them, the idle time, interval and count."""
    got = [sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)]
    for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"):
        if hasattr(socket, name):
            got.append(sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name)))
    return tuple(got)


def _expected() -> tuple[int, ...]:
    values = dict(
        TCP_KEEPIDLE=_kubeconfig.KEEPALIVE_IDLE,
        TCP_KEEPINTVL=_kubeconfig.KEEPALIVE_INTERVAL,
        TCP_KEEPCNT=_kubeconfig.KEEPALIVE_PROBES,
    )
    return (1, *(v for name, v in values.items() if hasattr(socket, name)))


def test_a_watch_and_a_calls_connection_have_tcp_keepalive(cluster: Cluster) -> None:
    assert (_kubeconfig.KEEPALIVE_IDLE, _kubeconfig.KEEPALIVE_INTERVAL) == (30, 5)
    assert _kubeconfig.KEEPALIVE_PROBES == 3  # dead within 45 s of its last byte
    stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps")
    try:
        sock = _rest._sock_of(stream)
        assert isinstance(sock, socket.socket)
        assert _keepalive(sock) == _expected()
        # the watch holds its connection: this call opens another, left idle in the pool
        cluster.rest.request("GET", "/api")
        idle = [
            conn.sock
            for pool in cluster.rest._pool.pools._container.values()
            for conn in list(pool.pool.queue)
            if conn is not None and conn.sock is not None and conn.sock is not sock
        ]
        assert idle, "no idle pooled connection"
        assert {_keepalive(s) for s in idle} == {_expected()}
    finally:
        stream.close()


def test_a_configurations_own_socket_options_are_kept(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("own-options")
    own = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    fresh = _kubeconfig.load_config(config_dict=server.kubeconfig())
    fresh.socket_options = own
    c = Cluster(fresh, name="own-options")
    try:
        stream = c.rest.watch("/api/v1/namespaces/default/configmaps")
        try:
            sock = _rest._sock_of(stream)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
        finally:
            stream.close()
    finally:
        c.stop()
    assert fresh.socket_options is own


def _can_drop_flows() -> bool:
    """Root, with network namespaces and policy routing by port (``ip rule ... sport``)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return False
    if not (shutil.which("unshare") and shutil.which("ip") and shutil.which("ss")):
        return False
    probe = "ip rule add prio 10 ipproto tcp sport 1 blackhole"
    done = subprocess.run(["unshare", "-n", "sh", "-c", probe], capture_output=True, timeout=10)
    return done.returncode == 0


@pytest.mark.skipif(not _can_drop_flows(), reason="needs root, unshare -n and ip rule by port")
def test_a_watch_and_an_idle_connection_whose_server_vanished_are_dropped_by_keepalive() -> None:
    # in a network namespace of its own, where the kernel drops every segment of the
    # connections open to the server (keepalive shortened to about 3 s there)
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.integration.client._vanished"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["dropped"] >= 2, result  # the watch's connection and the idle one
    # the informer's watch ended once keepalive found the connection dead, and it watched
    # again on a new one (it used to stay on the dead one for 6 minutes or more): a watch
    # that had worked, cut, said at debug level by the cluster's name (the new connection
    # works: a replica gone behind a load balancer, no failure of the cluster)
    assert result["seen_after"] is not None, result
    (cut,) = result["cut"]
    assert cut.startswith("cluster=vanishing kind=v1/ConfigMap: watch cut after it worked ("), cut
    assert result["warned"] == [], result
    # the idle pooled connection was dropped by the kernel: the call went on a new one (it
    # used to be sent on the dead one and wait its whole deadline)
    assert result["call"] == "answered", result
    assert result["call_took"] < 2, result
