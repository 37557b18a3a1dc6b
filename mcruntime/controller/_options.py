from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from mcruntime._callables import refuse_coroutine_function

if TYPE_CHECKING:
    from mcruntime.workqueue import RateLimiter

DEFAULT_MAX_CONCURRENT_RECONCILES = 1
DEFAULT_CLUSTER_NOT_FOUND_RETRIES = 5


def default_per_cluster_limit(workers: int) -> int:
    """Workers one cluster may hold while others are engaged: all but a quarter (at least one spare).

    1 worker: 1 (nothing to spare); 2: 1; 4: 3; 8: 6; 10: 7.
    """
    return max(1, workers - max(1, -(-workers // 4)))


def _merge(base: Any, override: Any) -> Any:
    """``base`` with every field that ``override`` sets (not None) taken from ``override``."""
    changes = {
        f.name: getattr(override, f.name)
        for f in fields(override)
        if getattr(override, f.name) is not None
    }
    return replace(base, **changes)


@dataclass(frozen=True)
class ControllerOptions:
    """How a controller works. ``None`` means: inherit (manager default, then built-in default).

    Set on the manager (``ManagerOptions.controller``) they are every
    controller's defaults; set through the builder they override for one. The numbers are
    checked when the controller is built: worker counts are ints, timeouts positive, finite
    seconds (a `TypeError` or `ValueError` naming the controller, the option and the value).
    """

    max_concurrent_reconciles: int | None = None
    #: most workers one cluster's requests may hold in a fleet: a manager with a provider,
    #: even while one cluster is engaged, or more than one engaged cluster (default:
    #: `default_per_cluster_limit`); a hung cluster can then never take them all
    max_concurrent_reconciles_per_cluster: int | None = None
    #: deadline of one reconcile (seconds): its client calls fail fast with
    #: `DeadlineExceeded` once it has passed, an `async def` reconcile is cancelled
    reconcile_timeout: float | None = None
    #: how long a request waits before a retry (None: controller-runtime's default: with the
    #: priority queue, per-request backoff from 5 ms doubling to 1000 s; without it, combined
    #: with a bucket of 10 retries a second, burst 100, which every cluster shares)
    rate_limiter: RateLimiter | None = None
    #: how long the controller's informers may take to sync on a cluster (seconds; None or 0:
    #: the manager's ``engage_sync_timeout``, 30 s), as controller-runtime's
    #: ``CacheSyncTimeout`` (whose default is 2 minutes): past it, the attempt to engage the
    #: cluster fails for this controller, said in a warning, and is retried with backoff
    #: while the other controllers engage it
    cache_sync_timeout: float | None = None
    #: False: a reconciler's exception stops the manager (``run()`` raises it) instead of a retry
    recover_panic: bool | None = None
    need_leader_election: bool | None = None
    #: False: every request has the same priority. By default (as controller-runtime's
    #: ``UsePriorityQueue``) the requests of an initial list and of a resync are queued at
    #: `LOW_PRIORITY`, after the changes made since
    use_priority_queue: bool | None = None
    #: True: a reconcile that fails (each retry logged as an error, or a `TerminalError`)
    #: posts a ``Warning`` Event ``ReconcileError`` about its object, in its cluster, as kopf
    #: does: ``kubectl describe`` then shows why. Off by default: the error's text goes to
    #: whoever may read the namespace's Events. Needs the builder's ``for_`` kind
    failure_events: bool | None = None

    def merged(self, override: ControllerOptions) -> ControllerOptions:
        return _merge(self, override)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class EngageOptions:
    """Which clusters a controller engages. ``None`` means: the default.

    ``local_cluster`` defaults to False when the manager has a provider and
    True without one, so the same reconciler runs single-cluster unchanged.
    ``provider_clusters`` defaults to True. ``cluster_filter(name)`` may veto a
    provider cluster.
    """

    local_cluster: bool | None = None
    provider_clusters: bool | None = None
    cluster_filter: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        refuse_coroutine_function(
            self.cluster_filter,
            "the cluster_filter",
            "it is called as each cluster is engaged and its coroutine would be true for "
            "every cluster: pass a plain function of the cluster's name returning a bool",
        )

    def merged(self, override: EngageOptions) -> EngageOptions:
        return _merge(self, override)  # type: ignore[no-any-return]
