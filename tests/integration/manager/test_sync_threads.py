"""A cluster's controllers sync on threads of their own (`Manager._sync`): one whose sync ends
just as its cluster leaves, or as the manager stops, engages nothing, and no thread of the
cluster is left.

Each case holds one controller's sync until the cluster's lifetime ends (its informers synced
meanwhile), so its ``synced`` callback runs after the teardown began: the race of an engage
after the disengage, made certain.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions, _manager
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    cluster_of,
    configmap_controller,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)


def _held_sync(monkeypatch: pytest.MonkeyPatch, held: str) -> threading.Event:
    """Controller ``held``'s sync returns only once its cluster's lifetime ended, saying it
    synced; the event returned is set when it is held."""
    holding = threading.Event()
    sync_one = _manager.Manager._sync_one

    def hold(self: mcruntime.Manager, eng: Any, c: Any, *args: Any) -> bool:
        if not sync_one(self, eng, c, *args):
            return False
        if c.name == held:
            holding.set()
            eng.lifetime.wait(20)
        return True

    monkeypatch.setattr(_manager.Manager, "_sync_one", hold)
    return holding


@contextlib.contextmanager
def _held_in_eu_1(
    make_envtest_server: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[clusters.Provider, mcruntime.Manager, Any, Any]]:
    """A running manager with two controllers, ``fast`` and ``held``, and cluster ``eu-1``
    added: entered once ``held``'s sync of it is held."""
    server = make_envtest_server("eu-1")
    holding = _held_sync(monkeypatch, "held")
    provider = clusters.Provider()
    mgr = mcruntime.Manager(provider=provider, options=ManagerOptions(engage_sync_timeout=20))
    fast = configmap_controller(mgr, Recorder(), name="fast")
    held = configmap_controller(mgr, Recorder(), name="held")
    with running(mgr):
        provider.add("eu-1", cluster_of(server, "eu-1"))
        assert holding.wait(15), "the held controller's informers did not sync"
        yield provider, mgr, fast, held


def test_a_controller_synced_as_its_cluster_leaves_is_not_left_engaged(
    make_envtest_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _held_in_eu_1(make_envtest_server, monkeypatch) as (provider, mgr, fast, held):
        wait_for(lambda: fast.engaged_clusters() == ["eu-1"], what="fast engaged")
        assert held.engaged_clusters() == []
        provider.remove("eu-1")
        wait_for(lambda: not threads_for("eu-1"), timeout=10, what="no thread of eu-1 left")
        # its sync returned after the teardown: engaging it then would leave it engaged
        assert held.engaged_clusters() == []
        assert fast.engaged_clusters() == []
        assert mgr.engaged_clusters() == []


def test_the_manager_stops_at_once_while_a_controller_sync_is_held(
    make_envtest_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _held_in_eu_1(make_envtest_server, monkeypatch) as (_, mgr, fast, held):
        began = time.monotonic()
        mgr.stop(10)
        took = time.monotonic() - began
        assert took < 5, f"stop took {took:.1f}s"
        assert not threads_for("eu-1")
        assert held.engaged_clusters() == [] and fast.engaged_clusters() == []
