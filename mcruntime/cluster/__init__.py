"""``Cluster``: everything mcruntime keeps for one cluster (config, client, cache, lifetime)."""

from __future__ import annotations

from mcruntime._exports import publish
from mcruntime.cluster._cluster import Cluster

__all__ = ["Cluster"]

publish(__name__, globals(), __all__)
