"""Write options of the Client against an embedded API server: dry runs, field managers,
deleting a collection and subresources (scale, token), sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client import AuthenticationV1TokenRequest, V1Scale, V1TokenRequestSpec

from mcruntime.client import AsyncClient, Client, retry_counts
from mcruntime.errors import Conflict, NotFound, TooManyRequests

pytestmark = pytest.mark.timeout(60)

CM = "v1/ConfigMap"
DEPLOY = "apps/v1/Deployment"


def _cm(ns: str, name: str, data: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": data or {},
    }


def _deployment(ns: str, name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }


def _managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["manager"], m["operation"]) for m in obj["metadata"].get("managedFields") or []]


def test_dry_runs_answer_with_the_result_and_store_nothing(client: Client, ns: str) -> None:
    made = client.create(_cm(ns, "dry", {"a": "1"}), dry_run=True)
    assert made["data"] == {"a": "1"} and made["metadata"]["creationTimestamp"]
    with pytest.raises(NotFound):
        client.get(CM, "dry", ns)
    assert client.apply(_cm(ns, "dry"), field_manager="t", dry_run=True)["metadata"]["name"]
    with pytest.raises(NotFound):
        client.get(CM, "dry", ns)

    stored = client.create(_cm(ns, "kept", {"a": "1"}))
    stored["data"] = {"a": "2"}
    assert client.update(stored, dry_run=True)["data"] == {"a": "2"}
    assert client.patch(CM, "kept", {"data": {"a": "3"}}, ns, dry_run=True)["data"] == {"a": "3"}
    client.delete(CM, "kept", ns, dry_run=True)
    client.delete_all_of(CM, ns, dry_run=True)
    after = client.get(CM, "kept", ns)
    assert after["data"] == {"a": "1"}
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_writes_record_the_field_manager_asked_or_the_clients_own(client: Client, ns: str) -> None:
    made = client.create(_cm(ns, "owned", {"a": "1"}), field_manager="installer")
    assert _managers(made) == [("installer", "Update")]

    mine = client.with_field_manager("my-operator")
    assert mine.field_manager == "my-operator" and client.field_manager is None
    assert mine.rest is client.rest and mine.reader is client.reader
    patched = mine.patch(CM, "owned", {"data": {"b": "2"}}, ns)
    assert ("my-operator", "Update") in _managers(patched)
    # a call's own field_manager wins over the client's
    patched = mine.patch(CM, "owned", {"data": {"c": "3"}}, ns, field_manager="one-off")
    assert ("one-off", "Update") in _managers(patched)
    # apply needs no field_manager= on a client that has one
    applied = mine.apply(_cm(ns, "applied", {"x": "1"}))
    assert _managers(applied) == [("my-operator", "Apply")]
    with pytest.raises(ValueError, match="needs a field_manager"):
        client.apply(_cm(ns, "applied", {"x": "1"}))
    with pytest.raises(ValueError, match="non-empty"):
        client.with_field_manager("")


def test_delete_all_of_deletes_what_the_selectors_match(client: Client, ns: str) -> None:
    for name, app in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        client.create(_cm(ns, name, app=app))
    client.delete_all_of(CM, ns, labels={"app": "a"})
    client.delete_all_of(CM, ns, fields={"metadata.name": "b2"})
    left = sorted(o["metadata"]["name"] for o in client.list(CM, ns, labels="app"))
    assert left == ["b1"]
    with pytest.raises(ValueError, match="namespaced"):
        client.delete_all_of(CM)


def test_the_scale_subresource_reads_patches_and_updates(client: Client, ns: str) -> None:
    client.create(_deployment(ns, "web", replicas=1))
    scale = client.subresource("scale")
    got = scale.get(DEPLOY, "web", ns)
    assert (got["apiVersion"], got["kind"], got["spec"]["replicas"]) == (
        "autoscaling/v1",
        "Scale",
        1,
    )

    patched = scale.patch(DEPLOY, "web", {"spec": {"replicas": 3}}, ns)
    assert patched["spec"]["replicas"] == 3
    assert client.get(DEPLOY, "web", ns)["spec"]["replicas"] == 3

    # an update is a PUT of a Scale: a typed body comes back typed, a stale one conflicts
    typed = V1Scale(metadata=got["metadata"], spec={"replicas": 5})
    with pytest.raises(Conflict):
        scale.update(DEPLOY, "web", typed, ns)
    fresh = scale.get(DEPLOY, "web", ns)
    updated = scale.update(
        DEPLOY, "web", V1Scale(metadata=fresh["metadata"], spec={"replicas": 5}), ns
    )
    assert isinstance(updated, V1Scale) and updated.spec.replicas == 5
    assert client.get(DEPLOY, "web", ns)["spec"]["replicas"] == 5
    assert (
        scale.patch(DEPLOY, "web", {"spec": {"replicas": 9}}, ns, dry_run=True)["spec"]["replicas"]
        == 9
    )
    assert client.get(DEPLOY, "web", ns)["spec"]["replicas"] == 5


def test_the_token_subresource_issues_a_token_for_a_service_account(
    client: Client, ns: str
) -> None:
    client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "builder", "namespace": ns},
        }
    )
    token = client.subresource("token")
    answer = token.create(
        "v1/ServiceAccount",
        "builder",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": ["ci"]},
        },
        ns,
    )
    assert answer["kind"] == "TokenRequest" and answer["status"]["token"]
    typed = token.create(
        "v1/ServiceAccount",
        "builder",
        AuthenticationV1TokenRequest(
            spec=V1TokenRequestSpec(audiences=["ci"], expiration_seconds=600)
        ),
        ns,
    )
    assert isinstance(typed, AuthenticationV1TokenRequest) and typed.status.token
    with pytest.raises(NotFound):
        token.create("v1/ServiceAccount", "nobody", answer, ns)


def _running_pod(client: Client, ns: str, name: str) -> None:
    client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "db"}},
            "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "pause"}]},
        }
    )
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    client.patch_status("v1/Pod", name, {"status": status}, ns)


def test_an_eviction_a_budget_forbids_raises_at_once_and_one_it_allows_deletes(
    client: Client, ns: str
) -> None:
    for name in ("db-0", "db-1"):
        _running_pod(client, ns, name)
    pdb = client.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        }
    )
    # what the disruption controller would write: one of the two pods may go
    status = {
        "observedGeneration": pdb["metadata"]["generation"],
        "disruptionsAllowed": 1,
        "currentHealthy": 2,
        "desiredHealthy": 1,
        "expectedPods": 2,
    }
    client.patch_status("policy/v1/PodDisruptionBudget", "db", {"status": status}, ns)
    evictions = client.subresource("eviction")

    def evict(name: str) -> Any:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
        return evictions.create("v1/Pod", name, body, ns, timeout=20)

    assert evict("db-0")["status"] == "Success"
    with pytest.raises(NotFound):
        client.get("v1/Pod", "db-0", ns)
    # the budget is spent: a refusal, raised at once (not retried until the deadline)
    retried = retry_counts().get((client.cluster_name, "throttled"), 0)
    with pytest.raises(TooManyRequests) as refused:
        evict("db-1")
    assert retry_counts().get((client.cluster_name, "throttled"), 0) == retried
    causes = refused.value.details.get("causes") or []
    assert [c.get("reason") for c in causes] == ["DisruptionBudget"], refused.value.details
    assert client.get("v1/Pod", "db-1", ns)["metadata"]["name"] == "db-1"


def test_a_scheduler_binds_a_pod_through_the_binding_subresource(client: Client, ns: str) -> None:
    spec = {"schedulerName": "mine", "containers": [{"name": "c", "image": "pause"}]}
    client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": ns},
            "spec": spec,
        }
    )
    bindings = client.subresource("binding")
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}}
    answer = bindings.create("v1/Pod", "p", {**body, "target": {"name": "node-1"}}, ns)
    assert answer["status"] == "Success"
    assert client.get("v1/Pod", "p", ns)["spec"]["nodeName"] == "node-1"
    with pytest.raises(Conflict, match='already assigned to node "node-1"'):
        bindings.create("v1/Pod", "p", {**body, "target": {"name": "node-2"}}, ns)


def test_subresource_calls_check_their_arguments(client: Client) -> None:
    for bad in ("", "scale/x"):
        with pytest.raises(ValueError, match="not a subresource name"):
            client.subresource(bad)
    with pytest.raises(ValueError, match="namespaced"):
        client.subresource("scale").get(DEPLOY, "web")


def test_the_async_client_has_the_same_write_options(client: Client, ns: str) -> None:
    aclient = AsyncClient(client).with_field_manager("async-operator")

    async def run() -> None:
        made = await aclient.create(_cm(ns, "async", app="x"))
        assert _managers(made) == [("async-operator", "Update")]
        await aclient.create(_deployment(ns, "async-web"))
        await aclient.subresource("scale").patch(DEPLOY, "async-web", {"spec": {"replicas": 2}}, ns)
        assert (await aclient.subresource("scale").get(DEPLOY, "async-web", ns))["spec"][
            "replicas"
        ] == 2
        await aclient.delete_all_of(CM, ns, labels={"app": "x"}, dry_run=True)
        assert await aclient.get(CM, "async", ns)
        await aclient.delete_all_of(CM, ns, labels={"app": "x"})
        with pytest.raises(NotFound):
            await aclient.get(CM, "async", ns)

    asyncio.run(run())
