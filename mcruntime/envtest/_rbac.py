"""RBAC: whether the Roles, ClusterRoles and bindings a server stores allow a request.

envtest authorizes the service accounts it issues tokens to this way, as
kube-apiserver's RBAC authorizer does (its own admin and read-only users keep
their fixed rights). A rule allows a request when its verbs, API groups,
resources (``pods``, ``pods/status``, ``*/scale``, ``*``) and, if it lists any,
resource names all match. ClusterRoleBindings grant their ClusterRole
everywhere; RoleBindings grant their Role or ClusterRole in their namespace.
A ClusterRole with an ``aggregationRule`` holds the rules of the ClusterRoles
its selectors match, written into it whenever a ClusterRole changes, as
kube-controller-manager's aggregation controller does (`aggregations`). Every
server starts with kube-apiserver's bootstrap roles that tests meet (`BOOTSTRAP`):
``cluster-admin`` bound to ``system:masters``, ``admin``, ``edit`` and ``view``,
and what every authenticated user may do. Non-resource rules (``/healthz``,
``/metrics``) answer SubjectAccessReviews (`allows_path`).

Writes of roles and bindings are checked for escalation as kube-apiserver
checks them (`escalation`): a user may write a Role or ClusterRole only with
rules it holds itself, or with ``escalate`` on it; a binding only to a role
whose rules it holds, or with ``bind`` on that role; an aggregated ClusterRole
only with ``escalate``. Not modelled: the bootstrap roles of the control plane's
own components (``system:node``, ``system:kube-scheduler``, ...).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcruntime._selectors import LabelSelector, SelectorError
from mcruntime.envtest._storage import ObjectStore

__all__ = [
    "Attributes",
    "BOOTSTRAP",
    "CLUSTER_ROLES",
    "RBAC_KEYS",
    "aggregations",
    "allows",
    "allows_path",
    "escalation",
    "rules_for",
]

GROUP = "rbac.authorization.k8s.io"
_ROLES = (GROUP, "roles")
CLUSTER_ROLES = (GROUP, "clusterroles")
_BINDINGS = (GROUP, "rolebindings")
_CLUSTER_BINDINGS = (GROUP, "clusterrolebindings")
#: the resources whose writes are checked for escalation
RBAC_KEYS = frozenset({_ROLES, CLUSTER_ROLES, _BINDINGS, _CLUSTER_BINDINGS})


_READ = ("get", "list", "watch")
_WRITE = ("create", "delete", "deletecollection", "patch", "update")
_BOOTSTRAP_META = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}
_AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"


def _triples(
    *rules: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]],
) -> list[dict[str, Any]]:
    """Rules from (API groups, resources, verbs) triples."""
    return [
        {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}
        for groups, resources, verbs in rules
    ]


def _cluster_role(
    name: str, rules: list[dict[str, Any]], *, to: str = "", aggregate: str = ""
) -> tuple[tuple[str, str], dict[str, Any]]:
    """A bootstrap ClusterRole; ``to``: the aggregated role it adds its rules to, ``aggregate``:
    the label (``aggregate-to-<aggregate>``) of the roles whose rules it holds."""
    meta: dict[str, Any] = {"name": name, **copy.deepcopy(_BOOTSTRAP_META)}
    if to:
        meta["labels"][_AGGREGATE_TO + to] = "true"
    role: dict[str, Any] = {"metadata": meta, "rules": rules}
    if aggregate:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {_AGGREGATE_TO + aggregate: "true"}}]
        }
    return CLUSTER_ROLES, role


def _cluster_binding(name: str, *groups: str) -> tuple[tuple[str, str], dict[str, Any]]:
    return _CLUSTER_BINDINGS, {
        "metadata": {"name": name, **copy.deepcopy(_BOOTSTRAP_META)},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
    }


_DISCOVERY_PATHS = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*"]
_PUBLIC_PATHS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
#: what the ``system:monitoring`` group may read: metrics and every health check
_MONITORING_PATHS = [
    "/metrics",
    "/metrics/slis",
    "/livez",
    "/readyz",
    "/healthz",
    "/livez/*",
    "/readyz/*",
    "/healthz/*",
]

#: what every cluster starts with, as kube-apiserver's bootstrap policy writes it:
#: ``cluster-admin`` bound to ``system:masters``; the user-facing ``admin``, ``edit`` and
#: ``view`` (aggregated: a CRD's ``aggregate-to-view`` role adds its kinds to them); the
#: roles every authenticated user holds (reviews of itself, discovery, health and version);
#: ``system:auth-delegator`` (TokenReviews and SubjectAccessReviews, for servers that
#: delegate authentication, such as a metrics endpoint); ``system:monitoring`` (``/metrics``
#: and the health checks, for its group). The ``extensions`` group's rules are
#: left out (envtest does not serve it). (resource key, object) pairs.
BOOTSTRAP: tuple[tuple[tuple[str, str], dict[str, Any]], ...] = (
    _cluster_role(
        "cluster-admin",
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
    ),
    _cluster_binding("cluster-admin", "system:masters"),
    _cluster_role("admin", [], aggregate="admin"),
    _cluster_role("edit", [], to="admin", aggregate="edit"),
    _cluster_role("view", [], to="edit", aggregate="view"),
    _cluster_role(
        "system:aggregate-to-admin",
        _triples(
            (("authorization.k8s.io",), ("localsubjectaccessreviews",), ("create",)),
            ((GROUP,), ("rolebindings", "roles"), (*_READ, *_WRITE)),
        ),
        to="admin",
    ),
    _cluster_role(
        "system:aggregate-to-edit",
        _triples(
            (
                ("",),
                (
                    "pods/attach",
                    "pods/exec",
                    "pods/portforward",
                    "pods/proxy",
                    "secrets",
                    "services/proxy",
                ),
                _READ,
            ),
            (("",), ("serviceaccounts",), ("impersonate",)),
            (
                ("",),
                ("pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
                _WRITE,
            ),
            (("",), ("pods/eviction",), ("create",)),
            (
                ("",),
                (
                    "configmaps",
                    "events",
                    "persistentvolumeclaims",
                    "replicationcontrollers",
                    "replicationcontrollers/scale",
                    "secrets",
                    "serviceaccounts",
                    "services",
                    "services/proxy",
                ),
                _WRITE,
            ),
            (("",), ("serviceaccounts/token",), ("create",)),
            (
                ("apps",),
                (
                    "daemonsets",
                    "deployments",
                    "deployments/rollback",
                    "deployments/scale",
                    "replicasets",
                    "replicasets/scale",
                    "statefulsets",
                    "statefulsets/scale",
                ),
                _WRITE,
            ),
            (("autoscaling",), ("horizontalpodautoscalers",), _WRITE),
            (("batch",), ("cronjobs", "jobs"), _WRITE),
            (("policy",), ("poddisruptionbudgets",), _WRITE),
            (("networking.k8s.io",), ("ingresses", "networkpolicies"), _WRITE),
            (("coordination.k8s.io",), ("leases",), (*_READ, *_WRITE)),
        ),
        to="edit",
    ),
    _cluster_role(
        "system:aggregate-to-view",
        _triples(
            (
                ("",),
                (
                    "configmaps",
                    "endpoints",
                    "persistentvolumeclaims",
                    "persistentvolumeclaims/status",
                    "pods",
                    "replicationcontrollers",
                    "replicationcontrollers/scale",
                    "serviceaccounts",
                    "services",
                    "services/status",
                ),
                _READ,
            ),
            (
                ("",),
                (
                    "bindings",
                    "events",
                    "limitranges",
                    "namespaces/status",
                    "pods/log",
                    "pods/status",
                    "replicationcontrollers/status",
                    "resourcequotas",
                    "resourcequotas/status",
                ),
                _READ,
            ),
            (("",), ("namespaces",), _READ),
            (("discovery.k8s.io",), ("endpointslices",), _READ),
            (
                ("apps",),
                (
                    "controllerrevisions",
                    "daemonsets",
                    "daemonsets/status",
                    "deployments",
                    "deployments/scale",
                    "deployments/status",
                    "replicasets",
                    "replicasets/scale",
                    "replicasets/status",
                    "statefulsets",
                    "statefulsets/scale",
                    "statefulsets/status",
                ),
                _READ,
            ),
            (
                ("autoscaling",),
                ("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
                _READ,
            ),
            (("batch",), ("cronjobs", "cronjobs/status", "jobs", "jobs/status"), _READ),
            (("policy",), ("poddisruptionbudgets", "poddisruptionbudgets/status"), _READ),
            (
                ("networking.k8s.io",),
                ("ingresses", "ingresses/status", "networkpolicies"),
                _READ,
            ),
        ),
        to="view",
    ),
    _cluster_role(
        "system:basic-user",
        _triples(
            (
                ("authorization.k8s.io",),
                ("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
                ("create",),
            ),
            (("authentication.k8s.io",), ("selfsubjectreviews",), ("create",)),
        ),
    ),
    _cluster_role(
        "system:discovery",
        [{"nonResourceURLs": [*_DISCOVERY_PATHS, *_PUBLIC_PATHS], "verbs": ["get"]}],
    ),
    _cluster_role(
        "system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_PATHS, "verbs": ["get"]}]
    ),
    _cluster_role(
        "system:auth-delegator",
        _triples(
            (("authentication.k8s.io",), ("tokenreviews",), ("create",)),
            (("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)),
        ),
    ),
    _cluster_role(
        "system:monitoring",
        [{"nonResourceURLs": _MONITORING_PATHS, "verbs": ["get"]}],
    ),
    _cluster_binding("system:basic-user", "system:authenticated"),
    _cluster_binding("system:discovery", "system:authenticated"),
    _cluster_binding("system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
    _cluster_binding("system:monitoring", "system:monitoring"),
)


@dataclass(frozen=True, slots=True)
class Attributes:
    """A resource request as the authorizer sees it (``namespace`` empty at cluster scope)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def allows(store: ObjectStore, user: str, groups: tuple[str, ...], a: Attributes) -> bool:
    """Whether a rule bound to ``user`` or one of its ``groups`` allows ``a``."""
    return any(_matches(rule, a) for rule in _rules(store, user, groups, a.namespace))


def allows_path(
    store: ObjectStore, user: str, groups: tuple[str, ...], verb: str, path: str
) -> bool:
    """Whether a rule bound to ``user`` or one of its ``groups`` allows ``verb`` on the
    non-resource URL ``path`` (``/metrics``, ``/healthz``)."""
    return any(_matches_path(rule, verb, path) for rule in _rules(store, user, groups, ""))


def rules_for(
    store: ObjectStore, user: str, groups: tuple[str, ...], namespace: str
) -> list[dict[str, Any]]:
    """The rules bound to ``user`` or its ``groups`` in ``namespace`` (cluster-wide ones included)."""
    return list(_rules(store, user, groups, namespace))


def aggregations(store: ObjectStore) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each ClusterRole with an ``aggregationRule`` and the rules it should hold: those of the
    other ClusterRoles its selectors match, in the order of their names, each rule once."""
    roles = sorted(store.iter(CLUSTER_ROLES, None), key=lambda r: r["metadata"]["name"])
    for role in roles:
        selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or ()
        matchers = []
        for sel in selectors:
            try:
                matchers.append(LabelSelector.from_label_selector(sel))
            except SelectorError:
                continue  # a selector kube-apiserver would have refused matches nothing
        if not matchers:
            continue
        rules: list[dict[str, Any]] = []
        for other in roles:
            if other is role:
                continue
            labels = other["metadata"].get("labels") or {}
            if any(m.matches(labels) for m in matchers):
                rules += [r for r in other.get("rules") or () if r not in rules]
        yield role, rules


def _rules(
    store: ObjectStore, user: str, groups: tuple[str, ...], namespace: str
) -> Iterator[dict[str, Any]]:
    for binding in store.iter(_CLUSTER_BINDINGS, None):
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole" and _binds(binding, user, groups, ""):
            yield from _role_rules(store, CLUSTER_ROLES, "", ref.get("name", ""))
    if not namespace:
        return
    for binding in store.iter(_BINDINGS, namespace):
        ref = binding.get("roleRef") or {}
        if not _binds(binding, user, groups, namespace):
            continue
        if ref.get("kind") == "Role":
            yield from _role_rules(store, _ROLES, namespace, ref.get("name", ""))
        elif ref.get("kind") == "ClusterRole":
            yield from _role_rules(store, CLUSTER_ROLES, "", ref.get("name", ""))


def _role_rules(
    store: ObjectStore, key: tuple[str, str], namespace: str, name: str
) -> list[dict[str, Any]]:
    role = store.get(key, namespace, name)
    return list((role or {}).get("rules") or ())


def _binds(binding: dict[str, Any], user: str, groups: tuple[str, ...], namespace: str) -> bool:
    """Whether a subject of ``binding`` (in ``namespace``; ``""``: a ClusterRoleBinding) is
    ``user`` or one of its ``groups``. A ServiceAccount subject without a namespace is of the
    binding's namespace, as kube-apiserver's ``appliesToUser`` reads it."""
    for s in binding.get("subjects") or ():
        kind, name = s.get("kind"), s.get("name")
        if kind == "User" and name == user:
            return True
        if kind == "Group" and name in groups:
            return True
        account_namespace = s.get("namespace") or namespace
        if (
            kind == "ServiceAccount"
            and account_namespace
            and user == f"system:serviceaccount:{account_namespace}:{name}"
        ):
            return True
    return False


def _matches(rule: dict[str, Any], a: Attributes) -> bool:
    verbs = rule.get("verbs") or ()
    if "*" not in verbs and a.verb not in verbs:
        return False
    api_groups = rule.get("apiGroups") or ()
    if "*" not in api_groups and a.group not in api_groups:
        return False
    combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    resources = rule.get("resources") or ()
    if not any(
        r in ("*", combined) or (a.subresource and r == f"*/{a.subresource}") for r in resources
    ):
        return False
    names = rule.get("resourceNames") or ()
    return not names or a.name in names


def _matches_path(rule: dict[str, Any], verb: str, path: str) -> bool:
    verbs = rule.get("verbs") or ()
    return ("*" in verbs or verb in verbs) and any(
        u in ("*", path) or (u.endswith("*") and path.startswith(u[:-1]))
        for u in rule.get("nonResourceURLs") or ()
    )


def escalation(
    store: ObjectStore,
    user: str,
    groups: tuple[str, ...],
    key: tuple[str, str],
    namespace: str,
    obj: dict[str, Any],
) -> str | None:
    """Why writing ``obj`` (a role or binding, in ``namespace``: ``""`` at cluster scope)
    would grant ``user`` more than it holds; ``None`` when it would not."""
    name = obj["metadata"].get("name", "")

    def may(verb: str, resource: str, role: str, ns: str) -> bool:
        return allows(store, user, groups, Attributes(verb, GROUP, resource, "", ns, role))

    if key in (_ROLES, CLUSTER_ROLES):
        resource = key[1]
        if may("escalate", resource, name, namespace):
            return None
        if key == CLUSTER_ROLES and (obj.get("aggregationRule") or {}).get("clusterRoleSelectors"):
            return "must have cluster-admin privileges to use the aggregationRule"
        wanted = list(obj.get("rules") or ())
    else:
        ref = obj.get("roleRef") or {}
        role = ref.get("name", "")
        role_key, role_ns = (
            (_ROLES, namespace) if ref.get("kind") == "Role" else (CLUSTER_ROLES, "")
        )
        if may("bind", role_key[1], role, namespace):
            return None
        wanted = _role_rules(store, role_key, role_ns, role)
    held = rules_for(store, user, groups, namespace)
    missing = [a for r in wanted for a in _atoms(r) if not any(_covers(h, a) for h in held)]
    if not missing:
        return None
    return (
        f'user "{user}" (groups={_go_quoted(groups)}) is attempting to grant RBAC permissions '
        "not currently held:\n" + "\n".join(_compact(a) for a in missing)
    )


def _atoms(rule: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A rule broken down to one verb, group, resource (or URL) and name each."""
    verbs = rule.get("verbs") or ()
    urls = rule.get("nonResourceURLs") or ()
    if urls:
        for verb in verbs:
            for url in urls:
                yield {"verbs": [verb], "nonResourceURLs": [url]}
        return
    names = rule.get("resourceNames") or [None]
    for group in rule.get("apiGroups") or ():
        for resource in rule.get("resources") or ():
            for verb in verbs:
                for name in names:
                    atom = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
                    if name is not None:
                        atom["resourceNames"] = [name]
                    yield atom


def _covers(owner: dict[str, Any], atom: dict[str, Any]) -> bool:
    """Whether ``owner`` (a rule held) allows everything ``atom`` (one of `_atoms`) grants:
    for a resource, as a request for that verb, group, resource and name would be allowed."""
    verb = atom["verbs"][0]
    if "nonResourceURLs" not in atom:
        resource, _, sub = atom["resources"][0].partition("/")
        name = (atom.get("resourceNames") or [""])[0]
        return _matches(owner, Attributes(verb, atom["apiGroups"][0], resource, sub, "", name))
    return _matches_path(owner, verb, atom["nonResourceURLs"][0])


def _go_quoted(values: tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _compact(atom: dict[str, Any]) -> str:
    """A rule as kube-apiserver lists a missing one: ``{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}``."""
    parts = [
        f"{field}:{_go_quoted(tuple(atom[key]))}"
        for key, field in (
            ("apiGroups", "APIGroups"),
            ("resources", "Resources"),
            ("resourceNames", "ResourceNames"),
            ("nonResourceURLs", "NonResourceURLs"),
            ("verbs", "Verbs"),
        )
        if key in atom
    ]
    return "{" + ", ".join(parts) + "}"
