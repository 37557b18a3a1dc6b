"""One writer process: its own connections, its share of one write sequence.

    python -m tests.benchmarks.fleet._writer

Reads a set-up line (JSON: ``kubeconfig``, ``names`` or null for every cluster),
answers ``{"ready": true}``, then runs one job per input line (``mode``
``"flood"`` or ``"rate"``, ``seconds``, ``objects``, ``threads``, ``rate``,
``offset``, ``stride``, ``start_at`` a ``time.time()``) and answers each with its
``sent``, ``errors`` and ``seconds``, until end of input. Several of them offer
more writes than one Python process can send.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

from tests.benchmarks.fleet._fleet import Writer, raise_fd_limit

__all__ = ["main"]


def main() -> int:
    raise_fd_limit()
    setup: dict[str, Any] = json.loads(sys.stdin.readline())
    with open(setup["kubeconfig"]) as f:
        doc = yaml.safe_load(f)
    writer = Writer(doc, setup.get("names"))
    writer.warm(threads=4)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        job: dict[str, Any] = json.loads(line)
        common: dict[str, Any] = {
            "threads": job["threads"],
            "offset": job["offset"],
            "stride": job["stride"],
            "start_at": job["start_at"],
        }
        if job["mode"] == "flood":
            ws = writer.flood(job["seconds"], job["objects"], **common)
        else:
            ws = writer.write(job["rate"], job["seconds"], job["objects"], **common)
        print(json.dumps({"sent": ws.sent, "errors": ws.errors, "seconds": ws.seconds}), flush=True)
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
