"""The clusters a reconcile's calls failed on, and those that answered them (below the client,
the cache and the controller).

A reconcile may catch a member's `Unreachable` and go on (copy to the other members,
write a summary, return). Its controller still learns which clusters failed it, and
runs it again at the first answer of each that the manager holds back (found not
answering: `Controller.resume_cluster`), not only when its ``requeue_after`` ends; one
the health check has not found silent yet, with backoff meanwhile.
Noted in the reconcile's context: an ``async def`` reconciler's tasks and
``asyncio.to_thread`` share it; a thread the reconciler starts itself does not.
"""

from __future__ import annotations

from contextvars import ContextVar, Token


class Met:
    """What one reconcile's calls met."""

    __slots__ = ("failed", "answered")

    def __init__(self) -> None:
        #: clusters a call failed to reach (refused, reset, no answer by its deadline, not
        #: sent or cut because the cluster was found not answering)
        self.failed: set[str] = set()
        #: clusters that answered a call with success (a 2xx or 3xx status): they work
        self.answered: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.failed)


_met: ContextVar[Met | None] = ContextVar("mcruntime_held_back", default=None)


def noting(into: Met) -> Token[Met | None]:
    """Note what the calls of the current context meet ``into`` (the controller's, around
    one reconcile); the token `stop_noting` takes."""
    return _met.set(into)


def stop_noting(token: Token[Met | None]) -> None:
    """End what `noting` began."""
    _met.reset(token)


def failed(cluster_name: str | None) -> None:
    """A call to ``cluster_name`` could not reach it (or the reconcile asked the manager,
    and it does not answer)."""
    into = _met.get()
    if into is not None and cluster_name is not None:
        into.failed.add(cluster_name)


def answered(cluster_name: str | None) -> None:
    """A call to ``cluster_name`` was answered with success."""
    into = _met.get()
    if into is not None and cluster_name is not None:
        into.answered.add(cluster_name)
