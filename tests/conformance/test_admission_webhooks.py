"""The API server calls admission webhooks: Mutating then Validating configurations.

A webhook server (``mcruntime.webhook.WebhookServer``) runs on loopback with a
generated CA; the configurations name it by URL with that ``caBundle``. Against
a real kube-apiserver this needs an API server that reaches this machine's
loopback (a local kube-apiserver binary, not k3s in Docker).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client import ApiException

from mcruntime.envtest.pytest_plugin import KubeBackend
from mcruntime.webhook import (
    AdmissionRequest,
    WebhookServer,
    WebhookServerOptions,
    allowed,
    denied,
    patched,
)

from ._support import (
    PAUSE,
    crd_manifest,
    create_crd,
    delete_crd,
    deployment,
    raises_status,
    raw,
    unique,
    wait_for,
    widget,
)

pytestmark = pytest.mark.timeout(60)


class Hooks:
    """A webhook server whose handlers the tests set; records what each path was sent."""

    def __init__(self) -> None:
        self.server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
        self.seen: dict[str, list[AdmissionRequest]] = {}
        self.release = threading.Event()
        #: what ``/race`` does, once, when asked to admit (operation, object name)
        self.on_admit: dict[tuple[str, str], Any] = {}
        for path in (
            "/label",
            "/deny",
            "/slow",
            "/allow",
            "/extra",
            "/spec-extra",
            "/no-eviction",
            "/pod-class",
            "/no-exec",
            "/copy-labels",
            "/race",
            "/fill",
            "/break",
        ):
            self.seen[path] = []
            self.server.register(path, self._recording(path))
        self.server.start()

    def _recording(self, path: str) -> Any:
        def handle(req: AdmissionRequest) -> Any:
            self.seen[path].append(req)
            if path == "/label":
                assert req.obj is not None
                obj = {**req.obj, "metadata": {**req.obj["metadata"]}}
                obj["metadata"]["labels"] = {
                    **(obj["metadata"].get("labels") or {}),
                    "mutated": "yes",
                }
                return patched(req.obj, obj)
            if path == "/deny":
                data = (req.obj or {}).get("data") or {}
                if data.get("bad"):
                    return denied("data.bad is not allowed here", code=422, reason="Invalid")
                return allowed(warnings=["checked by /deny"])
            if path == "/extra":  # a field ConfigMaps do not have, and a label
                assert req.obj is not None
                obj = {**req.obj, "bogus": "from the webhook"}
                obj["metadata"] = {**req.obj["metadata"], "labels": {"extra": "yes"}}
                return patched(req.obj, obj)
            if path == "/spec-extra":  # an empty object the CRD's schema defaults a field in
                assert req.obj is not None
                return patched(req.obj, {**req.obj, "spec": {**req.obj["spec"], "extra": {}}})
            if path == "/no-eviction":
                return denied("evictions are paused")
            if path == "/no-exec":
                return denied("exec is not allowed here")
            if path == "/copy-labels":  # the labels it was shown, as an annotation
                assert req.obj is not None
                meta = req.obj["metadata"]
                labels = ",".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items()))
                annotations = {**(meta.get("annotations") or {}), "labels-seen": labels}
                return patched(
                    req.obj, {**req.obj, "metadata": {**meta, "annotations": annotations}}
                )
            if path == "/pod-class":  # a pod's PriorityClass, from its annotation
                assert req.obj is not None
                wanted = req.obj["metadata"]["annotations"]["pod-class"]
                spec = {**req.obj["spec"], "priorityClassName": wanted}
                return patched(req.obj, {**req.obj, "spec": spec})
            if path == "/fill":  # completes what the schema requires: a size, an image
                assert req.obj is not None
                obj = json.loads(json.dumps(req.obj))
                if "containers" in obj["spec"]:
                    for container in obj["spec"]["containers"]:
                        container.setdefault("image", PAUSE)
                else:
                    obj["spec"]["size"] = min(obj["spec"].get("size", 3), 3)
                return patched(req.obj, obj)
            if path == "/break":  # what the schema refuses
                assert req.obj is not None
                return patched(req.obj, {**req.obj, "spec": {"size": 99}})
            if path == "/slow":
                self.release.wait(10)
            if path == "/race":
                action = self.on_admit.pop((req.operation, req.name), None)
                if action is not None:
                    action()
            return allowed()

        return handle

    def config(self, kind: str, name: str, path: str, **hook: Any) -> dict[str, Any]:
        entry = {
            "name": f"{path.strip('/')}.conformance.mcruntime.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {
                "url": self.server.url_for(path),
                "caBundle": base64.b64encode(self.server.ca_bundle).decode(),
            },
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["configmaps"],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Namespaced",
                }
            ],
            **hook,
        }
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": [entry],
        }


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    h = Hooks()
    try:
        yield h
    finally:
        h.release.set()
        h.server.stop()


@pytest.fixture
def admission(kube_backend: KubeBackend, kube_api_client: Any) -> Iterator[Any]:
    if kube_backend.name == "k3s":
        pytest.skip("k3s runs in Docker: its API server cannot reach a webhook on this loopback")
    api = client.AdmissionregistrationV1Api(kube_api_client)
    made: list[tuple[str, str]] = []

    def install(cfg: dict[str, Any]) -> None:
        if cfg["kind"] == "MutatingWebhookConfiguration":
            api.create_mutating_webhook_configuration(cfg)
        else:
            api.create_validating_webhook_configuration(cfg)
        made.append((cfg["kind"], cfg["metadata"]["name"]))

    try:
        yield install
    finally:
        for kind, name in made:
            if kind == "MutatingWebhookConfiguration":
                api.delete_mutating_webhook_configuration(name)
            else:
                api.delete_validating_webhook_configuration(name)


@pytest.fixture
def gizmos(kube_api_client: Any) -> Iterator[str]:
    """The group of a CRD ``gizmos`` (v1) whose schema defaults ``spec.extra.mode`` to
    "auto" when ``spec.extra`` is there; deleted after the test."""
    group = f"{unique('g')}.conformance.mcruntime.io"
    manifest = crd_manifest(group, "gizmos", "Gizmo", status=False)
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "properties": {
            "size": {"type": "integer"},
            "extra": {
                "type": "object",
                "properties": {"mode": {"type": "string", "default": "auto"}},
            },
        },
    }
    create_crd(kube_api_client, manifest)
    try:
        yield group
    finally:
        delete_crd(kube_api_client, f"gizmos.{group}")


def gizmo(group: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": name},
        "spec": {"size": 1},
    }


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": data}


def rules_for(
    group: str, resource: str, operation: str, scope: str = "Namespaced"
) -> list[dict[str, Any]]:
    """The rules of a webhook called for ``operation`` on ``resource`` of ``group``'s v1."""
    return [
        {
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "resources": [resource],
            "operations": [operation],
            "scope": scope,
        }
    ]


def install_pair(
    hooks: Hooks,
    admission: Any,
    rules: list[dict[str, Any]],
    ns: str,
    mutating: str,
    validating: str,
) -> None:
    """A mutating webhook at path ``mutating`` and a validating one at ``validating``, both
    on ``rules``, for the objects of namespace ``ns`` only."""
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    for kind, path in (
        ("MutatingWebhookConfiguration", mutating),
        ("ValidatingWebhookConfiguration", validating),
    ):
        admission(hooks.config(kind, unique("w"), path, rules=rules, namespaceSelector=selector))


def test_a_mutating_webhook_patches_the_object_before_it_is_stored(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/label"))
    created = core.create_namespaced_config_map(ns, cm(unique("cm")))
    assert created.metadata.labels == {"mutated": "yes"}
    stored = core.read_namespaced_config_map(created.metadata.name, ns)
    assert stored.metadata.labels == {"mutated": "yes"}
    req = hooks.seen["/label"][-1]
    assert (req.operation, req.namespace, req.kind["kind"]) == ("CREATE", ns, "ConfigMap")
    assert req.resource == {"group": "", "version": "v1", "resource": "configmaps"}


def test_a_mutating_webhook_sees_the_object_before_the_registry_names_it(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    """kube-apiserver's registry fills in the uid, the creation time and a name from
    ``generateName`` after the mutating webhooks (``BeforeCreate``): their request names
    nothing, as for the pods of a Deployment; the validating webhooks see the object, and
    their request the name, it is stored with."""
    admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/label"))
    admission(hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow"))
    created = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}})
    name, uid = created.metadata.name, created.metadata.uid
    assert name.startswith("gen-")
    mutating, validating = hooks.seen["/label"][-1], hooks.seen["/allow"][-1]
    assert (mutating.name, validating.name) == ("", name)
    assert mutating.obj is not None and validating.obj is not None
    shown = mutating.obj["metadata"]
    assert shown["generateName"] == "gen-"
    assert not {"name", "uid", "creationTimestamp", "resourceVersion"} & set(shown), shown
    stored = validating.obj["metadata"]
    assert (stored["name"], stored["uid"], stored["labels"]) == (name, uid, {"mutated": "yes"})
    assert stored["creationTimestamp"]

    named = unique("cm")
    core.create_namespaced_config_map(ns, {"metadata": {"name": named}})
    mutating, validating = hooks.seen["/label"][-1], hooks.seen["/allow"][-1]
    assert (mutating.name, validating.name) == (named, named)
    assert mutating.obj is not None and "uid" not in mutating.obj["metadata"]


@pytest.mark.parametrize("policy", ["IfNeeded", "Never"])
def test_a_webhook_reinvoked_if_needed_sees_a_later_webhook_s_change(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str, policy: str
) -> None:
    """Configurations are called in the order of their names; a webhook whose
    ``reinvocationPolicy`` is ``IfNeeded`` is called once more after a later one changed
    the object (and only once: its own change does not call it a third time)."""
    tag = unique("r")
    rules = rules_for("", "configmaps", "CREATE")
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    first = hooks.config(
        "MutatingWebhookConfiguration",
        f"a-{tag}",
        "/copy-labels",
        rules=rules,
        namespaceSelector=selector,
        reinvocationPolicy=policy,
    )
    admission(first)
    admission(
        hooks.config(
            "MutatingWebhookConfiguration",
            f"b-{tag}",
            "/label",
            rules=rules,
            namespaceSelector=selector,
        )
    )
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": unique("cm")}})
    assert created.metadata.labels == {"mutated": "yes"}
    if policy == "IfNeeded":
        assert created.metadata.annotations == {"labels-seen": "mutated=yes"}
        assert len(hooks.seen["/copy-labels"]) == 2
    else:
        assert created.metadata.annotations == {"labels-seen": ""}
        assert len(hooks.seen["/copy-labels"]) == 1
    assert len(hooks.seen["/label"]) == 1


def test_an_equivalent_version_is_sent_converted_to_the_webhook_s_version(
    api: Any, hooks: Hooks, admission: Any, kube_api_client: Any, ns: str
) -> None:
    """With ``matchPolicy: Equivalent`` (the default), a webhook whose rules name ``v1``
    is called for a write in ``v2`` with the object converted to ``v1`` (``kind``,
    ``resource``) and the version written in as ``requestKind`` and ``requestResource``;
    its patch is converted back. ``Exact`` does not call it."""
    group = f"{unique('g')}.conformance.mcruntime.io"
    manifest = crd_manifest(group, "gadgets", "Gadget", status=False)
    v1 = manifest["spec"]["versions"][0]
    manifest["spec"]["versions"] = [
        {**v1, "storage": False},
        {**v1, "name": "v2", "storage": True},
    ]
    create_crd(kube_api_client, manifest)
    try:
        rules = rules_for(group, "gadgets", "CREATE")  # v1 only
        admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/label", rules=rules))
        exact = hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow", rules=rules)
        exact["webhooks"][0]["matchPolicy"] = "Exact"
        admission(exact)
        name = unique("gadget")
        body = {"apiVersion": f"{group}/v2", "kind": "Gadget", "metadata": {"name": name}}
        created = raw(api, "POST", f"/apis/{group}/v2/namespaces/{ns}/gadgets", body=body)
        assert created.status == 201, created.json()
        assert created.json()["apiVersion"] == f"{group}/v2"
        assert created.json()["metadata"]["labels"] == {"mutated": "yes"}
        (seen,) = hooks.seen["/label"]
        assert seen.obj is not None and seen.obj["apiVersion"] == f"{group}/v1"
        assert (seen.kind["version"], seen.request_kind["version"]) == ("v1", "v2")
        assert (seen.resource["version"], seen.request_resource["version"]) == ("v1", "v2")
        assert hooks.seen["/allow"] == []  # Exact: v2 is not v1
    finally:
        delete_crd(kube_api_client, f"gadgets.{group}")


def test_what_a_mutating_webhook_adds_belongs_to_no_field_manager(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    """kube-apiserver records the request's fields with the field manager before the
    mutating webhooks run, on create and on update: a field only a webhook sets is owned
    by no manager, so the request's manager does not meet it in a conflict or remove it."""
    before = unique("cm")  # created before the webhook: its update gets the label
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": before}, "data": {"a": "1"}}, field_manager="writer"
    )
    admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/label"))
    updated = core.replace_namespaced_config_map(
        before,
        ns,
        {"metadata": {"name": before}, "data": {"a": "2"}},
        field_manager="writer",
    )
    after = unique("cm")
    created = core.create_namespaced_config_map(
        ns, {"metadata": {"name": after}, "data": {"a": "1"}}, field_manager="writer"
    )
    for obj in (updated, created):
        assert obj.metadata.labels == {"mutated": "yes"}
        (entry,) = [m for m in obj.metadata.managed_fields if m.manager == "writer"]
        assert "f:labels" not in entry.fields_v1.get("f:metadata", {}), entry
        assert "f:data" in entry.fields_v1


def test_a_validating_webhook_refusal_reaches_the_client_with_its_message_and_code(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(hooks.config("ValidatingWebhookConfiguration", unique("v"), "/deny"))
    name = unique("cm")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, cm(name, bad="1"))
    assert err.value.status == 422
    assert "denied the request: data.bad is not allowed here" in err.value.body
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map(name, ns)
    assert err.value.status == 404
    core.create_namespaced_config_map(ns, cm(name, good="1"))


def test_validating_webhooks_see_the_mutated_object_and_updates_carry_the_old_one(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/label"))
    admission(hooks.config("ValidatingWebhookConfiguration", unique("v"), "/deny"))
    name = unique("cm")
    core.create_namespaced_config_map(ns, cm(name, a="1"))
    assert hooks.seen["/deny"][-1].obj["metadata"]["labels"] == {"mutated": "yes"}  # type: ignore[index]
    core.patch_namespaced_config_map(name, ns, {"data": {"a": "2"}})
    req = hooks.seen["/deny"][-1]
    assert req.operation == "UPDATE"
    assert req.old_object is not None and req.old_object["data"] == {"a": "1"}
    assert req.obj is not None and req.obj["data"] == {"a": "2"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(name, ns, {"data": {"bad": "x"}})
    assert err.value.status == 422
    assert core.read_namespaced_config_map(name, ns).data == {"a": "2"}


def test_rules_select_by_operation_and_resource(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow"))
    core.create_namespaced_secret(ns, {"metadata": {"name": unique("s")}})
    name = unique("cm")
    core.create_namespaced_config_map(ns, cm(name))
    core.delete_namespaced_config_map(name, ns)  # DELETE is not in the rule
    assert [r.operation for r in hooks.seen["/allow"]] == ["CREATE"]


def test_object_and_namespace_selectors_choose_which_objects_are_sent(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/allow",
            objectSelector={"matchLabels": {"check": "yes"}},
            namespaceSelector={
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [ns]}
                ]
            },
        )
    )
    core.create_namespaced_config_map(ns, cm(unique("plain")))
    checked = unique("checked")
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": checked, "labels": {"check": "yes"}}}
    )
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": unique("elsewhere"), "labels": {"check": "yes"}}}
    )
    assert [r.name for r in hooks.seen["/allow"]] == [checked]
    for item in core.list_namespaced_config_map("default", label_selector="check=yes").items:
        core.delete_namespaced_config_map(item.metadata.name, "default")


def test_failure_policy_ignore_lets_requests_through_and_fail_refuses_them(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    down = hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow")
    down["webhooks"][0]["clientConfig"]["url"] = "https://127.0.0.1:1/allow"
    down["webhooks"][0]["failurePolicy"] = "Ignore"
    admission(down)
    core.create_namespaced_config_map(ns, cm(unique("cm")))
    failing = hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow")
    failing["webhooks"][0]["clientConfig"]["url"] = "https://127.0.0.1:1/allow"
    failing["webhooks"][0]["failurePolicy"] = "Fail"
    admission(failing)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, cm(unique("cm")))
    assert err.value.status == 500
    assert "failed calling webhook" in err.value.body


def test_a_webhook_slower_than_its_timeout_fails_the_request(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(
        hooks.config("ValidatingWebhookConfiguration", unique("v"), "/slow", timeoutSeconds=1)
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, cm(unique("cm")))
    assert err.value.status == 500
    assert "failed calling webhook" in err.value.body
    # the call told the webhook how long it waits, as kube-apiserver's dispatcher does
    assert '/slow?timeout=1s\\": ' in err.value.body, err.value.body


def test_match_conditions_choose_which_requests_a_webhook_is_called_for(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    # (GA in 1.30) a webhook whose matchConditions do not all hold is not called
    checked = "has(object.metadata.labels) && 'checked' in object.metadata.labels"
    condition = {"name": "only-checked", "expression": checked}
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/no-exec",  # refuses whatever it is called for
            matchConditions=[condition],
        )
    )
    core.create_namespaced_config_map(ns, cm(unique("cm")))
    labelled = {"metadata": {"name": unique("cm"), "labels": {"checked": "yes"}}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, labelled)
    assert "exec is not allowed here" in err.value.body


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_a_match_condition_that_fails_to_evaluate_follows_the_failure_policy(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str, policy: str
) -> None:
    broken = "object.data['missing'] == 'x'"  # no such key: an evaluation error
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/no-exec",
            failurePolicy=policy,
            matchConditions=[{"name": "broken", "expression": broken}],
        )
    )
    name = unique("cm")
    if policy == "Ignore":  # the webhook is skipped
        core.create_namespaced_config_map(ns, cm(name, a="b"))
        return
    with pytest.raises(ApiException) as err:  # refused without calling it
        core.create_namespaced_config_map(ns, cm(name, a="b"))
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (403, "Forbidden")
    assert status["message"].startswith(
        f"configmaps \"{name}\" is forbidden: expression '{broken}' resulted in error: "
    ), status["message"]
    assert not hooks.seen["/no-exec"]


def test_a_validating_webhook_that_answers_with_a_patch_fails_the_call(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    # a handler that patches, registered as a validating webhook: kube-apiserver refuses
    # the answer (VerifyAdmissionResponse) as a failed call, which failurePolicy Fail refuses
    name = unique("v")
    admission(hooks.config("ValidatingWebhookConfiguration", name, "/label"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, cm(unique("cm")))
    assert err.value.status == 500
    assert json.loads(err.value.body)["message"] == (
        'Internal error occurred: failed calling webhook "label.conformance.mcruntime.io": '
        "received invalid webhook response: validating webhook may not return response.patch"
    )


def test_dry_run_requests_reach_webhooks_marked_dry_run_and_store_nothing(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow"))
    name = unique("cm")
    core.create_namespaced_config_map(ns, cm(name), dry_run="All")
    assert hooks.seen["/allow"][-1].dry_run is True
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map(name, ns)
    assert err.value.status == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sideEffects": "Some"}, "sideEffects"),
        ({"admissionReviewVersions": []}, "admissionReviewVersions"),
        ({"timeoutSeconds": 31}, "timeoutSeconds"),
        ({"clientConfig": {"url": "http://127.0.0.1:1/x"}}, "clientConfig.url"),
        (
            {"matchConditions": [{"name": "c", "expression": "object.metadata.name =="}]},
            "matchConditions[0].expression",
        ),
        (
            {"matchConditions": [{"name": "c", "expression": "true"}] * 2},
            "matchConditions[1].name",
        ),
    ],
)
def test_invalid_webhook_configurations_are_refused(
    hooks: Hooks, kube_api_client: Any, change: dict[str, Any], field: str
) -> None:
    cfg = hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow")
    cfg["webhooks"][0].update(change)
    api = client.AdmissionregistrationV1Api(kube_api_client)
    with pytest.raises(ApiException) as err:
        api.create_validating_webhook_configuration(cfg)
    assert err.value.status == 422
    assert f"webhooks[0].{field}" in err.value.body


def test_other_requests_are_served_while_a_webhook_is_slow(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    admission(
        hooks.config("ValidatingWebhookConfiguration", unique("v"), "/slow", timeoutSeconds=10)
    )
    result: list[Any] = []
    writer = threading.Thread(
        target=lambda: result.append(core.create_namespaced_config_map(ns, cm(unique("cm")))),
        name="test/slow-write",
    )
    writer.start()
    try:
        wait_for(lambda: hooks.seen["/slow"], what="the slow webhook called")
        began = time.monotonic()
        core.read_namespace(ns)  # answered while the write waits for its webhook
        assert time.monotonic() - began < 5  # the write is held for up to 10 s
        assert not result
    finally:
        hooks.release.set()
        writer.join(15)
    assert result and result[0].metadata.namespace == ns


def test_deletecollection_admits_every_object_as_a_delete(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    names = sorted(unique("cm") for _ in range(2))
    for n in names:
        core.create_namespaced_config_map(ns, {"metadata": {"name": n, "labels": {"batch": "x"}}})
    cfg = hooks.config("ValidatingWebhookConfiguration", unique("v"), "/allow")
    cfg["webhooks"][0]["rules"][0]["operations"] = ["DELETE"]
    admission(cfg)
    core.delete_collection_namespaced_config_map(ns, label_selector="batch=x")
    assert sorted(r.name for r in hooks.seen["/allow"]) == names
    assert all(r.operation == "DELETE" and r.old_object is not None for r in hooks.seen["/allow"])
    assert core.list_namespaced_config_map(ns, label_selector="batch=x").items == []


def test_a_webhook_on_roles_does_not_let_an_escalation_through(
    hooks: Hooks, admission: Any, kube_backend: KubeBackend, kube_api_client: Any, ns: str
) -> None:
    # the escalation check sees the admitted object, as kube-apiserver's RBAC storage does
    group = "rbac.authorization.k8s.io"
    roles = {"apiGroups": [group], "apiVersions": ["v1"], "resources": ["roles"]}
    rules = [{**roles, "operations": ["CREATE"], "scope": "Namespaced"}]
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/allow",
            rules=rules,
            namespaceSelector=selector,
        )
    )
    core, rbac = client.CoreV1Api(kube_api_client), client.RbacAuthorizationV1Api(kube_api_client)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "writer"}})
    may = [{"apiGroups": [group], "resources": ["roles"], "verbs": ["create"]}]
    rbac.create_namespaced_role(ns, {"metadata": {"name": "writer"}, "rules": may})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "writer"},
            "roleRef": {"apiGroup": group, "kind": "Role", "name": "writer"},
            "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": ns}],
        },
    )
    token = core.create_namespaced_service_account_token(
        "writer",
        ns,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
    ).status.token
    secrets = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    with kube_backend.client_with_token(token) as sa_api:
        sa = client.RbacAuthorizationV1Api(sa_api)

        def attempt() -> str:
            try:
                sa.create_namespaced_role(ns, {"metadata": {"name": unique("r")}, "rules": secrets})
            except ApiException as e:
                return str(e.body)
            return "created"

        wait_for(lambda: "attempting to grant RBAC permissions" in attempt(), 30)


def test_a_field_a_mutating_webhook_adds_is_dropped_not_blamed_on_the_client(
    hooks: Hooks, admission: Any, api: Any, ns: str
) -> None:
    # the client's fieldValidation is about the client's body: what a webhook adds that the
    # kind does not have is dropped when the patched object is decoded, without a word
    admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/extra"))
    name = unique("cm")
    body = {"apiVersion": "v1", "kind": "ConfigMap", **cm(name, k="v")}
    resp = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        query=[("fieldValidation", "Strict")],
        body=body,
    )
    assert resp.status == 201, resp.data
    created = resp.json()
    assert created["metadata"]["labels"] == {"extra": "yes"}
    assert "bogus" not in created
    assert "bogus" not in (resp.headers.get("Warning") or "")
    assert hooks.seen["/extra"], "the webhook was not called"


def test_validating_webhooks_see_a_built_in_object_without_the_fields_a_mutating_webhook_added(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    # kube-apiserver decodes each mutating webhook's patched object into the kind's Go type
    # (mutating/dispatcher.go), so a field ConfigMaps do not have is gone before the
    # validating webhooks are called; the webhook's label stays
    install_pair(hooks, admission, rules_for("", "configmaps", "CREATE"), ns, "/extra", "/allow")
    name = unique("cm")
    created = core.create_namespaced_config_map(ns, cm(name, k="v"))
    assert created.metadata.labels == {"extra": "yes"}
    sent = hooks.seen["/allow"][-1].obj
    assert sent is not None and sent["metadata"]["name"] == name
    assert sent["metadata"]["labels"] == {"extra": "yes"}
    assert "bogus" not in sent


def test_validating_webhooks_see_a_custom_resource_as_the_mutating_webhooks_left_it(
    hooks: Hooks,
    admission: Any,
    custom: client.CustomObjectsApi,
    widget_crds: dict[str, str],
    ns: str,
) -> None:
    """kube-apiserver decodes a custom resource's patched object as unstructured content:
    unlike a built-in kind's, it is not pruned by the CRD's structural schema until it is
    encoded for storage, after the validating webhooks (apiextensions-apiserver prunes in
    its decoder and its storage codec, not in the converter admission uses). So a
    validating webhook sees the field a mutating webhook added, and the stored widget
    has not got it."""
    rules = rules_for(widget_crds["group"], widget_crds["widgets"], "CREATE")
    install_pair(hooks, admission, rules, ns, "/extra", "/allow")
    name = unique("w")
    group, version, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    created = custom.create_namespaced_custom_object(group, version, ns, plural, widget(name))
    sent = hooks.seen["/allow"][-1].obj
    assert sent is not None and sent["metadata"]["name"] == name
    assert sent["bogus"] == "from the webhook"
    assert created["metadata"]["labels"] == {"extra": "yes"}
    # as it will be stored: its uid and creation time given, before the mutating webhooks not
    assert sent["metadata"]["uid"] == created["metadata"]["uid"]
    assert sent["metadata"]["creationTimestamp"]
    shown = hooks.seen["/extra"][-1].obj
    assert shown is not None and "uid" not in shown["metadata"]
    assert "bogus" not in created
    assert "bogus" not in custom.get_namespaced_custom_object(group, version, ns, plural, name)


def test_a_custom_resource_gets_the_schema_defaults_of_what_a_mutating_webhook_added(
    hooks: Hooks, admission: Any, custom: client.CustomObjectsApi, gizmos: str, ns: str
) -> None:
    """kube-apiserver defaults the object a mutating webhook patched (a non-empty patch)
    with the CRD's structural schema (mutating/dispatcher.go, the request scope's
    unstructuredDefaulter): the validating webhooks and the store see ``spec.extra.mode``
    the webhook's ``spec.extra: {}`` was given."""
    install_pair(
        hooks, admission, rules_for(gizmos, "gizmos", "CREATE"), ns, "/spec-extra", "/allow"
    )
    name = unique("gz")
    created = custom.create_namespaced_custom_object(
        gizmos, "v1", ns, "gizmos", gizmo(gizmos, name)
    )
    assert created["spec"] == {"size": 1, "extra": {"mode": "auto"}}
    stored = custom.get_namespaced_custom_object(gizmos, "v1", ns, "gizmos", name)
    assert stored["spec"] == {"size": 1, "extra": {"mode": "auto"}}
    sent = hooks.seen["/allow"][-1].obj
    assert sent is not None and sent["metadata"]["name"] == name
    assert sent["spec"] == {"size": 1, "extra": {"mode": "auto"}}


@pytest.fixture
def sized(kube_api_client: Any) -> Iterator[str]:
    """The group of a CRD ``sizes`` (v1) whose ``spec.size`` is required and at most 3."""
    group = f"{unique('g')}.conformance.mcruntime.io"
    manifest = crd_manifest(group, "sizes", "Size", status=False)
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "required": ["size"],
        "properties": {"size": {"type": "integer", "maximum": 3}},
    }
    create_crd(kube_api_client, manifest)
    try:
        yield group
    finally:
        delete_crd(kube_api_client, f"sizes.{group}")


def test_a_mutating_webhook_may_complete_what_the_schema_requires_before_it_is_checked(
    hooks: Hooks, admission: Any, custom: client.CustomObjectsApi, sized: str, ns: str
) -> None:
    # kube-apiserver validates an object after mutating admission (the registry's
    # BeforeCreate/BeforeUpdate) and before the validating webhooks: a defaulter may fill
    # a required field or bring a value within bounds, on create and on update
    rules = [{**rules_for(sized, "sizes", "CREATE")[0], "operations": ["CREATE", "UPDATE"]}]
    install_pair(hooks, admission, rules, ns, "/fill", "/allow")
    body = {"apiVersion": f"{sized}/v1", "kind": "Size", "spec": {}}
    missing = custom.create_namespaced_custom_object(
        sized, "v1", ns, "sizes", {**body, "metadata": {"name": "missing"}}
    )
    too_big = custom.create_namespaced_custom_object(
        sized, "v1", ns, "sizes", {**body, "metadata": {"name": "big"}, "spec": {"size": 99}}
    )
    assert missing["spec"] == too_big["spec"] == {"size": 3}
    patched_ = custom.patch_namespaced_custom_object(
        sized, "v1", ns, "sizes", "big", {"spec": {"size": 50}}
    )
    assert patched_["spec"] == {"size": 3}
    seen = [r.obj["spec"] for r in hooks.seen["/allow"] if r.obj is not None]
    assert seen == [{"size": 3}] * 3


def test_an_object_a_mutating_webhook_breaks_is_refused_before_the_validating_webhooks(
    hooks: Hooks, admission: Any, custom: client.CustomObjectsApi, sized: str, ns: str
) -> None:
    install_pair(hooks, admission, rules_for(sized, "sizes", "CREATE"), ns, "/break", "/allow")
    body = {"apiVersion": f"{sized}/v1", "kind": "Size", "metadata": {"name": "s"}}
    with raises_status(422, "Invalid") as status:
        custom.create_namespaced_custom_object(
            sized, "v1", ns, "sizes", {**body, "spec": {"size": 1}}
        )
    assert status["details"]["causes"][0]["field"] == "spec.size"
    assert hooks.seen["/allow"] == []


def test_a_mutating_webhook_may_give_a_pod_the_image_it_lacks(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    install_pair(hooks, admission, rules_for("", "pods", "CREATE"), ns, "/fill", "/allow")
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main"}]}}
    created = core.create_namespaced_pod(ns, body)
    assert created.spec.containers[0].image == PAUSE


def test_a_later_mutating_webhook_sees_the_defaults_of_what_an_earlier_one_added(
    hooks: Hooks, admission: Any, custom: client.CustomObjectsApi, gizmos: str, ns: str
) -> None:
    # the webhooks of one configuration are called in their order; the second is sent the
    # first one's patched object after the defaulter has run on it
    cfg = hooks.config(
        "MutatingWebhookConfiguration",
        unique("m"),
        "/spec-extra",
        rules=rules_for(gizmos, "gizmos", "CREATE"),
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": ns}},
    )
    later = {**cfg["webhooks"][0], "name": "allow.conformance.mcruntime.io"}
    later["clientConfig"] = {**later["clientConfig"], "url": hooks.server.url_for("/allow")}
    cfg["webhooks"].append(later)
    admission(cfg)
    name = unique("gz")
    custom.create_namespaced_custom_object(gizmos, "v1", ns, "gizmos", gizmo(gizmos, name))
    first, second = hooks.seen["/spec-extra"][-1].obj, hooks.seen["/allow"][-1].obj
    assert first is not None and first["spec"] == {"size": 1}
    assert second is not None and second["metadata"]["name"] == name
    assert second["spec"] == {"size": 1, "extra": {"mode": "auto"}}


def test_a_csr_approval_is_admitted_as_an_update_of_its_approval_subresource(
    hooks: Hooks, admission: Any, kube_api_client: Any
) -> None:
    # the approval goes through the webhooks and is stored as an approval, not as a write
    # of the object itself (which could not change its conditions)
    label = {"conformance.mcruntime.io/csr": unique("t")}
    rules = rules_for(
        "certificates.k8s.io", "certificatesigningrequests/approval", "UPDATE", "Cluster"
    )
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/allow",
            rules=rules,
            objectSelector={"matchLabels": label},
        )
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone")])
    request = (
        x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    )
    pem = request.public_bytes(serialization.Encoding.PEM)
    certs = client.CertificatesV1Api(kube_api_client)
    name = unique("csr")
    spec = {
        "request": base64.b64encode(pem).decode(),
        "signerName": "example.com/conformance",
        "usages": ["client auth"],
    }
    csr = certs.create_certificate_signing_request(
        {"metadata": {"name": name, "labels": label}, "spec": spec}
    )
    try:
        csr.status.conditions = [
            client.V1CertificateSigningRequestCondition(
                type="Approved", status="True", reason="ConformanceTest", message="by the test"
            )
        ]
        approved = certs.replace_certificate_signing_request_approval(
            name, csr, field_manager="conformance-approver"
        )
        assert [c.type for c in approved.status.conditions or ()] == ["Approved"]
        req = hooks.seen["/allow"][-1]
        assert (req.operation, req.name, req.sub_resource) == ("UPDATE", name, "approval")
        assert req.obj is not None and req.obj["status"]["conditions"][0]["type"] == "Approved"
        entries = {(m.manager, m.subresource) for m in approved.metadata.managed_fields}
        assert ("conformance-approver", "approval") in entries
    finally:
        certs.delete_certificate_signing_request(name)


def test_a_webhook_on_pods_eviction_sees_the_eviction_and_may_refuse_it(
    hooks: Hooks, admission: Any, api: Any, core: client.CoreV1Api, ns: str
) -> None:
    # an eviction is a CREATE of pods/eviction whose object is the policy/v1 Eviction
    name = unique("pod")
    spec = {"nodeName": "conformance-nowhere", "containers": [{"name": "c", "image": "pause"}]}
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    install_pair(
        hooks, admission, rules_for("", "pods/eviction", "CREATE"), ns, "/label", "/no-eviction"
    )
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
        "deleteOptions": {"gracePeriodSeconds": 0},
    }
    resp = raw(api, "POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body=eviction)
    assert resp.status == 403, resp.data
    assert "denied the request: evictions are paused" in resp.json()["message"]
    assert core.read_namespaced_pod(name, ns).metadata.name == name
    req = hooks.seen["/no-eviction"][-1]
    assert (req.operation, req.name, req.namespace, req.sub_resource) == (
        "CREATE",
        name,
        ns,
        "eviction",
    )
    assert req.kind == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert req.resource == {"group": "", "version": "v1", "resource": "pods"}
    assert req.obj is not None and req.obj["kind"] == "Eviction"
    assert req.obj["metadata"]["name"] == name
    assert req.obj["metadata"]["labels"] == {"mutated": "yes"}  # the mutating webhook's
    assert hooks.seen["/label"][-1].sub_resource == "eviction"


def test_a_webhook_on_pods_binding_sees_the_binding_and_may_refuse_it(
    hooks: Hooks, admission: Any, api: Any, core: client.CoreV1Api, ns: str
) -> None:
    # a binding is a CREATE of pods/binding whose object is the v1 Binding
    name = unique("pod")
    spec = {"schedulerName": "conformance-none", "containers": [{"name": "c", "image": "pause"}]}
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    install_pair(
        hooks, admission, rules_for("", "pods/binding", "CREATE"), ns, "/label", "/no-eviction"
    )
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}}
    resp = raw(api, "POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body=binding)
    assert resp.status == 403, resp.data
    assert core.read_namespaced_pod(name, ns).spec.node_name is None
    req = hooks.seen["/no-eviction"][-1]
    assert (req.operation, req.name, req.namespace, req.sub_resource) == (
        "CREATE",
        name,
        ns,
        "binding",
    )
    assert req.kind == {"group": "", "version": "v1", "kind": "Binding"}
    assert req.resource == {"group": "", "version": "v1", "resource": "pods"}
    assert req.obj is not None and req.obj["target"] == {"kind": "Node", "name": "n1"}
    assert req.obj["metadata"]["labels"] == {"mutated": "yes"}  # the mutating webhook's


def test_webhooks_see_the_scheme_defaults_of_a_create_and_an_update(
    hooks: Hooks, admission: Any, api: Any, ns: str
) -> None:
    # kube-apiserver defaults a request as it decodes it, before any admission webhook
    rules = rules_for("apps", "deployments", "CREATE")
    rules[0]["operations"] = ["CREATE", "UPDATE"]
    install_pair(hooks, admission, rules, ns, "/label", "/allow")
    apps = client.AppsV1Api(api)
    name = unique("deploy")
    live = apps.create_namespaced_deployment(ns, deployment(name))
    for path in ("/label", "/allow"):
        seen = hooks.seen[path][-1].obj
        assert seen is not None and seen["spec"]["revisionHistoryLimit"] == 10
        assert seen["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    body = api.sanitize_for_serialization(live)
    del body["spec"]["revisionHistoryLimit"]
    apps.replace_namespaced_deployment(name, ns, body)
    req = hooks.seen["/label"][-1]
    assert req.operation == "UPDATE"
    assert req.obj is not None and req.obj["spec"]["revisionHistoryLimit"] == 10


def test_mutating_webhooks_see_no_allocation_and_validating_ones_see_what_is_stored(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str
) -> None:
    # a Service's cluster IP, IP families and node ports are allocated by its REST storage,
    # and a Pod's status written by its registry strategy: both after mutating admission
    # and before validating admission
    for resource in ("services", "pods"):
        install_pair(hooks, admission, rules_for("", resource, "CREATE"), ns, "/label", "/allow")
    service = core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": unique("svc")},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]},
        },
    )
    mutating, validating = hooks.seen["/label"][-1].obj, hooks.seen["/allow"][-1].obj
    assert mutating is not None and validating is not None
    assert mutating["spec"]["type"] == "NodePort", "the scheme's defaults are there"
    allocated = {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}
    assert not allocated & set(mutating["spec"]), mutating
    assert "nodePort" not in mutating["spec"]["ports"][0]
    assert validating["spec"]["clusterIP"] == service.spec.cluster_ip
    assert validating["spec"]["ports"][0]["nodePort"] == service.spec.ports[0].node_port

    pod = core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": unique("pod")},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    mutating, validating = hooks.seen["/label"][-1].obj, hooks.seen["/allow"][-1].obj
    assert mutating is not None and validating is not None
    assert not (mutating.get("status") or {}), "the registry writes the status later"
    assert validating["status"]["phase"] == pod.status.phase == "Pending"
    assert validating["status"]["qosClass"] == pod.status.qos_class == "BestEffort"


def apply_configmap(api: Any, ns: str, name: str, **data: str) -> Any:
    """A server-side apply of ConfigMap ``name`` holding ``data``, by manager ``operator``."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    return raw(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/{name}",
        query=[("fieldManager", "operator")],
        body=json.dumps(body),
        content_type="application/apply-patch+yaml",
    )


def test_an_apply_that_creates_is_admitted_as_a_create(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str, kube_api_client: Any
) -> None:
    # an operator's server-side apply of a child it has not made yet, in a cluster with
    # webhooks: kube-apiserver's patch handler admits it as a CREATE (no old object)
    admission(hooks.config("MutatingWebhookConfiguration", unique("m"), "/label"))
    admission(hooks.config("ValidatingWebhookConfiguration", unique("v"), "/deny"))

    def apply(name: str, **data: str) -> Any:
        return apply_configmap(kube_api_client, ns, name, **data)

    name = unique("cm")
    made = apply(name, a="1")
    assert made.status == 201, made.data
    seen = hooks.seen["/deny"][-1]
    assert (seen.operation, seen.old_object) == ("CREATE", None)
    assert seen.obj is not None and seen.obj["metadata"]["labels"] == {"mutated": "yes"}
    stored = core.read_namespaced_config_map(name, ns)
    assert stored.data == {"a": "1"} and stored.metadata.labels == {"mutated": "yes"}
    applied = [e for e in stored.metadata.managed_fields if e.manager == "operator"]
    assert [e.operation for e in applied] == ["Apply"]

    # the next apply of it is an UPDATE with the old object; a refusal stores nothing
    again = apply(name, a="2")
    assert again.status == 200, again.data
    assert hooks.seen["/deny"][-1].operation == "UPDATE"
    refused_name = unique("cm")
    refused = apply(refused_name, bad="1")
    assert refused.status == 422, refused.data
    assert "data.bad is not allowed here" in refused.json()["message"]
    assert hooks.seen["/deny"][-1].operation == "CREATE"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map(refused_name, ns)
    assert err.value.status == 404


@pytest.mark.parametrize(
    "configuration", ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
)
def test_an_apply_whose_object_another_client_creates_meanwhile_applies_to_that_object(
    hooks: Hooks,
    admission: Any,
    core: client.CoreV1Api,
    ns: str,
    kube_api_client: Any,
    configuration: str,
) -> None:
    # the webhook creates the object while it admits the apply's CREATE: kube-apiserver's
    # GuaranteedUpdate then finds the object and retries, so the apply is an UPDATE of the
    # object the other client created (200, both managers), not an AlreadyExists
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    admission(hooks.config(configuration, unique("w"), "/race", namespaceSelector=selector))
    name = unique("cm")
    hooks.on_admit["CREATE", name] = lambda: core.create_namespaced_config_map(
        ns, cm(name, other="x")
    )
    applied = apply_configmap(kube_api_client, ns, name, a="1")
    assert applied.status == 200, applied.data
    assert applied.json()["data"] == {"other": "x", "a": "1"}
    managed = applied.json()["metadata"]["managedFields"]
    assert sorted(e["operation"] for e in managed) == ["Apply", "Update"]
    assert [e["manager"] for e in managed if e["operation"] == "Apply"] == ["operator"]
    operations = [r.operation for r in hooks.seen["/race"] if r.name == name]
    assert operations == ["CREATE", "CREATE", "UPDATE"]
    assert core.read_namespaced_config_map(name, ns).data == {"other": "x", "a": "1"}


def test_an_apply_whose_object_another_client_deletes_meanwhile_creates_it(
    hooks: Hooks, admission: Any, core: client.CoreV1Api, ns: str, kube_api_client: Any
) -> None:
    # the webhook deletes the object while it admits the apply's UPDATE: kube-apiserver's
    # GuaranteedUpdate retries, finds nothing, and an apply creates what it does not find
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration", unique("v"), "/race", namespaceSelector=selector
        )
    )
    name = unique("cm")
    core.create_namespaced_config_map(ns, cm(name, other="x"))
    hooks.on_admit["UPDATE", name] = lambda: core.delete_namespaced_config_map(name, ns)
    applied = apply_configmap(kube_api_client, ns, name, a="1")
    assert applied.status == 201, applied.data
    assert applied.json()["data"] == {"a": "1"}
    managed = applied.json()["metadata"]["managedFields"]
    assert [(e["manager"], e["operation"]) for e in managed] == [("operator", "Apply")]
    operations = [r.operation for r in hooks.seen["/race"] if r.name == name]
    assert operations == ["CREATE", "UPDATE", "CREATE"]
