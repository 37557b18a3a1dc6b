"""Cluster against an embedded API server: built from a kubeconfig file, cache-backed reads, clean stop."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cache import CacheNotStarted
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import OperationResult, create_or_update
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterLeft, ConfigError, NotFound

pytestmark = pytest.mark.timeout(60)


def _threads_of(name: str) -> list[threading.Thread]:
    return [t for t in mcruntime_threads() if t.name.split("/")[2:3] == [name]]


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from mcruntime.envtest import APIServer

    srv = APIServer("fleet-a").start()
    yield srv
    srv.close()


@pytest.fixture
def kubeconfig_file(server: Any, tmp_path: Path) -> Path:
    path: Path = server.write_kubeconfig(tmp_path / "kubeconfig")
    return path


def _cm(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}


def test_from_kubeconfig_file_reads_through_the_cache_and_stops_cleanly(
    kubeconfig_file: Path,
) -> None:
    cluster = Cluster.from_kubeconfig(kubeconfig_file, name="eu-1")
    try:
        cluster.start()
        cluster.api_reader.get("v1/Namespace", "default")
        cluster.client.create(_cm("default", "cached"))
        # the first read starts an informer for ConfigMaps and waits for its initial list
        got = wait_for(lambda: _get_or_none(cluster, "cached"))
        assert got["metadata"]["name"] == "cached"
        assert cluster.wait_for_cache_sync(10)
        assert _threads_of("eu-1"), "an informer thread runs for the cluster"
        got["data"] = {"mutated": "locally"}
        assert "data" not in (cluster.client.get("v1/ConfigMap", "cached", "default") or {})
    finally:
        cluster.stop()
    assert cluster.stopped
    assert _threads_of("eu-1") == []
    cluster.stop()  # idempotent


def _get_or_none(cluster: Cluster, name: str, ns: str = "default") -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = cluster.client.get("v1/ConfigMap", name, ns)
        return obj
    except NotFound:
        return None


def test_uncached_kinds_read_from_the_api(server: Any) -> None:
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-2", uncached=["v1/Secret"])
    try:
        cluster.start()
        cluster.client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "namespace": "default"},
                "stringData": {"k": "v"},
            }
        )
        assert cluster.client.get("v1/Secret", "s", "default")["metadata"]["name"] == "s"
        assert _threads_of("eu-2") == []  # no informer was needed
    finally:
        cluster.stop()


@pytest.fixture
def limited(server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, str]]:
    """A started cluster (Secrets uncached) with 5 Secrets and 5 ConfigMaps in a namespace;
    lists come in pages of 2."""
    from mcruntime.client import _client as client_module

    monkeypatch.setattr(client_module, "DEFAULT_PAGE_SIZE", 2)
    ns = f"lim-{uuid.uuid4().hex[:6]}"
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-4", uncached=["v1/Secret"])
    try:
        cluster.uncached_client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        for i in range(5):
            for kind in ("Secret", "ConfigMap"):
                cluster.uncached_client.create(
                    {
                        "apiVersion": "v1",
                        "kind": kind,
                        "metadata": {"name": f"o{i}", "namespace": ns},
                    }
                )
        cluster.start()
        yield cluster, ns
    finally:
        cluster.stop()


def test_a_list_limit_of_an_uncached_kind_is_sent_as_the_lists_limit(
    limited: tuple[Cluster, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, ns = limited
    sent: list[tuple[str, Any]] = []
    request = cluster.rest.request

    def spy(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if path.endswith("/secrets"):
            sent.append((method, (kwargs.get("query") or {}).get("limit")))
        return request(method, path, *args, **kwargs)

    monkeypatch.setattr(cluster.rest, "request", spy)
    # one GET with limit=1, not the whole collection page by page, cut down after
    assert len(cluster.client.list("v1/Secret", ns, limit=1)) == 1
    assert sent == [("GET", 1)]
    assert len(cluster.client.list("v1/ConfigMap", ns, limit=2)) == 2  # cached: cut down


def test_a_list_limit_of_zero_or_below_is_no_limit_on_every_path(
    limited: tuple[Cluster, str],
) -> None:
    cluster, ns = limited
    for limit in (0, -1, -3):  # no limit, as in Kubernetes: not 4 of 5, nor none
        assert len(cluster.client.list("v1/ConfigMap", ns, limit=limit)) == 5  # the cache
        assert len(cluster.client.list("v1/Secret", ns, limit=limit)) == 5  # uncached kind
        assert len(cluster.uncached_client.list("v1/ConfigMap", ns, limit=limit)) == 5
        assert len(cluster.api_reader.list("v1/ConfigMap", ns, limit=limit)) == 5


def test_unsafe_disable_deep_copy_reads_share_the_cache_and_other_kinds_read_copies(
    server: Any,
) -> None:
    # as controller-runtime's UnsafeDisableDeepCopy: the client's reads of that kind are the
    # cache's own objects (no copy each); every other kind still reads copies a caller may change
    from mcruntime.cache import ByKind, CacheOptions

    ns = f"ucp-{uuid.uuid4().hex[:6]}"
    options = CacheOptions(by_kind={"v1/ConfigMap": ByKind(unsafe_disable_deep_copy=True)})
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-5", cache_options=options)
    try:
        uncached = cluster.uncached_client
        uncached.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        uncached.create(_cm(ns, "shared"))
        uncached.create(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "copied", "namespace": ns}}
        )
        cluster.start()
        client, cache = cluster.client, cluster.cache
        got = wait_for(lambda: _get_or_none(cluster, "shared", ns))
        assert got is cache.get("v1/ConfigMap", "shared", ns)
        assert client.get("v1/ConfigMap", "shared", ns) is got
        [listed] = client.list("v1/ConfigMap", ns)
        assert listed is got
        [meta] = client.list("v1/ConfigMap", ns, metadata_only=True)
        assert meta["metadata"] is cache.list("v1/ConfigMap", ns, metadata_only=True)[0]["metadata"]

        secret = client.get("v1/Secret", "copied", ns)
        assert secret is not cache.get("v1/Secret", "copied", ns)
        secret["metadata"]["labels"] = {"changed": "locally"}
        [listed_secret] = client.list("v1/Secret", ns)
        listed_secret["data"] = {"k": "dg=="}
        for read in (client.get("v1/Secret", "copied", ns), cache.get("v1/Secret", "copied", ns)):
            assert "labels" not in read["metadata"] and "data" not in read
    finally:
        cluster.stop()


def test_cache_options_are_checked_when_the_cluster_is_made(server: Any) -> None:
    # its cache is made on first use: a bad by_kind key failed every read of every kind
    from mcruntime.cache import ByKind, CacheOptions

    with pytest.raises(ValueError, match="CacheOptions.by_kind key 'Secret' names no kind"):
        Cluster.from_kubeconfig(
            server.kubeconfig(), cache_options=CacheOptions(by_kind={"Secret": ByKind()})
        )


def test_a_cluster_that_is_not_started_is_written_and_read_by_its_uncached_client(
    server: Any,
) -> None:
    # a script, a test's set-up: no manager, no cache; the cached client says what to use
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-3")
    try:
        with pytest.raises(CacheNotStarted, match="cluster.uncached_client reads the API"):
            cluster.client.get("v1/ConfigMap", "settings", "default")
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "default"},
        }
        assert (
            create_or_update(cluster.uncached_client, cm, lambda o: o.update(data={"k": "v"}))
            == OperationResult.CREATED
        )
        got = cluster.uncached_client.get("v1/ConfigMap", "settings", "default")
        assert got["data"] == {"k": "v"}
        assert cluster.uncached_client is cluster.uncached_client
        assert _threads_of("eu-3") == [], "no informer was started"
    finally:
        cluster.stop()


def test_lifetime_event_stops_the_cluster(server: Any) -> None:
    stop = threading.Event()
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="eu-3")
    cluster.start(stop)
    cluster.client.list("v1/ConfigMap", "default")
    assert _threads_of("eu-3")
    stop.set()
    wait_for(lambda: cluster.stopped)
    wait_for(lambda: _threads_of("eu-3") == [])
    with pytest.raises(RuntimeError, match="stopped"):
        cluster.start()


def test_repr_names_cluster_and_host_never_credentials(server: Any) -> None:
    cfg = server.kubeconfig()
    cluster = Cluster.from_kubeconfig(cfg, name="eu-4")
    try:
        text = repr(cluster)
        assert "eu-4" in text and "127.0.0.1" in text
        token = cluster.config.api_key.get("BearerToken") or cluster.config.api_key.get(
            "authorization"
        )
        if token:
            assert token.split()[-1] not in text
    finally:
        cluster.stop()


def test_bad_context_is_a_config_error(kubeconfig_file: Path) -> None:
    with pytest.raises(ConfigError, match="'nope'"):
        Cluster.from_kubeconfig(kubeconfig_file, context="nope")


def test_a_renamed_cluster_says_its_new_name_keeps_its_indexes_and_leaves_no_thread(
    envtest_server: Any,
) -> None:
    cluster = Cluster.from_kubeconfig(envtest_server.kubeconfig())  # unnamed: "local"
    cluster.cache.index_field("v1/ConfigMap", "data.k", lambda o: (o.get("data") or {}).get("k"))
    cluster.api_reader.list("v1/ConfigMap", "default")  # a connection of the old name open
    cluster.rename("m1")
    try:
        assert cluster.name == "m1" and repr(cluster).startswith("Cluster(name='m1'")
        with pytest.raises(NotFound, match=r"^\[cluster m1\] "):
            cluster.api_reader.get("v1/ConfigMap", "none", "default")
        assert [f for fields in cluster.cache.field_indexes().values() for f in fields] == [
            "data.k"
        ]
        cluster.start()
        with pytest.raises(RuntimeError, match="cannot be renamed m2: it was started"):
            cluster.rename("m2")
        assert all("/local" not in t.name for t in mcruntime_threads()), mcruntime_threads()
    finally:
        cluster.stop()


def test_a_client_taken_before_a_rename_works_under_the_old_name_until_the_cluster_stops(
    envtest_server: Any,
) -> None:
    # a program keeps hub.client (in its reconciler) and gives hub to Manager(hub), which
    # renames it to the local cluster's name: the client's calls failed with ClusterLeft,
    # which a controller drops quietly, so its reconciles did nothing and said nothing
    cluster = Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="hub")
    before, cached = cluster.uncached_client, cluster.client
    cluster.rename("")
    cluster.start()
    try:
        before.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "default"},
            }
        )
        cached.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "b", "namespace": "default"},
            }
        )
        with pytest.raises(NotFound, match=r"^\[cluster hub\] "):
            before.get("v1/ConfigMap", "none", "default")
        assert {"a", "b"} <= {o["metadata"]["name"] for o in before.list("v1/ConfigMap", "default")}
    finally:
        cluster.stop()
    with pytest.raises(ClusterLeft):
        before.list("v1/ConfigMap", "default")
    assert all("/hub" not in t.name for t in mcruntime_threads()), mcruntime_threads()


def test_clone_is_a_fresh_cluster_with_the_same_options_and_field_indexes(envtest_server) -> None:
    from mcruntime.cache import ByKind, CacheOptions

    opts = CacheOptions(by_kind={"v1/ConfigMap": ByKind(label_selector="a=b")})
    original = Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="c1", cache_options=opts)
    original.cache.index_field("v1/ConfigMap", "data.k", lambda o: (o.get("data") or {}).get("k"))
    original.start()
    original.stop()
    copy = original.clone()
    try:
        assert copy is not original and copy.name == "c1" and not copy.started
        assert copy.cache_options is opts
        assert [f for fields in copy.cache.field_indexes().values() for f in fields] == ["data.k"]
        copy.start()
        labels = {"a": "b"}
        copy.client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "default", "labels": labels},
                "data": {"k": "v"},
            }
        )
        found = wait_for(
            lambda: copy.cache.list("v1/ConfigMap", index=("data.k", "v")),
            timeout=10,
            what="the clone's field index to answer",
        )
        assert [o["metadata"]["name"] for o in found] == ["x"]
    finally:
        copy.stop()


def test_a_kubeconfig_given_to_cluster_is_refused_naming_from_kubeconfig() -> None:
    # Manager(kubeconfig_dict) takes a kubeconfig; Cluster(...) takes a Configuration: a dict
    # was an AttributeError about verify_ssl
    with pytest.raises(
        TypeError, match=r"takes a kubernetes.client.Configuration, not dict: .*from_kubeconfig"
    ):
        Cluster({"apiVersion": "v1", "kind": "Config"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Configuration, not int$"):
        Cluster(3)  # type: ignore[arg-type]
