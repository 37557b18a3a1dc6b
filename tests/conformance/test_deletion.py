"""Deletion: finalizers, garbage collection through ownerReferences, namespaces, collections."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from ._support import (
    configmap,
    data_and_code,
    gone,
    raises_status,
    raw,
    unique,
    user_names,
    wait_for,
    watch_events,
    widget,
)

pytestmark = pytest.mark.timeout(60)

FINALIZER = "conformance.mcruntime.io/hold"


def owned_by(owner: Any, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        **extra,
    }


def test_delete_with_finalizer_marks_deletion_and_keeps_object(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, finalizers=[FINALIZER]))
    _, code = data_and_code(core.delete_namespaced_config_map_with_http_info(name, ns))
    assert code in (200, 202)
    held = core.read_namespaced_config_map(name, ns)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == [FINALIZER]
    again = core.delete_namespaced_config_map(name, ns)
    assert again is not None
    assert core.read_namespaced_config_map(name, ns).metadata.deletion_timestamp == (
        held.metadata.deletion_timestamp
    )

    core.patch_namespaced_config_map(name, ns, {"metadata": {"finalizers": None}})
    wait_for(gone(lambda: core.read_namespaced_config_map(name, ns)), 10, what="finalized object")


def test_a_finalizer_that_is_not_a_qualified_name_is_refused(
    core: client.CoreV1Api, ns: str
) -> None:
    # apimachinery's ValidateFinalizerName: each finalizer is a qualified name
    name = unique("cm")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_config_map(ns, configmap(name, finalizers=["my cleanup"]))
    (cause,) = status["details"]["causes"]
    assert cause["field"] == "metadata.finalizers"
    assert cause["message"].startswith('Invalid value: "my cleanup": name part must consist of')
    core.create_namespaced_config_map(ns, configmap(name, finalizers=[FINALIZER]))
    with raises_status(422, "Invalid"):
        core.patch_namespaced_config_map(
            name, ns, {"metadata": {"finalizers": [FINALIZER, "Example.com/x"]}}
        )
    # and the garbage collector's two finalizers say opposite things (ValidateFinalizers)
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_config_map(
            name,
            ns,
            {"metadata": {"finalizers": ["orphan", "foregroundDeletion"]}},
            _content_type="application/merge-patch+json",
        )
    (cause,) = status["details"]["causes"]
    assert cause["message"] == (
        'Invalid value: ["orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion '
        "cannot be both set"
    )
    core.patch_namespaced_config_map(
        name, ns, {"metadata": {"finalizers": []}}, _content_type="application/merge-patch+json"
    )
    core.delete_namespaced_config_map(name, ns)


def test_no_new_finalizers_once_deleting(core: client.CoreV1Api, ns: str) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, finalizers=[FINALIZER]))
    core.delete_namespaced_config_map(name, ns)
    with raises_status(422, "Invalid"):
        core.patch_namespaced_config_map(
            name,
            ns,
            {"metadata": {"finalizers": [FINALIZER, "conformance.mcruntime.io/late"]}},
        )
    other_changes = core.patch_namespaced_config_map(name, ns, {"data": {"still": "writable"}})
    assert other_changes.data["still"] == "writable"
    core.patch_namespaced_config_map(
        name, ns, {"metadata": {"finalizers": []}}, _content_type="application/merge-patch+json"
    )
    wait_for(gone(lambda: core.read_namespaced_config_map(name, ns)), 10, what="finalized object")


def test_deleting_owner_deletes_dependents(core: client.CoreV1Api, ns: str) -> None:
    owner = core.create_namespaced_config_map(ns, configmap(unique("owner")))
    dependents = [unique("dep") for _ in range(2)]
    for dep in dependents:
        core.create_namespaced_config_map(ns, configmap(dep, ownerReferences=[owned_by(owner)]))
    bystander = core.create_namespaced_config_map(ns, configmap(unique("free"))).metadata.name
    core.delete_namespaced_config_map(owner.metadata.name, ns)
    for dep in dependents:
        wait_for(
            gone(lambda dep=dep: core.read_namespaced_config_map(dep, ns)),
            30,
            f"dependent {dep} collected",
            interval=0.05,
        )
    assert core.read_namespaced_config_map(bystander, ns).metadata.name == bystander


def test_dependent_with_several_owners_survives_until_last_owner_goes(
    core: client.CoreV1Api, ns: str
) -> None:
    first = core.create_namespaced_config_map(ns, configmap(unique("owner")))
    second = core.create_namespaced_config_map(ns, configmap(unique("owner")))
    dep = unique("dep")
    core.create_namespaced_config_map(
        ns, configmap(dep, ownerReferences=[owned_by(first), owned_by(second)])
    )
    core.delete_namespaced_config_map(first.metadata.name, ns)
    wait_for(
        lambda: (
            [r.uid for r in core.read_namespaced_config_map(dep, ns).metadata.owner_references]
            == [second.metadata.uid]
        ),
        30,
        "reference to the deleted owner dropped",
        interval=0.05,
    )
    core.delete_namespaced_config_map(second.metadata.name, ns)
    wait_for(
        gone(lambda: core.read_namespaced_config_map(dep, ns)),
        30,
        "dependent collected",
        interval=0.05,
    )


def test_orphan_propagation_keeps_dependents_and_removes_owner_reference(
    core: client.CoreV1Api, ns: str
) -> None:
    owner = core.create_namespaced_config_map(ns, configmap(unique("owner")))
    dep = unique("dep")
    core.create_namespaced_config_map(ns, configmap(dep, ownerReferences=[owned_by(owner)]))
    core.delete_namespaced_config_map(owner.metadata.name, ns, propagation_policy="Orphan")
    wait_for(
        gone(lambda: core.read_namespaced_config_map(owner.metadata.name, ns)),
        30,
        "owner deleted",
        interval=0.05,
    )
    orphan = wait_for(
        lambda: (
            (o := core.read_namespaced_config_map(dep, ns)).metadata.owner_references is None and o
        ),
        30,
        "ownerReference removed",
        interval=0.05,
    )
    assert orphan.metadata.deletion_timestamp is None


def test_foreground_propagation_deletes_dependents_before_owner(
    core: client.CoreV1Api, ns: str
) -> None:
    owner = core.create_namespaced_config_map(ns, configmap(unique("owner")))
    dep = unique("dep")
    core.create_namespaced_config_map(
        ns,
        configmap(
            dep,
            ownerReferences=[owned_by(owner, blockOwnerDeletion=True)],
            finalizers=[FINALIZER],
        ),
    )
    core.delete_namespaced_config_map(owner.metadata.name, ns, propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map(owner.metadata.name, ns)
    assert waiting.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in waiting.metadata.finalizers
    wait_for(
        lambda: core.read_namespaced_config_map(dep, ns).metadata.deletion_timestamp,
        30,
        "dependent marked for deletion",
        interval=0.05,
    )
    assert core.read_namespaced_config_map(owner.metadata.name, ns).metadata.name
    core.patch_namespaced_config_map(dep, ns, {"metadata": {"finalizers": None}})
    wait_for(
        gone(lambda: core.read_namespaced_config_map(owner.metadata.name, ns)),
        30,
        "owner deleted after its dependent",
        interval=0.05,
    )


def test_owner_in_another_kind_collects_custom_resource_dependents(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    widget_crds: dict[str, str],
    ns: str,
) -> None:
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    owner = core.create_namespaced_config_map(ns, configmap(unique("owner")))
    name = unique("w")
    custom.create_namespaced_custom_object(
        g, v, ns, plural, widget(name, ownerReferences=[owned_by(owner)])
    )
    core.delete_namespaced_config_map(owner.metadata.name, ns)
    wait_for(
        gone(lambda: custom.get_namespaced_custom_object(g, v, ns, plural, name)),
        30,
        "custom dependent collected",
        interval=0.05,
    )


def test_deleting_namespace_removes_everything_in_it(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    widget_crds: dict[str, str],
) -> None:
    g, v, plural = widget_crds["group"], widget_crds["version"], widget_crds["widgets"]
    doomed = core.create_namespace({"metadata": {"name": unique("doomed")}}).metadata.name
    core.create_namespaced_config_map(doomed, configmap("cm"))
    core.create_namespaced_secret(doomed, {"metadata": {"name": "s"}})
    custom.create_namespaced_custom_object(g, v, doomed, plural, widget("w"))
    core.delete_namespace(doomed)
    wait_for(
        gone(lambda: core.read_namespace(doomed)), 60, f"namespace {doomed} removed", interval=0.1
    )
    with raises_status(404, "NotFound"):
        core.read_namespaced_config_map("cm", doomed)
    with raises_status(404, "NotFound"):
        custom.get_namespaced_custom_object(g, v, doomed, plural, "w")
    core.create_namespace({"metadata": {"name": doomed}})
    try:
        assert user_names(core.list_namespaced_config_map(doomed).items) == []
        assert custom.list_namespaced_custom_object(g, v, doomed, plural)["items"] == []
        assert "s" not in user_names(core.list_namespaced_secret(doomed).items)
    finally:
        core.delete_namespace(doomed)


def test_delete_collection_deletes_only_matching_objects(core: client.CoreV1Api, ns: str) -> None:
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map(ns, configmap(name, labels={"team": team}))
    core.delete_collection_namespaced_config_map(ns, label_selector="team=x")
    wait_for(
        lambda: (
            sorted(
                i.metadata.name
                for i in core.list_namespaced_config_map(ns).items
                if i.metadata.name in ("a", "b", "c")
            )
            == ["c"]
        ),
        10,
        what="only c left",
    )


def test_delete_with_finalizer_answers_with_the_marked_object(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    core.create_namespaced_config_map(ns, configmap(name, finalizers=[FINALIZER]))
    resp = raw(api, "DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}")
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "ConfigMap"
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["finalizers"] == [FINALIZER]
    core.patch_namespaced_config_map(name, ns, {"metadata": {"finalizers": None}})


def test_watch_sees_the_deletion_mark_then_the_object_deleted_as_last_stored(
    core: client.CoreV1Api, ns: str
) -> None:
    name = unique("cm")
    start = core.create_namespaced_config_map(
        ns, configmap(name, finalizers=[FINALIZER])
    ).metadata.resource_version
    core.delete_namespaced_config_map(name, ns)
    core.patch_namespaced_config_map(name, ns, {"metadata": {"finalizers": None}})
    events = watch_events(
        core.list_namespaced_config_map,
        ns,
        resource_version=start,
        field_selector=f"metadata.name={name}",
        until=lambda ev: any(e["type"] == "DELETED" for e in ev),
        timeout=10,
    )
    events = [e for e in events if e["type"] != "BOOKMARK"]
    # the update that empties the finalizers is never stored: kube-apiserver deletes instead
    # (the registry's deleteWithoutFinalizers), so no MODIFIED comes between the mark and the
    # DELETED, whose object is the one last stored, its finalizer still listed
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    marked, deleted = (e["raw_object"]["metadata"] for e in events)
    assert marked["deletionTimestamp"] and marked["finalizers"] == [FINALIZER]
    assert deleted["deletionTimestamp"] == marked["deletionTimestamp"]
    assert deleted["finalizers"] == [FINALIZER]
    assert int(deleted["resourceVersion"]) > int(marked["resourceVersion"])


def test_terminating_namespace_rejects_new_objects_until_content_is_finalized(
    core: client.CoreV1Api,
) -> None:
    held = core.create_namespace({"metadata": {"name": unique("held")}}).metadata.name
    core.create_namespaced_config_map(held, configmap("blocker", finalizers=[FINALIZER]))
    core.delete_namespace(held)
    terminating = wait_for(
        lambda: (n := core.read_namespace(held)).status.phase == "Terminating" and n,
        30,
        f"namespace {held} terminating",
        interval=0.05,
    )
    assert terminating.metadata.deletion_timestamp is not None
    wait_for(
        lambda: core.read_namespaced_config_map("blocker", held).metadata.deletion_timestamp,
        30,
        "content marked for deletion",
        interval=0.05,
    )
    with raises_status(403, "Forbidden") as status:
        core.create_namespaced_config_map(held, configmap("late"))
    assert status["message"] == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {held} '
        "because it is being terminated"
    )
    # the cause client-go's recorder and controllers test for (errors.HasStatusCause(err,
    # v1.NamespaceTerminatingCause)), set by the NamespaceLifecycle admission plugin
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {held} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    assert core.read_namespace(held).metadata.name == held
    core.patch_namespaced_config_map("blocker", held, {"metadata": {"finalizers": None}})
    wait_for(gone(lambda: core.read_namespace(held)), 60, f"namespace {held} removed", interval=0.1)


def test_a_namespace_held_by_finalized_content_says_what_holds_it(
    core: client.CoreV1Api,
) -> None:
    # kube-controller-manager's namespace deleter writes these conditions: what
    # `kubectl get ns -o yaml` shows of a namespace stuck in Terminating
    held = core.create_namespace({"metadata": {"name": unique("stuck")}}).metadata.name
    for name in ("a", "b"):
        core.create_namespaced_config_map(held, configmap(name, finalizers=[FINALIZER]))
    core.delete_namespace(held)

    def conditions() -> dict[str, tuple[str, str, str]] | None:
        found = core.read_namespace(held).status.conditions or []
        by_type = {c.type: (c.status, c.reason, c.message) for c in found}
        return by_type if by_type.get("NamespaceContentRemaining", ("",))[0] == "True" else None

    found = wait_for(conditions, 30, f"namespace {held} conditions", interval=0.05)
    assert found == {
        "NamespaceDeletionDiscoveryFailure": (
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        "NamespaceDeletionGroupVersionParsingFailure": (
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        "NamespaceDeletionContentFailure": (
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        "NamespaceContentRemaining": (
            "True",
            "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 2 resource instances",
        ),
        "NamespaceFinalizersRemaining": (
            "True",
            "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {FINALIZER} in 2 "
            "resource instances",
        ),
    }
    for name in ("a", "b"):
        core.patch_namespaced_config_map(name, held, {"metadata": {"finalizers": None}})
    wait_for(gone(lambda: core.read_namespace(held)), 60, f"namespace {held} removed", interval=0.1)


def _pod_on_a_node(core: client.CoreV1Api, ns: str, grace: int | None = None) -> Any:
    spec: dict[str, Any] = {
        "nodeName": "conformance-nowhere",  # no kubelet will confirm its deletion
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
    }
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return core.create_namespaced_pod(ns, {"metadata": {"name": unique("pod")}, "spec": spec})


def _first_event_after(core: client.CoreV1Api, ns: str, pod: Any) -> dict[str, Any]:
    events = watch_events(
        core.list_namespaced_pod,
        ns,
        resource_version=pod.metadata.resource_version,
        field_selector=f"metadata.name={pod.metadata.name}",
        until=lambda ev: any(e["type"] != "BOOKMARK" for e in ev),
        timeout=10,
    )
    return next(e for e in events if e["type"] != "BOOKMARK")


def _force_delete(core: client.CoreV1Api, ns: str, name: str) -> None:
    # a cluster's pod stays Terminating without a kubelet: what `kubectl delete --force` does
    try:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    except client.ApiException as e:
        if e.status != 404:
            raise


def test_a_pod_on_a_node_is_deleted_gracefully(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # the pod strategy grants a pod on a node its terminationGracePeriodSeconds (or the
    # request's gracePeriodSeconds) and waits for its kubelet to confirm
    for grace, asked in ((45, None), (30, 7)):
        pod = _pod_on_a_node(core, ns, grace)
        name = pod.metadata.name
        query = {} if asked is None else {"gracePeriodSeconds": str(asked)}
        answer = raw(api, "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", query=query)
        assert answer.status == 200, answer.data
        expected = grace if asked is None else asked
        assert answer.json()["metadata"]["deletionGracePeriodSeconds"] == expected
        assert answer.json()["metadata"]["deletionTimestamp"]
        first = _first_event_after(core, ns, pod)
        assert first["type"] == "MODIFIED"
        assert first["raw_object"]["metadata"]["deletionGracePeriodSeconds"] == expected
        _force_delete(core, ns, name)


def test_a_pod_on_no_node_or_forced_is_deleted_at_once(core: client.CoreV1Api, ns: str) -> None:
    unscheduled = core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": unique("pod")},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
        },
    )
    core.delete_namespaced_pod(unscheduled.metadata.name, ns)
    assert _first_event_after(core, ns, unscheduled)["type"] == "DELETED"
    forced = _pod_on_a_node(core, ns)
    core.delete_namespaced_pod(forced.metadata.name, ns, grace_period_seconds=0)
    assert _first_event_after(core, ns, forced)["type"] == "DELETED"


def test_delete_collection_of_a_cluster_scoped_kind(api: ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    batch = unique("batch")
    names = {unique("cr"): batch, unique("cr"): batch, unique("cr"): "other"}
    for name, value in names.items():
        rbac.create_cluster_role(
            client.V1ClusterRole(metadata=client.V1ObjectMeta(name=name, labels={"batch": value}))
        )
    try:
        rbac.delete_collection_cluster_role(label_selector=f"batch={batch}")

        def left() -> set[str]:
            return {r.metadata.name for r in rbac.list_cluster_role().items} & set(names)

        kept = {n for n, v in names.items() if v == "other"}
        wait_for(lambda: left() == kept, 10, what="only the unlabelled batch left")
    finally:
        for name in names:
            try:
                rbac.delete_cluster_role(name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def test_namespaces_cannot_be_deleted_as_a_collection(api: ApiClient) -> None:
    body = raw(api, "GET", "/api/v1").json()
    verbs = next(r["verbs"] for r in body["resources"] if r["name"] == "namespaces")
    assert "deletecollection" not in verbs and "delete" in verbs
    resp = raw(api, "DELETE", "/api/v1/namespaces", query=[("labelSelector", "no-such=label")])
    assert resp.status == 405, resp.data


def _delete_configmap(api: ApiClient, ns: str, name: str, options: dict[str, Any]) -> Any:
    """DELETE with ``options`` as the DeleteOptions body, the response unparsed."""
    path = f"/api/v1/namespaces/{ns}/configmaps/{name}"
    return raw(api, "DELETE", path, body=options, content_type="application/json")


def test_a_dry_run_delete_in_delete_options_deletes_nothing(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("dry")
    core.create_namespaced_config_map(ns, configmap(name))
    # kubectl delete --dry-run=server sends dryRun in the DeleteOptions body, not the query
    resp = _delete_configmap(api, ns, name, {"propagationPolicy": "Background", "dryRun": ["All"]})
    assert resp.status == 200, resp.data
    assert core.read_namespaced_config_map(name, ns).metadata.name == name


def test_a_dry_run_delete_collection_deletes_nothing(core: client.CoreV1Api, ns: str) -> None:
    names = [unique("dry"), unique("dry")]
    for name in names:
        core.create_namespaced_config_map(ns, configmap(name, labels={"dry": "run"}))
    core.delete_collection_namespaced_config_map(ns, label_selector="dry=run", dry_run="All")
    left = core.list_namespaced_config_map(ns, label_selector="dry=run").items
    assert sorted(i.metadata.name for i in left) == sorted(names)


def test_a_dry_run_value_other_than_all_is_refused(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    name = unique("dry")
    core.create_namespaced_config_map(ns, configmap(name))
    resp = _delete_configmap(api, ns, name, {"dryRun": ["Some"]})
    assert resp.status == 400, resp.data
    assert core.read_namespaced_config_map(name, ns).metadata.name == name


def test_kinds_whose_registry_returns_the_deleted_object_answer_with_it(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """A delete answers with a Status, except for the kinds whose storage returns the deleted
    object: the typed client decodes their answer as the kind (a Status would not decode)."""
    name = unique("del")
    meta = {"metadata": {"name": name}}
    storage = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    for create, delete, body in (
        (
            core.create_namespaced_resource_quota,
            core.delete_namespaced_resource_quota,
            {**meta, "spec": {"hard": {"pods": "10"}}},
        ),
        (core.create_namespaced_service_account, core.delete_namespaced_service_account, meta),
        (
            core.create_namespaced_persistent_volume_claim,
            core.delete_namespaced_persistent_volume_claim,
            {**meta, "spec": storage},
        ),
    ):
        create(ns, body)
        assert delete(name, ns).metadata.name == name, delete.__name__
    classes = client.StorageV1Api(api)
    classes.create_storage_class({**meta, "provisioner": "conformance.mcruntime.io/none"})
    assert classes.delete_storage_class(name).provisioner == "conformance.mcruntime.io/none"
    core.create_namespaced_config_map(ns, configmap(name))
    answer = raw(api, "DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}").json()
    assert (answer["kind"], answer["status"]) == ("Status", "Success")


def _finalize(core: client.CoreV1Api, name: str, finalizers: list[str]) -> Any:
    """PUT ``/api/v1/namespaces/{name}/finalize``: what sets a namespace's spec.finalizers."""
    body = core.read_namespace(name)
    body.spec.finalizers = finalizers
    return core.replace_namespace_finalize(name, body)


def test_a_namespaces_spec_finalizers_change_through_finalize_only(
    core: client.CoreV1Api,
) -> None:
    made = core.create_namespace(
        {"metadata": {"name": unique("fin")}, "spec": {"finalizers": [FINALIZER]}}
    )
    name = made.metadata.name
    try:
        # the create strategy adds the namespace controller's own; an update keeps them all
        assert sorted(made.spec.finalizers) == sorted([FINALIZER, "kubernetes"])
        core.patch_namespace(name, {"spec": {"finalizers": []}})
        assert sorted(core.read_namespace(name).spec.finalizers) == [FINALIZER, "kubernetes"]
        assert _finalize(core, name, [FINALIZER]).spec.finalizers == [FINALIZER]
        _finalize(core, name, [FINALIZER, "kubernetes"])
        core.delete_namespace(name)
        # emptied, the controller drops "kubernetes" only: the other one holds it Terminating
        held = wait_for(
            lambda: (n := core.read_namespace(name)).spec.finalizers == [FINALIZER] and n,
            30,
            f"namespace {name} finalized by its controller",
            interval=0.05,
        )
        assert held.status.phase == "Terminating"
    finally:
        core.delete_namespace(name)
        _finalize(core, name, [])
    wait_for(gone(lambda: core.read_namespace(name)), 30, f"namespace {name} removed")


def test_finalize_removes_a_stuck_namespace_and_leaves_its_content(
    core: client.CoreV1Api,
) -> None:
    # the way out of a namespace stuck in Terminating (what `kubectl replace --raw
    # /api/v1/namespaces/<ns>/finalize` does): it goes at once, its content stays behind
    stuck = core.create_namespace({"metadata": {"name": unique("stuck")}}).metadata.name
    core.create_namespaced_config_map(stuck, configmap("blocker", finalizers=[FINALIZER]))
    core.delete_namespace(stuck)
    wait_for(
        lambda: core.read_namespaced_config_map("blocker", stuck).metadata.deletion_timestamp,
        30,
        "content marked for deletion",
        interval=0.05,
    )
    _finalize(core, stuck, [])
    wait_for(gone(lambda: core.read_namespace(stuck)), 30, f"namespace {stuck} removed")
    left = core.read_namespaced_config_map("blocker", stuck)
    assert left.metadata.finalizers == [FINALIZER]
    core.patch_namespaced_config_map("blocker", stuck, {"metadata": {"finalizers": None}})
    wait_for(gone(lambda: core.read_namespaced_config_map("blocker", stuck)), 30, "blocker gone")
