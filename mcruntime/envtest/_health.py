"""``/healthz``, ``/livez`` and ``/readyz``, answered as kube-apiserver answers them.

Read in apiserver `pkg/server/healthz/healthz.go` (`handleRootHealth`,
`InstallPathHandler`): the root path answers ``ok``, or with ``?verbose`` one
``[+]<check> ok`` line per check and ``<name> check passed``; ``?exclude=<check>``
(repeatable) prints ``[+]<check> excluded: ok``, and a name no check has is
warned about (``warn: some health checks cannot be excluded: no matches for
"<name>"``); ``/<endpoint>/<check>`` answers one check's ``ok``, and a check
the server does not have is a 404. Plain text, ``nosniff``. The checks are
kube-apiserver 1.31's own that have a counterpart here (its storage, the CRD
informers, the bootstrap RBAC roles and PriorityClasses, the system
namespaces); ``readyz`` adds ``etcd-readiness``, ``informer-sync`` and
``shutdown``, as kube's does. Every check passes while the server answers.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from mcruntime.envtest._http import Response

__all__ = ["ENDPOINTS", "health"]

_POST_START_HOOKS = tuple(
    "poststarthook/" + hook
    for hook in (
        "start-apiextensions-informers",
        "start-apiextensions-controllers",
        "crd-informer-synced",
        "start-system-namespaces-controller",
        "bootstrap-controller",
        "rbac/bootstrap-roles",
        "scheduling/bootstrap-system-priority-classes",
    )
)
_LIVE = ("ping", "log", "etcd", *_POST_START_HOOKS)
#: each endpoint's checks, in the order kube-apiserver prints them
ENDPOINTS: dict[str, tuple[str, ...]] = {
    "healthz": _LIVE,
    "livez": _LIVE,
    "readyz": (
        "ping",
        "log",
        "etcd",
        "etcd-readiness",
        "informer-sync",
        *_POST_START_HOOKS,
        "shutdown",
    ),
}


def health(path: str, raw_query: str) -> Response | None:
    """The answer to ``path`` (``/readyz``, ``/livez/etcd``, ...); None when it is no health path."""
    endpoint, _, check = path.strip("/").partition("/")
    checks = ENDPOINTS.get(endpoint)
    if checks is None:
        return None
    if check:
        return _plain(200, b"ok") if check in checks else _plain(404, b"404 page not found\n")
    query = parse_qs(raw_query, keep_blank_values=True)
    if "verbose" not in query:
        return _plain(200, b"ok")
    excluded = list(dict.fromkeys(query.get("exclude", ())))
    lines = [f"[+]{name} excluded: ok" if name in excluded else f"[+]{name} ok" for name in checks]
    unknown = [name for name in excluded if name not in checks]
    if unknown:
        names = ",".join(f'"{name}"' for name in unknown)
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
    lines.append(f"{endpoint} check passed")
    return _plain(200, ("\n".join(lines) + "\n").encode())


def _plain(code: int, body: bytes) -> Response:
    return Response(
        code, body, "text/plain; charset=utf-8", [("X-Content-Type-Options", "nosniff")]
    )
