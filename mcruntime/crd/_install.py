"""Installing CRDs into a cluster: create or update, then wait until they are established."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime.client import Client, Resource, RESTClient, cancelled_by
from mcruntime.crd._generate import generate_crds
from mcruntime.crd._options import CRDError, CRDNotEstablished
from mcruntime.errors import AlreadyExists, Conflict, DeadlineExceeded, NotFound, Unreachable

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

__all__ = ["install_crds", "load_crds", "DEFAULT_INSTALL_TIMEOUT"]

log = logging.getLogger("mcruntime.crd")

#: how long [`install_crds`][mcruntime.crd.install_crds] waits by default (seconds)
DEFAULT_INSTALL_TIMEOUT = 60.0
_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_POLL = 0.05
_MAX_POLL = 0.5


def _rv(obj: Any) -> Any:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _condition(crd: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (crd.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return {}


#: the files of a directory that install_crds reads, as envtest's ``CRDDirectoryPaths`` does
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def _from_path(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of a YAML or JSON file, or of a directory's such files.

    Other documents are skipped, as controller-runtime's envtest skips them; a path
    that holds no CRD at all is an error naming it.
    """
    import yaml

    where = Path(path)
    if where.is_dir():
        files = sorted(f for f in where.iterdir() if f.suffix in _MANIFEST_SUFFIXES)
    elif where.is_file():
        files = [where]
    else:
        raise CRDError(f"cannot install CRDs from {str(where)!r}: no such file or directory")
    found: list[dict[str, Any]] = []
    for file in files:
        try:
            documents = list(yaml.safe_load_all(file.read_text()))
        except (OSError, yaml.YAMLError) as exc:
            raise CRDError(f"cannot read CRDs from {str(file)!r}: {exc}") from None
        found += [
            d
            for d in documents
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
        ]
    if not found:
        raise CRDError(f"no CustomResourceDefinition in {str(where)!r}")
    return found


#: what install_crds installs: a CRD dict, a `Resource` class, a file or directory of CRDs
_CRDSource = dict[str, Any] | type[Resource] | str | os.PathLike[str]


def load_crds(crds: _CRDSource | Iterable[_CRDSource]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions ``crds`` names, as [`install_crds`][mcruntime.crd.install_crds] takes them.

    Reads the files and generates the `Resource` classes once, so that a caller
    installing the same CRDs in many clusters reads them once and learns of a bad
    path before it installs anything. Raises [`CRDError`][mcruntime.crd.CRDError]
    naming a path that holds no CRD or cannot be read.
    """
    if isinstance(crds, str | os.PathLike | dict | type):
        # one of them, not in a list: a str iterates by character (its first, "/", a
        # directory that would be read) and a dict by its keys
        crds = [crds]
    items: list[Any] = []
    for item in crds:
        items += _from_path(item) if isinstance(item, str | os.PathLike) else [item]
    classes = [c for c in items if isinstance(c, type)]
    out = [c for c in items if isinstance(c, dict)]
    if len(out) + len(classes) != len(items):
        bad = next(c for c in items if not isinstance(c, dict | type))
        raise CRDError(
            f"cannot install a {type(bad).__name__}: pass CRD dicts, Resource classes or paths"
        )
    out += generate_crds(*classes)
    for crd in out:
        if crd.get("kind") != "CustomResourceDefinition" or not (crd.get("metadata") or {}).get(
            "name"
        ):
            raise CRDError(
                "install_crds takes CustomResourceDefinition objects with metadata.name; got "
                f"kind {crd.get('kind')!r}"
            )
    return out


def install_crds(
    cluster_or_client: Cluster | Client,
    crds: _CRDSource | Iterable[_CRDSource],
    *,
    timeout: float = DEFAULT_INSTALL_TIMEOUT,
    stop: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """Create or update CRDs, then wait until the API server serves them.

    Served means ``Established`` and listed by discovery in every served version.

    ``crds`` are CustomResourceDefinition dicts (e.g. from
    [`generate_crd`][mcruntime.crd.generate_crd]), `Resource` classes, which
    are generated here, or paths: a YAML or JSON file, or a directory of them
    (``config/crd/bases`` as controller-gen writes it; envtest's
    ``CRDDirectoryPaths``), whose CustomResourceDefinition documents are taken
    (a path without any is a [`CRDError`][mcruntime.crd.CRDError]); a list of
    them, or one alone. An existing CRD gets the given spec, labels and
    annotations (a write conflicting with another installer is re-read and
    retried within the deadline), but keeps its ``spec.conversion`` when the
    given CRD has none (as [`generate_crd`][mcruntime.crd.generate_crd]'s and
    controller-gen's have none): a conversion webhook that
    `WebhookServerOptions(install=True)` or a deployment set stays in place.
    ``timeout`` bounds the whole call, every request included (an enclosing `mcruntime.client.deadline` shortens it);
    ``stop`` cancels it at once, the request in flight included (a
    [`CRDError`][mcruntime.crd.CRDError] saying ``cancelled``); a cluster that leaves cuts it
    too ([`ClusterLeft`][mcruntime.errors.ClusterLeft]), and its manager's stop (a cluster
    that stopped answering, by the stop's health probe).
    Returns the established CRDs as the server has them.

    Raises [`CRDNotEstablished`][mcruntime.crd.CRDNotEstablished] naming the CRD
    when it is not established in time or its names conflict with another
    CRD's, and the API errors of the writes (e.g. `Invalid` for a CRD the
    server refuses).
    """
    manifests = load_crds(crds)
    client: Client = (
        cluster_or_client if isinstance(cluster_or_client, Client) else cluster_or_client.client
    )
    installer = _Installer(client.rest, time.monotonic() + timeout, timeout, stop)
    with cancelled_by(installer.stop, "install_crds was cancelled"):
        for crd in manifests:
            installer.create_or_update(crd)
        established = [installer.wait_established(crd["metadata"]["name"]) for crd in manifests]
    client.mapper.reset()  # the new kinds are served now; forget discovery that lacked them
    return established


class _Installer:
    """The requests of one install_crds call, each bounded by what is left of its deadline."""

    def __init__(
        self, rest: RESTClient, deadline: float, timeout: float, stop: threading.Event | None
    ) -> None:
        self.rest = rest
        self.deadline = deadline
        self.timeout = timeout
        self.stop = stop if stop is not None else threading.Event()
        self.cluster_name = rest.cluster_name
        self.cluster = display_name(self.cluster_name)
        self.last: dict[str, Any] = {}

    def expired(self, name: str, cause: str = "") -> CRDNotEstablished:
        conditions = (self.last.get("status") or {}).get("conditions") or []
        shown = "; ".join(
            f"{c.get('type')}={c.get('status')}"
            + (f" ({c['message']})" if c.get("message") else "")
            for c in conditions
            if isinstance(c, dict)
        )
        return CRDNotEstablished(
            f"CRD {name} not established within {self.timeout}s"
            + (f"; conditions: {shown}" if shown else "")
            + (f"; last error: {cause}" if cause else ""),
            crd_name=name,
        )

    def request(self, name: str, method: str, path: str, body: Any = None) -> Any:
        if self.stop.is_set():
            raise CRDError(f"installing CRD {name} cancelled")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.expired(name)
        try:
            return self.rest.request(method, path, body=body, timeout=left)
        except Unreachable as exc:
            if self.stop.is_set() and isinstance(exc, DeadlineExceeded):  # cut in flight
                raise CRDError(f"installing CRD {name} cancelled") from exc
            if time.monotonic() >= self.deadline:
                raise self.expired(name, str(exc)) from exc
            raise

    def create_or_update(self, crd: dict[str, Any]) -> None:
        name = crd["metadata"]["name"]
        try:
            self.request(name, "POST", _PATH, crd)
            log.info(
                "cluster=%s: created CRD %s",
                self.cluster,
                name,
                extra=log_fields(cluster=self.cluster_name),
            )
            return
        except AlreadyExists:
            pass
        while True:  # re-read and write again when another writer got in between
            existing = self.request(name, "GET", f"{_PATH}/{name}")
            spec = crd["spec"]
            live = (existing.get("spec") or {}).get("conversion")
            if "conversion" not in spec and live is not None:
                # kept as the cluster has it, as a server-side apply keeps a field another
                # manager set: the conversion webhook a WebhookServer(install=True) points
                # the CRD at; writing None would store objects of the old version unconverted
                spec = {**spec, "conversion": live}
            meta = dict(existing.get("metadata") or {})
            for key in ("labels", "annotations"):
                if crd["metadata"].get(key):
                    meta[key] = {**(meta.get(key) or {}), **crd["metadata"][key]}
            try:
                done = self.request(
                    name,
                    "PUT",
                    f"{_PATH}/{name}",
                    {**existing, "metadata": meta, "spec": spec},
                )
                changed = _rv(done) != _rv(existing)
                log.log(
                    logging.INFO if changed else logging.DEBUG,
                    "cluster=%s: %s CRD %s",
                    self.cluster,
                    "updated" if changed else "unchanged",
                    name,
                    extra=log_fields(cluster=self.cluster_name),
                )
                return
            except Conflict:
                continue

    def wait_established(self, name: str) -> dict[str, Any]:
        """Poll until the CRD is Established and discovery lists it in every served version."""
        interval = _POLL
        self.last = {}
        while True:
            crd: dict[str, Any] = self.request(name, "GET", f"{_PATH}/{name}")
            self.last = crd
            if _condition(crd, "Established").get("status") == "True" and self.discoverable(
                name, crd
            ):
                return crd
            names = _condition(crd, "NamesAccepted")
            if names.get("status") == "False":
                raise CRDNotEstablished(
                    f"CRD {name}: names not accepted: {names.get('reason')}: {names.get('message')}",
                    crd_name=name,
                )
            if self.stop.wait(min(interval, max(0.0, self.deadline - time.monotonic()))):
                raise CRDError(f"installing CRD {name} cancelled")
            interval = min(interval * 2, _MAX_POLL)

    def discoverable(self, name: str, crd: dict[str, Any]) -> bool:
        # kube-apiserver publishes discovery shortly after Established; clients find kinds there
        spec = crd.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural")
        for version in spec.get("versions") or ():
            if not version.get("served", True):
                continue
            try:
                doc = self.request(name, "GET", f"/apis/{spec.get('group')}/{version.get('name')}")
            except NotFound:
                return False
            if plural not in {r.get("name") for r in (doc or {}).get("resources") or ()}:
                return False
        return True
