"""The orchestrator: fleets, measured subject processes, kopf, churn; then the tables, JSON and plots."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import yaml

from tests.benchmarks.fleet._fleet import EnvFleet, Writer, raise_fd_limit
from tests.benchmarks.fleet._kopf import kopf_available, run_kopf
from tests.benchmarks.fleet._procstat import MiB, pin
from tests.benchmarks.fleet._report import SUBJECTS, derive, markdown, percentiles, plot
from tests.benchmarks.fleet._subject import (
    ENGAGE_LIMIT_ENV,
    FREEZE_GC_ENV,
    NO_PRIORITY_QUEUE_ENV,
    SCRAPE_ENV,
)

__all__ = ["Plan", "FULL", "QUICK", "main"]

ROOT = pathlib.Path(__file__).resolve().parents[3]


@dataclass
class Plan:
    """What one run measures: sizes (clusters, objects per cluster), write rates, durations."""

    sizes: list[tuple[int, int]]
    rates: list[int]
    latency_s: float
    flood_s: float
    churn_cycles: int
    churn_objects: int
    kopf_max_clusters: int
    subjects: list[str] = field(default_factory=lambda: list(SUBJECTS))
    writer_threads: int = 8
    per_envtest_process: int = 100
    sync_timeout: float = 900.0
    #: a subject counts as drained after this long without handling anything (seconds)
    quiet_s: float = 0.5
    #: initial syncs per subject and size, each in a fresh process, the subjects in turns;
    #: the median is reported
    sync_repeats: int = 3
    #: the envtest fleet serves HTTPS, as real clusters do; False: plain HTTP (to see what TLS costs)
    tls: bool = True
    #: mcruntime's ``max_concurrent_engagements`` (None: the default, no bound)
    engage_limit: int | None = None
    #: mcruntime's ``freeze_gc``
    freeze_gc: bool = False
    #: mcruntime's controller ``use_priority_queue``
    priority_queue: bool = True
    #: a metrics scrape in the mcruntime subject: "SECONDS" or "SECONDS:generate_latest"
    scrape: str | None = None
    #: writer processes of the flood (each with ``writer_threads`` threads and its own connections)
    writer_procs: int = 3
    #: saturation: for ``inject_s`` seconds (0: skipped) the envtest processes write
    #: themselves, ``inject_rate`` writes per second together (None: as fast as they can)
    inject_rate: int | None = None
    inject_s: float = 3.0
    #: write rate of the frozen-cluster phase (writes to the healthy clusters only)
    freeze_rate: int = 200
    #: churn at scale: a fleet of ``fleet_churn_clusters``, the last ``fleet_churn_batch`` of
    #: them added at once and removed at once while a writer keeps ``fleet_churn_rate``/s on
    #: the others (0 clusters: skipped)
    fleet_churn_clusters: int = 1000
    fleet_churn_batch: int = 100
    fleet_churn_objects: int = 10
    fleet_churn_rate: int = 200
    #: add/remove cycles of the batch (the first under measurement, the others for RSS)
    fleet_churn_cycles: int = 3
    #: the shortest window of a churn-at-scale p99 (seconds): before, during add, during remove
    fleet_churn_window_s: float = 3.0
    #: churn at scale: also time the others while the batch joins *another* process (the
    #: share of the move that the machine's cores, shared with the API servers, cause)
    fleet_churn_control: bool = True


FULL = Plan(
    sizes=[(1, 1000), (10, 100), (100, 100), (300, 10), (1000, 10)],
    rates=[50, 200, 1000],
    latency_s=8.0,
    flood_s=5.0,
    churn_cycles=200,
    churn_objects=10,
    kopf_max_clusters=100,
)
QUICK = Plan(
    sizes=[(4, 25)],
    rates=[50, 200],
    latency_s=0.6,
    flood_s=0.6,
    churn_cycles=10,
    churn_objects=10,
    kopf_max_clusters=1,
    writer_threads=4,
    quiet_s=0.25,
    sync_repeats=1,
    writer_procs=2,
    inject_s=0.5,
    freeze_rate=200,
    fleet_churn_clusters=4,
    fleet_churn_batch=2,
    fleet_churn_objects=5,
    fleet_churn_rate=50,
    fleet_churn_window_s=0.5,
)


def estimate_seconds(plan: Plan) -> float:
    """A rough duration of a run of ``plan`` on the 2-core development machine (kopf not counted)."""
    total = 0.0
    for clusters, objects in plan.sizes:
        total += 1.0 + clusters * 0.004  # envtest processes up and seeded
        per_subject = (
            plan.sync_repeats * (2.5 + clusters * 0.012 + clusters * objects * 0.00005)
            + len(plan.rates) * (plan.latency_s + 4 * plan.quiet_s + 0.5)
            + plan.flood_s
            + 2.5
            + 8 * plan.quiet_s
            + (plan.latency_s + 4 * plan.quiet_s if clusters > 1 else 0.0)
            + (plan.inject_s + 1.0 if plan.inject_s else 0.0)
        )
        total += len(plan.subjects) * per_subject
    total += plan.churn_cycles * 0.05 + 3
    if plan.fleet_churn_clusters:
        total += (
            5
            + plan.fleet_churn_clusters * 0.02
            + 4 * plan.fleet_churn_window_s
            + plan.fleet_churn_batch * 0.03 * plan.fleet_churn_cycles
            + 3 * (plan.fleet_churn_cycles - 1)
        )
        if plan.fleet_churn_control:  # the control's own sync of the others and its windows
            total += plan.fleet_churn_clusters * 0.01 + 2 * plan.fleet_churn_window_s
    return total


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class SubjectProcess:
    """A ``_subject`` process answering JSON-line commands."""

    def __init__(self, kind: str, logfile: pathlib.Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        self._log: TextIO = open(logfile, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.benchmarks.fleet._subject", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self.kind = kind
        self.ready = self._read(120)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        got: list[str] = []
        reader = threading.Thread(
            target=lambda: got.append(self.proc.stdout.readline()),  # type: ignore[union-attr]
            name="bench/subject-reader",
            daemon=True,
        )
        reader.start()
        reader.join(timeout)
        if not got or not got[0]:
            raise RuntimeError(
                f"subject {self.kind} gave no answer within {timeout:.0f}s "
                f"(exit code {self.proc.poll()}; see {self._log.name})"
            )
        answer: dict[str, Any] = json.loads(got[0])
        if "error" in answer:
            raise RuntimeError(f"subject {self.kind}: {answer['error']}")
        return answer

    def call(self, timeout: float = 600, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.call(op="stop", timeout=30)
            self.proc.wait(15)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            self._log.close()


def _sync_only(
    kind: str, fleet: EnvFleet, objects: int, plan: Plan, log_path: pathlib.Path
) -> float:
    sp = SubjectProcess(kind, log_path)
    try:
        clusters = len(fleet.names)
        s = sp.call(
            op="start",
            kubeconfig=str(fleet.kubeconfig),
            clusters=fleet.names,
            expect=clusters * objects,
            sync_timeout=plan.sync_timeout,
            timeout=plan.sync_timeout + 60,
        )
        if not s["synced"]:
            raise RuntimeError(
                f"not synced after {s['sync_s']:.0f}s ({s['seen']}/{s['expect']} objects)"
            )
        return float(s["sync_s"])
    finally:
        sp.close()


def _subject_log(workdir: pathlib.Path, kind: str, fleet: EnvFleet, objects: int) -> pathlib.Path:
    return workdir / f"subject-{kind}-{len(fleet.names)}x{objects}.log"


def _extra_syncs(
    fleet: EnvFleet, objects: int, plan: Plan, workdir: pathlib.Path
) -> dict[str, list[float]]:
    """``sync_repeats - 1`` initial syncs of every subject, taken in turns (mcruntime, bare,
    ..., mcruntime, bare, ...): a drift of the machine or the fleet reaches every subject alike."""
    syncs: dict[str, list[float]] = {kind: [] for kind in plan.subjects}
    for _ in range(plan.sync_repeats - 1):
        for kind in plan.subjects:
            try:
                log_path = _subject_log(workdir, kind, fleet, objects)
                syncs[kind].append(_sync_only(kind, fleet, objects, plan, log_path))
            except Exception as exc:  # reported by the subject's own run below
                log(f"  {kind}: an extra initial sync failed: {exc}")
    return syncs


def run_subject(
    kind: str,
    fleet: EnvFleet,
    objects: int,
    plan: Plan,
    workdir: pathlib.Path,
    extra_syncs: list[float],
) -> dict[str, Any]:
    """Initial sync, footprint, latency at every rate and throughput of one subject on ``fleet``;
    the sync reported is the median of this one and ``extra_syncs``."""
    clusters = len(fleet.names)
    sp = SubjectProcess(kind, _subject_log(workdir, kind, fleet, objects))
    try:
        idle = sp.ready["idle"]
        s = sp.call(
            op="start",
            kubeconfig=str(fleet.kubeconfig),
            clusters=fleet.names,
            expect=clusters * objects,
            sync_timeout=plan.sync_timeout,
            timeout=plan.sync_timeout + 60,
        )
        if not s["synced"]:
            return {
                "error": f"not synced after {s['sync_s']:.0f}s ({s['seen']}/{s['expect']} objects)"
            }
        syncs = sorted([s["sync_s"], *extra_syncs])
        log(
            f"  {kind}: synced {clusters * objects} objects in {syncs[len(syncs) // 2]:.2f}s "
            f"(median of {' '.join(f'{x:.2f}' for x in syncs)})"
        )
        sp.call(op="drain", quiet=2 * plan.quiet_s, timeout=20)
        st = sp.call(op="stats")["stat"]
        delta = st["rss"] - idle["rss"]
        out: dict[str, Any] = {
            "sync_s": round(syncs[len(syncs) // 2], 4),
            "sync_runs_s": [round(x, 4) for x in syncs],
            "sync_cpu_s": round(s["cpu_s"], 3),
            "idle_rss": idle["rss"],
            "rss": st["rss"],
            "rss_delta": delta,
            "rss_per_cluster": delta / clusters,
            "rss_per_object": delta / (clusters * objects),
            "threads_idle": idle["threads"],
            "threads": st["threads"],
            "threads_per_cluster": (st["threads"] - idle["threads"]) / clusters,
            "latency": {},
        }
        for rate in plan.rates:
            mark = sp.call(op="mark")
            ws = fleet.write(rate, plan.latency_s, objects, threads=plan.writer_threads)
            sp.call(op="drain", quiet=plan.quiet_s, timeout=30)
            c = sp.call(op="collect")
            cpu = c["cpu_s"] - mark["cpu_s"]
            out["latency"][str(rate)] = {
                **percentiles(c["latencies_ms"]),
                "writes": ws.as_dict(),
                "handled": c["count"],
                "cpu_ms_per_handled": round(1000 * cpu / c["count"], 3) if c["count"] else None,
            }
            lat = out["latency"][str(rate)]
            log(
                f"  {kind}: {rate}/s asked, {ws.achieved:.0f}/s sent: p50 {lat['p50_ms']} "
                f"p99 {lat['p99_ms']} ms ({lat['n']} samples)"
            )
        mark = sp.call(op="mark")
        ws = fleet.flood(
            plan.flood_s, objects, threads=plan.writer_threads, processes=plan.writer_procs
        )
        c = sp.call(op="collect")
        sp.call(op="drain", quiet=plan.quiet_s, timeout=120)
        c2 = sp.call(op="collect")
        cpu = c["cpu_s"] - mark["cpu_s"]
        per_s = c["count"] / ws.seconds
        out["throughput"] = {
            "per_s": per_s,
            "handled_in_window": c["count"],
            "handled_until_drained": c2["count"],
            "backlog_after_window": c2["count"] - c["count"],
            # offered more than it handled in the window (mcruntime's queue folds repeated
            # writes of a queued object into one reconcile, so it may handle fewer than sent)
            "saturated": ws.achieved > 1.05 * per_s or c2["count"] - c["count"] > 0.05 * c["count"],
            "writes": ws.as_dict(),
            "cpu_ms_per_reconcile": round(1000 * cpu / c["count"], 3) if c["count"] else None,
            "cpu_utilisation": round(cpu / ws.seconds, 3),
        }
        log(
            f"  {kind}: flood {ws.achieved:.0f} writes/s from {ws.processes} processes -> "
            f"{per_s:.0f} handled/s (saturated: {out['throughput']['saturated']})"
        )
        out["peak_rss"] = c2["stat"]["peak_rss"]
        out["threads_end"] = c2["stat"]["threads"]
        if clusters > 1:
            out["frozen"] = _frozen_phase(kind, sp, fleet, objects, plan)
        if plan.inject_s > 0:
            out["saturation"] = _saturation_phase(kind, sp, fleet, objects, plan)
        return out
    finally:
        sp.close()


def _frozen_phase(
    kind: str, sp: SubjectProcess, fleet: EnvFleet, objects: int, plan: Plan
) -> dict[str, Any]:
    """p99 of the healthy clusters while the last cluster is frozen, writes to the others only."""
    frozen = fleet.names[-1]
    healthy = [n for n in fleet.names if n != frozen]
    writer = Writer(yaml.safe_load(fleet.kubeconfig.read_text()), healthy)
    writer.warm()
    try:
        fleet.freeze(frozen)
        try:
            sp.call(op="mark")
            ws = writer.write(
                plan.freeze_rate, plan.latency_s, objects, threads=plan.writer_threads
            )
            sp.call(op="drain", quiet=plan.quiet_s, timeout=30)
            c = sp.call(op="collect")
        finally:
            fleet.thaw(frozen)
    finally:
        writer.close()
    sp.call(op="drain", quiet=plan.quiet_s, timeout=60)
    res = {
        "frozen_cluster": frozen,
        **percentiles(c["latencies_ms"]),
        "writes": ws.as_dict(),
        "handled": c["count"],
    }
    log(
        f"  {kind}: one cluster frozen, {plan.freeze_rate}/s to the {len(healthy)} others: "
        f"p50 {res['p50_ms']} p99 {res['p99_ms']} ms ({res['n']} samples)"
    )
    return res


def _saturation_phase(
    kind: str, sp: SubjectProcess, fleet: EnvFleet, objects: int, plan: Plan
) -> dict[str, Any]:
    """Handled per second while the envtest processes themselves write ``inject_rate`` per
    second (default: as fast as they can), more than a subject keeps up with on these cores.
    Last phase of a subject: the backlog is not waited for (the process ends).

    The envtest processes run on half of the cores and the subject on the other half:
    the scheduler shares a core among runnable threads, not processes, so a subject
    with a thread per cluster would otherwise measure how much it takes from the load
    generator rather than what it can handle."""
    cores = sorted(os.sched_getaffinity(0))
    split = len(cores) >= 2
    generator, subject = set(cores[: len(cores) // 2]), set(cores[len(cores) // 2 :])
    if split:
        for proc in fleet.procs:
            pin(proc.pid, generator)
        pin(sp.pid, subject)
    try:
        sp.call(op="mark")
        start_at = time.time() + 0.5
        # the subject stamps the window's edges itself (count and CPU at each), while the
        # envtest processes inject: its answers may come late, its stamps do not
        box: list[dict[str, Any]] = []
        stamper = threading.Thread(
            target=lambda: box.append(
                sp.call(op="window", start_at=start_at, end_at=start_at + plan.inject_s)
            ),
            name="bench/window",
            daemon=True,
        )
        stamper.start()
        ws = fleet.inject(plan.inject_rate, plan.inject_s, objects, start_at=start_at)
        stamper.join(plan.inject_s + 120)
        c = sp.call(op="collect")
    finally:
        if split:
            for pid in (*(p.pid for p in fleet.procs), sp.pid):
                pin(pid, set(cores))
    if not box:
        raise RuntimeError(f"{kind}: no window stamps from the subject")
    s0, s1 = box[0]["stamps"]
    handled, cpu, span = s1["count"] - s0["count"], s1["cpu_s"] - s0["cpu_s"], s1["at"] - s0["at"]
    per_s = handled / span if span > 0 else 0.0
    res = {
        "per_s": per_s,
        # the subject's capacity whether the generator saturated it or not: what one second
        # of its CPU handles (its rate when it has the one core of its own, GIL-bound)
        "per_cpu_s": handled / cpu if cpu > 0 else None,
        "handled_in_window": handled,
        # how late the subject's own stamps were (its command thread waits for the GIL too)
        "stamps_late_s": [
            round(s0["at"] - start_at, 3),
            round(s1["at"] - start_at - plan.inject_s, 3),
        ],
        "offered": ws.as_dict(),
        # handled fewer than offered: behind, or (mcruntime) several writes of a queued
        # object folded into one reconcile; the p99 tells which (behind: it grows)
        "saturated": ws.achieved > 1.05 * per_s,
        "cpu_utilisation": round(cpu / span, 3) if span > 0 else None,
        "cpu_ms_per_handled": round(1000 * cpu / handled, 3) if handled else None,
        "cores": {"generator": sorted(generator), "subject": sorted(subject)} if split else None,
        **{k: v for k, v in percentiles(c["latencies_ms"]).items() if k != "n"},
    }
    where = f", subject on cores {sorted(subject)}" if split else ""
    log(
        f"  {kind}: {ws.achieved:.0f} writes/s injected by envtest -> {per_s:.0f} handled/s, "
        f"{res['per_cpu_s'] or 0:.0f} per CPU-second (saturated: {res['saturated']}, "
        f"CPU {res['cpu_utilisation']}, p99 {res['p99_ms']} ms{where}; its window stamps "
        f"late by {res['stamps_late_s'][0]} / {res['stamps_late_s'][1]} s)"
    )
    return res


def _p99_between(lat_ms: list[float], written_at: list[float], t0: float, t1: float) -> Any:
    return percentiles([x for x, t in zip(lat_ms, written_at, strict=True) if t0 <= t < t1])


def run_fleet_churn(plan: Plan, workdir: pathlib.Path) -> dict[str, Any]:
    """Add ``fleet_churn_batch`` clusters at once to a manager engaged with the rest of a
    ``fleet_churn_clusters`` fleet, then remove them at once, under a steady write load."""
    n, batch, objects = plan.fleet_churn_clusters, plan.fleet_churn_batch, plan.fleet_churn_objects
    win = plan.fleet_churn_window_s
    log(
        f"churn at scale: {batch} of {n} clusters added and removed at once, {plan.fleet_churn_rate} writes/s"
    )
    with EnvFleet(
        n, workdir / "fleet-churn", per_process=plan.per_envtest_process, tls=plan.tls
    ) as fleet:
        fleet.seed(objects)
        steady, extra = fleet.names[: n - batch], fleet.names[n - batch :]
        sp = SubjectProcess("mcruntime", workdir / "subject-fleet-churn.log")
        stop = threading.Event()
        writer = Writer(yaml.safe_load(fleet.kubeconfig.read_text()), steady)
        writer.warm()
        ws_box: list[Any] = []
        try:
            s = _sync_steady(sp, fleet, steady, plan)
            if not s["synced"]:
                return {"error": f"{len(steady)} clusters not synced after {s['sync_s']:.0f}s"}
            before = sp.call(op="stats")["stat"]
            sp.call(op="mark")
            t_mark = time.time()
            w = _churn_writes(writer, plan, stop, ws_box)
            stop.wait(win + 0.5)
            t_add = time.time()
            add = _add_many(sp, fleet, extra, plan)
            t_add_end = max(time.time(), t_add + win)
            stop.wait(max(0.0, t_add_end - time.time()))
            engaged = sp.call(op="stats")["stat"]
            t_rem = time.time()
            rem = sp.call(op="remove_many", clusters=extra)
            t_rem_end = max(time.time(), t_rem + win)
            stop.wait(max(0.0, t_rem_end + win - time.time()))  # and a window after
            stop.set()
            w.join()
            sp.call(op="drain", quiet=plan.quiet_s, timeout=30)
            c = sp.call(op="collect", times=True)
            after = sp.call(op="settle", threads=before["threads"])
            # more add/remove cycles without load: does RSS keep growing, or was the first
            # cycle's growth the allocator keeping pages it will reuse?
            repeats = []
            for _ in range(plan.fleet_churn_cycles - 1):
                a = _add_many(sp, fleet, extra, plan)
                rm = sp.call(op="remove_many", clusters=extra)
                st = sp.call(op="settle", threads=before["threads"])
                repeats.append(
                    {
                        "synced_s": a["synced_s"],
                        "threads_gone_s": rm["threads_gone_s"],
                        "leftover_threads": rm["leftover_threads"],
                        "stat": st["stat"],
                        "stat_collected": st["stat_collected"],
                        "stat_trimmed": st.get("stat_trimmed"),
                    }
                )
        finally:
            stop.set()
            writer.close()
            sp.close()
        bare = _churn_add_baseline(plan, workdir, fleet, steady, extra)
        control = (
            _churn_add_elsewhere(plan, workdir, fleet, steady, extra)
            if plan.fleet_churn_control
            else None
        )
    lat, at = c["latencies_ms"], c["written_at"]
    r: dict[str, Any] = {
        "clusters": n,
        "batch": batch,
        "objects_per_cluster": objects,
        "rate": plan.fleet_churn_rate,
        "writes": ws_box[0].as_dict() if ws_box else None,
        "before": _p99_between(lat, at, t_mark, t_add),
        "during_add": _p99_between(lat, at, t_add, t_add_end),
        "during_remove": _p99_between(lat, at, t_rem, t_rem_end),
        "after": _p99_between(lat, at, t_rem_end, float("inf")),
        "add": add,
        "remove": rem,
        "bare": bare,
        "control": control,
        "stat_before": before,
        "stat_engaged": engaged,
        "stat_after": after["stat"],
        "stat_after_collected": after["stat_collected"],
        "stat_after_trimmed": after.get("stat_trimmed"),
        "settle_s": after["settle_s"],
        "repeats": repeats,
    }
    log(
        f"churn at scale: p99 before {r['before']['p99_ms']} / add {r['during_add']['p99_ms']} / "
        f"remove {r['during_remove']['p99_ms']} ms; {batch} synced in {add['synced_s']:.2f}s, "
        f"threads gone {rem['threads_gone_s']:.2f}s; threads {before['threads']} -> "
        f"{engaged['threads']} -> {after['stat']['threads']}, RSS {before['rss'] / MiB:.1f} -> "
        f"{engaged['rss'] / MiB:.1f} -> {after['stat']['rss'] / MiB:.1f} MiB "
        f"({after['stat_collected']['rss'] / MiB:.1f} after a full collection"
        + _trimmed(after.get("stat_trimmed"))
        + ")"
    )
    if bare:
        log(
            f"churn at scale, bare client: p99 before {bare['before']['p99_ms']} / add "
            f"{bare['during_add']['p99_ms']} ms; {batch} synced in {bare['add']['synced_s']:.2f}s"
        )
    if control:
        log(
            f"churn at scale, control (the {batch} join another process): p99 before "
            f"{control['before']['p99_ms']} / add {control['during_add']['p99_ms']} ms"
        )
    if repeats:
        log(
            "churn at scale: after further cycles RSS "
            + ", ".join(f"{x['stat']['rss'] / MiB:.1f}" for x in repeats)
            + " MiB (after a full collection "
            + ", ".join(f"{x['stat_collected']['rss'] / MiB:.1f}" for x in repeats)
            + "; trimmed "
            + ", ".join(_trimmed(x.get("stat_trimmed"), bare=True) for x in repeats)
            + "), threads "
            + ", ".join(str(x["stat"]["threads"]) for x in repeats)
        )
    return r


def _trimmed(stat: dict[str, Any] | None, *, bare: bool = False) -> str:
    """RSS once the C allocator gave its free pages back, for a log line ("" without glibc)."""
    if stat is None:
        return "-" if bare else ""
    rss = f"{stat['rss'] / MiB:.1f}"
    return rss if bare else f", {rss} once the allocator gave back its free pages"


def _start(sp: SubjectProcess, fleet: EnvFleet, clusters: list[str], plan: Plan) -> dict[str, Any]:
    """Start ``sp`` watching ``clusters`` of the churn's fleet; its answer once they synced."""
    return sp.call(
        op="start",
        kubeconfig=str(fleet.kubeconfig),
        clusters=clusters,
        expect=len(clusters) * plan.fleet_churn_objects,
        sync_timeout=plan.sync_timeout,
        timeout=plan.sync_timeout + 60,
    )


def _add_many(
    sp: SubjectProcess, fleet: EnvFleet, clusters: list[str], plan: Plan
) -> dict[str, Any]:
    """Make ``sp`` add ``clusters`` of the churn's fleet at once; its answer once they synced."""
    return sp.call(
        op="add_many",
        kubeconfig=str(fleet.kubeconfig),
        clusters=clusters,
        objects=plan.fleet_churn_objects,
    )


def _sync_steady(
    sp: SubjectProcess, fleet: EnvFleet, steady: list[str], plan: Plan
) -> dict[str, Any]:
    """Start ``sp`` watching ``steady`` and, once synced, let it settle; the start's answer."""
    s = _start(sp, fleet, steady, plan)
    if s["synced"]:
        sp.call(op="drain", quiet=2 * plan.quiet_s, timeout=20)
    return s


def _churn_writes(
    writer: Writer, plan: Plan, stop: threading.Event, box: list[Any]
) -> threading.Thread:
    """Write ``fleet_churn_rate`` per second until ``stop``; the statistics land in ``box``."""
    w = threading.Thread(
        target=lambda: box.append(
            writer.write(
                plan.fleet_churn_rate,
                3600,
                plan.fleet_churn_objects,
                threads=plan.writer_threads,
                stop=stop,
            )
        ),
        name="bench/churn-writer",
        daemon=True,
    )
    w.start()
    return w


def _churn_add_baseline(
    plan: Plan, workdir: pathlib.Path, fleet: EnvFleet, steady: list[str], extra: list[str]
) -> dict[str, Any] | None:
    """The bare client's p99 on ``steady`` before and while it starts watching ``extra`` at
    once: what adding clusters costs the others on these cores without any runtime."""

    def join(sp: SubjectProcess) -> dict[str, Any]:
        return _add_many(sp, fleet, extra, plan)

    return _churn_window(plan, workdir, fleet, steady, "bare", "subject-fleet-churn-bare", join)


def _churn_add_elsewhere(
    plan: Plan, workdir: pathlib.Path, fleet: EnvFleet, steady: list[str], extra: list[str]
) -> dict[str, Any] | None:
    """mcruntime's p99 on ``steady`` before and while a second process (the bare client)
    starts watching ``extra``: the move no runtime in the subject can avoid, made by the
    joining clusters' API server and client on the cores the subject shares with them."""
    other = SubjectProcess("bare", workdir / "subject-fleet-churn-control-bare.log")

    def join(_: SubjectProcess) -> dict[str, Any]:
        return _start(other, fleet, extra, plan)

    try:
        return _churn_window(
            plan, workdir, fleet, steady, "mcruntime", "subject-fleet-churn-control", join
        )
    finally:
        other.close()


def _churn_window(
    plan: Plan,
    workdir: pathlib.Path,
    fleet: EnvFleet,
    steady: list[str],
    kind: str,
    log_name: str,
    join: Callable[[SubjectProcess], dict[str, Any]],
) -> dict[str, Any] | None:
    """A ``kind`` subject synced on ``steady`` under the churn's writes, then ``join(subject)``
    makes the batch join at once: the steady clusters' p99 before and during it, and the
    join's answer."""
    win = plan.fleet_churn_window_s
    sp = SubjectProcess(kind, workdir / f"{log_name}.log")
    writer = Writer(yaml.safe_load(fleet.kubeconfig.read_text()), steady)
    writer.warm()
    stop = threading.Event()
    try:
        if not _sync_steady(sp, fleet, steady, plan)["synced"]:
            return None
        sp.call(op="mark")
        t_mark = time.time()
        w = _churn_writes(writer, plan, stop, [])
        stop.wait(win + 0.5)
        t_add = time.time()
        add = join(sp)
        t_add_end = max(time.time(), t_add + win)
        stop.wait(max(0.0, t_add_end + 0.5 - time.time()))
        stop.set()
        w.join()
        c = sp.call(op="collect", times=True)
    finally:
        stop.set()
        writer.close()
        sp.close()
    lat, at = c["latencies_ms"], c["written_at"]
    return {
        "before": _p99_between(lat, at, t_mark, t_add),
        "during_add": _p99_between(lat, at, t_add, t_add_end),
        "add": add,
    }


def run_size(clusters: int, objects: int, plan: Plan, workdir: pathlib.Path) -> dict[str, Any]:
    log(f"size {clusters}x{objects}: starting {clusters} envtest clusters")
    res: dict[str, Any] = {
        "clusters": clusters,
        "objects_per_cluster": objects,
        "objects": clusters * objects,
    }
    with EnvFleet(clusters, workdir, per_process=plan.per_envtest_process, tls=plan.tls) as fleet:
        res["envtest_processes"] = len(fleet.procs)
        res["envtest_start_s"] = round(fleet.start_s, 2)
        res["writer_warm_s"] = round(fleet.warm_s, 2)
        res["seed_s"] = round(fleet.seed(objects), 2)
        log(
            f"size {clusters}x{objects}: {len(fleet.procs)} envtest processes up in "
            f"{fleet.start_s:.2f}s, writer connected to all in {fleet.warm_s:.2f}s, "
            f"seeded in {res['seed_s']}s"
        )
        extra = _extra_syncs(fleet, objects, plan, workdir)
        for kind in plan.subjects:
            try:
                res[kind] = run_subject(kind, fleet, objects, plan, workdir, extra[kind])
            except Exception as exc:  # one broken subject must not lose the others' figures
                log(f"  {kind}: FAILED: {exc}")
                res[kind] = {"error": str(exc)}
        if not kopf_available():
            res["kopf"] = {"skipped": "kopf not installed (pip install -e '.[bench]')"}
        elif clusters > plan.kopf_max_clusters:
            res["kopf"] = {"skipped": f"not run above {plan.kopf_max_clusters} processes"}
        else:
            log(f"  kopf: launching {clusters} operator processes")
            res["kopf"] = run_kopf(fleet, objects, workdir / f"kopf-{clusters}")
            k = res["kopf"]
            log(f"  kopf: synced={k['synced']} in {k['sync_s']}s, RSS {k['rss'] / MiB:.0f} MiB")
    return res


def run_churn(plan: Plan, workdir: pathlib.Path) -> dict[str, Any]:
    log(
        f"churn: {plan.churn_cycles} add/remove cycles of one cluster with {plan.churn_objects} objects"
    )
    with EnvFleet(1, workdir / "churn", tls=plan.tls) as fleet:
        fleet.seed(plan.churn_objects)
        sp = SubjectProcess("mcruntime", workdir / "subject-churn.log")
        try:
            r = sp.call(
                op="churn",
                kubeconfig=str(fleet.kubeconfig),
                cluster=fleet.names[0],
                cycles=plan.churn_cycles,
                timeout=plan.churn_cycles * 120,
            )
        finally:
            sp.close()
    r.pop("op", None)
    adds, removes = sorted(r["add_s"]), sorted(r["remove_s"])
    r["add_p50_s"] = adds[len(adds) // 2]
    r["remove_p50_s"] = removes[len(removes) // 2]
    log(
        f"churn: add p50 {r['add_p50_s']:.3f}s, remove p50 {r['remove_p50_s']:.4f}s, threads "
        f"{r['start']['threads']} -> {r['series'][-1]['threads']}, RSS {r['series'][0]['rss'] / MiB:.1f} -> "
        f"{r['series'][-1]['rss'] / MiB:.1f} MiB"
    )
    return r


def machine() -> dict[str, Any]:
    """Where the figures come from."""
    cpu = platform.processor() or ""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    import kubernetes

    import mcruntime

    commit = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        if subprocess.run(
            ["git", "status", "--porcelain", "mcruntime"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip():
            commit += "-dirty"
    kopf_version = None
    if kopf_available():
        from importlib.metadata import version

        kopf_version = version("kopf")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "kubernetes_client": kubernetes.__version__,
        "mcruntime": mcruntime.__version__,
        "kopf": kopf_version,
        "commit": commit,
        "load_avg_at_start": os.getloadavg(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.fleet",
        description="Fleet benchmarks: mcruntime against the bare client, a hand-rolled pattern and kopf.",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and short phases (CI)")
    parser.add_argument(
        "--out", default="bench-results", help="directory for results (default bench-results/)"
    )
    parser.add_argument("--sizes", help="override sizes, e.g. 1x1000,10x100")
    parser.add_argument("--rates", help="override write rates, e.g. 50,200")
    parser.add_argument("--churn-cycles", type=int, help="override the number of churn cycles")
    parser.add_argument("--subjects", help=f"subset of {','.join(SUBJECTS)}")
    parser.add_argument("--no-kopf", action="store_true", help="skip the kopf baseline")
    parser.add_argument(
        "--writer-procs", type=int, help="writer processes of the flood (default: 3; quick 2)"
    )
    parser.add_argument(
        "--inject-rate",
        type=int,
        help="saturation phase: writes/s the envtest processes make themselves "
        "(default and 0: as fast as they can)",
    )
    parser.add_argument(
        "--inject-seconds",
        type=float,
        help="length of the saturation phase (default 3; quick 1; 0 skips it)",
    )
    parser.add_argument(
        "--fleet-churn",
        help="churn at scale as CLUSTERS:BATCH, e.g. 1000:100 (0 skips it)",
    )
    parser.add_argument(
        "--no-churn-control",
        action="store_true",
        help="churn at scale: skip the control run (the batch joining another process, what "
        "the shared cores alone cost the others)",
    )
    parser.add_argument(
        "--engage-limit",
        type=int,
        help="mcruntime's max_concurrent_engagements (default: none, the library's default)",
    )
    parser.add_argument(
        "--freeze-gc",
        action="store_true",
        help="run mcruntime with freeze_gc=True (the engaged clusters out of full collections)",
    )
    parser.add_argument(
        "--no-priority-queue",
        action="store_true",
        help="run mcruntime's controller with use_priority_queue=False (one priority for all)",
    )
    parser.add_argument(
        "--scrape",
        metavar="SECONDS[:generate_latest]",
        help="scrape mcruntime's metrics every SECONDS, as Prometheus would (with "
        "prometheus_client's generate_latest instead of the manager's own exposition "
        "after a colon)",
    )
    parser.add_argument(
        "--sync-repeats",
        type=int,
        help="initial syncs per subject and size, taken in turns; the median is reported "
        "(default 3; quick 1)",
    )
    parser.add_argument(
        "--plain-http",
        action="store_true",
        help="envtest serves plain HTTP instead of HTTPS (to compare the cost of TLS)",
    )
    args = parser.parse_args(argv)

    plan = FULL if not args.quick else QUICK
    plan = Plan(**asdict(plan))
    if args.sizes:
        plan.sizes = [(int(c), int(o)) for c, o in (s.split("x") for s in args.sizes.split(","))]
    if args.rates:
        plan.rates = [int(r) for r in args.rates.split(",")]
    if args.churn_cycles is not None:
        plan.churn_cycles = args.churn_cycles
    if args.sync_repeats:
        plan.sync_repeats = args.sync_repeats
    if args.subjects:
        plan.subjects = [s for s in args.subjects.split(",") if s]
    if args.no_kopf:
        plan.kopf_max_clusters = 0
    if args.writer_procs is not None:
        plan.writer_procs = max(1, args.writer_procs)
    if args.inject_rate is not None:
        plan.inject_rate = args.inject_rate if args.inject_rate > 0 else None
    if args.inject_seconds is not None:
        plan.inject_s = max(0.0, args.inject_seconds)
    if args.fleet_churn is not None:
        if args.fleet_churn in ("0", ""):
            plan.fleet_churn_clusters = 0
        else:
            n, _, b = args.fleet_churn.partition(":")
            plan.fleet_churn_clusters = int(n)
            plan.fleet_churn_batch = int(b or max(1, int(n) // 10))
            if not 0 < plan.fleet_churn_batch < plan.fleet_churn_clusters:
                parser.error("--fleet-churn: BATCH must be between 1 and CLUSTERS - 1")
    if args.plain_http:
        plan.tls = False
    if args.engage_limit is not None:
        plan.engage_limit = args.engage_limit
        os.environ[ENGAGE_LIMIT_ENV] = str(args.engage_limit)  # subject processes inherit it
    if args.no_churn_control:
        plan.fleet_churn_control = False
    if args.freeze_gc:
        plan.freeze_gc = True
        os.environ[FREEZE_GC_ENV] = "1"
    if args.no_priority_queue:
        plan.priority_queue = False
        os.environ[NO_PRIORITY_QUEUE_ENV] = "1"
    if args.scrape:
        plan.scrape = args.scrape
        os.environ[SCRAPE_ENV] = args.scrape
    for s in ("mcruntime", "bare", "handrolled"):
        if s not in plan.subjects:
            parser.error(
                "--subjects must keep mcruntime, bare and handrolled (the tables compare them)"
            )

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="mcruntime-bench-"))
    started = time.monotonic()
    fd_limit = raise_fd_limit()
    est = estimate_seconds(plan)
    log(
        f"estimated duration: about {est / 60:.0f} min ({est:.0f} s) on 2 shared cores"
        + (", plus kopf" if plan.kopf_max_clusters and kopf_available() else "")
        + f"; open files limit {fd_limit}"
    )
    results: dict[str, Any] = {
        "machine": machine(),
        "mode": "quick" if args.quick else "full",
        "plan": asdict(plan),
        "estimated_seconds": round(est),
        "sizes": [],
    }
    ok = False
    try:
        for clusters, objects in plan.sizes:
            results["sizes"].append(run_size(clusters, objects, plan, workdir))
        if plan.churn_cycles > 0:
            results["churn"] = run_churn(plan, workdir)
        if plan.fleet_churn_clusters > 0:
            results["fleet_churn"] = run_fleet_churn(plan, workdir)
        ok = True
    finally:
        results["seconds"] = round(time.monotonic() - started, 1)
        derive(
            results,
            target_clusters=max(c for c, _ in plan.sizes if c <= 100)
            if any(c <= 100 for c, _ in plan.sizes)
            else plan.sizes[0][0],
        )
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
        table = markdown(results)
        (out / "results.md").write_text(table + "\n")
        plots = plot(results, out)
        print(table)
        print(
            f"results: {out / 'results.json'}, {out / 'results.md'}"
            + "".join(f", {p}" for p in plots),
            flush=True,
        )
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"logs of the failed run kept in {workdir}")
    return 0
