"""``python -m tests.benchmarks [--quick]``: run every micro-benchmark and print one markdown table."""

from __future__ import annotations

import argparse
import platform
import sys

from tests.benchmarks import (
    bench_async,
    bench_informer,
    bench_kubeconfig,
    bench_metadata,
    bench_metrics,
    bench_queue,
    bench_webhook,
)
from tests.benchmarks._common import Row, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and one run each (a few seconds)"
    )
    parser.add_argument(
        "--only",
        choices=("informer", "queue", "webhook", "async", "kubeconfig", "metrics", "metadata"),
        help="run one benchmark",
    )
    args = parser.parse_args(argv)
    rows: list[Row] = []
    if args.only in (None, "informer"):
        rows += bench_informer.run(quick=args.quick)
    if args.only in (None, "queue"):
        rows += bench_queue.run(quick=args.quick)
    if args.only in (None, "webhook"):
        rows += bench_webhook.run(quick=args.quick)
    if args.only in (None, "async"):
        rows += bench_async.run(quick=args.quick)
    if args.only in (None, "kubeconfig"):
        rows += bench_kubeconfig.run(quick=args.quick)
    if args.only in (None, "metrics"):
        rows += bench_metrics.run(quick=args.quick)
    if args.only in (None, "metadata"):
        rows += bench_metadata.run(quick=args.quick)
    mode = "quick" if args.quick else "full"
    print(
        f"mcruntime micro-benchmarks ({mode}; Python {platform.python_version()}; "
        "ratio = mcruntime / baseline, higher is better)\n"
    )
    print(table(rows))
    notes = bench_webhook.latency_lines(rows) + bench_metadata.memory_lines()
    if notes:
        print("\n" + "\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
