"""A process forked from one that uses a cluster (``os.fork``, multiprocessing's ``fork`` start
method, a pre-fork server's workers, a Celery-like prefork pool) talks to the cluster on
connections of its own, and leaves the parent's alone.

Before, the child inherited the parent's pooled keep-alive connections and used them: over
TLS both processes' calls failed (``bad record mac``, then 30 s without an answer), over plain
HTTP either could read the other's answer (another object); a child closing its clusters shut
the parent's connections down, watches included; a child's watches were handed to the parent's
watch reader thread, which is not in the child (no event ever came); and its async calls were
queued for the parent's call threads (never run).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

import pytest

from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from tests._forked import in_a_child

pytestmark = [
    pytest.mark.timeout(60),
    # forking a process with threads is what these tests are about: Python 3.12+ warns of it
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

_HAMMER_SECONDS = 1.5
#: per call: a call on a connection both processes use can wait its whole deadline
_CALL_TIMEOUT = 5.0


@pytest.fixture
def server(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    """A plain HTTP server (a connection both processes use fails later than over TLS)."""
    return make_envtest_server("forked", tls=False)


@pytest.fixture
def cluster(server: APIServer) -> Iterator[Cluster]:
    made = Cluster.from_kubeconfig(server.kubeconfig(), name="forked")
    yield made
    made.stop()


def _configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


def _get_own(cluster: Cluster, name: str, seconds: float) -> dict[str, int]:
    """GET ConfigMap ``name`` again and again for ``seconds``: how many answers were it, were
    another object, or failed."""
    counts = {"own": 0, "other": 0, "failed": 0}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            got = cluster.uncached_client.get(
                "v1/ConfigMap", name, "default", timeout=_CALL_TIMEOUT
            )
        except Exception:
            counts["failed"] += 1
            continue
        counts["own" if got["metadata"]["name"] == name else "other"] += 1
    return counts


def _child_gets_its_own(conn: Connection, cluster: Cluster) -> None:
    conn.send(_get_own(cluster, "child", _HAMMER_SECONDS))


def test_a_forked_child_and_its_parent_each_get_their_own_answers(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    server = make_envtest_server("forked")  # TLS: a shared connection fails at once
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="forked")
    try:
        for name in ("parent", "child"):
            cluster.uncached_client.create(_configmap(name))
        # an idle pooled connection when the child forks: each process takes it
        cluster.uncached_client.get("v1/ConfigMap", "parent", "default")
        parents: dict[str, int] = {}
        childs = in_a_child(
            _child_gets_its_own,
            cluster,
            meanwhile=lambda: parents.update(_get_own(cluster, "parent", _HAMMER_SECONDS)),
        )
        assert isinstance(childs, dict), childs
        assert childs["other"] == childs["failed"] == 0 and childs["own"] > 0, childs
        assert parents["other"] == parents["failed"] == 0 and parents["own"] > 0, parents
    finally:
        cluster.stop()


def _child_closes_its_cluster(conn: Connection, cluster: Cluster) -> None:
    cluster.stop()  # cuts every connection it has (as a manager's stop does)
    conn.send("stopped")


def test_a_forked_child_stopping_its_cluster_leaves_the_parents_watch_open(
    cluster: Cluster,
) -> None:
    stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps", timeout=30)
    events: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=lambda: events.extend(stream), name="test/parent-watch", daemon=True
    )
    reader.start()
    assert in_a_child(_child_closes_its_cluster, cluster) == "stopped"
    cluster.uncached_client.create(_configmap("after"))
    # the parent's watch goes on: the event of the object made after the child's stop comes
    wait_for(lambda: any(e["object"]["metadata"]["name"] == "after" for e in events), timeout=10)
    assert reader.is_alive(), "the parent's watch ended"
    stream.close()
    reader.join(5)


def _child_watches_on_its_own(conn: Connection, kubeconfig: dict[str, Any]) -> None:
    cluster = Cluster.from_kubeconfig(kubeconfig, name="child")
    try:
        stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps", timeout=30)
        got = threading.Event()

        def on_event(event: dict[str, Any]) -> None:
            if event["object"]["metadata"]["name"] == "made-by-child":
                got.set()

        # handed to the process's shared watch reader (as every informer's watch is)
        assert stream.start(on_event, lambda error: None), "not a stream the reader takes"
        cluster.uncached_client.create(_configmap("made-by-child"))
        conn.send("event" if got.wait(10) else "no event within 10 s")
        stream.close()
        stream.join(5)
    finally:
        cluster.stop()


def test_a_child_forked_while_a_watch_is_read_gets_the_events_of_its_own_watches(
    server: APIServer, cluster: Cluster
) -> None:
    # the parent's shared watch reader runs (it reads this stream) when the child forks
    stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps", timeout=30)
    assert stream.start(lambda event: None, lambda error: None)
    assert in_a_child(_child_watches_on_its_own, server.kubeconfig()) == "event"
    stream.close()
    stream.join(5)


async def _create_async(cluster: Cluster, name: str) -> str:
    """ConfigMap ``name`` made through the cluster's async client; its name as made."""
    made = await cluster.aclient.create(_configmap(name))
    return str(made["metadata"]["name"])


def _child_awaits_a_call(conn: Connection, cluster: Cluster) -> None:
    try:
        conn.send(asyncio.run(asyncio.wait_for(_create_async(cluster, "by-the-child"), 10)))
    except TimeoutError:
        conn.send("no answer within 10 s")


def test_a_forked_child_awaits_its_async_calls(cluster: Cluster) -> None:
    cluster.start()
    # the cluster's call threads run in the parent
    asyncio.run(_create_async(cluster, "by-the-parent"))
    # and one of them is idle (it says so just after its call's answer is handed over): the
    # pool then starts no thread for the next call, which it hands to the idle one
    pool = cluster._call_threads.executor()
    wait_for(lambda: pool is not None and pool._idle_semaphore._value > 0, timeout=5)
    assert in_a_child(_child_awaits_a_call, cluster) == "by-the-child"
