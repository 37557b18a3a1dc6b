"""Aggregated discovery: ``/api`` and ``/apis`` as one ``APIGroupDiscoveryList`` each.

kube-apiserver (1.30 on, GA) answers ``/api`` and ``/apis`` with every group, version and
resource in one document when ``Accept`` asks for
``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`` (``v2beta1`` too),
what kubectl and client-go ask first, instead of a list of groups to ask one by one. The
document is the legacy one converted as the API server's ``ConvertGroupVersionIntoToDiscovery``
converts it: each resource with its ``responseKind``, ``scope`` and verbs, its subresources
under it, each version ``freshness: Current``; a custom resource's ``responseKind`` carries its
group and version (apiextensions' discovery controller writes them), a built-in one's only
what its legacy entry says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcruntime.envtest._registry import Registry

__all__ = ["aggregated_version", "aggregated_discovery", "content_type"]

_GROUP = "apidiscovery.k8s.io"
_VERSIONS = ("v2", "v2beta1")
_KIND = "APIGroupDiscoveryList"
#: the JSON media types a client may accept the legacy documents as
_LEGACY = ("application/json", "*/*", "application/*")


def aggregated_version(accept: str) -> str | None:
    """The version of aggregated discovery that ``accept`` asks for before any other JSON
    media type the server answers discovery in (None: the legacy documents). Media types
    envtest does not write (protobuf, YAML) are passed over, as kube-apiserver's
    negotiation passes over those it does not serve."""
    ranked: list[tuple[float, int, str | None]] = []
    for i, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        opts = dict(p.partition("=")[::2] for p in params if "=" in p)
        try:
            q = float(opts.get("q", "1"))
        except ValueError:
            continue
        if media != "application/json" or "as" not in opts:
            if media in _LEGACY and not ({"as", "g", "v"} & opts.keys()):
                ranked.append((-q, i, None))
            continue
        if opts.get("as") == _KIND and opts.get("g") == _GROUP and opts.get("v") in _VERSIONS:
            ranked.append((-q, i, opts["v"]))
    if not ranked:
        return None
    return min(ranked)[2]


def content_type(version: str) -> str:
    """The ``Content-Type`` of an aggregated discovery document of ``version``."""
    return f"application/json;g={_GROUP};v={version};as={_KIND}"


def aggregated_discovery(registry: Registry, version: str, *, core: bool) -> dict[str, Any]:
    """The ``APIGroupDiscoveryList`` of ``/api`` (``core``) or ``/apis`` in ``version``."""
    groups = [""] if core else [g for g in registry.group_names() if g]
    items = []
    for group in groups:
        versions = [
            {
                "version": v,
                "resources": _resources(registry, group, v),
                "freshness": "Current",
            }
            for v in registry.group_versions(group)
        ]
        if not versions:
            continue
        # ObjectMeta as Go writes it: the core group has no name, and no time is null
        meta: dict[str, Any] = {"name": group} if group else {}
        meta["creationTimestamp"] = None
        items.append({"metadata": meta, "versions": versions})
    return {
        "kind": _KIND,
        "apiVersion": f"{_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def _resources(registry: Registry, group: str, version: str) -> list[dict[str, Any]]:
    """The legacy discovery of ``group``/``version`` as ``APIResourceDiscovery`` entries."""
    out: list[dict[str, Any]] = []
    for served in registry.resources(group, version):
        entries = served.discovery()
        top, subs = entries[0], entries[1:]
        kind = {
            "group": top.get("group") or (group if served.custom else ""),
            "version": top.get("version") or (version if served.custom else ""),
            "kind": top["kind"],
        }
        resource: dict[str, Any] = {
            "resource": top["name"],
            "responseKind": kind,
            "scope": "Namespaced" if top["namespaced"] else "Cluster",
            "singularResource": top.get("singularName", ""),
            "verbs": top["verbs"],
        }
        for key in ("shortNames", "categories"):
            if top.get(key):
                resource[key] = top[key]
        for sub in subs:
            same = sub["kind"] == top["kind"] and not sub.get("group") and served.custom
            resource.setdefault("subresources", []).append(
                {
                    "subresource": sub["name"].partition("/")[2],
                    "responseKind": kind
                    if same
                    else {
                        "group": sub.get("group", ""),
                        "version": sub.get("version", ""),
                        "kind": sub["kind"],
                    },
                    "verbs": sub["verbs"],
                }
            )
        out.append(resource)
    return out
