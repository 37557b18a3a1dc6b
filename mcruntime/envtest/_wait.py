"""``wait_for``: poll a condition with a deadline, for tests of controllers.

A controller acts asynchronously, so a test waits until what it expects has
happened; ``wait_for`` does that with a deadline and a failure that says what was
awaited (never a bare sleep).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import re
import threading
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast, overload

from mcruntime._deadline import deadline as call_deadline
from mcruntime._local import display_name
from mcruntime.errors import DeadlineExceeded, NotFound

if TYPE_CHECKING:
    from mcruntime.client import GroupVersionKind

__all__ = [
    "DEFAULT_WAIT_TIMEOUT",
    "WaitTimeout",
    "wait_for",
    "wait_for_condition",
    "wait_for_event",
]

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
#: the least time a read of `wait_for_condition` (a call of ``wait_for``'s predicate) gets, the
#: last one included (seconds)
_LAST_READ = 0.1
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


def _clipped(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters (``...`` ending what was cut)."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _shown(value: Any, secret: bool = False) -> str:
    """``repr(value)`` for a timeout's message: a Secret's values masked, and shortened.

    With ``secret`` (the getter reads a Secret), a value that is not a whole Secret is taken
    for a part of one (its ``data``, one value) and masked too: a mapping's keys are shown.
    """
    redacted = _redacted(value)
    if secret and redacted is value:
        redacted = _masked(value)
    return _clipped(repr(redacted), _SHOWN)


def _masked(value: Any) -> Any:
    """``value`` (a part of a Secret) with its values masked: a mapping keeps its keys;
    ``None`` and booleans (nothing read yet, a comparison's result) are shown."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return {
            k: _masked(v) if isinstance(v, (dict, list, tuple)) else _MASK for k, v in value.items()
        }
    if type(value) in (list, tuple):
        return type(value)(_masked(v) for v in value)
    return _MASK


#: how a getter names the Secret kind: ``"v1/Secret"``, ``V1Secret``, ``read_namespaced_secret``
_SECRET_WORD = re.compile(r"(?:^|[/._])(?:v1)?secrets?$|_secret(?:_|$)", re.IGNORECASE)


#: what a getter holds (closure, module globals) that may name the Secret kind: a helper too
_HELD = (str, type, functools.partial, types.FunctionType, types.MethodType)


def _reads_a_secret(getter: object, depth: int = 0) -> bool:
    """Whether ``getter``'s code names the Secret kind (a string, a name, a class it holds),
    or a helper it calls does (three calls deep at most): what it returns is then taken for a
    part of a Secret, whose values a message masks."""
    if depth > 3:
        return False
    if isinstance(getter, functools.partial):
        parts = [getter.func, *getter.args, *getter.keywords.values()]
        return any(_reads_a_secret(p, depth + 1) for p in parts)
    if isinstance(getter, str):
        return bool(_SECRET_WORD.search(getter))
    if isinstance(getter, type):
        return getattr(getter, "kind", None) == "Secret" or bool(
            _SECRET_WORD.search(getter.__name__)
        )
    getter = getattr(getter, "__func__", getter)
    code = getattr(getter, "__code__", getter)
    if not isinstance(code, types.CodeType):
        return False
    if any(_SECRET_WORD.search(n) for n in code.co_names):
        return True
    named = getattr(getter, "__globals__", None) or {}
    for n in code.co_names:  # a module's constant (KIND = "v1/Secret") or class
        held = named.get(n)
        if isinstance(held, _HELD) and _reads_a_secret(held, depth + 1):
            return True
    for const in code.co_consts:
        if isinstance(const, (str, types.CodeType)) and _reads_a_secret(const, depth + 1):
            return True
    for cell in getattr(getter, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            held = cell.cell_contents
            if isinstance(held, _HELD) and _reads_a_secret(held, depth + 1):
                return True
    return False


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
    error), and a timeout names the last one (and has it as its ``__cause__``).

        obj = wait_for(lambda: client.get(kind, "web", "default"), ignore=NotFound)

    The mcruntime client calls ``predicate`` makes are bounded by the time left (as in a
    [`deadline()`][mcruntime.client.deadline] block, a moment given to the last call): a
    server that does not answer (``fleet.freeze(...)``) ends the wait at its timeout with
    a ``WaitTimeout`` whose cause is the call's
    [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded], not after the client's
    default 30 s. Calls through another client (the ``kubernetes`` one) are not bounded:
    give them a timeout of their own (``_request_timeout``).

    It blocks: in an ``async def`` test, ``await asyncio.to_thread(wait_for, ...)``, or the
    test's event loop is held for the whole wait (a timeout then says so).

    ``equals`` makes ``predicate`` a getter, as Gomega's ``Eventually(f).Should(Equal(x))``:
    the wait ends when what it returns ``== equals``, so a timeout shows the value the
    comparison saw, not only ``False`` (a Secret's values masked, a long value shortened;
    when the getter's code names the Secret kind, or a function's it calls does, what it
    returns is taken for a part of a Secret and masked whole, a mapping's keys shown):

        wait_for(lambda: client.get("v1/ConfigMap", "cm", "ns")["data"]["x"], equals="2")
        # WaitTimeout: timed out after 15.0s waiting for the lambda at test_cm.py:12
        # to equal '2' (last: '1')
    """
    __tracebackhide__ = True  # a failure points at the test's line, not at this helper
    caught = ignore if isinstance(ignore, tuple) else (ignore,)
    if not all(isinstance(e, type) and issubclass(e, BaseException) for e in caught):
        raise TypeError(f"wait_for(ignore=...) takes exception classes, not {ignore!r}")
    raised: list[BaseException] = []
    end = time.monotonic() + timeout

    def attempt() -> Any:
        try:
            # the client calls made inside end by the wait's own deadline (a moment for the
            # last), not the client's default 30 s
            with call_deadline(max(end - time.monotonic(), _LAST_READ)):
                value = predicate()
        except caught as exc:
            raised[:] = [exc]
            return _Miss(None)
        except DeadlineExceeded as exc:
            if time.monotonic() < end:
                raise  # a deadline of the predicate's own, not the wait's
            raised[:] = [exc]  # cut by the wait's deadline: the wait timed out
            return _Miss(None)
        raised.clear()
        met = bool(value) if equals is _UNSET else value == equals
        return value if met else _Miss(value)

    def last(value: Any) -> str:
        if raised:
            return f"{type(raised[0]).__name__}: {raised[0]}"
        return _shown(value.value if isinstance(value, _Miss) else value, secret)

    secret = _reads_a_secret(predicate)
    what = what or _describe(predicate)
    if equals is not _UNSET:
        what += f" to equal {_shown(equals, secret)}"
    found = _poll(
        attempt,
        timeout,
        what,
        interval,
        stop,
        last,
        done=_hit,
        cause=lambda: next(iter(raised), None),
    )
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
    cause: Callable[[], BaseException | None] = lambda: None,
) -> T:
    """``wait_for``'s loop: until ``done(predicate())``; ``last(value)`` says what was seen
    last when it times out, and ``cause()`` is the error the WaitTimeout is raised from."""
    __tracebackhide__ = True  # a failure points at the test's line, not at this helper
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if done(value):
            return value
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            raise WaitTimeout(
                f"timed out after {timeout}s waiting for {what} (last: {last(value)})"
                f"{_held_a_loop()}"
            ) from cause()
        if stop is not None:
            stop.wait(min(interval, left))
        else:
            time.sleep(min(interval, left))


def _held_a_loop() -> str:
    """What a timeout adds when the wait ran on a running asyncio event loop (an async test):
    it held the loop throughout, so what needed that loop could not happen."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return ""
    return (
        "; the wait held the running asyncio event loop it was called on all along, so nothing "
        "awaiting that loop (a reconcile handing work to it) could go on: in an async test, "
        "wait in a thread, await asyncio.to_thread(wait_for, ...)"
    )


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


@overload
def wait_for_condition(
    client: Any,
    kind: type[T],
    name: str,
    namespace: str | None = None,
    condition: str = "Ready",
    status: str = "True",
    *,
    timeout: float = DEFAULT_WAIT_TIMEOUT,
    interval: float = 0.05,
    stop: threading.Event | None = None,
) -> T: ...
@overload
def wait_for_condition(
    client: Any,
    kind: str | GroupVersionKind,
    name: str,
    namespace: str | None = None,
    condition: str = "Ready",
    status: str = "True",
    *,
    timeout: float = DEFAULT_WAIT_TIMEOUT,
    interval: float = 0.05,
    stop: threading.Event | None = None,
) -> dict[str, Any]: ...
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
    awaited (naming the client's cluster) and the object's last state: its conditions with their reasons and messages, its
    generation and ``observedGeneration``, that it was not found, or that the server did not
    answer (each read gets the time left, so a hung server does not hold the wait longer):

        wait_for_condition(cluster.uncached_client, Widget, "w", "default")
        # WaitTimeout: timed out after 15.0s waiting for Widget default/w in cluster eu-1
        # to be Ready=True (last: Ready=False (NoPaint no black paint); generation 2,
        # observedGeneration 1)
    """
    __tracebackhide__ = True  # a failure points at the test's line, not at this helper
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
    cluster = _cluster_of(client)
    in_cluster = f" in cluster {cluster}" if cluster else ""
    return _poll(
        holds,
        timeout,
        f"{label} {where}{in_cluster} to be {condition}={status}",
        interval,
        stop,
        lambda _: last[0],
    )


def _cluster_of(client: Any) -> str | None:
    """The name of the cluster a mcruntime ``Client`` (or ``APIReader``) reads, as its errors
    show it; None for another object."""
    name = getattr(client, "cluster_name", None)
    if name is None:
        name = getattr(getattr(client, "rest", None), "cluster_name", None)
    return display_name(name) if isinstance(name, str) else None


#: Events a timeout of ``wait_for_event`` lists at most
_EVENTS_SHOWN = 5
#: the longest an Event's message is shown in that list, in characters
_EVENT_MESSAGE_SHOWN = 80


class _Involved:
    """The object ``wait_for_event(involved=...)`` names: what its Events' ``involvedObject``
    must match (the fields not known match anything)."""

    kind: str | None
    name: str
    namespace: str | None
    uid: str | None

    def __init__(self, involved: Any, namespace: str | None) -> None:
        self.namespace, self.uid = namespace, None
        if isinstance(involved, str):
            kind, _, self.name = involved.partition("/")
            if not (kind and self.name) or "/" in self.name:
                raise ValueError(
                    f"wait_for_event(involved=...) takes an object or 'Kind/name', not {involved!r}"
                )
            self.kind = kind
            return
        d = _as_dict(involved)
        meta = d.get("metadata") or {}
        if not meta.get("name"):
            raise ValueError(
                f"wait_for_event(involved=...) needs an object with a name, not {_shown(involved)}"
            )
        found = d.get("kind") or getattr(involved, "kind", None)
        self.kind = found if isinstance(found, str) else None
        self.name = str(meta["name"])
        self.namespace = meta.get("namespace") or namespace
        self.uid = meta.get("uid")

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}" if self.kind else where

    def matches(self, ref: dict[str, Any]) -> bool:
        """Whether an Event's ``involvedObject`` ``ref`` is this object."""
        return all(
            want is None or ref.get(key) == want
            for key, want in (
                ("kind", self.kind),
                ("name", self.name),
                ("namespace", self.namespace),
                ("uid", self.uid),
            )
        )


def _event_line(event: dict[str, Any]) -> str:
    """An Event for a timeout's message: its type, reason, object and message (shortened)."""
    ref = event.get("involvedObject") or {}
    where = "/".join(str(ref[k]) for k in ("namespace", "name") if ref.get(k))
    message = _clipped(str(event.get("message") or ""), _EVENT_MESSAGE_SHOWN)
    return f"{event.get('type')} {event.get('reason')} about {ref.get('kind')} {where}: {message!r}"


def wait_for_event(
    client: Any,
    *,
    reason: str | None = None,
    involved: Any = None,
    namespace: str | None = None,
    type: str | None = None,
    timeout: float = DEFAULT_WAIT_TIMEOUT,
    interval: float = 0.05,
    stop: threading.Event | None = None,
    message: str | re.Pattern[str] | None = None,
) -> dict[str, Any]:
    """Wait until the cluster of ``client`` has an Event with ``reason``, ``type``, about
    ``involved`` and saying ``message`` (each when given), and return it, as
    ``client.list("v1/Event", ...)`` lists it.

    A controller records Events through a
    [`mcruntime.recorder.EventRecorder`][mcruntime.recorder.EventRecorder], which posts them
    in the background, so a test waits for them. ``client`` is a mcruntime ``Client`` of the
    cluster the Event is awaited in (``cluster.uncached_client``, as for
    [`wait_for_condition`][mcruntime.envtest.wait_for_condition]); core/v1 and
    ``events.k8s.io/v1`` Events are the same objects, so both are found. ``involved`` is the
    object (a dict, a ``Resource``, a ``kubernetes`` model: its kind, name, namespace and uid,
    those it has, must match the Event's ``involvedObject``) or ``"Kind/name"``; ``type`` is
    ``"Normal"`` or ``"Warning"``; ``message`` is a part of the Event's message, or a
    compiled pattern searched in it (an aggregated Event's message starts with
    ``(combined from similar events): ``). The Events are read in ``namespace``, else in the
    namespace of ``involved``, else in every namespace. On timeout,
    [`WaitTimeout`][mcruntime.envtest.WaitTimeout] lists the Events that were there (those
    about ``involved`` first, five at most):

        event = wait_for_event(cluster.uncached_client, reason="Synced", involved=cm)
        # WaitTimeout: timed out after 15.0s waiting for an Event Synced about ConfigMap
        # default/web in cluster eu-1 (last: 1 other Event: Warning SyncFailed about
        # ConfigMap default/web: 'cannot sync web: quota')
    """
    __tracebackhide__ = True  # a failure points at the test's line, not at this helper
    if type not in (None, "Normal", "Warning"):
        raise ValueError(f"an Event's type is 'Normal' or 'Warning', not {type!r}")
    about = None if involved is None else _Involved(involved, namespace)
    scope = namespace or (about.namespace if about is not None else None)
    last: list[str] = []
    end = time.monotonic() + timeout

    def found() -> dict[str, Any] | None:
        try:
            left = max(end - time.monotonic(), _LAST_READ)
            events = [_as_dict(e) for e in client.list("v1/Event", scope, timeout=left)]
        except DeadlineExceeded as exc:
            last[:] = [f"no answer: {exc}"]
            return None
        near, far = [], []  # about the object (listed first), and the others
        for event in events:
            if about is not None and not about.matches(event.get("involvedObject") or {}):
                far.append(event)
            elif (
                reason in (None, event.get("reason"))
                and type in (None, event.get("type"))
                and (message is None or _says(event.get("message") or "", message))
            ):
                return event
            else:
                near.append(event)
        last[:] = [_other_events(near + far, scope)]
        return None

    cluster = _cluster_of(client)
    what = " ".join(
        part
        for part in (
            "an Event",
            type,
            reason,
            f"about {about}" if about is not None else None,
            f"in {scope}" if scope and (about is None or about.namespace != scope) else None,
            None if message is None else f"saying {_message_shown(message)}",
            f"in cluster {cluster}" if cluster else None,
        )
        if part
    )
    return cast(dict[str, Any], _poll(found, timeout, what, interval, stop, lambda _: last[0]))


def _says(text: str, message: str | re.Pattern[str]) -> bool:
    return message in text if isinstance(message, str) else message.search(text) is not None


def _message_shown(message: str | re.Pattern[str]) -> str:
    return repr(message) if isinstance(message, str) else f"/{message.pattern}/"


def _other_events(events: list[dict[str, Any]], namespace: str | None) -> str:
    """The Events a timeout of ``wait_for_event`` saw, none of them the one awaited."""
    if not events:
        return f"no Events in {namespace}" if namespace else "no Events"
    shown = "; ".join(_event_line(e) for e in events[:_EVENTS_SHOWN])
    more = f"; and {len(events) - _EVENTS_SHOWN} more" if len(events) > _EVENTS_SHOWN else ""
    noun = "Event" if len(events) == 1 else "Events"
    return f"{len(events)} other {noun}: {shown}{more}"
