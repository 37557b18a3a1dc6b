"""Helpers for the cache integration tests: writes through the real client, an event recorder."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from typing import Any

from mcruntime.cache import object_key
from mcruntime.client import GroupVersionKind, RESTClient, RESTMapping
from mcruntime.errors import AlreadyExists

CONFIGMAPS = RESTMapping(
    GroupVersionKind("", "v1", "ConfigMap"), "configmaps", True, frozenset({"list", "watch"})
)
NAMESPACES = RESTMapping(GroupVersionKind("", "v1", "Namespace"), "namespaces", False)


class Kube:
    """Writes to the test server through the real client (the informer under test only reads)."""

    def __init__(self, rest: RESTClient) -> None:
        self.rest = rest

    def namespace(self, name: str | None = None) -> str:
        name = name or f"ns-{uuid.uuid4().hex[:8]}"
        with contextlib.suppress(AlreadyExists):
            self.rest.request(
                "POST",
                NAMESPACES.path(),
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        return name

    def create(
        self,
        ns: str,
        name: str,
        data: dict[str, str] | None = None,
        *,
        meta: dict[str, Any] | None = None,
        **labels: str,
    ) -> dict[str, Any]:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels, **(meta or {})},
            "data": data or {},
        }
        out: dict[str, Any] = self.rest.request("POST", CONFIGMAPS.path(ns), body=body)
        return out

    def update(self, ns: str, name: str, data: dict[str, str], **labels: str) -> dict[str, Any]:
        patch: dict[str, Any] = {"data": data}
        if labels:
            patch["metadata"] = {"labels": labels}
        out: dict[str, Any] = self.rest.request(
            "PATCH",
            CONFIGMAPS.path(ns, name),
            body=patch,
            content_type="application/merge-patch+json",
        )
        return out

    def delete(self, ns: str, name: str) -> None:
        self.rest.request("DELETE", CONFIGMAPS.path(ns, name))

    def get(self, ns: str, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self.rest.request("GET", CONFIGMAPS.path(ns, name))
        return out


class Recorder:
    """A ResourceEventHandler that logs ``(type, key, resourceVersion, extra)`` tuples."""

    def __init__(self, name_filter: Callable[[str], bool] | None = None) -> None:
        self.events: list[tuple[str, str, str, Any]] = []
        self.objects: list[tuple[str, dict[str, Any]]] = []
        self.threads: set[str] = set()
        self._cond = threading.Condition()
        self._filter = name_filter

    def _log(self, typ: str, obj: dict[str, Any], extra: Any) -> None:
        key = object_key(obj)
        if self._filter is not None and not self._filter(key):
            return
        with self._cond:
            self.events.append((typ, key, obj["metadata"].get("resourceVersion", ""), extra))
            self.objects.append((typ, obj))
            self.threads.add(threading.current_thread().name)
            self._cond.notify_all()

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self._log("add", obj, is_initial_list)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._log("update", new, old["metadata"].get("resourceVersion"))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._log("delete", obj, None)

    def wait(
        self, pred: Callable[[list[tuple[str, str, str, Any]]], bool], timeout: float = 10.0
    ) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: pred(self.events), timeout):
                raise AssertionError(f"events not seen within {timeout}s; have {self.events}")

    def wait_count(self, n: int, timeout: float = 10.0) -> list[tuple[str, str, str, Any]]:
        self.wait(lambda ev: len(ev) >= n, timeout)
        return self.snapshot()

    def snapshot(self) -> list[tuple[str, str, str, Any]]:
        with self._cond:
            return list(self.events)
