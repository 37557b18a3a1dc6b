"""The garbage collector's look at dangling dependents (owners all absent) and a frozen server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcruntime.envtest._gc import DANGLING_GC_DELAY, GarbageCollector
from mcruntime.envtest._storage import ObjectStore

pytestmark = pytest.mark.timeout(20)

CONFIGMAPS = ("", "configmaps")


def test_a_dangling_dependent_is_not_collected_while_the_server_is_frozen() -> None:
    # kube-controller-manager's collector cannot reach a frozen (SIGSTOPped) kube-apiserver:
    # a dependent whose owners are all absent is deleted once it answers again, not before
    store = ObjectStore(100)
    orphan = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "orphan",
            "namespace": "default",
            "uid": "u-orphan",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "u-gone"}
            ],
        },
    }
    store.commit(CONFIGMAPS, "ADDED", orphan, None)
    frozen = [True]
    deleted: list[str] = []

    def delete(key: Any, obj: dict[str, Any], policy: str) -> None:
        deleted.append(obj["metadata"]["name"])

    gc = GarbageCollector(store, delete, lambda *args: None, frozen=lambda: frozen[0])

    async def run() -> float:
        gc.watch_for_dangling(CONFIGMAPS, store.get(CONFIGMAPS, "default", "orphan"))
        await asyncio.sleep(4 * DANGLING_GC_DELAY)  # what must not happen has no event
        assert deleted == []
        frozen[0] = False
        thawed = time.monotonic()
        while not deleted:
            await asyncio.sleep(0.01)
        return time.monotonic() - thawed

    took = asyncio.run(asyncio.wait_for(run(), 10))
    assert deleted == ["orphan"]
    assert took < 1.0
