"""The soak run: set-up, chaos phases separated by quiet points, invariants, report."""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import gc
import json
import logging
import math
import os
import platform
import random
import re
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, Proxy, WaitTimeout, wait_for
from mcruntime.errors import AlreadyExists
from mcruntime.manager._health import _MAX_PROBES
from tests.soak._copier import HUB, HUB_NS, SOURCES, copies_held, hub_key
from tests.soak._faults import ELECTED_ONLY, KINDS, REPLICATED, SHARDED_ONLY, Scheduler
from tests.soak._ledger import DELETED, Key, Ledger, Overlaps
from tests.soak._logscan import SecretScanner
from tests.soak._world import (
    NAMESPACES,
    OBJECTS,
    PROBE,
    WATCHED,
    World,
    Writers,
)

log = logging.getLogger("soak")

ROOT = Path(__file__).resolve().parents[2]
#: how long the subject may take to converge at a quiet point (writers paused, faults healed)
CONVERGE_DEADLINE = 90.0
#: how long a request may still wait for a cluster once the copies caught up (the health
#: check hears each cluster answer again within its interval)
WAITING_DEADLINE = 30.0
#: trend tolerances between the first quiet-point sample after warm-up and the later ones
THREADS_TOLERANCE = 3
RSS_TOLERANCE_MIB = 24.0
RSS_TOLERANCE_FRACTION = 0.10
#: API server event history: small, so that the servers' memory (in this process; each event
#: keeps the object and its JSON) levels off within the warm-up; ~50 s of writes per cluster
HISTORY = 200


@dataclass
class Sample:
    at: float
    label: str
    threads: int
    rss_mib: float
    #: thread names (digits folded to N) and how many of each
    names: dict[str, int] = field(default_factory=dict)


def thread_kinds() -> dict[str, int]:
    return dict(Counter(re.sub(r"\d+", "N", t.name) for t in threading.enumerate()))


#: a bounded pool each manager fills on demand (its health probes): checked against its bound,
#: not for a trend (a replica replaced starts it empty again)
POOLED = "mcruntime/health/probe_N"


@dataclass
class Options:
    minutes: float
    clusters: int = 10
    seed: int = 0
    out: Path = Path("soak-results")
    #: writes per second per cluster
    rate: float = 4.0
    #: seconds of chaos between two quiet points (0: chosen from ``minutes``)
    quiet_every: float = 0.0
    max_faults: int = 3
    #: replicas with leader election (1: a single manager, no election)
    replicas: int = 2
    #: the replicas shard the clusters (`Sharded`) instead of electing a leader
    sharded: bool = False
    #: the replicas run with ``ManagerOptions.freeze_gc`` (one process: they share the freeze)
    freeze_gc: bool = False
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    health_interval: float = 2.0
    health_timeout: float = 1.0
    #: trace allocations and write, at each quiet point, what grew most since the warm-up (slow)
    tracemalloc: bool = False


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile (``q`` in 0..1)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def figures(what: str, times: list[float | None]) -> dict[str, Any]:
    """p50, p99 and max of ``times`` (seconds) and how many are None (not recovered), named
    ``<what>_p50_s`` and so on (``not_recovered`` for ``recovery``, else ``<what>_not_recovered``)."""
    rec = [t for t in times if t is not None]
    p50, p99 = quantile(rec, 0.5), quantile(rec, 0.99)
    missed = "not_recovered" if what == "recovery" else f"{what}_not_recovered"
    return {
        f"{what}_p50_s": None if p50 is None else round(p50, 3),
        f"{what}_p99_s": None if p99 is None else round(p99, 3),
        f"{what}_max_s": round(max(rec), 3) if rec else None,
        missed: len(times) - len(rec),
    }


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "load_average": list(os.getloadavg()),
    }


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")


class Soak:
    """One run: `run()` returns the report; ``report["violations"]`` empty means every invariant held."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.violations: list[str] = []
        self.samples: list[Sample] = []
        self.events_lost = 0
        #: (member, source) pairs whose copy had not caught up with the hub at a quiet point
        self.copies_behind = 0
        #: requests still waiting for a cluster at a quiet point, every cluster answering
        self.left_waiting = 0
        self.quiet_points: list[dict[str, float]] = []
        self.scanner = SecretScanner()
        self.commit = "unknown"
        self.world: World | None = None
        self._baseline: tracemalloc.Snapshot | None = None
        self._stop = threading.Event()

    # ---------------------------------------------------------------- logging

    def _capture_logs(self) -> list[logging.Handler]:
        self.opts.out.mkdir(parents=True, exist_ok=True)
        root = logging.getLogger()
        root.setLevel(logging.DEBUG)  # every record is made and scanned
        to_file = logging.FileHandler(self.opts.out / "soak.log", mode="w")
        to_file.setLevel(logging.INFO)
        to_file.setFormatter(
            logging.Formatter("%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
        )
        for h in (self.scanner, to_file):
            root.addHandler(h)
        return [self.scanner, to_file]

    def _secrets_of(self, fleet: Fleet) -> None:
        secrets: list[str] = []
        for s in fleet:
            secrets += [s.token, s.read_only_token]
            for value in s.credentials(auth="certificate").values():
                secrets.append(value)
                pem = base64.b64decode(value).decode()
                secrets += [line for line in pem.splitlines() if len(line) > 40]
        self.scanner.add_secrets(secrets)

    # ---------------------------------------------------------------- set-up

    def _setup(self) -> World:
        fleet = Fleet(self.opts.clusters, prefix="soak", history=HISTORY).start()
        self._secrets_of(fleet)
        proxies = {s.name: Proxy(s).start() for s in fleet}
        # the replicas' local cluster: the copiers' sources, and the Leases of the replicas
        hub = APIServer("soak-hub", history=HISTORY).start()
        self.scanner.add_secrets([hub.token, hub.read_only_token])
        direct = {
            s.name: Cluster.from_kubeconfig(s.kubeconfig(), name=s.name) for s in (*fleet, hub)
        }
        direct[HUB] = direct.pop(hub.name)
        for name, c in direct.items():
            for ns in (HUB_NS,) if name == HUB else (*NAMESPACES, HUB_NS):
                with contextlib.suppress(AlreadyExists):
                    c.client.create(
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                    )
        world = World(
            fleet,
            proxies,
            direct,
            Ledger(),
            Overlaps(),
            hub,
            lease=hub if self.opts.replicas > 1 else None,
            sharded=self.opts.sharded,
            freeze_gc=self.opts.freeze_gc,
            health_interval=self.opts.health_interval,
            health_timeout=self.opts.health_timeout,
        )
        for _ in range(self.opts.replicas):
            world.spawn_replica()
        wait_for(
            world.engaged,
            120,
            "every cluster engaged",
            interval=0.1,
        )
        world.writers = Writers(world, self.opts.rate, self.opts.seed)
        return world

    def _teardown(self, world: World) -> None:
        if world.writers is not None:
            world.writers.stop()
        for r in list(world.replicas):
            world.retire(r)
        for p in world.proxies.values():
            p.stop()
        for c in world.direct.values():
            c.stop()
        world.fleet.close()
        world.hub.close()

    # ---------------------------------------------------------------- checks

    def _sample(self, label: str) -> Sample:
        gc.collect()
        names = thread_kinds()
        pooled = names.get(POOLED, 0)
        s = Sample(time.monotonic(), label, sum(names.values()) - pooled, rss_mib(), names)
        if pooled > _MAX_PROBES * max(1, len(self._live())):
            self.violations.append(
                f"{pooled} health probe threads for {len(self._live())} replicas "
                f"(bound: {_MAX_PROBES} each)"
            )
        self.samples.append(s)
        return s

    def _live(self) -> list[Any]:
        return self.world.live_replicas() if self.world is not None else []

    def _resolve_unknown(self, world: World) -> None:
        """Read back every object whose last write had an unknown outcome (all faults healed)."""
        for key in sorted(world.ledger.unknown):
            state = wait_for(
                functools.partial(self._try_read, world, key),
                60,
                f"read back {key}",
                interval=0.2,
            )
            assert state is not None  # wait_for returns a truthy value
            world.ledger.resolve(key, state)

    @staticmethod
    def _try_read(world: World, key: Key) -> str | None:
        try:
            return world.read(key)
        except Exception as exc:
            log.debug("read back of %s failed: %s", key, exc)
            return None

    def _check_servers(self, world: World) -> list[str]:
        """Every acknowledged write is what its API server holds (restarts keep data), the
        hub's included."""
        out = []
        ledger = world.ledger
        places = [(c, ns, (*OBJECTS, PROBE)) for c in world.names for ns in NAMESPACES]
        places.append((HUB, HUB_NS, (*SOURCES, PROBE)))
        for cluster, ns, names in places:
            reader = world.direct[cluster].api_reader
            listed = wait_for(
                functools.partial(self._try_list, reader, ns),
                60,
                f"list {cluster}/{ns}",
                interval=0.2,
            )
            assert listed is not None  # wait_for returns a truthy value
            held = {o["metadata"]["name"]: str(o["data"]["v"]) for o in listed[0]}
            for name in names:
                key = (cluster, ns, name)
                server = held.get(name, DELETED)
                with ledger.lock:
                    written = ledger.written.get(key, DELETED)
                    late = key in ledger.resolved
                if server == written:
                    continue
                if late:  # a write held by a fault landed after the read-back
                    ledger.resolve(key, server)
                    continue
                out.append(
                    f"acknowledged write not held: cluster={cluster} object={ns}/{name} "
                    f"written={written} server={server}"
                )
        return out

    @staticmethod
    def _try_list(reader: Any, ns: str) -> tuple[list[dict[str, Any]]] | None:
        """``(items,)`` (truthy even when empty), or None when the list failed."""
        try:
            items: list[dict[str, Any]] = reader.list("v1/ConfigMap", ns, timeout=10)
            return (items,)
        except Exception as exc:
            log.debug("list of %s failed: %s", ns, exc)
            return None

    def _converge(self, world: World) -> list[str]:
        ledger = world.ledger

        def keys() -> list[Key]:
            return [k for k in ledger.objects() if k[1] in WATCHED]

        def done() -> bool:
            world.supervise()
            return world.engaged() and not ledger.divergences(keys())

        try:
            wait_for(done, CONVERGE_DEADLINE, "the subject converged", interval=0.1)
            return []
        except WaitTimeout:
            divs = ledger.divergences(keys())
            self.events_lost += len(divs)
            states = {r.name: r.manager.cluster_states() for r in world.replicas}
            out = [f"event lost: {d}" for d in divs]
            if not divs:
                out.append(f"clusters not engaged: {states}")
            else:
                out.append(f"engagement states: {states}")
            return out

    def _copies_behind(self, world: World) -> list[str]:
        """Each member in the provider whose copy of a hub source is not the hub's last written
        state (a copy of a deleted source left, or a deletion's copy missing, included)."""
        with world.membership:
            members = [c for c in world.names if c not in world.removed]
        sources = (*SOURCES, PROBE)
        with world.ledger.lock:
            hub = {name: world.ledger.written.get(hub_key(name), DELETED) for name in sources}
        out = []
        for member in members:
            try:
                held = copies_held(world.direct[member].api_reader)
            except Exception as exc:
                out.append(f"copies of cluster={member} not readable: {exc}")
                continue
            for name in sorted({*sources, *held}):
                if held.get(name, DELETED) != hub.get(name, DELETED):
                    out.append(
                        f"copy behind: cluster={member} object={HUB_NS}/{name} "
                        f"hub={hub.get(name, DELETED)} copy={held.get(name, DELETED)}"
                    )
        return out

    def _converge_copies(self, world: World) -> list[str]:
        """Every member the provider has holds the hub's last written state of each source,
        and no request is left waiting for a cluster (every one answers)."""

        def waiting() -> dict[str, dict[str, list[Any]]]:
            found = {r.name: r.copier.waiting_requests() for r in world.live_replicas()}
            return {name: w for name, w in found.items() if w}

        try:
            wait_for(
                lambda: not self._copies_behind(world),
                CONVERGE_DEADLINE,
                "every member's copies caught up with the hub",
                interval=0.2,
            )
        except WaitTimeout:
            behind = self._copies_behind(world)
            self.copies_behind += sum(1 for line in behind if line.startswith("copy behind"))
            return [*behind, f"requests waiting for a cluster: {waiting()}"]
        try:
            wait_for(lambda: not waiting(), WAITING_DEADLINE, "no request waiting", interval=0.2)
        except WaitTimeout:
            left = waiting()
            self.left_waiting += sum(len(rs) for w in left.values() for rs in w.values())
            return [f"requests still waiting, every cluster answering: {left}"]
        return []

    def quiet_point(self, world: World, scheduler: Scheduler, label: str) -> list[str]:
        """Writers paused, every fault healed, then every invariant checked (with deadlines)."""
        assert world.writers is not None
        began = time.monotonic()
        scheduler.pause()
        scheduler.heal_all()
        world.writers.pause()
        healed = time.monotonic()
        self._resolve_unknown(world)
        found = self._check_servers(world)
        found += self._converge(world)
        found += self._converge_copies(world)
        converged = time.monotonic()
        with world.ledger.lock:
            if world.ledger.unwatched:
                found.append(f"reconciles in unwatched namespaces: {world.ledger.unwatched[:5]}")
                world.ledger.unwatched.clear()
            world.ledger.resolved.clear()
        with world.overlaps.lock:
            found += [f"overlap: {o}" for o in world.overlaps.found]
        with world.copy_overlaps.lock:
            found += [f"overlapping copies: {o}" for o in world.copy_overlaps.found]
        sample = self._sample(label)
        if self.opts.tracemalloc:
            self._trace(label)
        self.quiet_points.append(
            {
                "heal_s": healed - began,
                "converge_s": converged - healed,
                "threads": sample.threads,
                "rss_mib": round(sample.rss_mib, 1),
            }
        )
        print(
            f"[{label}] heal {healed - began:.1f}s converge {converged - healed:.1f}s "
            f"threads {sample.threads} rss {sample.rss_mib:.0f} MiB "
            f"faults {len(scheduler.outcomes)} writes {world.ledger.writes} "
            f"{'OK' if not found else 'VIOLATION'}",
            flush=True,
        )
        for line in found:
            print(f"  {line}", flush=True)
        world.writers.resume()
        scheduler.resume()
        return found

    def _trace(self, label: str) -> None:
        """Append the allocation sites that grew most since the first snapshot after warm-up."""
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        if self._baseline is None or len(self.quiet_points) < 2:
            self._baseline = snap
            return
        top = snap.compare_to(self._baseline, "lineno")[:15]
        with open(self.opts.out / "tracemalloc.txt", "a") as f:
            f.write(f"== {label}: traced {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB\n")
            for stat in top:
                f.write(f"{stat}\n")

    def _trend(self) -> list[str]:
        """Threads and RSS flat after warm-up: no later quiet point above the first by more than the tolerance."""
        points = [s for s in self.samples if s.label.startswith("quiet")]
        warm = max(1, len(points) // 4)
        after = points[warm:]
        if len(after) < 2:
            return []
        out = []
        base = after[0]
        top = max(after, key=lambda s: s.threads)
        if top.threads > base.threads + THREADS_TOLERANCE:
            grew = {
                n: f"{base.names.get(n, 0)}->{c}"
                for n, c in top.names.items()
                if c > base.names.get(n, 0)
            }
            out.append(
                f"thread count grew: {[s.threads for s in after]} (tolerance +{THREADS_TOLERANCE}); "
                f"{base.label} -> {top.label}: {grew}"
            )
        limit = base.rss_mib * (1 + RSS_TOLERANCE_FRACTION) + RSS_TOLERANCE_MIB
        if after[-1].rss_mib > limit:
            out.append(
                f"RSS grew: {base.rss_mib:.1f} -> {after[-1].rss_mib:.1f} MiB (limit {limit:.1f})"
            )
        return out

    # ---------------------------------------------------------------- run

    def run(self) -> dict[str, Any]:
        opts = self.opts
        chaos = opts.minutes * 60
        every = opts.quiet_every or (15.0 if chaos <= 120 else 60.0)
        handlers = self._capture_logs()
        if opts.tracemalloc:
            tracemalloc.start(4)
        self.commit = commit()  # the code that runs, whatever is committed meanwhile
        started = time.monotonic()
        load_start = os.getloadavg()
        world = self._setup()
        self.world = world
        assert world.writers is not None
        scheduler = Scheduler(
            world,
            self.rng,
            list(opts.kinds),
            max_active=opts.max_faults,
            on_error=lambda msg: print(f"  {msg}", flush=True),
        )
        self._sample("start")
        print(
            f"soak: {opts.clusters} clusters, {chaos:.0f} s of chaos, quiet point every {every:.0f} s, "
            f"seed {opts.seed}",
            flush=True,
        )
        try:
            world.writers.start()
            scheduler.start()
            done = 0.0
            n = 0
            while done < chaos and not self.violations:
                period = min(every, chaos - done)
                self._stop.wait(period)
                done += period
                n += 1
                self.violations += self.quiet_point(world, scheduler, f"quiet-{n}")
            scheduler.stop()
            world.writers.pause()
            self.violations += self._trend()
            errors = [o for o in scheduler.outcomes if o.error]
            self.violations += [f"fault {o.kind} on {o.cluster}: {o.error}" for o in errors]
        finally:
            self._teardown(world)
            for h in handlers:
                logging.getLogger().removeHandler(h)
                h.close()
        self._sample("end")
        if self.scanner.findings:
            self.violations += [f"secret in a log record: {f}" for f in self.scanner.findings]
        return self._report(world, scheduler, time.monotonic() - started, chaos, load_start)

    def _report(
        self,
        world: World,
        scheduler: Scheduler,
        wall: float,
        chaos: float,
        load_start: tuple[float, float, float],
    ) -> dict[str, Any]:
        faults: dict[str, dict[str, Any]] = {}
        for kind in self.opts.kinds:
            outs = [o for o in scheduler.outcomes if o.kind == kind]
            faults[kind] = {
                "injected": len(outs),
                **figures("recovery", [o.recovery for o in outs]),
                **figures("copy_recovery", [o.copy_recovery for o in outs]),
            }
        quiet = [s for s in self.samples if s.label.startswith("quiet")]
        first, last = self.samples[0], quiet[-1] if quiet else self.samples[-1]
        m = machine()
        m["load_average_start"] = list(load_start)
        return {
            "ok": not self.violations,
            "seed": self.opts.seed,
            "minutes": self.opts.minutes,
            "clusters": self.opts.clusters,
            "replicas": self.opts.replicas,
            "sharded": self.opts.sharded,
            "freeze_gc": self.opts.freeze_gc,
            "owner_changes": world.ledger.owner_changes,
            "replicas_started": world.replicas_started,
            "unplanned_replica_restarts": world.unplanned_restarts,
            "leader_changes": world.ledger.leader_changes,
            "writes_per_second_per_cluster": self.opts.rate,
            "duration_s": round(wall, 1),
            "chaos_s": round(chaos, 1),
            "commit": self.commit,
            "machine": m,
            "faults_total": len(scheduler.outcomes),
            "faults": faults,
            "quiet_points": len(self.quiet_points),
            "quiet_point_detail": self.quiet_points,
            "writes_acknowledged": world.ledger.writes,
            "writes_unknown_outcome": world.writers.failed if world.writers else 0,
            "reconciles": world.ledger.reconciles,
            "events_lost": self.events_lost,
            "overlaps": len(world.overlaps.found),
            "copy_writes": world.copy_writes,
            "copies_behind": self.copies_behind,
            "copy_overlaps": len(world.copy_overlaps.found),
            "requests_left_waiting": self.left_waiting,
            "log_records_scanned": self.scanner.records,
            "secrets_in_logs": len(self.scanner.findings),
            "threads": {"start": first.threads, "end": last.threads},
            "rss_mib": {"start": round(first.rss_mib, 1), "end": round(last.rss_mib, 1)},
            "samples": [
                {"label": s.label, "threads": s.threads, "rss_mib": round(s.rss_mib, 1)}
                for s in self.samples
            ],
            "tolerances": {
                "threads": f"+{THREADS_TOLERANCE} over the first quiet point after warm-up "
                f"(health probe pools excluded: at most {_MAX_PROBES} threads per replica)",
                "rss": f"+{RSS_TOLERANCE_FRACTION:.0%} + {RSS_TOLERANCE_MIB:.0f} MiB over the first quiet point after warm-up",
                "warm_up": "the first quarter of the quiet points (at least one)",
            },
            "violations": self.violations,
        }


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (what docs/reliability.md publishes)."""

    def s(v: float | None) -> str:
        return "–" if v is None else f"{v:.2f} s"

    m = report["machine"]
    if report.get("sharded"):
        replication = "sharded: each cluster reconciled by one of them"
        changes = f"clusters moved to another replica: {report['owner_changes']}"
    else:
        replication = "leader election"
        changes = f"leader changes: {report['leader_changes']}"
    lines = [
        f"# Soak run: {report['minutes']} min, {report['clusters']} clusters, seed {report['seed']}",
        "",
        f"- result: **{'all invariants held' if report['ok'] else 'VIOLATIONS'}**",
        f"- commit {report['commit']}; duration {report['duration_s']:.0f} s "
        f"({report['chaos_s']:.0f} s of chaos, {report['quiet_points']} quiet points)",
        f"- machine: {m['cpus']} CPUs ({m['cpu_model'] or 'unknown model'}), {m['platform']}, "
        f"Python {m['python']}, load average at start {m['load_average_start'][0]:.1f}, "
        f"at end {m['load_average'][0]:.1f}",
        f"- writes acknowledged: {report['writes_acknowledged']}, with unknown outcome "
        f"(resolved by reading back): {report['writes_unknown_outcome']}; reconciles: {report['reconciles']}",
        f"- replicas: {report['replicas']} ({replication}"
        + (", `freeze_gc`" if report.get("freeze_gc") else "")
        + "); started over the run: "
        f"{report['replicas_started']}, {changes}, "
        f"replicas that stopped unasked (replaced): {report['unplanned_replica_restarts']}",
        f"- events lost: **{report['events_lost']}**; overlapping reconciles: **{report['overlaps']}**; "
        f"secrets in {report['log_records_scanned']} log records: **{report['secrets_in_logs']}**",
        f"- hub to members: {report['copy_writes']} copies written; copies behind the hub at a "
        f"quiet point: **{report['copies_behind']}**; overlapping copies: "
        f"**{report['copy_overlaps']}**; requests left waiting for a cluster: "
        f"**{report['requests_left_waiting']}**",
        f"- threads: {report['threads']['start']} at start, {report['threads']['end']} at the end; "
        f"RSS: {report['rss_mib']['start']:.0f} MiB at start, {report['rss_mib']['end']:.0f} MiB at the end",
        "",
        "Recovery: from a fault's heal until the probe written into the cluster then was "
        "reconciled; copies: until the cluster's copies of the hub's sources caught up with the "
        "hub as it was then.",
        "",
        "| fault | injected | recovery p50 | recovery p99 | max | not recovered "
        "| copies p50 | copies p99 | max | not caught up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, f in report["faults"].items():
        lines.append(
            f"| {kind} | {f['injected']} | {s(f['recovery_p50_s'])} | {s(f['recovery_p99_s'])} "
            f"| {s(f['recovery_max_s'])} | {f['not_recovered']} "
            f"| {s(f['copy_recovery_p50_s'])} | {s(f['copy_recovery_p99_s'])} "
            f"| {s(f['copy_recovery_max_s'])} | {f['copy_recovery_not_recovered']} |"
        )
    lines.append(f"| **total** | {report['faults_total']} | | | | | | | | |")
    if report["violations"]:
        lines += ["", "## Violations", ""] + [f"- {v}" for v in report["violations"]]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m tests.soak",
        description="A chaos soak of a Manager over an envtest fleet; exits 1 on a broken invariant.",
    )
    p.add_argument("--minutes", type=float, required=True, help="minutes of chaos")
    p.add_argument("--clusters", type=int, default=10, help="API servers in the fleet (default 10)")
    p.add_argument("--seed", type=int, default=None, help="seed of the faults and writes")
    p.add_argument("--out", type=Path, default=Path("soak-results"), help="report directory")
    p.add_argument("--rate", type=float, default=4.0, help="writes/s per cluster (default 4)")
    p.add_argument(
        "--quiet-every",
        type=float,
        default=0.0,
        help="seconds between quiet points (default: auto)",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=2,
        help="replicas with leader election (default 2; 1: no election, no kill-leader fault)",
    )
    p.add_argument(
        "--sharded",
        action="store_true",
        help="the replicas shard the clusters instead of electing a leader (kill-shard-owner "
        "replaces kill-leader)",
    )
    p.add_argument(
        "--freeze-gc",
        action="store_true",
        help="the replicas run with ManagerOptions.freeze_gc (clusters leave and rejoin under it)",
    )
    p.add_argument(
        "--tracemalloc",
        action="store_true",
        help="write the allocation sites that grew most to tracemalloc.txt at each quiet point (slow)",
    )
    p.add_argument("--max-faults", type=int, default=3, help="faults active at once (default 3)")
    p.add_argument(
        "--faults",
        default=",".join(KINDS),
        help=f"comma-separated fault kinds (default: all of {', '.join(KINDS)})",
    )
    a = p.parse_args(argv)
    kinds = [k for k in a.faults.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        p.error(f"unknown fault kinds {unknown}; known: {list(KINDS)}")
    if a.clusters < 1 or a.minutes <= 0 or a.replicas < 1:
        p.error("--clusters and --replicas must be >= 1 and --minutes > 0")
    if a.sharded and a.replicas < 2:
        p.error("--sharded needs --replicas >= 2")
    if a.replicas == 1:
        kinds = [k for k in kinds if k not in REPLICATED]
    kinds = [k for k in kinds if k not in (ELECTED_ONLY if a.sharded else SHARDED_ONLY)]
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    return Options(
        minutes=a.minutes,
        clusters=a.clusters,
        seed=seed,
        out=a.out,
        rate=a.rate,
        quiet_every=a.quiet_every,
        max_faults=a.max_faults,
        replicas=a.replicas,
        sharded=a.sharded,
        freeze_gc=a.freeze_gc,
        kinds=kinds,
        tracemalloc=a.tracemalloc,
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    report = Soak(opts).run()
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    md = markdown(report)
    (opts.out / "report.md").write_text(md)
    print(md)
    if not report["ok"]:
        print("soak: invariants violated:", file=sys.stderr)
        for v in report["violations"]:
            print(f"  {v}", file=sys.stderr)
        return 1
    return 0
