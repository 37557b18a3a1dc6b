"""``/metrics``: the Prometheus text kube-apiserver serves, for what envtest can count.

kube-apiserver 1.31 serves its metrics registry at ``/metrics`` (apiserver
``pkg/server/routes/metrics.go``) to whoever may ``get`` that path (RBAC's
``system:monitoring`` role, the admin), in the Prometheus text format. envtest serves
two of its families, each with kube's name, help and labels:
``kubernetes_build_info`` (the version ``/version`` reports) and
``apiserver_storage_objects`` (the objects stored per resource, ``configmaps``,
``deployments.apps``, for each resource written to so far). The many others (request counts and latencies, etcd, watch
cache, flow control) describe a server envtest is not; a scrape that needs one finds
it absent rather than made up.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcruntime.envtest._http import Response
from mcruntime.envtest._storage import ObjectStore

__all__ = ["metrics"]

#: what Prometheus' Go client (kube 1.31's) answers a text scrape with
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_BUILD_INFO_HELP = (
    "[ALPHA] A metric with a constant '1' value labeled by major, minor, git version, git "
    "commit, git tree state, build date, Go version, and compiler from which Kubernetes was "
    "built, and platform on which it is running."
)
_STORAGE_OBJECTS_HELP = (
    "[STABLE] Number of stored objects at the time of last check split by kind. In case of a "
    "fetching error, the value will be -1."
)
#: the build info's labels and the ``/version`` fields they come from, in label order
_BUILD_LABELS = (
    ("build_date", "buildDate"),
    ("compiler", "compiler"),
    ("git_commit", "gitCommit"),
    ("git_tree_state", "gitTreeState"),
    ("git_version", "gitVersion"),
    ("go_version", "goVersion"),
    ("major", "major"),
    ("minor", "minor"),
    ("platform", "platform"),
)


def metrics(store: ObjectStore, version: Mapping[str, str]) -> Response:
    """The ``/metrics`` answer of a server with ``store`` and ``/version`` info ``version``."""
    build = ",".join(f'{label}="{_escape(version[field])}"' for label, field in _BUILD_LABELS)
    lines = [
        f"# HELP kubernetes_build_info {_BUILD_INFO_HELP}",
        "# TYPE kubernetes_build_info gauge",
        f"kubernetes_build_info{{{build}}} 1",
        f"# HELP apiserver_storage_objects {_STORAGE_OBJECTS_HELP}",
        "# TYPE apiserver_storage_objects gauge",
    ]
    counts: dict[str, int] = {}
    for (group, plural), by_ns in store.objects.items():
        resource = f"{plural}.{group}" if group else plural
        counts[resource] = sum(len(names) for names in by_ns.values())
    lines += [
        f'apiserver_storage_objects{{resource="{_escape(r)}"}} {n}'
        for r, n in sorted(counts.items())
    ]
    return Response(200, ("\n".join(lines) + "\n").encode(), CONTENT_TYPE)


def _escape(value: str) -> str:
    """A label value as the text format writes it (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
