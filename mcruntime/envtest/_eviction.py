"""The ``pods/eviction`` subresource: a pod deleted only if its PodDisruptionBudget allows it.

`kubectl drain`, node drainers and the cluster autoscaler do not DELETE a
node's pods: they POST a ``policy/v1`` (or ``v1beta1``) ``Eviction`` to
``/api/v1/namespaces/{ns}/pods/{name}/eviction``, so that a
PodDisruptionBudget can refuse. envtest answers as kube-apiserver's
``EvictionREST`` does (``pkg/registry/core/pod/storage/eviction.go``):

- a pod that is Pending, Succeeded or Failed, or already being deleted, is
  deleted without looking at any budget;
- more than one budget of the pod's namespace selecting it: 500;
- no budget: the pod is deleted;
- a pod that is not ready, under a budget with ``unhealthyPodEvictionPolicy:
  AlwaysAllow``, or with ``currentHealthy >= desiredHealthy > 0``: deleted,
  the budget left as it is;
- otherwise the budget decides: 429 TooManyRequests with a
  ``DisruptionBudget`` cause while its ``status.observedGeneration`` trails
  its generation or its ``disruptionsAllowed`` is 0 (or absent), 403 when
  that count is negative or ``disruptedPods`` holds over 2000 pods; else its
  ``disruptionsAllowed`` goes down by one and the pod is recorded in
  ``disruptedPods`` before the pod is deleted.

Before it is deleted the pod gets the ``DisruptionTarget`` condition
(``EvictionByEvictionAPI``), as on kube-apiserver 1.31. The ``deleteOptions``
apply to that delete; ``dryRun`` (in the query or the options) changes
nothing. The answer is a ``Status`` ``Success`` (201).

envtest runs no disruption controller: a budget's status is what a test
writes to its ``/status``, and a new budget (no ``observedGeneration``)
refuses every eviction its checks reach. kube-apiserver retries its
read-check-write on conflicts with other writers; envtest serves one request
at a time and writes without awaiting anything, so it has nothing to retry.
"""

from __future__ import annotations

from typing import Any

from mcruntime._selectors import LabelSelector, SelectorError
from mcruntime.envtest._bodies import typed_body
from mcruntime.envtest._conditions import update_pod_condition
from mcruntime.envtest._names import now
from mcruntime.envtest._objects import Objects, check_delete_preconditions
from mcruntime.envtest._registry import Registry, ServedResource
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore

__all__ = ["Evictions", "delete_options", "eviction_body"]

#: the versions of the body the subresource takes
_API_VERSIONS = ("policy/v1", "policy/v1beta1")
_PODS = ("", "pods")
_PDBS = ("policy", "poddisruptionbudgets")
#: kube-apiserver's MaxDisruptedPodSize: evictions the disruption controller has not seen
MAX_DISRUPTED_PODS = 2000
_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
_MANY_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
#: the field manager of the budget's status write (kube-apiserver's loopback client)
_MANAGER = "kube-apiserver"


def eviction_body(ns: str, body: Any) -> dict[str, Any]:
    """The request's Eviction, checked as kube-apiserver decodes it (400 for another kind or
    version, or another namespace than the request's); its namespace is the request's."""
    return typed_body(ns, body, "Eviction", _API_VERSIONS)


def delete_options(name: str, eviction: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """The DeleteOptions an eviction of pod ``name`` deletes with: the Eviction's, with the
    request's ``dryRun`` when they have none (400 when the Eviction names another pod)."""
    if (eviction.get("metadata") or {}).get("name") != name:
        raise StatusError.bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise StatusError.bad_request("deleteOptions must be a JSON object")
    options = dict(options)
    values = options.get("dryRun") or []
    values = [values] if isinstance(values, str) else list(values)
    for v in values:
        if v != "All":
            raise StatusError.bad_request(
                f'dryRun: Unsupported value: "{v}": supported values: "All"'
            )
    if not values and dry_run:
        values = ["All"]
    options["dryRun"] = values
    return options


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def _budget_ignored(pod: dict[str, Any]) -> bool:
    """Whether the pod goes without a look at its budgets: it has not started, has finished,
    or is being deleted (it disrupts nothing more)."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or "deletionTimestamp" in pod["metadata"]


def _too_many_requests(cause: str, retry_after: int) -> StatusError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return StatusError(429, "TooManyRequests", _VIOLATION, details)


def _processing(budget: str) -> str:
    return f"The disruption budget {budget} is still being processed by the server."


def _budget_forbidden(name: str, why: str) -> StatusError:
    return StatusError.forbidden(
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        name,
        "policy",
        "poddisruptionbudget",
    )


def _allowed_condition(status: dict[str, Any]) -> list[dict[str, Any]]:
    """``status.conditions`` with ``DisruptionAllowed`` False (InsufficientPods), set as
    ``meta.SetStatusCondition`` sets it: the transition time moves only when the status does."""
    wanted: dict[str, Any] = {
        "type": "DisruptionAllowed",
        "status": "False",
        "reason": "InsufficientPods",
        "message": "",
    }
    observed = status.get("observedGeneration") or 0
    if observed:
        wanted["observedGeneration"] = observed
    out: list[dict[str, Any]] = []
    found = False
    for c in status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "DisruptionAllowed":
            found = True
            moved = c.get("status") != "False" or not c.get("lastTransitionTime")
            at = now() if moved else c["lastTransitionTime"]
            c = {k: v for k, v in c.items() if k != "observedGeneration"}
            c = {**c, **wanted, "lastTransitionTime": at}
        out.append(c)
    if not found:
        out.append({**wanted, "lastTransitionTime": now()})
    return out


class Evictions:
    """The ``pods/eviction`` subresource of one server."""

    def __init__(self, store: ObjectStore, registry: Registry, objects: Objects) -> None:
        self.store = store
        self.registry = registry
        self.objects = objects

    def _served(self, key: tuple[str, str]) -> ServedResource:
        res = self.registry.get(key[0], "v1", key[1])
        assert res is not None
        return res

    def evict(self, ns: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
        """Evict pod ``name`` of ``ns`` deleting with ``options`` (`delete_options`); the
        ``Status`` to answer with (201), or a StatusError."""
        pods = self._served(_PODS)
        pod = self.store.get(_PODS, ns, name)
        if pod is None:
            raise StatusError.not_found(pods.qualified, name, pods.group, pods.plural)
        dry_run = bool(options.get("dryRun"))
        unhealthy_under: str | None = None  # the budget an unready pod goes without spending
        if not _budget_ignored(pod):
            budgets = self._budgets(pod)
            if len(budgets) > 1:
                raise StatusError(500, "", _MANY_BUDGETS)
            if budgets and self._unhealthy_may_go(pod, budgets[0]):
                unhealthy_under = budgets[0]["metadata"]["name"]
            elif budgets:
                self._spend(budgets[0], name, dry_run)
        try:
            self._delete(pods, pod, options, dry_run)
        except StatusError as e:
            pre = options.get("preconditions")
            own_rv = isinstance(pre, dict) and pre.get("resourceVersion")
            if e.code != 409 or unhealthy_under is None or own_rv:
                raise
            # kube-apiserver deletes an unready pod on the condition that its resourceVersion
            # is the one it judged; a conflict there is answered as a budget being processed
            raise _too_many_requests(_processing(unhealthy_under), 10) from None
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def _budgets(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The budgets of the pod's namespace whose selector matches it (a budget with a bad
        selector matches nothing, one with none matches nothing, ``{}`` matches every pod)."""
        labels = pod["metadata"].get("labels") or {}
        out = []
        for pdb in self.store.iter(_PDBS, pod["metadata"]["namespace"]):
            spec = pdb.get("spec") or {}
            try:
                selector = LabelSelector.from_label_selector(spec.get("selector"))
            except SelectorError:
                continue
            if selector.matches(labels):
                out.append(pdb)
        return out

    @staticmethod
    def _unhealthy_may_go(pod: dict[str, Any], pdb: dict[str, Any]) -> bool:
        """Whether an unready pod is evicted without spending the budget: always under
        ``AlwaysAllow``, else (``IfHealthyBudget``) while the application is healthy."""
        if _ready(pod):
            return False
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        status = pdb.get("status") or {}
        desired = status.get("desiredHealthy") or 0
        return bool(desired > 0 and (status.get("currentHealthy") or 0) >= desired)

    def _spend(self, pdb: dict[str, Any], pod_name: str, dry_run: bool) -> None:
        """Take one disruption from ``pdb`` for ``pod_name``, or refuse (429, 403)."""
        meta, status = pdb["metadata"], dict(pdb.get("status") or {})
        name = meta["name"]
        if (status.get("observedGeneration") or 0) < (meta.get("generation") or 0):
            raise _too_many_requests(_processing(name), 10)
        allowed = status.get("disruptionsAllowed") or 0
        if allowed < 0:
            raise _budget_forbidden(name, "pdb disruptions allowed is negative")
        disrupted = dict(status.get("disruptedPods") or {})
        if len(disrupted) > MAX_DISRUPTED_PODS:
            raise _budget_forbidden(
                name,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            )
        if allowed == 0:
            raise _too_many_requests(
                f"The disruption budget {name} needs {status.get('desiredHealthy') or 0} "
                f"healthy pods and has {status.get('currentHealthy') or 0} currently",
                0,
            )
        if dry_run:
            return
        status["disruptionsAllowed"] = allowed - 1
        if allowed == 1:
            status["conditions"] = _allowed_condition(status)
        disrupted[pod_name] = now()
        status["disruptedPods"] = disrupted
        self.objects.update(
            self._served(_PDBS),
            meta["namespace"],
            name,
            {**pdb, "status": status},
            subresource="status",
            manager=_MANAGER,
        )

    def _delete(
        self, pods: ServedResource, pod: dict[str, Any], options: dict[str, Any], dry_run: bool
    ) -> None:
        """Delete the pod with ``options``; first (unless a dry run) mark it with the
        ``DisruptionTarget`` condition, once its preconditions hold."""
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        if dry_run:
            self.objects.delete(pods, ns, name, options, dry_run=True)
            return
        check_delete_preconditions(pods, pod, options)
        status = dict(pod.get("status") or {})
        status["conditions"] = update_pod_condition(
            status.get("conditions") or [], _DISRUPTION_TARGET
        )
        self.objects.update(pods, ns, name, {**pod, "status": status}, subresource="status")
        rest = {k: v for k, v in options.items() if k not in ("preconditions", "dryRun")}
        self.objects.delete(pods, ns, name, rest)


#: the condition an evicted pod gets before it is deleted
_DISRUPTION_TARGET: dict[str, Any] = {
    "type": "DisruptionTarget",
    "status": "True",
    "lastProbeTime": None,
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}
