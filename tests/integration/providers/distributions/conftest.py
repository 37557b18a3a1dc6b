"""Fixtures shared by the provider plugin tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import APIServer, WaitTimeout, wait_for

from ._support import ConfigMapManager, Running

#: the embedded API servers' shared loop thread lives as long as the servers, not the provider
_ENVTEST = "mcruntime/envtest/"


@pytest.fixture
def management(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    """The management cluster the kubeconfig and cluster-api providers discover clusters in."""
    return make_envtest_server("management")


@pytest.fixture
def run_provider() -> Iterator[Callable[[Any, Any], Running]]:
    """``run_provider(provider, aware)`` starts it; every one still running is stopped at teardown."""
    started: list[Running] = []

    def run(provider: Any, aware: Any) -> Running:
        r = Running(provider, aware)
        started.append(r)
        return r

    yield run
    for r in started:
        r.stop()


@pytest.fixture
def thread_baseline() -> Callable[[], None]:
    """Call the returned function after stopping everything: mcruntime threads are back to the start."""
    before = {t.name for t in mcruntime_threads()}

    def check() -> None:
        def leaked() -> list[str]:
            return sorted(
                t.name
                for t in mcruntime_threads()
                if t.name not in before and t.is_alive() and not t.name.startswith(_ENVTEST)
            )

        with contextlib.suppress(WaitTimeout):  # the assertion below names the leaked threads
            wait_for(lambda: not leaked(), timeout=10, interval=0.05)
        assert leaked() == []

    return check


@pytest.fixture
def configmap_manager() -> Iterator[Callable[[Any], ConfigMapManager]]:
    """``configmap_manager(provider)`` builds and starts one; stopped at teardown."""
    made: list[ConfigMapManager] = []

    def make(provider: Any) -> ConfigMapManager:
        m = ConfigMapManager(provider)
        made.append(m)
        m.mgr.start()
        return m

    yield make
    for m in made:
        m.mgr.stop()
