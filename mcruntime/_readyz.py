"""The health probe of a cluster: ``GET /readyz`` as kube-apiserver serves it, and what a
not-ready answer says (read by the manager's cluster health check and by a provider's check
of its management cluster)."""

from __future__ import annotations

import re

from mcruntime.errors import APIError

__all__ = ["FAILED_CHECK", "PROBE_PATH", "PROBE_QUERY", "not_ready"]

PROBE_PATH = "/readyz"
#: kube-apiserver's ``shutdown`` check fails from the start of a graceful shutdown, while the
#: server still serves for ``--shutdown-delay-duration`` so that load balancers move away:
#: a replica that goes (an upgrade rolling through) is no cluster that stopped serving
PROBE_QUERY = {"exclude": "shutdown"}
#: a failed check's line in kube-apiserver's /readyz answer
FAILED_CHECK = re.compile(r"^\[-\]([A-Za-z0-9/_.:-]{1,100}) failed", re.MULTILINE)


def not_ready(exc: APIError, failed: list[str] | None = None) -> str:
    """Why a 5xx answer to /readyz means not ready: the failed checks it names (kube's
    ``[-]etcd failed: reason withheld`` lines; ``failed`` when the caller found them
    already), else its status. Nothing else of the body: what a proxy in between says is
    not ours to log."""
    if failed is None:
        failed = FAILED_CHECK.findall(exc.message)
    if failed:
        return f"not ready: {', '.join(dict.fromkeys(failed[:8]))} failed"
    return f"not ready: GET {PROBE_PATH} answered {exc.status}"
