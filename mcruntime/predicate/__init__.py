"""Predicates filter events before they reach a handler.

Combine them with ``&``, ``|`` and ``~`` (or [`and_()`][mcruntime.predicate.and_], [`or_()`][mcruntime.predicate.or_], [`not_()`][mcruntime.predicate.not_]).

A predicate runs on the thread that delivers every watch event of the process, for
every cluster and every manager, one event after the other: it must answer at once
(see [`Predicate`][mcruntime.predicate.Predicate]).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcruntime._callables import refuse_coroutine_function
from mcruntime.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent, meta

__all__ = [
    "Predicate",
    "Funcs",
    "GenerationChanged",
    "LabelChanged",
    "AnnotationChanged",
    "FieldChanged",
    "ResourceVersionChanged",
    "from_func",
    "label_selector",
    "and_",
    "or_",
    "not_",
]

ObjectFilter = Callable[[dict[str, Any]], bool]


class Predicate:
    """Decides per event whether it reaches the handler. The default lets every event through.

    Subclasses override any of `create()`, `update()`, `delete()`,
    `generic()`. Predicates run on the thread that reads every watch of the
    process (an informer's thread for its list): while one runs, no event of
    any cluster is delivered. Keep them quick: look at the event's objects and
    read the cache of kinds the controller watches; never call an API server
    (``uncached_client``, ``api_reader``) or another system, never wait. A
    decision that needs such calls belongs in the reconcile: let the event
    through and decide there.
    """

    def create(self, event: CreateEvent) -> bool:
        return True

    def update(self, event: UpdateEvent) -> bool:
        return True

    def delete(self, event: DeleteEvent) -> bool:
        return True

    def generic(self, event: GenericEvent) -> bool:
        return True

    def __and__(self, other: Predicate) -> Predicate:
        return and_(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return or_(self, other)

    def __invert__(self) -> Predicate:
        return not_(self)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}()"


class Funcs(Predicate):
    """A predicate from functions; a missing function lets its events through."""

    def __init__(
        self,
        create: Callable[[CreateEvent], bool] | None = None,
        update: Callable[[UpdateEvent], bool] | None = None,
        delete: Callable[[DeleteEvent], bool] | None = None,
        generic: Callable[[GenericEvent], bool] | None = None,
    ) -> None:
        for what, fn in (
            ("create", create),
            ("update", update),
            ("delete", delete),
            ("generic", generic),
        ):
            _check_filter(fn, f"the {what} predicate")
        self._create, self._update, self._delete, self._generic = create, update, delete, generic

    def create(self, event: CreateEvent) -> bool:
        return self._create(event) if self._create else True

    def update(self, event: UpdateEvent) -> bool:
        return self._update(event) if self._update else True

    def delete(self, event: DeleteEvent) -> bool:
        return self._delete(event) if self._delete else True

    def generic(self, event: GenericEvent) -> bool:
        return self._generic(event) if self._generic else True

    def __repr__(self) -> str:
        given = (
            f"{what}={_name(fn)}"
            for what, fn in (
                ("create", self._create),
                ("update", self._update),
                ("delete", self._delete),
                ("generic", self._generic),
            )
            if fn is not None
        )
        return f"Funcs({', '.join(given)})"


class _FromFunc(Funcs):
    """What [`from_func()`][mcruntime.predicate.from_func] makes: named after its function in logs."""

    def __init__(self, fn: ObjectFilter) -> None:
        super().__init__(
            create=lambda e: fn(e.object),
            update=lambda e: fn(e.object_new),
            delete=lambda e: fn(e.object),
            generic=lambda e: fn(e.object),
        )
        self.fn = fn

    def __repr__(self) -> str:
        return f"from_func({_name(self.fn)})"


def _name(fn: Any) -> str:
    """A function as a log line names it: its qualified name (``Checks.wanted``)."""
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def _check_filter(fn: Any, what: str) -> None:
    """Refuse an ``async def`` filter: its coroutine is truthy, every event would pass."""
    refuse_coroutine_function(
        fn,
        what,
        "a predicate runs where events are delivered and must answer at once: pass a plain "
        "function returning a bool, reading the cache",
    )


def from_func(fn: ObjectFilter) -> Predicate:
    """A predicate that applies ``fn(object)`` to every event (the new object for updates)."""
    _check_filter(fn, "the predicate")
    return _FromFunc(fn)


class _UpdateOnly(Predicate):
    """Passes create/delete/generic; filters updates by comparing old and new."""

    def update(self, event: UpdateEvent) -> bool:
        return self._changed(meta(event.object_old), meta(event.object_new))

    def _changed(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        raise NotImplementedError


class ResourceVersionChanged(_UpdateOnly):
    """Skips updates whose resourceVersion did not change (resyncs)."""

    def _changed(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return old.get("resourceVersion") != new.get("resourceVersion")


class GenerationChanged(_UpdateOnly):
    """Skips updates that did not change ``metadata.generation`` (status/metadata-only writes).

    Kinds without a generation (ConfigMaps, Secrets) never pass an update.
    """

    def _changed(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return old.get("generation") != new.get("generation")


class LabelChanged(_UpdateOnly):
    """Passes updates that changed the labels."""

    def _changed(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return (old.get("labels") or {}) != (new.get("labels") or {})


class AnnotationChanged(_UpdateOnly):
    """Passes updates that changed the annotations."""

    def _changed(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return (old.get("annotations") or {}) != (new.get("annotations") or {})


class FieldChanged(Predicate):
    """Passes updates that changed the value at a dotted ``path`` (``"spec.replicas"``),
    and the update that starts the object's deletion; creates, deletes and generic events pass.

    What kopf's ``@kopf.on.field(..., field="spec.replicas")`` reacts to. The update that
    sets ``metadata.deletionTimestamp`` passes whatever the field holds: it is the only
    event of an object a finalizer holds until its cleanup runs, and dropping it would leave
    the object (and a namespace deleted with it) terminating for ever, as kopf's deletion
    handlers run whatever its field handlers filter. A missing field and one set to null
    read alike; a path through a list does not index it (the whole list is compared at the
    last key that names one). A map key with a dot cannot be named.
    """

    def __init__(self, path: str) -> None:
        keys = tuple(path.split("."))
        if not path or not all(keys):
            raise ValueError(
                f"FieldChanged needs a dotted path such as 'spec.replicas', not {path!r}"
            )
        self.path = path
        self._keys = keys

    def _at(self, obj: Any) -> Any:
        for key in self._keys:
            if not isinstance(obj, Mapping):
                return None
            obj = obj.get(key)
        return obj

    def update(self, event: UpdateEvent) -> bool:
        if self._at(event.object_old) != self._at(event.object_new):
            return True
        # the deletion began: a finalizer's cleanup waits for this event alone
        return bool(
            meta(event.object_new).get("deletionTimestamp")
            and not meta(event.object_old).get("deletionTimestamp")
        )

    def __repr__(self) -> str:
        return f"FieldChanged({self.path!r})"


def label_selector(selector: str | Mapping[str, Any]) -> Predicate:
    """Passes events for objects whose labels match ``selector``.

    ``selector`` is selector text (``"app=web,tier in (a,b)"``), a matchLabels dict
    (``{"app": "web"}``), or a whole ``metav1.LabelSelector`` dict, as Go's
    ``predicate.LabelSelectorPredicate`` takes it:
    ``{"matchLabels": {...}, "matchExpressions": [{"key": ..., "operator": "In", "values": [...]}]}``.
    """
    from mcruntime._selectors import LabelSelector

    if isinstance(selector, str):
        sel = LabelSelector.parse(selector)
    elif _is_label_selector(selector):
        sel = LabelSelector.from_label_selector(selector)
    else:
        sel = LabelSelector.from_dict(selector)
    return from_func(lambda obj: sel.matches(meta(obj).get("labels") or {}))


def _is_label_selector(selector: Mapping[str, Any]) -> bool:
    """A ``metav1.LabelSelector`` dict rather than matchLabels (whose values are strings)."""
    keys = {"matchLabels", "matchExpressions"}
    return (
        bool(selector)
        and set(selector) <= keys
        and not all(isinstance(v, str) for v in selector.values())
    )


class _All(Predicate):
    def __init__(self, preds: tuple[Predicate, ...]) -> None:
        self.preds = preds

    def create(self, event: CreateEvent) -> bool:
        return all(p.create(event) for p in self.preds)

    def update(self, event: UpdateEvent) -> bool:
        return all(p.update(event) for p in self.preds)

    def delete(self, event: DeleteEvent) -> bool:
        return all(p.delete(event) for p in self.preds)

    def generic(self, event: GenericEvent) -> bool:
        return all(p.generic(event) for p in self.preds)

    def __repr__(self) -> str:
        return f"and_({', '.join(map(repr, self.preds))})"


class _Any(_All):
    def create(self, event: CreateEvent) -> bool:
        return any(p.create(event) for p in self.preds)

    def update(self, event: UpdateEvent) -> bool:
        return any(p.update(event) for p in self.preds)

    def delete(self, event: DeleteEvent) -> bool:
        return any(p.delete(event) for p in self.preds)

    def generic(self, event: GenericEvent) -> bool:
        return any(p.generic(event) for p in self.preds)

    def __repr__(self) -> str:
        return f"or_({', '.join(map(repr, self.preds))})"


class _Not(Predicate):
    def __init__(self, pred: Predicate) -> None:
        self.pred = pred

    def create(self, event: CreateEvent) -> bool:
        return not self.pred.create(event)

    def update(self, event: UpdateEvent) -> bool:
        return not self.pred.update(event)

    def delete(self, event: DeleteEvent) -> bool:
        return not self.pred.delete(event)

    def generic(self, event: GenericEvent) -> bool:
        return not self.pred.generic(event)

    def __repr__(self) -> str:
        return f"not_({self.pred!r})"


def and_(*preds: Predicate) -> Predicate:
    """Passes an event only when every predicate passes it."""
    return _All(preds)


def or_(*preds: Predicate) -> Predicate:
    """Passes an event when any predicate passes it."""
    return _Any(preds)


def not_(pred: Predicate) -> Predicate:
    """Passes exactly the events ``pred`` rejects."""
    return _Not(pred)
