"""Requests/s through mcruntime's work queue + controller workers + a no-op reconciler,
beside a bare ``queue.Queue`` drained by the same number of threads (measured in the same run).

Both sides get the same M distinct requests from one producer; the clock runs
from the first add until the last request was handled.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time

from mcruntime.controller import Controller, ControllerOptions
from mcruntime.reconcile import Request
from tests.benchmarks._common import Row, best_rate, table

QUICK_M = 5_000
FULL_M = 100_000
THREADS = 4


class _Done:
    """Counts handled requests (under a lock, as both sides must) and fires at ``target``."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.n = 0
        self.lock = threading.Lock()
        self.event = threading.Event()

    def __call__(self, req: Request) -> None:
        with self.lock:
            self.n += 1
            if self.n == self.target:
                self.event.set()


def measure_controller(requests: list[Request], threads: int) -> float:
    """Seconds for a controller with ``threads`` workers to reconcile every request once."""
    done = _Done(len(requests))
    ctrl = Controller("bench", done, options=ControllerOptions(max_concurrent_reconciles=threads))
    ctrl.start()
    try:
        add = ctrl.queue.add
        began = time.perf_counter()
        for req in requests:
            add(req)
        if not done.event.wait(300):
            raise RuntimeError(f"only {done.n} of {len(requests)} reconciled")
        return time.perf_counter() - began
    finally:
        ctrl.stop()


def measure_bare_queue(requests: list[Request], threads: int) -> float:
    """Seconds for ``threads`` threads on a ``queue.Queue`` to handle every request once."""
    done = _Done(len(requests))
    q: queue.Queue[Request | None] = queue.Queue()

    def worker() -> None:
        while (item := q.get()) is not None:
            done(item)
            q.task_done()

    workers = [
        threading.Thread(target=worker, name=f"mcruntime/bench/queue-{i}") for i in range(threads)
    ]
    for t in workers:
        t.start()
    try:
        put = q.put
        began = time.perf_counter()
        for req in requests:
            put(req)
        if not done.event.wait(300):
            raise RuntimeError(f"only {done.n} of {len(requests)} handled")
        return time.perf_counter() - began
    finally:
        for _ in workers:
            q.put(None)
        for t in workers:
            t.join()


def run(quick: bool = False, m: int | None = None, threads: int = THREADS) -> list[Row]:
    """Measure both sides; returns the table row."""
    m = m or (QUICK_M if quick else FULL_M)
    runs = 1 if quick else 3
    requests = [Request("default", f"obj-{i}") for i in range(m)]
    ours = best_rate(m, runs, lambda: measure_controller(requests, threads))
    bare = best_rate(m, runs, lambda: measure_bare_queue(requests, threads))
    return [
        Row(
            f"queue + {threads} workers + no-op reconciler",
            "requests",
            ours,
            f"queue.Queue + {threads} threads",
            bare,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_queue", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_M} requests, one run (about a second)"
    )
    parser.add_argument("-m", type=int, default=None, help="requests per run")
    parser.add_argument("--threads", type=int, default=THREADS, help="workers on both sides")
    args = parser.parse_args(argv)
    print(table(run(args.quick, args.m, args.threads)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
