"""The pods/eviction subresource: the cases a real cluster's disruption controller would not let a
test set up, and the checks of the Eviction itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from kubernetes import client

from mcruntime.envtest._eviction import _allowed_condition, delete_options, eviction_body
from mcruntime.envtest._status import StatusError

from .conftest import WatchReader

pytestmark = pytest.mark.timeout(30)

NS = "default"


def _pod(core: client.CoreV1Api, name: str, *, ready: bool) -> None:
    spec = {"nodeName": "n1", "containers": [{"name": "c", "image": "pause"}]}
    core.create_namespaced_pod(
        NS, {"metadata": {"name": name, "labels": {"app": "a"}}, "spec": spec}
    )
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    core.patch_namespaced_pod_status(
        name, NS, {"status": {"phase": "Running", "conditions": [condition]}}
    )


def _budget(api: client.ApiClient, spec: dict[str, Any], status: dict[str, Any]) -> None:
    policy = client.PolicyV1Api(api)
    policy.create_namespaced_pod_disruption_budget(NS, {"metadata": {"name": "b"}, "spec": spec})
    status = {"observedGeneration": 1, **status}
    policy.patch_namespaced_pod_disruption_budget_status("b", NS, {"status": status})


def _evict(api: client.ApiClient, name: str) -> tuple[int, dict[str, Any]]:
    """POST an Eviction of pod ``name``: the HTTP status and the Status answered."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    method, url, headers, payload, post = api.param_serialize(
        "POST",
        f"/api/v1/namespaces/{NS}/pods/{name}/eviction",
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    raw = api.call_api(method, url, headers, payload, post, _request_timeout=10)
    return raw.status, orjson.loads(raw.read())


def test_an_unready_pod_goes_under_always_allow(
    api: client.ApiClient, core: client.CoreV1Api
) -> None:
    _pod(core, "p", ready=False)
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}
    _budget(api, {**spec, "unhealthyPodEvictionPolicy": "AlwaysAllow"}, {"desiredHealthy": 1})
    assert _evict(api, "p")[0] == 201
    status = client.PolicyV1Api(api).read_namespaced_pod_disruption_budget("b", NS).status
    assert status.disruptions_allowed in (0, None) and not status.disrupted_pods


def test_an_unready_pod_under_a_disrupted_budget_is_refused(
    api: client.ApiClient, core: client.CoreV1Api
) -> None:
    _pod(core, "p", ready=False)
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}
    _budget(api, spec, {"desiredHealthy": 1, "currentHealthy": 0})
    code, status = _evict(api, "p")
    assert code == 429 and status["reason"] == "TooManyRequests"


def test_a_negative_budget_is_forbidden(api: client.ApiClient, core: client.CoreV1Api) -> None:
    _pod(core, "p", ready=True)
    _budget(api, {"selector": {"matchLabels": {"app": "a"}}}, {"disruptionsAllowed": -1})
    code, status = _evict(api, "p")
    assert code == 403
    assert status["message"] == (
        'poddisruptionbudget.policy "b" is forbidden: pdb disruptions allowed is negative'
    )
    assert status["details"] == {"name": "b", "group": "policy", "kind": "poddisruptionbudget"}


@pytest.mark.parametrize(("selector", "guarded"), [(None, False), ({}, True)])
def test_a_budget_without_a_selector_guards_nothing_and_an_empty_one_everything(
    api: client.ApiClient, core: client.CoreV1Api, selector: Any, guarded: bool
) -> None:
    _pod(core, "p", ready=True)
    spec = {"minAvailable": 1} if selector is None else {"minAvailable": 1, "selector": selector}
    _budget(api, spec, {"disruptionsAllowed": 0})
    assert _evict(api, "p")[0] == (429 if guarded else 201)


def test_the_disruption_target_condition_is_written_before_the_pod_goes(
    api: client.ApiClient, core: client.CoreV1Api, watches: Callable[..., WatchReader]
) -> None:
    _pod(core, "p", ready=True)
    w = watches(core.list_namespaced_pod, NS, resource_version="0")
    assert w.next()["type"] == "ADDED"
    assert _evict(api, "p")[0] == 201
    # the condition, then (a pod on a node) the graceful deletion's mark, then gone
    modified, terminating, deleted = w.next(), w.next(), w.next()
    assert (modified["type"], terminating["type"], deleted["type"]) == (
        "MODIFIED",
        "MODIFIED",
        "DELETED",
    )
    assert "deletionTimestamp" not in modified["object"]["metadata"]
    assert terminating["object"]["metadata"]["deletionGracePeriodSeconds"] == 30
    conditions = {c["type"]: c for c in modified["object"]["status"]["conditions"]}
    target = conditions["DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "EvictionByEvictionAPI")
    assert target["lastTransitionTime"] and target["lastProbeTime"] is None


def test_an_eviction_body_is_checked() -> None:
    with pytest.raises(StatusError) as e:
        eviction_body("ns", {"apiVersion": "v1", "kind": "Eviction"})
    assert e.value.message == (
        "the API version in the data (v1) does not match the expected API version (policy/v1)"
    )
    with pytest.raises(StatusError) as e:
        eviction_body("ns", {"apiVersion": "policy/v1", "kind": "Pod"})
    assert e.value.message == 'Pod in version "v1" cannot be handled as a Eviction'
    with pytest.raises(StatusError) as e:
        eviction_body("ns", {"metadata": {"name": "p", "namespace": "other"}})
    assert e.value.code == 400
    body = eviction_body("ns", {"apiVersion": "policy/v1beta1", "metadata": {"name": "p"}})
    assert body["metadata"] == {"name": "p", "namespace": "ns"}


def test_delete_options_take_the_requests_dry_run_when_they_have_none() -> None:
    named = {"metadata": {"name": "p"}}
    assert delete_options("p", named, True)["dryRun"] == ["All"]
    assert delete_options("p", named, False)["dryRun"] == []
    kept = {**named, "deleteOptions": {"dryRun": ["All"], "gracePeriodSeconds": 0}}
    assert delete_options("p", kept, False) == {"dryRun": ["All"], "gracePeriodSeconds": 0}
    with pytest.raises(StatusError) as e:
        delete_options("p", {**named, "deleteOptions": {"dryRun": ["Some"]}}, False)
    assert e.value.code == 400
    with pytest.raises(StatusError) as e:
        delete_options("q", named, False)
    assert e.value.message == "name in URL does not match name in Eviction object"


def test_the_disruption_allowed_condition_moves_only_when_its_status_does() -> None:
    added = _allowed_condition({"observedGeneration": 3})
    assert [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in added] == [
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "InsufficientPods",
            "message": "",
            "observedGeneration": 3,
        }
    ]
    old = "2020-01-01T00:00:00Z"
    kept = {"type": "DisruptionAllowed", "status": "False", "lastTransitionTime": old}
    assert _allowed_condition({"conditions": [kept]})[0]["lastTransitionTime"] == old
    flipped = {**kept, "status": "True", "reason": "SufficientPods"}
    after = _allowed_condition({"conditions": [flipped]})[0]
    assert after["lastTransitionTime"] != old and after["reason"] == "InsufficientPods"
