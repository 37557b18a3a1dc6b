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
``shutdown``, as kube's does. Every check passes while the server answers, but
the etcd checks (``etcd``, and ``etcd-readiness`` of ``readyz``) during a storage
outage: then the root path answers 500 with every check's line, verbose or not
(``[-]etcd failed: reason withheld``, then ``<name> check failed``, as Go's
``http.Error`` writes it), and the check's own path 500 with the error kube's
etcd probe gives when etcd does not answer within its 2 s deadline.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from mcruntime.envtest._http import Response

__all__ = ["ENDPOINTS", "STORAGE_CHECKS", "health"]

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


#: the checks that fail while storage is down
STORAGE_CHECKS = frozenset({"etcd", "etcd-readiness"})
#: what they fail with (storagebackend/factory/etcd3.go, the probe's Get timing out)
_STORAGE_ERROR = b"internal server error: error getting data from etcd: context deadline exceeded\n"


def health(path: str, raw_query: str, storage_down: bool = False) -> Response | None:
    """The answer to ``path`` (``/readyz``, ``/livez/etcd``, ...); None when it is no health path.

    With ``storage_down``, the etcd checks fail.
    """
    endpoint, _, check = path.strip("/").partition("/")
    checks = ENDPOINTS.get(endpoint)
    if checks is None:
        return None
    failing = STORAGE_CHECKS if storage_down else frozenset()
    if check:
        if check not in checks:
            return _plain(404, b"404 page not found\n")
        return _plain(500, _STORAGE_ERROR) if check in failing else _plain(200, b"ok")
    query = parse_qs(raw_query, keep_blank_values=True)
    excluded = list(dict.fromkeys(query.get("exclude", ())))
    failed = [name for name in checks if name in failing and name not in excluded]
    if "verbose" not in query and not failed:
        return _plain(200, b"ok")
    lines = [
        f"[+]{name} excluded: ok"
        if name in excluded
        else f"[-]{name} failed: reason withheld"
        if name in failed
        else f"[+]{name} ok"
        for name in checks
    ]
    unknown = [name for name in excluded if name not in checks]
    if unknown:
        names = ",".join(f'"{name}"' for name in unknown)
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
    if failed:  # always verbose on failure; http.Error ends the text with a newline
        lines.append(f"{endpoint} check failed")
        return _plain(500, ("\n".join(lines) + "\n").encode())
    lines.append(f"{endpoint} check passed")
    return _plain(200, ("\n".join(lines) + "\n").encode())


def _plain(code: int, body: bytes) -> Response:
    return Response(
        code, body, "text/plain; charset=utf-8", [("X-Content-Type-Options", "nosniff")]
    )
