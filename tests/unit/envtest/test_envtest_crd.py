"""CustomResourceDefinitions: established, served, discoverable, status subresource, removal."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import APIServer
from tests.unit.envtest.conftest import WatchReader

pytestmark = pytest.mark.timeout(30)

GROUP = "example.com"


def _crd(
    plural: str,
    kind: str,
    scope: str = "Namespaced",
    status: bool = True,
    versions: tuple[str, ...] = ("v1",),
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": [plural[:3]],
            },
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    **({"subresources": {"status": {}}} if status else {}),
                }
                for i, v in enumerate(versions)
            ],
        },
    }


def test_crd_is_established_served_and_discoverable(api: ApiClient) -> None:
    ext, co = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    crd = ext.create_custom_resource_definition(_crd("widgets", "Widget"))
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd.status.accepted_names.kind == "Widget"
    assert crd.metadata.generation == 1

    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert GROUP in groups
    resources = {r.name: r for r in co.get_api_resources(GROUP, "v1").resources}
    assert set(resources) == {"widgets", "widgets/status"}
    assert resources["widgets"].namespaced and resources["widgets"].kind == "Widget"

    w = co.create_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "widgets",
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1, "nested": {"anything": [1, 2]}},
            "status": {"ignored": True},
        },
    )
    assert w["metadata"]["generation"] == 1 and "status" not in w
    assert w["spec"]["nested"] == {"anything": [1, 2]}
    w = co.patch_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", "w", {"spec": {"size": 2}}
    )
    assert w["metadata"]["generation"] == 2
    w = co.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", "widgets", "w", {"status": {"ready": True}}
    )
    assert w["metadata"]["generation"] == 2 and w["status"] == {"ready": True}
    listed = co.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == [
        "w"
    ]


def test_strategic_merge_on_custom_resource_is_415(api: ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(_crd("things", "Thing"))
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(
        GROUP, "v1", "default", "things", {"metadata": {"name": "t"}}
    )
    with pytest.raises(client.ApiException) as e:
        co.patch_namespaced_custom_object(
            GROUP,
            "v1",
            "default",
            "things",
            "t",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert e.value.status == 415


def test_cluster_scoped_crd_without_status(api: ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(
        _crd("gizmos", "Gizmo", scope="Cluster", status=False)
    )
    co = client.CustomObjectsApi(api)
    g = co.create_cluster_custom_object(
        GROUP,
        "v1",
        "gizmos",
        {"metadata": {"name": "g"}, "spec": {"a": 1}, "status": {"kept": True}},
    )
    assert g["status"] == {"kept": True} and "namespace" not in g["metadata"]
    g = co.patch_cluster_custom_object(GROUP, "v1", "gizmos", "g", {"status": {"kept": False}})
    # without a status subresource a status change is a new generation (PrepareForUpdate)
    assert g["status"] == {"kept": False} and g["metadata"]["generation"] == 2
    names = {r.name for r in co.get_api_resources(GROUP, "v1").resources}
    assert names == {"gizmos"}


def test_every_served_version_shares_the_objects(api: ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(
        _crd("multis", "Multi", versions=("v1", "v1beta1"))
    )
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(
        GROUP, "v1", "default", "multis", {"metadata": {"name": "m"}}
    )
    beta = co.get_namespaced_custom_object(GROUP, "v1beta1", "default", "multis", "m")
    assert beta["apiVersion"] == f"{GROUP}/v1beta1"
    group = next(g for g in client.ApisApi(api).get_api_versions().groups if g.name == GROUP)
    assert group.preferred_version.version == "v1"


def test_invalid_crd_name_is_422(api: ApiClient) -> None:
    bad = _crd("widgets", "Widget")
    bad["metadata"]["name"] = "wrong.example.com"
    with pytest.raises(client.ApiException) as e:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(bad)
    assert e.value.status == 422 and orjson.loads(e.value.body)["reason"] == "Invalid"


def test_deleting_crd_stops_serving_and_deletes_objects(
    api: ApiClient, watches: Callable[..., Any]
) -> None:
    ext, co = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    ext.create_custom_resource_definition(_crd("doomed", "Doomed"))
    co.create_namespaced_custom_object(
        GROUP, "v1", "default", "doomed", {"metadata": {"name": "d"}}
    )
    w = watches(
        co.list_namespaced_custom_object, GROUP, "v1", "default", "doomed", resource_version="0"
    )
    assert w.take(1) == [("ADDED", "d")]
    ext.delete_custom_resource_definition(f"doomed.{GROUP}")
    assert w.take(2) == [("DELETED", "d"), ("END", "")]
    with pytest.raises(client.ApiException) as e:
        co.list_namespaced_custom_object(GROUP, "v1", "default", "doomed")
    assert e.value.status == 404
    ext.create_custom_resource_definition(_crd("doomed", "Doomed"))
    assert co.list_namespaced_custom_object(GROUP, "v1", "default", "doomed")["items"] == []


def _terminating_reason(ext: client.ApiextensionsV1Api, name: str) -> str | None:
    conditions = ext.read_custom_resource_definition(name).status.conditions or ()
    return next((c.reason for c in conditions if c.type == "Terminating"), None)


def _deleted_crd_held_by_a_finalizer(
    server: APIServer, api: ApiClient
) -> client.ApiextensionsV1Api:
    """CRD ``holds.example.com`` deleted, its cleanup held by a custom resource's finalizer
    (a pass fails after 0.2 s)."""
    server.crd_cleanup_timeout = 0.2
    ext, co = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    ext.create_custom_resource_definition(_crd("holds", "Hold"))
    held = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Hold",
        "metadata": {"name": "h", "finalizers": [f"{GROUP}/keep"]},
    }
    co.create_namespaced_custom_object(GROUP, "v1", "default", "holds", held)
    ext.delete_custom_resource_definition(f"holds.{GROUP}")
    assert _terminating_reason(ext, f"holds.{GROUP}") == "InstanceDeletionInProgress"
    return ext


HOLDS = f"metadata.name=holds.{GROUP}"


def _nothing_written_in_three_cleanup_timeouts(server: APIServer) -> str:
    """The server's resourceVersion, unchanged after three CRD cleanup timeouts."""
    before = server.resource_version
    time.sleep(3 * server.crd_cleanup_timeout)  # what must not happen has no event to wait for
    assert server.resource_version == before
    return before


def test_a_stopped_server_runs_no_crd_cleanup_and_a_restarted_one_resumes_it(
    server: APIServer, api: ApiClient, watches: Callable[..., WatchReader]
) -> None:
    # kube-apiserver's CRD finalizer runs in the server: it stops with it and, restarted,
    # cleans up every deleted CRD again (InstanceDeletionInProgress, a wait, the check)
    ext = _deleted_crd_held_by_a_finalizer(server, api)
    server.stop()
    before = _nothing_written_in_three_cleanup_timeouts(server)
    server.start()
    w = watches(ext.list_custom_resource_definition, field_selector=HOLDS, resource_version=before)
    reasons = []
    while len(reasons) < 2:
        ev = w.next_of({"MODIFIED"})
        assert ev["type"] == "MODIFIED", ev
        conditions = ev["object"]["status"]["conditions"]
        reasons += [c["reason"] for c in conditions if c["type"] == "Terminating"]
    assert reasons == ["InstanceDeletionCheck", "InstanceDeletionInProgress"]
    with pytest.raises(ValueError, match="crd_cleanup_timeout must be positive"):
        APIServer(crd_cleanup_timeout=0)


@pytest.mark.parametrize(
    ("pause", "resume"), [("storage_outage", "storage_restored"), ("freeze", "thaw")]
)
def test_a_crd_cleanup_writes_nothing_while_storage_is_down_or_the_server_frozen(
    server: APIServer,
    api: ApiClient,
    watches: Callable[..., WatchReader],
    pause: str,
    resume: str,
) -> None:
    # kube-apiserver's CRD finalizer writes through storage: with etcd down its condition
    # updates and deletions fail, so nothing changes (and no watch hears of it) until it is
    # back. freeze() is a SIGSTOPped kube-apiserver: the finalizer, in the same process,
    # stops with it (envtest wrote its conditions on while every request hung)
    ext = _deleted_crd_held_by_a_finalizer(server, api)
    getattr(server, pause)()
    try:
        before = _nothing_written_in_three_cleanup_timeouts(server)
    finally:
        getattr(server, resume)()
    w = watches(ext.list_custom_resource_definition, field_selector=HOLDS, resource_version=before)
    ev = w.next_of({"MODIFIED"})
    conditions = ev["object"]["status"]["conditions"]
    assert [c["reason"] for c in conditions if c["type"] == "Terminating"] == [
        "InstanceDeletionCheck"
    ]
