"""The hot path stays on dicts: list and watch delivery build no ``kubernetes`` model objects."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

import mcruntime
from mcruntime import Manager, Request
from mcruntime.cluster import Cluster
from mcruntime.errors import NotFound
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(30)


class _CountingValidator:
    """Wraps a pydantic model's validator: every way of building the model goes through it."""

    def __init__(self, inner: Any, made: list[str]) -> None:
        self._inner, self._made = inner, made

    def validate_python(self, *args: Any, **kwargs: Any) -> Any:
        self._made.append(threading.current_thread().name)
        return self._inner.validate_python(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def model_inits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts ``V1ConfigMap`` constructions, on the model class only (the client is not touched).

    kubernetes 37's models are pydantic models: ``__init__``, ``from_dict`` and
    ``model_validate`` all validate through the class's ``__pydantic_validator__``,
    so wrapping it counts every construction.
    """
    made: list[str] = []
    monkeypatch.setattr(
        V1ConfigMap,
        "__pydantic_validator__",
        _CountingValidator(V1ConfigMap.__pydantic_validator__, made),
    )
    return made


@pytest.mark.parametrize(
    "kind", ["v1/ConfigMap", V1ConfigMap], ids=["string-kind", "model-class-kind"]
)
def test_informer_delivery_builds_no_model_objects(
    kind: Any, kube: Cluster, make_manager: Callable[..., Manager], model_inits: list[str]
) -> None:
    listed = [f"listed-{i}" for i in range(30)]
    for name in listed:
        kube.client.create(configmap(name, data={"k": name}))
    mgr = make_manager()
    calls = Calls()
    data: dict[str, Any] = {}

    def reconcile(req: Request) -> None:
        try:
            data[req.name] = mgr.get_cluster("").client.get(
                "v1/ConfigMap", req.name, req.namespace
            )["data"]
        except NotFound:
            data[req.name] = None
        calls.record(req)

    mcruntime.controller_managed_by(mgr).named("dicts").for_(kind).complete(reconcile)
    mgr.start()
    watched = [f"watched-{i}" for i in range(30)]
    for name in watched:
        kube.client.create(configmap(name, data={"k": name}))
    kube.client.patch("v1/ConfigMap", "listed-0", {"data": {"k": "changed"}}, "default")
    kube.client.delete("v1/ConfigMap", "listed-1", "default")
    calls.wait(
        lambda c: (
            c.names() >= {*listed, *watched}
            and data.get("listed-0") == {"k": "changed"}
            and data.get("listed-1", {}) is None
        ),
        what="every listed and watched object reconciled",
    )
    assert model_inits == [], f"V1ConfigMap built on threads {sorted(set(model_inits))}"

    typed = mgr.get_cluster("").client.get(V1ConfigMap, "listed-2", "default")
    assert isinstance(typed, V1ConfigMap) and typed.data == {"k": "listed-2"}
    assert model_inits, (
        "a typed view asked for explicitly does build the model (the wrapper counts)"
    )
