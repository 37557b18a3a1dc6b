"""LIST: label and field selectors, pagination, resourceVersion, all-namespaces."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiClient

from mcruntime.envtest import APIServer, wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    NO_SYSTEM,
    Raw,
    assert_status,
    assert_stop_ends_the_waiting_request,
    configmap,
    pod,
    raises_status,
    raw,
    rv,
    unique,
    user_names,
)

pytestmark = pytest.mark.timeout(30)

LABELS = {
    "a": {"env": "prod", "tier": "web"},
    "b": {"env": "dev", "tier": "web"},
    "c": {"env": "prod"},
    "d": {},
}


@pytest.fixture
def labelled(core: client.CoreV1Api, ns: str) -> str:
    """Creates configmaps a..d labelled as in LABELS plus ``set=conformance``."""
    for name, labels in LABELS.items():
        core.create_namespaced_config_map(
            ns, configmap(name, labels={"set": "conformance", **labels})
        )
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a", "c"]),
        ("env==prod", ["a", "c"]),
        ("env!=prod", ["b", "d"]),
        ("env in (prod,dev)", ["a", "b", "c"]),
        ("env notin (prod)", ["b", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("env=prod,tier=web", ["a"]),
        ("env=prod,!tier", ["c"]),
        ("env=staging", []),
        ("", ["a", "b", "c", "d"]),
    ],
)
def test_label_selector_filters_list(
    core: client.CoreV1Api, labelled: str, selector: str, expected: list[str]
) -> None:
    full = ",".join(filter(None, ["set=conformance", selector]))
    items = core.list_namespaced_config_map(labelled, label_selector=full).items
    assert sorted(i.metadata.name for i in items) == expected


def test_invalid_label_selector_is_bad_request(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(400, "BadRequest"):
        core.list_namespaced_config_map(ns, label_selector="env in prod")


_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer"


_LABEL_REFUSALS: list[tuple[str, str]] = [
    # between requirements (labels.Parse's loop)
    (",x", "found ',', expected: !, identifier, or 'end of string'"),
    ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("a=b!", "found '!', expected: ',' or 'end of string'"),
    ("x,,y", "found ',', expected: identifier after ','"),
    ("x,", "found '', expected: identifier after ','"),
    # within one
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("!(", "unable to parse requirement: found '(', expected: identifier"),
    ("-a=b", f'unable to parse requirement: <nil>: Invalid value: "-a": {_NAME_PART}'),
    (
        "a nott (b)",
        "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt",
    ),
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a in (=", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
    ("tier in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
    ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a in (,=", "unable to parse requirement: found '=', expected: ',', or identifier"),
    ("a=(", "unable to parse requirement: found '(', expected: identifier"),
    # the requirement read, checked (NewRequirement)
    ("k>x", f'unable to parse requirement: values[0]: Invalid value: "x": {_INTEGER}'),
    ("k>-1", f'unable to parse requirement: values[0][k]: Invalid value: "-1": {_LABEL_VALUE}'),
    (
        "k in (a,b-)",
        f'unable to parse requirement: values[1][k]: Invalid value: "b-": {_LABEL_VALUE}',
    ),
    (
        "k<x-",
        f'unable to parse requirement: [values[0]: Invalid value: "x-": {_INTEGER}, '
        f'values[0][k]: Invalid value: "x-": {_LABEL_VALUE}]',
    ),
]


def test_a_set_of_no_values_is_the_empty_value(core: client.CoreV1Api, ns: str) -> None:
    # labels.Parse reads "()" as the empty value: "a in ()" is "a in ("")", not a refusal
    for name, labels in (("empty", {"a": ""}), ("x", {"a": "x"}), ("none", {})):
        core.create_namespaced_config_map(ns, configmap(name, labels={"set": "in", **labels}))
    for selector, names in (("a in ()", ["empty"]), ("a notin ()", ["none", "x"])):
        items = core.list_namespaced_config_map(ns, label_selector=f"set=in,{selector}").items
        assert sorted(i.metadata.name for i in items) == names, selector


def test_field_selector_on_name_and_namespace(core: client.CoreV1Api, labelled: str) -> None:
    by_name = core.list_namespaced_config_map(labelled, field_selector="metadata.name=b").items
    assert [i.metadata.name for i in by_name] == ["b"]
    not_name = core.list_namespaced_config_map(
        labelled, field_selector=f"metadata.name!=b,{NO_SYSTEM}"
    ).items
    assert sorted(i.metadata.name for i in not_name) == ["a", "c", "d"]
    everywhere = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={labelled}"
    ).items
    assert sorted(user_names(everywhere)) == ["a", "b", "c", "d"]
    both = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={labelled},metadata.name=c", label_selector="env=prod"
    ).items
    assert [(i.metadata.namespace, i.metadata.name) for i in both] == [(labelled, "c")]


def test_unsupported_field_selector_is_bad_request(core: client.CoreV1Api, ns: str) -> None:
    # a kind without field labels of its own refuses in apimachinery's default words...
    with raises_status(400, "BadRequest") as status:
        core.list_namespaced_config_map(ns, field_selector="data.key=value")
    assert status["message"] == (
        '"data.key" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    # ...one with its own (pods: spec.nodeName, status.phase, ...) in its conversion's
    with raises_status(400, "BadRequest") as status:
        core.list_namespaced_pod(ns, field_selector="spec.priority=1")
    assert status["message"] == "field label not supported: spec.priority"


_FIELD_REFUSALS: list[tuple[str, str]] = [
    ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
    # the terms are read in sorted order: "a" before "metadata.name=x"
    ("metadata.name=x,a", "invalid selector: 'metadata.name=x,a'; can't understand 'a'"),
    ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
    ("metadata.name=a\\b", "invalid field selector: invalid escape sequence: \\b"),
    ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
    # nothing is trimmed: a field with a space is a field the kind does not know
    (
        "metadata.name =a",
        '"metadata.name " is not a known field selector: only "metadata.name", '
        '"metadata.namespace"',
    ),
    ("=a", '"" is not a known field selector: only "metadata.name", "metadata.namespace"'),
]


@pytest.mark.parametrize(
    ("parameter", "selector", "message"),
    [("labelSelector", *case) for case in _LABEL_REFUSALS]
    + [("fieldSelector", *case) for case in _FIELD_REFUSALS],
)
def test_a_selector_that_does_not_parse_is_refused_in_the_parsers_words(
    api: ApiClient, ns: str, parameter: str, selector: str, message: str
) -> None:
    resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", query=[(parameter, selector)])
    assert assert_status(resp, 400, "BadRequest")["message"] == message


def test_a_field_selector_value_is_compared_as_written(core: client.CoreV1Api, ns: str) -> None:
    # no space is trimmed from a value, and escaped "," "=" "\\" are the characters
    core.create_namespaced_config_map(ns, configmap("x"))
    assert core.list_namespaced_config_map(ns, field_selector="metadata.name= x").items == []
    named = core.list_namespaced_config_map(ns, field_selector="metadata.name=x").items
    assert [i.metadata.name for i in named] == ["x"]


@pytest.mark.parametrize("plural", ["nodes", "namespaces", "certificatesigningrequests", "gadgets"])
def test_a_cluster_scoped_kind_with_its_own_field_labels_refuses_metadata_namespace(
    api: ApiClient, widget_crds: dict[str, str], plural: str
) -> None:
    # Node, Namespace and CSR have field label conversions of their own, and so has every
    # custom resource: none of them takes metadata.namespace when cluster-scoped
    prefix = {
        "certificatesigningrequests": "/apis/certificates.k8s.io/v1",
        "gadgets": f"/apis/{widget_crds['group']}/v1",
    }.get(plural, "/api/v1")
    path = f"{prefix}/{plural}"
    refused = raw(api, "GET", path, query=[("fieldSelector", "metadata.namespace=default")])
    status = assert_status(refused, 400, "BadRequest")
    assert status["message"] == "field label not supported: metadata.namespace"
    by_name = raw(api, "GET", path, query=[("fieldSelector", "metadata.name=absent")])
    assert by_name.status == 200, by_name.data
    assert by_name.json()["items"] == []


def test_limit_and_continue_page_through_all_items_in_name_order(
    core: client.CoreV1Api, ns: str
) -> None:
    names = [f"page-{i}" for i in (3, 0, 4, 1, 2)]
    for name in names:
        core.create_namespaced_config_map(ns, configmap(name))
    pages: list[list[str]] = []
    token = None
    while True:
        page = core.list_namespaced_config_map(
            ns, limit=2, _continue=token, field_selector=NO_SYSTEM
        )
        pages.append([i.metadata.name for i in page.items])
        token = page.metadata.var_continue
        if not token:
            break
        assert page.metadata.remaining_item_count is None or page.metadata.remaining_item_count > 0
        assert len(pages) < 10
    assert pages == [["page-0", "page-1"], ["page-2", "page-3"], ["page-4"]]


def test_a_page_says_how_many_items_follow_when_nothing_is_filtered_out(
    core: client.CoreV1Api, ns: str
) -> None:
    # the etcd3 store sets remainingItemCount for a list without selectors (a count of
    # what follows the page); with a selector it cannot know it, and says nothing
    for i in range(5):
        core.create_namespaced_config_map(ns, configmap(f"count-{i}", labels={"set": "count"}))
    total = len(core.list_namespaced_config_map(ns).items)  # a namespace's own ConfigMaps too
    first = core.list_namespaced_config_map(ns, limit=2)
    assert first.metadata.remaining_item_count == total - 2
    second = core.list_namespaced_config_map(ns, limit=2, _continue=first.metadata.var_continue)
    assert second.metadata.remaining_item_count == total - 4
    selected = core.list_namespaced_config_map(ns, limit=2, label_selector="set=count")
    assert selected.metadata.var_continue and selected.metadata.remaining_item_count is None


def test_pages_are_a_consistent_snapshot(core: client.CoreV1Api, ns: str) -> None:
    for name in ("p-1", "p-2", "p-3"):
        core.create_namespaced_config_map(ns, configmap(name))
    first = core.list_namespaced_config_map(ns, limit=1, field_selector=NO_SYSTEM)
    core.create_namespaced_config_map(ns, configmap("p-4"))
    core.patch_namespaced_config_map("p-3", ns, {"data": {"key": "changed"}})
    rest = core.list_namespaced_config_map(
        ns, _continue=first.metadata.var_continue, field_selector=NO_SYSTEM
    )
    assert [i.metadata.name for i in rest.items] == ["p-2", "p-3"]
    assert rest.items[1].data == {"key": "value"}
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_list_resource_version_is_at_least_every_item_and_grows(
    core: client.CoreV1Api, ns: str
) -> None:
    for _ in range(3):
        core.create_namespaced_config_map(ns, configmap(unique("cm")))
    listed = core.list_namespaced_config_map(ns)
    assert listed.metadata.resource_version.isdigit()
    assert all(rv(i) <= int(listed.metadata.resource_version) for i in listed.items)
    core.create_namespaced_config_map(ns, configmap(unique("cm")))
    again = core.list_namespaced_config_map(ns)
    assert int(again.metadata.resource_version) > int(listed.metadata.resource_version)


def test_list_with_resource_version_zero_returns_items(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name))
    listed = core.list_namespaced_config_map(ns, resource_version="0")
    assert name in [i.metadata.name for i in listed.items]


OLD = ("old-0", "old-1", "old-2", "old-3")


def _names(body: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def _then_and_changed(core: client.CoreV1Api, ns: str) -> str:
    """Creates old-0..old-2, returns the resourceVersion of that state, then adds old-3 and
    changes old-0."""
    for name in ("old-0", "old-1", "old-2"):
        core.create_namespaced_config_map(ns, configmap(name))
    then: str = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, configmap("old-3"))
    core.patch_namespaced_config_map("old-0", ns, {"data": {"key": "changed"}})
    return then


def test_a_paged_list_at_an_older_resource_version_is_the_collection_as_it_was_then(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # a limit with a resourceVersion and no match (the legacy semantics: Exact) is read from
    # etcd at that revision and stamped with it, and its continue token keeps it
    then = _then_and_changed(core, ns)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    query = [("limit", "2"), ("fieldSelector", NO_SYSTEM)]
    first = raw(api, "GET", path, query=[("resourceVersion", then), *query])
    assert first.status == 200, first.data
    page = first.json()
    assert _names(page) == ["old-0", "old-1"]
    assert page["items"][0]["data"] == {"key": "value"}  # not yet changed at `then`
    assert page["metadata"]["resourceVersion"] == then and page["metadata"]["continue"]
    rest = raw(api, "GET", path, query=[("continue", page["metadata"]["continue"]), *query])
    assert rest.status == 200, rest.data
    assert _names(rest.json()) == ["old-2"]  # old-3 came later
    assert rest.json()["metadata"]["resourceVersion"] == then
    assert not rest.json()["metadata"].get("continue")


def test_an_exact_list_at_an_older_resource_version_is_the_collection_as_it_was_then(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    then = _then_and_changed(core, ns)
    query = [("resourceVersion", then), ("resourceVersionMatch", "Exact")]
    resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", query=query)
    assert resp.status == 200, resp.data
    body = resp.json()
    old = {i["metadata"]["name"]: i for i in body["items"] if i["metadata"]["name"] in OLD}
    assert sorted(old) == ["old-0", "old-1", "old-2"]
    assert old["old-0"]["data"] == {"key": "value"}
    assert body["metadata"]["resourceVersion"] == then


def test_a_list_at_resource_version_zero_ignores_its_limit(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # resourceVersion=0 is served by the watch cache, which ignores a limit there
    # (cacher's computeListLimit): one answer, no continue token (client-go's reflector
    # relies on it: "watch cache is ignoring Limit in that case anyway")
    for name in ("zero-0", "zero-1", "zero-2"):
        core.create_namespaced_config_map(ns, configmap(name))
    query = [("resourceVersion", "0"), ("limit", "1"), ("fieldSelector", NO_SYSTEM)]
    path = f"/api/v1/namespaces/{ns}/configmaps"

    def listed() -> dict[str, Any] | None:
        resp = raw(api, "GET", path, query=query)
        assert resp.status == 200, resp.data
        body: dict[str, Any] = resp.json()
        assert not body["metadata"].get("continue"), body["metadata"]
        assert "remainingItemCount" not in body["metadata"]
        return body if len(body["items"]) == 3 else None  # (a cache a moment behind)

    assert _names(wait_for(listed)) == ["zero-0", "zero-1", "zero-2"]


def test_a_list_at_a_compacted_resource_version_is_gone(
    api: ApiClient, core: client.CoreV1Api, ns: str, kube_backend: KubeBackend
) -> None:
    # etcd's ErrCompacted, for an Exact list and a page of the legacy match alike (a real
    # cluster compacts every five minutes: only the embedded server can compact at once)
    server = kube_backend.require_server()
    then = _then_and_changed(core, ns)
    server.compact()
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for query in (
        [("resourceVersion", then), ("resourceVersionMatch", "Exact")],
        [("resourceVersion", then), ("limit", "2")],
    ):
        body = assert_status(raw(api, "GET", path, query=query), 410, "Expired")
        assert body["message"] == "The resourceVersion for the provided list is too old.", body


#: how long kube-apiserver's watch cache waits for a resourceVersion it has not reached
FRESH_WAIT = 3.0
TOO_LARGE_CAUSES = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]


def _current_rv(core: client.CoreV1Api, ns: str) -> int:
    return int(core.list_namespaced_config_map(ns).metadata.resource_version)


def test_a_read_asking_for_a_resource_version_not_reached_times_out_after_three_seconds(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # the watch cache waits up to 3 s for it (waitUntilFreshAndBlock), then a 504 with the
    # ResourceVersionTooLarge cause: for a list with NotOlderThan or no match, and a get
    core.create_namespaced_config_map(ns, configmap("there"))
    current = _current_rv(core, ns)
    asked = current + 1_000_000
    path = f"/api/v1/namespaces/{ns}/configmaps"
    reads = {
        "not-older": (path, [("resourceVersionMatch", "NotOlderThan")]),
        "legacy": (path, []),
        "get": (f"{path}/there", []),
    }

    def timed(url: str, query: list[tuple[str, str]]) -> tuple[Raw, float]:
        began = time.monotonic()
        resp = raw(api, "GET", url, query=[("resourceVersion", str(asked)), *query], timeout=20)
        return resp, time.monotonic() - began

    with ThreadPoolExecutor(len(reads)) as pool:
        answers = {k: pool.submit(timed, url, q) for k, (url, q) in reads.items()}
        for what, answer in answers.items():
            resp, took = answer.result(timeout=25)
            body = assert_status(resp, 504, "Timeout")
            prefix = f"Timeout: Too large resource version: {asked}, current: "
            assert body["message"].startswith(prefix), (what, body)
            assert current <= int(body["message"][len(prefix) :]) < asked, (what, body)
            assert body["details"] == {"causes": TOO_LARGE_CAUSES, "retryAfterSeconds": 1}
            assert resp.headers["Retry-After"] == "1"
            assert FRESH_WAIT - 0.1 <= took < FRESH_WAIT + 5, (what, took)


def test_a_list_waits_for_the_write_that_reaches_its_resource_version(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    current = _current_rv(core, ns)
    query = [("resourceVersion", str(current + 1)), ("resourceVersionMatch", "NotOlderThan")]
    path = f"/api/v1/namespaces/{ns}/configmaps"
    with ThreadPoolExecutor(1) as pool:
        began = time.monotonic()
        pending = pool.submit(raw, api, "GET", path, query=query, timeout=20)
        core.create_namespaced_config_map(ns, configmap(unique("cm")))
        resp = pending.result(timeout=25)
    assert resp.status == 200, resp.data
    assert time.monotonic() - began < FRESH_WAIT
    assert int(resp.json()["metadata"]["resourceVersion"]) >= current + 1


def test_stop_ends_a_read_waiting_for_a_resource_version_not_reached(
    kube_backend: KubeBackend, make_envtest_server: Callable[..., APIServer]
) -> None:
    kube_backend.require_server()
    server = make_envtest_server("fresh")
    with config.new_client_from_config_dict(server.kubeconfig()) as api:
        api.configuration.retries = 0
        asked = int(server.resource_version) + 1000
        query = [("resourceVersion", str(asked)), ("resourceVersionMatch", "NotOlderThan")]
        assert_stop_ends_the_waiting_request(
            server, lambda: raw(api, "GET", "/api/v1/namespaces/default/configmaps", query=query)
        )


@pytest.mark.parametrize("value", ["abc", "-1", "1e3", "18446744073709551616"])
def test_a_resource_version_that_is_not_a_number_is_refused(
    api: ApiClient, ns: str, value: str
) -> None:
    # APIObjectVersioner.ParseResourceVersion: a uint64. A list answers 400 from kube-apiserver
    # 1.33 (storage's ValidateListOptions), the error as it is (a 500) before; a get a 500
    why = "value out of range" if value.isdigit() else "invalid syntax"
    error = (
        f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": {why}'
    )
    path = f"/api/v1/namespaces/{ns}/configmaps"
    listed = raw(api, "GET", path, query=[("resourceVersion", value)])
    if listed.status == 400:
        assert listed.json()["message"] == f"invalid resource version: {error}"
        assert listed.json()["reason"] == "BadRequest"
    else:
        assert (listed.status, listed.json()["message"]) == (500, error)
    got = raw(api, "GET", f"{path}/absent", query=[("resourceVersion", value)])
    assert got.status == 500, got.data
    assert "reason" not in got.json()
    assert got.json()["message"] == error


def test_an_exact_list_of_a_resource_version_not_reached_is_refused_at_once(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # read from etcd at that revision, not the watch cache: no wait. etcd's "future revision"
    # became the 504 of the watch cache in kube-apiserver 1.34 (a 500 before), with no retry
    current = _current_rv(core, ns)
    asked = current + 1_000_000
    query = [("resourceVersion", str(asked)), ("resourceVersionMatch", "Exact")]
    began = time.monotonic()
    resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", query=query)
    assert time.monotonic() - began < FRESH_WAIT - 1
    if resp.status == 504:
        body = assert_status(resp, 504, "Timeout")
        assert body["message"].startswith(f"Timeout: Too large resource version: {asked}, ")
        assert body["details"] == {"causes": TOO_LARGE_CAUSES}
        assert "Retry-After" not in resp.headers
    else:
        assert resp.status == 500, resp.data


def test_list_is_typed_as_list_kind(api: ApiClient, ns: str) -> None:
    body = raw(
        api, "GET", f"/api/v1/namespaces/{ns}/configmaps", query=[("fieldSelector", NO_SYSTEM)]
    ).json()
    assert body["kind"] == "ConfigMapList"
    assert body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"].isdigit()
    assert body["items"] == []


def test_all_namespaces_list_spans_namespaces(core: client.CoreV1Api, ns: str) -> None:
    other = core.create_namespace({"metadata": {"name": unique("other")}}).metadata.name
    marker = unique("mark")
    try:
        core.create_namespaced_config_map(ns, configmap("x", labels={"mark": marker}))
        core.create_namespaced_config_map(other, configmap("x", labels={"mark": marker}))
        items = core.list_config_map_for_all_namespaces(label_selector=f"mark={marker}").items
        assert sorted(i.metadata.namespace for i in items) == sorted([ns, other])
        only = core.list_namespaced_config_map(other, label_selector=f"mark={marker}").items
        assert [i.metadata.namespace for i in only] == [other]
    finally:
        core.delete_namespace(other)


def test_cluster_scoped_list_contains_created_namespace(core: client.CoreV1Api, ns: str) -> None:
    names = [
        n.metadata.name for n in core.list_namespace(field_selector=f"metadata.name={ns}").items
    ]
    assert names == [ns]


def test_field_selector_on_a_services_type_and_cluster_ip(core: client.CoreV1Api, ns: str) -> None:
    def service(name: str, **spec: Any) -> Any:
        port = {"port": 80, "targetPort": 8080}
        body = {"metadata": {"name": name}, "spec": {"ports": [port], **spec}}
        return core.create_namespaced_service(ns, body)

    inside = service("inside")
    service("outside", type="NodePort")
    service("headless", clusterIP="None")

    def names(selector: str) -> list[str]:
        items = core.list_namespaced_service(ns, field_selector=selector).items
        return sorted(i.metadata.name for i in items)

    assert names("spec.type=NodePort") == ["outside"]
    assert names("spec.type=ClusterIP") == ["headless", "inside"]
    assert names(f"spec.clusterIP={inside.spec.cluster_ip}") == ["inside"]
    assert names("spec.clusterIP=None,spec.type!=NodePort") == ["headless"]


def test_field_selector_on_a_pods_fields_as_its_registry_computes_them(
    core: client.CoreV1Api, ns: str
) -> None:
    # pkg/registry/core/pod/strategy.go ToSelectableFields: hostNetwork unset is "false",
    # status.podIP the first IP; status.podIPs is a label the server accepts (conversion.go)
    # but no selectable field, so it compares as ""; spec.host is spec.nodeName's old name
    core.create_namespaced_pod(ns, pod("bound", nodeName="node-a"))
    core.create_namespaced_pod(ns, pod("host", hostNetwork=True))
    core.create_namespaced_pod(ns, pod("plain"))
    ip = {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}]}
    core.patch_namespaced_pod_status("bound", ns, {"status": ip})

    def names(selector: str) -> list[str]:
        return sorted(
            p.metadata.name for p in core.list_namespaced_pod(ns, field_selector=selector).items
        )

    assert names("spec.host=node-a") == names("spec.nodeName=node-a") == ["bound"]
    assert names("spec.hostNetwork=true") == ["host"]
    assert names("spec.hostNetwork=false") == ["bound", "plain"]
    assert names("status.podIP=10.0.0.7") == ["bound"]
    assert names("status.podIPs=10.0.0.7") == []
    assert names("status.podIPs=") == names("status.podIPs!=10.0.0.7") == ["bound", "host", "plain"]


def test_field_selector_on_an_events_source_reads_its_component(
    core: client.CoreV1Api, ns: str
) -> None:
    # pkg/registry/core/event/strategy.go GetAttrs: "source" is source.component, else the
    # reportingComponent (an Event written through events.k8s.io/v1 has no source)
    def event(name: str, **fields: Any) -> None:
        involved = {"kind": "ConfigMap", "name": "cfg", "namespace": ns}
        meta = {"name": name}
        body = {"metadata": meta, "involvedObject": involved, "reason": "R", **fields}
        core.create_namespaced_event(ns, body)

    event("by-kubelet", source={"component": "kubelet", "host": "node-a"})
    event("by-controller", reportingComponent="ctrl", reportingInstance="ctrl-0")
    event("by-both", source={"component": "kubelet"}, reportingComponent="ctrl")

    def names(selector: str) -> list[str]:
        items = core.list_namespaced_event(ns, field_selector=selector).items
        return sorted(i.metadata.name for i in items)

    assert names("source=kubelet") == ["by-both", "by-kubelet"]
    assert names("source=ctrl") == ["by-controller"]
    assert names("reportingComponent=ctrl") == ["by-both", "by-controller"]
    assert names("source!=kubelet") == ["by-controller"]
