"""Predicates are checked when the controller is built: a class, a plain function or an
``async def`` method would fail at every event on the informer's thread (one traceback per
object of the initial list), and nothing would be reconciled."""

from __future__ import annotations

from typing import Any

import pytest

import mcruntime
from mcruntime.event import UpdateEvent
from mcruntime.predicate import GenerationChanged, Predicate, from_func
from mcruntime.providers.clusters import Provider
from mcruntime.source import Channel, Kind


class AsyncUpdate(Predicate):
    async def update(self, event: UpdateEvent) -> bool:  # type: ignore[override]
        return True


def _build(where: str, p: Any) -> mcruntime.Manager:
    mgr = mcruntime.Manager(provider=Provider())
    builder = mcruntime.controller_managed_by(mgr).named("web")
    if where == "for_":
        builder = builder.for_("v1/ConfigMap", p)
    elif where == "owns":
        builder = builder.for_("v1/ConfigMap").owns("v1/Secret", p)
    elif where == "watches":
        builder = builder.for_("v1/ConfigMap").watches("v1/Secret", None, p)
    else:
        builder = builder.for_("v1/ConfigMap").with_event_filter(p)
    try:
        builder.complete(lambda req: None)
    except TypeError:
        assert mgr.controllers == [], "a refused controller was added"
        raise
    return mgr


@pytest.mark.parametrize("where", ["for_", "owns", "watches", "with_event_filter"])
def test_a_predicate_class_is_refused_saying_to_pass_an_instance(where: str) -> None:
    # Go's predicate.GenerationChangedPredicate{} is a value: the class looks like the thing
    with pytest.raises(
        TypeError,
        match=r"predicate GenerationChanged is a class: pass an "
        r"instance, GenerationChanged\(\)",
    ):
        _build(where, GenerationChanged)


@pytest.mark.parametrize("where", ["for_", "with_event_filter"])
def test_a_plain_function_is_refused_naming_from_func(where: str) -> None:
    # kopf's when= takes a function
    with pytest.raises(
        TypeError,
        match=r"is not a Predicate \(it has no create, update, "
        r"delete, generic method\): wrap a function of the object in "
        r"mcruntime.predicate.from_func",
    ):
        _build(where, lambda obj: True)
    with pytest.raises(TypeError, match="'labelled' is not a Predicate"):
        _build(where, "labelled")


def test_an_async_predicate_method_is_refused() -> None:
    with pytest.raises(TypeError, match="the update method of predicate .*coroutine function"):
        _build("for_", AsyncUpdate())
    with pytest.raises(TypeError, match="the update method of predicate"):
        Channel(predicates=[AsyncUpdate()])


def test_predicates_and_what_quacks_like_one_are_taken() -> None:
    class Duck:  # not a subclass: its four methods are enough
        def create(self, event: Any) -> bool:
            return True

        update = delete = generic = create

    src = Kind("v1/ConfigMap", None, [GenerationChanged(), from_func(bool), Duck()])  # type: ignore[list-item]
    assert len(src.predicates) == 3
    mgr = _build("with_event_filter", GenerationChanged() | Duck())  # type: ignore[operator]
    assert [c.name for c in mgr.controllers] == ["web"]
