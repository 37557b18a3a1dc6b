"""A PUT of an object that does not exist (``Store.Update`` of kube-apiserver's generic
registry): it creates the object for the resources whose registry strategy's
``AllowCreateOnUpdate`` is true (Events, Endpoints, LimitRanges, Services, Leases, the RBAC
kinds, RuntimeClasses), as a create (201, the create's defaults and validation, a watch's
ADDED, a ``resourceVersion`` in the body ignored); for every other resource it is a 404.

What a controller meets: a Role, Service or Lease it replaces after someone deleted it comes
back on a cluster (Services and the RBAC kinds take an update without a resourceVersion),
and ``kubectl replace`` of an absent Lease creates it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import Raw, assert_status, raw, unique, watch_events

pytestmark = pytest.mark.timeout(60)


def put(api: ApiClient, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    resp = put_raw(api, path, body)
    out: dict[str, Any] = resp.json()
    return resp.status, out


def put_raw(api: ApiClient, path: str, body: dict[str, Any]) -> Raw:
    return raw(api, "PUT", path, body=body, content_type="application/json")


def lease(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, **meta},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15},
    }


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", lease("{name}")),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            {"metadata": {"name": "{name}"}, "rules": [{"verbs": ["get"], "apiGroups": [""]}]},
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            {
                "metadata": {"name": "{name}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
                "subjects": [
                    {"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}
                ],
            },
        ),
        (
            "/api/v1/namespaces/{ns}/endpoints",
            {"metadata": {"name": "{name}"}, "subsets": [{"addresses": [{"ip": "10.1.2.3"}]}]},
        ),
        (
            "/api/v1/namespaces/{ns}/limitranges",
            {
                "metadata": {"name": "{name}"},
                "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]},
            },
        ),
        (
            "/api/v1/namespaces/{ns}/events",
            {
                "metadata": {"name": "{name}"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "{ns}"},
                "reason": "Tested",
                "message": "m",
                "type": "Normal",
            },
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/{ns}/events",
            {
                "metadata": {"name": "{name}"},
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "example.com/tester",
                "reportingInstance": "tester-1",
                "action": "Testing",
                "reason": "Tested",
                "type": "Normal",
                "regarding": {"kind": "Pod", "name": "p", "namespace": "{ns}"},
            },
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {"metadata": {"name": "{name}"}, "rules": [{"verbs": ["get"], "apiGroups": [""]}]},
        ),
    ],
    ids=[
        "lease",
        "role",
        "rolebinding",
        "endpoints",
        "limitrange",
        "event",
        "events.k8s.io",
        "clusterrole",
    ],
)
def test_a_put_creates_an_absent_object_whose_strategy_allows_it(
    api: ApiClient, ns: str, path: str, body: dict[str, Any]
) -> None:
    name = unique("made")
    collection = path.format(ns=ns)
    sent = _fill(body, name=name, ns=ns)
    code, created = put(api, f"{collection}/{name}", sent)
    assert code == 201, created
    meta = created["metadata"]
    assert meta["name"] == name and meta["uid"] and meta["creationTimestamp"]
    got = raw(api, "GET", f"{collection}/{name}").json()
    assert got["metadata"]["uid"] == meta["uid"]
    # a second PUT is an update of what the first created
    code, updated = put(api, f"{collection}/{name}", {**sent, "metadata": got["metadata"]})
    assert code == 200 and updated["metadata"]["uid"] == meta["uid"]
    raw(api, "DELETE", f"{collection}/{name}")  # a cluster-scoped one outlives the namespace


def test_a_put_that_creates_is_a_create_in_every_way(
    core: client.CoreV1Api, api: ApiClient, ns: str
) -> None:
    """The created Service goes through create's defaults (a cluster IP allocated) and a
    watch sees it ADDED; a ``resourceVersion`` in the body is not a precondition (the
    storage clears it)."""
    name = unique("svc")
    start = core.list_namespaced_service(ns).metadata.resource_version
    body = {
        "metadata": {"name": name, "resourceVersion": "12345"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": name}},
    }
    code, created = put(api, f"/api/v1/namespaces/{ns}/services/{name}", body)
    assert code == 201, created
    assert created["spec"]["clusterIP"] and created["spec"]["type"] == "ClusterIP"
    assert created["spec"]["ports"][0]["targetPort"] == 80
    assert created["metadata"]["resourceVersion"] != "12345"
    events = watch_events(
        core.list_namespaced_service,
        ns,
        resource_version=start,
        until=lambda seen: any(e["raw_object"]["metadata"]["name"] == name for e in seen),
    )
    assert [e["type"] for e in events if e["raw_object"]["metadata"]["name"] == name] == ["ADDED"]


def test_a_put_that_creates_is_validated_as_a_create(api: ApiClient, ns: str) -> None:
    name = unique("svc")
    resp = put_raw(api, f"/api/v1/namespaces/{ns}/services/{name}", {"metadata": {"name": name}})
    status = assert_status(resp, 422, "Invalid")
    assert status["message"] == f'Service "{name}" is invalid: spec.ports: Required value'


def test_a_put_with_a_uid_of_an_absent_object_fails_its_precondition(
    api: ApiClient, ns: str
) -> None:
    """The uid of a PUT's body is a precondition of the storage's update, which the
    absent object cannot meet: a Lease deleted and replaced with the uid it had is not
    brought back."""
    name = unique("lease")
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
    resp = put_raw(api, path, lease(name, uid="4a1c0a52-0000-4000-8000-000000000000"))
    status = assert_status(resp, 409, "Conflict")
    assert (
        "Precondition failed: UID in precondition: 4a1c0a52-0000-4000-8000-000000000000, "
        in (status["message"])
    )
    assert raw(api, "GET", path).status == 404


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/{ns}/configmaps",
        "/api/v1/namespaces/{ns}/secrets",
        "/api/v1/namespaces/{ns}/pods",
        "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
    ],
    ids=["configmap", "secret", "pod", "endpointslice"],
)
def test_a_put_of_an_absent_object_of_another_resource_is_not_found(
    api: ApiClient, ns: str, path: str
) -> None:
    name = unique("absent")
    resp = put_raw(api, f"{path.format(ns=ns)}/{name}", {"metadata": {"name": name}})
    assert_status(resp, 404, "NotFound")


def _fill(value: Any, **names: str) -> Any:
    """``value`` with ``{name}`` and ``{ns}`` in its strings replaced."""
    if isinstance(value, dict):
        return {k: _fill(v, **names) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, **names) for v in value]
    return value.format(**names) if isinstance(value, str) else value
