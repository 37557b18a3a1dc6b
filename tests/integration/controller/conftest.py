"""Fixtures for controller tests: an embedded API server, a writer cluster, managers.

Everything runs over real HTTP with the real ``kubernetes`` client. The test
writes through its own (never started) [`Cluster`][mcruntime.cluster.Cluster], whose ``client``
writes to the API and whose ``api_reader`` reads from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime import Manager, ManagerOptions
from mcruntime.cluster import Cluster


@pytest.fixture
def srv(envtest_server: Any) -> Any:
    """A started embedded API server for one test."""
    return envtest_server


@pytest.fixture
def kube(srv: Any) -> Iterator[Cluster]:
    """The test's own writer: ``kube.client`` writes to the API, ``kube.api_reader`` reads it."""
    c = Cluster.from_kubeconfig(srv.kubeconfig(), name="test-writer")
    yield c
    c.stop()


@pytest.fixture
def make_manager(srv: Any) -> Iterator[Callable[..., Manager]]:
    """Managers on ``srv`` (stopped after the test unless the test stopped them)."""
    made: list[Manager] = []

    def make(**options: Any) -> Manager:
        options.setdefault("graceful_shutdown_timeout", 5.0)
        mgr = Manager(srv.kubeconfig(), options=ManagerOptions(**options))
        made.append(mgr)
        return mgr

    yield make
    for mgr in made:
        mgr.stop(5.0)
