import pytest

from mcruntime.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from mcruntime.predicate import (
    AnnotationChanged,
    FieldChanged,
    Funcs,
    GenerationChanged,
    LabelChanged,
    ResourceVersionChanged,
    and_,
    from_func,
    label_selector,
    not_,
    or_,
)


def obj(rv="1", gen=None, labels=None, annotations=None, name="a"):
    meta = {"name": name, "namespace": "ns", "resourceVersion": rv}
    if gen is not None:
        meta["generation"] = gen
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


def test_generation_changed_passes_spec_changes_only():
    p = GenerationChanged()
    assert p.update(UpdateEvent(obj("1", 1), obj("2", 2)))
    assert not p.update(UpdateEvent(obj("1", 1), obj("2", 1)))
    assert p.create(CreateEvent(obj())) and p.delete(DeleteEvent(obj()))


def test_resource_version_changed_drops_resyncs():
    p = ResourceVersionChanged()
    assert not p.update(UpdateEvent(obj("5"), obj("5")))
    assert p.update(UpdateEvent(obj("5"), obj("6")))


def test_label_and_annotation_changed():
    assert LabelChanged().update(UpdateEvent(obj(labels={"a": "1"}), obj(labels={"a": "2"})))
    assert not LabelChanged().update(UpdateEvent(obj(labels={}), obj()))
    assert AnnotationChanged().update(UpdateEvent(obj(annotations={"x": "1"}), obj()))
    assert not AnnotationChanged().update(
        UpdateEvent(obj(annotations={"x": "1"}), obj(annotations={"x": "1"}))
    )


def test_combinators_and_operators():
    yes = Funcs(update=lambda e: True)
    no = Funcs(update=lambda e: False)
    ev = UpdateEvent(obj(), obj())
    assert and_(yes, yes).update(ev) and not and_(yes, no).update(ev)
    assert or_(no, yes).update(ev) and not or_(no, no).update(ev)
    assert not_(no).update(ev) and not (~yes).update(ev)
    assert (yes & yes).update(ev) and (no | yes).update(ev)


def test_from_func_and_label_selector_filter_every_event_type():
    p = label_selector("app=web,tier in (a,b)")
    good, bad = obj(labels={"app": "web", "tier": "a"}), obj(labels={"app": "db"})
    assert p.create(CreateEvent(good)) and not p.create(CreateEvent(bad))
    assert p.update(UpdateEvent(bad, good)) and not p.update(UpdateEvent(good, bad))
    assert p.delete(DeleteEvent(good)) and p.generic(GenericEvent(good))
    named = from_func(lambda o: o["metadata"]["name"].startswith("keep"))
    assert named.create(CreateEvent(obj(name="keep-1")))
    assert not named.create(CreateEvent(obj(name="drop")))


def test_label_selector_takes_a_whole_metav1_label_selector_as_go_does():
    # predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: ..., MatchExpressions: ...})
    p = label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
        }
    )
    assert p.create(CreateEvent(obj(labels={"app": "web", "tier": "a"})))
    assert not p.create(CreateEvent(obj(labels={"app": "web", "tier": "c"})))
    assert not p.create(CreateEvent(obj(labels={"tier": "a"})))
    only = label_selector({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]})
    assert only.create(CreateEvent(obj(labels={})))
    assert not only.create(CreateEvent(obj(labels={"legacy": "1"})))
    # a matchLabels dict whose label is named matchLabels still means that label
    assert label_selector({"matchLabels": "x"}).create(
        CreateEvent(obj(labels={"matchLabels": "x"}))
    )


def test_field_changed_passes_updates_of_that_field_only():
    def widget(**spec):
        return {"metadata": {"name": "w"}, "spec": spec, "status": {"seen": len(spec)}}

    p = FieldChanged("spec.replicas")
    assert p.update(UpdateEvent(widget(replicas=1), widget(replicas=3)))
    assert not p.update(UpdateEvent(widget(replicas=1, color="red"), widget(replicas=1)))
    assert p.update(UpdateEvent(widget(), widget(replicas=1)))  # set where it was missing
    assert not p.update(UpdateEvent(widget(replicas=None), widget()))  # null reads as missing
    assert p.update(UpdateEvent({"metadata": {}}, widget(replicas=2)))  # no spec at all
    assert p.create(CreateEvent(widget())) and p.delete(DeleteEvent(widget()))
    assert FieldChanged("spec").update(UpdateEvent(widget(a=1), widget(a=2)))
    assert repr(p) == "FieldChanged('spec.replicas')"
    for bad in ("", "spec.", ".spec", "spec..replicas"):
        with pytest.raises(ValueError, match="dotted path"):
            FieldChanged(bad)


def test_field_changed_passes_the_update_that_starts_the_deletion():
    """A finalizer holds the object: the update setting deletionTimestamp is its only event
    before the cleanup, so a field filter (kopf's ``@kopf.on.field``) must not drop it."""

    def widget(deleting: bool = False, **spec):
        meta = {"name": "w", "finalizers": ["example.com/cleanup"]}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-29T20:00:00Z"
        return {"metadata": meta, "spec": spec}

    p = FieldChanged("spec.replicas")
    assert p.update(UpdateEvent(widget(replicas=1), widget(deleting=True, replicas=1)))
    # once deleting, other updates (a finalizer of someone else's removed) are filtered again
    assert not p.update(
        UpdateEvent(widget(deleting=True, replicas=1), widget(deleting=True, replicas=1))
    )


def test_a_predicate_s_repr_names_it_and_its_functions_for_the_logs():
    """An informer's log of a failing predicate shows it by its repr (badinput #15)."""

    def wanted(o):
        return True

    def on_create(e):
        return True

    assert repr(from_func(wanted)) == (
        "from_func(test_a_predicate_s_repr_names_it_and_its_functions_for_the_logs.<locals>.wanted)"
    )
    assert isinstance(from_func(wanted), Funcs)
    assert repr(Funcs(create=on_create)).startswith("Funcs(create=test_a_predicate_s_repr")
    assert repr(GenerationChanged() & ~LabelChanged() | AnnotationChanged()) == (
        "or_(and_(GenerationChanged(), not_(LabelChanged())), AnnotationChanged())"
    )
