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
server has ``cluster-admin`` (everything) bound to ``system:masters``.

Writes of roles and bindings are checked for escalation as kube-apiserver
checks them (`escalation`): a user may write a Role or ClusterRole only with
rules it holds itself, or with ``escalate`` on it; a binding only to a role
whose rules it holds, or with ``bind`` on that role; an aggregated ClusterRole
only with ``escalate``. Not modelled: the bootstrap roles other than
``cluster-admin`` (``admin``, ``edit``, ``view``, ``system:...``).
"""

from __future__ import annotations

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


#: what every cluster starts with: (resource key, object)
BOOTSTRAP: tuple[tuple[tuple[str, str], dict[str, Any]], ...] = (
    (
        CLUSTER_ROLES,
        {
            "metadata": {
                "name": "cluster-admin",
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            },
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        },
    ),
    (
        _CLUSTER_BINDINGS,
        {
            "metadata": {
                "name": "cluster-admin",
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            },
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": "system:masters"}],
        },
    ),
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
        if ref.get("kind") == "ClusterRole" and _binds(binding, user, groups):
            yield from _role_rules(store, CLUSTER_ROLES, "", ref.get("name", ""))
    if not namespace:
        return
    for binding in store.iter(_BINDINGS, namespace):
        ref = binding.get("roleRef") or {}
        if not _binds(binding, user, groups):
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


def _binds(binding: dict[str, Any], user: str, groups: tuple[str, ...]) -> bool:
    for s in binding.get("subjects") or ():
        kind, name = s.get("kind"), s.get("name")
        if kind == "User" and name == user:
            return True
        if kind == "Group" and name in groups:
            return True
        if (
            kind == "ServiceAccount"
            and s.get("namespace")
            and user == f"system:serviceaccount:{s['namespace']}:{name}"
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
    verbs = owner.get("verbs") or ()
    url = atom["nonResourceURLs"][0]
    return ("*" in verbs or verb in verbs) and any(
        u in ("*", url) or (u.endswith("*") and url.startswith(u[:-1]))
        for u in owner.get("nonResourceURLs") or ()
    )


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
