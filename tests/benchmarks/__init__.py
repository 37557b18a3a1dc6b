"""Micro-benchmarks of mcruntime's hot paths, each printed beside a baseline measured in the same run.

Run ``python -m tests.benchmarks`` (or ``tox -e bench``) from the repository
root; ``--quick`` finishes in a few seconds.
"""
