"""A cluster started in a process that then forked: in the child, its cache has none of its
informers (threads of the parent's), so its reads say so. Before, they answered the objects of
the fork's moment for ever, however the cluster changed (a pre-fork server's workers serving
stale data from a manager started at import)."""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.connection import Connection

import pytest

from mcruntime.cache import CacheNotStarted
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer
from tests._forked import in_a_child

pytestmark = [
    pytest.mark.timeout(60),
    # forking a process with threads is what this test is about: Python 3.12+ warns of it
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]


def _child_reads(conn: Connection, cluster: Cluster) -> None:
    try:
        cluster.client.get("v1/Namespace", "default")
        conn.send("read")
    except CacheNotStarted as exc:
        # the API is still read without the cache
        cluster.uncached_client.get("v1/Namespace", "default")
        conn.send(str(exc))


def test_a_forked_childs_reads_of_a_cache_started_in_the_parent_say_so(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("forked", tls=False)
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="forked")
    cluster.start()
    try:
        assert cluster.client.get("v1/Namespace", "default")  # its informer runs, synced
        said = in_a_child(_child_reads, cluster)
        assert "cache of cluster forked was started in process " in said, said
        assert "which this process was forked from" in said and "uncached_client" in said, said
        assert cluster.client.get("v1/Namespace", "default")  # the parent's still reads
    finally:
        cluster.stop()
