"""``kind``: each local kind cluster is a cluster, found by polling ``kind get clusters``."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import Field

from mcruntime.errors import ConfigError
from mcruntime.multicluster import Clusters
from mcruntime.plugins import (
    ProviderError,
    ProviderOptions,
    cluster_from_kubeconfig,
    cluster_options_problem,
    log_fields,
)
from mcruntime_kind._cli import KindCLI, KindError, KindNotFound

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_RESYNC", "Options", "Provider"]

log = logging.getLogger("mcruntime.providers.kind")

#: seconds between two ``kind get clusters`` (Go's provider polls every 2 s)
DEFAULT_INTERVAL = 2.0
#: seconds between re-reading the kubeconfig of a known cluster (a cluster recreated under the same name)
DEFAULT_RESYNC = 30.0


class Options(ProviderOptions):
    """How to run kind and which of its clusters count."""

    #: the kind executable: a name looked up on PATH, or a path
    binary: str = "kind"
    #: only clusters whose name starts with this prefix
    prefix: str = ""
    interval: float = Field(
        default=DEFAULT_INTERVAL, gt=0, description="seconds between polls of 'kind get clusters'"
    )
    resync: float = Field(
        default=DEFAULT_RESYNC,
        ge=0,
        description="seconds between re-reads of a known cluster's kubeconfig (0: never)",
    )
    timeout: float = Field(default=30.0, gt=0, description="seconds one kind command may take")
    #: use the address inside the kind network (``kind get kubeconfig --internal``), for a
    #: controller running in a container on that network
    internal: bool = False


class Provider(Clusters):
    """Engages every kind cluster (named as in kind) whose name starts with ``prefix``.

    Polls ``kind get clusters`` every ``interval`` seconds: a new cluster is
    engaged from ``kind get kubeconfig --name <cluster>``, a vanished one is
    disengaged, and a known cluster's kubeconfig is re-read every ``resync``
    seconds so a cluster recreated under the same name is re-engaged. Failing
    kind commands are logged (once per distinct failure) and retried on the
    next poll; clusters already engaged keep running. Raises
    [`KindNotFound`][mcruntime_kind.KindNotFound] at once when kind is not installed.
    """

    def __init__(
        self,
        options: Options | None = None,
        *,
        cluster_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__("kind")
        self.options = options or Options()
        self.cli = KindCLI(self.options.binary, timeout=self.options.timeout)
        problem = cluster_options_problem(cluster_options or {})
        if problem:  # else every kind cluster would fail to build, one by one
            raise ValueError(f"provider 'kind': option 'cluster_options': {problem}")
        self.cli.resolve()
        self.cluster_options = dict(cluster_options or {})
        self._hashes: dict[str, str] = {}
        self._fetched: dict[str, float] = {}
        self._failures: dict[str, str] = {}

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        return cls(options)

    def run(self, stop: threading.Event) -> None:
        log.info(
            "provider=kind polling '%s get clusters' every %gs%s",
            self.options.binary,
            self.options.interval,
            f" (clusters named {self.options.prefix}*)" if self.options.prefix else "",
        )
        try:
            while not stop.is_set():
                try:
                    self.scan(stop)
                except Exception:
                    log.exception("provider=kind scan failed")
                stop.wait(self.options.interval)
        finally:
            self._hashes.clear()
            self._fetched.clear()
            self._failures.clear()

    def _failed(self, key: str, message: str) -> None:
        if self._failures.get(key) != message:
            self._failures[key] = message
            log.warning("provider=kind %s", message)

    def _recovered(self, key: str) -> None:
        if self._failures.pop(key, None) is not None:
            log.info(
                "provider=kind %s works again",
                "listing clusters" if key == "" else f"cluster={key}",
            )

    def scan(self, stop: threading.Event | None = None) -> None:
        """One poll: engage new clusters, re-engage changed ones, disengage vanished ones."""
        try:
            names = self.cli.clusters(stop)
        except (KindError, KindNotFound) as exc:
            if stop is None or not stop.is_set():
                self._failed("", f"cannot list kind clusters: {exc}")
            return
        self._recovered("")
        wanted = [n for n in names if n.startswith(self.options.prefix)]
        now = time.monotonic()
        for name in wanted:
            if stop is not None and stop.is_set():
                return
            known = name in self._hashes
            resync = self.options.resync
            if known and (not resync or now - self._fetched.get(name, now) < resync):
                continue
            self._refresh(name, now, stop)
        gone = set(self._hashes) - set(wanted)
        for name in sorted(gone):
            log.info(
                "provider=kind cluster=%s is gone: disengaging",
                name,
                extra=log_fields(provider="kind", cluster=name),
            )
            self._hashes.pop(name, None)
            self._fetched.pop(name, None)
            self.remove(name)
        for name in set(self._failures) - set(wanted) - {""}:
            self._failures.pop(name, None)

    def _refresh(self, name: str, now: float, stop: threading.Event | None) -> None:
        try:
            raw = self.cli.kubeconfig(name, internal=self.options.internal, stop=stop)
        except (KindError, KindNotFound) as exc:
            if stop is None or not stop.is_set():
                self._failed(name, f"cluster={name} skipped: {exc}")
            return
        content = hashlib.sha256(raw).hexdigest()
        if self._hashes.get(name) == content:
            self._fetched[name] = now
            return
        try:
            doc = yaml.safe_load(raw)
            if not isinstance(doc, dict):
                raise ConfigError("not a kubeconfig mapping")
            cluster = cluster_from_kubeconfig(
                doc,
                name=name,
                cluster_options=self.cluster_options,
                allow_exec=True,  # kind's own kubeconfig, Cluster.from_kubeconfig's defaults
                allow_files=True,
            )
        except yaml.YAMLError:
            self._failed(
                name, f"cluster={name} skipped: 'kind get kubeconfig' printed no valid YAML"
            )
            return
        except ConfigError as exc:
            self._failed(name, f"cluster={name} skipped: unusable kubeconfig from kind: {exc}")
            return
        except ProviderError as exc:
            self._failed(name, f"cluster={name} skipped: {exc}")
            return
        self._recovered(name)
        replaced = name in self._hashes
        self._hashes[name] = content
        self._fetched[name] = now
        # a changed one: add() says whether it took new credentials in place or engages it again
        log.log(
            logging.DEBUG if replaced else logging.INFO,
            "provider=kind cluster=%s %s",
            name,
            "kubeconfig changed" if replaced else "engaging",
            extra=log_fields(provider="kind", cluster=name),
        )
        self.add(name, cluster)
