"""A controller: one work queue, N workers, and sources started per engaged cluster."""

from mcruntime._exports import publish
from mcruntime.controller._controller import Controller, ReconcileInFlight
from mcruntime.controller._options import ControllerOptions, EngageOptions

__all__ = ["Controller", "ControllerOptions", "EngageOptions", "ReconcileInFlight"]

publish(__name__, globals(), __all__)
