"""Turning the figures into ratios, target verdicts, markdown tables and PNG plots."""

from __future__ import annotations

import math
import pathlib
from typing import Any

from tests.benchmarks.fleet._procstat import MiB

__all__ = ["GO_MIB_PER_CLUSTER", "GO_CLUSTERS", "percentiles", "derive", "markdown", "plot"]

#: a production multicluster-runtime (Go) user's working set per engaged cluster, for the record
GO_MIB_PER_CLUSTER = 14.0
GO_CLUSTERS = 395
SUBJECTS = ("mcruntime", "bare", "handrolled")
LABELS = {
    "mcruntime": "mcruntime",
    "bare": "bare client (limit)",
    "handrolled": "hand-rolled threads",
    "kopf": "kopf (1 process/cluster)",
}


def percentiles(samples_ms: list[float]) -> dict[str, float | int | None]:
    """Nearest-rank p50/p95/p99 and max of ``samples_ms``; Nones without samples."""
    if not samples_ms:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    xs = sorted(samples_ms)

    def rank(p: float) -> float:
        return round(xs[max(0, math.ceil(p / 100 * len(xs)) - 1)], 2)

    return {
        "n": len(xs),
        "p50_ms": rank(50),
        "p95_ms": rank(95),
        "p99_ms": rank(99),
        "max_ms": round(xs[-1], 2),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def _size(results: dict[str, Any], clusters: int) -> dict[str, Any] | None:
    return next((s for s in results["sizes"] if s["clusters"] == clusters), None)


def _fit_memory(sizes: list[dict[str, Any]]) -> dict[str, float] | None:
    """Least squares ``rss_delta = a * clusters + b * objects`` over the sizes run."""
    pts = [
        (s["clusters"], s["objects"], s["mcruntime"]["rss_delta"])
        for s in sizes
        if "rss_delta" in s.get("mcruntime", {})
    ]
    if len(pts) < 2:
        return None
    scc = sum(c * c for c, _, _ in pts)
    soo = sum(o * o for _, o, _ in pts)
    sco = sum(c * o for c, o, _ in pts)
    scy = sum(c * y for c, _, y in pts)
    soy = sum(o * y for _, o, y in pts)
    det = scc * soo - sco * sco
    if det == 0:
        return None
    a = (scy * soo - soy * sco) / det
    b = (soy * scc - scy * sco) / det
    return {"mib_per_cluster": round(a / MiB, 3), "kib_per_object": round(b / 1024, 3)}


def _no_fault_p99(results: dict[str, Any], fig: dict[str, Any]) -> float | None:
    """The subject's p99 with no fault at the frozen phase's rate."""
    rate = str(results["plan"].get("freeze_rate", 200))
    p99: float | None = (fig.get("latency") or {}).get(rate, {}).get("p99_ms")
    return p99


def derive(results: dict[str, Any], rate_for_target: int = 200, target_clusters: int = 100) -> None:
    """Add ``ratios``, ``reference`` and ``targets`` to ``results`` (in place)."""
    ratios: dict[str, Any] = {}
    for s in results["sizes"]:
        key = f"{s['clusters']}x{s['objects_per_cluster']}"
        m, b, h, k = (s.get(n, {}) for n in ("mcruntime", "bare", "handrolled", "kopf"))
        r: dict[str, Any] = {
            "sync_vs_bare": _ratio(m.get("sync_s"), b.get("sync_s")),
            "sync_vs_handrolled": _ratio(m.get("sync_s"), h.get("sync_s")),
            "sync_vs_kopf": _ratio(m.get("sync_s"), k.get("sync_s")),
            "rss_vs_bare": _ratio(m.get("rss"), b.get("rss")),
            "rss_vs_handrolled": _ratio(m.get("rss"), h.get("rss")),
            "rss_vs_kopf": _ratio(m.get("rss"), k.get("rss")),
            "rss_vs_kopf_pss": _ratio(m.get("pss"), k.get("pss")),
            "throughput_vs_bare": _ratio(
                m.get("throughput", {}).get("per_s"), b.get("throughput", {}).get("per_s")
            ),
        }
        for rate, lat in (m.get("latency") or {}).items():
            r[f"p99_vs_bare@{rate}"] = _ratio(
                lat.get("p99_ms"), (b.get("latency") or {}).get(rate, {}).get("p99_ms")
            )
        r["saturation_vs_bare"] = _ratio(
            m.get("saturation", {}).get("per_cpu_s"), b.get("saturation", {}).get("per_cpu_s")
        )
        for subj, fig in (("mcruntime", m), ("bare", b), ("handrolled", h)):
            r[f"frozen_p99_vs_no_fault_{subj}"] = _ratio(
                fig.get("frozen", {}).get("p99_ms"), _no_fault_p99(results, fig)
            )
        ratios[key] = r
    results["ratios"] = ratios

    fit = _fit_memory(results["sizes"])
    biggest = max(results["sizes"], key=lambda s: s["clusters"], default=None)
    ours = biggest["mcruntime"].get("rss_per_cluster") if biggest else None
    results["reference"] = {
        "go_multicluster_runtime_mib_per_cluster": GO_MIB_PER_CLUSTER,
        "go_at_clusters": GO_CLUSTERS,
        "mcruntime_mib_per_cluster": round(ours / MiB, 3) if ours else None,
        "mcruntime_at_clusters": biggest["clusters"] if biggest else None,
        "mcruntime_fit": fit,
        "note": "Go figure is a working set measured in production with real objects; ours is RSS "
        "growth over the idle manager with small ConfigMaps on envtest.",
    }

    targets: list[dict[str, Any]] = []
    t = _size(results, target_clusters)
    if t is not None:
        m, b, h, k = (t.get(n, {}) for n in ("mcruntime", "bare", "handrolled", "kopf"))
        ms, bs = m.get("sync_s"), b.get("sync_s")
        targets.append(
            {
                "target": f"initial sync {t['clusters']}x{t['objects_per_cluster']} within 1.5x the bare client",
                "figure": f"{ms:.2f}s vs {bs:.2f}s = {ms / bs:.2f}x" if ms and bs else "n/a",
                "met": bool(ms and bs and ms <= 1.5 * bs),
            }
        )
        lat = (m.get("latency") or {}).get(str(rate_for_target), {})
        p99 = lat.get("p99_ms")
        targets.append(
            {
                "target": f"p99 write-to-reconcile at {rate_for_target} writes/s across {t['clusters']} clusters < 50 ms",
                "figure": f"p99 {p99} ms (achieved {lat.get('writes', {}).get('achieved_rate')} writes/s)"
                if p99 is not None
                else "n/a",
                "met": p99 is not None and p99 < 50,
            }
        )
        mr, kr, hr = m.get("rss"), k.get("rss"), h.get("rss")
        targets.append(
            {
                "target": f"total RSS for {t['clusters']} clusters <= 1/10 of kopf's processes and below hand-rolled",
                "figure": (
                    f"{mr / MiB:.0f} MiB vs kopf {kr / MiB:.0f} MiB (1/{kr / mr:.1f}) "
                    f"and hand-rolled {hr / MiB:.0f} MiB"
                    if mr and kr and hr
                    else f"mcruntime {mr and mr / MiB:.0f} MiB; kopf {k.get('skipped', 'n/a')}"
                    if mr
                    else "n/a"
                ),
                "met": bool(mr and kr and hr and mr * 10 <= kr and mr < hr),
            }
        )
    big = max(results["sizes"], key=lambda s: s["clusters"], default=None)
    if big is not None and big["clusters"] > 1:
        m, b = big.get("mcruntime", {}), big.get("bare", {})
        name = f"{big['clusters']}x{big['objects_per_cluster']}"
        if big is not t:
            lat = (m.get("latency") or {}).get(str(rate_for_target), {})
            p99 = lat.get("p99_ms")
            targets.append(
                {
                    "target": f"p99 write-to-reconcile at {rate_for_target} writes/s across {big['clusters']} clusters < 50 ms",
                    "figure": f"p99 {p99} ms (bare client {(b.get('latency') or {}).get(str(rate_for_target), {}).get('p99_ms')} ms)"
                    if p99 is not None
                    else "n/a",
                    "met": p99 is not None and p99 < 50,
                }
            )
        fz, nf = m.get("frozen", {}).get("p99_ms"), _no_fault_p99(results, m)
        if fz is not None:
            targets.append(
                {
                    "target": f"one of {big['clusters']} clusters frozen: the healthy clusters' p99 within 2x the no-fault p99",
                    "figure": f"{fz} ms vs {nf} ms = {fz / nf:.2f}x" if nf else f"{fz} ms",
                    "met": bool(nf and fz <= 2 * nf),
                }
            )
        msat, bsat = m.get("saturation", {}), b.get("saturation", {})
        ms, bs = msat.get("per_cpu_s"), bsat.get("per_cpu_s")
        if ms and bs:
            targets.append(
                {
                    "target": f"saturation rate at {name} at least 0.9x the bare client's "
                    "(handled per second of the subject's own core)",
                    "figure": f"{ms:.0f} vs {bs:.0f} handled per CPU-second = {ms / bs:.2f}x "
                    f"({msat['per_s']:.0f} vs {bsat['per_s']:.0f} handled/s of "
                    f"{msat['offered']['achieved_rate']:.0f} writes/s offered, "
                    f"CPU {msat['cpu_utilisation']} vs {bsat['cpu_utilisation']})",
                    "met": ms >= 0.9 * bs,
                }
            )
    fc = results.get("fleet_churn")
    if fc and "before" in fc:
        pb = fc["before"].get("p99_ms")
        pa, pr = fc["during_add"].get("p99_ms"), fc["during_remove"].get("p99_ms")
        worst = max((x for x in (pa, pr) if x is not None), default=None)
        bare = fc.get("bare") or {}
        bare_add = (
            f"; the bare client: {bare['before'].get('p99_ms')} ms before, "
            f"{bare['during_add'].get('p99_ms')} ms while it starts watching the {fc['batch']}"
            if bare
            else ""
        )
        control = fc.get("control") or {}
        control_add = (
            f"; with the {fc['batch']} joining another process instead: "
            f"{control['before'].get('p99_ms')} ms before, "
            f"{control['during_add'].get('p99_ms')} ms during the add"
            if control
            else ""
        )
        targets.append(
            {
                "target": f"{fc['batch']} of {fc['clusters']} clusters added, then removed at once: "
                "the others' p99 within 2x",
                "figure": f"p99 before {pb} ms, during add {pa} ms, during remove {pr} ms"
                + bare_add
                + control_add,
                "met": bool(pb and worst is not None and worst <= 2 * pb),
            }
        )
        b0, a0 = fc["stat_before"], fc["stat_after"]
        growth = (a0["rss"] - b0["rss"]) / b0["rss"]
        targets.append(
            {
                "target": f"after removing the {fc['batch']}: threads back to before, RSS within 5%",
                "figure": f"threads {b0['threads']} -> {fc['stat_engaged']['threads']} -> "
                f"{a0['threads']}; RSS {b0['rss'] / MiB:.1f} -> {a0['rss'] / MiB:.1f} MiB "
                f"({growth:+.1%}"
                + (
                    f"; {fc['stat_after_trimmed']['rss'] / MiB:.1f} MiB once the C allocator "
                    "gave back its free pages"
                    if fc.get("stat_after_trimmed")
                    else ""
                )
                + ")",
                "met": a0["threads"] <= b0["threads"]
                and growth < 0.05
                and not fc["remove"].get("leftover_threads"),
            }
        )
    c = results.get("churn")
    if c and c.get("series"):
        start, warm, end = c["start"], c["series"][0], c.get("end") or c["series"][-1]
        growth = (end["rss"] - warm["rss"]) / warm["rss"]
        targets.append(
            {
                "target": f"{len(c['series'])} engage/disengage cycles: threads back to start, RSS growth < 5%",
                "figure": (
                    f"threads {start['threads']} -> {end['threads']} (most during a cycle: "
                    f"{max(x['threads'] for x in c['series'])}); RSS {warm['rss'] / MiB:.1f} MiB "
                    f"(after cycle 1) -> {end['rss'] / MiB:.1f} MiB ({growth:+.1%})"
                ),
                "met": end["threads"] == start["threads"]
                and growth < 0.05
                and not c.get("leftover_threads"),
            }
        )
    results["targets"] = targets


def _mib(x: float | None) -> str:
    return "-" if x is None else f"{x / MiB:.1f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(results: dict[str, Any]) -> str:
    """Every table of the run as markdown."""
    out: list[str] = []
    sizes = results["sizes"]

    def table(title: str, head: list[str], rows: list[list[str]]) -> None:
        out.append(f"### {title}\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        out.extend("| " + " | ".join(r) + " |" for r in rows)
        out.append("")

    def name(s: dict[str, Any]) -> str:
        return f"{s['clusters']}x{s['objects_per_cluster']}"

    table(
        "Initial sync (start to every object handled once), seconds",
        [
            "clusters x objects",
            "mcruntime",
            "bare client",
            "hand-rolled",
            "kopf",
            "mcruntime / bare",
        ],
        [
            [
                name(s),
                _s(s["mcruntime"].get("sync_s")),
                _s(s["bare"].get("sync_s")),
                _s(s["handrolled"].get("sync_s")),
                _s(s.get("kopf", {}).get("sync_s")),
                _s(results["ratios"][name(s)]["sync_vs_bare"]),
            ]
            for s in sizes
        ],
    )
    table(
        "Footprint after sync (RSS, MiB; kopf: sum of its processes, PSS in brackets)",
        [
            "clusters x objects",
            "mcruntime",
            "peak",
            "per cluster",
            "per object (KiB)",
            "threads/cluster",
            "bare client",
            "hand-rolled",
            "kopf",
        ],
        [
            [
                name(s),
                _mib(s["mcruntime"].get("rss")),
                _mib(s["mcruntime"].get("peak_rss")),
                _mib(s["mcruntime"].get("rss_per_cluster")),
                f"{s['mcruntime'].get('rss_per_object', 0) / 1024:.2f}",
                f"{s['mcruntime'].get('threads_per_cluster', 0):.2f}",
                _mib(s["bare"].get("rss")),
                _mib(s["handrolled"].get("rss")),
                (
                    f"{_mib(s['kopf']['rss'])} ({_mib(s['kopf']['pss'])})"
                    if "rss" in s.get("kopf", {})
                    else s.get("kopf", {}).get("skipped", "-")
                ),
            ]
            for s in sizes
        ],
    )
    rates = results["plan"]["rates"]
    rows = []
    for s in sizes:
        for rate in rates:
            row = [name(s), str(rate)]
            for subj in SUBJECTS:
                lat = (s[subj].get("latency") or {}).get(str(rate), {})
                row.append(
                    f"{_ms(lat.get('p50_ms'))} / {_ms(lat.get('p95_ms'))} / {_ms(lat.get('p99_ms'))}"
                )
            lat = (s["mcruntime"].get("latency") or {}).get(str(rate), {})
            row.append(str(lat.get("writes", {}).get("achieved_rate", "-")))
            rows.append(row)
    table(
        "Write-to-handler latency, p50 / p95 / p99 ms (mcruntime: to reconcile)",
        [
            "clusters x objects",
            "writes/s asked",
            "mcruntime",
            "bare client",
            "hand-rolled",
            "writes/s achieved (mcruntime run)",
        ],
        rows,
    )
    table(
        "Throughput under a flood of updates (handled per second)",
        [
            "clusters x objects",
            "mcruntime",
            "bare client",
            "hand-rolled",
            "writes/s sent (mcruntime run)",
            "mcruntime CPU ms per reconcile",
        ],
        [
            [name(s)]
            + [f"{s[subj].get('throughput', {}).get('per_s', 0):.0f}" for subj in SUBJECTS]
            + [
                f"{s['mcruntime'].get('throughput', {}).get('writes', {}).get('achieved_rate', 0):.0f}",
                _ms(s["mcruntime"].get("throughput", {}).get("cpu_ms_per_reconcile")),
            ]
            for s in sizes
        ],
    )
    frate = results["plan"].get("freeze_rate", 200)
    frozen_rows = []
    for s in sizes:
        if "frozen" not in s["mcruntime"]:
            continue
        row = [name(s)]
        for subj in SUBJECTS:
            nf, fz = _no_fault_p99(results, s[subj]), s[subj].get("frozen", {}).get("p99_ms")
            row.append(f"{_ms(nf)} / {_ms(fz)} ({_s(_ratio(fz, nf))}x)")
        row.append(str(s["mcruntime"]["frozen"]["writes"]["achieved_rate"]))
        frozen_rows.append(row)
    if frozen_rows:
        table(
            f"One cluster frozen: p99 of the healthy clusters at {frate} writes/s, no fault / frozen, ms",
            [
                "clusters x objects",
                "mcruntime",
                "bare client",
                "hand-rolled",
                "writes/s achieved (mcruntime run)",
            ],
            frozen_rows,
        )
    if any("saturation" in s["mcruntime"] for s in sizes):
        table(
            "Saturation: handled per second while the envtest processes write themselves "
            "(they run on half of the cores, the subject on the other half)",
            [
                "clusters x objects",
                "writes/s offered",
                "mcruntime",
                "bare client",
                "hand-rolled",
                "handled per CPU-second (mcruntime / bare)",
                "mcruntime / bare (per CPU-second)",
                "CPU, cores (mcruntime / bare)",
                "saturated (mcruntime / bare)",
                "p99 ms (mcruntime / bare)",
            ],
            [
                [
                    name(s),
                    f"{s['mcruntime'].get('saturation', {}).get('offered', {}).get('achieved_rate', 0):.0f}",
                    *(f"{s[subj].get('saturation', {}).get('per_s', 0):.0f}" for subj in SUBJECTS),
                    f"{s['mcruntime'].get('saturation', {}).get('per_cpu_s') or 0:.0f} / "
                    f"{s['bare'].get('saturation', {}).get('per_cpu_s') or 0:.0f}",
                    _s(results["ratios"][name(s)].get("saturation_vs_bare")),
                    f"{_s(s['mcruntime'].get('saturation', {}).get('cpu_utilisation'))} / "
                    f"{_s(s['bare'].get('saturation', {}).get('cpu_utilisation'))}",
                    f"{s['mcruntime'].get('saturation', {}).get('saturated', '-')} / "
                    f"{s['bare'].get('saturation', {}).get('saturated', '-')}",
                    f"{_ms(s['mcruntime'].get('saturation', {}).get('p99_ms'))} / "
                    f"{_ms(s['bare'].get('saturation', {}).get('p99_ms'))}",
                ]
                for s in sizes
            ],
        )
    fc = results.get("fleet_churn")
    if fc and "before" in fc:
        table(
            f"Churn at scale: {fc['batch']} of {fc['clusters']} clusters added at once, then "
            f"removed at once, {fc['rate']} writes/s on the others",
            [
                "others' p99 before / during add / during remove / after (ms)",
                f"add to all {fc['batch']} synced (s)",
                "remove to their threads gone (s)",
                "threads before / engaged / after",
                "RSS before / engaged / after (MiB)",
                "RSS and threads after each further cycle",
                "leftover threads",
                "bare client: others' p99 before / during add (ms), add to synced (s)",
            ],
            [
                [
                    " / ".join(
                        _ms(fc[k].get("p99_ms"))
                        for k in ("before", "during_add", "during_remove", "after")
                    ),
                    f"{fc['add']['synced_s']:.2f}",
                    f"{fc['remove']['threads_gone_s']:.3f}",
                    f"{fc['stat_before']['threads']} / {fc['stat_engaged']['threads']} / "
                    f"{fc['stat_after']['threads']}",
                    f"{_mib(fc['stat_before']['rss'])} / {_mib(fc['stat_engaged']['rss'])} / "
                    f"{_mib(fc['stat_after']['rss'])}",
                    ", ".join(
                        f"{_mib(x['stat']['rss'])} MiB / {x['stat']['threads']}"
                        for x in fc.get("repeats") or []
                    )
                    or "-",
                    str(
                        len(fc["remove"].get("leftover_threads") or [])
                        + sum(len(x["leftover_threads"]) for x in fc.get("repeats") or [])
                    ),
                    (
                        f"{_ms(fc['bare']['before'].get('p99_ms'))} / "
                        f"{_ms(fc['bare']['during_add'].get('p99_ms'))}, "
                        f"{fc['bare']['add']['synced_s']:.2f}"
                    )
                    if fc.get("bare")
                    else "-",
                ]
            ],
        )
    c = results.get("churn")
    if c and c.get("series"):
        table(
            "Churn (one cluster added and removed repeatedly)",
            [
                "cycles",
                "add to first reconcile p50 / max (s)",
                "remove to threads gone p50 / max (s)",
                "threads start / after 1 / end",
                "RSS after 1 / end (MiB)",
                "leftover threads",
            ],
            [
                [
                    str(len(c["series"])),
                    f"{c['add_p50_s']:.3f} / {max(c['add_s']):.3f}",
                    f"{c['remove_p50_s']:.4f} / {max(c['remove_s']):.4f}",
                    f"{c['start']['threads']} / {c['series'][0]['threads']} / {c.get('end', c['series'][-1])['threads']}",
                    f"{_mib(c['series'][0]['rss'])} / {_mib(c['series'][-1]['rss'])}",
                    str(len(c.get("leftover_threads") or [])),
                ]
            ],
        )
    ref = results.get("reference", {})
    if ref.get("mcruntime_mib_per_cluster") is not None:
        fit = ref.get("mcruntime_fit") or {}
        out.append(
            f"Per engaged cluster: mcruntime {ref['mcruntime_mib_per_cluster']:.2f} MiB at "
            f"{ref['mcruntime_at_clusters']} clusters (fit over all sizes: "
            f"{fit.get('mib_per_cluster', '-')} MiB per cluster + {fit.get('kib_per_object', '-')} KiB "
            f"per object); for the record, a production multicluster-runtime (Go) user measured "
            f"~{ref['go_multicluster_runtime_mib_per_cluster']:.0f} MiB working set per engaged cluster "
            f"at {ref['go_at_clusters']} clusters.\n"
        )
    if results.get("targets"):
        table(
            "Targets",
            ["target", "figure", "met"],
            [
                [t["target"], t["figure"], "met" if t["met"] else "MISSED"]
                for t in results["targets"]
            ],
        )
    return "\n".join(out)


def plot(results: dict[str, Any], out: pathlib.Path) -> list[pathlib.Path]:
    """latency.png, sync.png and memory.png against the number of clusters, each subject
    beside the bare client; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    sizes = sorted(results["sizes"], key=lambda s: s["clusters"])
    xs = [s["clusters"] for s in sizes]
    rates = results["plan"]["rates"]
    rate = "200" if 200 in rates else str(rates[-1])

    def save(fig: Any, ax: Any, ylabel: str, title: str, name: str, fontsize: int = 8) -> Any:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("clusters")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=fontsize)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    def per_size(key: str, scale: float, ylabel: str, title: str, name: str) -> Any:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for subj, style in (
            ("mcruntime", "o-"),
            ("bare", "s--"),
            ("handrolled", "^:"),
            ("kopf", "d-."),
        ):
            ys = [s.get(subj, {}).get(key) for s in sizes]
            pts = [(x, y / scale) for x, y in zip(xs, ys, strict=True) if y]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=LABELS[subj])
        return save(fig, ax, ylabel, title, name)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for subj, style in (("mcruntime", "o-"), ("bare", "s--"), ("handrolled", "^:")):
        for pct, alpha in (("p99_ms", 1.0), ("p50_ms", 0.45)):
            ys = [(s[subj].get("latency") or {}).get(rate, {}).get(pct) for s in sizes]
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    style,
                    alpha=alpha,
                    label=f"{LABELS[subj]} {pct.split('_')[0]}",
                )
    ax.axhline(50, color="grey", lw=0.8, ls="-.", label="target p99 50 ms")
    return [
        save(
            fig,
            ax,
            f"write-to-handler latency at {rate} writes/s (ms)",
            "Latency vs number of clusters",
            "latency.png",
            fontsize=7,
        ),
        per_size(
            "sync_s",
            1,
            "initial sync, start to every object handled (s)",
            "Initial sync vs number of clusters",
            "sync.png",
        ),
        per_size(
            "rss",
            MiB,
            "total RSS after initial sync (MiB)",
            "Memory vs number of clusters",
            "memory.png",
        ),
    ]
