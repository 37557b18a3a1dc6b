"""A server that vanishes without closing its connections, for `test_half_open`: run as
``python -m tests.integration.client._vanished`` inside a network namespace of its own
(``unshare -n``, as root), where it may change the routing.

The kernel drops every TCP segment of the connections open to the server, both ways, with
no FIN or RST (as when an API server's replica is gone behind a load balancer, or a NAT
entry is lost); new connections work. Prints one JSON line: whether an informer watching
on a connection that died so saw an object created afterwards, in how many seconds, and
how a call made after that went (an idle pooled connection had died too).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from typing import Any

from mcruntime import _kubeconfig
from mcruntime.cache import Informer
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, WaitTimeout, wait_for
from tests.integration.cache._cache_helpers import CONFIGMAPS

#: how long the informer is given to see the object: a few keepalive bounds, well under the
#: silence bound of its watch (its timeoutSeconds + 60 s, 6 minutes at least)
SEEN_WITHIN = 20.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _established_to(port: int) -> set[int]:
    """The client ports of the connections established to ``port``."""
    out = subprocess.run(
        ["ss", "-tnH", "state", "established", f"dport = :{port}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {int(p) for p in re.findall(rf"127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:{port}\b", out)}


def _drop_flows_to(port: int) -> list[int]:
    """Drop, in the kernel, every segment of the connections established to ``port`` (by
    policy routing to a blackhole, ahead of the local table); the client ports dropped."""
    clients = sorted(_established_to(port))
    for client in clients:
        for selector in ("sport", "dport"):
            _ip("rule", "add", "prio", "10", "ipproto", "tcp", selector, str(client), "blackhole")
    return clients


def _configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def main() -> None:
    _ip("link", "set", "lo", "up")
    _ip("rule", "add", "prio", "100", "lookup", "local")
    _ip("rule", "del", "prio", "0", "lookup", "local")
    # keepalive in seconds rather than tens of seconds: a dead connection dropped within 3 s
    _kubeconfig.KEEPALIVE_IDLE = _kubeconfig.KEEPALIVE_INTERVAL = 1
    _kubeconfig.KEEPALIVE_PROBES = 2
    server = APIServer("vanishing").start()
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="vanishing")
    inf = Informer(cluster.rest, CONFIGMAPS, cluster_name="vanishing")
    names = lambda: {o["metadata"]["name"] for o in inf.store.list()}  # noqa: E731
    result: dict[str, Any] = {}
    logged = _Records()
    logging.getLogger("mcruntime.cache").addHandler(logged)
    logging.getLogger("mcruntime.cache").setLevel(logging.DEBUG)
    try:
        inf.start()
        assert inf.wait_for_sync(10)
        cluster.client.create(_configmap("before"))
        wait_for(lambda: "before" in names(), timeout=10)  # its watch is open
        cluster.rest.request("GET", "/api")  # a connection of the pool, idle from now on
        dropped = _drop_flows_to(server.port)
        result["dropped"] = len(dropped)
        writer = Cluster.from_kubeconfig(server.kubeconfig(), name="writer")
        try:
            writer.client.create(_configmap("after"))  # on a new connection: it works
        finally:
            writer.stop()
        began = time.monotonic()
        try:
            wait_for(lambda: "after" in names(), timeout=SEEN_WITHIN)
            result["seen_after"] = round(time.monotonic() - began, 1)
        except WaitTimeout:
            result["seen_after"] = None
        # the idle connection's keepalive ends within a few ms of the watch's (its last byte
        # came just after): the call is made once the kernel dropped it, as a call made a
        # while later would be (made at once, it could be sent on it a moment before)
        dead = lambda: not _established_to(server.port) & set(dropped)  # noqa: E731
        wait_for(dead, timeout=10, what="the dropped connections' keepalive ended them")
        began = time.monotonic()
        try:
            cluster.rest.request("GET", "/api", timeout=5)
            result["call"] = "answered"
        except Exception as exc:  # what the test reports
            result["call"] = f"{type(exc).__name__}: {exc}"
        result["call_took"] = round(time.monotonic() - began, 1)
        records = logged.records
        result["warned"] = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
        result["cut"] = [r.getMessage() for r in records if "watch cut after" in r.getMessage()]
    finally:
        inf.stop()
        cluster.stop()
        server.stop()
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
