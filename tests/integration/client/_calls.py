"""Calls made on a thread of their own, for tests that cut or stop what they wait for."""

from __future__ import annotations

import threading

from mcruntime.cluster import Cluster


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
