"""What is no cluster name is refused by a provider before anything of it is kept or logged:
the empty name (the local cluster's) and names with control characters; a cluster the
manager refuses to engage is not kept either."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.errors import ClusterNotFound
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import cluster_of, running

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("name", ["", "x\nWARNING forged", "esc\x1b[2J"])
def test_a_name_that_is_no_cluster_name_is_refused_and_nothing_of_it_is_kept(
    make_envtest_fleet: Any, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcruntime")
    (member,) = make_envtest_fleet(1)
    provider = clusters.Provider()
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        cluster = cluster_of(member, "member")
        with pytest.raises(ValueError, match="empty cluster name|control characters") as err:
            provider.add(name, cluster)
        assert "\n" not in str(err.value)
        assert provider.names() == []
        with pytest.raises(ClusterNotFound):
            provider.get(name)
        assert mgr.engaged_clusters() == []
        assert not cluster.stopped  # still the caller's
    assert [r.getMessage() for r in caplog.records if " added" in r.getMessage()] == []


class _Refusing:
    """An Aware that refuses cluster ``m`` (as a coordinator may refuse a cluster) and
    engages the others."""

    def __init__(self) -> None:
        self.engaged = threading.Event()

    def engage(self, name: str, cluster: Cluster, lifetime: threading.Event) -> None:
        if name == "m":
            raise ValueError(f"cluster {name!r} refused")
        self.engaged.set()


def test_a_cluster_the_manager_refuses_is_not_kept(make_envtest_fleet: Any) -> None:
    """``Clusters.add`` rolls its entry back when ``engage`` raises: the provider does not
    list, return or later remove a cluster that was never engaged."""
    (member,) = make_envtest_fleet(1)
    provider = clusters.Provider()
    provider.add("first", cluster_of(member, "first"))
    aware, stop = _Refusing(), threading.Event()
    starter = threading.Thread(target=provider.start, args=(aware, stop), name="test/start")
    starter.start()
    try:
        assert aware.engaged.wait(10), "the provider did not start"
        cluster = cluster_of(member, "m")
        with pytest.raises(ValueError, match="'m' refused"):
            provider.add("m", cluster)
        assert provider.names() == ["first"]
        with pytest.raises(ClusterNotFound):
            provider.get("m")
        assert not cluster.stopped  # still the caller's
    finally:
        stop.set()
        starter.join(10)
    assert not starter.is_alive()
