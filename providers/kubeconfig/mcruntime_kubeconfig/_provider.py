"""``kubeconfig``: one cluster per labelled Secret holding a kubeconfig, in a management cluster."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import field_validator

from mcruntime.cache import Informer
from mcruntime.client import GroupVersionKind, RESTMapping
from mcruntime.cluster import Cluster
from mcruntime.errors import ConfigError
from mcruntime.multicluster import (
    MANAGEMENT_CLUSTER_NAME,
    Clusters,
    ManagementCluster,
    management_list_error,
    wait_for_first_lists,
)
from mcruntime.plugins import (
    ProviderError,
    ProviderOptions,
    cluster_from_kubeconfig,
    cluster_options_problem,
    dns_label_problems,
    label_key_problems,
    label_value_problems,
    log_fields,
)
from mcruntime_kubeconfig._parse import decode_secret_value, digest, parse_kubeconfig

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_LABEL",
    "DEFAULT_LABEL_VALUE",
    "DEFAULT_NAMESPACE",
    "MANAGEMENT_CLUSTER_NAME",
    "Options",
    "Provider",
    "label_selector",
]

log = logging.getLogger("mcruntime.providers.kubeconfig")

#: label marking a Secret as a kubeconfig for the provider (the Go provider's default)
DEFAULT_LABEL = "sigs.k8s.io/multicluster-runtime-kubeconfig"
#: the label value that counts (as in Go); ``label_value=None`` accepts any value
DEFAULT_LABEL_VALUE = "true"
#: data key holding the kubeconfig
DEFAULT_KEY = "kubeconfig"
DEFAULT_NAMESPACE = "default"
#: how long `run` waits for the first list of Secrets before it reports the clusters it has
INITIAL_LIST_TIMEOUT = 30.0
#: how often `run` brings ``discovery_error`` up to date
_ERROR_CHECK = 1.0

SECRETS = RESTMapping(
    GroupVersionKind("", "v1", "Secret"), "secrets", True, frozenset({"get", "list", "watch"})
)


def _namespace_problem(namespace: str | None) -> str | None:
    """Why ``namespace`` is not a namespace's name, None when it is one (or None: every one)."""
    problems = [] if namespace is None else dns_label_problems(namespace)
    return (
        f"{namespace!r} is not a valid namespace name: {'; '.join(problems)}" if problems else None
    )


#: a Secret's data key (apimachinery's IsConfigMapKey)
_DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _key_problem(key: str) -> str | None:
    """Why ``key`` is not a Secret's data key, None when it is one."""
    if len(key) <= 253 and _DATA_KEY.match(key):
        return None
    return (
        f"{key!r} is not a valid Secret data key: it must be at most 253 alphanumeric "
        "characters, '-', '_' or '.'"
    )


def _label_problem(label: str) -> str | None:
    """Why ``label`` is not a label key, None when it is one."""
    problems = label_key_problems(label)
    return f"{label!r} is not a valid label key: {'; '.join(problems)}" if problems else None


def _label_value_problem(value: str | None) -> str | None:
    """Why ``value`` is not a label value, None when it is one (or None: any value)."""
    problems = [] if value is None else label_value_problems(value)
    return f"{value!r} is not a valid label value: {'; '.join(problems)}" if problems else None


class Options(ProviderOptions):
    """Where the Secrets are and how they are marked; ``kubeconfig``/``context`` locate the
    management cluster (default kubeconfig, or in-cluster config, when unset)."""

    namespace: str = DEFAULT_NAMESPACE
    label: str = DEFAULT_LABEL
    label_value: str | None = DEFAULT_LABEL_VALUE
    key: str = DEFAULT_KEY
    kubeconfig: str | None = None
    context: str | None = None
    #: a Secret's kubeconfig may run an exec plugin (or an auth-provider) in this process
    allow_exec: bool = False
    #: a Secret's kubeconfig may name local files (tokenFile, client-key, ...) to read
    allow_files: bool = False

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        problem = _namespace_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("key")
    @classmethod
    def _data_key(cls, v: str) -> str:
        problem = _key_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("label")
    @classmethod
    def _label_key(cls, v: str) -> str:
        problem = _label_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("label_value")
    @classmethod
    def _label_value(cls, v: str | None) -> str | None:
        problem = _label_value_problem(v)
        if problem:
            raise ValueError(problem)
        return v


def label_selector(label: str, value: str | None) -> str:
    """The label selector matching the provider's Secrets."""
    return label if value is None else f"{label}={value}"


class Provider(Clusters):
    """Engages one cluster per Secret in ``namespace`` of ``management`` labelled ``label``.

    The cluster is named after the Secret and built from the kubeconfig in
    ``data[key]``. A changed kubeconfig (sha256 of its bytes) re-engages the
    cluster, unless only its credentials changed: those the engaged cluster takes
    in place (`Cluster.update_credentials`); deleting the Secret or removing its label disengages it. A Secret
    whose kubeconfig is broken is logged (name and reason, never content) and
    skipped; a cluster it held before keeps running until the Secret is fixed
    or removed. A Secret's kubeconfig may not run an exec plugin or an
    auth-provider in this process, nor name local files to read (anyone who can
    write the Secret could otherwise run commands here, or send the pod's own
    service account token to a server of theirs), unless ``allow_exec`` or
    ``allow_files`` says so. ``cluster_options`` are passed to
    [`from_kubeconfig()`][mcruntime.cluster.Cluster.from_kubeconfig] (e.g. ``cache_options``).
    """

    def __init__(
        self,
        management: Cluster,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        label: str = DEFAULT_LABEL,
        label_value: str | None = DEFAULT_LABEL_VALUE,
        key: str = DEFAULT_KEY,
        cluster_options: Mapping[str, Any] | None = None,
        allow_exec: bool = False,
        allow_files: bool = False,
    ) -> None:
        super().__init__("kubeconfig")
        for option, problem in (
            ("namespace", _namespace_problem(namespace)),
            ("key", _key_problem(key)),
            ("label", _label_problem(label)),
            ("label_value", _label_value_problem(label_value)),
        ):
            if problem:
                # refused by the API server over and over, or (a namespace or key that is no
                # name) finding nothing, silently
                raise ValueError(f"provider 'kubeconfig': option {option!r}: {problem}")
        problem = cluster_options_problem(
            cluster_options or {}, set_by_provider=("allow_exec", "allow_files")
        )
        if problem:  # else every Secret's cluster would fail to build, blamed on the Secret
            raise ValueError(f"provider 'kubeconfig': option 'cluster_options': {problem}")
        self.management = management
        self.namespace = namespace
        self.label = label
        self.label_value = label_value
        self.key = key
        self.allow_exec = allow_exec
        self.allow_files = allow_files
        self.cluster_options = dict(cluster_options or {})
        self._management = ManagementCluster(management)
        self._hashes: dict[str, str] = {}
        self._broken: dict[str, str] = {}

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        """Build the provider and its own management cluster from ``options``."""
        management = ManagementCluster.from_kubeconfig(options.kubeconfig, options.context)
        provider = cls(
            management.cluster,
            namespace=options.namespace,
            label=options.label,
            label_value=options.label_value,
            key=options.key,
            allow_exec=options.allow_exec,
            allow_files=options.allow_files,
        )
        provider._management = management
        return provider

    # -- discovery ------------------------------------------------------------------

    #: `Manager.start` waits for the clusters of the Secrets listed first
    reports_initial_clusters = True

    def run(self, stop: threading.Event) -> None:
        self.management = self._management.acquire(stop)
        informer = Informer(
            self.management.rest,
            SECRETS,
            namespace=self.namespace,
            label_selector=label_selector(self.label, self.label_value),
            cluster_name=self.management.name,
        )
        informer.add_event_handler(_SecretHandler(self))
        log.info(
            "provider=kubeconfig watching secrets in namespace %s with label %s (key %r)",
            self.namespace,
            label_selector(self.label, self.label_value),
            self.key,
        )
        informer.start()
        try:
            self._management.check_health(self, [informer])
            # the first list's Secrets are engaged by the handler before the informer syncs;
            # a management cluster that answers slowly holds start() up to its own bound,
            # one that refuses the list, or fails its health probe (hung, unreachable), does not
            wait_for_first_lists(
                self, [informer], stop, INITIAL_LIST_TIMEOUT, management=self._management
            )
            self.initial_clusters_reported()
            while not stop.wait(_ERROR_CHECK):
                self.discovery_error = management_list_error([informer], self._management)
        finally:
            informer.stop()
            self._hashes.clear()
            self._broken.clear()
            self._management.release()

    def _selected(self, secret: dict[str, Any]) -> bool:
        meta = secret.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("namespace") != self.namespace or self.label not in labels:
            return False
        return self.label_value is None or labels[self.label] == self.label_value

    def sync_secret(self, secret: dict[str, Any]) -> None:
        """Bring the cluster of ``secret`` in line with it: engage, re-engage, disengage or skip."""
        meta = secret["metadata"]
        name = meta["name"]
        where = f"secret {meta.get('namespace')}/{name}"
        if meta.get("deletionTimestamp") or not self._selected(secret):
            self.forget(name)
            return
        try:
            raw = decode_secret_value(secret, self.key)
            if raw is None:
                raise ConfigError(f"has no data key {self.key!r}")
        except ConfigError as exc:
            self._report_broken(name, where, str(exc), f"missing:{exc}")
            return
        content = digest(raw)
        if self._hashes.get(name) == content:
            self._broken.pop(name, None)
            return
        try:
            doc = parse_kubeconfig(raw, where)
            cluster = cluster_from_kubeconfig(
                doc,
                name=name,
                cluster_options=self.cluster_options,
                allow_exec=self.allow_exec,
                allow_files=self.allow_files,
            )
        except (ConfigError, ProviderError) as exc:
            self._report_broken(name, where, str(exc), content)
            return
        except Exception as exc:
            self._report_broken(name, where, f"unusable kubeconfig ({type(exc).__name__})", content)
            return
        if self._broken.pop(name, None) is not None:
            log.info(
                "provider=kubeconfig cluster=%s %s is fixed",
                name,
                where,
                extra=log_fields(provider="kubeconfig", cluster=name),
            )
        replaced = name in self._hashes
        self._hashes[name] = content
        # a changed one: add() says whether it took new credentials in place or engages it again
        log.log(
            logging.DEBUG if replaced else logging.INFO,
            "provider=kubeconfig cluster=%s %s from %s",
            name,
            "kubeconfig changed" if replaced else "engaging",
            where,
            extra=log_fields(provider="kubeconfig", cluster=name),
        )
        self.add(name, cluster)

    def _report_broken(self, name: str, where: str, reason: str, marker: str) -> None:
        if self._broken.get(name) == marker:
            return
        self._broken[name] = marker
        kept = (
            " (the cluster engaged from its earlier content keeps running)"
            if name in self._hashes
            else ""
        )
        log.warning(
            "provider=kubeconfig cluster=%s %s skipped: %s%s",
            name,
            where,
            reason,
            kept,
            extra=log_fields(provider="kubeconfig", cluster=name),
        )

    def forget(self, name: str) -> None:
        """Disengage the cluster of Secret ``name`` (deleted or no longer labelled)."""
        self._broken.pop(name, None)
        if self._hashes.pop(name, None) is not None:
            log.info(
                "provider=kubeconfig cluster=%s secret gone or unlabelled: disengaging",
                name,
                extra=log_fields(provider="kubeconfig", cluster=name),
            )
        self.remove(name)


class _SecretHandler:
    def __init__(self, provider: Provider) -> None:
        self.p = provider

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.p.sync_secret(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.p.sync_secret(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.p.forget(obj["metadata"]["name"])
