"""What a user's type checker sees of the client's answers: checked by ``mypy`` (strict, with
``warn_unused_ignores``: see pyproject.toml), never run.

A typed kind (a ``Resource`` class) answers with its instances, a kind named by a string or
a ``GroupVersionKind`` with dicts, a write with the flavour of the object written, a
metadata-only read with ``MetadataOnly``. Each ``assert_type`` fails if an answer is ``Any``
again; each ``# type: ignore[...]`` marks an error a typed answer must report, and fails as
unused when it is not.
"""

from __future__ import annotations

from typing import Any, ClassVar, assert_type

from mcruntime.client import (
    AsyncClient,
    Client,
    GroupVersionKind,
    MetadataOnly,
    Model,
    Resource,
    SubResourceClient,
)
from mcruntime.envtest import wait_for_condition


class WidgetSpec(Model):
    size: int = 1


class Widget(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec = WidgetSpec()


CM = GroupVersionKind("", "v1", "ConfigMap")


def get_widget(client: Client) -> Widget:
    # no-any-return under --strict when get answers Any
    return client.get(Widget, "a", "default")


def widget_size(client: Client) -> int:
    return client.get(Widget, "a", "default").spec.size


def reads(client: Client) -> None:
    assert_type(client.get(Widget, "a", "default"), Widget)
    assert_type(client.get("v1/ConfigMap", "a", "default"), dict[str, Any])
    assert_type(client.get(CM, "a", "default"), dict[str, Any])
    assert_type(client.get(Widget, "a", "default", metadata_only=True), MetadataOnly)
    assert_type(client.get("v1/ConfigMap", "a", "default", metadata_only=True), MetadataOnly)
    assert_type(client.list(Widget, "default"), list[Widget])
    assert_type(client.list("v1/ConfigMap", labels={"app": "web"}), list[dict[str, Any]])
    assert_type(client.list(Widget, metadata_only=True), list[MetadataOnly])
    w: Widget = client.get(Widget, "a", "default")
    d: dict[str, Any] = client.get("v1/ConfigMap", "a", "default")
    ws: list[Widget] = client.list(Widget)
    ds: list[dict[str, Any]] = client.list("v1/ConfigMap")
    print(w, d, ws, ds)


def flag(client: Client, metadata_only: bool) -> None:
    # metadata_only known only at run time: either flavour
    assert_type(
        client.get(Widget, "a", "default", metadata_only=metadata_only), Widget | MetadataOnly
    )
    assert_type(client.get("v1/ConfigMap", "a", metadata_only=metadata_only), dict[str, Any])


def writes(client: Client, w: Widget, d: dict[str, Any]) -> None:
    assert_type(client.create(w), Widget)
    assert_type(client.create(d), dict[str, Any])
    assert_type(client.update(w), Widget)
    assert_type(client.update_status(w), Widget)
    assert_type(client.update_status(d), dict[str, Any])
    assert_type(client.apply(w, field_manager="me"), Widget)
    assert_type(client.apply_status(d, field_manager="me"), dict[str, Any])
    assert_type(client.patch(Widget, "a", {"spec": {"size": 2}}, "default"), Widget)
    assert_type(client.patch("v1/ConfigMap", "a", {"data": {}}, "default"), dict[str, Any])
    assert_type(client.patch(Widget, "a", {}, "default", metadata_only=True), MetadataOnly)
    assert_type(client.patch_status(Widget, "a", {"status": {}}, "default"), Widget)
    assert_type(client.patch_status(CM, "a", {"status": {}}, "default"), dict[str, Any])


def subresources(sub: SubResourceClient, d: dict[str, Any], w: Widget) -> None:
    assert_type(sub.create("v1/Pod", "web-0", d, "default"), dict[str, Any])
    assert_type(sub.update("apps/v1/Deployment", "web", d, "default"), dict[str, Any])
    # a typed body: the answer in its flavour when it is of the body's kind, else a dict
    assert_type(sub.update("example.com/v1/Widget", "a", w, "default"), Widget | dict[str, Any])
    assert_type(sub.patch("apps/v1/Deployment", "web", {}, "default"), dict[str, Any])


async def async_calls(aclient: AsyncClient, w: Widget) -> None:
    assert_type(await aclient.get(Widget, "a", "default"), Widget)
    assert_type(await aclient.get("v1/ConfigMap", "a", "default"), dict[str, Any])
    assert_type(await aclient.list(Widget), list[Widget])
    assert_type(await aclient.list("v1/ConfigMap"), list[dict[str, Any]])
    assert_type(await aclient.create(w), Widget)
    assert_type(await aclient.update_status(w), Widget)
    assert_type(await aclient.patch(Widget, "a", {}, "default"), Widget)
    assert_type(await aclient.patch_status("v1/ConfigMap", "a", {}, "default"), dict[str, Any])
    assert_type(await aclient.apply(w, field_manager="me"), Widget)
    sub = aclient.subresource("scale")
    assert_type(await sub.update("apps/v1/Deployment", "web", {}, "default"), dict[str, Any])


def waits(client: Client) -> None:
    assert_type(wait_for_condition(client, Widget, "a", "default"), Widget)
    assert_type(wait_for_condition(client, "example.com/v1/Widget", "a"), dict[str, Any])


def typos(client: Client) -> None:
    # each error below is reported only while the answers are typed
    w = client.get(Widget, "a", "default")
    print(w.spec.sise)  # type: ignore[attr-defined]
    for x in client.list(Widget, "default"):
        print(x.metadata.nmae)  # type: ignore[attr-defined]
    n: str = w.spec.size  # type: ignore[assignment]
    print(n, client.create(w).spec.size.upper())  # type: ignore[attr-defined]
    print(wait_for_condition(client, Widget, "a", "default").sttus)  # type: ignore[attr-defined]
