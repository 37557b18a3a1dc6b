"""Storage migration: every object of a CRD written back in its storage version.

After a CRD's storage version changes, objects written before stay stored in the old
one, and ``status.storedVersions`` lists both. kube-apiserver refuses to drop a version
from ``spec.versions`` while it is listed there. `migrate_storage` does, for one cluster,
what kube-storage-version-migrator does: it reads every object in the storage version
and writes it back unchanged (the API server stores it anew only when its stored bytes
differ: an object stored in the old version is rewritten, one already in the new one is
not), then sets ``status.storedVersions`` to the storage version alone.

A write that conflicts (or finds the object gone) counts as done: another writer stored
the object since it was read, in the storage version, since that changed before.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime.client import Client, Resource, cancelled_by
from mcruntime.crd._generate import generate_crd
from mcruntime.crd._options import CRDError
from mcruntime.errors import Conflict, DeadlineExceeded, Gone, NotFound, Unreachable

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

__all__ = ["DEFAULT_MIGRATE_TIMEOUT", "StorageMigration", "migrate_storage"]

log = logging.getLogger("mcruntime.crd")

#: how long [`migrate_storage`][mcruntime.crd.migrate_storage] may take by default (seconds)
DEFAULT_MIGRATE_TIMEOUT = 300.0
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: objects per list page
_PAGE = 500


@dataclass(frozen=True)
class StorageMigration:
    """What [`migrate_storage`][mcruntime.crd.migrate_storage] did in one cluster."""

    #: the CRD's name (``backends.shop.example.com``)
    crd: str
    #: the version every object is stored in now, and ``status.storedVersions`` alone lists
    storage_version: str
    #: ``status.storedVersions`` before the migration
    stored_versions: tuple[str, ...]
    #: objects written back and stored anew (they were stored in another version)
    rewritten: int = 0
    #: objects written back that the API server left as they were (stored in the storage
    #: version already)
    unchanged: int = 0
    #: objects another writer changed or deleted between the read and the write (stored
    #: anew by that write, or gone)
    raced: int = 0


def migrate_storage(
    cluster_or_client: Cluster | Client,
    crd: str | type[Resource],
    *,
    timeout: float = DEFAULT_MIGRATE_TIMEOUT,
    stop: threading.Event | None = None,
) -> StorageMigration:
    """Store every object of ``crd`` in its storage version, then drop the other versions
    from its ``status.storedVersions``, so that they may leave ``spec.versions``.

    ``crd`` is the CRD's name or the [`Resource`][mcruntime.client.Resource] class it was
    generated from. Run it after the storage version changed (`install_crds` with the
    new version marked ``storage``), in every cluster of the fleet; a CRD whose
    ``storedVersions`` lists the storage version alone is left as it is. Objects are
    read a page at a time and written back unchanged; one that another writer changed
    or deleted meanwhile is counted in ``raced`` (that write stored it anew).

    ``timeout`` bounds the whole call, every request included; ``stop`` cancels it at
    once, the request in flight included, and a cluster that leaves cuts it
    ([`ClusterLeft`][mcruntime.errors.ClusterLeft]). A migration cut short leaves
    ``storedVersions`` as it was, and running it again finishes it (objects already
    rewritten are left as they are). Raises [`CRDError`][mcruntime.crd.CRDError] naming
    the CRD and the cluster when it is not done in time, is cancelled, or the storage
    version changes meanwhile; the API errors of the writes otherwise (a validating
    webhook refusing an object, say).
    """
    client: Client = (
        cluster_or_client if isinstance(cluster_or_client, Client) else cluster_or_client.client
    )
    name = crd if isinstance(crd, str) else str(generate_crd(crd)["metadata"]["name"])
    migration = _Migration(client, name, timeout, stop)
    with cancelled_by(migration.stop, "migrate_storage was cancelled"):
        return migration.run()


class _Migration:
    """The requests of one migrate_storage call, each bounded by what is left of its deadline."""

    def __init__(
        self, client: Client, name: str, timeout: float, stop: threading.Event | None
    ) -> None:
        self.rest = client.rest
        self.name = name
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.stop = stop if stop is not None else threading.Event()
        self.cluster_name = client.rest.cluster_name
        self.cluster = display_name(self.cluster_name)
        self.counts = {"rewritten": 0, "unchanged": 0, "raced": 0}

    def _failed(self, why: str) -> CRDError:
        done = sum(self.counts.values())
        return CRDError(
            f"migrating the storage of CRD {self.name} in cluster {self.cluster}: {why} "
            f"({done} objects written back so far; status.storedVersions left as it was)"
        )

    def request(
        self, method: str, path: str, *, body: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        if self.stop.is_set():
            raise self._failed("cancelled")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._failed(f"not done within {self.timeout:g}s")
        try:
            return self.rest.request(method, path, query=query, body=body, timeout=left)
        except Unreachable as exc:
            if self.stop.is_set() and isinstance(exc, DeadlineExceeded):  # cut in flight
                raise self._failed("cancelled") from exc
            if time.monotonic() >= self.deadline:
                raise self._failed(f"not done within {self.timeout:g}s: {exc}") from exc
            raise

    def run(self) -> StorageMigration:
        crd = self.request("GET", f"{_CRDS}/{self.name}")
        storage = _storage_version(crd)
        stored = tuple((crd.get("status") or {}).get("storedVersions") or ())
        if stored == (storage,):
            log.debug(
                "cluster=%s: CRD %s is stored in %s alone already",
                self.cluster,
                self.name,
                storage,
                extra=log_fields(cluster=self.cluster_name),
            )
            return StorageMigration(self.name, storage, stored)
        spec = crd["spec"]
        base = f"/apis/{spec['group']}/{storage}"
        plural = spec["names"]["plural"]
        namespaced = spec.get("scope") == "Namespaced"
        typed = {"apiVersion": f"{spec['group']}/{storage}", "kind": spec["names"]["kind"]}
        query: dict[str, Any] = {"limit": _PAGE}
        while True:
            try:
                page = self.request("GET", f"{base}/{plural}", query=query)
            except Gone:
                if "continue" not in query:
                    raise
                # the continuation expired: list again; what was written is not stored again
                query = {"limit": _PAGE}
                continue
            for obj in page.get("items") or ():
                meta = obj.get("metadata") or {}
                where = f"{base}/namespaces/{meta.get('namespace')}" if namespaced else base
                self.write_back(f"{where}/{plural}/{meta.get('name')}", {**obj, **typed})
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            query = {"limit": _PAGE, "continue": token}
        self.forget_old_versions(storage)
        log.info(
            "cluster=%s: CRD %s stored in %s alone (storedVersions were %s): %d objects "
            "rewritten, %d already stored so, %d written by others meanwhile",
            self.cluster,
            self.name,
            storage,
            list(stored),
            self.counts["rewritten"],
            self.counts["unchanged"],
            self.counts["raced"],
            extra=log_fields(cluster=self.cluster_name),
        )
        return StorageMigration(self.name, storage, stored, **self.counts)

    def write_back(self, path: str, obj: dict[str, Any]) -> None:
        try:
            written = self.request("PUT", path, body=obj)
        except (Conflict, NotFound):
            self.counts["raced"] += 1  # stored anew by the write that won, or gone
            return
        before = (obj.get("metadata") or {}).get("resourceVersion")
        after = (written.get("metadata") or {}).get("resourceVersion")
        self.counts["unchanged" if after == before else "rewritten"] += 1

    def forget_old_versions(self, storage: str) -> None:
        while True:  # re-read and write again when another writer got in between
            crd = self.request("GET", f"{_CRDS}/{self.name}")
            now = _storage_version(crd)
            if now != storage:
                raise self._failed(
                    f"its storage version changed from {storage} to {now} meanwhile; "
                    "run the migration again"
                )
            crd["status"] = {**(crd.get("status") or {}), "storedVersions": [storage]}
            try:
                self.request("PUT", f"{_CRDS}/{self.name}/status", body=crd)
                return
            except Conflict:
                continue


def _storage_version(crd: dict[str, Any]) -> str:
    for version in (crd.get("spec") or {}).get("versions") or ():
        if version.get("storage"):
            return str(version.get("name"))
    raise CRDError(f"CRD {(crd.get('metadata') or {}).get('name')} has no storage version")
