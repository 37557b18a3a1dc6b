"""mcruntime provider ``kind``: the local `kind <https://kind.sigs.k8s.io>`_ clusters.

Clusters are discovered with ``kind get clusters`` and reached with the
kubeconfig of ``kind get kubeconfig --name <cluster>``; the list is polled for
changes. The cluster name is the kind cluster's name.
"""

from __future__ import annotations

from mcruntime_kind._cli import INSTALL_HINT, KindCLI, KindError, KindNotFound
from mcruntime_kind._provider import DEFAULT_INTERVAL, DEFAULT_RESYNC, Options, Provider

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_RESYNC",
    "INSTALL_HINT",
    "KindCLI",
    "KindError",
    "KindNotFound",
    "Options",
    "Provider",
]
