"""Helpers of the conformance suite: raw requests, Status checks, watches, waits, manifests.

Every test runs against ``kube_backend`` (the embedded server by default, or a
real cluster; see [`mcruntime.envtest.pytest_plugin`][mcruntime.envtest.pytest_plugin]) through the real
``kubernetes`` client, so the suite is the specification of the embedded server.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client import ApiClient, ApiException
from urllib3 import HTTPHeaderDict

from mcruntime._threads import start_thread, thread_name
from mcruntime.envtest import APIServer, wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

T = TypeVar("T")

WIDGET_GROUP = "conformance.mcruntime.io"
WIDGETS = "widgets"
GADGETS = "gadgets"

SYSTEM_NAMES = frozenset({"kube-root-ca.crt", "default"})
"""Objects real clusters put into every namespace (root CA configmap, default serviceaccount)."""
NO_SYSTEM = "metadata.name!=kube-root-ca.crt"
"""A field selector that hides the root CA configmap real clusters add to every namespace."""


def unique(prefix: str = "obj") -> str:
    """A DNS-1123 name that no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def check_object(group: str, **spec: Any) -> dict[str, Any]:
    """A ``Check`` of ``group``/v1 (the schema tests' CRD kind) with ``spec``, named anew."""
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Check",
        "metadata": {"name": unique("check")},
        "spec": spec,
    }


@dataclass
class Raw:
    """A raw HTTP response: status code, headers and body."""

    status: int
    headers: Any
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data)


def raw(
    api: ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: float = 10,
    headers: list[tuple[str, str]] | None = None,
    accept: str = "application/json",
) -> Raw:
    """Send one request with the client's credentials and return the response unparsed;
    ``headers`` are sent as well, a name given twice as two header lines."""
    base: dict[str, str] = {"Accept": accept}
    if content_type is not None:
        base["Content-Type"] = content_type
    method_, url, sent, payload, post = api.param_serialize(
        method,
        path,
        query_params=query,
        header_params=base,
        body=body,
        auth_settings=["BearerToken"],
    )
    if headers:
        sent = HTTPHeaderDict(sent)
        for name, value in headers:
            sent.add(name, value)
    resp = api.call_api(method_, url, sent, payload, post, _request_timeout=timeout)
    return Raw(resp.status, resp.headers, resp.read())


def status_body(err: ApiException | Raw) -> dict[str, Any]:
    """The ``Status`` object an error response carries."""
    data = err.data if isinstance(err, Raw) else err.body
    assert data, f"error response has no body: {err}"
    body: dict[str, Any] = json.loads(data)
    return body


def assert_stop_ends_the_waiting_request(server: APIServer, request: Callable[[], Raw]) -> None:
    """``request()``, sent from a thread, still waits half a second later; then
    ``server.stop()`` returns within a second (the waiting request does not hold it) and
    the request ends with its connection cut."""
    ended: list[BaseException | Raw] = []

    def send() -> None:
        try:
            ended.append(request())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            ended.append(exc)

    sender = start_thread(send, thread_name("conformance-waiting", server.name))
    sender.join(0.5)
    assert sender.is_alive() and not ended, ended
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 1.0
    sender.join(5)
    assert ended and isinstance(ended[0], BaseException), ended


def assert_status(err: ApiException | Raw, code: int, reason: str) -> dict[str, Any]:
    """Assert a failure is a ``Status`` with this HTTP code and reason; return the Status."""
    status = err.status
    assert status == code, f"expected HTTP {code}, got {status}: {status_body(err)}"
    body = status_body(err)
    assert body.get("kind") == "Status", body
    assert body.get("apiVersion") == "v1", body
    assert body.get("status") == "Failure", body
    assert body.get("code") == code, body
    assert body.get("reason") == reason, body
    assert isinstance(body.get("message"), str) and body["message"], body
    return body


@contextlib.contextmanager
def raises_status(code: int, reason: str) -> Iterator[dict[str, Any]]:
    """``with raises_status(404, "NotFound") as status:`` — the block must fail that way."""
    status: dict[str, Any] = {}
    with pytest.raises(ApiException) as info:
        yield status
    status.update(assert_status(info.value, code, reason))


def to_dict(api: ApiClient, obj: Any) -> dict[str, Any]:
    """A typed model (or dict) as the plain JSON dict the server sent."""
    out: dict[str, Any] = api.sanitize_for_serialization(obj)
    return out


def rv(obj: Any) -> int:
    """An object's resourceVersion as an integer (asserting it is a numeric string)."""
    meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    value = meta["resourceVersion"] if isinstance(meta, dict) else meta.resource_version
    assert isinstance(value, str) and value.isdigit(), value
    return int(value)


def watch_events(
    func: Callable[..., Any],
    *args: Any,
    until: Callable[[list[dict[str, Any]]], bool] = lambda events: False,
    timeout: int = 5,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Watch with ``kubernetes.watch.Watch`` until ``until(events)`` or the server's timeout.

    Events are the client's dicts: ``type``, ``object`` and ``raw_object``.
    """
    w = watch.Watch()
    events: list[dict[str, Any]] = []
    stream = w.stream(func, *args, timeout_seconds=timeout, _request_timeout=timeout + 10, **kwargs)
    try:
        for event in stream:
            events.append(event)
            if until(events):
                break
    finally:
        w.stop()
        stream.close()
    return events


def names_of(events: list[dict[str, Any]], type_: str | None = None) -> list[str]:
    """Names of the objects in ``events`` (optionally only events of ``type_``)."""
    return [
        e["raw_object"]["metadata"]["name"]
        for e in events
        if (type_ is None or e["type"] == type_)
        and e["type"] not in ("BOOKMARK", "ERROR")
        and e["raw_object"]["metadata"]["name"] not in SYSTEM_NAMES
    ]


def user_names(items: list[Any]) -> list[str]:
    """Names of listed objects (typed or dicts) except those real clusters add by themselves."""
    names = [i["metadata"]["name"] if isinstance(i, dict) else i.metadata.name for i in items]
    return [n for n in names if n not in SYSTEM_NAMES]


def configmap(name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **meta},
        "data": data if data is not None else {"key": "value"},
    }


PAUSE = "registry.k8s.io/pause:3.9"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    """A Pod of one pause container named ``main``; ``spec`` adds to its spec."""
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": PAUSE}], **spec},
    }


def deployment(
    name: str, replicas: int = 1, image: str = "registry.k8s.io/pause:3.9"
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def crd_manifest(
    group: str,
    plural: str,
    kind: str,
    *,
    scope: str = "Namespaced",
    status: bool = True,
    short_names: list[str] | None = None,
) -> dict[str, Any]:
    """A CRD with one served/stored version ``v1`` and an open schema."""
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    names: dict[str, Any] = {
        "plural": plural,
        "singular": kind.lower(),
        "kind": kind,
        "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": names, "scope": scope, "versions": [version]},
    }


def crd_condition(crd: dict[str, Any], type_: str) -> str | None:
    for cond in (crd.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            value: str = cond.get("status")
            return value
    return None


def create_crd(api: ApiClient, manifest: dict[str, Any], timeout: float = 15) -> dict[str, Any]:
    """Create (or reuse) a CRD and wait until it is Established and served."""
    ext = client.ApiextensionsV1Api(api)
    name = manifest["metadata"]["name"]
    try:
        ext.create_custom_resource_definition(manifest)
    except ApiException as e:
        if e.status != 409:
            raise
    group, version = manifest["spec"]["group"], manifest["spec"]["versions"][0]["name"]
    plural = manifest["spec"]["names"]["plural"]

    def ready() -> dict[str, Any] | None:
        crd = to_dict(api, ext.read_custom_resource_definition(name))
        if crd_condition(crd, "Established") != "True":
            return None
        listing = raw(api, "GET", f"/apis/{group}/{version}")
        if listing.status != 200:
            return None
        served = {r["name"] for r in listing.json().get("resources", [])}
        return crd if plural in served else None

    return wait_for(ready, timeout, f"CRD {name} to be established and served", interval=0.05)


def delete_crd(api: ApiClient, name: str) -> None:
    with contextlib.suppress(ApiException):
        client.ApiextensionsV1Api(api).delete_custom_resource_definition(name)


@contextlib.contextmanager
def served_crd(backend: KubeBackend, manifest: dict[str, Any]) -> Iterator[str]:
    """The CRD of ``manifest`` created (and served) for the block: the path of its first
    version, ``/apis/{group}/{version}``; deleted after."""
    with backend.api_client() as api:
        create_crd(api, manifest)
        try:
            yield f"/apis/{manifest['spec']['group']}/{manifest['spec']['versions'][0]['name']}"
        finally:
            delete_crd(api, manifest["metadata"]["name"])


def widget(name: str, spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{WIDGET_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, **meta},
        "spec": spec if spec is not None else {"size": 1},
    }


def retry_on_conflict(fn: Callable[[], T], attempts: int = 10) -> T:
    """Run a read-modify-write ``fn`` again when a controller of a real cluster raced it."""
    for attempt in range(attempts):
        try:
            return fn()
        except ApiException as e:
            if e.status != 409 or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def gone(read: Callable[[], Any]) -> Callable[[], bool]:
    """A predicate for `wait_for()`: ``read()`` now answers 404."""

    def check() -> bool:
        try:
            read()
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    return check


def data_and_code(result: Any) -> tuple[Any, int]:
    """``(data, HTTP status)`` of a ``*_with_http_info`` call (a tuple or an ApiResponse)."""
    if isinstance(result, tuple):
        return result[0], int(result[1])
    return result.data, int(result.status_code)
