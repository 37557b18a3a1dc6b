"""Fleet benchmarks (issue 7): mcruntime against the limit and against what users run instead.

``python -m tests.benchmarks.fleet [--quick] [--out DIR]`` starts envtest
fleets in processes of their own, measures each subject in a process of its
own (mcruntime, the bare ``kubernetes`` client, the hand-rolled thread-per-
cluster pattern, and kopf with one operator process per cluster), and writes
``results.json``, ``results.md`` and ``latency.png``/``memory.png`` to DIR.
The modules are private; the command line is the interface.
"""

__all__: list[str] = []
