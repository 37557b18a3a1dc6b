"""``cluster-api``: every initialized Cluster API Cluster of a management cluster is a cluster."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import yaml
from pydantic import field_validator

from mcruntime.cache import Informer, strip_managed_fields
from mcruntime.client import GroupVersionKind, RESTMapping
from mcruntime.cluster import Cluster
from mcruntime.errors import ConfigError
from mcruntime.multicluster import (
    MANAGEMENT_CLUSTER_NAME,
    Clusters,
    ManagementCluster,
    management_list_error,
    wait_for_first_lists,
    wait_until_served,
)
from mcruntime.plugins import (
    FailureStreaks,
    ProviderError,
    ProviderOptions,
    cluster_from_kubeconfig,
    cluster_options_problem,
    dns_label_problems,
    label_selector_problem,
    log_fields,
)

__all__ = [
    "CLUSTER_NAME_LABEL",
    "DEFAULT_UNREADY_GRACE_PERIOD",
    "GROUP",
    "KUBECONFIG_SECRET_KEY",
    "KUBECONFIG_SECRET_SUFFIX",
    "MANAGEMENT_CLUSTER_NAME",
    "VERSIONS",
    "Options",
    "Provider",
    "control_plane_initialized",
]

log = logging.getLogger("mcruntime.providers.cluster_api")

#: what the streaks of a failing ``is_ready`` are about
_READINESS_CHECK = "readiness check (is_ready)"

GROUP = "cluster.x-k8s.io"
#: the Cluster versions understood, in order of preference
VERSIONS = ("v1beta2", "v1beta1")
#: Cluster API keeps a workload cluster's kubeconfig in Secret ``<cluster><suffix>``, key ``value``
KUBECONFIG_SECRET_SUFFIX = "-kubeconfig"
KUBECONFIG_SECRET_KEY = "value"
#: the label Cluster API puts on the Secrets of a cluster (its value: the Cluster's name);
#: only Secrets with it are watched, as Cluster API's own managers cache only those
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
#: seconds an engaged Cluster may stay not ready before it is disengaged
DEFAULT_UNREADY_GRACE_PERIOD = 60.0
#: how long `run` waits for the first lists of Clusters and Secrets before it reports the
#: clusters it has
INITIAL_LIST_TIMEOUT = 30.0

SECRETS = RESTMapping(
    GroupVersionKind("", "v1", "Secret"), "secrets", True, frozenset({"get", "list", "watch"})
)


class Options(ProviderOptions):
    """Which Clusters count, and the management cluster (``kubeconfig``/``context``; default
    kubeconfig, or in-cluster config, when unset)."""

    #: watch Clusters (and their Secrets) in this namespace only; None: all namespaces
    namespace: str | None = None
    #: only Clusters matching this label selector
    label_selector: str | None = None
    #: the Cluster version to watch; None picks v1beta2 when served, else v1beta1
    version: Literal["v1beta2", "v1beta1"] | None = None
    #: seconds an engaged Cluster may stay not ready (``is_ready`` false) before it is disengaged
    unready_grace_period: float = DEFAULT_UNREADY_GRACE_PERIOD
    kubeconfig: str | None = None
    context: str | None = None
    #: a kubeconfig Secret may run an exec plugin (or an auth-provider) in this process
    allow_exec: bool = False
    #: a kubeconfig Secret may name local files (tokenFile, client-key, ...) to read
    allow_files: bool = False

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        problem = _namespace_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("label_selector")
    @classmethod
    def _selector(cls, v: str | None) -> str | None:
        problem = _selector_problem(v)
        if problem:
            raise ValueError(problem)
        return v


def _namespace_problem(namespace: str | None) -> str | None:
    """Why ``namespace`` is not a namespace's name, None when it is one (or None: every one)."""
    problems = [] if namespace is None else dns_label_problems(namespace)
    return (
        f"{namespace!r} is not a valid namespace name: {'; '.join(problems)}" if problems else None
    )


def _selector_problem(selector: str | None) -> str | None:
    """Why ``selector`` is not a label selector (the parser's words), None when it is one."""
    return None if selector is None else label_selector_problem(selector)


def _true_condition(conditions: Any, kind: str) -> bool:
    return any(
        isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
        for c in conditions or ()
    )


def control_plane_initialized(obj: Mapping[str, Any]) -> bool:
    """True once the Cluster's control plane is initialized, in either API version's terms.

    v1beta2: ``status.initialization.controlPlaneInitialized``; v1beta1:
    ``status.controlPlaneReady`` or a ``ControlPlaneInitialized`` condition that is True
    (also looked for under ``status.deprecated.v1beta1``).
    """
    status = obj.get("status") or {}
    if (status.get("initialization") or {}).get("controlPlaneInitialized") is True:
        return True
    if status.get("controlPlaneReady") is True:
        return True
    deprecated = ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions")
    return _true_condition(status.get("conditions"), "ControlPlaneInitialized") or _true_condition(
        deprecated, "ControlPlaneInitialized"
    )


def _keep_kubeconfigs_only(obj: dict[str, Any]) -> dict[str, Any]:
    """Informer transform: Secrets other than kubeconfig Secrets are kept without their data."""
    obj = strip_managed_fields(obj)
    if not obj["metadata"].get("name", "").endswith(KUBECONFIG_SECRET_SUFFIX):
        obj.pop("data", None)
        obj.pop("stringData", None)
    return obj


def _kubeconfig(secret: dict[str, Any], where: str) -> tuple[bytes, dict[str, Any]]:
    """The raw kubeconfig bytes and the parsed mapping; errors never quote the content."""
    data = secret.get("data") or {}
    value = data.get(KUBECONFIG_SECRET_KEY)
    if not value:
        if KUBECONFIG_SECRET_KEY in data:
            raise ConfigError(f"{where}: data key {KUBECONFIG_SECRET_KEY!r} is empty")
        raise ConfigError(f"{where} has no data key {KUBECONFIG_SECRET_KEY!r}")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"{where}: data key {KUBECONFIG_SECRET_KEY!r} is not valid base64"
        ) from None
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(f"{where}: kubeconfig is not valid YAML{at}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: not a kubeconfig (expected a mapping)")
    return raw, doc


class Provider(Clusters):
    """Engages each initialized ``cluster.x-k8s.io`` Cluster of ``management`` as ``<namespace>/<name>``.

    The kubeconfig comes from Secret ``<name>-kubeconfig`` (key ``value``) in
    the Cluster's namespace. Clusters and Secrets are both watched: a Cluster
    engages once its control plane is initialized (``is_ready``, default
    [`control_plane_initialized()`][mcruntime_cluster_api.control_plane_initialized]) and its Secret exists; a changed
    kubeconfig re-engages it (unless only its credentials changed, such as the client
    certificate Cluster API rotates: the engaged cluster takes those in place);
    deleting the Cluster or its Secret disengages it. An
    engaged Cluster that is no longer ready is disengaged once it stayed so for
    ``unready_grace_period`` seconds (as cluster-inventory's unhealthy profiles).
    A broken kubeconfig is logged (never its content) and skipped. When the
    management cluster does not serve the Cluster API CRD yet, the provider
    says so and waits for it. A kubeconfig Secret may not run an exec plugin or
    an auth-provider in this process, nor name local files to read, unless
    ``allow_exec`` or ``allow_files`` says so.
    """

    def __init__(
        self,
        management: Cluster,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        version: str | None = None,
        is_ready: Callable[[Mapping[str, Any]], bool] = control_plane_initialized,
        unready_grace_period: float = DEFAULT_UNREADY_GRACE_PERIOD,
        cluster_options: Mapping[str, Any] | None = None,
        allow_exec: bool = False,
        allow_files: bool = False,
    ) -> None:
        super().__init__("cluster-api")
        if version is not None and version not in VERSIONS:
            raise ValueError(f"version must be one of {', '.join(VERSIONS)}, not {version!r}")
        for option, problem in (
            ("namespace", _namespace_problem(namespace)),
            ("label_selector", _selector_problem(label_selector)),
        ):
            if problem:
                # refused by the API server over and over, or (a namespace that is no name)
                # finding nothing, silently
                raise ValueError(f"provider 'cluster-api': option {option!r}: {problem}")
        problem = cluster_options_problem(
            cluster_options or {}, set_by_provider=("allow_exec", "allow_files")
        )
        if problem:  # else every cluster would fail to build, blamed on its kubeconfig
            raise ValueError(f"provider 'cluster-api': option 'cluster_options': {problem}")
        self.management = management
        self.namespace = namespace
        self.label_selector = label_selector
        self.version = version
        self.is_ready = is_ready
        self.unready_grace_period = float(unready_grace_period)
        self.cluster_options = dict(cluster_options or {})
        self.allow_exec = allow_exec
        self.allow_files = allow_files
        self._management = ManagementCluster(management)
        self._reconcile_lock = threading.Lock()
        self._hashes: dict[str, str] = {}
        self._broken: dict[str, str] = {}
        #: engaged clusters not ready now, and since when (``time.monotonic()``)
        self._unready_since: dict[str, float] = {}
        #: ``is_ready`` calls that raised, a streak per cluster (logged once per streak)
        self._check_streaks = FailureStreaks(
            log, "provider=cluster-api", log_fields(provider="cluster-api")
        )
        self._clusters: Informer | None = None
        self._secrets: Informer | None = None

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        """Build the provider and its own management cluster from ``options``."""
        management = ManagementCluster.from_kubeconfig(options.kubeconfig, options.context)
        provider = cls(
            management.cluster,
            namespace=options.namespace,
            label_selector=options.label_selector,
            version=options.version,
            unready_grace_period=options.unready_grace_period,
            allow_exec=options.allow_exec,
            allow_files=options.allow_files,
        )
        provider._management = management
        return provider

    # -- discovery ------------------------------------------------------------------

    def _cluster_mapping(self, stop: threading.Event) -> RESTMapping | None:
        """The mapping of the Cluster kind, waiting (with backoff) until the CRD is served."""
        versions = (self.version,) if self.version else VERSIONS
        return wait_until_served(
            self.management,
            [f"{GROUP}/{v}/Cluster" for v in versions],
            stop,
            missing=(
                f"the management cluster serves no {GROUP} Cluster "
                f"({' or '.join(versions)}); install Cluster API there"
            ),
            log=log,
            provider="cluster-api",
            # no workload cluster before Cluster API is installed: start() need not wait
            on_missing=self.initial_clusters_reported,
        )

    #: `Manager.start` waits for the workload clusters of the first lists
    reports_initial_clusters = True

    def run(self, stop: threading.Event) -> None:
        self.management = self._management.acquire(stop)
        try:
            mapping = self._cluster_mapping(stop)
            if mapping is None:
                return
            log.info(
                "provider=cluster-api watching %s Clusters in %s",
                mapping.gvk,
                f"namespace {self.namespace}" if self.namespace else "all namespaces",
            )
            name = self.management.name
            self._secrets = Informer(
                self.management.rest,
                SECRETS,
                namespace=self.namespace,
                # not every Secret of the management cluster (Helm releases, tokens) crosses
                # the wire at each list: Cluster API labels its kubeconfig Secrets
                label_selector=CLUSTER_NAME_LABEL,
                transform=_keep_kubeconfigs_only,
                cluster_name=name,
            )
            self._clusters = Informer(
                self.management.rest,
                mapping,
                namespace=self.namespace,
                label_selector=self.label_selector,
                cluster_name=name,
            )
            self._secrets.add_event_handler(_SecretHandler(self))
            self._clusters.add_event_handler(_ClusterHandler(self))
            first_lists = (self._secrets, self._clusters)
            # the handlers engage the first lists' clusters before the informers sync; a
            # management cluster that does not answer holds start() up to its own bound, one
            # that refuses the lists does not. The Secrets are listed first: a ready Cluster
            # looked at before them would be reported as having no kubeconfig Secret
            end = time.monotonic() + INITIAL_LIST_TIMEOUT
            self._management.check_health(self, first_lists)
            self._secrets.start()
            wait_for_first_lists(
                self, first_lists[:1], stop, INITIAL_LIST_TIMEOUT, management=self._management
            )
            self._clusters.start()
            wait_for_first_lists(
                self,
                first_lists,
                stop,
                max(0.0, end - time.monotonic()),
                management=self._management,
            )
            self.initial_clusters_reported()
            # engaged clusters that are not ready are looked at again when their grace
            # period may have ended
            while not stop.wait(min(1.0, max(0.05, self.unready_grace_period / 4))):
                self.discovery_error = management_list_error(first_lists, self._management)
                with self._reconcile_lock:
                    waiting = list(self._unready_since)
                for key in waiting:
                    self.reconcile(key)
        finally:
            for informer in (self._clusters, self._secrets):
                if informer is not None:
                    informer.stop()
            self._clusters = self._secrets = None
            with self._reconcile_lock:
                self._hashes.clear()
                self._broken.clear()
                self._unready_since.clear()
                self._check_streaks.clear()
            self._management.release()

    def reconcile(self, key: str) -> None:
        """Bring cluster ``<namespace>/<name>`` in line with its Cluster object and Secret."""
        with self._reconcile_lock:
            clusters, secrets = self._clusters, self._secrets
            if clusters is None or secrets is None:
                return
            obj = clusters.store.get(key)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                self._check_streaks.forget((key, _READINESS_CHECK))
                if obj is not None:
                    why = "Cluster being deleted"
                elif self.label_selector:
                    why = f"Cluster deleted or no longer matching {self.label_selector!r}"
                else:
                    why = "Cluster deleted"
                self._drop(key, why)
                return
            if not self._ready(key, obj):
                self._not_ready(key)
                return
            if self._unready_since.pop(key, None) is not None:
                log.info(
                    "provider=cluster-api cluster=%s ready again",
                    key,
                    extra=log_fields(provider="cluster-api", cluster=key),
                )
            namespace, _, name = key.partition("/")
            secret_key = f"{namespace}/{name}{KUBECONFIG_SECRET_SUFFIX}"
            where = f"secret {secret_key}"
            secret = secrets.store.get(secret_key)
            if secret is None:
                if key in self._hashes:
                    self._drop(key, f"{where} is gone")
                    self._broken[key] = "no secret"  # said: not again until it exists
                elif self._broken.get(key) != "no secret":
                    # said once, until it exists; not a warning: a Cluster created ready (a
                    # clusterctl move) may come a moment before its Secret
                    self._broken[key] = "no secret"
                    log.info(
                        "provider=cluster-api cluster=%s ready; waiting for its kubeconfig %s "
                        "(labelled %s)",
                        key,
                        where,
                        CLUSTER_NAME_LABEL,
                        extra=log_fields(provider="cluster-api", cluster=key),
                    )
                return
            try:
                raw, doc = _kubeconfig(secret, where)
            except ConfigError as exc:
                self._report_broken(key, str(exc), str(exc))
                return
            content = hashlib.sha256(raw).hexdigest()
            if self._hashes.get(key) == content:
                self._broken.pop(key, None)
                return
            try:
                cluster = cluster_from_kubeconfig(
                    doc,
                    name=key,
                    cluster_options=self.cluster_options,
                    allow_exec=self.allow_exec,
                    allow_files=self.allow_files,
                )
            except (ConfigError, ProviderError) as exc:
                self._report_broken(key, f"{where}: {exc}", content)
                return
            except Exception as exc:
                self._report_broken(
                    key, f"{where}: unusable kubeconfig ({type(exc).__name__})", content
                )
                return
            self._broken.pop(key, None)
            replaced = key in self._hashes
            self._hashes[key] = content
            # a changed one: add() says whether it took new credentials in place (Cluster API
            # rotates client certificates) or engages it again
            log.log(
                logging.DEBUG if replaced else logging.INFO,
                "provider=cluster-api cluster=%s %s from %s",
                key,
                "kubeconfig changed" if replaced else "engaging",
                where,
                extra=log_fields(provider="cluster-api", cluster=key),
            )
            self.add(key, cluster)

    def _ready(self, key: str, obj: dict[str, Any]) -> bool:
        """``is_ready(obj)``; one that raises counts as not ready, and is logged (with its
        traceback: a bug of its code) once until it works again for that Cluster."""
        try:
            ready = bool(self.is_ready(obj))
        except Exception as exc:
            self._check_streaks.failed(
                key,
                _READINESS_CHECK,
                type(exc).__name__,
                retry="treated as not ready",
                traceback=exc,
            )
            return False
        self._check_streaks.recovered(key, _READINESS_CHECK)
        return ready

    def _not_ready(self, key: str) -> None:
        """``key``'s Cluster is not ready: an engaged one is disengaged once it stayed so for
        the grace period."""
        if key not in self._hashes:
            log.debug(
                "provider=cluster-api cluster=%s not ready (yet)",
                key,
                extra=log_fields(provider="cluster-api", cluster=key),
            )
            return
        now = time.monotonic()
        since = self._unready_since.get(key)
        if since is None:
            since = self._unready_since[key] = now
            if self.unready_grace_period > 0:
                log.info(
                    "provider=cluster-api cluster=%s no longer ready; disengaging in %gs unless "
                    "it is ready again",
                    key,
                    self.unready_grace_period,
                    extra=log_fields(provider="cluster-api", cluster=key),
                )
        if now - since >= self.unready_grace_period:
            self._drop(key, f"not ready for {self.unready_grace_period:g}s")

    def _drop(self, key: str, why: str) -> None:
        self._broken.pop(key, None)
        self._unready_since.pop(key, None)
        if self._hashes.pop(key, None) is not None:
            log.info(
                "provider=cluster-api cluster=%s %s: disengaging",
                key,
                why,
                extra=log_fields(provider="cluster-api", cluster=key),
            )
        self.remove(key)

    def _report_broken(self, key: str, reason: str, marker: str) -> None:
        if self._broken.get(key) == marker:
            return
        self._broken[key] = marker
        kept = (
            " (the cluster engaged from its earlier kubeconfig keeps running)"
            if key in self._hashes
            else ""
        )
        log.warning(
            "provider=cluster-api cluster=%s skipped: %s%s",
            key,
            reason,
            kept,
            extra=log_fields(provider="cluster-api", cluster=key),
        )


class _ClusterHandler:
    def __init__(self, provider: Provider) -> None:
        self.p = provider

    def _key(self, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.p.reconcile(self._key(obj))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.p.reconcile(self._key(new))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.p.reconcile(self._key(obj))


class _SecretHandler:
    def __init__(self, provider: Provider) -> None:
        self.p = provider

    def _clusters_of(self, obj: dict[str, Any]) -> list[str]:
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if not name.endswith(KUBECONFIG_SECRET_SUFFIX):
            return []
        return [f"{ns}/{name[: -len(KUBECONFIG_SECRET_SUFFIX)]}"]

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        for key in self._clusters_of(obj):
            self.p.reconcile(key)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for key in self._clusters_of(new):
            self.p.reconcile(key)

    def on_delete(self, obj: dict[str, Any]) -> None:
        for key in self._clusters_of(obj):
            self.p.reconcile(key)
