"""What a user's type checker sees of the status-condition helpers, ``to_typed`` and finalizer
registration: checked by ``mypy`` and ``pyright`` (strict; see pyproject.toml), never run.

``find_status_condition`` answers the list's own element type (a ``Condition`` from a list of
them, a dict from a list of dicts), ``to_typed`` the class it is given, and a cleanup registered
with ``Finalizers.register`` keeps its own signature; each ``# type: ignore[...]`` marks an
error that typed answers must report.
"""

from __future__ import annotations

from typing import Any, assert_type

from mcruntime import Request
from mcruntime.client import to_typed
from mcruntime.controllerutil import Condition, find_status_condition, set_status_condition
from mcruntime.finalizer import Finalizers
from tests.typing.client_returns import Widget


def conditions(models: list[Condition], dicts: list[dict[str, Any]]) -> None:
    ready = find_status_condition(models, "Ready")
    assert_type(ready, Condition | None)
    assert_type(find_status_condition(dicts, "Ready"), dict[str, Any] | None)
    if ready is not None:
        print(ready.message.upper(), ready.reson)  # type: ignore[attr-defined]
    set_status_condition(models, Condition(type="Ready", status="True", reason="Up", message=""))
    set_status_condition(dicts, {"type": "Ready", "status": "True"})
    set_status_condition(models, "Ready")  # type: ignore[misc]


def typed(raw: dict[str, Any]) -> None:
    assert_type(to_typed(raw, Widget), Widget)
    assert_type(to_typed(raw, None), dict[str, Any])
    print(to_typed(raw, Widget).spec.sise)  # type: ignore[attr-defined]


def finalizers(widget: Widget, req: Request) -> None:
    cleanups = Finalizers()

    @cleanups.register("example.com/cleanup")
    def release(obj: Widget, req: Request) -> None: ...

    def archive(obj: Widget, req: Request) -> None: ...

    # a registered cleanup keeps its own signature (it was Callable[..., ...] after)
    cleanups.register("example.com/archive", archive)(widget, req)
    release(widget, req)
    release("example.com/v1/Widget", req)  # type: ignore[arg-type]
    cleanups.register("example.com/other", archive)(req, widget)  # type: ignore[arg-type]
