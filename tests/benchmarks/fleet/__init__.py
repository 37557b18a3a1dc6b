"""Fleet benchmarks (issues 7 and 16): mcruntime against the limit and against what users run instead.

``python -m tests.benchmarks.fleet [--quick] [--out DIR]`` starts envtest
fleets (up to 1,000 clusters) in processes of their own, measures each subject
in a process of its own (mcruntime, the bare ``kubernetes`` client, the
hand-rolled thread-per-cluster pattern, and kopf with one operator process per
cluster, at most 100): initial sync, footprint, latency, throughput from writer
processes, saturation from envtest-side writes, latency with one cluster
frozen, churn of one cluster and of 100 of 1,000 at once; and writes
``results.json``, ``results.md`` and ``sync.png``/``memory.png``/``latency.png``
to DIR. The modules are private; the command line is the interface.
"""

__all__: list[str] = []
