"""A Job's selector: generated from its uid unless ``manualSelector``, checked, and immutable.

kube-apiserver's Job strategy (``pkg/registry/batch/job/strategy.go``) gives a new Job
``spec.selector`` ``{"matchLabels": {"batch.kubernetes.io/controller-uid": <uid>}}`` and
its pod template the labels that selector and the Job controller look for; validation
(``pkg/apis/batch/validation/validation.go``) refuses a selector the user set without
``manualSelector: true``, one that does not select the template, and any change of the
selector or of a running Job's template. A controller that builds Jobs meets all of it.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import raises_status, raw, to_dict, unique
from .test_admission_webhooks import Hooks, admission, hooks, rules_for

__all__ = ["admission", "hooks"]  # the webhook fixtures, used here too

pytestmark = pytest.mark.timeout(30)

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
PAUSE = "registry.k8s.io/pause:3.9"


def job(name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    template_labels = {"app": name} if labels is None else labels
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": PAUSE}],
        }
    }
    if template_labels:
        template["metadata"] = {"labels": template_labels}
    return {"metadata": {"name": name}, "spec": {"template": template, **spec}}


def generated_labels(name: str, uid: str) -> dict[str, str]:
    return {CONTROLLER_UID: uid, "controller-uid": uid, JOB_NAME: name, "job-name": name}


def causes(status: dict[str, Any]) -> dict[str, list[str]]:
    """The Status causes by field."""
    out: dict[str, list[str]] = {}
    for cause in status["details"]["causes"]:
        out.setdefault(cause["field"], []).append(cause["message"])
    return out


def test_a_new_job_selects_its_pods_by_its_uid(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(name)))
    uid = created["metadata"]["uid"]
    spec = created["spec"]
    assert spec["manualSelector"] is False
    assert spec["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}
    labels = {"app": name, **generated_labels(name, uid)}
    assert spec["template"]["metadata"]["labels"] == labels
    # a Job without labels has its template's, the generated ones included
    assert created["metadata"]["labels"] == labels
    stored = to_dict(api, batch.read_namespaced_job(name, ns))
    assert stored["spec"]["selector"] == spec["selector"]
    assert stored["metadata"]["labels"] == labels


def test_a_job_with_labels_keeps_them_and_its_template_gets_the_generated_ones(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    body = job(name)
    body["metadata"]["labels"] = {"app": name}
    created = to_dict(api, batch.create_namespaced_job(ns, body))
    uid = created["metadata"]["uid"]
    assert created["metadata"]["labels"] == {"app": name}
    assert created["spec"]["template"]["metadata"]["labels"] == {
        "app": name,
        **generated_labels(name, uid),
    }


def test_a_job_whose_template_has_no_labels_gets_them(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(name, labels={})))
    uid = created["metadata"]["uid"]
    assert created["spec"]["template"]["metadata"]["labels"] == generated_labels(name, uid)
    assert created["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}


def test_a_selector_without_manual_selector_is_refused(batch: client.BatchV1Api, ns: str) -> None:
    name = unique("job")
    body = job(name, selector={"matchLabels": {"app": name}})
    with raises_status(422, "Invalid") as status:
        batch.create_namespaced_job(ns, body)
    assert "spec.selector" in causes(status)
    assert any("`selector` not auto-generated" in m for m in causes(status)["spec.selector"])
    assert f'"app":"{name}"' in status["message"]


def test_a_generated_label_set_to_another_value_is_refused(
    batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    body = job(name, labels={"app": name, "job-name": "someone-else"})
    with raises_status(422, "Invalid") as status:
        batch.create_namespaced_job(ns, body)
    assert causes(status)["spec.template.metadata.labels[job-name]"] == [
        f'Invalid value: map[string]string{{"app":"{name}", '
        f'"batch.kubernetes.io/controller-uid":"{_uid_in(status)}", '
        f'"batch.kubernetes.io/job-name":"{name}", '
        f'"controller-uid":"{_uid_in(status)}", "job-name":"someone-else"}}: '
        f"must be '{name}'"
    ]


def _uid_in(status: dict[str, Any]) -> str:
    """The uid the server gave the refused Job (quoted in its messages)."""
    message: str = status["message"]
    start = message.index('"controller-uid":"') + len('"controller-uid":"')
    return message[start : message.index('"', start)]


def test_a_manual_selector_is_kept_and_no_label_is_generated(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    selector = {"matchLabels": {"app": name}}
    created = to_dict(
        api, batch.create_namespaced_job(ns, job(name, manualSelector=True, selector=selector))
    )
    assert created["spec"]["manualSelector"] is True
    assert created["spec"]["selector"] == selector
    assert created["spec"]["template"]["metadata"]["labels"] == {"app": name}


def test_a_manual_selector_must_select_the_template(batch: client.BatchV1Api, ns: str) -> None:
    name = unique("job")
    body = job(name, manualSelector=True, selector={"matchLabels": {"app": "other"}})
    with raises_status(422, "Invalid") as status:
        batch.create_namespaced_job(ns, body)
    assert causes(status) == {
        "spec.template.metadata.labels": [
            f'Invalid value: map[string]string{{"app":"{name}"}}: '
            "`selector` does not match template `labels`"
        ]
    }
    assert status["message"] == (
        f'Job.batch "{name}" is invalid: spec.template.metadata.labels: Invalid value: '
        f'map[string]string{{"app":"{name}"}}: `selector` does not match template `labels`'
    )


def test_a_manual_selector_job_needs_a_selector(batch: client.BatchV1Api, ns: str) -> None:
    name = unique("job")
    with raises_status(422, "Invalid") as status:
        batch.create_namespaced_job(ns, job(name, manualSelector=True))
    assert causes(status)["spec.selector"] == ["Required value"]


def test_the_selector_is_immutable(api: ApiClient, batch: client.BatchV1Api, ns: str) -> None:
    name = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(name, suspend=True)))
    uid = created["metadata"]["uid"]
    changed = {"matchLabels": {CONTROLLER_UID: uid, "app": name}}
    with raises_status(422, "Invalid") as status:
        batch.patch_namespaced_job(name, ns, {"spec": {"selector": changed}})
    assert any("field is immutable" in m for m in causes(status)["spec.selector"])
    # the same selector, sent back with the rest of the Job, is no change
    current = to_dict(api, batch.read_namespaced_job(name, ns))
    current["metadata"]["annotations"] = {"note": "kept"}
    replaced = to_dict(api, batch.replace_namespaced_job(name, ns, current))
    assert replaced["spec"]["selector"] == created["spec"]["selector"]


def test_a_job_sent_again_without_its_generated_fields_is_refused(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    """``kubectl replace`` of the manifest a Job was created from: its selector and the
    template's generated labels are missing, and both may not change."""
    name = unique("job")
    batch.create_namespaced_job(ns, job(name))
    with raises_status(422, "Invalid") as status:
        batch.replace_namespaced_job(name, ns, job(name))
    found = causes(status)
    assert "Required value" in found["spec.selector"]
    assert any("field is immutable" in m for m in found["spec.selector"])
    assert any("field is immutable" in m for m in found["spec.template"])


def test_a_running_jobs_template_is_immutable(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    batch.create_namespaced_job(ns, job(name))
    patch = {"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}
    with raises_status(422, "Invalid") as status:
        batch.patch_namespaced_job(name, ns, patch)
    assert any("field is immutable" in m for m in causes(status)["spec.template"])


def test_a_suspended_job_may_change_where_its_pods_run_but_not_what_they_run(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    batch.create_namespaced_job(ns, job(name, suspend=True))
    patch = {
        "spec": {
            "template": {
                "metadata": {"labels": {"tier": "batch"}, "annotations": {"a": "b"}},
                "spec": {"nodeSelector": {"disk": "ssd"}},
            }
        }
    }
    patched = to_dict(api, batch.patch_namespaced_job(name, ns, patch))
    assert patched["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert patched["spec"]["template"]["metadata"]["labels"]["tier"] == "batch"
    image = [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]
    with raises_status(422, "Invalid") as status:
        batch.patch_namespaced_job(
            name, ns, {"spec": {"template": {"spec": {"containers": image}}}}
        )
    assert any("field is immutable" in m for m in causes(status)["spec.template"])


def test_the_generated_labels_may_not_be_removed(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    batch.create_namespaced_job(ns, job(name, suspend=True))
    patch = {"spec": {"template": {"metadata": {"labels": {JOB_NAME: None}}}}}
    with raises_status(422, "Invalid") as status:
        batch.patch_namespaced_job(name, ns, patch)
    assert causes(status)[f"spec.template.metadata.labels[{JOB_NAME}]"] == [
        f"Required value: must be '{name}'"
    ]


def test_the_generated_fields_belong_to_no_field_manager(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(name), field_manager="maker"))
    (entry,) = created["metadata"]["managedFields"]
    assert entry["manager"] == "maker"
    fields = entry["fieldsV1"]["f:spec"]
    assert "f:selector" not in fields
    assert fields["f:template"]["f:metadata"]["f:labels"] == {"f:app": {}}


def test_server_side_apply_creates_and_updates_a_job_keeping_its_selector(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    manifest = {"apiVersion": "batch/v1", "kind": "Job", **job(name, suspend=True)}
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"
    query = [("fieldManager", "applier")]
    ct = "application/apply-patch+yaml"
    first = raw(api, "PATCH", path, query=query, body=manifest, content_type=ct)
    assert first.status == 201, first.json()
    uid = first.json()["metadata"]["uid"]
    assert first.json()["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}
    manifest["spec"]["parallelism"] = 2
    again = raw(api, "PATCH", path, query=query, body=manifest, content_type=ct)
    assert again.status == 200, again.json()
    assert again.json()["spec"]["parallelism"] == 2
    assert again.json()["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}
    labels = again.json()["spec"]["template"]["metadata"]["labels"]
    assert labels == {"app": name, **generated_labels(name, uid)}


def test_a_server_side_dry_run_generates_a_selector_and_stores_nothing(
    api: ApiClient, batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(name), dry_run="All"))
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}
    with raises_status(404, "NotFound"):
        batch.read_namespaced_job(name, ns)


def test_behind_webhooks_a_job_selects_its_own_uid(
    api: ApiClient, hooks: Hooks, admission: Any, batch: client.BatchV1Api, ns: str
) -> None:
    """A validating webhook sees the Job with the selector of the uid it is stored with; a
    mutating webhook's patch parts the Job's labels from its template's, so the Job does
    not get the generated ones."""
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    rules = rules_for("batch", "jobs", "CREATE")
    admission(
        hooks.config(
            "ValidatingWebhookConfiguration",
            unique("v"),
            "/allow",
            rules=rules,
            namespaceSelector=selector,
        )
    )
    plain = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(plain)))
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}
    assert created["metadata"]["labels"] == {"app": plain, **generated_labels(plain, uid)}
    seen = hooks.seen["/allow"][-1].obj
    assert seen is not None
    assert seen["metadata"]["uid"] == uid
    assert seen["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}

    admission(
        hooks.config(
            "MutatingWebhookConfiguration",
            unique("m"),
            "/label",
            rules=rules,
            namespaceSelector=selector,
        )
    )
    name = unique("job")
    created = to_dict(api, batch.create_namespaced_job(ns, job(name)))
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID: uid}}
    labels = created["spec"]["template"]["metadata"]["labels"]
    assert labels == {"app": name, **generated_labels(name, uid)}
    assert created["metadata"]["labels"] == {"app": name, "mutated": "yes"}
    assert to_dict(api, batch.read_namespaced_job(name, ns)) == created
