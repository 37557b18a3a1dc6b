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
from mcruntime.reconcile import Request, current_request, reconciling
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


def _stored(
    make: Callable[..., Any], finalizers: list[str], version: str, uid: str = "uid-1"
) -> Any:
    """A deleted object as a server stores it: with a UID and a resourceVersion."""
    obj = make(finalizers, deleted=True)
    if isinstance(obj, dict):
        obj["metadata"].update(uid=uid, resourceVersion=version)
    else:
        obj.metadata.uid = uid
        obj.metadata.resource_version = version
    return obj


@pytest.mark.parametrize("make", FLAVOURS, ids=IDS)
def test_a_cleanup_that_returned_does_not_run_again_on_the_version_it_ran_on(
    make: Callable[..., Any],
) -> None:
    """The next reconcile may read a cache that has not seen the key's removal yet: the
    same version, the key still there. The cleanup is not run again; the key is removed
    again, for the caller to write (a 409 while the cache is behind, or the write that
    was lost)."""
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(A))
    assert fin.finalize(_stored(make, [A], "5")) == FinalizeResult(updated=True)
    stale = _stored(make, [A, "other.io/keep"], "5")
    assert fin.finalize(stale) == FinalizeResult(updated=True)
    assert _keys(stale) == ["other.io/keep"]
    older = _stored(make, [A], "4")  # (read elsewhere before the version it ran on)
    assert fin.finalize(older) == FinalizeResult(updated=True)
    assert ran == [A]


def test_a_newer_version_still_holding_the_key_runs_the_cleanup_again() -> None:
    """The removal was refused (the object changed meanwhile: 409): it is not written,
    and the cleanup runs on the version that holds the key now."""
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(obj["metadata"]["resourceVersion"]))
    fin.finalize(_stored(_dict, [A], "5"))
    fin.finalize(_stored(_dict, [A], "7"))
    fin.finalize(_stored(_dict, [A], "7"))  # and once on that one
    assert ran == ["5", "7"]


def test_an_object_made_again_under_the_same_name_has_its_cleanup_run() -> None:
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(obj["metadata"]["uid"]))
    fin.finalize(_stored(_dict, [A], "5", uid="first"))
    fin.finalize(_stored(_dict, [A], "5", uid="second"))
    assert ran == ["first", "second"]


def test_the_same_object_in_another_cluster_has_its_cleanup_run() -> None:
    """A cluster restored from another's backup holds the same UIDs and versions: what is
    remembered is per cluster of the reconcile in progress."""
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(str(current_request())))
    for cluster in ("m1", "m2", "m1"):
        with reconciling(Request("ns", "w", cluster)):
            fin.finalize(_stored(_dict, [A], "5"))
    assert ran == ["cluster://m1/ns/w", "cluster://m2/ns/w"]


def test_each_key_is_remembered_on_its_own_and_a_failed_cleanup_runs_again() -> None:
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(A))

    @fin.register(B)
    def failing(obj: Any) -> None:
        ran.append(B)
        raise RuntimeError("down")

    first = fin.finalize(_stored(_dict, [A, B], "5"))
    assert first.error is not None and list(first.error.errors) == [B]
    stale = _stored(_dict, [A, B], "5")
    again = fin.finalize(stale)
    assert again.updated and again.error is not None and list(again.error.errors) == [B]
    assert _keys(stale) == [B]
    assert ran == [A, B, B]


def test_what_is_remembered_goes_once_the_removal_is_seen_after_a_while_and_past_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcruntime.finalizer import _finalizers

    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(obj["metadata"]["uid"]))
    fin.finalize(_stored(_dict, [A], "5"))
    assert len(fin._done) == 1
    # the cache shows the removal (another finalizer keeps the object): forgotten
    fin.finalize(_stored(_dict, ["other.io/keep"], "6"))
    assert fin._done == {}

    # the object gone (no call for it comes again): forgotten after a while, on any call
    fin.finalize(_stored(_dict, [A], "5", uid="gone"))
    assert len(fin._done) == 1
    monkeypatch.setattr(_finalizers, "_REMEMBER", -1.0)
    fin.finalize(_stored(_dict, ["other.io/keep"], "1", uid="unrelated"))
    assert fin._done == {}
    monkeypatch.undo()

    # and never more than a bound, the oldest forgotten first
    monkeypatch.setattr(_finalizers, "_REMEMBERED", 2)
    for uid in ("u1", "u2", "u3"):
        fin.finalize(_stored(_dict, [A], "5", uid=uid))
    assert sorted(uid for _, uid, _ in fin._done) == ["u2", "u3"]
    ran.clear()
    for uid in ("u2", "u3", "u1"):
        fin.finalize(_stored(_dict, [A], "5", uid=uid))
    assert ran == ["u1"]


def test_an_object_without_a_uid_or_version_is_not_remembered() -> None:
    ran: list[str] = []
    fin = Finalizers()
    fin.register(A, lambda obj: ran.append(A))
    fin.finalize(_dict([A], deleted=True))
    fin.finalize(_dict([A], deleted=True))
    assert ran == [A, A]
    assert fin._done == {}
