"""The seeded objects: names and bodies shared by the envtest processes and the writers."""

from __future__ import annotations

from typing import Any

__all__ = ["ANNOTATION", "NAMESPACE", "SEEDED_PREFIX", "configmap", "object_name"]

NAMESPACE = "default"
#: every seeded object's name starts with it (the subjects count only these for a sync)
SEEDED_PREFIX = "obj-"
#: the writers' ``time.time()`` of a write; the subjects turn it into a write-to-handler latency
ANNOTATION = "bench.mcruntime.io/written"


def object_name(i: int) -> str:
    """The name of the ``i``-th seeded ConfigMap (``obj-00000`` ...)."""
    return f"{SEEDED_PREFIX}{i:05d}"


def configmap(i: int) -> dict[str, Any]:
    """The ``i``-th seeded ConfigMap (about 430 bytes of JSON)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": object_name(i),
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "shard": str(i % 10)},
        },
        "data": {"index": str(i), "payload": "x" * 128},
    }
