"""Opt-in installation of webhook configurations into every engaged cluster, removed when it leaves.

For each engaged cluster the installer writes a MutatingWebhookConfiguration
and a ValidatingWebhookConfiguration named ``options.install_name`` whose
webhooks point at that cluster's own URLs (``/clusters/<name>/...``) with the
server's CA bundle, and sets ``spec.conversion`` of the CRDs that have a
converter. A thread of its own per cluster (``mcruntime/webhook/<cluster>/install``)
retries with backoff until that succeeds (a cluster whose kinds or CRDs are not
there yet), then checks every ``install_resync`` seconds and puts back what was
removed or changed. Between two checks it watches what it installed (each object
by name, from the version the check left it at), so a removed configuration or a
CRD created again without its conversion is put back at once rather than at the
next check. Those watches are read by the thread that reads every watch of the
process (`WatchStream.start`): the install thread only waits for a change, the
next check or its end, and closes its watches at each check. A watch that cannot
be opened or fails leaves the periodic check (once per failure streak in the
log); woken checks that keep putting something back wait longer each time (up
to ``install_resync``), so two writers that undo each other do not loop. An
install waiting for a hung cluster ends when the cluster leaves or the server
stops, and its watches with it. Removal runs on a thread of its own too
(``mcruntime/webhook/<cluster>/uninstall``): a hung cluster that leaves holds no
provider or manager thread while its removal waits out ``install_timeout``; the
next engagement of the same cluster installs after it, and the server's stop waits
for it.

Replicas (and the old and new pods of a rolling update) install the same
objects, so each object records who holds it (annotation ``HOLDERS``). When a
cluster leaves, a replica drops its hold and removes the object only if no
other live replica holds it: nothing of the cluster remains once the last one
is gone (but a CRD's conversion, which stays calling the webhook: strategy None
would serve the CRD's other versions unconverted, and a write through one would
lose the fields its schema lacks), and a replica that stops does not take the
webhooks away from the others. Holds expire unless renewed, so a replica that died without a word
stops counting. Whether another replica's hold expired is judged as client-go's
leader election judges a Lease: from when this replica saw that hold last change,
on its own monotonic clock, plus the hold's duration; never by comparing the
expiry another machine wrote with this machine's clock, so replicas whose clocks
differ neither drop each other's holds nor remove a configuration another holds.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import hashlib
import json
import logging
import os
import random
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcruntime._backoff import Backoff
from mcruntime._kubeconfig import new_api_client
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import RESTClient, RESTMapper, WatchStream
from mcruntime.client import deadline as call_deadline
from mcruntime.errors import AlreadyExists, APIError, Conflict, NotFound

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
#: what the failure streak of its watches is about
_WATCHING = "watching the installed webhook configuration"
#: after a check woken by a change that had to put something back, the next woken check
#: waits at least this long, doubling up to ``install_resync`` while each one puts something
#: back (two writers that undo each other fall back to the periodic check)
_WOKEN_GAP = 0.5
#: how long ending a cluster's install waits for each of its watches to end (they are cut)
_WATCH_JOIN = 1.0
#: the annotation saying which replicas hold an installed object, for how long, and until
#: when by the writer's clock (what 0.1.0 judged holds by)
HOLDERS = "webhook.mcruntime.io/holders"
#: a hold lasts this many ``install_resync`` periods unless renewed (at half of it)
HOLD_PERIODS = 10
#: checks in a row that must find an object as written to end its streak of put-backs
_KEPT = 3
_MERGE = "application/merge-patch+json"
#: how long the server's stop waits for a removal it cut (its calls end at once)
_CUT_JOIN = 1.0
#: how often an install waiting for the removal before it checks whether it was cut
_POLL = 0.1


def _webhook_name(path: str) -> str:
    label = re.sub(r"[^a-z0-9-]", "-", path.strip("/").lower())[:63].strip("-") or "hook"
    return f"{label}.webhook.mcruntime.io"


@dataclass
class _State:
    cluster: Cluster
    #: the install's REST client: closed when the cluster leaves or the server stops, which
    #: cuts an install waiting for a hung cluster (removal uses a client of its own)
    rest: RESTClient
    #: discovery through ``rest``: cut with it
    mapper: RESTMapper
    stop: threading.Event = field(default_factory=threading.Event)
    #: set by a watched change (and by `_cut`): the install thread checks now
    wake: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    #: this round's watches of what was installed (the install thread's own)
    watches: list[WatchStream] = field(default_factory=list)
    #: what it wrote, or may have ("mutating", "validating", "crd:<name>"): the removal's list
    installed: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: checks in a row that had to put an installed object back, per object
    drift: FailureStreaks = field(default_factory=lambda: FailureStreaks(log, "webhook"))
    #: checks in a row that found an object of a drift streak as written
    kept: dict[str, int] = field(default_factory=dict)
    #: the whole configuration was installed (once): what `installed_clusters` reports
    complete: bool = False
    #: the removal of what this engagement installed, once the cluster left
    removal: threading.Thread | None = None
    #: the removal's REST client (set while it runs): closed when the server's stop runs
    #: out of time, which ends a removal waiting for a hung cluster
    removal_rest: RESTClient | None = None
    #: the server's stop ran out of time for the removal: it sends nothing more
    removal_cut: bool = False
    #: the removal of the engagement before this one of the same cluster: installed after it
    after: _State | None = None
    #: called once the removal is over (the manager's hold on the provider's lifetime)
    done: Callable[[], None] | None = None


class Installer:
    """Installs and removes one server's webhook configurations per cluster."""

    def __init__(self, server: WebhookServer) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._clusters: dict[str, _State] = {}
        #: engagements that ended, whose removal runs or ran (by cluster: the last one)
        self._leaving: dict[str, _State] = {}
        self._stopped = False
        #: how many times `wake_all` was called: a round that began before the last one
        #: checks again at once (its wake may have come while it wrote the old bundle)
        self._woken_all = 0
        options = server.options
        self._holds = _Holds(
            options.install_identity or f"{socket.gethostname() or 'unknown'}_{uuid.uuid4()}",
            HOLD_PERIODS * options.install_resync,
        )

    @property
    def identity(self) -> str:
        return self._holds.identity

    def installed(self) -> list[str]:
        with self._lock:
            return sorted(n for n, s in self._clusters.items() if s.complete)

    def wake_all(self) -> None:
        """Check every engaged cluster's installation now (the CA bundle changed)."""
        with self._lock:
            self._woken_all += 1
            states = list(self._clusters.values())
        for s in states:
            s.wake.set()

    def engage(self, name: str, cluster: Cluster) -> None:
        with self._lock:
            old = self._clusters.get(name)
            if old is not None and old.cluster is cluster:
                return
        if old is not None:
            self.disengage(name, old.cluster)
        rest = RESTClient(new_api_client(cluster.config), cluster_name=name)
        state = _State(cluster, rest, RESTMapper(rest))
        with self._lock:
            self._clusters[name] = state
            state.after = self._leaving.get(name)
        with _live_lock:
            _live.add(self._holds.identity)
        state.thread = start_thread(self._run, thread_name("webhook", name, "install"), name, state)

    def disengage(
        self, name: str, cluster: Cluster, *, done: Callable[[], None] | None = None
    ) -> None:
        """The cluster left: its install ends now, and what it installed is removed on a
        thread of its own (a hung cluster's removal takes up to ``install_timeout``);
        ``done`` is called once that removal is over (at once when there is none)."""
        with self._lock:
            state = self._clusters.get(name)
            if state is None or state.cluster is not cluster:
                state = None
            else:
                del self._clusters[name]
                state.done = done
        if state is None:
            if done is not None:
                done()
            return
        _cut(state)  # its calls end at once: the install thread is over in a moment
        if state.thread is not None and state.thread is not threading.current_thread():
            state.thread.join(self._server.options.install_timeout)
        with self._lock:
            if not self._stopped:  # (after stop, nobody would join the thread: removed here)
                state.removal = start_thread(
                    self._end, thread_name("webhook", name, "uninstall"), name, state
                )
                self._leaving[name] = state
        if state.removal is None:
            self._end(name, state)

    def stop(self, timeout: float | None = None) -> None:
        """End every install thread and wait for the removals of the clusters that left,
        within ``timeout`` (default ``install_timeout``); a removal still waiting for its
        cluster then is cut. What was installed is removed by each disengage."""
        with self._lock:
            self._stopped = True
            states = list(self._clusters.values())
        for s in states:
            _cut(s)
        end = time.monotonic() + (
            self._server.options.install_timeout if timeout is None else timeout
        )
        for s in states:
            if s.thread is not None and s.thread is not threading.current_thread():
                s.thread.join(max(0.0, end - time.monotonic()))
        with self._lock:
            leaving: list[_State] = []
            for last in self._leaving.values():
                # with the removals it waits for: a cluster that left, came back and left
                # again while the first removal still waited is held by the last one only
                link: _State | None = last
                while link is not None:
                    leaving.append(link)
                    link = link.after
        for s in leaving:
            _join_removal(s, max(0.0, end - time.monotonic()))
        cut = [s for s in leaving if s.removal is not None and s.removal.is_alive()]
        for s in cut:
            with self._lock:
                s.removal_cut = True
                rest = s.removal_rest
            if rest is not None:
                rest.close()  # its calls end now: the removal says what it left behind
        for s in cut:
            _join_removal(s, _CUT_JOIN)
        with _live_lock:
            _live.discard(self._holds.identity)

    def _end(self, name: str, state: _State) -> None:
        """Remove what ``state``'s engagement installed (the removal thread)."""
        try:
            if state.after is not None:  # the engagement before: its removal first
                _join_removal(state.after, 2 * self._server.options.install_timeout)
            with state.lock:
                if not state.installed:
                    return
                rest = RESTClient(new_api_client(state.cluster.config), cluster_name=name)
                with self._lock:
                    state.removal_rest = rest
                    cut = state.removal_cut
                if cut:  # the server stopped before the removal could begin
                    rest.close()
                try:
                    self._uninstall(name, state, rest)
                finally:
                    rest.close()
        finally:
            with self._lock:
                state.removal_rest = None
                state.after = None  # (a chain of re-engagements holds no old states)
                if self._leaving.get(name) is state:
                    del self._leaving[name]
                done, state.done = state.done, None
            if done is not None:
                done()

    # -- the work ------------------------------------------------------------------------

    def _run(self, name: str, state: _State) -> None:
        after = state.after
        if after is not None:
            # the engagement before this one still removes what it installed: install after it
            while not _join_removal(after, _POLL):
                if state.stop.is_set():
                    return
        try:
            self._rounds(name, state)
        finally:
            _end_watches(state)

    def _rounds(self, name: str, state: _State) -> None:
        """Install, then check at every change watched (or every ``install_resync``)."""
        options = self._server.options
        backoff = Backoff(initial=0.5, maximum=30.0)
        #: the gap before a woken check, after checks that had to put something back
        gap = Backoff(initial=_WOKEN_GAP, maximum=max(_WOKEN_GAP, options.install_resync))
        not_before = 0.0
        streaks = FailureStreaks(log, "webhook")  # this engagement's attempts and watches
        first = True
        #: `wake_all` calls seen by the last check that wrote: a check after a new one (the CA
        #: bundle changed) writes the new bundle, which is no put-back to report
        ca_seen = self._woken_all
        quiet = True
        while not state.stop.is_set():
            watched: list[_Watched] = []
            woken_all = self._woken_all
            try:
                with state.lock, call_deadline(options.install_timeout):
                    if state.stop.is_set():
                        return
                    woken_all = self._woken_all
                    quiet = first or woken_all != ca_seen
                    watched = self._install(name, state, first=quiet)
                    ca_seen = woken_all
                    state.complete = True
                if not streaks.recovered(name, _INSTALLING) and first:
                    log.debug(
                        "cluster=%s webhook configuration installed",
                        display_name(name),
                        extra=log_fields(cluster=name),
                    )
                if quiet or not any(w.wrote for w in watched):
                    gap.reset()
                else:
                    not_before = time.monotonic() + gap.next()
                first = False
                backoff.reset()
                # spread: clusters engaged together do not check together
                wait = options.install_resync * (0.75 + 0.5 * random.random())
            except Exception as exc:
                if state.stop.is_set():  # cut: the cluster left or the server stops
                    return
                streaks.failed(name, _INSTALLING, exc, retry="retrying with backoff")
                wait = backoff.next()
            state.wake.clear()  # (`_cut` sets stop first: seen below)
            if self._woken_all != woken_all:
                state.wake.set()
            if state.stop.is_set():
                return
            failed = self._watch(name, state, watched, wait, streaks) if watched else None
            woken = state.wake.wait(wait)
            _end_watches(state)
            if state.stop.is_set():
                return
            if failed is not None and not failed:  # a round watched through
                streaks.recovered(name, _WATCHING)
            if woken and state.stop.wait(max(0.0, not_before - time.monotonic())):
                return

    def _watch(
        self,
        name: str,
        state: _State,
        watched: list[_Watched],
        wait: float,
        streaks: FailureStreaks,
    ) -> list[BaseException] | None:
        """Watch each installed object from the version the check left it at, until the
        next check: a change wakes the install thread. Each watch is read by the thread
        that reads every watch of the process (no thread of its own); one that cannot be
        opened, or fails, leaves the periodic check (said once per failure streak).

        Returns the list the watches that fail add their errors to (None: not watched)."""
        failed: list[BaseException] = []

        def ended(error: BaseException | None) -> None:
            if error is not None and not state.stop.is_set():
                failed.append(error)
                streaks.failed(name, _WATCHING, error, retry=_PERIODIC)

        query_timeout = int(wait) + 5  # the server ends it soon after the next check
        try:
            with call_deadline(self._server.options.install_timeout):
                for w in watched:
                    if not w.resource_version:  # (from "now", each would wake it at once)
                        continue
                    stream = state.rest.watch(
                        w.collection,
                        query={
                            "fieldSelector": f"metadata.name={w.name}",
                            "resourceVersion": w.resource_version,
                            "timeoutSeconds": query_timeout,
                        },
                    )
                    state.watches.append(stream)
                    if not stream.start(_on_change(state, w), ended):
                        raise _NotShared(f"watch {w.collection}: not readable without a thread")
        except Exception as exc:
            if state.stop.is_set():
                return None
            _end_watches(state)
            if not state.stop.is_set():
                streaks.failed(name, _WATCHING, exc, retry=_PERIODIC)
            return None
        return failed

    def _webhook(self, hook: Hook, name: str, mapper: RESTMapper) -> dict[str, Any]:
        server = self._server
        rules = hook.rules
        if rules is None:
            m = mapper.mapping(hook.kind)
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
            "clientConfig": _client_config(server, server.url_for(hook.path, name)),
            **hook.extra,
        }

    def _install(self, name: str, state: _State, *, first: bool) -> list[_Watched]:
        """Check (and write where needed) everything this cluster should have; returns what
        to watch until the next check."""
        watched: list[_Watched] = []
        deadline = time.monotonic() + self._server.options.install_timeout
        hooks = self._server.hooks()
        cfg_name = self._server.options.install_name
        for mutating, plural in ((True, MUTATING), (False, VALIDATING)):
            entries = [
                self._webhook(h, name, state.mapper)
                for h in hooks
                if h.handler is not None
                and h.mutating == mutating
                and (h.rules is not None or h.kind is not None)
            ]
            if entries:
                kind = (
                    "MutatingWebhookConfiguration"
                    if plural == MUTATING
                    else "ValidatingWebhookConfiguration"
                )
                new = {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": kind,
                    "metadata": {
                        "name": cfg_name,
                        "labels": {"app.kubernetes.io/managed-by": "mcruntime"},
                    },
                    "webhooks": entries,
                }
                collection = f"{ADMISSION_REG}/{plural}"
                with _maybe_written(state, plural):
                    how, rv = self._hold(
                        state.rest,
                        collection,
                        cfg_name,
                        {"webhooks": entries},
                        deadline,
                        create=new,
                    )
                self._said(name, state, plural, how, first)
                state.installed.add(plural)
                watched.append(
                    _Watched(collection, cfg_name, rv, how in _PUT_BACK, wrote=how != "held")
                )
        for h in hooks:
            if h.converter is None:
                continue
            m = state.mapper.mapping(f"{h.converter.group}/{h.converter.hub}/{h.converter.kind}")
            crd = f"{m.resource}.{h.converter.group}"
            conversion = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": _client_config(
                        self._server, self._server.url_for(h.path, name)
                    ),
                    "conversionReviewVersions": ["v1"],
                },
            }
            with _maybe_written(state, "crd:" + crd):
                how, rv = self._hold(
                    state.rest, CRDS, crd, {"spec": {"conversion": conversion}}, deadline
                )
            self._said(name, state, "crd:" + crd, how, first)
            state.installed.add("crd:" + crd)
            watched.append(_Watched(CRDS, crd, rv, how in _PUT_BACK, wrote=how != "held", crd=True))
        return watched

    def _said(self, name: str, state: _State, item: str, how: str, first: bool) -> None:
        """Log a check that put ``item`` back: the first as an info line. When it must be
        put back again before `_KEPT` checks in a row found it as written, something
        writes it back each time (a replica of another version during a rollout, a
        manifest): said once, as a failure streak that ends after `_KEPT` such checks
        (the checks of two replicas interleave, so one such check proves nothing)."""
        what = f"keeping webhook configuration {item} as written"
        if first:
            return
        if how in ("held", "renewed"):
            if state.drift.failures(item):
                state.kept[item] = state.kept.get(item, 0) + 1
                if state.kept[item] >= _KEPT:
                    state.kept.pop(item)
                    n = state.drift.succeed(item)
                    if n > 1:
                        state.drift.log_recovery(n - 1, name, what)
            return
        was = "removed" if how == "created" else "changed"
        state.kept.pop(item, None)
        n = state.drift.fail(item)
        if n == 1:
            log.info(
                "cluster=%s webhook configuration %s put back: it was %s",
                display_name(name),
                item,
                was,
                extra=log_fields(cluster=name),
            )
            return
        state.drift.log_failure(
            n - 1,
            name,
            what,
            f"it was {was} again: something else writes it back (a replica of another "
            "version, a manifest)",
            retry="putting it back at every check",
        )

    def _hold(
        self,
        rest: RESTClient,
        collection: str,
        obj: str,
        section: dict[str, Any],
        deadline: float,
        *,
        create: dict[str, Any] | None = None,
    ) -> tuple[str, str]:
        """Make ``collection/obj`` have ``section`` (what this replica serves, as a merge
        patch: a configuration's ``webhooks``, a CRD's ``spec.conversion``) and hold it.

        ``create`` is the whole object to create when it is missing (a configuration; a
        CRD must exist), its labels kept on every write. Returns what was done:
        ``"held"`` (nothing to write), ``"created"``, ``"changed"`` (the content was
        someone else's or edited) or ``"renewed"``, and the object's resourceVersion then.
        """
        path = f"{collection}/{obj}"
        labels = create["metadata"].get("labels") if create is not None else None
        while True:
            try:
                old = rest.request("GET", path, timeout=_left(deadline))
            except NotFound:
                if create is None:
                    raise
                body = copy.deepcopy(create)
                body["metadata"]["annotations"] = {HOLDERS: _dump(self._holds.claim({}))}
                try:
                    made = rest.request("POST", collection, body=body, timeout=_left(deadline))
                except AlreadyExists:
                    continue
                return "created", _version(made)
            stored, held = self._holds.read(old, rest.cluster_name)
            same = _covers(old, section)
            if same and held == stored and not self._holds.due(held, old, rest.cluster_name):
                return "held", _version(old)
            meta: dict[str, Any] = {
                "resourceVersion": old["metadata"]["resourceVersion"],
                "annotations": {HOLDERS: _dump(self._holds.claim(held))},
            }
            if labels:
                meta["labels"] = labels
            try:
                patched = rest.request(
                    "PATCH",
                    path,
                    body={**section, "metadata": meta},
                    content_type=_MERGE,
                    timeout=_left(deadline),
                )
            except Conflict:
                continue
            return ("renewed" if same else "changed"), _version(patched)

    def _uninstall(self, name: str, state: _State, rest: RESTClient) -> None:
        deadline = time.monotonic() + self._server.options.install_timeout
        left: dict[str, str] = {}
        failed = False
        kept: list[str] = []
        for item in sorted(state.installed):
            try:
                others = self._release(rest, item, deadline)
            except Exception as exc:
                failed = True
                log.warning(
                    "cluster=%s webhook configuration %s not removed: %s: %s",
                    display_name(name),
                    item,
                    type(exc).__name__,
                    exc,
                    extra=log_fields(cluster=name),
                )
                continue
            if others:
                left[item] = ", ".join(sorted(others))
            elif item.startswith("crd:"):
                kept.append(item[4:])
        state.installed.clear()
        self._holds.forget(name)  # (a next engagement installs after this removal)
        if left:
            for item, holders in left.items():
                log.info(
                    "cluster=%s webhook configuration %s left in place: still held by %s",
                    display_name(name),
                    item,
                    holders,
                    extra=log_fields(cluster=name),
                )
        elif not failed:  # (a failed removal was named above: not "removed")
            log.info(
                "cluster=%s webhook configuration removed",
                display_name(name),
                extra=log_fields(cluster=name),
            )
        for crd in kept:
            log.info(
                "cluster=%s webhook: the conversion of CRD %s is left calling this webhook: "
                "its other versions are not served until a converter serves them again "
                "(strategy None would serve them unconverted, and a write through one would "
                "lose the fields its schema lacks)",
                display_name(name),
                crd,
                extra=log_fields(cluster=name),
            )

    def _release(self, rest: RESTClient, item: str, deadline: float) -> list[str]:
        """Drop this replica's hold on ``item``; remove it when nobody else holds it.

        Returns the other holders (empty once removed)."""
        crd = item.startswith("crd:")
        path = (
            f"{CRDS}/{item[4:]}"
            if crd
            else f"{ADMISSION_REG}/{item}/{self._server.options.install_name}"
        )
        while True:
            try:
                old = rest.request("GET", path, timeout=_left(deadline))
            except NotFound:
                return []
            stored, held = self._holds.read(old, rest.cluster_name)
            if self._holds.identity not in stored:
                # not held by this replica (a write that got no answer and was not made, or
                # a hold another replica dropped as expired): not its to change or remove
                return list(held)
            held.pop(self._holds.identity, None)
            rv = old["metadata"]["resourceVersion"]
            try:
                if held:
                    if held != stored:
                        rest.request(
                            "PATCH",
                            path,
                            body={
                                "metadata": {
                                    "resourceVersion": rv,
                                    "annotations": {HOLDERS: _dump(held)},
                                }
                            },
                            content_type=_MERGE,
                            timeout=_left(deadline),
                        )
                    return list(held)
                if crd:
                    # the conversion stays: strategy None would serve the other versions
                    # unconverted, and a client's write through one would store what its
                    # schema keeps of the object (the fields it lacks lost); without the
                    # webhook, they fail until a converter serves them again
                    rest.request(
                        "PATCH",
                        path,
                        body={"metadata": {"resourceVersion": rv, "annotations": {HOLDERS: None}}},
                        content_type=_MERGE,
                        timeout=_left(deadline),
                    )
                else:
                    rest.request(
                        "DELETE",
                        path,
                        body={"preconditions": {"resourceVersion": rv}},
                        timeout=_left(deadline),
                    )
                return []
            except NotFound:
                return []
            except Conflict:
                continue


class _Holds:
    """Who holds an installed object: the annotation ``HOLDERS`` maps each replica's
    identity to its host, pid, how long its hold lasts (``lasts``, seconds) and when it
    expires by the writer's clock (``expires``: what 0.1.0 replicas judge holds by).

    Another replica's hold is judged as client-go's leader election judges a Lease
    ("a client observes timestamps captured locally"): it counts until ``lasts``
    (this replica's own duration for a hold that says none) after this replica saw
    it last change, on the monotonic clock, so no clock skew between replicas drops
    a live hold or keeps a dead one. A hold is renewed when half of it has passed; one
    that expired, or whose process is known to be gone (same host, pid not running, or
    this process with an identity no installer here has), no longer counts.
    """

    def __init__(self, identity: str, lasts: float) -> None:
        self.identity = identity
        self.lasts = lasts
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._lock = threading.Lock()
        #: (cluster, object, kind) -> the hash of the malformed annotation said last
        self._warned: dict[tuple[str, str, str], bytes] = {}
        #: (cluster, object, kind) -> identity -> (its hold as read, when it was first
        #: read so: `time.monotonic`); an object's entry holds only the identities it had
        #: at the last read
        self._seen: dict[tuple[str, str, str], dict[str, tuple[str, float]]] = {}

    def read(self, obj: dict[str, Any], cluster: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
        """The holds as stored, and those that still count.

        The annotation is written by whoever may edit the object (a member cluster's
        admin): a hold that is not as this installer writes it (a host, a pid of this
        range, an expiry) never counts, and is dropped at the next write; said once per
        content, naming ``cluster`` and the object, so no annotation stops the installer
        from putting back or removing its configuration."""
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(HOLDERS)
        try:
            stored = json.loads(raw) if isinstance(raw, str) and raw else {}
        except (ValueError, RecursionError):
            stored = {}
        if not isinstance(stored, dict):
            stored = {}
        bad = sorted(k for k, v in stored.items() if not _well_formed(k, v))
        if bad:
            self._say_bad(cluster, obj, str(raw), len(bad))
        now = time.monotonic()
        seen = self._observe(_where(cluster, obj), stored, now)
        return stored, {
            k: v for k, v in stored.items() if k not in bad and self._counts(k, v, seen[k], now)
        }

    def _observe(
        self, where: tuple[str, str, str], stored: dict[str, Any], now: float
    ) -> dict[str, float]:
        """When each hold of ``stored`` was first read as it is now (``now`` if new)."""
        with self._lock:
            before = self._seen.get(where, {})
            after: dict[str, tuple[str, float]] = {}
            for identity, hold in stored.items():
                text = _dump(hold) if isinstance(hold, dict) else repr(hold)
                last = before.get(identity)
                after[identity] = last if last is not None and last[0] == text else (text, now)
            if after:
                self._seen[where] = after
            else:
                self._seen.pop(where, None)
            return {identity: since for identity, (_, since) in after.items()}

    def forget(self, cluster: str) -> None:
        """Drop what was seen of ``cluster``'s holds (its removal is over): a next
        engagement counts each hold it finds for a whole duration again, and says a
        malformed one again."""
        with self._lock:
            for records in (self._seen, self._warned):
                for where in [w for w in records if w[0] == cluster]:
                    del records[where]

    def _say_bad(self, cluster: str, obj: dict[str, Any], raw: str, count: int) -> None:
        where = _where(cluster, obj)
        digest = hashlib.sha256(raw.encode("utf-8", "replace")).digest()
        with self._lock:
            if self._warned.get(where) == digest:
                return
            self._warned[where] = digest
        log.warning(
            "cluster=%s webhook: %d hold%s of annotation %s on %s %s %s malformed: ignored, "
            "and dropped at the next write",
            display_name(cluster),
            count,
            "" if count == 1 else "s",
            HOLDERS,
            where[2],
            where[1],
            "is" if count == 1 else "are",
            extra=log_fields(cluster=cluster),
        )

    def claim(self, held: dict[str, Any]) -> dict[str, Any]:
        """``held`` with this replica's hold (re)newed."""
        expires = datetime.datetime.fromtimestamp(time.time() + self.lasts, datetime.UTC)
        mine = {
            "host": self.host,
            "pid": self.pid,
            "lasts": self.lasts,
            "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        return {**held, self.identity: mine}

    def due(self, held: dict[str, Any], obj: dict[str, Any], cluster: str = "") -> bool:
        """Whether this replica's hold in ``held`` (read from ``obj`` by `read`) is missing,
        not as this replica writes it, or half gone since this replica saw it written."""
        mine = held.get(self.identity)
        if (
            not isinstance(mine, dict)
            or mine.get("host") != self.host
            or mine.get("pid") != self.pid
            or mine.get("lasts") != self.lasts
        ):
            return True
        with self._lock:
            seen = self._seen.get(_where(cluster, obj), {}).get(self.identity)
        return seen is None or time.monotonic() - seen[1] >= self.lasts / 2

    def _counts(self, identity: str, hold: Any, since: float, now: float) -> bool:
        if identity == self.identity:
            return True
        if not isinstance(hold, dict) or now - since >= _lasts(hold, self.lasts):
            return False
        if hold.get("host") != self.host:
            return True
        pid = hold["pid"]
        if pid == self.pid:
            with _live_lock:
                return identity in _live
        return _running(pid)


def _client_config(server: WebhookServer, url: str) -> dict[str, Any]:
    """The ``clientConfig`` of a hook at ``url``: with the server's CA bundle, when it has
    one (else the API servers' system trust roots verify it)."""
    bundle = server._installed_ca_bundle()
    return {"url": url} if bundle is None else {"url": url, "caBundle": bundle}


def _where(cluster: str, obj: dict[str, Any]) -> tuple[str, str, str]:
    """An object's key in `_Holds`' records: its cluster, name and kind."""
    return (cluster, str((obj.get("metadata") or {}).get("name")), str(obj.get("kind")))


def _lasts(hold: dict[str, Any], default: float) -> float:
    """How long ``hold`` lasts after it was last seen to change: its ``lasts``, or
    ``default`` for a hold written by 0.1.0 (which says none)."""
    lasts = hold.get("lasts")
    return default if lasts is None else float(lasts)


#: identities of the installers of this process (a hold on this host and pid by any
#: other identity is a process that was here before: a restarted container)
_live: set[str] = set()
_live_lock = threading.Lock()


#: the largest pid a Linux kernel hands out (``pid_max`` is at most 2**22)
_MAX_PID = 1 << 22
#: the longest hold ``lasts`` that counts (a year: ``install_resync`` is minutes)
_MAX_LASTS = 366 * 86400


def _well_formed(identity: str, hold: Any) -> bool:
    """Whether ``hold`` is as `_Holds.claim` writes it: a host, a pid, an expiry, and how
    long it lasts (a number of seconds; missing in a hold that 0.1.0 wrote)."""
    return (
        len(identity) <= 512
        and isinstance(hold, dict)
        and isinstance(hold.get("host"), str)
        and len(hold["host"]) <= 255
        and type(hold.get("pid")) is int  # (not True, not a float)
        and 0 < hold["pid"] <= _MAX_PID
        and isinstance(hold.get("expires"), str)
        and len(hold["expires"]) <= 32
        and (
            "lasts" not in hold
            or (
                type(hold["lasts"]) in (int, float) and 0 < hold["lasts"] <= _MAX_LASTS  # (not NaN)
            )
        )
    )


def _running(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill(pid, 0) would send CTRL_C_EVENT
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except OSError:  # EPERM: it runs, as another user
        return True
    return True


def _dump(held: dict[str, Any]) -> str:
    return json.dumps(held, sort_keys=True, separators=(",", ":"))


def _covers(stored: Any, want: Any) -> bool:
    """Whether ``stored`` has every field of ``want`` as wanted (server defaults aside)."""
    if isinstance(want, dict):
        return isinstance(stored, dict) and all(_covers(stored.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(want)
            and all(_covers(s, w) for s, w in zip(stored, want, strict=True))
        )
    return bool(stored == want)


def _cut(state: _State) -> None:
    """End ``state``'s install: no retry, and a call in flight ends now (its watches too)."""
    state.stop.set()
    state.wake.set()
    state.rest.close()


#: what a watch that failed leaves
_PERIODIC = "checking every install_resync seconds until the next check watches again"
#: what `_hold` did when it had to put an object back
_PUT_BACK = ("created", "changed")


@dataclass(frozen=True)
class _Watched:
    """An installed object to watch until the next check, from where that check left it."""

    collection: str
    name: str
    resource_version: str
    #: the check had to put it back
    put_back: bool
    #: the check wrote it (put it back, or renewed or re-added this replica's hold): the
    #: next woken check then waits a while, so replicas that keep dropping each other's
    #: holds fall back to the periodic check
    wrote: bool = True
    #: a CRD: its deletion puts nothing back (its creation again does)
    crd: bool = False


class _NotShared(Exception):
    """A watch's connection cannot be read by the thread that reads every watch."""


def _on_change(state: _State, watched: _Watched) -> Callable[[dict[str, Any]], None]:
    """The event handler of ``watched``'s watch (on the thread that reads every watch: it
    only wakes the install thread)."""

    def on_event(event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "BOOKMARK":
            return
        if watched.crd and (kind == "DELETED" or _terminating(event.get("object"))):
            return  # a CRD on its way out: nothing to put back until it is created again
        if kind == "ERROR":  # (410 Gone: too old a version) the watch ends with it
            raise APIError.from_status(event.get("object") or {})
        state.wake.set()

    return on_event


def _terminating(obj: Any) -> bool:
    return isinstance(obj, dict) and bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _end_watches(state: _State) -> None:
    """Close the install's watches and wait (briefly: they are cut) for them to end."""
    watches, state.watches = state.watches, []
    for w in watches:
        w.close()
    for w in watches:
        w.join(_WATCH_JOIN)


def _version(obj: Any) -> str:
    return str(
        ((obj if isinstance(obj, dict) else {}).get("metadata") or {}).get("resourceVersion") or ""
    )


@contextlib.contextmanager
def _maybe_written(state: _State, item: str) -> Iterator[None]:
    """A write of ``item`` that got no answer (a deadline, a cluster cut off or leaving) may
    still have been made: the removal looks for it too. One the server refused was not."""
    try:
        yield
    except APIError:
        raise
    except Exception:
        state.installed.add(item)
        raise


def _join_removal(state: _State, timeout: float) -> bool:
    """Wait up to ``timeout`` for ``state``'s removal; True once it is over."""
    removal = state.removal
    if removal is None or removal is threading.current_thread():
        return True
    removal.join(timeout)
    return not removal.is_alive()


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())
