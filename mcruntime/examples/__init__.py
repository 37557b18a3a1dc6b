"""Runnable examples: ``python -m mcruntime.examples.<name>``."""
