"""Kind discovery on a cluster one of whose API groups is broken (an aggregated API whose
backend is dead: its discovery answers 503 or hangs): the other groups are unaffected."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.client import cancelled_by
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import DeadlineExceeded, NoKindMatch, ServerError
from tests._blocked import ended_at_once
from tests._brokengroup import GROUP, BrokenGroupProxy

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broken(make_envtest_server: Callable[..., Any]) -> Iterator[tuple[BrokenGroupProxy, Cluster]]:
    server = make_envtest_server("eu-1", tls=False)
    proxy = BrokenGroupProxy((server.host, server.port))
    cluster = Cluster.from_kubeconfig(proxy.kubeconfig(server), name="eu-1")
    try:
        yield proxy, cluster
    finally:
        proxy.close()  # (first: ends the hung requests)
        cluster.stop()


@pytest.fixture
def hung(broken: tuple[BrokenGroupProxy, Cluster]) -> Iterator[tuple[BrokenGroupProxy, Cluster]]:
    """``broken`` with its group hanging, and one call's discovery of it in flight."""
    proxy, cluster = broken
    proxy.mode = "hang"
    failed: list[BaseException] = []

    def first() -> None:
        try:
            cluster.uncached_client.list(f"{GROUP}/v1beta1/PodMetrics", "default", timeout=30)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=first, name="test/podmetrics")
    thread.start()
    try:
        wait_for(lambda: proxy.hits == 1, timeout=10, what="the hung discovery asked")
        yield proxy, cluster
    finally:
        proxy.close()
        thread.join(10)
    assert not thread.is_alive() and len(failed) == 1


def test_a_hung_group_does_not_hold_back_other_groups_lookups(
    hung: tuple[BrokenGroupProxy, Cluster],
) -> None:
    proxy, cluster = hung
    client = cluster.uncached_client
    began = time.monotonic()
    client.list("apps/v1/Deployment", namespace="default", timeout=10)
    client.list("batch/v1/Job", namespace="default", timeout=10)
    assert time.monotonic() - began < 5  # not held until the hung request ends
    # a second lookup of the hung group waits for the first request (none of its own),
    # and only within its own deadline, which it does not blame on its caller
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded) as err:
        client.list(f"{GROUP}/v1beta1/PodMetrics", namespace="default", timeout=1)
    assert time.monotonic() - began < 4
    assert proxy.hits == 1
    assert f"GET /apis/{GROUP}/v1beta1" in str(err.value)
    assert "another call's request for it, still in flight" in str(err.value)
    assert not err.value.by_caller


def test_a_failing_group_discovery_names_its_group_version(
    broken: tuple[BrokenGroupProxy, Cluster],
) -> None:
    _, cluster = broken
    with pytest.raises(ServerError) as err:
        cluster.uncached_client.list(f"{GROUP}/v1beta1/PodMetrics", namespace="default")
    assert err.value.status == 503
    assert str(err.value) == (
        f"[cluster eu-1] couldn't get resource list for {GROUP}/v1beta1 "
        f"(GET /apis/{GROUP}/v1beta1: 503): service unavailable "
        "(is its APIService available?)"
    )


@pytest.mark.parametrize("mode", ["503", "hang"])
def test_a_broken_group_leaves_the_other_groups_suggestions(
    broken: tuple[BrokenGroupProxy, Cluster], mode: str
) -> None:
    proxy, cluster = broken
    proxy.mode = mode
    began = time.monotonic()
    with pytest.raises(NoKindMatch) as err:
        cluster.uncached_client.mapping("apps/v1/Deploymnet")
    assert "did you mean 'apps/v1/Deployment'?" in str(err.value)
    assert time.monotonic() - began < 10  # a hung group holds the walk for its budget only


def test_a_wait_for_another_calls_discovery_ends_at_once_when_cut(
    hung: tuple[BrokenGroupProxy, Cluster],
) -> None:
    proxy, cluster = hung
    stop = threading.Event()

    def waiter() -> None:
        with cancelled_by(stop, "the test stopped it"):
            cluster.uncached_client.mapping(f"{GROUP}/v1beta1/PodMetrics")

    exc = ended_at_once(waiter, stop.set, "test/waiter")
    assert isinstance(exc, DeadlineExceeded) and exc.by_caller and not exc.sent
    assert str(exc).endswith(f"GET /apis/{GROUP}/v1beta1: cut: the test stopped it")
    assert proxy.hits == 1
