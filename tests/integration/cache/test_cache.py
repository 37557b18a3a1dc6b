"""Cache (one shared informer per kind) against a real embedded API server."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cache import (
    ByKind,
    Cache,
    CacheNotStarted,
    CacheOptions,
    CacheStopped,
    CacheSyncTimeout,
    ResourceNotCached,
)
from mcruntime.client import APIReader, GroupVersionKind, RESTClient, RESTMapper, kind_of
from mcruntime.envtest import wait_for
from mcruntime.errors import (
    BadRequest,
    DeadlineExceeded,
    MethodNotSupported,
    NoKindMatch,
    NotFound,
    SelectorError,
)
from tests._logs import logged
from tests.integration.cache._cache_helpers import Kube, Recorder

pytestmark = pytest.mark.timeout(60)

CM = "v1/ConfigMap"


@pytest.fixture
def make_cache(rest: RESTClient, mapper: RESTMapper) -> Iterator[Callable[..., Cache]]:
    made: list[Cache] = []

    def make(options: CacheOptions | None = None, *, start: bool = True) -> Cache:
        cache = Cache(rest, mapper, options=options, cluster_name="c1")
        made.append(cache)
        if start:
            cache.start()
        return cache

    yield make
    for cache in made:
        cache.stop()


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_one_shared_informer_per_kind_created_lazily(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    assert cache.informer_if_exists(CM) is None
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get_informer(CM))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(i) for i in results}) == 1
    inf = results[0]
    assert cache.get_informer(GroupVersionKind("", "v1", "ConfigMap")) is inf
    assert cache.informer_if_exists(CM) is inf
    assert cache.informers() == {GroupVersionKind("", "v1", "ConfigMap"): inf}
    assert inf.started
    assert cache.wait_for_cache_sync(10)


def test_informers_created_before_start_start_with_the_cache(
    make_cache: Callable[..., Cache],
) -> None:
    cache = make_cache(start=False)
    inf = cache.get_informer(CM)
    assert not inf.started and not cache.started
    with pytest.raises(CacheNotStarted):
        cache.list(CM)
    cache.start()
    cache.start()
    assert inf.started and cache.started
    assert cache.wait_for_cache_sync(10)


def test_a_field_selector_reads_pods_and_events_in_the_cache_as_the_api_server_does(
    kube: Kube, rest: RESTClient, make_cache: Callable[..., Cache]
) -> None:
    # the values kube's registries compute (an unset hostNetwork is "false", a Pod's first
    # IP, spec.host for spec.nodeName, an Event's source): the cache agreed with the server
    # only where the object held the value itself
    ns = kube.namespace()
    container = [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]

    def pod(name: str, **spec: Any) -> None:
        body = {"metadata": {"name": name}, "spec": {"containers": container, **spec}}
        rest.request("POST", f"/api/v1/namespaces/{ns}/pods", body=body)

    pod("bound", nodeName="node-a")
    pod("host", hostNetwork=True)
    pod("plain")
    ip = {"status": {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}]}}
    rest.request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/bound/status",
        body=ip,
        content_type="application/merge-patch+json",
    )
    for name, source in (("by-kubelet", {"source": {"component": "kubelet"}}), ("by-ctrl", {})):
        event = {
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "plain", "namespace": ns},
            "reportingComponent": "ctrl",
            **source,
        }
        rest.request("POST", f"/api/v1/namespaces/{ns}/events", body=event)
    cache = make_cache()
    assert cache.wait_for_cache_sync(10)
    cache.get_informer("v1/Pod")
    cache.get_informer("v1/Event")
    wait_for(lambda: len(cache.list("v1/Pod", ns)) == 3 and len(cache.list("v1/Event", ns)) == 2)
    wait_for(lambda: cache.get("v1/Pod", "bound", ns).get("status", {}).get("podIP"))

    def server(path: str, selector: str) -> list[str]:
        found = rest.request(
            "GET", f"/api/v1/namespaces/{ns}/{path}", query={"fieldSelector": selector}
        )
        return names(found["items"])

    for selector in (
        "spec.hostNetwork=false",
        "spec.hostNetwork=true",
        "spec.host=node-a",
        "status.podIP=10.0.0.7",
        "status.podIPs=",
        "spec.hostNetwork!=true,metadata.name!=bound",
    ):
        assert names(cache.list("v1/Pod", ns, fields=selector)) == server("pods", selector), (
            selector
        )
    assert names(cache.list("v1/Pod", ns, fields="spec.hostNetwork=false")) == ["bound", "plain"]
    for selector in ("source=kubelet", "source=ctrl", "reportingComponent=ctrl"):
        assert names(cache.list("v1/Event", ns, fields=selector)) == server("events", selector)
    assert names(cache.list("v1/Event", ns, fields="source=ctrl")) == ["by-ctrl"]
    # a path the server does not select on is still the object's own
    everything = ["bound", "host", "plain"]
    assert names(cache.list("v1/Pod", ns, fields="spec.dnsPolicy=ClusterFirst")) == everything


def test_get_and_list_read_the_cache(kube: Kube, make_cache: Callable[..., Cache]) -> None:
    ns, other = kube.namespace(), kube.namespace()
    kube.create(ns, "a", app="web")
    kube.create(ns, "b", app="db")
    kube.create(other, "c", app="web")
    cache = make_cache()
    assert cache.get(CM, "a", ns)["metadata"]["labels"] == {"app": "web"}
    assert names(cache.list(CM, ns)) == ["a", "b"]
    assert names(cache.list(CM, ns, labels="app=web")) == ["a"]
    assert names(cache.list(CM, ns, labels={"app": "db"})) == ["b"]
    assert {"a", "b", "c"} <= set(names(cache.list(CM)))
    assert names(cache.list(CM, fields={"metadata.name": "c"})) == ["c"]
    assert names(cache.list(CM, ns, fields="metadata.name!=a")) == ["b"]
    with pytest.raises(NotFound) as err:
        cache.get(CM, "missing", ns)
    assert 'configmaps "missing" not found' in str(err.value)
    assert err.value.name == "missing"

    kube.create(ns, "late")
    wait_for(lambda: "late" in names(cache.list(CM, ns)))
    kube.delete(ns, "a")
    wait_for(lambda: "a" not in names(cache.list(CM, ns)))
    with pytest.raises(NotFound):
        cache.get(CM, "a", ns)


def test_cluster_scoped_kind(kube: Kube, make_cache: Callable[..., Cache]) -> None:
    ns = kube.namespace()
    cache = make_cache()
    assert cache.get("v1/Namespace", ns)["metadata"]["name"] == ns
    assert ns in names(cache.list("v1/Namespace"))


def test_unknown_kind_is_a_clear_error(make_cache: Callable[..., Cache]) -> None:
    cache = make_cache()
    with pytest.raises(NoKindMatch):
        cache.get_informer("example.com/v1/Nope")


def test_field_index_serves_index_and_fields_lookups(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    ns, other = kube.namespace(), kube.namespace()
    kube.create(ns, "a", {"owner": "alice"})
    kube.create(ns, "b", {"owner": "bob"})
    kube.create(other, "c", {"owner": "alice"})
    cache = make_cache()

    def owner(obj: dict[str, Any]) -> str | None:
        return (obj.get("data") or {}).get("owner")

    cache.index_field(CM, "data.owner", owner)
    cache.index_field(CM, "data.owner", owner)
    with pytest.raises(ValueError, match="already indexed"):
        cache.index_field(CM, "data.owner", lambda o: None)

    assert names(cache.list(CM, index=("data.owner", "alice"))) == ["a", "c"]
    assert names(cache.list(CM, ns, index=("data.owner", "alice"))) == ["a"]
    assert names(cache.list(CM, other, fields={"data.owner": "alice"})) == ["c"]
    assert names(cache.list(CM, fields="data.owner!=alice,metadata.namespace=" + ns)) == ["b"]
    with pytest.raises(ValueError, match="index_field"):
        cache.list(CM, index=("data.nothing", "x"))
    # an index name in Go's style that was never registered is an error, not an empty list
    with pytest.raises(ValueError, match=r"no index for field '\.metadata\.controller'"):
        cache.list(CM, ns, fields={".metadata.controller": "owner"})
    cache.index_field(CM, ".data.owner", owner)
    assert names(cache.list(CM, ns, fields={".data.owner": "alice"})) == ["a"]

    kube.update(ns, "b", {"owner": "alice"})
    wait_for(lambda: names(cache.list(CM, ns, index=("data.owner", "alice"))) == ["a", "b"])
    assert cache.list(CM, index=("data.owner", "bob")) == []


def test_a_failing_index_function_is_logged_once_naming_the_cluster_kind_and_field(
    kube: Kube, make_cache: Callable[..., Cache], caplog: pytest.LogCaptureFixture
) -> None:
    ns = kube.namespace()
    for name in ("a", "b", "c"):
        kube.create(ns, name, {"owner": "alice"})
    cache = make_cache()
    # written for a typed view: index functions get dicts (a typed kind's too)
    cache.index_field(CM, "data.owner", lambda o: [o.data["owner"]])
    with caplog.at_level(logging.DEBUG, logger="mcruntime.cache"):
        assert cache.list(CM, ns, index=("data.owner", "alice")) == []  # left out, not raised
        assert cache.list(CM, ns, fields={"data.owner": "alice"}) == []
    errors = logged(caplog, logging.ERROR, logger="mcruntime.cache")
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        f"cluster=c1 cache: index 'data.owner' of v1/ConfigMap: the index function failed for {ns}/"
    )
    assert "AttributeError: 'dict' object has no attribute 'data'" in errors[0]
    assert "index functions get the object as a dict" in errors[0]
    assert "a list by 'data.owner' misses it" in errors[0]
    later = logged(caplog, logging.DEBUG, containing="index 'data.owner' of v1/ConfigMap still")
    assert len(later) >= 2


def test_field_index_registered_before_the_informer_exists(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", {"owner": "alice"})
    cache = make_cache()
    cache.index_field(CM, "owner", lambda o: [(o.get("data") or {}).get("owner", "")])
    assert cache.informer_if_exists(CM) is None
    assert names(cache.list(CM, ns, index=("owner", "alice"))) == ["a"]


def test_label_selected_kind(kube: Kube, make_cache: Callable[..., Cache]) -> None:
    ns = kube.namespace()
    kube.create(ns, "web", app="web")
    kube.create(ns, "db", app="db")
    cache = make_cache(CacheOptions(by_kind={CM: ByKind(label_selector="app=web")}))
    assert names(cache.list(CM, ns)) == ["web"]
    with pytest.raises(NotFound):
        cache.get(CM, "db", ns)


@pytest.mark.parametrize(
    ("labels", "fields"),
    [
        ({"app": "web,tier"}, None),  # a value that is no label value
        ({"tier!": "x"}, None),  # a key that is no label key
        ("app=web,", None),
        (",app=web", None),
        (None, "metadata.name in (web)"),
        (None, "metadata.name"),
        (None, {"metadata.name!": "web"}),  # a field path with an operator in it
    ],
)
def test_a_bad_selector_is_the_same_selector_error_on_the_cache_and_the_api_reader(
    kube: Kube,
    rest: RESTClient,
    mapper: RESTMapper,
    make_cache: Callable[..., Cache],
    labels: Any,
    fields: Any,
) -> None:
    ns = kube.namespace()
    kube.create(ns, "web", app="web", tier="x")
    cache = make_cache()
    with pytest.raises(SelectorError) as cached:
        cache.list(CM, ns, labels=labels, fields=fields)
    with pytest.raises(SelectorError) as api:  # refused before it is sent: no BadRequest
        APIReader(rest, mapper).list(CM, ns, labels=labels, fields=fields)
    assert str(api.value) == str(cached.value)
    assert isinstance(api.value, ValueError)


def test_a_field_selector_dict_value_is_escaped_on_the_api_path_as_the_cache_reads_it(
    kube: Kube, rest: RESTClient, mapper: RESTMapper, make_cache: Callable[..., Cache]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "web")
    cache = make_cache()
    # one term whose value holds a comma, not two terms
    fields = {"metadata.name": f"web,metadata.namespace={ns}"}
    assert cache.list(CM, ns, fields=fields) == []
    assert APIReader(rest, mapper).list(CM, ns, fields=fields) == []
    assert names(APIReader(rest, mapper).list(CM, ns, fields={"metadata.name": "web"})) == ["web"]


def test_a_by_kind_key_that_names_no_kind_is_refused_when_the_cache_is_made(
    kube: Kube, rest: RESTClient, mapper: RESTMapper
) -> None:
    # checked once, when made (as controller-runtime checks ByObject): not at every read of
    # every kind, which all failed on the one bad key
    with pytest.raises(ValueError, match="CacheOptions.by_kind key 'Secret' names no kind") as err:
        Cache(rest, mapper, options=CacheOptions(by_kind={"Secret": ByKind()}), cluster_name="c1")
    assert "did you mean 'v1/Secret'" in str(err.value)
    with pytest.raises(ValueError, match="names v1/Secret twice"):
        Cache(
            rest,
            mapper,
            options=CacheOptions(
                by_kind={"v1/Secret": ByKind(), GroupVersionKind("", "v1", "Secret"): ByKind()}
            ),
        )


def test_options_set_before_the_informers_are_made_are_checked_and_apply(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    # what a manager does to a provider cluster's cache made before its engagement
    ns = kube.namespace()
    kube.create(ns, "web", app="web")
    kube.create(ns, "db", app="db")
    cache = make_cache(start=False)
    with pytest.raises(ValueError, match="by_kind key 'ConfigMap' names no kind"):
        cache.options = CacheOptions(by_kind={"ConfigMap": ByKind()})
    cache.options = CacheOptions(by_kind={CM: ByKind(label_selector="app=web")})
    cache.start()
    assert names(cache.list(CM, ns)) == ["web"]


def test_list_page_size_sets_the_limit_of_each_page_of_the_informer_s_list(
    kube: Kube, rest: RESTClient, make_cache: Callable[..., Cache], monkeypatch: pytest.MonkeyPatch
) -> None:
    # client-go's WatchListPageSize: the cache's default for every kind, a kind's own over it
    a, b = kube.namespace(), kube.namespace()
    for i in range(5):
        kube.create(a, f"c{i}")
        kube.create(b, f"c{i}")
    asked: list[tuple[str, Any, bool]] = []
    real_request = rest.request

    def request(method: str, path: str, **kw: Any) -> Any:
        query = kw.get("query") or {}
        if method == "GET" and path.endswith(("/configmaps", "/namespaces")):
            asked.append((path.rsplit("/", 1)[1], query.get("limit"), bool(query.get("continue"))))
        return real_request(method, path, **kw)

    monkeypatch.setattr(rest, "request", request)
    cache = make_cache(
        CacheOptions(
            default_namespaces=[a, b],
            list_page_size=7,
            by_kind={CM: ByKind(list_page_size=2)},
        )
    )
    assert names(cache.list(CM, a)) == [f"c{i}" for i in range(5)]
    assert names(cache.list(CM, b)) == [f"c{i}" for i in range(5)]
    # 5 objects in pages of 2 in each of the two namespaces (listed at once): 3 requests each
    assert (
        sorted(x for x in asked if x[0] == "configmaps")
        == [
            ("configmaps", 2, False),
            ("configmaps", 2, False),
        ]
        + [("configmaps", 2, True)] * 4
    )
    cache.list("v1/Namespace")  # no options of its own: the cache's
    assert [x for x in asked if x[0] == "namespaces"][0] == ("namespaces", 7, False)


@pytest.mark.parametrize("size", [0, -1, 2.5, True, "500"])
def test_a_list_page_size_that_is_no_number_of_objects_is_refused_when_the_cache_is_made(
    rest: RESTClient, mapper: RESTMapper, size: Any
) -> None:
    with pytest.raises(ValueError, match=r"CacheOptions.list_page_size=.*1 or more"):
        Cache(rest, mapper, options=CacheOptions(list_page_size=size))
    with pytest.raises(
        ValueError,
        match=r"CacheOptions.by_kind\['v1/ConfigMap'\].list_page_size=.*whole number of objects",
    ):
        Cache(rest, mapper, options=CacheOptions(by_kind={CM: ByKind(list_page_size=size)}))


def test_namespace_restricted_cache(kube: Kube, make_cache: Callable[..., Cache]) -> None:
    a, b, c = kube.namespace(), kube.namespace(), kube.namespace()
    for ns in (a, b, c):
        kube.create(ns, f"cm-{ns}")
    cache = make_cache(CacheOptions(default_namespaces=[a, b]))
    inf = cache.get_informer(CM)
    rec = Recorder()
    inf.add_event_handler(rec)
    assert names(cache.list(CM)) == sorted([f"cm-{a}", f"cm-{b}"])
    assert names(cache.list(CM, b)) == [f"cm-{b}"]
    assert cache.get(CM, f"cm-{a}", a)["metadata"]["namespace"] == a
    with pytest.raises(ValueError, match="not cached"):
        cache.list(CM, c)
    kube.create(c, "ignored")
    kube.create(b, "seen")
    rec.wait(lambda ev: any(k == f"{b}/seen" for _, k, _, _ in ev))
    assert all(not k.startswith(f"{c}/") for _, k, _, _ in rec.snapshot())
    thread_names = {t.name for t in mcruntime_threads()}
    assert {
        f"mcruntime/informer/c1/ConfigMap/{a}",
        f"mcruntime/informer/c1/ConfigMap/{b}",
    } <= thread_names
    # namespaces do not restrict cluster-scoped kinds
    assert c in names(cache.list("v1/Namespace"))


def test_default_transform_and_per_kind_override(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a")

    def tag(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["annotations"] = {"t": "1"}
        return obj

    cache = make_cache(CacheOptions(by_kind={CM: ByKind(transform=tag)}))
    assert cache.get(CM, "a", ns)["metadata"]["annotations"] == {"t": "1"}
    assert all("managedFields" not in o["metadata"] for o in cache.list("v1/Namespace"))


def _strip_in_place(obj: dict[str, Any]) -> None:  # edits in place, forgets to return
    obj["metadata"].pop("annotations", None)


@pytest.mark.parametrize(
    ("transform", "said"),
    [
        (_strip_in_place, "transform _strip_in_place failed: it returned None, not the object"),
        (  # returns what it popped: the annotations dict
            lambda o: o["metadata"].pop("annotations", None),
            "transform <lambda> failed: it returned a dict that is not the object",
        ),
    ],
)
def test_a_transform_that_returns_no_object_is_logged_once_and_the_object_stored(
    kube: Kube,
    make_cache: Callable[..., Cache],
    caplog: pytest.LogCaptureFixture,
    transform: Callable[[dict[str, Any]], Any],
    said: str,
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", meta={"annotations": {"secret-ish": "value-1"}})
    kube.create(ns, "b", meta={"annotations": {"secret-ish": "value-2"}})
    cache = make_cache(CacheOptions(by_kind={CM: ByKind(transform=transform)}, sync_timeout=10))
    # read as the transform left them (edited in place), not CacheSyncTimeout nor a dict of
    # annotations stored as the object
    assert names(cache.list(CM, ns)) == ["a", "b"]
    assert "annotations" not in cache.get(CM, "a", ns)["metadata"]
    warnings = logged(caplog, logging.WARNING, containing="transform")
    assert len(warnings) == 1, warnings
    assert said in warnings[0] and "kind=v1/ConfigMap" in warnings[0]
    assert "value-1" not in warnings[0] and "value-2" not in warnings[0]


def test_a_transform_that_cannot_be_one_is_refused_when_the_cache_is_made(
    rest: RESTClient, mapper: RESTMapper
) -> None:
    async def strip(obj: dict[str, Any]) -> dict[str, Any]:
        return obj

    with pytest.raises(
        TypeError, match=r"by_kind\['v1/ConfigMap'\].transform .*strip is a coroutine"
    ):
        Cache(rest, mapper, options=CacheOptions(by_kind={CM: ByKind(transform=strip)}))
    with pytest.raises(TypeError, match="default_transform is a str, not a function"):
        Cache(rest, mapper, options=CacheOptions(default_transform="strip"))  # type: ignore[arg-type]


def test_stop_leaves_no_informer_thread(kube: Kube, make_cache: Callable[..., Cache]) -> None:
    ns = kube.namespace()
    cache = make_cache(CacheOptions(default_namespaces=[ns, kube.namespace()], resync=60))
    cache.get_informer(CM)
    cache.get_informer("v1/Namespace")
    assert cache.wait_for_cache_sync(10)
    assert any(t.name.startswith("mcruntime/informer/c1/") for t in mcruntime_threads())
    cache.stop()
    cache.stop()
    assert not [t.name for t in mcruntime_threads() if t.name.startswith("mcruntime/informer/c1/")]
    assert not cache.started
    with pytest.raises(CacheNotStarted):
        cache.get(CM, "x", ns)


def test_reads_of_synced_kinds_fail_once_the_cache_stops(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    """A synced kind is found in one lookup: stopping the cache must still end its reads."""
    ns = kube.namespace()
    kube.create(ns, "a")
    cache = make_cache()
    spellings = (CM, GroupVersionKind("", "v1", "ConfigMap"))
    for kind in spellings:
        assert cache.get(kind, "a", ns)["metadata"]["name"] == "a"
        assert names(cache.list(kind, ns)) == ["a"]
    assert cache.get(CM, "a", ns, metadata_only=True)["metadata"]["name"] == "a"
    cache.stop()
    for kind in spellings:
        with pytest.raises(CacheStopped):
            cache.get(kind, "a", ns)
        with pytest.raises(CacheStopped):
            cache.list(kind, ns)
    with pytest.raises(CacheStopped):
        cache.get(CM, "a", ns, metadata_only=True)


def test_stop_event_stops_the_cache(kube: Kube, rest: RESTClient, mapper: RESTMapper) -> None:
    stop = threading.Event()
    cache = Cache(rest, mapper, cluster_name="c1")
    cache.start(stop)
    cache.get_informer(CM)
    assert cache.wait_for_cache_sync(10)
    stop.set()
    wait_for(
        lambda: (
            not [
                t
                for t in mcruntime_threads()
                if t.name.startswith(("mcruntime/informer/c1/", "mcruntime/cache/c1"))
            ]
        )
    )
    assert not cache.started


def test_index_field_needs_no_reachable_server(make_envtest_server) -> None:
    from mcruntime.cluster import Cluster

    srv = make_envtest_server("down")
    cluster = Cluster.from_kubeconfig(srv.kubeconfig(), name="down")
    srv.stop()
    try:
        cluster.cache.index_field(
            "v1/ConfigMap", "data.k", lambda o: (o.get("data") or {}).get("k")
        )
        assert list(cluster.cache.field_indexes()) == [kind_of("v1/ConfigMap")]
        with pytest.raises(ValueError, match="already indexed"):
            cluster.cache.index_field("v1/ConfigMap", "data.k", lambda o: None)
    finally:
        cluster.stop()


def test_sync_timeout_bounds_the_discovery_of_a_kinds_first_read(
    envtest_server: Any, make_cache: Callable[..., Cache]
) -> None:
    # the first read of a kind the mapper has not discovered yet: a hung server fails it at
    # sync_timeout, not at the discovery request's own timeout (30 s)
    cache = make_cache(CacheOptions(sync_timeout=0.5))
    envtest_server.freeze()
    try:
        began = time.monotonic()
        with pytest.raises(CacheSyncTimeout) as err:
            cache.list("v1/Service", namespace="default")
        took = time.monotonic() - began
    finally:
        envtest_server.thaw()
    assert took < 5, took
    assert err.value.cluster_name == "c1"
    assert str(err.value).startswith(
        "[cluster c1] informer for v1/Service not synced after 0.5s: the discovery of its "
        "kind was not answered: "
    ), str(err.value)


def test_a_read_whose_informer_cannot_sync_names_its_cluster_and_why(
    envtest_server: Any, make_cache: Callable[..., Cache]
) -> None:
    # a hung server: the read ends at sync_timeout as a DeadlineExceeded of its cluster, so
    # a reconcile meeting it is handled as a cluster's failure, and says the list is unanswered
    envtest_server.freeze()
    try:
        cache = make_cache(CacheOptions(sync_timeout=0.5))
        with pytest.raises(CacheSyncTimeout) as err:
            cache.list(CM, namespace="default")
    finally:
        envtest_server.thaw()
    assert isinstance(err.value, DeadlineExceeded) and isinstance(err.value, TimeoutError)
    assert err.value.cluster_name == "c1"
    assert str(err.value) == (
        "[cluster c1] informer for v1/ConfigMap not synced after 0.5s: its list is not answered yet"
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (CacheOptions(default_label_selector="app in ("), "CacheOptions.default_label_selector"),
        (
            CacheOptions(by_kind={CM: ByKind(label_selector="app in (")}),
            "CacheOptions.by_kind['v1/ConfigMap'].label_selector",
        ),
        (
            CacheOptions(by_kind={CM: ByKind(field_selector="spec.foo")}),
            "CacheOptions.by_kind['v1/ConfigMap'].field_selector",
        ),
    ],
)
def test_a_selector_of_the_options_that_does_not_parse_is_refused_when_the_cache_is_made(
    rest: RESTClient, mapper: RESTMapper, options: CacheOptions, named: str
) -> None:
    # it was sent with every list of the kind's informer, refused by the server each time, and
    # every read of the kind waited sync_timeout for a sync that could not come
    with pytest.raises(SelectorError, match=re.escape(named) + ": invalid"):
        Cache(rest, mapper, options=options, cluster_name="c1")


def test_a_read_whose_list_the_server_refuses_as_a_bad_request_fails_at_once(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    # a field selector that parses but that the kind cannot select on: 400 from the server
    ns = kube.namespace()
    kube.create(ns, "a")
    cache = make_cache(
        CacheOptions(by_kind={CM: ByKind(field_selector="spec.foo=bar")}, sync_timeout=30)
    )
    for _ in range(2):  # as the refusal comes, and at once while it lasts
        started = time.monotonic()
        with pytest.raises(BadRequest) as refused:
            cache.list(CM, ns)
        assert time.monotonic() - started < 10, "waited for a sync that cannot come"
    said = str(refused.value)
    assert refused.value.cluster_name == "c1"
    assert "informer for v1/ConfigMap not synced" in said
    assert "field_selector='spec.foo=bar'" in said and "CacheOptions" in said
    assert "grant list and watch" not in said


def test_a_kind_its_api_cannot_list_and_watch_is_refused_at_once_without_an_informer(
    make_cache: Callable[..., Cache],
) -> None:
    # a review kind (create only) here; an aggregated API without watch (metrics.k8s.io's
    # get and list) the same: its informer would retry for ever, and each read of it wait
    # sync_timeout for a sync that cannot come
    cache = make_cache(CacheOptions(sync_timeout=30))
    sar = "authorization.k8s.io/v1/SubjectAccessReview"
    before = {t.name for t in mcruntime_threads()}
    for read in (lambda: cache.list(sar), lambda: cache.get(sar, "x")):
        started = time.monotonic()
        with pytest.raises(MethodNotSupported) as refused:
            read()
        assert time.monotonic() - started < 5, "waited for a sync that cannot come"
    assert str(refused.value) == (
        "[cluster c1] authorization.k8s.io/v1/SubjectAccessReview cannot be cached or watched: "
        "its API allows create, not list and watch; read it with the API reader "
        "(cluster.api_reader)"
    )
    assert cache.informer_if_exists(sar) is None
    assert {t.name for t in mcruntime_threads()} - before == set()


def test_a_transform_failing_for_some_objects_is_one_streak_until_none_fails(
    kube: Kube, make_cache: Callable[..., Cache], caplog: pytest.LogCaptureFixture
) -> None:
    # a transform that fails for some objects of a kind (those lacking what it reads): the
    # objects it works for in between are no recovery; it logged a warning with its traceback,
    # and a "works again" line, for each failing object of every list and every change of one
    ns = kube.namespace()
    for i in range(20):
        kube.create(ns, f"cm-{i:02d}", bad="yes" if i % 5 == 0 else "no")

    def picky(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"].get("labels", {}).get("bad") == "yes":
            raise KeyError("spec")
        return obj

    caplog.set_level(logging.INFO, logger="mcruntime.cache")
    cache = make_cache(CacheOptions(by_kind={CM: ByKind(transform=picky)}))
    assert len(cache.list(CM, ns)) == 20

    def said(level: int, containing: str) -> list[str]:
        return logged(caplog, level, containing=containing, logger="mcruntime.cache")

    failed = said(logging.WARNING, "picky failed")
    assert len(failed) == 1 and "cluster=c1" in failed[0] and "kind=v1/ConfigMap" in failed[0]

    kube.update(ns, "cm-00", {"k": "v"}, bad="no")  # fixed, while cm-05 ... still fail
    kube.update(ns, "cm-05", {"k": "v"}, bad="yes")  # changed, failing again
    kube.create(ns, "late", bad="no")
    wait_for(lambda: "late" in names(cache.list(CM, ns)), timeout=10)
    assert len(said(logging.WARNING, "picky failed")) == 1
    assert said(logging.INFO, "picky works again") == []

    kube.delete(ns, "cm-05")  # gone: nothing left to fail for it
    for name in ("cm-10", "cm-15"):
        kube.update(ns, name, {"k": "v"}, bad="no")
    wait_for(lambda: said(logging.INFO, "picky works again"), timeout=10)
    assert len(said(logging.INFO, "picky works again")) == 1

    kube.create(ns, "bad-again", bad="yes")  # a new streak: said again
    wait_for(lambda: len(said(logging.WARNING, "picky failed")) == 2, timeout=10)


@pytest.mark.parametrize("namespaces", [["", "NS"], ["NS", ""]])
def test_all_namespaces_among_others_caches_every_namespace(
    kube: Kube, make_cache: Callable[..., Cache], namespaces: list[str]
) -> None:
    # controller-runtime's DefaultNamespaces {cache.AllNamespaces: ..., "a": ...} caches every
    # namespace; "" was dropped, and only the others were cached
    a, b = kube.namespace(), kube.namespace()
    kube.create(a, "in-a")
    kube.create(b, "in-b")
    cache = make_cache(CacheOptions(default_namespaces=[a if n == "NS" else n for n in namespaces]))
    assert cache.get(CM, "in-b", b)["metadata"]["name"] == "in-b"
    assert {"in-a", "in-b"} <= set(names(cache.list(CM)))
    assert cache.get_informer(CM).namespaces == (None,)  # one watch of every namespace


def test_namespaces_of_a_cluster_scoped_kind_are_refused_naming_the_option(
    make_cache: Callable[..., Cache],
) -> None:
    # controller-runtime refuses ByObject.Namespaces of a cluster-scoped kind; every Namespace
    # was cached, silently, though the options said ["a"]
    cache = make_cache(CacheOptions(by_kind={"v1/Namespace": ByKind(namespaces=["a"])}))
    with pytest.raises(ValueError, match=r"by_kind\['v1/Namespace'\]\.namespaces=\['a'\]") as err:
        cache.list("v1/Namespace")
    assert "cluster-scoped in cluster c1" in str(err.value)
    assert cache.informers() == {}
    # every namespace ("" among them) and no namespace restrict nothing: accepted
    for namespaces in ([""], []):
        ok = make_cache(CacheOptions(by_kind={"v1/Namespace": ByKind(namespaces=namespaces)}))
        assert "default" in names(ok.list("v1/Namespace"))


@pytest.mark.parametrize(
    ("fn", "said"),
    [
        (lambda o: len(o["data"]), "it returned an int, not a str, a list of str, or None"),
        (lambda o: [len(o["data"])], "it returned a list holding an int, not a str"),
        (lambda o: {"n": "1"}, "it returned a dict, not a str"),
    ],
)
def test_an_index_function_returning_no_str_is_said_once_and_found_by_no_lookup(
    kube: Kube,
    make_cache: Callable[..., Cache],
    caplog: pytest.LogCaptureFixture,
    fn: Callable[[dict[str, Any]], Any],
    said: str,
) -> None:
    # [1] was found by index=("size", "1") (its text) but never by fields={"size": "1"} (1 is
    # not "1"), silently; 1 failed as "'int' object is not iterable", said to be a typed view
    ns = kube.namespace()
    kube.create(ns, "a", {"k": "v"})
    cache = make_cache()
    cache.index_field(CM, "size", fn)
    assert cache.list(CM, ns, index=("size", "1")) == []
    assert cache.list(CM, ns, fields={"size": "1"}) == []
    errors = logged(caplog, logging.ERROR, containing="index 'size' of v1/ConfigMap")
    assert len(errors) == 1, errors
    assert said in errors[0] and f"failed for {ns}/a" in errors[0]
    assert "typed view" not in errors[0] and "Traceback" not in caplog.text


def test_remove_informer_stops_it_and_a_later_read_lists_the_kind_again(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    # controller-runtime's RemoveInformer: a kind read once need not be held for the cluster's life
    ns = kube.namespace()
    kube.create(ns, "a")
    cache = make_cache()

    def informer_threads() -> set[str]:
        return {t.name for t in mcruntime_threads() if t.name.startswith("mcruntime/informer/c1/")}

    assert names(cache.list(CM, ns)) == ["a"]
    inf = cache.get_informer(CM)
    rec = Recorder()
    inf.add_event_handler(rec)
    assert cache.list(CM, ns, metadata_only=True)
    assert informer_threads() == {
        "mcruntime/informer/c1/ConfigMap",
        "mcruntime/informer/c1/ConfigMap/metadata",
    }

    assert cache.remove_informer(CM) is True
    assert inf.stopped and cache.informer_if_exists(CM) is None
    # its thread is joined; the metadata-only informer is another one
    assert informer_threads() == {"mcruntime/informer/c1/ConfigMap/metadata"}
    assert cache.remove_informer(CM) is False
    assert cache.remove_informer(CM, metadata_only=True) is True
    assert informer_threads() == set()

    kube.create(ns, "b")  # seen by a new informer, not by the removed one's handlers
    assert names(cache.list(CM, ns)) == ["a", "b"]
    again = cache.get_informer(CM)
    assert again is not inf and again.started and again.has_synced()
    assert all(k != f"{ns}/b" for _, k, _, _ in rec.snapshot())
    assert cache.remove_informer("example.com/v1/Widget") is False  # never read: no discovery


def test_reader_fail_on_missing_informer_refuses_reads_of_kinds_not_watched(
    kube: Kube, make_cache: Callable[..., Cache]
) -> None:
    # controller-runtime's ReaderFailOnMissingInformer: a fleet's reconciler reading a kind by
    # mistake does not start an informer (and hold the kind) on every cluster
    ns = kube.namespace()
    kube.create(ns, "a")
    cache = make_cache(CacheOptions(reader_fail_on_missing_informer=True))
    for read in (lambda: cache.get(CM, "a", ns), lambda: cache.list(CM, ns)):
        with pytest.raises(ResourceNotCached) as refused:
            read()
        assert not isinstance(refused.value, NotFound)
        assert refused.value.cluster_name == "c1" and refused.value.kind == kind_of(CM)
        assert str(refused.value).startswith("[cluster c1] v1/ConfigMap is not cached")
    assert cache.all_informers() == []

    cache.get_informer(CM)  # as a controller's watch does: reads are served from then on
    assert names(cache.list(CM, ns)) == ["a"]
    with pytest.raises(ResourceNotCached, match="no metadata-only informer"):
        cache.list(CM, ns, metadata_only=True)
    cache.remove_informer(CM)
    with pytest.raises(ResourceNotCached):
        cache.get(CM, "a", ns)
