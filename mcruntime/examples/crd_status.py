"""A custom resource in the management cluster runs a Job in every cluster and rolls up their states.

    python -m mcruntime.examples.crd_status          # embedded management server + fleet, simulated Jobs
    python -m mcruntime.examples.crd_status --kubeconfig ~/.kube/config --provider kind

A ``FleetJob`` (``example.mcruntime.io/v1alpha1``; this program installs its CRD, generated
from the pydantic model ``FleetJob`` by ``mcruntime.crd``)
lives in the local (management) cluster. For each one, a batch/v1 Job made
from its ``spec.jobTemplate`` runs in every provider cluster, in the same
namespace and name (a cluster where the namespace is missing waits for it; a
cluster joining while the FleetJob runs gets its Job too). The Jobs' states
are rolled up into the FleetJob's status: ``phase`` is ``Running`` until every
Job succeeded (``Succeeded``) or one failed (``Failed``, with the failing
cluster named in ``message`` and ``failedClusters``); ``clusters`` lists each
cluster's Job state. ``Succeeded`` and ``Failed`` are final, as for a Job.
Clusters that leave before the FleetJob finishes drop out of the roll-up; a cluster of the
fleet not engaged (down since the start) is in it as ``Unknown``, so the FleetJob is not
``Succeeded`` without it.

Each Job records its FleetJob as its cross-cluster owner
(``mcruntime.controllerutil.set_cross_cluster_owner``): a Job changed or
deleted by hand brings its FleetJob back to the reconciler, and the
manager's ``CrossClusterGarbageCollector`` deletes the Jobs everywhere when
the FleetJob is deleted, keeping the FleetJob until they are gone (propagation
``Foreground``, finalizer ``mcruntime.io/foreground-deletion``). The example
has no clean-up code of its own.

Without ``--kubeconfig``/``--context`` the management cluster is an embedded
API server started here and a scenario plays on it. Embedded API servers run
no Job controller and no kubelet, so with the ``embedded`` provider (or
``--simulate-jobs``) a SIMULATED kubelet marks each Job running, then
succeeded or failed: a Job fails in the clusters its annotation
``simulation.example.mcruntime.io/fail-in`` names. Nothing runs for real.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

import mcruntime
from mcruntime import Request, Result
from mcruntime.cli import NO_PROVIDER, add_arguments, provider_from_args, setup_logging
from mcruntime.client import Model, Resource
from mcruntime.controllerutil import (
    FINALIZER_FOREGROUND,
    CrossClusterGarbageCollector,
    set_cross_cluster_owner,
    set_cross_cluster_propagation,
)
from mcruntime.crd import CRDOptions, PrinterColumn, generate_crd, install_crds
from mcruntime.errors import (
    AlreadyExists,
    ClusterNotFound,
    FleetNotKnown,
    MCRuntimeError,
    NotFound,
)
from mcruntime.event import meta as _meta
from mcruntime.examples._demo import run_demo, say
from mcruntime.handler import (
    enqueue_request_for_cross_cluster_owner,
    enqueue_request_for_object,
    enqueue_requests_from_map_func,
)
from mcruntime.multicluster import LOCAL
from mcruntime.predicate import Funcs, label_selector

__all__ = [
    "CRD",
    "FINALIZER",
    "FLEETJOB",
    "FLEETJOB_ANNOTATION",
    "MANAGED_LABEL",
    "FleetJob",
    "FleetJobReconciler",
    "SimulatedKubelet",
    "build",
    "ensure_crd",
    "job_for",
    "job_phase",
    "main",
    "roll_up",
]

log = logging.getLogger("crd_status")

GROUP = "example.mcruntime.io"
VERSION = "v1alpha1"
FLEETJOB = f"{GROUP}/{VERSION}/FleetJob"
JOB = "batch/v1/Job"
#: on every Job a FleetJob created (value "true"); the Job watch selects on it
MANAGED_LABEL = f"{GROUP}/fleetjob"
#: on every Job a FleetJob created: ``<namespace>/<name>`` of the FleetJob
FLEETJOB_ANNOTATION = f"{GROUP}/fleetjob"
#: on a FleetJob: its Jobs may still exist somewhere (the cross-cluster garbage collector's)
FINALIZER = FINALIZER_FOREGROUND
#: seconds between two passes of the garbage collector over a cluster
GC_INTERVAL = 0.5
#: simulation only: the clusters (comma-separated) where the Job fails
FAIL_IN_ANNOTATION = "simulation.example.mcruntime.io/fail-in"
#: simulation only: how long the Job "runs" (seconds)
RUN_SECONDS_ANNOTATION = "simulation.example.mcruntime.io/run-seconds"
FINAL = ("Succeeded", "Failed")


class FleetJobSpec(Model):
    job_template: dict[str, Any] = Field(
        description="a batch/v1 JobTemplateSpec: metadata and spec of each Job"
    )


class ClusterJobState(Model):
    """The state of the FleetJob's Job in one cluster."""

    name: str | None = None
    phase: str | None = None
    message: str | None = None


class FleetJobStatus(Model):
    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = None
    message: str | None = None
    observed_generation: int | None = None
    succeeded: int | None = None
    total: int | None = None
    failed_clusters: list[str] | None = None
    clusters: list[ClusterJobState] | None = None


class FleetJob(Resource):
    """A Job run in every cluster of the fleet, its states rolled up into the status."""

    api_version: ClassVar[str] = f"{GROUP}/{VERSION}"
    kind: ClassVar[str] = "FleetJob"
    crd_options: ClassVar[CRDOptions] = CRDOptions(
        short_names=("fj",),
        printer_columns=(
            PrinterColumn(name="Phase", json_path=".status.phase"),
            PrinterColumn(name="Message", json_path=".status.message"),
        ),
    )
    spec: FleetJobSpec
    status: FleetJobStatus | None = None


#: the FleetJob CustomResourceDefinition, generated from the model
CRD: dict[str, Any] = generate_crd(FleetJob)


def _key(obj: dict[str, Any]) -> str:
    m = _meta(obj)
    return f"{m.get('namespace')}/{m.get('name')}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ensure_crd(cluster: mcruntime.Cluster, timeout: float = 30.0) -> None:
    """Install (or update) the FleetJob CRD and wait until it is established."""
    install_crds(cluster, [CRD], timeout=timeout)


def job_for(fleetjob: dict[str, Any]) -> dict[str, Any]:
    """The Job a FleetJob runs in each cluster: its jobTemplate, same namespace and name."""
    template = (fleetjob.get("spec") or {}).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    m = _meta(fleetjob)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": m["name"],
            "namespace": m["namespace"],
            "labels": {**(tmeta.get("labels") or {}), MANAGED_LABEL: "true"},
            "annotations": {
                **(tmeta.get("annotations") or {}),
                FLEETJOB_ANNOTATION: _key(fleetjob),
            },
        },
        "spec": template.get("spec") or {},
    }


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_ and c.get("status") == "True":
            return dict(c)
    return None


def job_phase(job: dict[str, Any]) -> tuple[str, str]:
    """``(phase, message)`` of a Job: Succeeded, Failed, Running or Pending."""
    if _condition(job, "Complete") is not None:
        return "Succeeded", ""
    failed = _condition(job, "Failed")
    if failed is not None:
        return "Failed", ": ".join(p for p in (failed.get("reason"), failed.get("message")) if p)
    status = job.get("status") or {}
    if status.get("active") or status.get("startTime"):
        return "Running", ""
    return "Pending", ""


def roll_up(rows: list[dict[str, str]], generation: int) -> dict[str, Any]:
    """A FleetJob's status from its clusters' rows ``{"name", "phase", "message"}``."""
    rows = sorted(rows, key=lambda r: r["name"])
    failed = [r for r in rows if r["phase"] == "Failed"]
    succeeded = sum(1 for r in rows if r["phase"] == "Succeeded")
    if failed:
        phase = "Failed"
        message = "; ".join(
            f"job failed in cluster {r['name']}" + (f": {r['message']}" if r["message"] else "")
            for r in failed
        )
    elif not rows:
        phase, message = "Pending", "no cluster engaged"
    elif succeeded == len(rows):
        phase, message = "Succeeded", f"job succeeded in all {len(rows)} clusters"
    else:
        phase, message = "Running", f"{succeeded}/{len(rows)} clusters succeeded"
    return {
        "phase": phase,
        "message": message,
        "observedGeneration": generation,
        "succeeded": succeeded,
        "total": len(rows),
        "failedClusters": [r["name"] for r in failed],
        "clusters": rows,
    }


class FleetJobReconciler:
    """Reconciles FleetJobs of the local cluster; map functions turn remote events into their requests."""

    def __init__(
        self,
        mgr: mcruntime.Manager,
        out: Any = None,
        collector: CrossClusterGarbageCollector | None = None,
    ) -> None:
        self.mgr = mgr
        self.out = out
        self.collector = collector

    def _say(self, line: str) -> None:
        say(line, self.out)

    # -- map functions (informer threads: cache reads only) -------------------------

    def fleetjob_of_job(self, job: dict[str, Any]) -> list[Request]:
        """A Job's event -> its FleetJob's request in the local cluster, from its annotation.

        The controller follows the cross-cluster owner record instead
        (``enqueue_request_for_cross_cluster_owner``); kept for callers of this method.
        """
        key = (_meta(job).get("annotations") or {}).get(FLEETJOB_ANNOTATION, "")
        namespace, sep, name = key.partition("/")
        return [Request(namespace, name, LOCAL)] if sep and name else []

    def fleetjobs_in_namespace(self, namespace: dict[str, Any]) -> list[Request]:
        """A namespace appearing in a provider cluster (also when the cluster joins) -> its FleetJobs."""
        ns = _meta(namespace).get("name") or ""
        try:
            items = self.mgr.get_cluster(LOCAL).client.list(FLEETJOB, ns)
        except MCRuntimeError as exc:
            log.warning("cannot list FleetJobs in namespace %s: %s", ns, exc)
            return []
        return [Request(ns, _meta(f)["name"], LOCAL) for f in items]

    # -- reconcile --------------------------------------------------------------------

    def reconcile(self, req: Request) -> Result | None:
        if req.cluster_name != LOCAL:
            return None
        local = self.mgr.get_cluster(LOCAL)
        try:
            fj = local.client.get(FLEETJOB, req.name, req.namespace)
        except NotFound:
            return None
        meta = _meta(fj)
        if meta.get("deletionTimestamp"):
            # the garbage collector deletes the Jobs, then lets the FleetJob go
            if self.collector is not None:
                self.collector.trigger()
            return None
        if set_cross_cluster_propagation(fj, "Foreground"):
            fj = local.client.update(fj)
        status = fj.get("status") or {}
        if status.get("phase") in FINAL:
            return None
        try:
            fleet = self.mgr.fleet_clusters()  # every member, engaged or not
        except FleetNotKnown:
            return Result(requeue_after=1.0)  # just started: the provider has not named them all
        engaged = self.mgr.engaged_clusters()
        rows = []
        for name in fleet:
            if name not in engaged:  # down since the start, or syncing: its Job is not known
                rows.append({"name": name, "phase": "Unknown", "message": "cluster not engaged"})
                continue
            try:
                rows.append(self._observe(name, fj))
            except ClusterNotFound:
                continue
            except MCRuntimeError as exc:
                rows.append({"name": name, "phase": "Unknown", "message": str(exc)})
        new = roll_up(rows, int(meta.get("generation") or 0))
        if new != status:
            local.client.patch_status(FLEETJOB, req.name, {"status": new}, req.namespace)
            states = ", ".join(f"{r['name']}={r['phase']}" for r in new["clusters"]) or "-"
            self._say(
                f"cluster=local fleetjob {req.key}: {new['phase']} ({states}) {new['message']}"
            )
        return None

    def _observe(self, cluster_name: str, fj: dict[str, Any]) -> dict[str, str]:
        """The state of the FleetJob's Job in one cluster, creating the Job when missing."""
        client = self.mgr.get_cluster(cluster_name).client
        key = _key(fj)
        namespace, name = _meta(fj)["namespace"], _meta(fj)["name"]
        row = {"name": cluster_name, "phase": "Pending", "message": ""}
        try:
            job = client.get(JOB, name, namespace)
        except NotFound:
            job = job_for(fj)
            set_cross_cluster_owner(LOCAL, fj, job)
            try:
                client.create(job)
            except AlreadyExists:
                return row  # the cache lags behind; the Job's event brings the FleetJob back here
            except NotFound:
                row["message"] = f"namespace {namespace} missing"
                return row
            self._say(f"cluster={cluster_name} fleetjob {key}: job created")
            return row
        if (_meta(job).get("annotations") or {}).get(FLEETJOB_ANNOTATION) != key:
            return {
                "name": cluster_name,
                "phase": "Failed",
                "message": f"job {key} exists and is not this FleetJob's",
            }
        row["phase"], row["message"] = job_phase(job)
        return row


def build(mgr: mcruntime.Manager, out: Any = None) -> mcruntime.Controller:
    """The controller: FleetJobs in the local cluster, Jobs and namespaces in the provider clusters.

    Also adds the cross-cluster garbage collector that deletes a FleetJob's Jobs.
    """
    collector = CrossClusterGarbageCollector(
        mgr, owner_kinds=[FLEETJOB], dependent_kinds=[JOB], interval=GC_INTERVAL
    )
    mgr.add(collector)
    r = FleetJobReconciler(mgr, out, collector)

    def local(name: str) -> bool:
        return name == LOCAL

    def remote(name: str) -> bool:
        return name != LOCAL

    created = Funcs(update=lambda e: False, delete=lambda e: False, generic=lambda e: False)
    return (
        mcruntime.controller_managed_by(mgr)
        .named("fleetjobs")
        .watches(FLEETJOB, enqueue_request_for_object(), cluster_filter=local)
        .watches(
            JOB,
            enqueue_request_for_cross_cluster_owner(FLEETJOB),
            label_selector({MANAGED_LABEL: "true"}),
            cluster_filter=remote,
        )
        .watches(
            "v1/Namespace",
            enqueue_requests_from_map_func(r.fleetjobs_in_namespace, cross_cluster=True),
            created,
            cluster_filter=remote,
        )
        .engage_with_local_cluster()
        .complete(r.reconcile)
    )


# -- simulation and demo scenario --------------------------------------------------------


class SimulatedKubelet:
    """SIMULATION: plays job controller and kubelet for the embedded clusters, which have neither.

    Every ``interval`` seconds it marks new managed Jobs running, and Jobs that
    ran ``run-seconds`` (annotation, default 1) succeeded, or failed in the
    clusters named by the ``fail-in`` annotation. It writes Job status only.
    """

    def __init__(self, mgr: mcruntime.Manager, out: Any = None, interval: float = 0.2) -> None:
        self.mgr = mgr
        self.out = out
        self.interval = interval
        self._started: dict[tuple[str, str], float] = {}

    def _say(self, line: str) -> None:
        say(line, self.out)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            for name in self.mgr.engaged_clusters():
                try:
                    self._step(name)
                except MCRuntimeError as exc:
                    log.debug("simulation: cluster=%s step failed: %s", name, exc)

    def _step(self, cluster_name: str) -> None:
        cluster = self.mgr.get_cluster(cluster_name)
        jobs = cluster.api_reader.list(JOB, labels={MANAGED_LABEL: "true"})
        present = {(cluster_name, _meta(j)["uid"]) for j in jobs}
        for ident in [i for i in self._started if i[0] == cluster_name and i not in present]:
            del self._started[ident]
        for job in jobs:
            meta = _meta(job)
            if job_phase(job)[0] in FINAL:
                continue
            ident = (cluster_name, meta["uid"])
            key = _key(job)
            annotations = meta.get("annotations") or {}
            if ident not in self._started:
                self._started[ident] = time.monotonic()
                cluster.client.patch_status(
                    JOB,
                    meta["name"],
                    {"status": {"startTime": _now(), "active": 1}},
                    meta["namespace"],
                )
                self._say(f"simulation: cluster={cluster_name} job {key} running")
                continue
            if time.monotonic() - self._started[ident] < float(
                annotations.get(RUN_SECONDS_ANNOTATION, 1.0)
            ):
                continue
            now = _now()
            fail_in = {c.strip() for c in annotations.get(FAIL_IN_ANNOTATION, "").split(",")}
            if cluster_name in fail_in:
                why = {
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
                status = {
                    "active": 0,
                    "failed": 1,
                    "conditions": [
                        {
                            "type": "FailureTarget",
                            "status": "True",
                            "lastTransitionTime": now,
                            **why,
                        },
                        {"type": "Failed", "status": "True", "lastTransitionTime": now, **why},
                    ],
                }
                outcome = "failed"
            else:
                status = {
                    "active": 0,
                    "succeeded": 1,
                    "completionTime": now,
                    "conditions": [
                        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                        {"type": "Complete", "status": "True", "lastTransitionTime": now},
                    ],
                }
                outcome = "succeeded"
            cluster.client.patch_status(JOB, meta["name"], {"status": status}, meta["namespace"])
            self._started.pop(ident, None)
            self._say(f"simulation: cluster={cluster_name} job {key} {outcome}")


def fleetjob(name: str, *, fail_in: str = "", run_seconds: float = 1.0) -> dict[str, Any]:
    """A demo FleetJob: a busybox Job; the annotations steer the simulation."""
    annotations = {
        RUN_SECONDS_ANNOTATION: str(run_seconds),
        **({FAIL_IN_ANNOTATION: fail_in} if fail_in else {}),
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "FleetJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "jobTemplate": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "main", "image": "busybox", "command": ["echo", name]}
                            ],
                        }
                    },
                },
            }
        },
    }


def report(mgr: mcruntime.Manager, out: Any = None) -> None:
    """Print every FleetJob's status and each cluster's Jobs (read from the API)."""
    out = out or sys.stdout
    for fj in mgr.get_cluster(LOCAL).api_reader.list(FLEETJOB, "default"):
        st = fj.get("status") or {}
        failed = ",".join(st.get("failedClusters") or []) or "-"
        say(
            f"state: fleetjob {_key(fj)} phase={st.get('phase')} failedClusters={failed} "
            f"message={st.get('message')}",
            out,
        )
    for name in mgr.engaged_clusters():
        try:
            jobs = sorted(
                _meta(j)["name"] for j in mgr.get_cluster(name).api_reader.list(JOB, "default")
            )
        except MCRuntimeError as exc:
            say(f"state: cluster={name} unreadable: {exc}", out)
            continue
        say(f"state: cluster={name} jobs: {', '.join(jobs) or '-'}", out)


def scenario(
    mgr: mcruntime.Manager, duration: float, stop: threading.Event, out: Any = None
) -> None:
    """FleetJobs hello (succeeds) and flaky (fails in cluster-1); a cluster joins; hello is deleted."""
    provider = mgr.provider
    embedded = provider is not None and hasattr(provider, "add_cluster")
    names = list(provider.names()) if embedded else []  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while names and not set(names) <= set(mgr.engaged_clusters()):
        if stop.wait(0.05) or time.monotonic() > deadline:
            return
    client = mgr.get_cluster(LOCAL).client
    start = time.monotonic()

    def at(fraction: float) -> bool:
        return not stop.wait(max(0.0, start + fraction * duration - time.monotonic()))

    try:
        log.info("scenario: FleetJob hello (succeeds everywhere)")
        client.create(fleetjob("hello", run_seconds=0.1 * duration))
        if not at(0.1):
            return
        failing = names[1] if len(names) > 1 else ""
        log.info("scenario: FleetJob flaky (fails in %s)", failing or "no cluster")
        client.create(fleetjob("flaky", fail_in=failing, run_seconds=0.15 * duration))
        if embedded and at(0.35):
            new = f"{provider.options.prefix}-{len(names)}"  # type: ignore[union-attr]
            log.info("scenario: cluster %s joins the fleet", new)
            provider.add_cluster(new)  # type: ignore[union-attr]
        if not at(0.4):
            return
        log.info("scenario: FleetJob after-join")
        client.create(fleetjob("after-join", run_seconds=0.1 * duration))
        if not at(0.7):
            return
        log.info("scenario: deleting FleetJob hello")
        client.delete(FLEETJOB, "hello", "default")
        if not at(0.88):
            return
        report(mgr, out)
    except MCRuntimeError as exc:
        if not stop.is_set():
            log.warning("scenario step failed: %s", exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.examples.crd_status", description=__doc__.splitlines()[0]
    )
    add_arguments(parser, default_provider="embedded")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: 10 with the embedded management server, else until Ctrl-C)",
    )
    parser.add_argument(
        "--simulate-jobs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="SIMULATE Job progress in the provider clusters (default: on for the embedded provider only)",
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    if args.provider == NO_PROVIDER:
        print(
            "error: this example runs Jobs in provider clusters: name a --provider", file=sys.stderr
        )
        return 2
    from mcruntime.cluster import Cluster
    from mcruntime.envtest import APIServer

    server: APIServer | None = None
    try:
        provider = provider_from_args(args)
        if args.kubeconfig or args.context:
            local = Cluster.from_kubeconfig(args.kubeconfig, context=args.context)
        else:
            server = APIServer("management").start()
            local = Cluster.from_kubeconfig(server.kubeconfig())
        ensure_crd(local)
        mgr = mcruntime.Manager(local, provider=provider)
    except (MCRuntimeError, TimeoutError) as exc:
        if server is not None:
            server.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    build(mgr)
    simulate = args.simulate_jobs if args.simulate_jobs is not None else args.provider == "embedded"
    duration = (
        args.duration if args.duration is not None else (10.0 if server is not None else None)
    )
    tasks = {}
    if simulate:
        log.warning(
            "SIMULATION: Job status in the provider clusters is written by a simulated kubelet"
        )
        tasks["simulated-kubelet"] = SimulatedKubelet(mgr).run
    if server is not None:
        start_fleet = getattr(provider, "start_fleet", None)  # the embedded provider's
        if start_fleet is not None:
            start_fleet()
        tasks["scenario"] = lambda stop: scenario(mgr, duration or 10.0, stop)
    return run_demo(mgr, duration=duration, tasks=tasks, cleanup=server.close if server else None)


if __name__ == "__main__":
    sys.exit(main())
