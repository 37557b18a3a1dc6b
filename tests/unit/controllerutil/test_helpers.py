"""controllerutil on the three object flavours: dicts, pydantic Resources, kubernetes models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from kubernetes.client import V1Condition, V1ConfigMap, V1ObjectMeta, V1OwnerReference

from mcruntime.client import Model, ObjectMeta, Resource
from mcruntime.controllerutil import (
    AlreadyOwnedError,
    Condition,
    add_finalizer,
    contains_finalizer,
    find_status_condition,
    get_controller_of,
    has_controller_reference,
    has_owner_reference,
    is_status_condition_false,
    is_status_condition_true,
    remove_controller_reference,
    remove_finalizer,
    remove_owner_reference,
    remove_status_condition,
    set_controller_reference,
    set_owner_reference,
    set_status_condition,
)


class Spec(Model):
    size: int = 0


class Widget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: Spec = Spec()


def _dict(name: str = "child", ns: str | None = "ns", uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def _resource(name: str = "child", ns: str | None = "ns", uid: str | None = None) -> Widget:
    return Widget(metadata=ObjectMeta(name=name, namespace=ns, uid=uid))


def _model(name: str = "child", ns: str | None = "ns", uid: str | None = None) -> V1ConfigMap:
    return V1ConfigMap(
        api_version="v1", kind="ConfigMap", metadata=V1ObjectMeta(name=name, namespace=ns, uid=uid)
    )


FLAVOURS: list[Callable[..., Any]] = [_dict, _resource, _model]


@pytest.mark.parametrize("make", FLAVOURS, ids=["dict", "resource", "model"])
def test_finalizers_say_whether_they_changed_the_object(make: Callable[..., Any]) -> None:
    obj = make()
    assert not contains_finalizer(obj, "example.com/f")
    assert add_finalizer(obj, "example.com/f") is True
    assert add_finalizer(obj, "example.com/f") is False
    assert add_finalizer(obj, "example.com/g") is True
    assert contains_finalizer(obj, "example.com/f")
    assert remove_finalizer(obj, "example.com/f") is True
    assert remove_finalizer(obj, "example.com/f") is False
    assert not contains_finalizer(obj, "example.com/f") and contains_finalizer(obj, "example.com/g")


def test_finalizer_of_a_resource_read_from_the_api_is_written() -> None:
    w = Widget.from_dict(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    )
    add_finalizer(w, "example.com/f")
    assert w.to_dict()["metadata"] == {"name": "w", "finalizers": ["example.com/f"]}


@pytest.mark.parametrize("make", FLAVOURS, ids=["dict", "resource", "model"])
@pytest.mark.parametrize(
    "make_owner", FLAVOURS, ids=["owner-dict", "owner-resource", "owner-model"]
)
def test_controller_reference_set_once_and_other_controllers_refused(
    make: Callable[..., Any], make_owner: Callable[..., Any]
) -> None:
    owner = make_owner("parent", uid="u-1")
    obj = make()
    assert not has_controller_reference(obj)
    assert get_controller_of(obj) is None
    assert set_controller_reference(owner, obj) is True
    assert set_controller_reference(owner, obj) is False  # already the controller
    assert has_controller_reference(obj)
    controller = get_controller_of(obj)  # metav1.GetControllerOf
    assert controller is not None
    assert (controller["name"], controller["uid"], controller["controller"]) == (
        "parent",
        "u-1",
        True,
    )
    other = _dict("other-parent", uid="u-2")
    other["kind"] = "Secret"
    with pytest.raises(AlreadyOwnedError, match="already owned by another .* controller 'parent'"):
        set_controller_reference(other, obj)
    assert set_owner_reference(other, obj) is True  # a plain owner is fine
    assert get_controller_of(obj)["name"] == "parent"  # type: ignore[index]
    assert set_owner_reference(other, obj) is False
    assert remove_owner_reference(owner, obj) is True
    assert remove_owner_reference(owner, obj) is False
    assert not has_controller_reference(obj)


def test_a_controller_releases_what_it_controls_and_leaves_other_owners_alone() -> None:
    owner, other = _resource("parent", uid="u-1"), _resource("other", uid="u-2")
    obj = _dict()
    set_owner_reference(other, obj)
    assert remove_controller_reference(owner, obj) is False  # not its controller: unchanged
    set_owner_reference(owner, obj)
    assert remove_controller_reference(owner, obj) is False  # a plain owner reference stays
    assert has_owner_reference(owner, obj)
    remove_owner_reference(owner, obj)
    assert not has_owner_reference(owner, obj)
    set_controller_reference(owner, obj)
    assert remove_controller_reference(other, obj) is False
    assert remove_controller_reference(owner, obj) is True
    assert not has_controller_reference(obj) and not has_owner_reference(owner, obj)
    assert [r["name"] for r in obj["metadata"]["ownerReferences"]] == ["other"]
    assert remove_controller_reference(owner, obj) is False  # again: nothing to do
    model = _model()
    set_controller_reference(owner, model)
    assert has_owner_reference(owner, model)
    assert remove_controller_reference(owner, model) is True
    assert not model.metadata.owner_references


def test_owner_reference_fields_are_those_the_api_expects() -> None:
    owner = _resource("parent", uid="u-1")
    obj = _dict()
    set_controller_reference(owner, obj)
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "name": "parent",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    model = _model()
    set_owner_reference(owner, model)
    refs = model.metadata.owner_references
    assert isinstance(refs[0], V1OwnerReference) and refs[0].uid == "u-1"


def test_owner_references_refuse_other_namespaces_and_objects_not_created() -> None:
    with pytest.raises(ValueError, match="cross-namespace"):
        set_owner_reference(_dict("p", ns="a", uid="u"), _dict(ns="b"))
    with pytest.raises(ValueError) as no_ns:
        set_owner_reference(_dict("p", ns="a", uid="u"), _dict(ns=None))
    # a ConfigMap built without a namespace is not called cluster-scoped: the fix is named
    assert str(no_ns.value) == (
        "ConfigMap child has no metadata.namespace: a namespaced object must be in its owner's "
        "namespace ('a'; set it before the reference), and a cluster-scoped one must not have "
        "a namespace-scoped owner (ConfigMap a/p)"
    )
    with pytest.raises(ValueError, match="no name or uid"):
        set_controller_reference(_dict("p"), _dict())
    set_owner_reference(_dict("p", ns=None, uid="u"), _dict(ns="b"))  # cluster-scoped owner: fine


def _cond(flavour: str, type: str, status: str, **kw: Any) -> Any:
    if flavour == "dict":
        return {
            "type": type,
            "status": status,
            **{k.replace("_g", "G").replace("_t", "T"): v for k, v in kw.items()},
        }
    if flavour == "model":
        return Condition(type=type, status=status, **kw)  # type: ignore[arg-type]
    from datetime import UTC, datetime

    kw = {"reason": "", "message": "", "last_transition_time": datetime.now(UTC), **kw}
    return V1Condition(type=type, status=status, **kw)  # its lastTransitionTime is required


@pytest.mark.parametrize("flavour", ["dict", "model", "kubernetes"])
def test_status_conditions_keep_transition_time_until_the_status_changes(flavour: str) -> None:
    conditions: list[Any] = []
    assert set_status_condition(conditions, _cond(flavour, "Ready", "False", reason="Pending"))
    first = find_status_condition(conditions, "Ready")
    ltt = _get(first, "last_transition_time")
    assert ltt and is_status_condition_false(conditions, "Ready")
    assert not set_status_condition(conditions, _cond(flavour, "Ready", "False", reason="Pending"))
    assert set_status_condition(
        conditions, _cond(flavour, "Ready", "False", reason="Waiting", observed_generation=3)
    )
    assert _get(first, "last_transition_time") == ltt  # same status: time kept
    assert _get(first, "reason") == "Waiting" and _get(first, "observed_generation") == 3
    later = "2030-01-01T00:00:00Z" if flavour != "kubernetes" else _future()
    assert set_status_condition(
        conditions,
        _cond(
            flavour,
            "Ready",
            "True",
            reason="Done",
            observed_generation=3,
            last_transition_time=later,
        ),
    )
    assert _get(first, "last_transition_time") == later and is_status_condition_true(
        conditions, "Ready"
    )
    assert len(conditions) == 1
    assert remove_status_condition(conditions, "Ready") and not remove_status_condition(
        conditions, "Ready"
    )
    assert find_status_condition(conditions, "Ready") is None
    assert not is_status_condition_true(conditions, "Ready")
    assert not is_status_condition_false(conditions, "Ready")


@pytest.mark.parametrize("flavour", ["dict", "model", "kubernetes"])
def test_a_condition_template_reused_for_many_objects_is_neither_stamped_nor_shared(
    flavour: str,
) -> None:
    # Go's meta.SetStatusCondition takes the condition by value: a module-level READY used for
    # every object stays as written, and each object's list has a condition of its own
    template = _cond(flavour, "Ready", "True", reason="Synced")
    stamp = _get(template, "last_transition_time")
    a: list[Any] = []
    b: list[Any] = []
    assert set_status_condition(a, template) and set_status_condition(b, template)
    assert _get(template, "last_transition_time") == stamp  # (None, or the kubernetes one)
    assert a[0] is not template and b[0] is not a[0]
    assert set_status_condition(a, _cond(flavour, "Ready", "False", reason="Broken"))
    assert is_status_condition_false(a, "Ready")
    assert is_status_condition_true(b, "Ready")
    assert _get(template, "status") == "True"


def _future() -> Any:
    from datetime import UTC, datetime

    return datetime(2030, 1, 1, tzinfo=UTC)


def _get(c: Any, snake: str) -> Any:
    if isinstance(c, dict):
        parts = snake.split("_")
        return c.get(parts[0] + "".join(p.title() for p in parts[1:]))
    return getattr(c, snake)


def test_a_dict_condition_leaving_fields_out_holds_what_go_would_write() -> None:
    # Go's metav1.Condition has zero values: a condition without a message writes "", which
    # the schema of []metav1.Condition requires; here None was stored and sent as null
    conditions: list[Any] = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Done",
            "message": "all good",
            "observedGeneration": 3,
            "lastTransitionTime": "2020-01-01T00:00:00Z",
        }
    ]
    assert set_status_condition(conditions, {"type": "Ready", "status": "False"})
    assert conditions[0] == {
        "type": "Ready",
        "status": "False",
        "reason": "",
        "message": "",
        "lastTransitionTime": conditions[0]["lastTransitionTime"],
    }
    assert not set_status_condition(conditions, {"type": "Ready", "status": "False"})
    assert set_status_condition(conditions, {"type": "Synced", "status": "True", "reason": "Ok"})
    assert conditions[1]["message"] == "" and conditions[1]["reason"] == "Ok"
    assert "observedGeneration" not in conditions[1]


def test_removing_a_condition_removes_every_condition_of_its_type() -> None:
    # as Go's meta.RemoveStatusCondition: a list holding a type twice (written by an older
    # controller, or a CRD whose list is not a map) no longer has it after the removal
    conditions: list[Any] = [
        _cond("dict", "Ready", "True"),
        _cond("dict", "Synced", "True"),
        _cond("dict", "Ready", "False"),
    ]
    assert remove_status_condition(conditions, "Ready")
    assert find_status_condition(conditions, "Ready") is None
    assert [c["type"] for c in conditions] == ["Synced"]
    assert not remove_status_condition(None, "Ready")


def test_a_condition_list_that_is_none_is_refused_saying_what_to_pass() -> None:
    class Status(Model):
        conditions: list[Condition] | None = None

    status = Status()
    with pytest.raises(TypeError, match=r"got None: give the object an empty list first"):
        set_status_condition(status.conditions, Condition(type="Ready", status="True"))  # type: ignore[arg-type]


def test_a_datetime_transition_time_in_a_dict_is_written_as_kubernetes_writes_times() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    at = datetime(2026, 1, 2, 5, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
    conditions: list[Any] = []
    set_status_condition(conditions, _cond("dict", "Ready", "True", last_transition_time=at))
    assert conditions[0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    later = datetime(2026, 1, 3, tzinfo=UTC)
    set_status_condition(conditions, _cond("dict", "Ready", "False", last_transition_time=later))
    assert conditions[0]["lastTransitionTime"] == "2026-01-03T00:00:00Z"


@pytest.mark.parametrize("flavour", ["model", "kubernetes"])
def test_a_dict_condition_set_into_a_typed_list_becomes_one_of_its_conditions(
    flavour: str,
) -> None:
    conditions: list[Any] = [_cond(flavour, "Ready", "True", reason="Done")]
    assert set_status_condition(conditions, {"type": "Synced", "status": "False", "reason": "No"})
    assert type(conditions[1]) is type(conditions[0])
    assert is_status_condition_false(conditions, "Synced")
    assert conditions[1].message == "" and conditions[1].last_transition_time


@pytest.mark.parametrize("make", FLAVOURS, ids=["dict", "resource", "model"])
def test_a_plain_owner_reference_can_block_the_owners_foreground_deletion(
    make: Callable[..., Any],
) -> None:
    # Go's SetOwnerReference(owner, obj, scheme, WithBlockOwnerDeletion(true))
    owner, obj = make("parent", uid="u-1"), make()
    assert set_owner_reference(owner, obj, block_owner_deletion=True)
    assert _only_ref(obj, "block_owner_deletion") is True
    assert not _only_ref(obj, "controller") and not has_controller_reference(obj)
    assert not set_owner_reference(owner, obj)  # kept when not given
    assert set_owner_reference(owner, obj, block_owner_deletion=False)
    assert _only_ref(obj, "block_owner_deletion") is False


def _only_ref(obj: Any, snake: str) -> Any:
    refs = (
        obj["metadata"]["ownerReferences"]
        if isinstance(obj, dict)
        else obj.metadata.owner_references
    )
    assert len(refs) == 1
    return _get(refs[0], snake)


def test_a_datetime_transition_time_given_to_a_condition_model_of_strings_is_a_string() -> None:
    from datetime import UTC, datetime

    conditions: list[Any] = [Condition(type="Ready", status="True", reason="Done")]
    later = V1Condition(
        type="Ready",
        status="False",
        reason="Broken",
        message="",
        last_transition_time=datetime(2026, 1, 3, 4, 5, 6, 789, tzinfo=UTC),
    )
    assert set_status_condition(conditions, later)
    assert conditions[0].last_transition_time == "2026-01-03T04:05:06Z"


def test_a_condition_model_of_aware_datetimes_is_stamped_with_a_datetime() -> None:
    from datetime import datetime

    from pydantic import AwareDatetime

    class TimedCondition(Model):
        type: str
        status: str
        reason: str = ""
        message: str = ""
        last_transition_time: AwareDatetime | None = None

    conditions: list[TimedCondition] = []
    assert set_status_condition(conditions, TimedCondition(type="Ready", status="True"))
    assert isinstance(conditions[0].last_transition_time, datetime)
