"""What a user's type checker sees of the controller and webhook builders and the handlers:
checked by ``mypy`` and ``pyright`` (strict; see pyproject.toml), never run.

Correct code passes without a cast; each ``# type: ignore[...]`` marks a mistake the
signatures must report (it fails as unused when a parameter is ``Any`` again).
"""

from __future__ import annotations

from typing import Any, assert_type

import mcruntime
from mcruntime import Request
from mcruntime.client import Client
from mcruntime.handler import (
    enqueue_request_for_cross_cluster_owner,
    enqueue_request_for_object,
    enqueue_requests_from_map_func,
)
from mcruntime.predicate import GenerationChanged
from mcruntime.source import Channel, Engagements
from mcruntime.webhook import AdmissionRequest, Denied
from tests.typing.client_returns import Widget


def by_owner(obj: dict[str, Any]) -> list[Request]:
    return [Request("default", "owner")]


def controllers(mgr: mcruntime.Manager, client: Client) -> None:
    def reconcile(req: Request) -> None:
        client.get(Widget, req.name, req.namespace)

    channel = Channel(enqueue_request_for_object())
    (
        mcruntime.controller_managed_by(mgr)
        .for_(Widget, GenerationChanged())
        .owns("apps/v1/Deployment")
        .watches("v1/ConfigMap", enqueue_requests_from_map_func(by_owner))
        .watches(channel)
        .watches(Engagements(enqueue_requests_from_map_func(by_owner)))
        .watches("v1/Secret", enqueue_request_for_cross_cluster_owner(Widget))
        .complete(reconcile)
    )
    b = mcruntime.controller_managed_by(mgr)
    b.watches(42)  # type: ignore[arg-type]
    b.watches(Widget())  # type: ignore[arg-type]
    enqueue_request_for_cross_cluster_owner(42)  # type: ignore[arg-type]


def default(request: AdmissionRequest, widget: Widget) -> None:
    widget.spec.size = max(widget.spec.size, 1)


def validate(request: AdmissionRequest, widget: Widget) -> list[str] | None:
    if widget.spec.size > 5:
        raise Denied("spec.size: at most 5")
    return None


class WidgetValidator:
    def validate_create(self, request: AdmissionRequest, obj: Widget) -> list[str] | None:
        return validate(request, obj)

    def validate_update(
        self, request: AdmissionRequest, old: Widget, new: Widget
    ) -> list[str] | None:
        return validate(request, new)

    def validate_delete(self, request: AdmissionRequest, obj: Widget) -> list[str] | None:
        return None


class WidgetDefaulter:
    def default(self, request: AdmissionRequest, obj: Widget) -> None:
        obj.spec.size = max(obj.spec.size, 1)


def to_hub(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def from_hub(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def webhooks(mgr: mcruntime.Manager) -> None:
    paths: list[str] = (
        mcruntime.webhook_managed_by(mgr)
        .for_(Widget)
        .with_defaulter(default)
        .with_validator(WidgetValidator())
        .with_converter("v1", {"v1beta1": (to_hub, from_hub)})
        .complete()
    )
    print(paths)
    w = mcruntime.webhook_managed_by(mgr).for_(Widget)
    w.with_defaulter(WidgetDefaulter()).with_validator(validate)

    def one_argument(request: AdmissionRequest) -> None: ...

    w.with_defaulter(42)  # type: ignore[arg-type]
    w.with_defaulter(one_argument)  # type: ignore[arg-type]
    w.with_validator("validate")  # type: ignore[arg-type]
    w.with_validator(WidgetDefaulter())  # type: ignore[arg-type]
    w.with_converter("v1", 7)  # type: ignore[arg-type]
    w.with_converter("v1", {"v1beta1": to_hub})  # type: ignore[dict-item]


class TeamBuilder(mcruntime.builder.Builder):
    """A team's own builder step, chained with mcruntime's."""

    def for_team(self, team: str) -> TeamBuilder:
        return self.named(f"{team}-widgets").for_(Widget)


def subclassed(mgr: mcruntime.Manager) -> None:
    b = TeamBuilder(mgr).with_options(max_concurrent_reconciles=2).for_team("a")
    assert_type(b.engage_with_local_cluster().named("x"), TeamBuilder)
