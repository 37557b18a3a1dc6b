"""A registry of finalizers, each a key and the cleanup that must run before its object goes.

After controller-runtime's ``pkg/finalizer``. `Finalizers.finalize` does the
add-on-create / clean-up-on-delete / remove dance for every registered key and
says what it changed; writing the object is the caller's, with the client of the
object's cluster, so a 409 conflict is handled where the reconcile is retried.

A cleanup that returned is remembered (the object's UID, the key, the
resourceVersion it ran on) so that a reconcile reading a cache not yet showing
the key's removal does not run it again; see `Finalizers`.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from mcruntime._callables import refuse_coroutine_function
from mcruntime._selectors import qualified_name_problems
from mcruntime.client import ObjectLike
from mcruntime.controllerutil import (
    add_finalizer,
    contains_finalizer,
    is_being_deleted,
    remove_finalizer,
)
from mcruntime.errors import MCRuntimeError
from mcruntime.reconcile import current_request

__all__ = ["FinalizeError", "FinalizeResult", "Finalizer", "FinalizerFailed", "Finalizers"]

#: seconds a completed cleanup is remembered: a cache is behind a write it will show far
#: less long (a watch that stalls that long is restarted by a relist)
_REMEMBER = 600.0
#: at most this many completed cleanups are remembered, the oldest forgotten first
_REMEMBERED = 100_000


@dataclass(frozen=True)
class FinalizeResult:
    """What a finalize call changed in the object, so the caller knows what to write.

    ``updated``: metadata or spec changed (a finalizer key added or removed, or a
    cleanup changed the object): write the object (``client.update``).
    ``status_updated``: a cleanup changed the status: write it (``client.update_status``).
    ``error``: every cleanup that failed this time, or None; the object's changes
    are still to be written before raising it.
    """

    updated: bool = False
    status_updated: bool = False
    error: FinalizeError | None = field(default=None, compare=False)


#: a cleanup: takes the object (and what `Finalizers.finalize` was given after it);
#: returns None, or a `FinalizeResult` when it changed the object or its status
Finalizer = Callable[..., FinalizeResult | None]
#: a cleanup as registered: the decorator and ``register`` return it with its own signature
_F = TypeVar("_F", bound=Finalizer)


class FinalizerFailed(MCRuntimeError):
    """Raised by a cleanup that failed but changed the object or its status (a condition, say).

    ``raise FinalizerFailed("quota service down", status_updated=True)``: the key
    stays, the change is reported in `FinalizeResult`, and the cleanup runs again.
    Any other exception a cleanup raises is a failure that changed nothing.
    """

    def __init__(self, message: str, *, updated: bool = False, status_updated: bool = False):
        super().__init__(message)
        self.updated = updated
        self.status_updated = status_updated


class FinalizeError(MCRuntimeError):
    """Every cleanup that failed in one `Finalizers.finalize` call.

    ``errors`` maps each failed finalizer key to its exception, in registration
    order; the message names them all. Each failed key stays on the object.
    """

    def __init__(self, errors: dict[str, BaseException]):
        self.errors = dict(errors)
        self.parts = tuple(self.errors.values())
        said = [f"finalizer {key!r} failed: {err!r}" for key, err in self.errors.items()]
        super().__init__("; ".join(said))


class Finalizers:
    """Finalizer keys and their cleanups, for one controller (no global registry).

    ``register(key, cleanup)`` or ``@finalizers.register(key)`` adds one; a key
    registered twice is refused. `finalize` then, on an object not being deleted,
    adds every missing key; on an object being deleted, runs the cleanup of each
    key it still holds, in registration order, and removes the key of each that
    succeeded. A cleanup that raises keeps its key, so it runs again on the next
    reconcile; the others still run.

    A cleanup that returned runs once for its object: the registry remembers
    the object's UID and resourceVersion it ran on (and the cluster of the
    reconcile in progress: a cluster restored from another's backup holds the
    same UIDs), and a later `finalize` given
    that version (a cache that has not seen the key's removal yet, or a removal
    write that was lost) removes the key again without running the cleanup. It
    runs again only on a newer version still holding the key (the removal was
    refused because the object changed meanwhile), after a restart of the
    process, or for an object that has no UID or resourceVersion.
    """

    def __init__(self) -> None:
        self._cleanups: dict[str, Finalizer] = {}
        #: (cluster, uid, key) -> (resourceVersion the cleanup returned on, when), oldest first
        self._done: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._done_lock = threading.Lock()

    @overload
    def register(self, key: str) -> Callable[[_F], _F]: ...

    @overload
    def register(self, key: str, cleanup: _F) -> _F: ...

    def register(
        self, key: str, cleanup: Finalizer | None = None
    ) -> Finalizer | Callable[[Finalizer], Finalizer]:
        """Register ``cleanup`` under finalizer ``key``; without ``cleanup``, a decorator.

        Raises `ValueError` for a key that is empty, not a qualified name (the API server
        refuses it: use ``example.com/name``) or already registered, and
        `TypeError` for a cleanup that is not callable. Returns the cleanup.
        """
        if not key:
            raise ValueError("a finalizer key must not be empty")
        if problems := qualified_name_problems(key):
            # the API server would refuse every write of an object holding it (422)
            raise ValueError(
                f"finalizer key {key!r} is not a qualified name ([prefix/]name, as "
                f"'example.com/cleanup'): {'; '.join(problems)}"
            )
        if key in self._cleanups:
            raise ValueError(f"a finalizer for key {key!r} is already registered")
        if cleanup is None:
            return lambda fn: self.register(key, fn)
        if not callable(cleanup):
            raise TypeError(f"the cleanup of finalizer {key!r} must be callable: {cleanup!r}")
        refuse_coroutine_function(
            cleanup,
            f"the cleanup of finalizer {key!r},",
            "finalize() calls it and removes the key once it returned: pass a plain function, "
            "and from an async def reconciler call finalize() off the event loop: "
            "await cluster.aclient.run_sync(finalizers.finalize, obj, req)",
        )
        self._cleanups[key] = cleanup
        return cleanup

    def keys(self) -> list[str]:
        """The registered finalizer keys, in registration order."""
        return list(self._cleanups)

    def finalize(self, obj: ObjectLike, *args: Any, **kwargs: Any) -> FinalizeResult:
        """Add the missing keys to ``obj``, or run the cleanups of a deleted ``obj``; never writes.

        ``obj`` is a dict, a pydantic `Resource` or a ``kubernetes`` model, changed
        in place. ``args`` and ``kwargs`` are passed to each cleanup after ``obj``
        (the reconcile request, say, to know the cluster). Keys on the object
        that are not registered here are left alone.
        """
        deleting = is_being_deleted(obj)
        ident, version = _identity(obj)
        self._forget_old()
        updated = status_updated = False
        errors: dict[str, BaseException] = {}
        for key, cleanup in self._cleanups.items():
            if not deleting:
                updated = add_finalizer(obj, key) or updated
                continue
            if not contains_finalizer(obj, key):
                self._forget(ident, key)  # the removal is seen
                continue
            if self._cleaned(ident, key, version):
                # it returned on this version already: only the removal is still to be seen
                remove_finalizer(obj, key)
                updated = True
                continue
            try:
                result = cleanup(obj, *args, **kwargs)
            except FinalizerFailed as err:
                errors[key] = err
                updated = updated or err.updated
                status_updated = status_updated or err.status_updated
                continue
            except Exception as err:
                errors[key] = err
                continue
            if result is not None and not isinstance(result, FinalizeResult):
                # (a coroutine of a cleanup made async after registering, say): it did not
                # clean up, or not as a cleanup says it did: the key stays
                if inspect.iscoroutine(result):
                    result.close()
                errors[key] = TypeError(
                    f"the cleanup returned a {type(result).__name__}, not None or a "
                    "FinalizeResult"
                    + (
                        " (it is async: pass a plain function)"
                        if inspect.iscoroutine(result)
                        else ""
                    )
                )
                continue
            remove_finalizer(obj, key)
            updated = True
            self._remember(ident, key, version)
            if result is not None:
                status_updated = status_updated or result.status_updated
        return FinalizeResult(updated, status_updated, FinalizeError(errors) if errors else None)

    def _cleaned(self, ident: tuple[str, str] | None, key: str, version: str | None) -> bool:
        """Whether the cleanup of ``key`` returned on the version given (or on a later one)."""
        if ident is None or version is None:
            return False
        with self._done_lock:
            done = self._done.get((*ident, key))
            if done is None:
                return False
            if _not_newer(version, done[0]):
                return True
            del self._done[*ident, key]  # a newer version still holds the key: run it again
            return False

    def _remember(self, ident: tuple[str, str] | None, key: str, version: str | None) -> None:
        if ident is None or version is None:
            return
        with self._done_lock:
            self._done.pop((*ident, key), None)
            self._done[*ident, key] = (version, time.monotonic())
            while len(self._done) > _REMEMBERED:
                del self._done[next(iter(self._done))]

    def _forget(self, ident: tuple[str, str] | None, key: str) -> None:
        if ident is not None:
            with self._done_lock:
                self._done.pop((*ident, key), None)

    def _forget_old(self) -> None:
        """Drop what was remembered longer than ``_REMEMBER`` (the objects gone long since)."""
        horizon = time.monotonic() - _REMEMBER
        with self._done_lock:
            while self._done:
                oldest = next(iter(self._done))
                if self._done[oldest][1] > horizon:
                    return
                del self._done[oldest]


def _identity(obj: ObjectLike) -> tuple[tuple[str, str] | None, str | None]:
    """The cluster of the reconcile in progress with the UID of a dict, pydantic view or
    ``kubernetes`` model, and its resourceVersion; None for what it lacks."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
    else:
        meta = getattr(obj, "metadata", None)
        uid, version = getattr(meta, "uid", None), getattr(meta, "resource_version", None)
    request = current_request()
    cluster = "" if request is None else request.cluster_name
    return ((cluster, str(uid)) if uid else None), (str(version) if version else None)


def _not_newer(version: str, seen: str) -> bool:
    """Whether resourceVersion ``version`` is ``seen`` or, both being numbers, older."""
    if version == seen:
        return True
    try:
        return int(version) < int(seen)
    except ValueError:  # opaque versions: only equality says anything
        return False
