"""Helpers for the controller tests: polling waits, a reconcile recorder, object bodies."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from mcruntime import Request
from mcruntime.envtest import wait_for


def envtest_threads_excluded() -> set[threading.Thread]:
    """Live threads, minus the envtest server's own (its loop outlives every manager)."""
    return {t for t in threading.enumerate() if not t.name.startswith("mcruntime/envtest")}


class Calls:
    """What a reconciler saw: ``(monotonic time, request)`` per call, and a condition to wait on."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, Request]] = []
        self._cond = threading.Condition()

    def record(self, req: Request) -> None:
        with self._cond:
            self.calls.append((time.monotonic(), req))
            self._cond.notify_all()

    def times(self, name: str | None = None) -> list[float]:
        with self._cond:
            return [t for t, r in self.calls if name is None or r.name == name]

    def count(self, name: str | None = None) -> int:
        return len(self.times(name))

    def names(self) -> set[str]:
        with self._cond:
            return {r.name for _, r in self.calls}

    def requests(self) -> list[Request]:
        with self._cond:
            return [r for _, r in self.calls]

    def wait(self, cond: Callable[[Calls], bool], timeout: float = 10.0, what: str = "") -> None:
        """Block until ``cond(self)`` holds; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not cond(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(round(t, 3), str(r)) for t, r in self.calls[-20:]]
                    raise AssertionError(f"not within {timeout}s: {what}; last calls: {seen}")
                self._cond.wait(min(left, 0.1))

    def wait_count(self, n: int, name: str | None = None, timeout: float = 10.0) -> None:
        self.wait(lambda c: c.count(name) >= n, timeout, f"{n} reconciles of {name or 'any'}")


def run_in_thread(mgr: Any) -> tuple[threading.Thread, list[BaseException]]:
    """``mgr.run()`` on a thread of the test's, once its first controller engaged a cluster;
    what ``run()`` raised, in the list (filled when the thread ends)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            mgr.run()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            raised.append(exc)

    t = threading.Thread(target=run, name="test-run")
    t.start()
    wait_for(lambda: mgr.controllers and mgr.controllers[0].engaged_clusters())
    return t, raised


def configmap(
    name: str,
    namespace: str = "default",
    data: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ConfigMap body."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


WIDGET_GROUP = "example.com"
WIDGET_KIND = "example.com/v1/Widget"


def widget_crd() -> dict[str, Any]:
    """A namespaced CRD ``widgets.example.com`` (v1) with a typed spec and a status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": WIDGET_GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "size": {"type": "integer"},
                                        "color": {"type": "string"},
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"observedSize": {"type": "integer"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def widget(
    name: str, size: int = 1, color: str = "red", namespace: str = "default"
) -> dict[str, Any]:
    """A Widget body."""
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size, "color": color},
    }


def serves(cluster: Any, kind: str) -> bool:
    """Whether ``cluster``'s API serves ``kind`` yet (a CRD just created may take a moment)."""
    try:
        cluster.rest_mapper.mapping(kind)
    except Exception:
        return False
    return True
