"""A manager's leader election: leader-only controllers work while it leads; losing it stops the manager."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from mcruntime._logfields import log_fields
from mcruntime._threads import start_thread, thread_name
from mcruntime.errors import ConfigError
from mcruntime.leaderelection import LeaderElector, default_namespace

if TYPE_CHECKING:
    from mcruntime.manager._manager import Manager

__all__ = ["ManagerLeadership", "check_options"]

log = logging.getLogger("mcruntime.leaderelection")


def check_options(manager: Manager) -> None:
    """Refuse a manager that asks for leader election without what it needs: a local cluster
    to hold the Lease and the Lease's name (`ConfigError`, when the manager is made)."""
    if manager.local is None:
        raise ConfigError(
            "leader_election=True needs a local cluster to hold the Lease: "
            "pass a config (kubeconfig, Configuration or Cluster) to Manager()"
        )
    if not manager.options.leader_election_id:
        raise ConfigError(
            "leader_election=True needs ManagerOptions.leader_election_id "
            "(the Lease name every replica of this controller manager shares)"
        )


class ManagerLeadership:
    """Runs ``manager``'s leader election on its local cluster (like controller-runtime).

    Controllers with ``need_leader_election`` start their workers only once
    this replica leads; their sources and caches run on every replica (warm
    standby: the queue is full when leadership arrives). When leadership is
    lost, those controllers are stopped at once, before the Lease can expire
    for the others, ``manager.leader_lost`` becomes True and the manager stops
    itself (its ``wait()`` returns). `release()` is for a clean stop: call
    it after the controllers stopped; it releases the Lease so the next leader
    starts at once.

    Raises [`ConfigError`][mcruntime.errors.ConfigError] when the manager has no local
    cluster or no ``leader_election_id``.
    """

    def __init__(self, manager: Manager) -> None:
        opts = manager.options
        check_options(manager)
        self.manager = manager
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        local = manager.local
        assert local is not None  # check_options refused a manager without a local cluster
        self.elector = LeaderElector(
            local,
            name=opts.leader_election_id,
            namespace=opts.leader_election_namespace or default_namespace(),
            lease_duration=opts.lease_duration,
            renew_deadline=opts.renew_deadline,
            retry_period=opts.retry_period,
            on_started_leading=self._started_leading,
            on_stopped_leading=self._stopped_leading,
        )
        manager.metrics.leading(opts.leader_election_id, False)

    @staticmethod
    def gated(controller: Any) -> bool:
        """True for a controller whose workers may run only on the leader."""
        return bool(getattr(controller, "need_leader_election", True))

    def start(self) -> None:
        """Start electing in a thread of its own (``mcruntime/leaderelection``)."""
        if self._thread is None:
            self._thread = start_thread(self._run, thread_name("leaderelection"))

    def _run(self) -> None:
        try:
            self.elector.run(self._stop)
        except Exception:
            log.exception("leaderelection failed", extra=self._fields())
            if not self._stop.is_set():
                self._lost()

    def _fields(self) -> dict[str, str]:
        """The fields of its lines (`log_fields`): the Lease and this replica's identity."""
        e = self.elector
        return log_fields(lease=f"{e.namespace}/{e.name}", identity=e.identity)

    def _started_leading(self) -> None:
        self.manager.metrics.leading(self.elector.name, True)
        for c in self.manager.controllers:
            if self.gated(c):
                c.start()
        self.manager._leading()  # leader-only runnables, then elected() is set

    def _stopped_leading(self) -> None:
        self.manager.metrics.leading(self.elector.name, False)
        if not self._stop.is_set():
            self._lost()

    def _lost(self) -> None:
        self.manager.metrics.leading(self.elector.name, False)
        self.manager.leader_lost = True
        grace = max(0.1, self.elector.lease_duration - self.elector.renew_deadline)
        for c in self.manager.controllers:
            if self.gated(c):
                c.stop(grace)
        self.manager._stop_leader_only(grace)
        log.error("leader election lost: stopping the manager", extra=self._fields())
        start_thread(self.manager.stop, thread_name("manager", None, "leader-lost"))

    def release(self, timeout: float, *, running: str | None = None) -> None:
        """End the election; the Lease is released if held. Call after leader-only work stopped.

        ``running`` names the leader-only work that did not stop in time (a reconcile past
        the graceful shutdown timeout): the Lease is then kept, said once, and expires, so
        the next leader does not start beside it.
        """
        elector = self.elector
        if running is not None and elector.is_leader():
            elector.release_on_cancel = False
            log.warning(
                "leaderelection lease=%s/%s identity=%s: not releasing the Lease: %s still "
                "running after the graceful shutdown timeout; the next leader takes over once "
                "it expires (within %gs)",
                elector.namespace,
                elector.name,
                elector.identity,
                running,
                elector.lease_duration,
                extra=self._fields(),
            )
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
