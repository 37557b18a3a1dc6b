"""``wait_for``: poll a condition with a deadline, for tests of controllers.

A controller acts asynchronously, so a test waits until what it expects has
happened; ``wait_for`` does that with a deadline and a failure that says what was
awaited (never a bare sleep).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

from mcruntime.errors import DeadlineExceeded, NotFound

__all__ = ["DEFAULT_WAIT_TIMEOUT", "WaitTimeout", "wait_for", "wait_for_condition"]

T = TypeVar("T")

#: seconds ``wait_for`` waits by default: generous, as machines running tests are often busy
DEFAULT_WAIT_TIMEOUT = 15.0


class WaitTimeout(AssertionError):
    """The awaited condition did not hold within the timeout (a test failure, not an error)."""


def _describe(predicate: Callable[[], object]) -> str:
    name = getattr(predicate, "__qualname__", None) or repr(predicate)
    code = getattr(predicate, "__code__", None)
    if name.endswith("<lambda>") and code is not None:
        return f"the lambda at {code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"
    return str(name)


class _Unset(enum.Enum):
    """``wait_for(equals=...)`` not given (``None`` is a value one may wait for)."""

    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET
#: the longest a value is shown in a timeout's message, in characters
_SHOWN = 200
#: what a Secret's values are shown as
_MASK = "***"


def _redacted(value: Any) -> Any:
    """``value`` with the values of every Secret in it (``data``, ``stringData``) masked; the
    same object when it holds no Secret."""
    if type(value) in (list, tuple):
        items = [_redacted(v) for v in value]
        changed = any(a is not b for a, b in zip(items, value, strict=True))
        return type(value)(items) if changed else value
    if not isinstance(value, dict):
        if type(value).__name__ == "V1Secret" or getattr(value, "kind", None) == "Secret":
            return _redacted({**_as_dict(value), "kind": "Secret"})  # a typed view
        return value
    out = {k: _redacted(v) for k, v in value.items()}
    if value.get("kind") == "Secret":
        for key in ("data", "stringData", "string_data"):
            if isinstance(value.get(key), dict):
                out[key] = dict.fromkeys(value[key], _MASK)
    return out if any(out[k] is not v for k, v in value.items()) else value


def _shown(value: Any) -> str:
    """``repr(value)`` for a timeout's message: a Secret's values masked, and shortened."""
    text = repr(_redacted(value))
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."


def wait_for(
    predicate: Callable[[], T],
    timeout: float = DEFAULT_WAIT_TIMEOUT,
    what: str = "",
    *,
    interval: float = 0.02,
    stop: threading.Event | None = None,
    ignore: type[BaseException] | tuple[type[BaseException], ...] = (),
    equals: object = _UNSET,
) -> T:
    """Call ``predicate`` until it returns something truthy (or, with ``equals``, a value
    equal to it), and return that value.

    It is called at once, then every ``interval`` seconds; after ``timeout``
    seconds it raises [`WaitTimeout`][mcruntime.envtest.WaitTimeout] (an
    ``AssertionError``) naming ``what`` was awaited (or the predicate), the timeout
    and the last value seen. A set ``stop`` event ends the wait early with the same
    error. An exception raised by ``predicate`` propagates at once, unless it is one
    of ``ignore``: then it counts as "not yet" (as Gomega's ``Eventually`` takes an
    error), and a timeout names the last one.

        obj = wait_for(lambda: client.get(kind, "web", "default"), ignore=NotFound)

    ``equals`` makes ``predicate`` a getter, as Gomega's ``Eventually(f).Should(Equal(x))``:
    the wait ends when what it returns ``== equals``, so a timeout shows the value the
    comparison saw, not only ``False`` (a Secret's values masked, a long value shortened):

        wait_for(lambda: client.get("v1/ConfigMap", "cm", "ns")["data"]["x"], equals="2")
        # WaitTimeout: timed out after 15.0s waiting for the lambda at test_cm.py:12
        # to equal '2' (last: '1')
    """
    caught = ignore if isinstance(ignore, tuple) else (ignore,)
    if not all(isinstance(e, type) and issubclass(e, BaseException) for e in caught):
        raise TypeError(f"wait_for(ignore=...) takes exception classes, not {ignore!r}")
    raised: list[BaseException] = []

    def attempt() -> Any:
        try:
            value = predicate()
        except caught as exc:
            raised[:] = [exc]
            return _Miss(None)
        raised.clear()
        met = bool(value) if equals is _UNSET else value == equals
        return value if met else _Miss(value)

    def last(value: Any) -> str:
        if raised:
            return f"{type(raised[0]).__name__}: {raised[0]}"
        return _shown(value.value if isinstance(value, _Miss) else value)

    what = what or _describe(predicate)
    if equals is not _UNSET:
        what += f" to equal {_shown(equals)}"
    found = _poll(attempt, timeout, what, interval, stop, last, done=_hit)
    return cast(T, found)


class _Miss:
    """What ``wait_for``'s predicate gave that is not what it waits for (or it raised)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _hit(value: object) -> bool:
    """Whether ``wait_for``'s attempt found what it waits for."""
    return not isinstance(value, _Miss)


def _poll(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    interval: float,
    stop: threading.Event | None,
    last: Callable[[T], str],
    done: Callable[[T], bool] = bool,
) -> T:
    """``wait_for``'s loop: until ``done(predicate())``; ``last(value)`` says what was seen
    last when it times out."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if done(value):
            return value
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            raise WaitTimeout(
                f"timed out after {timeout}s waiting for {what} (last: {last(value)})"
            )
        if stop is not None:
            stop.wait(min(interval, left))
        else:
            time.sleep(min(interval, left))


def _as_dict(obj: Any) -> dict[str, Any]:
    """What ``client.get`` returned, as a dict (a dict, a ``Resource``, a ``kubernetes`` model)."""
    if isinstance(obj, dict):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    out = to_dict() if callable(to_dict) else None
    return out if isinstance(out, dict) else {}


def _field(d: Any, camel: str, snake: str) -> Any:
    """``d[camel]``, or ``d[snake]`` (a ``kubernetes`` model's ``to_dict()`` is snake_case)."""
    if not isinstance(d, dict):
        return None
    return d.get(camel, d.get(snake))


def _state(obj: dict[str, Any]) -> str:
    """The conditions, generation and observedGeneration of ``obj``, for a timeout's message."""
    status = obj.get("status") or {}
    parts = []
    for c in _field(status, "conditions", "conditions") or []:
        if not isinstance(c, dict):
            continue
        text = f"{c.get('type')}={c.get('status')}"
        detail = " ".join(str(c[k]) for k in ("reason", "message") if c.get(k))
        parts.append(f"{text} ({detail})" if detail else text)
    out = ", ".join(parts) if parts else "no conditions"
    generation = (obj.get("metadata") or {}).get("generation")
    observed = _field(status, "observedGeneration", "observed_generation")
    if generation is not None:
        out += f"; generation {generation}"
    if observed is not None:
        out += f", observedGeneration {observed}"
    return out


#: the least time a read of `wait_for_condition` gets, the last one included (seconds)
_LAST_READ = 0.1


def wait_for_condition(
    client: Any,
    kind: Any,
    name: str,
    namespace: str | None = None,
    condition: str = "Ready",
    status: str = "True",
    *,
    timeout: float = DEFAULT_WAIT_TIMEOUT,
    interval: float = 0.05,
    stop: threading.Event | None = None,
) -> Any:
    """Wait until an object's ``status.conditions`` has ``condition`` with ``status``, as
    ``kubectl wait --for=condition=Ready`` does, and return the object as ``client.get``
    returns it.

    ``client`` is a mcruntime ``Client`` (``cluster.uncached_client`` reads the API; a
    cluster's ``client`` reads its cache, once the cluster is started); ``kind`` is what it
    takes (``"example.com/v1/Widget"``, a ``Resource`` class). An object not found yet is
    waited for. On timeout, [`WaitTimeout`][mcruntime.envtest.WaitTimeout] says what was
    awaited and the object's last state: its conditions with their reasons and messages, its
    generation and ``observedGeneration``, that it was not found, or that the server did not
    answer (each read gets the time left, so a hung server does not hold the wait longer):

        wait_for_condition(cluster.uncached_client, Widget, "w", "default")
        # WaitTimeout: timed out after 15.0s waiting for Widget default/w to be Ready=True
        # (last: Ready=False (NoPaint no black paint); generation 2, observedGeneration 1)
    """
    last: list[Any] = []
    end = time.monotonic() + timeout

    def holds() -> Any:
        try:
            # each read within the time left (not the client's default deadline), with a
            # moment for the last
            left = max(end - time.monotonic(), _LAST_READ)
            obj = client.get(kind, name, namespace, timeout=left)
        except NotFound:
            last[:] = ["not found"]
            return None
        except DeadlineExceeded as exc:
            last[:] = [f"no answer: {exc}"]
            return None
        d = _as_dict(obj)
        for c in _field(d.get("status") or {}, "conditions", "conditions") or []:
            if isinstance(c, dict) and c.get("type") == condition and c.get("status") == status:
                return obj
        last[:] = [_state(d)]
        return None

    label = kind.rsplit("/", 1)[-1] if isinstance(kind, str) else getattr(kind, "kind", None)
    if not isinstance(label, str):  # a kubernetes model class: its kind is a property
        label = getattr(kind, "__name__", str(kind))
    where = f"{namespace}/{name}" if namespace else name
    return _poll(
        holds,
        timeout,
        f"{label} {where} to be {condition}={status}",
        interval,
        stop,
        lambda _: last[0],
    )
