"""Metadata-only informers and reads: objects' metadata alone, over the wire and in the cache."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cache import Cache
from mcruntime.client import (
    METADATA_ACCEPT,
    METADATA_LIST_ACCEPT,
    APIReader,
    AsyncClient,
    Client,
    GroupVersionKind,
    MetadataOnly,
    RESTClient,
    RESTMapper,
)
from mcruntime.errors import NotFound
from tests.integration.cache._cache_helpers import CONFIGMAPS, Kube, Recorder

pytestmark = pytest.mark.timeout(60)

CM = "v1/ConfigMap"
SECRET = "the-data-nobody-should-cache"


@pytest.fixture
def cache(rest: RESTClient, mapper: RESTMapper) -> Iterator[Cache]:
    c = Cache(rest, mapper, cluster_name="c1")
    c.start()
    yield c
    c.stop()


def test_the_accept_headers_ask_the_server_for_metadata_only(kube: Kube, rest: RESTClient) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"k": SECRET})
    listed = rest.request("GET", CONFIGMAPS.path(ns), accept=METADATA_LIST_ACCEPT)
    assert listed["kind"] == "PartialObjectMetadataList"
    one = rest.request("GET", CONFIGMAPS.path(ns, "a"), accept=METADATA_ACCEPT)
    assert one["kind"] == "PartialObjectMetadata" and "data" not in one


def test_a_metadata_only_informer_keeps_metadata_and_the_kind(kube: Kube, cache: Cache) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"k": SECRET}, app="web")
    inf = cache.get_informer(CM, metadata_only=True)
    rec = Recorder(lambda key: key.startswith(ns + "/"))
    inf.add_event_handler(rec)
    assert cache.wait_for_cache_sync(10)

    obj = cache.get(CM, "a", ns, metadata_only=True)
    assert set(obj) == {"apiVersion", "kind", "metadata"}
    assert (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap")
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert "managedFields" not in obj["metadata"]  # the default transform still runs

    kube.update(ns, "a", {"k": SECRET + "-2"}, app="api")
    rec.wait(lambda ev: [e[0] for e in ev] == ["add", "update"])
    kube.delete(ns, "a")
    rec.wait(lambda ev: ev[-1][0] == "delete")
    for _, seen in rec.objects:
        assert set(seen) == {"apiVersion", "kind", "metadata"}, seen
    assert all(SECRET not in repr(o) for o in inf.store.list())

    # a separate informer: the whole-object one is neither made nor used
    assert cache.informers() == {}
    assert cache.informers(metadata_only=True) == {GroupVersionKind("", "v1", "ConfigMap"): inf}
    assert cache.informer_if_exists(CM) is None
    assert cache.all_informers() == [inf]
    with pytest.raises(NotFound):
        cache.get(CM, "a", ns, metadata_only=True)


def test_whole_and_metadata_only_informers_of_a_kind_live_side_by_side(
    kube: Kube, rest: RESTClient, mapper: RESTMapper
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"k": SECRET}, app="web")
    cache = Cache(rest, mapper, cluster_name="c1")
    cache.start()
    try:
        assert cache.get(CM, "a", ns)["data"] == {"k": SECRET}
        assert "data" not in cache.get(CM, "a", ns, metadata_only=True)
        assert [o["metadata"]["name"] for o in cache.list(CM, ns, metadata_only=True)] == ["a"]
        assert cache.list(CM, ns, labels="app=db", metadata_only=True) == []
        threads = {t.name for t in mcruntime_threads()}
        assert "mcruntime/informer/c1/ConfigMap" in threads
        assert "mcruntime/informer/c1/ConfigMap/metadata" in threads
        assert len(cache.all_informers()) == 2
    finally:
        cache.stop()
    left = [t.name for t in mcruntime_threads() if t.name.startswith("mcruntime/informer/c1/")]
    assert left == []


def test_the_api_reader_reads_metadata_only_in_pages(
    kube: Kube, rest: RESTClient, mapper: RESTMapper
) -> None:
    ns = kube.namespace()
    for i in range(3):
        kube.create(ns, f"cm-{i}", {"k": SECRET})
    reader = APIReader(rest, mapper)
    one = reader.get(CM, "cm-0", ns, metadata_only=True)
    assert set(one) == {"apiVersion", "kind", "metadata"} and one["kind"] == "ConfigMap"
    listed = reader.list(CM, ns, limit=2, metadata_only=True)
    assert [o["metadata"]["name"] for o in listed] == ["cm-0", "cm-1"]
    assert all(set(o) == {"apiVersion", "kind", "metadata"} for o in listed)
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in listed)
    every = reader.list(CM, ns, metadata_only=True)
    assert len(every) == 3 and SECRET not in repr(every)


def test_a_metadata_only_read_is_patched_never_written_whole(
    kube: Kube, rest: RESTClient, mapper: RESTMapper
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"k": SECRET})
    client = Client(rest, mapper)
    obj = client.get(CM, "a", ns, metadata_only=True)
    assert isinstance(obj, MetadataOnly)
    obj["metadata"].setdefault("labels", {})["seen"] = "yes"
    for write in (
        client.update,
        client.create,
        lambda o: client.apply(o, field_manager="test"),
    ):
        with pytest.raises(TypeError, match="metadata-only read") as err:
            write(obj)
        # the error shows the call to make instead, in the client's argument order
        assert "client.patch(kind, name, {'metadata': {...}}, namespace, metadata_only=True)" in (
            str(err.value)
        )
    assert kube.get(ns, "a")["data"] == {"k": SECRET}  # nothing was sent
    client.patch(CM, "a", {"metadata": {"labels": {"seen": "yes"}}}, ns, metadata_only=True)
    after = kube.get(ns, "a")
    assert after["data"] == {"k": SECRET} and after["metadata"]["labels"] == {"seen": "yes"}
    assert all(isinstance(o, MetadataOnly) for o in client.list(CM, ns, metadata_only=True))


def test_the_async_client_reads_metadata_only_too(
    kube: Kube, rest: RESTClient, mapper: RESTMapper
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"k": SECRET})
    aclient = AsyncClient(Client(rest, mapper))

    async def read() -> tuple[Any, list[Any]]:
        one = await aclient.get(CM, "a", ns, metadata_only=True)
        return one, await aclient.list(CM, ns, metadata_only=True)

    one, listed = asyncio.run(read())
    assert isinstance(one, MetadataOnly) and one["kind"] == "ConfigMap"
    assert [o["metadata"]["name"] for o in listed] == ["a"] and SECRET not in repr(listed)


def test_a_metadata_only_list_says_field_indexes_are_not_for_it(kube: Kube, cache: Cache) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"k": SECRET}, app="web")
    cache.index_field(CM, "data.k", lambda o: (o.get("data") or {}).get("k"))
    assert [o["metadata"]["name"] for o in cache.list(CM, ns, index=("data.k", SECRET))] == ["a"]
    with pytest.raises(ValueError, match="field indexes serve whole-object informers only"):
        cache.list(CM, ns, index=("data.k", SECRET), metadata_only=True)
    listed = cache.list(CM, ns, fields={"metadata.name": "a"}, metadata_only=True)
    assert [o["metadata"]["name"] for o in listed] == ["a"]
    (inf,) = cache.informers(metadata_only=True).values()
    assert "field:data.k" not in inf.store.indexers()


def test_a_metadata_only_list_refuses_a_field_its_objects_do_not_hold(
    kube: Kube, rest: RESTClient, cache: Cache
) -> None:
    # a Pod's spec.nodeName is answered by the server (and a whole-object cache), but a
    # metadata-only object has no spec: the cache said [] for "=" and the Pod for "!="
    ns = kube.namespace()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
    }
    rest.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod)
    on_n1 = APIReader(rest, RESTMapper(rest)).list(
        "v1/Pod", ns, fields="spec.nodeName=n1", metadata_only=True
    )
    assert [o["metadata"]["name"] for o in on_n1] == ["p"]
    assert [o["metadata"]["name"] for o in cache.list("v1/Pod", ns, fields="spec.nodeName=n1")] == [
        "p"
    ]
    cache.index_field("v1/Pod", "node", lambda p: p["spec"].get("nodeName"))
    cache.index_field("v1/Pod", ".spec.node", lambda p: p["spec"].get("nodeName"))
    for fields, said in [
        ("spec.nodeName=n1", "field 'spec.nodeName' cannot be answered"),
        ("spec.nodeName!=n1", "field 'spec.nodeName' cannot be answered"),
        ({"node": "n1"}, "field indexes serve whole-object informers only"),
        ({".spec.node": "n1"}, "field indexes serve whole-object informers only"),
    ]:
        with pytest.raises(ValueError, match=said) as refused:
            cache.list("v1/Pod", ns, fields=fields, metadata_only=True)
        assert "v1/Pod" in str(refused.value) and "api_reader" in str(refused.value)
    # fields of the metadata are still selected in the cache
    listed = cache.list("v1/Pod", ns, fields={"metadata.name": "p"}, metadata_only=True)
    assert [o["metadata"]["name"] for o in listed] == ["p"]
