"""``Basic``: the pass-through coordinator (every replica engages every cluster)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcruntime.manager import Manager
    from mcruntime.multicluster import Aware

__all__ = ["Basic"]


class Basic:
    """Engages every cluster the provider offers: the same as having no coordinator."""

    def bind(self, manager: Manager) -> Aware:
        """The manager itself is what the provider engages with."""
        return manager

    def start(self, stop: threading.Event) -> None:
        """Nothing to coordinate: block until ``stop``."""
        stop.wait()

    def __repr__(self) -> str:
        return "Basic()"
