"""The finalizer registry on the three object flavours: keys added, cleanups run, failures kept."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from mcruntime.client import ObjectMeta
from mcruntime.controllerutil import contains_finalizer, is_being_deleted
from mcruntime.finalizer import FinalizeError, FinalizeResult, FinalizerFailed, Finalizers
from tests.unit.controllerutil.test_helpers import Widget

A = "example.com/a"
B = "example.com/b"
NOW = "2026-01-01T00:00:00Z"


def _dict(finalizers: list[str] | None = None, deleted: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": "ns"}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if deleted:
        meta["deletionTimestamp"] = NOW
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def _resource(finalizers: list[str] | None = None, deleted: bool = False) -> Widget:
    meta = ObjectMeta(name="w", namespace="ns", finalizers=finalizers)
    if deleted:
        meta.deletion_timestamp = NOW
    return Widget(metadata=meta)


def _model(finalizers: list[str] | None = None, deleted: bool = False) -> V1ConfigMap:
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) if deleted else None
    return V1ConfigMap(
        metadata=V1ObjectMeta(
            name="w", namespace="ns", finalizers=finalizers, deletion_timestamp=stamp
        )
    )


FLAVOURS = [_dict, _resource, _model]
IDS = ["dict", "resource", "model"]


def _keys(obj: Any) -> list[str]:
    meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    found = meta.get("finalizers") if isinstance(meta, dict) else meta.finalizers
    return list(found or [])


@pytest.mark.parametrize("make", FLAVOURS, ids=IDS)
def test_an_object_not_being_deleted_gets_every_missing_key_and_no_cleanup_runs(
    make: Callable[..., Any],
) -> None:
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(A))
    fin.register(B, lambda obj: ran.append(B))
    obj = make(["other.io/keep", A])
    assert not is_being_deleted(obj)
    result = fin.finalize(obj)
    assert result == FinalizeResult(updated=True, status_updated=False)
    assert result.error is None
    assert _keys(obj) == ["other.io/keep", A, B]
    assert ran == []
    # all there: nothing to write
    assert fin.finalize(obj) == FinalizeResult(updated=False, status_updated=False)


@pytest.mark.parametrize("make", FLAVOURS, ids=IDS)
def test_a_deleted_object_has_each_held_keys_cleanup_run_and_the_key_removed(
    make: Callable[..., Any],
) -> None:
    ran: list[tuple[str, Any]] = []
    fin = Finalizers()

    @fin.register(A)
    def clean_a(obj: Any, who: str) -> None:
        ran.append((A, who))

    @fin.register(B)
    def clean_b(obj: Any, who: str) -> FinalizeResult:
        ran.append((B, who))
        return FinalizeResult(status_updated=True)

    obj = make(["other.io/keep", A, B], deleted=True)
    assert is_being_deleted(obj)
    result = fin.finalize(obj, "cluster-1")
    assert result == FinalizeResult(updated=True, status_updated=True)
    assert result.error is None
    assert ran == [(A, "cluster-1"), (B, "cluster-1")]
    assert _keys(obj) == ["other.io/keep"]
    # a deleted object never gets a key back, and a removed key's cleanup does not run again
    assert fin.finalize(obj, "cluster-1") == FinalizeResult()
    assert len(ran) == 2


def test_a_deleted_object_without_a_key_does_not_run_its_cleanup() -> None:
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(A))
    obj = _dict(["other.io/keep"], deleted=True)
    assert fin.finalize(obj) == FinalizeResult()
    assert ran == []
    assert _keys(obj) == ["other.io/keep"]


@pytest.mark.parametrize("make", FLAVOURS, ids=IDS)
def test_failing_cleanups_keep_their_keys_and_all_are_reported_while_the_others_are_removed(
    make: Callable[..., Any],
) -> None:
    fin = Finalizers()
    fin.register(A, lambda obj: (_ for _ in ()).throw(RuntimeError("quota service down")))
    fin.register("example.com/ok", lambda obj: None)
    fin.register(B, lambda obj: (_ for _ in ()).throw(OSError("bucket unreachable")))
    obj = make([A, "example.com/ok", B], deleted=True)
    result = fin.finalize(obj)
    # the successful removal must still be written
    assert (result.updated, result.status_updated) == (True, False)
    assert isinstance(result.error, FinalizeError)
    assert list(result.error.errors) == [A, B]
    assert isinstance(result.error.errors[A], RuntimeError)
    assert isinstance(result.error.errors[B], OSError)
    message = str(result.error)
    assert f"finalizer '{A}' failed" in message and "quota service down" in message
    assert f"finalizer '{B}' failed" in message and "bucket unreachable" in message
    assert _keys(obj) == [A, B]
    assert contains_finalizer(obj, A) and contains_finalizer(obj, B)


def test_a_failing_cleanup_may_report_what_it_changed() -> None:
    fin = Finalizers()

    @fin.register(A)
    def clean(obj: dict[str, Any]) -> None:
        obj["status"] = {"phase": "CleanupFailed"}
        raise FinalizerFailed("quota service down", status_updated=True)

    obj = _dict([A], deleted=True)
    result = fin.finalize(obj)
    assert (result.updated, result.status_updated) == (False, True)
    assert result.error is not None and list(result.error.errors) == [A]
    assert _keys(obj) == [A]


def test_a_key_registered_twice_is_refused_and_the_first_cleanup_kept() -> None:
    fin = Finalizers()

    def first(obj: Any) -> None:
        return None

    assert fin.register(A, first) is first
    with pytest.raises(
        ValueError, match=r"a finalizer for key 'example.com/a' is already registered"
    ):
        fin.register(A, lambda obj: None)
    with pytest.raises(ValueError, match="already registered"):

        @fin.register(A)
        def again(obj: Any) -> None: ...

    with pytest.raises(ValueError, match="must not be empty"):
        fin.register("", first)
    with pytest.raises(TypeError, match="must be callable"):
        fin.register(B, "not a function")  # type: ignore[call-overload]
    assert fin.keys() == [A]


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("my cleanup", "name part must consist of alphanumeric characters"),
        ("Example.com/cleanup", "prefix part a lowercase RFC 1123 subdomain must consist of"),
        ("example.com/a/b", "a qualified name must consist of .* with an optional DNS subdomain"),
        ("example.com/" + "x" * 64, "name part must be no more than 63 characters"),
    ],
)
def test_a_key_the_api_server_would_refuse_is_refused_when_registered(key: str, why: str) -> None:
    # every write of an object holding it would be a 422, each reconcile again
    fin = Finalizers()
    with pytest.raises(ValueError, match=f"is not a qualified name .*: {why}"):
        fin.register(key, lambda obj: None)
    assert fin.keys() == []
    fin.register("cleanup", lambda obj: None)  # a bare name is valid (kube warns of it)
    assert fin.keys() == ["cleanup"]


def test_an_async_cleanup_is_refused_saying_how_an_async_reconciler_calls_finalize() -> None:
    """A kopf port's deletion handler is a coroutine: finalize() would never await it. The
    refusal says what works from an ``async def`` reconciler (its cleanup made plain)."""
    fin = Finalizers()

    async def delete_bucket(obj: dict[str, Any]) -> None: ...

    with pytest.raises(TypeError) as refused:
        fin.register("example.com/bucket", delete_bucket)
    said = str(refused.value)
    assert said.startswith(
        "the cleanup of finalizer 'example.com/bucket', "
        "test_an_async_cleanup_is_refused_saying_how_an_async_reconciler_calls_finalize."
        "<locals>.delete_bucket is a coroutine function (async def)"
    )
    assert said.endswith(
        "pass a plain function, and from an async def reconciler call finalize() off the "
        "event loop: await cluster.aclient.run_sync(finalizers.finalize, obj, req)"
    )
    assert fin.keys() == []


def test_registries_are_independent() -> None:
    one, two = Finalizers(), Finalizers()
    one.register(A, lambda obj: None)
    two.register(A, lambda obj: None)
    obj = _dict()
    two.finalize(obj)
    assert _keys(obj) == [A]
