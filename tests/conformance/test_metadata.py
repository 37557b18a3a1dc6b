"""Object metadata the server owns: uid, timestamps, resourceVersion, generation, generateName."""

from __future__ import annotations

import re

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import configmap, deployment, raises_status, raw, rv, unique, widget

pytestmark = pytest.mark.timeout(30)

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def test_create_assigns_uid_creation_timestamp_and_resource_version(
    api: ApiClient, ns: str
) -> None:
    name = unique("cm")
    resp = raw(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
    )
    assert resp.status == 201, resp.data
    meta = resp.json()["metadata"]
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", meta["uid"]
    )
    assert RFC3339.match(meta["creationTimestamp"]), meta["creationTimestamp"]
    assert isinstance(meta["resourceVersion"], str) and meta["resourceVersion"].isdigit()
    assert meta["namespace"] == ns
    assert resp.json()["kind"] == "ConfigMap"
    assert resp.json()["apiVersion"] == "v1"


def test_client_supplied_uid_and_creation_timestamp_are_replaced(
    core: client.CoreV1Api, ns: str
) -> None:
    created = core.create_namespaced_config_map(
        ns,
        configmap(
            unique("cm"),
            uid="00000000-0000-0000-0000-000000000000",
            creationTimestamp="2000-01-01T00:00:00Z",
        ),
    )
    assert created.metadata.uid != "00000000-0000-0000-0000-000000000000"
    assert created.metadata.creation_timestamp.year > 2000


def test_uids_are_unique_and_stable_across_updates(core: client.CoreV1Api, ns: str) -> None:
    a = core.create_namespaced_config_map(ns, configmap(unique("cm")))
    b = core.create_namespaced_config_map(ns, configmap(unique("cm")))
    assert a.metadata.uid != b.metadata.uid
    a.data = {"changed": "yes"}
    updated = core.replace_namespaced_config_map(a.metadata.name, ns, a)
    assert updated.metadata.uid == a.metadata.uid
    assert updated.metadata.creation_timestamp == a.metadata.creation_timestamp


def test_resource_version_increases_with_every_write(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    versions = [rv(core.create_namespaced_config_map(ns, configmap(name)))]
    for i in range(3):
        versions.append(rv(core.patch_namespaced_config_map(name, ns, {"data": {"i": str(i)}})))
    other = core.create_namespaced_config_map(ns, configmap(unique("cm")))
    versions.append(rv(other))
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
    assert rv(core.read_namespaced_config_map(name, ns)) == versions[3]


def test_update_that_changes_nothing_keeps_resource_version(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    created = core.create_namespaced_config_map(ns, configmap(name))
    same = core.replace_namespaced_config_map(name, ns, created)
    assert same.metadata.resource_version == created.metadata.resource_version
    patched = core.patch_namespaced_config_map(name, ns, {"data": {"key": "value"}})
    assert patched.metadata.resource_version == created.metadata.resource_version


def test_configmaps_and_secrets_have_no_generation(core: client.CoreV1Api, ns: str) -> None:
    cm = core.create_namespaced_config_map(ns, configmap(unique("cm")))
    secret = core.create_namespaced_secret(ns, {"metadata": {"name": unique("s")}})
    assert not cm.metadata.generation
    assert not secret.metadata.generation
    cm.data = {"other": "data"}
    assert not core.replace_namespaced_config_map(cm.metadata.name, ns, cm).metadata.generation


def test_deployment_generation_counts_spec_and_annotation_changes(
    apps: client.AppsV1Api, ns: str
) -> None:
    # kube-apiserver bumps a Deployment's generation on annotation changes too, because
    # the deployment controller copies annotations to its ReplicaSets.
    name = unique("deploy")
    created = apps.create_namespaced_deployment(ns, deployment(name, replicas=1))
    assert created.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment(name, ns, {"spec": {"replicas": 2}})
    assert scaled.metadata.generation == 2
    labelled = apps.patch_namespaced_deployment(name, ns, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 2
    status = apps.patch_namespaced_deployment_status(
        name, ns, {"status": {"observedGeneration": 2}}
    )
    assert status.metadata.generation == 2
    annotated = apps.patch_namespaced_deployment(
        name, ns, {"metadata": {"annotations": {"a": "b"}}}
    )
    assert annotated.metadata.generation == 3
    image = apps.patch_namespaced_deployment(
        name,
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}},
    )
    assert image.metadata.generation == 4


def test_job_generation_starts_at_one_and_counts_spec_changes(
    batch: client.BatchV1Api, ns: str
) -> None:
    name = unique("job")
    body = {
        "metadata": {"name": name},
        "spec": {
            "parallelism": 1,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }
    assert batch.create_namespaced_job(ns, body).metadata.generation == 1
    patched = batch.patch_namespaced_job(name, ns, {"spec": {"parallelism": 2}})
    assert patched.metadata.generation == 2
    relabelled = batch.patch_namespaced_job(name, ns, {"metadata": {"labels": {"a": "b"}}})
    assert relabelled.metadata.generation == 2


def test_custom_resource_generation_counts_spec_changes_only(
    custom: client.CustomObjectsApi, widget_crds: dict[str, str], ns: str
) -> None:
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    name = unique("w")
    created = custom.create_namespaced_custom_object(g, v, ns, plural, widget(name, {"size": 1}))
    assert created["metadata"]["generation"] == 1
    resized = custom.patch_namespaced_custom_object(g, v, ns, plural, name, {"spec": {"size": 2}})
    assert resized["metadata"]["generation"] == 2
    labelled = custom.patch_namespaced_custom_object(
        g, v, ns, plural, name, {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 2
    status = custom.patch_namespaced_custom_object_status(
        g, v, ns, plural, name, {"status": {"ready": True}}
    )
    assert status["metadata"]["generation"] == 2
    assert status["status"] == {"ready": True}


def test_generate_name_creates_distinct_prefixed_names(core: client.CoreV1Api, ns: str) -> None:
    body = {"metadata": {"generateName": "gen-"}, "data": {"k": "v"}}
    a = core.create_namespaced_config_map(ns, body)
    b = core.create_namespaced_config_map(ns, body)
    for obj in (a, b):
        assert re.fullmatch(r"gen-[a-z0-9]{5}", obj.metadata.name), obj.metadata.name
        assert obj.metadata.generate_name == "gen-"
    assert a.metadata.name != b.metadata.name
    assert core.read_namespaced_config_map(a.metadata.name, ns).data == {"k": "v"}


def test_labels_and_annotations_are_stored(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(
        ns,
        configmap(
            name,
            labels={"app.kubernetes.io/name": "demo", "tier": "web"},
            annotations={"example.com/note": "a longer value, with punctuation!"},
        ),
    )
    got = core.read_namespaced_config_map(name, ns)
    assert got.metadata.labels == {"app.kubernetes.io/name": "demo", "tier": "web"}
    assert got.metadata.annotations == {"example.com/note": "a longer value, with punctuation!"}


def test_create_in_missing_namespace_is_not_found(core: client.CoreV1Api) -> None:
    missing = unique("missing")
    with raises_status(404, "NotFound") as status:
        core.create_namespaced_config_map(missing, configmap(unique("cm")))
    assert status["details"]["name"] == missing
    assert status["details"]["kind"] == "namespaces"


def test_owner_references_name_their_owner_and_one_at_most_controls(
    core: client.CoreV1Api, ns: str
) -> None:
    """apimachinery's ``ValidateOwnerReferences`` (1.27-1.33): an empty part of a reference
    is invalid at the list's path; a second controller reference is refused, a controller
    that adopts an object another one controls meets this on a cluster."""
    name = unique("cm")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": ""}
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap(name, ownerReferences=[ref]))
    assert status["message"] == (
        f'ConfigMap "{name}" is invalid: metadata.ownerReferences.uid: Invalid value: "": '
        "uid must not be empty"
    )
    first = {**ref, "uid": "6e5a0c1e-0000-4000-8000-000000000001", "controller": True}
    second = {**first, "name": "other", "uid": "6e5a0c1e-0000-4000-8000-000000000002"}
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap(name, ownerReferences=[first, second]))
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("metadata.ownerReferences", "FieldValueInvalid")
    ]
    # the list is shown as Go's %#v shows it, its pointers' addresses differing run to run
    assert status["message"].startswith(
        f'ConfigMap "{name}" is invalid: metadata.ownerReferences: Invalid value: '
        '[]v1.OwnerReference{v1.OwnerReference{APIVersion:"v1", Kind:"ConfigMap", '
        'Name:"owner", UID:"6e5a0c1e-0000-4000-8000-000000000001", Controller:(*bool)(0x'
    )
    assert status["message"].endswith(
        ': Only one reference can have Controller set to true. Found "true" in references '
        "for ConfigMap/owner and ConfigMap/other"
    )
    second["controller"] = False
    core.create_namespaced_config_map(ns, configmap(name, ownerReferences=[first, second]))
