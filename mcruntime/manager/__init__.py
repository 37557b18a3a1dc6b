"""The manager: local cluster, provider, controllers and runnables, and their engagement."""

from mcruntime._exports import publish
from mcruntime.manager._manager import Manager, Runnable
from mcruntime.manager._options import ManagerOptions

__all__ = ["Manager", "ManagerOptions", "Runnable"]

publish(__name__, globals(), __all__)
