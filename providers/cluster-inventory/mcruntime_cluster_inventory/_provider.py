"""``cluster-inventory``: one cluster per healthy ClusterProfile of a management cluster."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import ValidationError, field_validator, model_validator

from mcruntime.cache import Informer
from mcruntime.client import GroupVersionKind, RESTMapping
from mcruntime.cluster import Cluster
from mcruntime.errors import ConfigError
from mcruntime.multicluster import (
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
    log_fields,
)
from mcruntime_cluster_inventory._credentials import (
    AccessProvider,
    AccessProviderStrategy,
    CredentialStrategy,
    SecretStrategy,
)

__all__ = [
    "CLUSTER_PROFILES",
    "CONDITION_CONTROL_PLANE_HEALTHY",
    "DEFAULT_UNHEALTHY_GRACE_PERIOD",
    "MANAGEMENT_CLUSTER_NAME",
    "Options",
    "Provider",
    "cluster_name",
    "control_plane_healthy",
]

log = logging.getLogger("mcruntime.providers.cluster_inventory")

#: what the streaks of a failing readiness check are about
_READINESS_CHECK = "readiness check"

#: the condition a profile must have True to be engaged (the default readiness check)
CONDITION_CONTROL_PLANE_HEALTHY = "ControlPlaneHealthy"
#: seconds a profile may be unhealthy before its cluster is disengaged
DEFAULT_UNHEALTHY_GRACE_PERIOD = 60.0
#: how long `run` waits for the first lists of ClusterProfiles (and Secrets) before it
#: reports the clusters it has
INITIAL_LIST_TIMEOUT = 30.0
#: name given to the management cluster the provider builds from its options
MANAGEMENT_CLUSTER_NAME = "management"

CLUSTER_PROFILES = RESTMapping(
    GroupVersionKind("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile"),
    "clusterprofiles",
    True,
    frozenset({"get", "list", "watch"}),
)
SECRETS = RESTMapping(
    GroupVersionKind("", "v1", "Secret"), "secrets", True, frozenset({"get", "list", "watch"})
)


def control_plane_healthy(profile: dict[str, Any]) -> bool:
    """The default readiness check: condition ``ControlPlaneHealthy`` is ``True``."""
    for c in (profile.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == CONDITION_CONTROL_PLANE_HEALTHY:
            return c.get("status") == "True"
    return False


def _namespace_problem(namespace: str | None) -> str | None:
    """Why ``namespace`` is not a namespace's name, None when it is one (or None: every one)."""
    problems = [] if namespace is None else dns_label_problems(namespace)
    return (
        f"{namespace!r} is not a valid namespace name: {'; '.join(problems)}" if problems else None
    )


def cluster_name(namespace: str, name: str) -> str:
    """The cluster's name: ``<namespace>/<name>`` of its ClusterProfile."""
    return f"{namespace}/{name}"


class Options(ProviderOptions):
    """``strategy`` ``secret`` needs ``consumer``; ``access-provider`` needs ``access_providers``.

    ``kubeconfig``/``context`` locate the management cluster (default
    kubeconfig, or in-cluster config, when unset); ``namespace`` limits the
    profiles watched (default: every namespace).
    """

    strategy: Literal["secret", "access-provider"] = "secret"
    consumer: str | None = None
    access_providers: list[AccessProvider] = []
    #: the ClusterProfile API's access-provider file (``{"providers": [...]}``, what Go
    #: consumers read with ``--clusterprofile-provider-file``); its providers follow
    #: ``access_providers``
    access_providers_file: str | None = None
    namespace: str | None = None
    unhealthy_grace_period: float = DEFAULT_UNHEALTHY_GRACE_PERIOD
    kubeconfig: str | None = None
    context: str | None = None
    #: strategy ``secret``: a Secret's kubeconfig may run an exec plugin (or an
    #: auth-provider) in this process
    allow_exec: bool = False
    #: strategy ``secret``: a Secret's kubeconfig may name local files to read
    allow_files: bool = False

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        problem = _namespace_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _strategy_inputs(self) -> Options:
        if self.access_providers_file:
            self.access_providers = [
                *self.access_providers,
                *_read_access_providers(self.access_providers_file),
            ]
        if self.strategy == "secret" and not self.consumer:
            raise ValueError("strategy 'secret' needs consumer (the Secrets' consumer label value)")
        if self.strategy == "access-provider" and not self.access_providers:
            raise ValueError(
                "strategy 'access-provider' needs access_providers (name and exec) or "
                "access_providers_file"
            )
        return self


def _read_access_providers(path: str) -> list[AccessProvider]:
    """The providers of an access-provider file; errors name the file and the entry, never a
    value of it (an env value may be a secret)."""
    where = f"access_providers_file {path!r}"
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"{where} cannot be read: {exc.strerror or type(exc).__name__}") from None
    try:
        doc = yaml.safe_load(text)  # JSON, as the Go package writes it, or YAML
    except yaml.YAMLError:
        raise ValueError(f"{where} is not JSON") from None
    providers = doc.get("providers") if isinstance(doc, dict) else None
    if not isinstance(providers, list):
        raise ValueError(f'{where} has no list "providers" (the access-provider file\'s form)')
    out: list[AccessProvider] = []
    for i, item in enumerate(providers):
        try:
            out.append(AccessProvider.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors()
            )
            raise ValueError(f"{where}: providers[{i}]: {problems}") from None
    return out


def _digest(doc: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()


class Provider(Clusters):
    """Engages the cluster of every ClusterProfile of ``management`` that is ready.

    - ``ready(profile)`` (default `control_plane_healthy`)
      decides when a profile is engaged. A profile that turns unready is
      disengaged once it stayed so for ``unhealthy_grace_period`` seconds; a
      deleted profile is disengaged at once.
    - ``strategy`` turns a profile into a kubeconfig; a changed kubeconfig
      (its sha256) re-engages the cluster, unless only its credentials changed
      (the engaged cluster takes those in place). A profile whose credentials are
      missing or broken is logged once per reason (name and reason, never
      content) and skipped; a cluster engaged before keeps running.
    - ``cluster_options`` are passed to ``Cluster.from_kubeconfig``.
    """

    def __init__(
        self,
        management: Cluster,
        strategy: CredentialStrategy,
        *,
        namespace: str | None = None,
        ready: Callable[[dict[str, Any]], bool] = control_plane_healthy,
        unhealthy_grace_period: float = DEFAULT_UNHEALTHY_GRACE_PERIOD,
        cluster_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__("cluster-inventory")
        problem = _namespace_problem(namespace)
        if problem:
            # a namespace that is no name: its profiles would be none, silently
            raise ValueError(f"provider 'cluster-inventory': option 'namespace': {problem}")
        # allow_exec and allow_files are the strategy's
        problem = cluster_options_problem(
            cluster_options or {}, set_by_provider=("allow_exec", "allow_files")
        )
        if problem:  # else every cluster would fail to build, blamed on its credentials
            raise ValueError(f"provider 'cluster-inventory': option 'cluster_options': {problem}")
        self.management = management
        self.strategy = strategy
        self.namespace = namespace
        self.ready = ready
        self.unhealthy_grace_period = float(unhealthy_grace_period)
        self.cluster_options = dict(cluster_options or {})
        self._management = ManagementCluster(management)
        self._lock = threading.RLock()
        self._profiles: dict[tuple[str, str], dict[str, Any]] = {}
        self._secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self._engaged: dict[str, str] = {}  # cluster name -> kubeconfig digest
        self._unready_since: dict[str, float] = {}
        self._broken: dict[str, str] = {}
        #: failed readiness checks in a row, per cluster (logged once per streak)
        self._check_streaks = FailureStreaks(
            log, "provider=cluster-inventory", log_fields(provider="cluster-inventory")
        )

    @classmethod
    def from_options(cls, options: Options) -> Provider:
        """Build the provider and its own management cluster from ``options``."""
        strategy: CredentialStrategy
        if options.strategy == "secret":
            strategy = SecretStrategy(
                options.consumer or "",
                allow_exec=options.allow_exec,
                allow_files=options.allow_files,
            )
        else:
            strategy = AccessProviderStrategy(options.access_providers)
        management = Cluster.from_kubeconfig(
            options.kubeconfig, context=options.context, name=MANAGEMENT_CLUSTER_NAME
        )
        provider = cls(
            management,
            strategy,
            namespace=options.namespace,
            unhealthy_grace_period=options.unhealthy_grace_period,
        )
        provider._management = ManagementCluster(management, owned=True)
        return provider

    # -- discovery ------------------------------------------------------------------

    #: `Manager.start` waits for the clusters of the ready profiles listed first
    reports_initial_clusters = True

    def _wait_until_served(self, stop: threading.Event) -> bool:
        """Wait (with backoff) until the management cluster serves ClusterProfiles; False once
        ``stop`` is set first.

        While the CRD is not installed there is no profile, so `Manager.start` is not held up:
        the initial clusters (none) are reported at once, and the warning says what to install.
        """
        gvk = CLUSTER_PROFILES.gvk
        mapping = wait_until_served(
            self.management,
            [gvk],
            stop,
            missing=(
                f"the management cluster serves no {gvk.group} ClusterProfile ({gvk.version}); "
                "install the Cluster Inventory API's CRD there "
                "(mcruntime_cluster_inventory.CLUSTER_PROFILE_CRD)"
            ),
            log=log,
            provider="cluster-inventory",
            on_missing=self.initial_clusters_reported,
        )
        return mapping is not None

    def run(self, stop: threading.Event) -> None:
        self.management = self._management.acquire(stop)
        if not self._wait_until_served(stop):
            self._management.release()
            return
        informers = [
            Informer(
                self.management.rest,
                CLUSTER_PROFILES,
                namespace=self.namespace,
                cluster_name=self.management.name,
            )
        ]
        informers[0].add_event_handler(_Handler(self, "profile"))
        if self.strategy.secret_selector is not None:
            secrets = Informer(
                self.management.rest,
                SECRETS,
                namespace=self.namespace,
                label_selector=self.strategy.secret_selector,
                cluster_name=self.management.name,
            )
            secrets.add_event_handler(_Handler(self, "secret"))
            informers.append(secrets)
        log.info(
            "provider=cluster-inventory watching ClusterProfiles in %s",
            self.namespace or "every namespace",
        )
        try:
            # the first lists' ready profiles are engaged by the handlers before the informers
            # sync; a management cluster that does not answer holds start() up to a bound.
            # The Secrets are listed first: a profile looked at before them would be reported
            # as having no Secret (a false warning for every profile at every start)
            # (a management cluster that refuses a list does not hold start() up)
            end = time.monotonic() + INITIAL_LIST_TIMEOUT
            self._management.check_health(self, informers)
            started: list[Informer] = []
            for inf in reversed(informers):
                if stop.is_set():
                    break
                inf.start()
                started.append(inf)
                wait_for_first_lists(
                    self,
                    started,
                    stop,
                    max(0.0, end - time.monotonic()),
                    management=self._management,
                )
            self.initial_clusters_reported()
            # unready profiles are looked at again when their grace period may have ended
            while not stop.wait(min(1.0, max(0.05, self.unhealthy_grace_period / 4))):
                self.discovery_error = management_list_error(informers, self._management)
                with self._lock:
                    waiting = [self._profile_key(n) for n in self._unready_since]
                for key in waiting:
                    self.sync(*key)
        finally:
            for inf in informers:
                inf.stop()
            with self._lock:
                self._profiles.clear()
                self._secrets.clear()
                self._engaged.clear()
                self._unready_since.clear()
                self._broken.clear()
                self._check_streaks.clear()
            self._management.release()

    @staticmethod
    def _profile_key(name: str) -> tuple[str, str]:
        namespace, _, profile = name.partition("/")
        return namespace, profile

    def on_profile(self, obj: dict[str, Any], deleted: bool = False) -> None:
        m = obj.get("metadata") or {}
        key = (m.get("namespace") or "", m.get("name") or "")
        with self._lock:
            if deleted:
                self._profiles.pop(key, None)
            else:
                self._profiles[key] = obj
        self.sync(*key)

    def on_secret(self, obj: dict[str, Any], deleted: bool = False) -> None:
        m = obj.get("metadata") or {}
        key = (m.get("namespace") or "", m.get("name") or "")
        with self._lock:
            old = self._secrets.get(key)
            if deleted:
                self._secrets.pop(key, None)
            else:
                self._secrets[key] = obj
        profiles = {self.strategy.profile_of_secret(s) for s in (old, obj) if s is not None}
        for p in profiles:
            if p:
                self.sync(key[0], p)

    def sync(self, namespace: str, name: str) -> None:
        """Bring the cluster of profile ``namespace/name`` in line with it."""
        cname = cluster_name(namespace, name)
        # one lock for decisions and their effects: engagements follow events in order
        with self._lock:
            profile = self._profiles.get((namespace, name))
            if profile is None or (profile.get("metadata") or {}).get("deletionTimestamp"):
                if self._forget(cname, "ClusterProfile deleted"):
                    self.remove(cname)
            elif self._check(cname, profile):
                cluster = self._credentials(cname, profile)
                if cluster is not None:
                    self.add(cname, cluster)
            elif cname in self._engaged:
                since = self._unready_since.setdefault(cname, time.monotonic())
                expired = time.monotonic() - since >= self.unhealthy_grace_period
                if expired and self._forget(
                    cname, f"unhealthy for {self.unhealthy_grace_period:g}s"
                ):
                    self.remove(cname)

    def _check(self, cname: str, profile: dict[str, Any]) -> bool:
        """Run the readiness check (a failing check counts as not ready).

        A check that fails is logged once until it runs again without failing: an
        engaged profile's check runs again every second or so of its grace period."""
        try:
            ready = bool(self.ready(profile))
        except Exception as exc:
            self._check_streaks.failed(
                cname, _READINESS_CHECK, type(exc).__name__, retry="treated as not ready"
            )
            return False
        self._check_streaks.recovered(cname, _READINESS_CHECK)
        if ready and self._unready_since.pop(cname, None) is not None:
            log.info(
                "provider=cluster-inventory cluster=%s healthy again",
                cname,
                extra=log_fields(provider="cluster-inventory", cluster=cname),
            )
        return ready

    def _credentials(self, cname: str, profile: dict[str, Any]) -> Cluster | None:
        """A new cluster when the profile's kubeconfig is new or changed, else None."""
        try:
            doc = self.strategy.kubeconfig(profile, dict(self._secrets))
            content = _digest(doc)
            if self._engaged.get(cname) == content:
                self._broken.pop(cname, None)
                return None
            cluster = cluster_from_kubeconfig(
                doc,
                name=cname,
                cluster_options=self.cluster_options,
                allow_exec=getattr(self.strategy, "allow_exec", False),
                allow_files=getattr(self.strategy, "allow_files", False),
            )
        except (ConfigError, ProviderError) as exc:
            self._report_broken(cname, str(exc))
            return None
        except Exception as exc:
            self._report_broken(cname, f"unusable credentials ({type(exc).__name__})")
            return None
        self._broken.pop(cname, None)
        replaced = cname in self._engaged
        self._engaged[cname] = content
        # a changed one: add() says whether it took the new credentials in place or engages
        # the cluster again
        log.log(
            logging.DEBUG if replaced else logging.INFO,
            "provider=cluster-inventory cluster=%s %s",
            cname,
            "kubeconfig changed" if replaced else "engaging",
            extra=log_fields(provider="cluster-inventory", cluster=cname),
        )
        return cluster

    def _report_broken(self, cname: str, reason: str) -> None:
        if self._broken.get(cname) == reason:
            return
        self._broken[cname] = reason
        kept = " (the cluster engaged before keeps running)" if cname in self._engaged else ""
        log.warning(
            "provider=cluster-inventory cluster=%s skipped: %s%s",
            cname,
            reason,
            kept,
            extra=log_fields(provider="cluster-inventory", cluster=cname),
        )

    def _forget(self, cname: str, why: str) -> bool:
        """Drop what is known of ``cname``; whether it was engaged (then the caller removes it)."""
        self._broken.pop(cname, None)
        self._unready_since.pop(cname, None)
        self._check_streaks.forget((cname, _READINESS_CHECK))
        if self._engaged.pop(cname, None) is None:
            return False
        log.info(
            "provider=cluster-inventory cluster=%s disengaging: %s",
            cname,
            why,
            extra=log_fields(provider="cluster-inventory", cluster=cname),
        )
        return True


class _Handler:
    def __init__(self, provider: Provider, what: str) -> None:
        self.fn = provider.on_profile if what == "profile" else provider.on_secret

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.fn(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.fn(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.fn(obj, deleted=True)
