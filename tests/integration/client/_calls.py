"""Calls made on a thread of their own, for tests that cut or stop what they wait for."""

from __future__ import annotations

import threading
import time
from typing import Any

from mcruntime.cluster import Cluster
from mcruntime.errors import ClusterLeft, ClusterNotAnswering


def listing(
    cluster: Cluster, name: str, timeout: float = 30.0
) -> tuple[threading.Thread, list[BaseException]]:
    """A list of ConfigMaps in ``default`` with a deadline, on a thread ``name`` of its own
    (started), and what it raised."""
    raised: list[BaseException] = []

    def call() -> None:
        try:
            cluster.api_reader.list("v1/ConfigMap", namespace="default", timeout=timeout)
        except BaseException as exc:
            raised.append(exc)

    t = threading.Thread(target=call, name=name)
    t.start()
    return t, raised


def cut_at_once(kubeconfig: dict[str, Any], how: str, waits: str) -> None:
    """A call of a cluster of ``kubeconfig`` waits (in its ``waits``); ``how`` (``cut_calls``
    or ``close``) ends it within a second, with the error that says why, not at the connect
    timeout (10 s) or its deadline."""
    cluster = Cluster.from_kubeconfig(kubeconfig, name="waiting")
    t, raised = listing(cluster, "test-waiting")
    try:
        t.join(0.5)
        assert t.is_alive(), f"not waiting in its {waits}"
        cut_at = time.monotonic()
        if how == "cut_calls":
            cluster.rest.cut_calls("the cluster is not answering (a test)")
        else:
            cluster.rest.close()
        t.join(5)
        assert not t.is_alive()
        assert time.monotonic() - cut_at < 1.0
    finally:
        cluster.rest.close()
        t.join(15)
    expected = ClusterNotAnswering if how == "cut_calls" else ClusterLeft
    assert len(raised) == 1 and isinstance(raised[0], expected), raised
