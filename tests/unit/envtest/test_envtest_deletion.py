"""Finalizers, garbage collection by ownerReferences, and namespace deletion."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from mcruntime.envtest import wait_for

pytestmark = pytest.mark.timeout(30)


def _cm(core: client.CoreV1Api, name: str, ns: str = "default", **meta: Any) -> client.V1ConfigMap:
    return core.create_namespaced_config_map(ns, {"metadata": {"name": name, **meta}})


def _owned_by(owner: client.V1ConfigMap) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner.metadata.name,
            "uid": owner.metadata.uid,
        }
    ]


def _exists(core: client.CoreV1Api, name: str, ns: str = "default") -> bool:
    try:
        core.read_namespaced_config_map(name, ns)
    except client.ApiException as e:
        assert e.status == 404
        return False
    return True


def test_finalizer_holds_object_until_removed(core: client.CoreV1Api) -> None:
    _cm(core, "held", finalizers=["example.com/hold"])
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    with pytest.raises(client.ApiException) as e:
        core.patch_namespaced_config_map(
            "held", "default", {"metadata": {"finalizers": ["example.com/hold", "new/one"]}}
        )
    assert e.value.status == 422
    core.delete_namespaced_config_map("held", "default")
    assert _exists(core, "held")
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    assert not _exists(core, "held")


def test_dependents_are_collected_with_their_owner(core: client.CoreV1Api) -> None:
    owner = _cm(core, "owner")
    _cm(core, "child", ownerReferences=_owned_by(owner))
    grandchild_owner = core.read_namespaced_config_map("child", "default")
    _cm(core, "grandchild", ownerReferences=_owned_by(grandchild_owner))
    other = _cm(core, "other-owner")
    _cm(core, "shared", ownerReferences=_owned_by(owner) + _owned_by(other))
    core.delete_namespaced_config_map("owner", "default")
    assert not _exists(core, "child") and not _exists(core, "grandchild")
    shared = core.read_namespaced_config_map("shared", "default")
    assert [r.name for r in shared.metadata.owner_references] == ["other-owner"]


def test_orphan_policy_keeps_dependents_without_the_reference(core: client.CoreV1Api) -> None:
    owner = _cm(core, "parent")
    _cm(core, "orphan", ownerReferences=_owned_by(owner))
    core.delete_namespaced_config_map("parent", "default", propagation_policy="Orphan")
    assert not _exists(core, "parent")
    assert core.read_namespaced_config_map("orphan", "default").metadata.owner_references is None


def test_foreground_waits_for_dependents(core: client.CoreV1Api) -> None:
    owner = _cm(core, "fg")
    _cm(core, "fg-child", ownerReferences=_owned_by(owner), finalizers=["example.com/hold"])
    core.delete_namespaced_config_map("fg", "default", propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("fg", "default")
    assert "foregroundDeletion" in waiting.metadata.finalizers
    assert core.read_namespaced_config_map("fg-child", "default").metadata.deletion_timestamp
    core.patch_namespaced_config_map("fg-child", "default", {"metadata": {"finalizers": None}})
    assert not _exists(core, "fg-child") and not _exists(core, "fg")


def test_namespace_deletion_empties_then_removes_it(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    _cm(core, "plain", "doomed")
    _cm(core, "blocker", "doomed", finalizers=["example.com/hold"])
    core.delete_namespace("doomed")
    ns = core.read_namespace("doomed")
    assert ns.status.phase == "Terminating" and ns.metadata.deletion_timestamp
    assert not _exists(core, "plain", "doomed")
    with pytest.raises(client.ApiException) as e:
        _cm(core, "late", "doomed")
    assert e.value.status == 403
    core.patch_namespaced_config_map("blocker", "doomed", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as e:
        core.read_namespace("doomed")
    assert e.value.status == 404


def test_initial_namespaces_cannot_be_deleted(core: client.CoreV1Api) -> None:
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names
    assert core.read_namespace("default").metadata.labels == {
        "kubernetes.io/metadata.name": "default"
    }
    with pytest.raises(client.ApiException) as e:
        core.delete_namespace("default")
    assert e.value.status == 403


def test_delete_preconditions(core: client.CoreV1Api) -> None:
    cm = _cm(core, "pre")
    with pytest.raises(client.ApiException) as e:
        core.delete_namespaced_config_map("pre", "default", body={"preconditions": {"uid": "nope"}})
    assert e.value.status == 409
    core.delete_namespaced_config_map(
        "pre", "default", body={"preconditions": {"uid": cm.metadata.uid}}
    )
    assert not _exists(core, "pre")


def test_dependent_of_an_absent_owner_is_collected(core: client.CoreV1Api) -> None:
    ghost = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "no-such-uid"}]
    _cm(core, "stray", ownerReferences=ghost)
    wait_for(
        lambda: not _exists(core, "stray"),
        timeout=5,
        what="the dependent of a missing owner to be collected",
    )


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_marking_for_deletion_bumps_the_generation_once(
    core: client.CoreV1Api, policy: str
) -> None:
    # as markAsDeleting does: GenerationChangedPredicate lets the deletion through to finalizers
    apps = client.AppsV1Api(core.api_client)
    labels = {"app": f"gen-{policy.lower()}"}
    body = {
        "metadata": {"name": f"gen-{policy.lower()}", "finalizers": ["example.com/hold"]},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    dep = apps.create_namespaced_deployment("default", body)
    assert dep.metadata.generation == 1
    name = dep.metadata.name
    apps.delete_namespaced_deployment(name, "default", propagation_policy=policy)
    assert apps.read_namespaced_deployment(name, "default").metadata.generation == 2
    apps.delete_namespaced_deployment(name, "default")  # already being deleted: no bump
    assert apps.read_namespaced_deployment(name, "default").metadata.generation == 2
    held = _cm(core, f"gen-cm-{policy.lower()}", finalizers=["example.com/hold"])
    assert held.metadata.generation is None  # a kind without a generation gets none
    core.delete_namespaced_config_map(held.metadata.name, "default")
    assert (
        core.read_namespaced_config_map(held.metadata.name, "default").metadata.generation is None
    )
