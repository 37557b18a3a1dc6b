from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster

PROVIDER_API_VERSION = "1.0"

ClusterName: TypeAlias = str
IndexFunc: TypeAlias = Callable[[dict[str, Any]], "Iterable[str] | str | None"]


@runtime_checkable
class Aware(Protocol):
    """Something clusters can be engaged with: the manager, a controller.

    ``engage`` must return promptly (it may start work in the background) and be
    re-entrant. Engaging a name again with a different [`Cluster`][mcruntime.Cluster]
    replaces the earlier engagement. The engagement ends when ``lifetime`` is
    set; then everything started for it stops.
    """

    def engage(self, cluster_name: str, cluster: Cluster, lifetime: threading.Event, /) -> None: ...


@runtime_checkable
class Provider(Protocol):
    """Knows a set of clusters by name.

    ``get`` returns the cluster named ``cluster_name`` or raises
    [`ClusterNotFound`][mcruntime.errors.ClusterNotFound]; it must not block on I/O.
    ``index_field`` registers a field index on ``kind`` for every current and
    every future cluster of the provider. Both are thread-safe.
    """

    def get(self, cluster_name: str, /) -> Cluster: ...

    def index_field(self, kind: KindLike, field: str, fn: IndexFunc, /) -> None: ...


@runtime_checkable
class ProviderRunnable(Protocol):
    """A provider that discovers clusters over time.

    The manager calls ``start(aware, stop)`` in a thread of its own. It blocks,
    engaging clusters with ``aware`` as they appear and ending their lifetimes
    as they go, until ``stop`` is set; then it ends every lifetime it started
    and returns.
    """

    def start(self, aware: Aware, stop: threading.Event, /) -> None: ...
