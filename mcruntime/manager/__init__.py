"""The manager: local cluster, provider, controllers and runnables, and their engagement."""

from mcruntime._exports import publish
from mcruntime.manager._engagement import EngagementState
from mcruntime.manager._manager import Manager, Runnable
from mcruntime.manager._options import ManagerOptions

__all__ = ["EngagementState", "Manager", "ManagerOptions", "Runnable"]

publish(__name__, globals(), __all__)
