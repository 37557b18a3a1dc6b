"""A watch of a cluster's CRDs while a controller waits for a kind it does not serve yet.

A controller whose kind a cluster does not serve (its CRD not installed) is retried with
backoff, up to a minute apart. A CRD created by other means (`kubectl apply`, a Helm
chart) should start it within a second, not at the end of that backoff: while it waits,
the engagement watches the cluster's CRDs (their metadata only), and any change wakes the
retry. The watch is read by the thread that reads every watch of the process (no thread
of its own). One that cannot be had (no right to list or watch CRDs, a cluster that does
not answer) leaves the backoff alone, said at debug level: nothing depends on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcruntime._local import display_name
from mcruntime.client import METADATA_ACCEPT, METADATA_LIST_ACCEPT, WatchStream
from mcruntime.client import deadline as call_deadline

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

log = logging.getLogger("mcruntime.manager")

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: the bound of the list and the watch's opening
_OPEN_TIMEOUT = 5.0
#: the server ends the watch after this long at most (a retry ends it first)
_WATCH_SECONDS = 600


def watch_crds(cluster: Cluster, wake: Callable[[], None]) -> WatchStream | None:
    """Call ``wake()`` at each change of ``cluster``'s CRDs from now until the returned
    stream is closed; None when they cannot be watched."""
    rest = cluster.rest

    def changed(_event: dict[str, Any]) -> None:
        wake()

    try:
        with call_deadline(_OPEN_TIMEOUT):
            # the list only says where the watch starts: one CRD's metadata at most
            listed = rest.request("GET", CRDS, query={"limit": 1}, accept=METADATA_LIST_ACCEPT)
            stream = rest.watch(
                CRDS,
                query={
                    "resourceVersion": (listed.get("metadata") or {}).get("resourceVersion", ""),
                    "timeoutSeconds": _WATCH_SECONDS,
                },
                accept=METADATA_ACCEPT,
            )
    except Exception as exc:
        log.debug(
            "cluster=%s: CRDs not watched while a kind is not served (%s); retrying with "
            "backoff only",
            display_name(cluster.name),
            exc,
        )
        return None
    if not stream.start(changed, lambda _error: None):
        stream.close()
        return None
    return stream
