"""The scheme defaults kube-apiserver fills into Pods and the workload kinds on every create and
update: what a controller comparing its desired spec with the live object must expect."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import deployment, raw, to_dict, unique

pytestmark = pytest.mark.timeout(30)

PAUSE = "registry.k8s.io/pause:3.9"
POD_SPEC_DEFAULTS = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
}
CONTAINER_DEFAULTS = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
}


def labels(name: str) -> dict[str, str]:
    return {"app": name}


def template(name: str, **spec: Any) -> dict[str, Any]:
    containers = [{"name": "main", "image": PAUSE}]
    return {"metadata": {"labels": labels(name)}, "spec": {"containers": containers, **spec}}


def assert_pod_spec_defaults(spec: dict[str, Any], **expected: Any) -> None:
    assert {k: spec.get(k) for k in POD_SPEC_DEFAULTS} == {**POD_SPEC_DEFAULTS, **expected}
    for container in spec["containers"]:
        given = {k: container.get(k) for k in CONTAINER_DEFAULTS if k != "resources"}
        assert {**given, "resources": {}} == CONTAINER_DEFAULTS
        assert isinstance(container.get("resources"), dict)


def test_a_pod_gets_the_pod_defaults(api: ApiClient, core: client.CoreV1Api, ns: str) -> None:
    name = unique("pod")
    body = {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "pinned", "image": PAUSE, "ports": [{"containerPort": 8080}]},
                {"name": "untagged", "image": "busybox", "command": ["sleep", "1d"]},
                {"name": "latest", "image": "busybox:latest", "command": ["sleep", "1d"]},
                {
                    "name": "limited",
                    "image": PAUSE,
                    "resources": {"limits": {"cpu": "100m"}},
                    "readinessProbe": {"httpGet": {"port": 8080}},
                },
            ]
        },
    }
    pod = to_dict(api, core.create_namespaced_pod(ns, body))
    spec = pod["spec"]
    assert_pod_spec_defaults(spec)
    assert spec["enableServiceLinks"] is True
    containers = {c["name"]: c for c in spec["containers"]}
    assert {n: c["imagePullPolicy"] for n, c in containers.items()} == {
        "pinned": "IfNotPresent",
        "untagged": "Always",
        "latest": "Always",
        "limited": "IfNotPresent",
    }
    assert containers["pinned"]["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    # a Pod's requests default to its limits
    assert containers["limited"]["resources"] == {
        "limits": {"cpu": "100m"},
        "requests": {"cpu": "100m"},
    }
    probe = containers["limited"]["readinessProbe"]
    assert probe == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    # the creator (an Update operation) owns the defaulted fields: they were in its object
    owned = pod["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
    assert {"f:restartPolicy", "f:dnsPolicy", "f:enableServiceLinks"} <= set(owned)


def test_an_applied_pod_owns_only_what_it_applied(api: ApiClient, ns: str) -> None:
    name = unique("pod")
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": PAUSE}]},
    }
    resp = raw(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{name}",
        query=[("fieldManager", "applier")],
        body=json.dumps(body),
        content_type="application/apply-patch+yaml",
    )
    assert resp.status == 201, resp.data
    pod = resp.json()
    assert pod["spec"]["restartPolicy"] == "Always"
    entry = next(e for e in pod["metadata"]["managedFields"] if e["manager"] == "applier")
    assert set(entry["fieldsV1"]["f:spec"]) == {"f:containers"}


def test_a_deployment_gets_its_defaults_and_its_templates(
    api: ApiClient, apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    body = deployment(name)
    del body["spec"]["replicas"]
    live = to_dict(api, apps.create_namespaced_deployment(ns, body))
    spec = live["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod_spec = spec["template"]["spec"]
    assert_pod_spec_defaults(pod_spec)
    assert pod_spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "enableServiceLinks" not in pod_spec  # a Pod's own default, not a template's


def test_an_update_that_drops_a_default_gets_it_back(
    api: ApiClient, apps: client.AppsV1Api, ns: str
) -> None:
    name = unique("deploy")
    live = to_dict(api, apps.create_namespaced_deployment(ns, deployment(name)))
    generation = live["metadata"]["generation"]
    del live["spec"]["revisionHistoryLimit"]
    del live["spec"]["strategy"]
    del live["spec"]["template"]["spec"]["dnsPolicy"]
    del live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"]
    updated = to_dict(api, apps.replace_namespaced_deployment(name, ns, live))
    spec = updated["spec"]
    assert spec["revisionHistoryLimit"] == 10
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    # defaulted back to what it was: the spec did not change
    assert updated["metadata"]["generation"] == generation


def test_a_statefulset_gets_its_defaults(api: ApiClient, apps: client.AppsV1Api, ns: str) -> None:
    name = unique("sts")
    body = {
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "selector": {"matchLabels": labels(name)},
            "template": template(name),
        },
    }
    # as JSON: the typed model wants the status fields a controller would have written
    resp = apps.create_namespaced_stateful_set(ns, body, _preload_content=False)
    spec = json.loads(resp.data)["spec"]
    assert spec["replicas"] == 1
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert_pod_spec_defaults(spec["template"]["spec"])


def test_a_job_gets_its_defaults(api: ApiClient, batch: client.BatchV1Api, ns: str) -> None:
    name = unique("job")
    body = {
        "metadata": {"name": name},
        "spec": {"suspend": True, "template": template(name, restartPolicy="Never")},
    }
    job = to_dict(api, batch.create_namespaced_job(ns, body))
    spec = job["spec"]
    assert spec["backoffLimit"] == 6
    assert spec["completions"] == 1
    assert spec["parallelism"] == 1
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is True  # given, kept
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert job["metadata"]["labels"]["app"] == name  # the template's labels, when it has none
    assert_pod_spec_defaults(spec["template"]["spec"], restartPolicy="Never")


def test_a_new_workload_has_the_status_counts_the_typed_client_reads(
    apps: client.AppsV1Api, ns: str
) -> None:
    # the counts without omitempty (StatefulSetStatus.replicas, availableReplicas,
    # DaemonSetStatus.numberReady, ...) are written as 0 before any controller ran
    name = unique("typed")
    spec = {"selector": {"matchLabels": labels(name)}, "template": template(name)}
    apps.create_namespaced_stateful_set(
        ns, {"metadata": {"name": name}, "spec": {**spec, "serviceName": name}}
    )
    sts = apps.read_namespaced_stateful_set(name, ns)
    assert (sts.status.replicas, sts.status.available_replicas) == (0, 0)
    apps.create_namespaced_daemon_set(ns, {"metadata": {"name": name}, "spec": spec})
    ds = apps.read_namespaced_daemon_set(name, ns)
    assert (ds.status.number_ready, ds.status.desired_number_scheduled) == (0, 0)
    apps.create_namespaced_replica_set(ns, {"metadata": {"name": name}, "spec": spec})
    assert apps.read_namespaced_replica_set(name, ns).status.replicas == 0
