"""controllerutil against an embedded API server: writes happen only when something changed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from mcruntime.client import AsyncClient, Client, Model, ObjectMeta, Resource
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import (
    Condition,
    OperationResult,
    add_finalizer,
    create_or_patch,
    create_or_update,
    remove_finalizer,
    set_controller_reference,
    set_status_condition,
)
from mcruntime.envtest import APIServer, WaitTimeout, wait_for
from mcruntime.errors import AlreadyExists, Conflict, NotFound

pytestmark = pytest.mark.timeout(60)

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


#: ``[]metav1.Condition`` as controller-gen writes it into a CRD (``message`` required, may be empty)
CONDITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    "properties": {
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "message": {"type": "string", "maxLength": 32768},
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "reason": {
            "type": "string",
            "maxLength": 1024,
            "minLength": 1,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "type": {"type": "string", "maxLength": 316},
    },
}
SPROCKETS: dict[str, Any] = {
    **CRD,
    "metadata": {"name": "sprockets.example.com"},
    "spec": {
        **CRD["spec"],
        "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
        "versions": [
            {
                **CRD["spec"]["versions"][0],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "conditions": {
                                        "type": "array",
                                        "items": CONDITION_SCHEMA,
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["type"],
                                    }
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


class GadgetSpec(Model):
    size: int = 0
    target_labels: dict[str, str] = {}


class GadgetStatus(Model):
    conditions: list[Condition] = []


class Gadget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Gadget"
    spec: GadgetSpec = GadgetSpec()
    status: GadgetStatus | None = None


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    server = APIServer("cu").start()
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="cu")
    cluster.client.create(CRD)
    cluster.client.create(SPROCKETS)

    def served() -> bool:
        try:
            cluster.rest_mapper.mapping("example.com/v1/Gadget")
            cluster.rest_mapper.mapping("example.com/v1/Sprocket")
        except Exception:
            return False
        return True

    with contextlib.suppress(WaitTimeout):  # as before: the test below fails if it is not served
        wait_for(served, timeout=10, interval=0.05, what="example.com/v1/Gadget to be served")
    api = Client(cluster.rest, cluster.rest_mapper, cluster_name="cu")  # reads from the API
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    yield api
    cluster.stop()
    server.close()


def _cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}


@pytest.mark.parametrize("helper", [create_or_update, create_or_patch])
@pytest.mark.parametrize("flavour", ["dict", "model", "resource"])
def test_an_object_holding_a_resource_version_is_created_without_it(
    client: Client, helper: Any, flavour: str
) -> None:
    # an object read from another cluster, or written here before and deleted since:
    # kube-apiserver refuses to create one that holds a resourceVersion
    name = f"rv-{helper.__name__}-{flavour}".replace("_", "-")
    read = client.create(_cm(name))
    client.delete("v1/ConfigMap", name, "ns")
    assert read["metadata"]["resourceVersion"]
    old_uid = read["metadata"]["uid"]
    obj: Any = {
        "dict": lambda: read,
        "model": lambda: V1ConfigMap(
            metadata=V1ObjectMeta(
                name=name, namespace="ns", resource_version=read["metadata"]["resourceVersion"]
            )
        ),
        "resource": lambda: ConfigMapView.from_dict(read),
    }[flavour]()
    assert helper(client, obj, None) == OperationResult.CREATED
    assert client.get("v1/ConfigMap", name, "ns")["metadata"]["uid"] != old_uid


class ConfigMapView(Resource):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "ConfigMap"


@pytest.mark.parametrize("helper", [create_or_update, create_or_patch])
def test_create_then_update_then_unchanged_without_a_write(client: Client, helper: Any) -> None:
    name = f"cm-{helper.__name__}".replace("_", "-")
    obj = _cm(name)

    def mutate(o: dict[str, Any]) -> None:
        o["data"] = {"k": "v"}

    assert helper(client, obj, mutate) == OperationResult.CREATED
    assert obj["metadata"]["uid"]
    obj = _cm(name)
    assert helper(client, obj, mutate) == OperationResult.UNCHANGED
    rv = obj["metadata"]["resourceVersion"]
    assert client.get("v1/ConfigMap", name, "ns")["metadata"]["resourceVersion"] == rv

    def mutate2(o: dict[str, Any]) -> None:
        o["data"] = {"k": "w"}

    obj = _cm(name)
    assert helper(client, obj, mutate2) == OperationResult.UPDATED
    assert obj["data"] == {"k": "w"} and obj["metadata"]["resourceVersion"] != rv
    assert client.get("v1/ConfigMap", name, "ns")["data"] == {"k": "w"}


@pytest.mark.parametrize("helper", [create_or_update, create_or_patch])
def test_a_write_the_server_stores_nothing_of_is_unchanged(client: Client, helper: Any) -> None:
    # mutate sets the whole pod template; the server fills in its defaults, which mutate
    # takes out again on the next run: the write goes out, the object stays as it was
    name = f"web-{helper.__name__}".replace("_", "-")

    def deployment() -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ns"},
        }

    def mutate(o: dict[str, Any]) -> None:
        o["spec"] = {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        }

    assert helper(client, deployment(), mutate) == OperationResult.CREATED
    rv = client.get("apps/v1/Deployment", name, "ns")["metadata"]["resourceVersion"]
    for _ in range(2):
        obj = deployment()
        assert helper(client, obj, mutate) == OperationResult.UNCHANGED
        assert obj["metadata"]["resourceVersion"] == rv
        assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == (
            "IfNotPresent"
        ), "obj holds what the server answered, its defaults included"


def test_create_or_update_with_kubernetes_models(client: Client) -> None:
    cm = V1ConfigMap(metadata=V1ObjectMeta(name="model", namespace="ns"))

    def mutate(o: V1ConfigMap) -> None:
        o.data = {"a": "1"}

    assert create_or_update(client, cm, mutate) == OperationResult.CREATED
    assert cm.metadata is not None and cm.metadata.uid
    again = V1ConfigMap(metadata=V1ObjectMeta(name="model", namespace="ns"))
    assert create_or_update(client, again, mutate) == OperationResult.UNCHANGED


def test_create_or_patch_of_a_typed_resource_reports_status_writes(client: Client) -> None:
    owner = client.create(_cm("gadget-owner"))
    g = Gadget(metadata=ObjectMeta(name="g", namespace="ns"), spec=GadgetSpec(size=1))

    def desired(o: Gadget) -> None:
        o.spec.size = 1
        set_controller_reference(owner, o)
        add_finalizer(o, "example.com/cleanup")

    assert create_or_patch(client, g, desired) == OperationResult.CREATED
    generation = g.metadata.generation
    g = Gadget(metadata=ObjectMeta(name="g", namespace="ns"))
    assert create_or_patch(client, g, desired) == OperationResult.UNCHANGED

    def ready(o: Gadget) -> None:
        desired(o)
        o.status = o.status or GadgetStatus()
        set_status_condition(
            o.status.conditions, Condition(type="Ready", status="True", reason="Up")
        )

    assert create_or_patch(client, g, ready) == OperationResult.UPDATED_STATUS_ONLY
    raw = client.get("example.com/v1/Gadget", "g", "ns")
    assert raw["status"]["conditions"][0]["reason"] == "Up"
    assert raw["metadata"]["generation"] == generation  # status only: spec untouched

    def grow(o: Gadget) -> None:
        ready(o)
        o.spec.size = 2
        set_status_condition(
            o.status.conditions, Condition(type="Ready", status="False", reason="Resizing")
        )  # type: ignore[union-attr]

    assert create_or_patch(client, g, grow) == OperationResult.UPDATED_STATUS
    assert g.spec.size == 2 and g.status is not None
    assert g.status.conditions[0].reason == "Resizing"


def test_create_or_update_refuses_a_mutate_that_renames(client: Client) -> None:
    def rename(o: dict[str, Any]) -> None:
        o["metadata"]["name"] = "other"

    with pytest.raises(ValueError, match="must not"):
        create_or_update(client, _cm("renamed"), rename)


@pytest.mark.parametrize("helper", [create_or_update, create_or_patch])
def test_an_async_client_given_to_a_helper_is_refused_saying_how_to_call_it(
    client: Client, helper: Any, recwarn: pytest.WarningsRecorder
) -> None:
    # from an async def reconcile, cluster.aclient was taken: "'coroutine' object is not
    # iterable" and a RuntimeWarning of a coroutine never awaited, nothing written
    with pytest.raises(TypeError) as refused:
        helper(AsyncClient(client), _cm(f"async-{helper.__name__}"))
    assert str(refused.value) == (
        f"{helper.__name__}() takes a Client, not an AsyncClient: its calls block; from an "
        f"async def reconcile, run it off the event loop: await cluster.aclient.run_sync("
        f"{helper.__name__}, cluster.client, obj, mutate)"
    )
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_create_or_update_gives_up_at_its_deadline_on_a_hung_server(make_envtest_server) -> None:
    from mcruntime.errors import DeadlineExceeded

    server = make_envtest_server("hung")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="hung")
    api = Client(cluster.rest, cluster.rest_mapper, cluster_name="hung")
    api.get("v1/Namespace", "default")  # discovery done while the server answers
    server.freeze()
    try:
        began = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            create_or_update(api, _cm("late"), lambda o: None, timeout=0.5)
        assert time.monotonic() - began < 3.0
    finally:
        server.thaw()
        cluster.stop()


def test_a_condition_model_set_into_a_dict_status_is_written_as_a_condition(
    client: Client,
) -> None:
    # meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{...}) on a dict object
    client.create({**_cm("dict-gadget"), "apiVersion": "example.com/v1", "kind": "Gadget"})
    g = client.get("example.com/v1/Gadget", "dict-gadget", "ns")
    conditions = g.setdefault("status", {}).setdefault("conditions", [])
    set_status_condition(conditions, Condition(type="Ready", status="True", reason="Up"))
    client.update_status(g)
    written = client.get("example.com/v1/Gadget", "dict-gadget", "ns")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in written] == [("Ready", "True", "Up")]
    assert written[0]["lastTransitionTime"].endswith("Z")


def test_a_condition_given_without_a_message_is_stored_by_a_metav1_condition_schema(
    client: Client,
) -> None:
    # a dict condition leaving out its message (Go's zero value: "") was sent as null (a
    # merge patch deletes the key) or without it: "status.conditions[0].message: Required value"
    name = {"apiVersion": "example.com/v1", "kind": "Sprocket"}
    meta = {"name": "no-message", "namespace": "ns"}
    client.create({**name, "metadata": meta, "spec": {}})

    def ready(status: str, reason: str) -> Any:
        def mutate(obj: dict[str, Any]) -> None:
            conditions = obj.setdefault("status", {}).setdefault("conditions", [])
            set_status_condition(conditions, {"type": "Ready", "status": status, "reason": reason})

        return mutate

    obj: dict[str, Any] = {**name, "metadata": dict(meta)}
    assert create_or_patch(client, obj, ready("True", "Done")) == "updatedStatusOnly"
    obj = {**name, "metadata": dict(meta)}
    assert create_or_patch(client, obj, ready("False", "Broken")) == "updatedStatusOnly"
    stored = client.get("example.com/v1/Sprocket", "no-message", "ns")["status"]["conditions"]
    assert [(c["status"], c["reason"], c["message"]) for c in stored] == [("False", "Broken", "")]


@pytest.mark.parametrize("optimistic_lock", [False, True])
def test_create_or_patch_with_the_optimistic_lock_keeps_a_finalizer_written_since_the_read(
    client: Client, optimistic_lock: bool
) -> None:
    # a merge patch replaces the list: a finalizer another controller added between the read
    # (a cache may be behind) and the patch is dropped, as by Go's CreateOrPatch, unless the
    # patch carries the resourceVersion read
    name = f"lock-{str(optimistic_lock).lower()}"
    client.create({**_cm(name), "metadata": {**_cm(name)["metadata"], "finalizers": ["a.io/x"]}})

    def mutate(obj: dict[str, Any]) -> None:
        client.patch("v1/ConfigMap", name, {"metadata": {"finalizers": ["a.io/x", "b.io/y"]}}, "ns")
        add_finalizer(obj, "c.io/mine")

    if optimistic_lock:
        with pytest.raises(Conflict):
            create_or_patch(client, _cm(name), mutate, optimistic_lock=True)
        assert (
            create_or_patch(
                client, _cm(name), lambda o: add_finalizer(o, "c.io/mine"), optimistic_lock=True
            )
            == "updated"
        )
        kept = ["a.io/x", "b.io/y", "c.io/mine"]
    else:
        assert create_or_patch(client, _cm(name), mutate) == "updated"
        kept = ["a.io/x", "c.io/mine"]  # b.io/y is gone: the hazard the lock is for
    assert client.get("v1/ConfigMap", name, "ns")["metadata"]["finalizers"] == kept
    client.patch("v1/ConfigMap", name, {"metadata": {"finalizers": None}}, "ns")


def test_create_or_patch_with_the_optimistic_lock_refuses_a_status_written_since(
    client: Client,
) -> None:
    # the status patch replaces status.conditions whole, as the object patch does finalizers:
    # a condition another controller wrote since the read would be dropped
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget"}
    client.create({**gadget, "metadata": {"name": "lock-status", "namespace": "ns"}})

    def ready(obj: dict[str, Any]) -> None:
        conditions = obj.setdefault("status", {}).setdefault("conditions", [])
        set_status_condition(conditions, {"type": "Ready", "status": "True", "reason": "Done"})

    def racing(obj: dict[str, Any]) -> None:
        other = {"status": {"conditions": [{"type": "Other", "status": "True", "reason": "X"}]}}
        client.patch_status("example.com/v1/Gadget", "lock-status", other, "ns")
        ready(obj)

    def gadget_named() -> dict[str, Any]:
        return {**gadget, "metadata": {"name": "lock-status", "namespace": "ns"}}

    with pytest.raises(Conflict):
        create_or_patch(client, gadget_named(), racing, optimistic_lock=True)
    assert create_or_patch(client, gadget_named(), ready, optimistic_lock=True) == (
        "updatedStatusOnly"
    )
    stored = client.get("example.com/v1/Gadget", "lock-status", "ns")["status"]["conditions"]
    assert sorted(c["type"] for c in stored) == ["Other", "Ready"]


@pytest.mark.parametrize("helper", [create_or_update, create_or_patch])
def test_removing_the_last_finalizer_of_an_object_being_deleted_is_updated(
    client: Client, helper: Any
) -> None:
    # kube-apiserver deletes the object and answers with it at the resourceVersion read: the
    # write was said to be "unchanged", as one that stores nothing
    name = f"last-finalizer-{helper.__name__}".replace("_", "-")
    client.create({**_cm(name), "metadata": {**_cm(name)["metadata"], "finalizers": ["a.io/x"]}})
    client.delete("v1/ConfigMap", name, "ns")
    obj = _cm(name)
    assert helper(client, obj, lambda o: remove_finalizer(o, "a.io/x")) == OperationResult.UPDATED
    with pytest.raises(NotFound):
        client.get("v1/ConfigMap", name, "ns")


def test_a_status_is_written_by_create_or_patch_after_the_create_and_never_by_an_update(
    client: Client,
) -> None:
    # as documented (and as in Go): the API server drops the status of a create, and of an
    # update of a kind with a status subresource
    def gadget(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "Gadget",
            "metadata": {"name": name, "namespace": "ns"},
        }

    def mutate(obj: dict[str, Any]) -> None:
        obj["spec"] = {"size": 1}
        obj.setdefault("status", {})["phase"] = "Ready"

    for helper, then in (
        (create_or_patch, OperationResult.UPDATED_STATUS_ONLY),
        (create_or_update, OperationResult.UNCHANGED),
    ):
        name = f"status-{helper.__name__}".replace("_", "-")
        obj = gadget(name)
        assert helper(client, obj, mutate) == OperationResult.CREATED
        assert "status" not in obj
        assert helper(client, gadget(name), mutate) == then
        stored = client.get("example.com/v1/Gadget", name, "ns").get("status")
        assert stored == ({"phase": "Ready"} if helper is create_or_patch else None)


@pytest.mark.parametrize("helper", [create_or_update, create_or_patch])
def test_a_write_raced_by_another_writer_is_raised_not_retried(client: Client, helper: Any) -> None:
    # as Go's: the reconcile is retried on a fresh read; nothing retries behind the caller
    name = f"raced-{helper.__name__}".replace("_", "-")
    calls: list[str] = []

    def created_meanwhile(obj: dict[str, Any]) -> None:
        calls.append("create")
        client.create({**_cm(name), "data": {"by": "other"}})
        obj["data"] = {"by": "me"}

    with pytest.raises(AlreadyExists):
        helper(client, _cm(name), created_meanwhile)

    def deleted_meanwhile(obj: dict[str, Any]) -> None:
        calls.append("delete")
        client.delete("v1/ConfigMap", name, "ns")
        obj["data"] = {"by": "me"}

    with pytest.raises(NotFound):
        helper(client, _cm(name), deleted_meanwhile)
    assert calls == ["create", "delete"]
