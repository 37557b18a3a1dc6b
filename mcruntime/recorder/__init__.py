"""Kubernetes Events per cluster: recorders that resolve each object's cluster and never block.

Get a recorder from the manager (``mgr.get_event_recorder_for("my-controller")``)
and post events from a reconcile; they land in the cluster of the request.
"""

from mcruntime._exports import publish
from mcruntime.recorder._correlator import Correlation, CorrelatorOptions, EventCorrelator
from mcruntime.recorder._recorder import NORMAL, WARNING, EventRecorder, RecorderProvider

__all__ = [
    "NORMAL",
    "WARNING",
    "Correlation",
    "CorrelatorOptions",
    "EventCorrelator",
    "EventRecorder",
    "RecorderProvider",
]

publish(__name__, globals(), __all__)
