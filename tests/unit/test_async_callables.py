"""An ``async def`` handed where mcruntime calls a plain function (a predicate, a map
function, a webhook's function, a finalizer's cleanup, a runnable) is refused when it is
given, naming it and what to pass: called, its coroutine would never run, and every event
or request would go wrong (a coroutine is truthy, not a list, not an object)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import mcruntime
from mcruntime import handler, predicate
from mcruntime.finalizer import FinalizeError, Finalizers
from mcruntime.providers import clusters
from mcruntime.webhook import Converter, DefaultingHandler, ValidatingHandler


async def afn(*args: Any) -> Any:
    return False


class AsyncCall:
    async def __call__(self, *args: Any) -> Any:
        return None


class AsyncValidator:
    async def validate_create(self, request: Any, obj: Any) -> None: ...
    def validate_update(self, request: Any, old: Any, new: Any) -> None: ...
    def validate_delete(self, request: Any, obj: Any) -> None: ...


def _refused(excinfo: pytest.ExceptionInfo[TypeError], name: str, instead: str) -> None:
    msg = str(excinfo.value)
    assert name in msg and "coroutine function (async def)" in msg and instead in msg, msg


@pytest.mark.parametrize("fn", [afn, AsyncCall(), functools.partial(afn, 1)])
def test_async_predicates_are_refused(fn: Any) -> None:
    for kwargs in ({"create": fn}, {"update": fn}, {"delete": fn}, {"generic": fn}):
        with pytest.raises(TypeError) as excinfo:
            predicate.Funcs(**kwargs)
        _refused(excinfo, "predicate", "pass a plain function returning a bool")
    with pytest.raises(TypeError) as excinfo:
        predicate.from_func(fn)
    _refused(excinfo, "predicate", "pass a plain function returning a bool")


def test_async_map_function_is_refused() -> None:
    with pytest.raises(TypeError) as excinfo:
        handler.enqueue_requests_from_map_func(afn)
    _refused(excinfo, "the map function afn", "pass a plain function returning the requests")


def test_async_webhook_functions_are_refused() -> None:
    with pytest.raises(TypeError) as excinfo:
        ValidatingHandler("v1/ConfigMap", afn)
    _refused(excinfo, "the validator afn", "pass a plain function (def)")
    with pytest.raises(TypeError) as excinfo:
        ValidatingHandler("v1/ConfigMap", AsyncValidator())
    _refused(excinfo, "validate_create", "pass a plain function (def)")
    with pytest.raises(TypeError) as excinfo:
        DefaultingHandler("v1/ConfigMap", afn)
    _refused(excinfo, "the defaulter afn", "pass a plain function (def)")
    with pytest.raises(TypeError) as excinfo:
        Converter("example.com", "Widget", "v2", {"v1": (afn, lambda o: o)})
    _refused(excinfo, "to_hub afn", "pass a plain function (def)")


def test_async_finalizer_cleanup_is_refused() -> None:
    f = Finalizers()
    with pytest.raises(TypeError) as excinfo:
        f.register("example.com/cleanup", afn)
    _refused(excinfo, "finalizer 'example.com/cleanup'", "pass a plain function")
    with pytest.raises(TypeError):
        f.register("example.com/cleanup")(afn)
    assert f.keys() == []


def test_a_cleanup_returning_a_coroutine_keeps_its_finalizer() -> None:
    """A cleanup that hands back a coroutine (an async function behind a plain wrapper) did
    not clean up: finalize() reports it and leaves the key, so writing the object does not
    drop the finalizer without the cleanup."""
    f = Finalizers()
    f.register("example.com/cleanup", lambda obj: afn(obj))
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "x",
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["example.com/cleanup"],
        },
    }
    result = f.finalize(obj)
    assert obj["metadata"]["finalizers"] == ["example.com/cleanup"]
    assert not result.updated
    assert isinstance(result.error, FinalizeError)
    assert "coroutine" in str(result.error)


def test_async_runnable_is_refused() -> None:
    mgr = mcruntime.Manager(provider=clusters.Provider())
    with pytest.raises(TypeError) as excinfo:
        mgr.add(afn)
    _refused(excinfo, "runnable afn", "take the stop event in a plain function")


def test_async_cluster_filter_and_index_function_are_refused() -> None:
    from mcruntime.cache import Cache
    from mcruntime.controller import EngageOptions

    with pytest.raises(TypeError) as excinfo:
        EngageOptions(cluster_filter=afn)
    _refused(excinfo, "the cluster_filter afn", "pass a plain function of the cluster's name")
    with pytest.raises(TypeError) as excinfo:
        Cache.index_field(object.__new__(Cache), "v1/ConfigMap", "spec.x", afn)
    _refused(excinfo, "field 'spec.x'", "pass a plain function")
