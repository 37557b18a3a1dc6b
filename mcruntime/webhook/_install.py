"""Opt-in installation of webhook configurations into every engaged cluster, removed when it leaves.

For each engaged cluster the installer writes a MutatingWebhookConfiguration
and a ValidatingWebhookConfiguration named ``options.install_name`` whose
webhooks point at that cluster's own URLs (``/clusters/<name>/...``) with the
server's CA bundle, and sets ``spec.conversion`` of the CRDs that have a
converter. A cluster whose kinds or CRDs are not there yet is retried with
backoff in a thread of its own (``mcruntime/webhook/<cluster>/install``) until
it succeeds or the cluster leaves. When the cluster leaves, what was installed
is removed (bounded by ``install_timeout``): nothing of it remains.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcruntime._backoff import Backoff
from mcruntime._kubeconfig import new_api_client
from mcruntime._local import display_name
from mcruntime._streak import FailureStreaks
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import RESTClient
from mcruntime.errors import NotFound

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster
    from mcruntime.webhook._server import Hook, WebhookServer

__all__ = ["Installer"]

log = logging.getLogger("mcruntime.webhook")

ADMISSION_REG = "/apis/admissionregistration.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
#: what an install thread's failure streak is about
_INSTALLING = "installing the webhook configuration"


def _webhook_name(path: str) -> str:
    label = re.sub(r"[^a-z0-9-]", "-", path.strip("/").lower())[:63].strip("-") or "hook"
    return f"{label}.webhook.mcruntime.io"


@dataclass
class _State:
    cluster: Cluster
    #: a REST client of our own: removal still works while the provider stops the cluster
    rest: RESTClient
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    installed: set[str] = field(default_factory=set)  # "mutating", "validating", "crd:<name>"
    lock: threading.Lock = field(default_factory=threading.Lock)


class Installer:
    """Installs and removes one server's webhook configurations per cluster."""

    def __init__(self, server: WebhookServer) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._clusters: dict[str, _State] = {}

    def installed(self) -> list[str]:
        with self._lock:
            return sorted(n for n, s in self._clusters.items() if s.installed)

    def engage(self, name: str, cluster: Cluster) -> None:
        with self._lock:
            old = self._clusters.get(name)
            if old is not None and old.cluster is cluster:
                return
        if old is not None:
            self.disengage(name, old.cluster)
        state = _State(cluster, RESTClient(new_api_client(cluster.config), cluster_name=name))
        with self._lock:
            self._clusters[name] = state
        state.thread = start_thread(self._run, thread_name("webhook", name, "install"), name, state)

    def disengage(self, name: str, cluster: Cluster) -> None:
        with self._lock:
            state = self._clusters.get(name)
            if state is None or state.cluster is not cluster:
                return
            del self._clusters[name]
        self._end(name, state)

    def stop(self) -> None:
        """End every install thread (what was installed is removed by each disengage)."""
        with self._lock:
            states = list(self._clusters.values())
        for s in states:
            s.stop.set()
            if s.thread is not None and s.thread is not threading.current_thread():
                s.thread.join(self._server.options.install_timeout)

    def _end(self, name: str, state: _State) -> None:
        state.stop.set()
        if state.thread is not None and state.thread is not threading.current_thread():
            state.thread.join(self._server.options.install_timeout)
        with state.lock:
            try:
                self._uninstall(name, state)
            finally:
                state.rest.close()

    # -- the work ------------------------------------------------------------------------

    def _run(self, name: str, state: _State) -> None:
        backoff = Backoff(initial=0.5, maximum=30.0)
        streaks = FailureStreaks(log, "webhook")  # this engagement's attempts
        while not state.stop.is_set():
            try:
                with state.lock:
                    if state.stop.is_set():
                        return
                    self._install(name, state)
                if not streaks.recovered(name, _INSTALLING):
                    log.debug("cluster=%s webhook configuration installed", display_name(name))
                return
            except Exception as exc:
                streaks.failed(name, _INSTALLING, exc, retry="retrying with backoff")
            if state.stop.wait(backoff.next()):
                return

    def _webhook(self, hook: Hook, name: str, cluster: Cluster) -> dict[str, Any]:
        server = self._server
        rules = hook.rules
        if rules is None:
            m = cluster.rest_mapper.mapping(hook.kind)
            rules = [
                {
                    "apiGroups": [m.gvk.group],
                    "apiVersions": [m.gvk.version],
                    "resources": [m.resource],
                    "operations": list(hook.operations),
                    "scope": "Namespaced" if m.namespaced else "Cluster",
                }
            ]
        return {
            "name": _webhook_name(hook.path),
            "admissionReviewVersions": ["v1"],
            "sideEffects": hook.side_effects,
            "failurePolicy": hook.failure_policy,
            "timeoutSeconds": hook.timeout_seconds,
            "rules": rules,
            "clientConfig": {
                "url": server.url_for(hook.path, name),
                "caBundle": base64.b64encode(server.ca_bundle).decode(),
            },
            **hook.extra,
        }

    def _install(self, name: str, state: _State) -> None:
        cluster, timeout = state.cluster, self._server.options.install_timeout
        deadline = time.monotonic() + timeout
        hooks = self._server.hooks()
        for mutating, plural in ((True, MUTATING), (False, VALIDATING)):
            entries = [
                self._webhook(h, name, cluster)
                for h in hooks
                if h.handler is not None
                and h.mutating == mutating
                and (h.rules is not None or h.kind is not None)
            ]
            if entries:
                self._put(state.rest, plural, entries, deadline)
                state.installed.add(plural)
        for h in hooks:
            if h.converter is None:
                continue
            m = cluster.rest_mapper.mapping(
                f"{h.converter.group}/{h.converter.hub}/{h.converter.kind}"
            )
            crd = f"{m.resource}.{h.converter.group}"
            conversion = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "url": self._server.url_for(h.path, name),
                        "caBundle": base64.b64encode(self._server.ca_bundle).decode(),
                    },
                    "conversionReviewVersions": ["v1"],
                },
            }
            state.rest.request(
                "PATCH",
                f"{CRDS}/{crd}",
                body={"spec": {"conversion": conversion}},
                content_type="application/merge-patch+json",
                timeout=_left(deadline),
            )
            state.installed.add("crd:" + crd)

    def _put(
        self, rest: RESTClient, plural: str, entries: list[dict[str, Any]], deadline: float
    ) -> None:
        kind = (
            "MutatingWebhookConfiguration"
            if plural == MUTATING
            else "ValidatingWebhookConfiguration"
        )
        cfg_name = self._server.options.install_name
        body: dict[str, Any] = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": cfg_name, "labels": {"app.kubernetes.io/managed-by": "mcruntime"}},
            "webhooks": entries,
        }
        path = f"{ADMISSION_REG}/{plural}"
        try:
            old = rest.request("GET", f"{path}/{cfg_name}", timeout=_left(deadline))
        except NotFound:
            rest.request("POST", path, body=body, timeout=_left(deadline))
            return
        body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        rest.request("PUT", f"{path}/{cfg_name}", body=body, timeout=_left(deadline))

    def _uninstall(self, name: str, state: _State) -> None:
        if not state.installed:
            return
        deadline = time.monotonic() + self._server.options.install_timeout
        rest = state.rest
        for item in sorted(state.installed):
            try:
                if item.startswith("crd:"):
                    rest.request(
                        "PATCH",
                        f"{CRDS}/{item[4:]}",
                        body={"spec": {"conversion": {"strategy": "None", "webhook": None}}},
                        content_type="application/merge-patch+json",
                        timeout=_left(deadline),
                    )
                else:
                    rest.request(
                        "DELETE",
                        f"{ADMISSION_REG}/{item}/{self._server.options.install_name}",
                        timeout=_left(deadline),
                    )
            except NotFound:
                pass
            except Exception as exc:
                log.warning(
                    "cluster=%s webhook configuration %s not removed: %s: %s",
                    display_name(name),
                    item,
                    type(exc).__name__,
                    exc,
                )
        state.installed.clear()
        log.info("cluster=%s webhook configuration removed", display_name(name))


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())
