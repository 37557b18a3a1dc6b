"""One envtest process of the fleet benchmark, with a control channel on stdin.

    python -m tests.benchmarks.fleet._envserver --clusters N --kubeconfig PATH --prefix P
        [--history H] [--plain-http]

Like ``python -m mcruntime.envtest`` it serves N clusters from
[`Fleet`][mcruntime.envtest.Fleet] and writes their kubeconfig; it then answers
JSON-line commands on stdin (one JSON answer line each on stdout) so the
orchestrator can act on a named cluster from outside the process:

- ``{"op": "seed", "objects": N}``: create N ConfigMaps in every cluster, in-process
  (no HTTP: starting 1,000 seeded clusters takes seconds, not minutes);
- ``{"op": "inject", "seconds": S, "objects": N, "rate": R, "start_at": T}``: patch the
  writers' timestamp annotation into the ConfigMaps of every cluster of this process
  itself, round-robin, at R per second or as fast as it can (``rate`` null), from T
  (a ``time.time()``) for S seconds: a load no HTTP writer on the same cores can offer;
- ``{"op": "freeze", "name": C}`` / ``{"op": "thaw", "name": C}``:
  [`APIServer.freeze()`][mcruntime.envtest.APIServer.freeze] / ``thaw()`` of cluster C;
- ``{"op": "stop"}`` (or end of input): close every server and exit.

The first line on stdout is ``envtest: serving N clusters ...`` once every server listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import orjson

from mcruntime.envtest import APIServer, Fleet
from mcruntime.envtest import _loop as envtest_loop
from tests.benchmarks.fleet._objects import ANNOTATION, NAMESPACE, configmap, object_name

__all__ = ["main"]

MERGE_PATCH = "application/merge-patch+json"


def _seed(server: APIServer, objects: int) -> None:
    """Create ``objects`` ConfigMaps in ``server`` on the envtest loop (where requests run)."""
    res = server._registry.get("", "v1", "configmaps")
    assert res is not None

    async def create() -> None:
        for i in range(objects):
            if server._store.get(res.key, NAMESPACE, object_name(i)) is None:
                server._objects.create(res, NAMESPACE, configmap(i), manager="bench-seed")

    envtest_loop.run(create(), timeout=600)


async def _inject(
    servers: list[APIServer], seconds: float, objects: int, rate: float | None, start_at: float
) -> dict[str, Any]:
    """Patch the timestamp annotation into the seeded ConfigMaps of ``servers``, round-robin,
    on the envtest loop (no HTTP): at ``rate`` per second, or as fast as the loop allows
    (``None``), from ``start_at`` (a ``time.time()``) for ``seconds``. Batches of writes
    alternate with the loop's other work, so the watches send while writes go on."""
    loop = asyncio.get_running_loop()
    reses = [s._registry.get("", "v1", "configmaps") for s in servers]
    await asyncio.sleep(max(0.0, start_at - time.time()))
    t0 = loop.time()
    end = t0 + seconds
    n, i, errors = len(servers), 0, 0
    while True:
        now = loop.time()
        if now >= end:
            break
        todo = 20 if rate is None else min(50, int((now - t0) * rate) - i)
        if todo <= 0:
            await asyncio.sleep(0.002)
            continue
        for _ in range(todo):
            k = i % n
            res = reses[k]
            assert res is not None
            raw = b'{"metadata":{"annotations":{"%s":"%.6f"}}}' % (ANNOTATION.encode(), time.time())
            try:
                servers[k]._objects.patch(
                    res, NAMESPACE, object_name((i // n) % objects), MERGE_PATCH, raw
                )
            except Exception:  # counted, as the HTTP writers count failed writes
                errors += 1
            i += 1
        await asyncio.sleep(0)
    return {"sent": i - errors, "errors": errors, "seconds": loop.time() - t0}


def serve(fleet: Fleet, inp: Any, out: Any) -> None:
    """Answer commands from ``inp`` until ``stop`` or end of input."""

    def reply(**fields: Any) -> None:
        out.write(orjson.dumps(fields).decode() + "\n")
        out.flush()

    for line in inp:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.get("op")
        try:
            if op == "seed":
                for server in fleet:
                    _seed(server, int(cmd["objects"]))
                reply(op=op, clusters=len(fleet))
            elif op == "inject":
                got = envtest_loop.run(
                    _inject(
                        fleet.servers,
                        float(cmd["seconds"]),
                        int(cmd["objects"]),
                        cmd.get("rate"),
                        float(cmd.get("start_at") or time.time()),
                    ),
                    timeout=float(cmd["seconds"]) + 120,
                )
                reply(op=op, **got)
            elif op == "freeze":
                fleet.freeze(cmd["name"])
                reply(op=op, name=cmd["name"])
            elif op == "thaw":
                fleet.thaw(cmd["name"])
                reply(op=op, name=cmd["name"])
            elif op == "stop":
                reply(op=op)
                return
            else:
                reply(op=op, error=f"unknown op {op!r}")
        except Exception as exc:  # answer, so the orchestrator never waits for nothing
            reply(op=op, error=f"{type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.fleet._envserver")
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--prefix", default="cluster")
    parser.add_argument("--history", type=int, default=10000)
    parser.add_argument("--plain-http", action="store_true")
    args = parser.parse_args(argv)
    fleet = Fleet(
        args.clusters,
        prefix=args.prefix,
        history=args.history,
        tls=not args.plain_http,
        root_ca_configmap=True,
    )
    out = sys.stdout
    sys.stdout = sys.stderr
    fleet.start()
    try:
        path = fleet.write_kubeconfig(args.kubeconfig)
        out.write(f"envtest: serving {len(fleet)} clusters, kubeconfig at {path}\n")
        out.flush()
        serve(fleet, sys.stdin, out)
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
