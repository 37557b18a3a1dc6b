"""Coordinators decide which provider clusters a replica engages.

[`Basic`][mcruntime.manager.coordinator.Basic] engages everything (the default behaviour). [`Sharded`][mcruntime.manager.coordinator.Sharded]
splits the clusters across replicas with peer Leases, weighted rendezvous
hashing and a per-cluster fence Lease. A coordinator is set with
``ManagerOptions(coordinator=...)``; the manager calls ``bind(manager)`` to get
the [`Aware`][mcruntime.multicluster.Aware] the provider engages with and runs
``start(stop)`` in a thread of its own on every replica.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mcruntime._exports import publish
from mcruntime.manager.coordinator._basic import Basic
from mcruntime.manager.coordinator._hrw import Peer, hash01, owner, score
from mcruntime.manager.coordinator._names import lease_name
from mcruntime.manager.coordinator._sharded import Sharded

if TYPE_CHECKING:
    from mcruntime.manager import Manager
    from mcruntime.multicluster import Aware

__all__ = ["Basic", "Coordinator", "Peer", "Sharded", "hash01", "lease_name", "owner", "score"]


@runtime_checkable
class Coordinator(Protocol):
    """Decides which provider clusters this replica engages.

    ``bind(manager)`` is called once, before the provider starts, and returns
    the [`Aware`][mcruntime.multicluster.Aware] the provider engages clusters
    with (it engages them with ``manager`` as it sees fit and must end each
    such engagement when the provider's lifetime for that cluster ends).
    ``start(stop)`` blocks in a thread of the manager's, on every replica,
    until ``stop`` is set; before returning it ends every engagement it made.

    A coordinator that engages some clusters on other replicas may also offer
    ``knows(cluster_name) -> bool``, true for every cluster of the fleet: the
    webhook server then serves those too, not only the engaged ones; and
    ``api_reader(cluster_name) -> APIReader`` for such a cluster, which
    [`Manager.get_api_reader`][mcruntime.manager.Manager.get_api_reader] returns.
    """

    def bind(self, manager: Manager, /) -> Aware: ...

    def start(self, stop: threading.Event, /) -> None: ...


publish(__name__, globals(), __all__)
