"""Fields an update may not change: immutable ConfigMaps and Secrets, a Secret's type,
the selector of a Deployment, ReplicaSet or DaemonSet, most of a StatefulSet's spec."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import raises_status, unique

pytestmark = pytest.mark.timeout(60)

IMMUTABLE_SET = "field is immutable when `immutable` is set"


def causes(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def test_an_immutable_config_map_keeps_its_data_but_not_its_labels(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    body = {"metadata": {"name": name}, "data": {"a": "1"}, "immutable": True}
    core.create_namespaced_config_map(ns, body)
    with raises_status(422, "Invalid") as status:
        core.replace_namespaced_config_map(name, ns, {**body, "data": {"a": "2"}})
    assert status["message"] == f'ConfigMap "{name}" is invalid: data: Forbidden: {IMMUTABLE_SET}'
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_config_map(
            name, ns, {"immutable": False, "binaryData": {"b": "AA=="}}
        )
    assert causes(status) == [
        ("immutable", "FieldValueForbidden"),
        ("binaryData", "FieldValueForbidden"),
    ]
    labelled = core.patch_namespaced_config_map(name, ns, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.labels == {"x": "y"}
    assert labelled.data == {"a": "1"}


def test_a_secret_keeps_its_type_and_when_immutable_its_data(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("secret")
    core.create_namespaced_secret(
        ns, {"metadata": {"name": name}, "stringData": {"a": "1"}, "immutable": True}
    )
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_secret(name, ns, {"stringData": {"a": "2"}})
    assert status["message"] == f'Secret "{name}" is invalid: data: Forbidden: {IMMUTABLE_SET}'
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_secret(name, ns, {"type": "kubernetes.io/basic-auth"})
    # ValidateSecretUpdate goes on with ValidateSecret: a basic-auth Secret needs a
    # username or a password
    assert status["message"] == (
        f'Secret "{name}" is invalid: [type: Invalid value: "kubernetes.io/basic-auth": '
        "field is immutable, data[username]: Required value, data[password]: Required value]"
    )
    mutable = unique("secret")
    core.create_namespaced_secret(ns, {"metadata": {"name": mutable}, "stringData": {"a": "1"}})
    changed = core.patch_namespaced_secret(mutable, ns, {"stringData": {"a": "2"}})
    assert changed.data == {"a": "Mg=="}


def workload(name: str, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "tier": "web"}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
            },
            **spec,
        },
    }


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "DaemonSet"])
def test_a_workload_s_selector_is_immutable(
    api: ApiClient, apps: client.AppsV1Api, ns: str, kind: str
) -> None:
    name = unique(kind.lower())
    plural = {"Deployment": "deployment", "ReplicaSet": "replica_set", "DaemonSet": "daemon_set"}[
        kind
    ]
    getattr(apps, f"create_namespaced_{plural}")(ns, workload(name))
    patch = getattr(apps, f"patch_namespaced_{plural}")
    selector = {"spec": {"selector": {"matchLabels": {"app": name, "tier": "web"}}}}
    with raises_status(422, "Invalid") as status:
        patch(name, ns, selector)
    assert status["message"] == (
        f'{kind}.apps "{name}" is invalid: spec.selector: Invalid value: '
        'v1.LabelSelector{MatchLabels:map[string]string{"app":"' + name + '", "tier":"web"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
    )
    assert causes(status) == [("spec.selector", "FieldValueInvalid")]
    # the template may change
    template = {"spec": {"template": {"metadata": {"labels": {"app": name, "tier": "api"}}}}}
    changed = patch(name, ns, template)
    assert changed.spec.template.metadata.labels == {"app": name, "tier": "api"}


def test_a_stateful_set_changes_only_its_updatable_fields(apps: client.AppsV1Api, ns: str) -> None:
    name = unique("sts")
    apps.create_namespaced_stateful_set(ns, workload(name, serviceName=name))
    changed = apps.patch_namespaced_stateful_set(
        name, ns, {"spec": {"replicas": 3, "minReadySeconds": 5, "revisionHistoryLimit": 3}}
    )
    assert (changed.spec.replicas, changed.spec.min_ready_seconds) == (3, 5)
    for patch in (
        {"spec": {"serviceName": "other"}},
        {"spec": {"podManagementPolicy": "Parallel"}},
        {
            "spec": {
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ]
            }
        },
    ):
        with raises_status(422, "Invalid") as status:
            apps.patch_namespaced_stateful_set(name, ns, patch)
        assert status["message"] == (
            f'StatefulSet.apps "{name}" is invalid: spec: Forbidden: updates to statefulset '
            "spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
            "'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
            "'minReadySeconds' are forbidden"
        ), patch


def claim(name: str) -> dict[str, Any]:
    """An unbound claim of 1Gi in a class no provisioner serves."""
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "conformance-none",
        },
    }


def test_a_claim_s_spec_is_fixed_but_for_its_volume_and_class(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("pvc")
    core.create_namespaced_persistent_volume_claim(ns, claim(name))
    for patch in (
        {"spec": {"accessModes": ["ReadWriteMany"]}},
        {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},  # not bound: not even this
    ):
        with raises_status(422, "Invalid") as status:
            core.patch_namespaced_persistent_volume_claim(name, ns, patch)
        assert status["message"] == (
            f'PersistentVolumeClaim "{name}" is invalid: spec: Forbidden: spec is immutable '
            "after creation except resources.requests for bound claims"
        ), patch
    bound = core.patch_namespaced_persistent_volume_claim(
        name, ns, {"spec": {"volumeName": "conformance-pv"}}
    )
    assert bound.spec.volume_name == "conformance-pv"


def test_a_bound_claim_may_ask_for_more_storage_but_never_less(
    core: client.CoreV1Api, ns: str
) -> None:
    """The classic refusal of a chart or operator that shrinks a volume."""
    name = unique("pvc")
    core.create_namespaced_persistent_volume_claim(ns, claim(name))
    # what the volume controller writes once it bound the claim
    core.patch_namespaced_persistent_volume_claim_status(
        name, ns, {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}}
    )
    grown = core.patch_namespaced_persistent_volume_claim(
        name, ns, {"spec": {"resources": {"requests": {"storage": "1536Mi"}}}}
    )
    assert grown.spec.resources.requests["storage"] == "1536Mi"
    for smaller in ("1Gi", "1500Mi", "1e9"):
        with raises_status(422, "Invalid") as status:
            core.patch_namespaced_persistent_volume_claim(
                name, ns, {"spec": {"resources": {"requests": {"storage": smaller}}}}
            )
        assert status["message"] == (
            f'PersistentVolumeClaim "{name}" is invalid: spec.resources.requests.storage: '
            "Forbidden: field can not be less than previous value"
        ), smaller
        assert causes(status) == [("spec.resources.requests.storage", "FieldValueForbidden")]
    # the same size in other words is no change of size: accepted
    core.patch_namespaced_persistent_volume_claim(
        name, ns, {"spec": {"resources": {"requests": {"storage": "1.5Gi"}}}}
    )
