"""Client against an embedded API server: CRUD, the three patch types, status, delete options, views."""

from __future__ import annotations

import copy
import uuid
from typing import Any, ClassVar

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from mcruntime.client import APIReader, Client, Model, ObjectMeta, Resource, merge_from
from mcruntime.client import _client as client_module
from mcruntime.errors import (
    NAMESPACE_TERMINATING,
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    SelectorError,
    has_status_cause,
    ignore_not_found,
)

pytestmark = pytest.mark.timeout(60)


def _cm(ns: str, name: str, data: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": data or {},
    }


def test_crud_with_dicts(client: Client, ns: str) -> None:
    created = client.create(_cm(ns, "web", {"a": "1"}, app="web"))
    assert created["metadata"]["uid"] and created["data"] == {"a": "1"}
    with pytest.raises(AlreadyExists):
        client.create(_cm(ns, "web"))

    got = client.get("v1/ConfigMap", "web", ns)
    got["data"]["b"] = "2"
    updated = client.update(got)
    assert updated["data"] == {"a": "1", "b": "2"}
    with pytest.raises(Conflict):
        client.update(got)  # stale resourceVersion

    client.create(_cm(ns, "other", app="db"))
    assert [
        o["metadata"]["name"] for o in client.list("v1/ConfigMap", ns, labels={"app": "web"})
    ] == ["web"]
    assert len(client.list("v1/ConfigMap", ns, labels="app in (web,db)")) == 2
    named = client.list("v1/ConfigMap", ns, fields={"metadata.name": "other"})
    assert [o["metadata"]["name"] for o in named] == ["other"]
    assert all(o["kind"] == "ConfigMap" for o in client.list("v1/ConfigMap", ns))

    client.delete("v1/ConfigMap", "web", ns)
    with pytest.raises(NotFound):
        client.get("v1/ConfigMap", "web", ns)
    with ignore_not_found():
        client.delete("v1/ConfigMap", "web", ns)


def test_list_follows_continue_and_honours_limit(
    client: Client, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(7):
        client.create(_cm(ns, f"cm-{i}"))
    monkeypatch.setattr(client_module, "DEFAULT_PAGE_SIZE", 3)
    names = sorted(o["metadata"]["name"] for o in client.list("v1/ConfigMap", ns))
    assert names == [f"cm-{i}" for i in range(7)]
    assert len(client.list("v1/ConfigMap", ns, limit=4)) == 4


def test_patch_merge_json_and_strategic(client: Client, ns: str) -> None:
    client.create(_cm(ns, "p", {"keep": "1", "drop": "2"}))
    merged = client.patch("v1/ConfigMap", "p", {"data": {"drop": None, "new": "3"}}, ns)
    assert merged["data"] == {"keep": "1", "new": "3"}
    jsoned = client.patch(
        "v1/ConfigMap",
        "p",
        [{"op": "replace", "path": "/data/keep", "value": "x"}],
        ns,
        type="json",
    )
    assert jsoned["data"]["keep"] == "x"
    strategic = client.patch(
        "v1/ConfigMap", "p", {"metadata": {"labels": {"s": "y"}}}, ns, type="strategic"
    )
    assert strategic["metadata"]["labels"] == {"s": "y"}
    with pytest.raises(ValueError, match="list of operations"):
        client.patch("v1/ConfigMap", "p", {"data": {}}, ns, type="json")
    with pytest.raises(ValueError, match="unknown patch type"):
        client.patch("v1/ConfigMap", "p", {}, ns, type="apply")  # type: ignore[arg-type]
    ops = [{"op": "replace", "path": "/data/keep", "value": "y"}]
    with pytest.raises(ValueError, match='is a JSON patch: pass type="json"'):
        client.patch("v1/ConfigMap", "p", ops, ns)
    assert client.get("v1/ConfigMap", "p", ns)["data"]["keep"] == "x"


def test_a_patch_given_the_namespace_before_the_patch_says_which_comes_first(
    client: Client, ns: str
) -> None:
    # get and delete take the namespace third, patch the patch: an easy slip
    client.create(_cm(ns, "order", {"a": "1"}))
    for call in (client.patch, client.patch_status, client.subresource("status").patch):
        with pytest.raises(TypeError) as err:
            call("v1/ConfigMap", "order", ns, {"data": {"a": "2"}})
        assert "the patch comes before the namespace" in str(err.value)
        assert "got a str patch and a dict namespace" in str(err.value)
    assert client.get("v1/ConfigMap", "order", ns)["data"] == {"a": "1"}


def test_status_writes_go_to_the_status_subresource(client: Client, ns: str, widgets: str) -> None:
    w = client.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"size": 1},
        }
    )
    w["status"] = {"ready": True}
    w["spec"] = {"size": 99}
    after = client.update_status(w)
    assert after["status"] == {"ready": True} and after["spec"] == {"size": 1}
    patched = client.patch_status(widgets, "w", {"status": {"phase": "Running"}}, ns)
    assert patched["status"] == {"ready": True, "phase": "Running"}
    patched = client.patch(widgets, "w", {"status": {"phase": "Ignored"}, "spec": {"size": 2}}, ns)
    assert patched["status"]["phase"] == "Running" and patched["spec"] == {"size": 2}


def test_status_write_to_a_kind_without_a_status_subresource_says_so(
    client: Client, ns: str, make_crd: Any, wait_until: Any
) -> None:
    # a CRD without subresources.status (kopf does not need one): the server's 404 reads as if
    # the object were gone; the error says the subresource is missing, and a missing object
    # still reads as one
    plain = copy.deepcopy(make_crd("nostatus.example.com", "Plain", "plains"))
    del plain["spec"]["versions"][0]["subresources"]
    client.create(plain)
    kind = "nostatus.example.com/v1/Plain"
    wait_until(
        lambda: client.create(
            {
                "apiVersion": "nostatus.example.com/v1",
                "kind": "Plain",
                "metadata": {"name": "p", "namespace": ns},
            }
        )
    )
    obj = client.get(kind, "p", ns)
    obj["status"] = {"phase": "Ready"}
    for call in (
        lambda: client.patch_status(kind, "p", {"status": {"phase": "Ready"}}, ns),
        lambda: client.update_status(obj),
        lambda: client.with_field_manager("t").apply_status(obj),
        lambda: client.subresource("status").update(kind, "p", obj, ns),
        lambda: client.subresource("status").patch(kind, "p", {"status": {}}, ns),
        lambda: client.subresource("status").get(kind, "p", ns),
    ):
        with pytest.raises(NotFound) as err:
            call()
        assert str(err.value) == (
            f"[cluster c1] Plain {ns}/p: plains has no 'status' subresource (the server's "
            "discovery lists none); a CustomResourceDefinition serves it when its version "
            "declares subresources.status, else write status with update() or patch() of the "
            "object"
        )
    with pytest.raises(NotFound) as gone:
        client.patch_status("v1/Pod", "missing", {"status": {"phase": "Running"}}, ns)
    assert "subresource" not in str(gone.value) and gone.value.name == "missing"


def test_delete_with_preconditions_and_propagation(client: Client, ns: str) -> None:
    cm = client.create(_cm(ns, "d"))
    with pytest.raises(Conflict):
        client.delete("v1/ConfigMap", "d", ns, preconditions={"uid": "not-the-uid"})
    client.delete(
        "v1/ConfigMap",
        "d",
        ns,
        propagation="Background",
        preconditions={"uid": cm["metadata"]["uid"]},
    )
    with pytest.raises(NotFound):
        client.get("v1/ConfigMap", "d", ns)


def test_delete_of_an_object_deletes_what_its_metadata_names(client: Client, ns: str) -> None:
    # Go: r.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground))
    as_dict = client.create(_cm(ns, "by-dict"))
    client.delete(as_dict, propagation="Background")
    model = V1ConfigMap(metadata=V1ObjectMeta(name="by-model", namespace=ns))
    client.create(model)
    client.delete(model)
    for name in ("by-dict", "by-model"):
        with pytest.raises(NotFound):
            client.get("v1/ConfigMap", name, ns)
    with pytest.raises(TypeError, match=r"needs a name: delete\(kind, name, namespace\)"):
        client.delete("v1/ConfigMap")
    with pytest.raises(ValueError, match="needs metadata.name"):
        client.delete({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns}})


def test_merge_from_patches_what_changed_and_locks_on_the_version_read(
    client: Client, ns: str
) -> None:
    # Go: patch := client.MergeFrom(obj.DeepCopy()); change obj; r.Patch(ctx, obj, patch)
    cm = client.create(_cm(ns, "merged", {"keep": "1", "drop": "2"}, app="web"))
    before = copy.deepcopy(cm)
    cm["data"]["add"] = "3"
    del cm["data"]["drop"]
    patch = merge_from(before, cm)
    assert patch == {"data": {"add": "3", "drop": None}}
    assert client.patch("v1/ConfigMap", "merged", patch, ns)["data"] == {"keep": "1", "add": "3"}
    assert merge_from(cm, cm) == {}
    # MergeFromWithOptimisticLock: the version read, so a change meanwhile is a Conflict
    locked = merge_from(before, cm, optimistic_lock=True)
    assert locked["metadata"] == {"resourceVersion": before["metadata"]["resourceVersion"]}
    with pytest.raises(Conflict):
        client.patch("v1/ConfigMap", "merged", locked, ns)
    fresh = client.get("v1/ConfigMap", "merged", ns)
    changed = copy.deepcopy(fresh)
    changed["metadata"]["labels"] = {"app": "db"}
    done = client.patch(
        "v1/ConfigMap", "merged", merge_from(fresh, changed, optimistic_lock=True), ns
    )
    assert done["metadata"]["labels"] == {"app": "db"}
    with pytest.raises(ValueError, match="needs the original's metadata.resourceVersion"):
        merge_from(_cm(ns, "unread"), _cm(ns, "unread", {"a": "b"}), optimistic_lock=True)


def test_foreground_deletion_marks_the_owner(client: Client, ns: str, wait_until: Any) -> None:
    owner = client.create(_cm(ns, "owner"))
    client.create(
        {
            **_cm(ns, "child"),
            "metadata": {
                "name": "child",
                "namespace": ns,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"]["uid"],
                        "blockOwnerDeletion": True,
                    }
                ],
            },
        }
    )
    client.delete("v1/ConfigMap", "owner", ns, propagation="Foreground")

    def owner_gone_or_marked() -> bool:
        try:
            o = client.get("v1/ConfigMap", "owner", ns)
        except NotFound:
            return True
        return "foregroundDeletion" in (o["metadata"].get("finalizers") or [])

    assert wait_until(owner_gone_or_marked)


def test_namespace_is_required_for_namespaced_kinds(client: Client) -> None:
    with pytest.raises(ValueError, match="v1/ConfigMap is namespaced"):
        client.get("v1/ConfigMap", "x")
    with pytest.raises(ValueError, match="namespaced"):
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    with pytest.raises(ValueError, match="namespaced"):
        client.delete("v1/ConfigMap", "x")


def test_a_name_that_is_no_path_segment_is_refused_before_anything_is_sent(
    client: Client, api_reader: APIReader, ns: str
) -> None:
    # a name taken from a custom resource's spec: ".." would be resolved away by the URL,
    # so deleting the ConfigMap ".." would delete its namespace (as client-go refuses it)
    client.create(_cm(ns, "kept"))
    calls: list[tuple[str, Any]] = [
        ("resource name '..': may not be '..'", lambda: client.delete("v1/ConfigMap", "..", ns)),
        ("resource name '..': may not be '..'", lambda: api_reader.get("v1/ConfigMap", "..", ns)),
        (
            "resource name '..': may not be '..'",
            lambda: client.patch("v1/ConfigMap", "..", {"metadata": {"labels": {"a": "b"}}}, ns),
        ),
        ("resource name '.': may not be '.'", lambda: api_reader.get("v1/Secret", ".", ns)),
        ("namespace '..': may not be '..'", lambda: api_reader.list("v1/Secret", "..")),
        ("namespace '..': may not be '..'", lambda: client.delete_all_of("v1/ConfigMap", "..")),
        (
            "resource name 'a/b': may not contain '/'",
            lambda: api_reader.get("v1/ConfigMap", "a/b", ns),
        ),
        (
            "subresource '..': may not be '..'",
            lambda: client.subresource("..").get("v1/ConfigMap", "kept", ns),
        ),
    ]
    for message, call in calls:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == f"invalid {message}"
    assert client.get("v1/Namespace", ns)["metadata"].get("labels", {}).get("a") is None
    assert "deletionTimestamp" not in client.get("v1/Namespace", ns)["metadata"]
    assert api_reader.get("v1/ConfigMap", "kept", ns)


def test_invalid_objects_raise_invalid(client: Client, ns: str) -> None:
    with pytest.raises(Invalid):
        client.create(_cm(ns, "Not_A_Valid_Name"))


def test_a_create_in_a_namespace_being_deleted_has_its_cause(client: Client) -> None:
    # a namespace stuck Terminating on a finalizer: what a reconciler tests to stop retrying
    # its creates there, as Kubernetes' controllers do (apimachinery's HasStatusCause)
    ns = f"held-{uuid.uuid4().hex[:8]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    held = _cm(ns, "blocker")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    client.create(held)
    client.delete("v1/Namespace", ns)
    with pytest.raises(Forbidden) as refused:
        client.create(_cm(ns, "late"))
    assert has_status_cause(refused.value, NAMESPACE_TERMINATING)
    assert not has_status_cause(refused.value, "FieldValueInvalid")
    with pytest.raises(Invalid) as invalid:
        client.create(_cm("default", "Not_A_Valid_Name"))
    assert has_status_cause(invalid.value, "FieldValueInvalid")
    assert not has_status_cause(invalid.value, NAMESPACE_TERMINATING)
    assert not has_status_cause(ValueError("no Status"), NAMESPACE_TERMINATING)
    assert not has_status_cause(None, NAMESPACE_TERMINATING)
    client.patch("v1/ConfigMap", "blocker", {"metadata": {"finalizers": None}}, namespace=ns)


def test_index_needs_the_cache(api_reader: APIReader, client: Client) -> None:
    with pytest.raises(ValueError, match="cache"):
        client.list("v1/ConfigMap", "default", index=("spec.x", "y"))
    with pytest.raises(ValueError, match="cache"):
        api_reader.list("v1/ConfigMap", index=("spec.x", "y"))


def test_model_class_views(client: Client, ns: str) -> None:
    created = client.create(
        V1ConfigMap(metadata=V1ObjectMeta(name="typed", namespace=ns), data={"k": "v"})
    )
    assert isinstance(created, V1ConfigMap) and created.metadata and created.metadata.uid
    got = client.get(V1ConfigMap, "typed", ns)
    assert isinstance(got, V1ConfigMap) and got.data == {"k": "v"}
    got.data["k"] = "w"
    assert client.update(got).data == {"k": "w"}
    items = client.list(V1ConfigMap, ns)
    assert [type(i) for i in items] == [V1ConfigMap]
    assert isinstance(client.patch(V1ConfigMap, "typed", {"data": {"z": "1"}}, ns), V1ConfigMap)
    assert isinstance(client.get("v1/ConfigMap", "typed", ns), dict)


class WidgetSpec(Model):
    size: int = 0
    display_name: str | None = None


class WidgetStatus(Model):
    ready: bool = False


class Widget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec = WidgetSpec()
    status: WidgetStatus | None = None


def test_pydantic_resource_round_trip_through_a_crd(client: Client, ns: str, widgets: str) -> None:
    w = Widget(
        metadata=ObjectMeta(name="typed", namespace=ns), spec=WidgetSpec(size=3, display_name="T")
    )
    created = client.create(w)
    assert isinstance(created, Widget)
    assert created.metadata.uid and created.metadata.resource_version
    assert created.spec == WidgetSpec(size=3, display_name="T")
    raw = client.get(widgets, "typed", ns)
    assert raw["spec"] == {"size": 3, "displayName": "T"}

    got = client.get(Widget, "typed", ns)
    got.spec.size = 4
    assert client.update(got).spec.size == 4
    got = client.get(Widget, "typed", ns)
    got.status = WidgetStatus(ready=True)
    assert client.update_status(got).status == WidgetStatus(ready=True)
    assert [x.metadata.name for x in client.list(Widget, ns)] == ["typed"]
    client.delete(Widget, "typed", ns)


class TargetSpec(Model):
    size: int = 0
    target_labels: dict[str, str] = {}


class Target(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: TargetSpec = TargetSpec()


def test_typed_resource_written_back_never_adds_unset_defaults(
    client: Client, ns: str, widgets: str
) -> None:
    client.create(
        {
            "apiVersion": widgets.rsplit("/", 1)[0],
            "kind": "Widget",
            "metadata": {"name": "d", "namespace": ns},
            "spec": {"size": 1},
        }
    )
    got = client.get(Target, "d", ns)
    before = (got.metadata.generation, got.metadata.resource_version)
    unchanged = client.update(got)  # written back as read: a no-op on the server
    assert (unchanged.metadata.generation, unchanged.metadata.resource_version) == before

    got.metadata.finalizers = ["example.com/cleanup"]
    updated = client.update(got)
    assert updated.metadata.generation == before[0]  # spec untouched: no new generation
    assert client.get(widgets, "d", ns)["spec"] == {"size": 1}  # no targetLabels: {}


def test_typed_resource_built_in_python_is_updated_with_its_defaults(
    client: Client, ns: str, widgets: str
) -> None:
    # update() is a full replace: a Resource built in Python writes its model defaults,
    # as create() does, instead of erasing the fields that hold them
    client.create(
        {
            "apiVersion": widgets.rsplit("/", 1)[0],
            "kind": "Widget",
            "metadata": {"name": "b", "namespace": ns},
            "spec": {"size": 1, "targetLabels": {"a": "b"}},
        }
    )
    rv = client.get(widgets, "b", ns)["metadata"]["resourceVersion"]
    built = Target(metadata=ObjectMeta(name="b", namespace=ns, resource_version=rv))
    assert built.to_dict()["spec"] == {"size": 0, "targetLabels": {}}
    updated = client.update(built)
    assert client.get(widgets, "b", ns)["spec"] == {"size": 0, "targetLabels": {}}
    assert updated.spec == TargetSpec()

    # update_status too: the status defaults of a built object are written, not erased
    client.patch_status(widgets, "b", {"status": {"phase": "Running", "ready": True}}, ns)
    rv = client.get(widgets, "b", ns)["metadata"]["resourceVersion"]
    status = StatusTarget(metadata=ObjectMeta(name="b", namespace=ns, resource_version=rv))
    client.update_status(status)
    assert client.get(widgets, "b", ns)["status"] == {"phase": "Pending"}


class TargetStatus(Model):
    phase: str = "Pending"


class StatusTarget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    status: TargetStatus = TargetStatus()


def test_a_dict_selector_is_checked_before_delete_all_of_sends_it(client: Client, ns: str) -> None:
    # {"app": "web,tier"} joined unchecked read as app=web AND has label tier
    client.create(_cm(ns, "a", app="web", tier="x"))
    with pytest.raises(SelectorError, match="invalid label value 'web,tier'"):
        client.delete_all_of("v1/ConfigMap", ns, labels={"app": "web,tier"})
    with pytest.raises(SelectorError, match="invalid label key 'tier!'"):
        client.delete_all_of("v1/ConfigMap", ns, labels={"app": "db", "tier!": "y"})
    with pytest.raises(SelectorError, match="invalid label key 'tier!'"):
        client.list("v1/ConfigMap", ns, labels={"app": "db", "tier!": "y"})
    assert [o["metadata"]["name"] for o in client.list("v1/ConfigMap", ns)] == ["a"]
