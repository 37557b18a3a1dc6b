"""A chaos soak of mcruntime over an envtest fleet (`python -m tests.soak --minutes N`).

A Manager reconciles ConfigMaps in 10+ clusters while writer threads create,
update and delete them and a seeded scheduler injects faults (frozen and
restarted API servers, dropped and compacted watches, a partitioned or slow
path, a cluster removed and re-added, a namespace deleted and re-created). At
quiet points and at the end it checks that the last state written is the last
state reconciled for every object, that no two reconciles overlapped, that
threads and RSS stay flat and that no log record holds a secret; see
docs/reliability.md.
"""
