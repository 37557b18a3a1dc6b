"""What an update of a Pod may change (kube-apiserver's ``ValidatePodUpdate``): images,
``activeDeadlineSeconds`` (set or lowered), tolerations (added), scheduling gates
(removed); the rest of the spec is fixed once the pod exists. Pods name a scheduler that
does not run, so nothing else changes them during a test."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import Raw, assert_status, raw
from .test_binding import unscheduled

pytestmark = pytest.mark.timeout(60)

FORBIDDEN = "pod updates may not change fields other than `spec.containers[*].image`"


def put(api: ApiClient, ns: str, pod: dict[str, Any]) -> Raw:
    name = pod["metadata"]["name"]
    return raw(api, "PUT", f"/api/v1/namespaces/{ns}/pods/{name}", body=pod)


def with_spec(pod: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**pod, "spec": {**pod["spec"], **changes}}


def refused(resp: Raw) -> list[tuple[str, str]]:
    status = assert_status(resp, 422, "Invalid")
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def test_the_image_labels_and_a_shorter_deadline_may_change(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns, activeDeadlineSeconds=600)
    containers = [{**pod["spec"]["containers"][0], "image": "registry.k8s.io/pause:3.10"}]
    changed = with_spec(pod, containers=containers, activeDeadlineSeconds=300)
    changed["metadata"] = {**pod["metadata"], "labels": {"changed": "yes"}}
    resp = put(api, ns, changed)
    assert resp.status == 200, resp.json()
    got = resp.json()
    assert got["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    assert got["spec"]["activeDeadlineSeconds"] == 300
    assert got["metadata"]["labels"] == {"changed": "yes"}


def test_a_fixed_field_or_a_container_more_is_forbidden(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns)
    main = pod["spec"]["containers"][0]
    env = [{**main, "env": [{"name": "X", "value": "1"}]}]
    resp = put(api, ns, with_spec(pod, containers=env))
    assert refused(resp) == [("spec", "FieldValueForbidden")]
    message = resp.json()["message"]
    assert message.startswith(f'Pod "{pod["metadata"]["name"]}" is invalid: spec: Forbidden: ')
    assert FORBIDDEN in message
    assert "(only additions to existing tolerations)" in message
    more = [main, {**main, "name": "side"}]
    assert refused(put(api, ns, with_spec(pod, containers=more))) == [
        ("spec.containers", "FieldValueForbidden")
    ]
    assert (
        "may not add or remove containers"
        in put(api, ns, with_spec(pod, containers=more)).json()["message"]
    )
    assert refused(put(api, ns, with_spec(pod, restartPolicy="Never"))) == [
        ("spec", "FieldValueForbidden")
    ]


def test_the_deadline_may_only_be_set_or_lowered(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    pod = unscheduled(core, ns, activeDeadlineSeconds=60)
    assert refused(put(api, ns, with_spec(pod, activeDeadlineSeconds=120))) == [
        ("spec.activeDeadlineSeconds", "FieldValueInvalid")
    ]
    assert refused(put(api, ns, with_spec(pod, activeDeadlineSeconds=0))) == [
        ("spec.activeDeadlineSeconds", "FieldValueInvalid")
    ]
    unset = {k: v for k, v in pod["spec"].items() if k != "activeDeadlineSeconds"}
    resp = put(api, ns, {**pod, "spec": unset})
    assert ("spec.activeDeadlineSeconds", "FieldValueInvalid") in refused(resp)
    assert "must not update from a positive integer to nil value" in resp.json()["message"]


def test_tolerations_may_only_be_added_and_gates_only_removed(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    own = {"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute"}
    pod = unscheduled(core, ns, tolerations=[own], schedulingGates=[{"name": "wait"}])
    added = {"key": "extra", "operator": "Exists"}
    resp = put(api, ns, with_spec(pod, tolerations=[*pod["spec"]["tolerations"], added]))
    assert resp.status == 200, resp.json()
    pod = resp.json()
    kept = [t for t in pod["spec"]["tolerations"] if t.get("key") != "team"]
    assert refused(put(api, ns, with_spec(pod, tolerations=kept))) == [
        ("spec.tolerations", "FieldValueForbidden")
    ]
    # an existing toleration may change its tolerationSeconds only
    seconds = [
        {**t, "tolerationSeconds": 5} if t.get("key") == "team" else t
        for t in pod["spec"]["tolerations"]
    ]
    resp = put(api, ns, with_spec(pod, tolerations=seconds))
    assert resp.status == 200, resp.json()
    pod = resp.json()
    more_gates = [{"name": "wait"}, {"name": "another"}]
    assert refused(put(api, ns, with_spec(pod, schedulingGates=more_gates))) == [
        ("spec.schedulingGates[1].name", "FieldValueForbidden")
    ]
    # while gated, nodeSelector keys may be added; the gate may go
    resp = put(api, ns, with_spec(pod, nodeSelector={"zone": "a"}))
    assert resp.status == 200, resp.json()
    pod = resp.json()
    ungated = {k: v for k, v in pod["spec"].items() if k != "schedulingGates"}
    resp = put(api, ns, {**pod, "spec": ungated})
    assert resp.status == 200, resp.json()
    pod = resp.json()
    assert refused(put(api, ns, with_spec(pod, nodeSelector={"zone": "a", "rack": "1"}))) == [
        ("spec", "FieldValueForbidden")
    ]
